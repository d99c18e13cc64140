/*
 * test-liveness.c: zone file names and liveness do not depend on pids.
 *
 * It proves that:
 *   - two writers in separate PID namespaces (both pid 1) sharing one
 *     $TALLY_DIR and creating the same zone get a file each; a reader in
 *     the root namespace reads both as alive, with exact values, and once
 *     one of them dies, exactly that one as dead (and clean-up removes
 *     exactly that one);
 *   - a writer never replaces a file that has the name it would have
 *     chosen (as a writer with the same pid in another namespace, or a
 *     dead one whose pid was reused, would have left it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* The value of counter @name in the segment at @path (-1: not found). */
struct find {
	const char *name;
	int64_t value;
};

static int find_fn(const struct tally_series_view *v, void *arg)
{
	struct find *f = arg;

	if (strcmp(v->name, f->name) == 0)
		f->value = v->value;
	return 0;
}

static int64_t value_in_file(const char *path, const char *name)
{
	struct find f = { name, -1 };

	foreach_path(path, find_fn, &f);
	return f.value;
}

/* ---- two containers, one directory --------------------------------- */

/* What each namespaced writer reports, in memory shared with the test. */
struct ns_shared {
	char dir[PATH_MAX];
	char path[2][PATH_MAX];
	int pid[2];              /* getpid() inside the namespace */
	char msg[2][256];
};

/*
 * Pid 1 of a new PID namespace, with its own /proc: creates zone "svc",
 * adds @value, says so on @ready, and dies (_exit, as after a crash: the
 * file stays) when @cmd closes.
 */
static void ns_writer(struct ns_shared *sh, int i, int64_t value, int ready,
		      int cmd)
{
	struct tally_metric_desc d = desc(TALLY_COUNTER, "requests_total");
	struct tally_zone *z;
	tally_counter m;
	char c;

	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0) {
		snprintf(sh->msg[i], sizeof(sh->msg[i]), "mount /proc: %s",
			 strerror(errno));
		(void)!write(ready, "S", 1);
		_exit(0);
	}
	setenv("TALLY_DIR", sh->dir, 1);
	z = tally_zone_create("svc", NULL);
	if (!z || tally_counter_register(z, &d, &m) != 0) {
		snprintf(sh->msg[i], sizeof(sh->msg[i]), "%s", tally_errmsg());
		(void)!write(ready, "F", 1);
		_exit(1);
	}
	tally_counter_add(&m, value);
	snprintf(sh->path[i], sizeof(sh->path[i]), "%s", tally_zone_path(z));
	sh->pid[i] = (int)getpid();
	(void)!write(ready, "R", 1);
	while (read(cmd, &c, 1) > 0)
		;
	_exit(0);
}

/* Starts writer @i in PID and mount namespaces of its own; returns the
 * pid (here) of the process that waits for it, and what it said.  The
 * child closes @other, the command pipe of the writer started before:
 * that one must see its end of file when the test closes it. */
static pid_t start_ns_writer(struct ns_shared *sh, int i, int64_t value,
			     int other, int *cmd_w, char *said)
{
	int ready[2], cmd[2];
	pid_t pid;

	CHECK_EQ(pipe(ready), 0);
	CHECK_EQ(pipe(cmd), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int st;
		pid_t w;

		close(ready[0]);
		close(cmd[1]);
		if (other >= 0)
			close(other);
		/* Private mounts first: the new /proc must not show up in
		 * the test's namespace. */
		if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
			snprintf(sh->msg[i], sizeof(sh->msg[i]), "unshare: %s",
				 strerror(errno));
			(void)!write(ready[1], "S", 1);
			_exit(0);
		}
		w = fork();
		if (w == 0)
			ns_writer(sh, i, value, ready[1], cmd[0]);
		close(cmd[0]);
		close(ready[1]);
		if (w < 0 || waitpid(w, &st, 0) != w)
			_exit(2);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 3);
	}
	close(ready[1]);
	close(cmd[0]);
	if (read(ready[0], said, 1) != 1)
		*said = '?';
	close(ready[0]);
	*cmd_w = cmd[1];
	return pid;
}

/* The segments at @path[0] and @path[1] read alive and in use as
 * @first says (both 0 or both 1) and alive and in use as @second says. */
static void check_liveness(char path[2][PATH_MAX], int first, int second)
{
	struct tally_seg_info a = info_of(path[0]), b = info_of(path[1]);

	CHECK_EQ(a.alive, first);
	CHECK_EQ(a.in_use, first);
	CHECK_EQ(b.alive, second);
	CHECK_EQ(b.in_use, second);
}

