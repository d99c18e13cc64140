/*
 * test-powerless.c: a reader has no power over a writer, and a writer
 * waits for nobody without a bound (docs/FORMAT.md, "Readers have no
 * power over writers").
 *
 * The setting is the README's monitoring setup: the service's user
 * writes with TALLY_GROUP into its 0750 directory, and another user in
 * that group reads.  That user, as an attacker, holds read locks on every
 * byte it may lock of every file of the directory, and of every file
 * created there while it runs (inotify), as early as it can open them.
 * The service's new processes still start, attach the shared zone,
 * create zones of their own, register and count exactly; a killed
 * writer's segments still read as dead and are removed by the owner's
 * clean-up.  Then the waits: a FIFO named like a shared zone, and a
 * header mutex held for ever by a live process, make the call fail after
 * the bound with a message, instead of holding the process up.
 *
 * Every step of the service runs in a child of its own, under an alarm:
 * a writer held up by the attacker is killed by it, and the test fails
 * saying so, instead of hanging.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "layout.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* The service's user, the attacker's, and their group. */
#define W_UID 47011
#define A_UID 47012
#define GRP   47013
/* Fresh processes of the service started while the attacker runs. */
#define FRESH 12
/* A step that takes longer than this was held up (never a timing
 * assertion: only a bound against hanging). */
#define STEP_ALARM 30

struct setup {
	char root[64];           /* a 0755 directory of the test */
	char dir[128];           /* the service's directory, 0750 */
	_Atomic int stop;        /* tells the attacker to stop */
	_Atomic int ready;       /* the attacker watches the directory */
	_Atomic int locked;      /* files it holds read locks on */
	_Atomic int refused;     /* files it could not open */
	_Atomic int files_seen;
	char shared_path[PATH_MAX];
	char killed_path[PATH_MAX];
};

static void become(uid_t uid)
{
	gid_t g = GRP;

	if (setgroups(1, &g) < 0 || setresgid(GRP, GRP, GRP) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		harness_fail(__FILE__, __LINE__, "cannot become uid %d: %s",
			     (int)uid, strerror(errno));
}

/* ---- the attacker ---------------------------------------------------- */

/*
 * Read locks on every byte of the file open as @fd that no write lock
 * holds: the whole file in one call where it can, else around each
 * write lock that refuses it.  1 when it holds at least one.
 */
static int lock_every_byte(int fd)
{
	off_t start = 0;
	int held = 0;

	for (int i = 0; i < 64; i++) {
		struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
				    .l_start = start, .l_len = 0 };
		struct flock in;

		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return 1;
		in = fl;
		if (fcntl(fd, F_OFD_GETLK, &in) < 0 || in.l_type == F_UNLCK)
			continue; /* it went meanwhile: again */
		if (in.l_start > start) {
			struct flock part = fl;

			part.l_len = in.l_start - start;
			held |= fcntl(fd, F_OFD_SETLK, &part) == 0;
		}
		if (in.l_len == 0)
			break;
		start = in.l_start + in.l_len;
	}
	return held;
}

#define MAX_HELD 4096

static void attack_name(struct setup *s, int dfd, const char *name,
			int *fds, int *n)
{
	int fd;

	if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
		return;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			       O_CLOEXEC);
	atomic_fetch_add(&s->files_seen, 1);
	if (fd < 0) {
		atomic_fetch_add(&s->refused, 1);
		return;
	}
	if (*n < MAX_HELD && lock_every_byte(fd)) {
		fds[(*n)++] = fd;
		atomic_fetch_add(&s->locked, 1);
		return;
	}
	close(fd);
}

static void attacker(void *arg)
{
	struct setup *s = arg;
	static int fds[MAX_HELD];
	char buf[8192] __attribute__((aligned(8)));
	int n = 0, in, dfd;

	become(A_UID);
	alarm(STEP_ALARM * 8); /* gone, whatever becomes of the test */
	dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	CHECK(dfd >= 0 && in >= 0);
	CHECK(inotify_add_watch(in, s->dir, IN_CREATE | IN_MOVED_TO |
					    IN_ATTRIB) >= 0);
	atomic_store(&s->ready, 1);
	while (!atomic_load(&s->stop)) {
		struct pollfd p = { in, POLLIN, 0 };
		ssize_t len;

		poll(&p, 1, 50);
		while ((len = read(in, buf, sizeof(buf))) > 0)
			for (char *q = buf; q < buf + len;) {
				struct inotify_event *e = (void *)q;

				if (e->len)
					attack_name(s, dfd, e->name, fds, &n);
				q += sizeof(*e) + e->len;
			}
		/* And whatever it missed, as a poller would. */
		{
			DIR *d = fdopendir(dup(dfd));
			struct dirent *e;

			while (d && (e = readdir(d)))
				attack_name(s, dfd, e->d_name, fds, &n);
			if (d)
				closedir(d);
		}
	}
}

