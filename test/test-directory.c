/*
 * test-directory.c: the retention of dead writers' segments, and walks
 * that stay in the directory they checked.
 *
 * It proves that:
 *   - segments of writers killed with SIGKILL stay for post-mortem
 *     reading under the default retention, even when a new writer comes
 *     to the directory; the new writer stamps them (mtime, owner write
 *     permission taken away) and removes those found dead longer ago than
 *     $TALLY_RETAIN; with TALLY_RETAIN=0 it removes them all at once;
 *   - the memory readers report for dead segments is the sum of their
 *     st_blocks * 512;
 *   - a bad TALLY_RETAIN makes zone creation fail, naming the variable;
 *   - tally_dir_expire() keeps, stamps and removes as documented;
 *   - clean-up and readers stay in the directory they checked while it is
 *     swapped for a symbolic link to another one, in a loop;
 *   - every reader of a directory (walks, walks by pid, clean-up, expiry)
 *     refuses one that its group or others can write to, naming which,
 *     and reads it again once its mode is back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "reader/segment.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

#define VICTIMS 3
#define SERIES  2000             /* per victim: some memory to reclaim */

struct shared {
	char dir[PATH_MAX];
	char path[VICTIMS][PATH_MAX];
	const char *retain;      /* TALLY_RETAIN of the next writer */
	char msg[256];
	int err;
};

static struct shared *shared_new(const char *name)
{
	struct shared *sh = shared_mem(sizeof(*sh));

	snprintf(sh->dir, sizeof(sh->dir), "%s/%s.%d", harness_dir(), name,
		 (int)getpid());
	CHECK_EQ(mkdir(sh->dir, 0700), 0);
	return sh;
}

/* A writer of SERIES counters (counter i holds i + 1), killed with
 * SIGKILL by the test once it said it is ready. */
static void victim(struct shared *sh, int i, int ready)
{
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	struct tally_zone *z;
	char zone[16], v[16];

	fresh_setenv("TALLY_DIR", sh->dir);
	snprintf(zone, sizeof(zone), "victim%d", i);
	z = tally_zone_create(zone, NULL);
	CHECK(z != NULL);
	for (int k = 0; k < SERIES; k++) {
		struct tally_label l = { "job", v };
		tally_metric m;

		snprintf(v, sizeof(v), "%d", k);
		reg(z, d, &l, 1, &m);
		tally_counter_add(counter_of(&m), k + 1);
	}
	snprintf(sh->path[i], sizeof(sh->path[i]), "%s", tally_zone_path(z));
	(void)!write(ready, "R", 1);
	for (;;)
		pause();
}

static void kill_victims(struct shared *sh)
{
	for (int i = 0; i < VICTIMS; i++) {
		int p[2], st;
		char c;
		pid_t pid;

		CHECK_EQ(pipe(p), 0);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			victim(sh, i, p[1]);
		}
		close(p[1]);
		CHECK_EQ(read(p[0], &c, 1), 1);
		close(p[0]);
		CHECK_EQ(kill(pid, SIGKILL), 0);
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	}
}

/* A new writer comes to the directory (with $TALLY_RETAIN sh->retain)
 * and goes, removing its own file. */