TEST(pid_namespaces_share_a_directory)
{
	struct ns_shared *sh = shared_mem(sizeof(*sh));
	pid_t waiter[2];
	int cmd[2], st;
	char said[2];

	if (geteuid() != 0)
		harness_skip("PID namespaces need root here");
	own_subdir(sh->dir, sizeof(sh->dir), "ns");
	for (int i = 0; i < 2; i++) {
		waiter[i] = start_ns_writer(sh, i, 1000 * (i + 1),
					    i ? cmd[0] : -1, &cmd[i], &said[i]);
		if (said[i] == 'S') {
			for (int j = 0; j <= i; j++) {
				close(cmd[j]);
				waitpid(waiter[j], &st, 0);
			}
			harness_skip("no PID namespace on this host (%s)",
				     sh->msg[i]);
		}
		if (said[i] != 'R')
			harness_fail(__FILE__, __LINE__, "writer %d: %s", i,
				     sh->msg[i]);
	}
	/* Both are pid 1, both made zone "svc": two files all the same. */
	CHECK_EQ(sh->pid[0], 1);
	CHECK_EQ(sh->pid[1], 1);
	CHECK(strcmp(sh->path[0], sh->path[1]) != 0);
	CHECK_EQ(access(sh->path[0], F_OK), 0);
	CHECK_EQ(access(sh->path[1], F_OK), 0);
	/* Read from the root namespace, where pid 1 is somebody else. */
	CHECK_EQ(info_of(sh->path[0]).pid, 1);
	CHECK_EQ(info_of(sh->path[1]).pid, 1);
	check_liveness(sh->path, 1, 1);
	CHECK_EQ(value_in_file(sh->path[0], "requests_total"), 1000);
	CHECK_EQ(value_in_file(sh->path[1], "requests_total"), 2000);
	/* Nothing to clean while both live. */
	CHECK_EQ(tally_dir_cleanup(sh->dir), 0);

	/* Writer 0 dies: exactly its segment reads dead. */
	close(cmd[0]);
	CHECK_EQ(waitpid(waiter[0], &st, 0), waiter[0]);
	CHECK_CHILD_OK(st);
	check_liveness(sh->path, 0, 1);
	/* Post-mortem: still readable. */
	CHECK_EQ(value_in_file(sh->path[0], "requests_total"), 1000);
	CHECK_EQ(tally_dir_cleanup(sh->dir), 1);
	CHECK(access(sh->path[0], F_OK) < 0);
	CHECK_EQ(access(sh->path[1], F_OK), 0);
	CHECK_EQ(value_in_file(sh->path[1], "requests_total"), 2000);

	close(cmd[1]);
	CHECK_EQ(waitpid(waiter[1], &st, 0), waiter[1]);
	CHECK_CHILD_OK(st);
	CHECK_EQ(info_of(sh->path[1]).alive, 0);
}

/* ---- a file with the chosen name is never replaced ----------------- */

static void plant(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int holds(const char *path, const char *text)
{
	char buf[128] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

struct planted {
	char dir[PATH_MAX];
	char final[PATH_MAX + 64], tmp[PATH_MAX + 80];
	char path[PATH_MAX];
	char msg[256];
	int err;
};

/*
 * In a fresh process: files under the names a writer of this pid chose
 * until now (<zone>.<pid>.tally and its temporary), left by someone else,
 * then a zone of that name.
 */
static void planted_child(void *arg)
{
	struct planted *p = arg;
	struct tally_zone *z, *again;

	snprintf(p->final, sizeof(p->final), "%s/keep.%d.tally", p->dir,
		 (int)getpid());
	snprintf(p->tmp, sizeof(p->tmp), "%s.tmp", p->final);
	plant(p->final, "someone else's segment\n");
	plant(p->tmp, "someone else's zone being created\n");
	fresh_setenv("TALLY_DIR", p->dir);
	z = tally_zone_create("keep", NULL);
	if (!z) {
		p->err = errno;
		snprintf(p->msg, sizeof(p->msg), "%s", tally_errmsg());
		return;
	}
	snprintf(p->path, sizeof(p->path), "%s", tally_zone_path(z));
	/* A second zone of the same name in this process is still refused:
	 * the name of its file no longer does it. */
	again = tally_zone_create("keep", NULL);
	CHECK(again == NULL);
	CHECK_EQ(errno, EEXIST);
	CHECK(strstr(tally_errmsg(), "\"keep\" already exists") != NULL);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

TEST(existing_file_is_never_replaced)
{
	struct planted *p = shared_mem(sizeof(*p));

	own_subdir(p->dir, sizeof(p->dir), "planted");
	CHECK_CHILD_OK(harness_child(planted_child, p));
	if (p->err)
		harness_fail(__FILE__, __LINE__, "zone creation: %s", p->msg);
	CHECK(strcmp(p->path, p->final) != 0);
	CHECK(holds(p->final, "someone else's segment\n"));
	CHECK(holds(p->tmp, "someone else's zone being created\n"));
	/* The zone had a file of its own, removed when destroyed. */
	CHECK(p->path[0] != 0);
	CHECK(access(p->path, F_OK) < 0);
}