/* ---- the service ----------------------------------------------------- */

static void service_env(struct setup *s, const char *zone)
{
	char g[16];

	snprintf(g, sizeof(g), "%d", GRP);
	fresh_setenv("TALLY_DIR", s->dir);
	fresh_setenv("TALLY_GROUP", g);
	fresh_setenv("TALLY_RETAIN", "0");
	if (zone)
		fresh_setenv("TALLY_ZONE", zone);
}

static void count_in(struct tally_zone *z, const char *name,
		     const char *who, int64_t n)
{
	struct tally_label l = { "who", who };
	struct tally_metric_desc d = desc(TALLY_COUNTER, name);
	tally_metric m;

	d.help = "Requests.";
	d.labels = &l;
	d.nlabels = 1;
	if (register_any(z, &d, &m) != 0)
		harness_fail(__FILE__, __LINE__, "registration of %s{who=%s}: "
			     "%s", name, who, tally_errmsg());
	tally_counter_add(counter_of(&m), n);
}

/* The first process of the service: creates the shared zone, counts 1,
 * and runs until killed. */
static void first_process(void *arg)
{
	struct setup *s = arg;
	struct tally_zone *z;

	become(W_UID);
	service_env(s, "svc");
	alarm(STEP_ALARM * 4);
	z = tally_zone_default();
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	count_in(z, "svc_requests_total", "first", 1);
	snprintf(s->shared_path, sizeof(s->shared_path), "%s",
		 tally_zone_path(z));
	for (;;)
		pause();
}

struct fresh {
	struct setup *s;
	int i;
};

/*
 * A fresh process of the service, started while the attacker holds its
 * locks: it attaches the shared zone, and makes a zone of its own; it
 * registers a series of a name of its own in each (a chunk, and an owner
 * token, of its own), counts, and exits.
 */
static void fresh_process(void *arg)
{
	struct fresh *f = arg;
	struct tally_zone *z, *own;
	char who[16];

	become(W_UID);
	service_env(f->s, "svc");
	alarm(STEP_ALARM);
	snprintf(who, sizeof(who), "p%d", f->i);
	z = tally_zone_default();
	if (!z)
		harness_fail(__FILE__, __LINE__, "attach: %s", tally_errmsg());
	count_in(z, "svc_requests_total", who, 100 + f->i);
	own = tally_zone_create("own", NULL);
	if (!own)
		harness_fail(__FILE__, __LINE__, "own zone: %s",
			     tally_errmsg());
	count_in(own, "own_requests_total", who, 1000 + f->i);
	if (f->i == FRESH - 1) {
		/* The last one dies where it stands: its zone of its own
		 * is left dead, for the attacker to hold. */
		snprintf(f->s->killed_path, sizeof(f->s->killed_path), "%s",
			 tally_zone_path(own));
		raise(SIGKILL);
	}
}

/* ---- the checks, as root reading the service's files ------------------ */

struct sum {
	const char *name;
	int64_t value;
	int found;
};

static int sum_fn(const struct tally_series_view *v, void *arg)
{
	struct sum *s = arg;

	if (!strcmp(v->name, s->name)) {
		s->value += v->value;
		s->found++;
	}
	return 0;
}

static struct sum sum_of(const char *path, const char *name)
{
	struct tally_open_opts o = { .allow_uid = W_UID };
	struct sum s = { name, 0, 0 };
	struct tally_seg *seg = tally_seg_open(path, &o);

	if (!seg)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK(tally_seg_foreach(seg, 0, sum_fn, &s) >= 0);
	tally_seg_close(seg);
	return s;
}

static struct tally_seg_info state_of(const char *path)
{
	struct tally_open_opts o = { .allow_uid = W_UID };
	struct tally_seg_info info;
	struct tally_seg *seg = tally_seg_open(path, &o);

	if (!seg)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	CHECK_EQ(tally_seg_info(seg, &info), 0);
	tally_seg_close(seg);
	return info;
}

struct checks {
	struct setup *s;
	pid_t first;
};