static void newcomer(void *arg)
{
	struct shared *sh = arg;
	struct tally_zone *z;

	fresh_setenv("TALLY_DIR", sh->dir);
	fresh_setenv("TALLY_RETAIN", sh->retain);
	z = tally_zone_create("newcomer", NULL);
	if (!z) {
		sh->err = errno;
		snprintf(sh->msg, sizeof(sh->msg), "%s", tally_errmsg());
		return;
	}
	sh->err = 0;
	/* Its own file is alive, never expired. */
	CHECK_EQ(access(tally_zone_path(z), F_OK), 0);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

static void newcomer_with(struct shared *sh, const char *retain)
{
	sh->retain = retain;
	CHECK_CHILD_OK(harness_child(newcomer, sh));
	if (sh->err)
		harness_fail(__FILE__, __LINE__, "TALLY_RETAIN=%s: %s",
			     retain ? retain : "(unset)", sh->msg);
}

/* The post-mortem read: the sum of counter values of a victim. */
static int sum_fn(const struct tally_series_view *v, void *arg)
{
	*(int64_t *)arg += v->value;
	return 0;
}

static int64_t sum_of(const char *path)
{
	int64_t sum = 0;

	CHECK_EQ(foreach_path(path, sum_fn, &sum), SERIES);
	return sum;
}

/* What readers report: the memory of the dead segments of @dir. */
struct dead_acc {
	uint64_t bytes;
	int n;
};

static int dead_fn(const char *path, struct tally_seg *s, const char *error,
		   void *arg)
{
	struct dead_acc *a = arg;
	struct tally_seg_info info;

	(void)path;
	CHECK(s != NULL && error == NULL);
	CHECK_EQ(tally_seg_info(s, &info), 0);
	if (!info.alive && !info.in_use) {
		a->bytes += info.resident_bytes;
		a->n++;
	}
	return 0;
}

static int exists(const char *path)
{
	return access(path, F_OK) == 0;
}

TEST(dead_segments_are_kept_then_expired)
{
	struct shared *sh = shared_new("retain");
	const int64_t sum = (int64_t)SERIES * (SERIES + 1) / 2;
	struct timespec old[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
	struct dead_acc a = { 0, 0 };
	uint64_t blocks = 0;
	struct stat st;

	kill_victims(sh);
	for (int i = 0; i < VICTIMS; i++) {
		CHECK_EQ(stat(sh->path[i], &st), 0);
		blocks += (uint64_t)st.st_blocks * 512;
	}
	/* Readers report the memory the dead hold, to the byte. */
	CHECK_EQ(tally_dir_foreach(sh->dir, NULL, dead_fn, &a), VICTIMS);
	CHECK_EQ(a.n, VICTIMS);
	CHECK_EQ(a.bytes, blocks);
	CHECK(blocks > (uint64_t)VICTIMS * SERIES * 8);
	printf("  %d killed writers of %d series hold %llu bytes\n", VICTIMS,
	       SERIES, (unsigned long long)blocks);

	/* The default retention: a new writer keeps them, stamped, and
	 * they are still readable. */
	newcomer_with(sh, NULL);
	for (int i = 0; i < VICTIMS; i++) {
		CHECK(exists(sh->path[i]));
		CHECK_EQ(stat(sh->path[i], &st), 0);
		CHECK_EQ(st.st_mode & 0777, 0400);
		CHECK(time(NULL) - st.st_mtime <= 5);
		CHECK_EQ(sum_of(sh->path[i]), sum);
	}
	/* Found dead two hours ago: past the default hour, removed; the
	 * others stay. */
	old[1].tv_sec = time(NULL) - 7200;
	CHECK_EQ(utimensat(AT_FDCWD, sh->path[0], old, 0), 0);
	newcomer_with(sh, NULL);
	CHECK(!exists(sh->path[0]));
	CHECK(exists(sh->path[1]));
	CHECK(exists(sh->path[2]));
	/* A retention of 10 minutes, found dead 20 minutes ago. */
	old[1].tv_sec = time(NULL) - 1200;
	CHECK_EQ(utimensat(AT_FDCWD, sh->path[1], old, 0), 0);
	newcomer_with(sh, "10m");
	CHECK(!exists(sh->path[1]));
	CHECK(exists(sh->path[2]));
	/* TALLY_RETAIN=0: at once. */
	newcomer_with(sh, "0");
	CHECK(!exists(sh->path[2]));
	memset(&a, 0, sizeof(a));
	CHECK_EQ(tally_dir_foreach(sh->dir, NULL, dead_fn, &a), 0);
}

TEST(killed_writers_removed_at_once_with_retain_0)
{
	struct shared *sh = shared_new("retain0");

	kill_victims(sh);
	newcomer_with(sh, "0");
	for (int i = 0; i < VICTIMS; i++)
		CHECK(!exists(sh->path[i]));
}

TEST(bad_retain_is_einval)
{
	static const char *const bad[] = { "x", "-1", "1w", "10 m", "1h2",
					   "3651d", "99999999999999999999" };
	struct shared *sh = shared_new("badretain");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sh->retain = bad[i];
		sh->err = 0;
		CHECK_CHILD_OK(harness_child(newcomer, sh));
		CHECK_EQ(sh->err, EINVAL);
		CHECK(strstr(sh->msg, "TALLY_RETAIN=") != NULL);
	}
	/* Good ones. */
	newcomer_with(sh, "forever");
	newcomer_with(sh, "off");
	newcomer_with(sh, "3650d");
	newcomer_with(sh, "");
	newcomer_with(sh, "45s");
}

/* tally_dir_expire() itself: forever only stamps; a retention removes
 * what was found dead long enough ago; the callback says why. */
static void expired_fn(const char *path, const char *why, void *arg)
{
	(void)path;
	CHECK(strstr(why, "TALLY_RETAIN") != NULL);
	++*(int *)arg;
}

TEST(dir_expire)
{
	struct shared *sh = shared_new("expire");
	struct timespec old[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
	struct stat st;
	int n = 0;

	kill_victims(sh);
	CHECK_EQ(tally_dir_expire(sh->dir, TALLY_RETAIN_FOREVER, NULL, NULL),
		 0);
	for (int i = 0; i < VICTIMS; i++) {
		CHECK_EQ(stat(sh->path[i], &st), 0);
		CHECK_EQ(st.st_mode & 0777, 0400);
	}
	CHECK_EQ(tally_dir_expire(sh->dir, 60, expired_fn, &n), 0);
	old[1].tv_sec = time(NULL) - 61;
	CHECK_EQ(utimensat(AT_FDCWD, sh->path[1], old, 0), 0);
	CHECK_EQ(tally_dir_expire(sh->dir, TALLY_RETAIN_FOREVER, NULL, NULL),
		 0);
	CHECK_EQ(tally_dir_expire(sh->dir, 60, expired_fn, &n), 1);
	CHECK_EQ(n, 1);
	CHECK(!exists(sh->path[1]));
	CHECK_EQ(tally_dir_expire(sh->dir, -3, NULL, NULL), -EINVAL);
	CHECK(strstr(tally_errmsg(), "retention") != NULL);
	CHECK_EQ(tally_dir_expire(sh->dir, 0, NULL, NULL), 2);
}

/* The swapper: turns @dir into a symbolic link to @target and back, as
 * fast as it can, until told to stop. */
struct swap {
	char dir[PATH_MAX], real[PATH_MAX + 8], target[PATH_MAX];
	_Atomic int stop;
	_Atomic long swaps;
};

static void swapper(void *arg)
{
	struct swap *w = arg;

	while (!atomic_load(&w->stop)) {
		if (rename(w->dir, w->real) < 0)
			continue;
		if (symlink(w->target, w->dir) == 0) {
			sched_yield();
			unlink(w->dir);
		}
		CHECK_EQ(rename(w->real, w->dir), 0);
		atomic_fetch_add(&w->swaps, 1);
		sched_yield();
	}
}

static int opened_fn(const char *path, struct tally_seg *s,
		     const char *error, void *arg)
{
	(void)path;
	(void)error;
	*(long *)arg += s != NULL;
	return 0;
}

/*
 * Whoever owns a directory above the one being cleaned (or the directory
 * itself) can swap it for a symbolic link to another directory at any
 * moment.  Clean-up, with a retention and without, checks the directory
 * once and then works on its descriptor: run against such a swap in a
 * loop for a few seconds, it never removes, stamps or changes a file of
 * the other directory, although the swapped one holds the same names
 * (empty files, which clean-up leaves alone).  A reader's walk likewise
 * never opens a segment of the other directory.
 */
TEST_TIMEOUT(cleanup_stays_in_the_checked_directory, 60)
{
	struct shared *sh = shared_new("swap-victim");
	struct swap *w = shared_mem(sizeof(*w));
	struct stat before[VICTIMS], st;
	long rounds = 0, opened = 0;
	double t0;
	pid_t pid;
	int status;

	kill_victims(sh);
	snprintf(w->dir, sizeof(w->dir), "%s/swap.%d", harness_dir(),
		 (int)getpid());
	snprintf(w->real, sizeof(w->real), "%s.real", w->dir);
	snprintf(w->target, sizeof(w->target), "%s", sh->dir);
	CHECK_EQ(mkdir(w->dir, 0700), 0);
	for (int i = 0; i < VICTIMS; i++) {
		char name[PATH_MAX + 300];
		int fd;

		/* The last victim is not stamped yet (0600), the others
		 * were stamped (0400) by the victims after them. */
		CHECK_EQ(stat(sh->path[i], &before[i]), 0);
		snprintf(name, sizeof(name), "%s/%s", w->dir,
			 strrchr(sh->path[i], '/') + 1);
		fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0600);
		CHECK(fd >= 0);
		close(fd);
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		swapper(w);
		_exit(0);
	}
	t0 = harness_now();
	while (harness_now() - t0 < 3) {
		int ok = 1;

		tally_dir_cleanup(w->dir);
		tally_dir_expire(w->dir, 3600, NULL, NULL);
		tally_dir_foreach(w->dir, NULL, opened_fn, &opened);
		rounds++;
		for (int i = 0; i < VICTIMS && ok; i++)
			ok = stat(sh->path[i], &st) == 0 &&
			     st.st_mode == before[i].st_mode;
		if (!ok)
			break;
	}
	atomic_store(&w->stop, 1);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	printf("    %ld clean-ups against %ld swaps\n", rounds,
	       atomic_load(&w->swaps));
	CHECK(atomic_load(&w->swaps) > 0);
	CHECK_EQ(opened, 0);
	for (int i = 0; i < VICTIMS; i++) {
		if (stat(sh->path[i], &st) < 0)
			harness_fail(__FILE__, __LINE__, "%s was removed "
				     "through the swapped directory",
				     sh->path[i]);
		CHECK_EQ(st.st_ino, before[i].st_ino);
		CHECK_EQ(st.st_mode, before[i].st_mode);
		CHECK_EQ(st.st_mtim.tv_sec, before[i].st_mtim.tv_sec);
		CHECK_EQ(st.st_mtim.tv_nsec, before[i].st_mtim.tv_nsec);
	}
	for (int i = 0; i < VICTIMS; i++) {
		char name[PATH_MAX + 300];

		snprintf(name, sizeof(name), "%s/%s", w->dir,
			 strrchr(sh->path[i], '/') + 1);
		CHECK_EQ(unlink(name), 0);
		CHECK_EQ(unlink(sh->path[i]), 0);
	}
	CHECK_EQ(rmdir(w->dir), 0);
	remove_lock_files(sh->dir);
	CHECK_EQ(rmdir(sh->dir), 0);
}

/* Counts what a walk opened; a file that failed fails the test. */
static int opened_ok_fn(const char *path, struct tally_seg *s,
			const char *error, void *arg)
{
	(void)path;
	if (!s)
		harness_fail(__FILE__, __LINE__, "%s", error);
	++*(int *)arg;
	return 0;
}

/* Each reader of @dir fails with EPERM and a message naming @who; a walk
 * calls its function for no file. */
static void expect_dir_refused(const char *dir, const char *who)
{
	struct tally_open_opts opts = { .allow_uid = -1 };
	int n = 0;

	CHECK_EQ(tally_dir_foreach(dir, NULL, opened_ok_fn, &n), -EPERM);
	if (!strstr(tally_errmsg(), who) || !strstr(tally_errmsg(), dir))
		harness_fail(__FILE__, __LINE__, "message \"%s\" does not "
			     "name %s", tally_errmsg(), who);
	CHECK_EQ(tally_dir_foreach(dir, &opts, opened_ok_fn, &n), -EPERM);
	CHECK_EQ(tally_seg_foreach_pid(dir, (int)getpid(), NULL,
				       opened_ok_fn, &n), -EPERM);
	CHECK_EQ(tally_dir_cleanup(dir), -EPERM);
	CHECK_EQ(tally_dir_expire(dir, 0, NULL, NULL), -EPERM);
	CHECK_EQ(n, 0);
}

/*
 * The reader's own rule on directories, without a server: a directory its
 * group or others can write to is refused by every call that reads one,
 * with or without options, whatever writers did before the mode changed.
 */
TEST(reader_refuses_group_or_other_writable_dir)
{
	static const mode_t group_w[] = { 0770, 0730, 0760, 02770 };
	static const mode_t other_w[] = { 0702, 0703, 0777, 01777 };
	struct tally_metric_desc d = desc(TALLY_COUNTER, "jobs_total");
	struct tally_zone *z;
	char dir[PATH_MAX];
	tally_metric m;
	int n = 0;

	snprintf(dir, sizeof(dir), "%s/modes.%d", harness_dir(), (int)getpid());
	CHECK_EQ(mkdir(dir, 0700), 0);
	fresh_setenv("TALLY_DIR", dir);
	z = tally_zone_create("modes", NULL);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
	reg(z, d, NULL, 0, &m);
	tally_counter_add(counter_of(&m), 7);
	CHECK_EQ(tally_dir_foreach(dir, NULL, opened_ok_fn, &n), 1);
	for (unsigned i = 0; i < sizeof(group_w) / sizeof(group_w[0]); i++) {
		CHECK_EQ(chmod(dir, group_w[i]), 0);
		expect_dir_refused(dir, "writable by its group");
	}
	for (unsigned i = 0; i < sizeof(other_w) / sizeof(other_w[0]); i++) {
		CHECK_EQ(chmod(dir, other_w[i]), 0);
		expect_dir_refused(dir, "writable by others");
	}
	/* Readable, even listable, by the group and others is fine. */
	CHECK_EQ(chmod(dir, 0755), 0);
	n = 0;
	CHECK_EQ(tally_dir_foreach(dir, NULL, opened_ok_fn, &n), 1);
	CHECK_EQ(n, 1);
	CHECK_EQ(tally_seg_foreach_pid(dir, (int)getpid(), NULL,
				       opened_ok_fn, &n), 1);
	CHECK_EQ(tally_dir_cleanup(dir), 0);
	CHECK_EQ(chmod(dir, 0700), 0);
	tally_zone_destroy(z);
	CHECK_EQ(rmdir(dir), 0);
}

/*
 * A writer can hard-link its own segment under many names in its
 * directory.  A pass reads a file (device and inode) once, whatever its
 * names: with 150 more names, a walk meets one segment, and reads the
 * bytes a walk of one name reads.
 */
struct links_acc {
	int segments;
	int64_t sum;
	uint64_t bytes;
};

static int links_fn(const char *path, struct tally_seg *s, const char *error,
		    void *arg)
{
	struct links_acc *a = arg;

	(void)path;
	CHECK(s != NULL && error == NULL);
	a->segments++;
	CHECK_EQ(tally_seg_foreach(s, 0, sum_fn, &a->sum), SERIES);
	a->bytes += s->bytes_read;
	return 0;
}

TEST(a_file_is_read_once_whatever_its_names)
{
	struct shared *sh = shared_new("links");
	struct links_acc one = { 0, 0, 0 }, many = { 0, 0, 0 };
	int64_t want = 0;

	kill_victims(sh);
	for (int i = 1; i < VICTIMS; i++)
		CHECK_EQ(unlink(sh->path[i]), 0);
	for (int k = 0; k < SERIES; k++)
		want += k + 1;
	CHECK_EQ(tally_dir_foreach(sh->dir, NULL, links_fn, &one), 1);
	CHECK_EQ(one.segments, 1);
	CHECK_EQ(one.sum, want);
	for (int i = 0; i < 150; i++) {
		char name[PATH_MAX + 64];

		snprintf(name, sizeof(name), "%s/link%d.1.%016x.tally",
			 sh->dir, i, i);
		CHECK_EQ(link(sh->path[0], name), 0);
	}
	CHECK_EQ(tally_dir_foreach(sh->dir, NULL, links_fn, &many), 1);
	CHECK_EQ(many.segments, 1);
	CHECK_EQ(many.sum, want);
	CHECK_EQ(many.bytes, one.bytes);
}

/*
 * A clean-up whose directory is moved away while it runs (a directory
 * above renamed, and another put at the old path) goes on in the
 * directory it checked, and names what it removed where it really was,
 * not at the configured path, which now leads elsewhere.
 */
struct moved {
	char top[PATH_MAX], dir[PATH_MAX + 8], moved[PATH_MAX + 8];
	int n;
	char reported[VICTIMS][PATH_MAX + 300];
};

static void moved_fn(const char *path, const char *why, void *arg)
{
	struct moved *m = arg;

	(void)why;
	snprintf(m->reported[m->n], sizeof(m->reported[0]), "%s", path);
	/* After the first removal: the parent moves, a decoy takes its
	 * place. */
	if (m->n++ == 0) {
		CHECK_EQ(rename(m->top, m->moved), 0);
		CHECK_EQ(mkdir(m->top, 0700), 0);
		CHECK_EQ(mkdir(m->dir, 0700), 0);
	}
}

TEST(cleanup_names_the_directory_it_really_cleaned)
{
	struct shared *sh = shared_new("moved");
	struct moved *m = calloc(1, sizeof(*m));
	char want[PATH_MAX + 300];

	CHECK(m != NULL);
	/* sh->dir is the parent; the victims' directory is below it. */
	snprintf(m->top, sizeof(m->top), "%s", sh->dir);
	snprintf(m->dir, sizeof(m->dir), "%s/segs", sh->dir);
	snprintf(m->moved, sizeof(m->moved), "%s.old", sh->dir);
	CHECK_EQ(mkdir(m->dir, 0700), 0);
	snprintf(sh->dir, sizeof(sh->dir), "%.4000s", m->dir);
	kill_victims(sh);
	CHECK(tally_dir_cleanup_report(m->dir, moved_fn, m) == VICTIMS);
	CHECK_EQ(m->n, VICTIMS);
	CHECK(strncmp(m->reported[0], m->dir, strlen(m->dir)) == 0);
	for (int i = 1; i < VICTIMS; i++) {
		snprintf(want, sizeof(want), "%s/segs/", m->moved);
		if (strncmp(m->reported[i], want, strlen(want)) != 0)
			harness_fail(__FILE__, __LINE__, "reported %s, not in "
				     "%s, the directory it cleaned",
				     m->reported[i], want);
	}
	free(m);
}