/* While the attacker holds its locks: exact counts, and liveness. */
static void check_counts(void *arg)
{
	struct checks *c = arg;
	struct setup *s = c->s;
	struct sum t = sum_of(s->shared_path, "svc_requests_total");
	int64_t want = 1;

	for (int i = 0; i < FRESH; i++)
		want += 100 + i;
	CHECK_EQ(t.found, FRESH + 1);
	CHECK_EQ(t.value, want);
	t = sum_of(s->killed_path, "own_requests_total");
	CHECK_EQ(t.found, 1);
	CHECK_EQ(t.value, 1000 + FRESH - 1);
	/* The attacker's read locks do not make a dead writer alive. */
	CHECK_EQ(state_of(s->killed_path).alive, 0);
	CHECK_EQ(state_of(s->killed_path).in_use, 0);
	CHECK_EQ(state_of(s->shared_path).alive, 1);
}

static void check_dead_shared(void *arg)
{
	struct setup *s = arg;

	CHECK_EQ(state_of(s->shared_path).alive, 0);
	CHECK_EQ(state_of(s->shared_path).in_use, 0);
}

/* The owner's clean-up removes the dead segments the attacker holds. */
static void owner_cleanup(void *arg)
{
	struct setup *s = arg;

	become(W_UID);
	alarm(STEP_ALARM);
	if (tally_dir_cleanup(s->dir) < 0)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
}

static int entries(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), k = strlen(suffix);

		n += l >= k && !strcmp(e->d_name + l - k, suffix);
	}
	closedir(d);
	return n;
}

static struct setup *setup_new(void)
{
	struct setup *s = shared_mem(sizeof(*s));

	if (geteuid() != 0)
		harness_skip("needs root to play the service's user and an "
			     "attacker in its group");
	snprintf(s->root, sizeof(s->root), "/tmp/tally-powerless.XXXXXX");
	CHECK(mkdtemp(s->root) != NULL);
	CHECK_EQ(chmod(s->root, 0755), 0);
	snprintf(s->dir, sizeof(s->dir), "%s/svc", s->root);
	CHECK_EQ(mkdir(s->dir, 0750), 0);
	CHECK_EQ(chown(s->dir, W_UID, GRP), 0);
	return s;
}

static void setup_remove(struct setup *s)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->root);
	CHECK_EQ(system(cmd), 0);
}

static pid_t start_child(void (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	return pid;
}

/* A child's wait status, failing the test with what held it up. */
static void wait_step(pid_t pid, const char *what)
{
	int st;

	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
		harness_fail(__FILE__, __LINE__, "%s was held up for %d s", what,
			     STEP_ALARM);
	CHECK_CHILD_OK(st);
}

TEST_TIMEOUT(a_group_reader_cannot_stop_the_service, 300)
{
	struct setup *s = setup_new();
	struct checks c = { s, 0 };
	pid_t att, first;
	int st;

	att = start_child(attacker, s);
	while (!atomic_load(&s->ready))
		usleep(1000);
	first = start_child(first_process, s);
	while (!s->shared_path[0])
		usleep(1000);
	/* The attacker has found the shared zone and holds it. */
	while (atomic_load(&s->locked) < 1)
		usleep(1000);
	for (int i = 0; i < FRESH; i++) {
		struct fresh f = { s, i };
		pid_t p = start_child(fresh_process, &f);
		char what[64];

		snprintf(what, sizeof(what), "fresh process %d", i);
		if (i == FRESH - 1) {
			CHECK_EQ(waitpid(p, &st, 0), p);
			if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
				harness_fail(__FILE__, __LINE__, "%s was held "
					     "up", what);
			CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		} else {
			wait_step(p, what);
		}
	}
	/* Let the attacker catch up with the last files made. */
	usleep(200000);
	printf("    the attacker holds read locks on %d files of the %d it "
	       "saw (%d it could not open)\n", atomic_load(&s->locked),
	       atomic_load(&s->files_seen), atomic_load(&s->refused));
	CHECK(atomic_load(&s->locked) >= 2);
	wait_step(start_child(check_counts, &c), "the check");
	kill(first, SIGKILL);
	CHECK_EQ(waitpid(first, &st, 0), first);
	wait_step(start_child(check_dead_shared, s), "the check");
	wait_step(start_child(owner_cleanup, s), "the owner's clean-up");
	CHECK_EQ(access(s->killed_path, F_OK), -1);
	CHECK_EQ(access(s->shared_path, F_OK), -1);
	CHECK_EQ(entries(s->dir, ".tally"), 0);
	atomic_store(&s->stop, 1);
	wait_step(att, "the attacker");
	setup_remove(s);
}

/* ---- bounded waits ------------------------------------------------------ */

/*
 * A FIFO named like a shared zone: opened without O_NONBLOCK, it would
 * hold the writer up in open() until somebody opens it for writing.  The
 * attach fails at once, saying what the file is, and the process runs on.
 */
static void attach_fifo(void *arg)
{
	const char *dir = arg;

	fresh_setenv("TALLY_DIR", dir);
	fresh_setenv("TALLY_ZONE", "fifo");
	alarm(STEP_ALARM);
	errno = 0;
	CHECK(tally_zone_default() == NULL);
	CHECK_EQ(errno, EPERM);
	CHECK(strstr(tally_errmsg(), "fifo.tally") != NULL);
	CHECK(strstr(tally_errmsg(), "not a regular file") != NULL);
}

TEST(a_fifo_named_like_a_shared_zone_holds_nobody_up)
{
	char dir[PATH_MAX], fifo[PATH_MAX + 16];
	pid_t p;

	own_subdir(dir, sizeof(dir), "fifo");
	snprintf(fifo, sizeof(fifo), "%s/fifo.tally", dir);
	CHECK_EQ(mkfifo(fifo, 0600), 0);
	p = start_child(attach_fifo, dir);
	wait_step(p, "attaching a FIFO");
	CHECK_EQ(unlink(fifo), 0);
	CHECK_EQ(rmdir(dir), 0);
}

struct holder {
	char dir[PATH_MAX];
	_Atomic int ready;
	int forge;               /* 1: write a live thread's id into the
				    pool lock instead of taking it */
};

/* A process of the zone that takes its metrics lock and keeps it, or
 * forges the pool lock's holder: a live thread id, never released. */
static void hold_a_mutex(void *arg)
{
	struct holder *h = arg;
	struct tally_zone *z;

	fresh_setenv("TALLY_DIR", h->dir);
	fresh_setenv("TALLY_ZONE", "held");
	alarm(STEP_ALARM * 2);
	z = tally_zone_default();
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	if (h->forge)
		__atomic_store_n(&z->hdr->pool_lock.__data.__lock,
				 (int)getpid(), __ATOMIC_RELEASE);
	else
		CHECK_EQ(pthread_mutex_lock(&z->hdr->metrics_lock), 0);
	atomic_store(&h->ready, 1);
	for (;;)
		pause();
}

/* Another process of the zone: its registration gives up after the
 * bound, saying which lock of which zone and who holds it; its handle
 * discards, and it goes on counting in a zone of its own. */
static void wait_for_held(void *arg)
{
	struct holder *h = arg;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "held_total");
	struct tally_zone *z, *own;
	tally_metric m, o;
	int64_t v = -1;

	fresh_setenv("TALLY_DIR", h->dir);
	fresh_setenv("TALLY_ZONE", "held");
	alarm(STEP_ALARM);
	z = tally_zone_default();
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	d.help = "Held.";
	CHECK_EQ(register_any(z, &d, &m), -ETIMEDOUT);
	CHECK(strstr(tally_errmsg(), h->forge ? "pool lock" :
					       "metrics lock") != NULL);
	CHECK(strstr(tally_errmsg(), "held.tally") != NULL);
	CHECK(strstr(tally_errmsg(), "more than 5 s") != NULL);
	tally_counter_add(counter_of(&m), 5); /* discarded */
	own = tally_zone_create("own", NULL);
	CHECK(own != NULL);
	reg(own, d, NULL, 0, &o);
	tally_counter_add(counter_of(&o), 3);
	CHECK_EQ(tally_metric_fetch(&o, &v), 0);
	CHECK_EQ(v, 3);
}

static void bounded_wait_case(int forge)
{
	struct holder *h = shared_mem(sizeof(*h));
	pid_t holder;
	int st;

	h->forge = forge;
	own_subdir(h->dir, sizeof(h->dir), forge ? "forged" : "held");
	holder = start_child(hold_a_mutex, h);
	while (!atomic_load(&h->ready))
		usleep(1000);
	wait_step(start_child(wait_for_held, h), "a registration");
	kill(holder, SIGKILL);
	CHECK_EQ(waitpid(holder, &st, 0), holder);
}

TEST_TIMEOUT(a_metrics_lock_held_for_ever_bounds_the_registration, 60)
{
	bounded_wait_case(0);
}

TEST_TIMEOUT(a_forged_pool_lock_holder_bounds_the_allocation, 60)
{
	bounded_wait_case(1);
}
