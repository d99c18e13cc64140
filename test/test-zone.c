/*
 * test-zone.c: creating zones, their files, and where those files go.
 *
 * It proves that:
 *   - a bad $TALLY_DIR (missing, a file, a symbolic link, writable by
 *     others, owned by somebody else) and bad values of TALLY_NSLABS,
 *     TALLY_NODES, TALLY_ZONE_SLOTS and TALLY_DIR make zone creation fail
 *     with the documented errno and a message naming the culprit, each
 *     checked in a fresh process since libtally reads its environment once;
 *   - bad zone names and options fail with EINVAL, a duplicate with EEXIST;
 *   - zone files are 0600 in a 0700 directory, anonymous zones have none;
 *   - a default directory that another user made first (0777, 0700) is
 *     refused by writers, naming its owner and the ways out, and by
 *     readers; the user's own 0700 $XDG_RUNTIME_DIR gives a default nobody
 *     can take, which readers without it find in /run/user/<uid>;
 *   - TALLY_GROUP opens a default directory made 0700 earlier to the
 *     group (0750), so that a monitoring user of the group reads it;
 *   - a zone's file is removed when the last process using it exits
 *     normally (not before, even if its creator exits first), and kept
 *     with TALLY_KEEP=1, TALLY_ZONE_PERSIST, or after a crash;
 *   - on a full file system, allocation fails with ENOSPC before it hands
 *     out a slot whose first write would kill the writer with SIGBUS.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "tally/reader.h"
#include "tally/tally.h"
#include "util.h"

/* What a child saw, in memory shared with the test. */
struct result {
	int err;                 /* errno of the failed call, 0: success */
	char msg[256];
	char path[PATH_MAX];
	struct tally_zone_usage u;
	int64_t value;
	pid_t pid;
};

static struct result *shared_result(void)
{
	return shared_mem(sizeof(struct result));
}

static void subdir(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", harness_dir(), name);
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* ---- zone creation in a fresh process, under some environment ---- */

struct attempt {
	const char *env[3][2];   /* variables to set ({NULL, NULL} ends) */
	const char *name;        /* the zone to create */
	unsigned flags;
	struct result *r;
};

static void attempt_child(void *arg)
{
	struct attempt *a = arg;
	struct tally_zone_opts o = { .flags = a->flags };
	struct tally_zone *z;

	for (int i = 0; i < 3 && a->env[i][0]; i++)
		fresh_setenv(a->env[i][0], a->env[i][1]);
	errno = 0;
	z = tally_zone_create(a->name, &o);
	a->r->err = z ? 0 : errno;
	snprintf(a->r->msg, sizeof(a->r->msg), "%s", tally_errmsg());
	if (z) {
		snprintf(a->r->path, sizeof(a->r->path), "%s",
			 tally_zone_path(z));
		CHECK_EQ(tally_zone_usage(z, &a->r->u), 0);
		CHECK_EQ(tally_zone_destroy(z), 0);
		/* The default zone fails or works alike. */
		CHECK(tally_block_alloc(NULL, 1, TALLY_PERCPU) != NULL);
	} else {
		CHECK(z == NULL);
		CHECK(strlen(tally_errmsg()) > 0);
		errno = 0;
		CHECK(tally_block_alloc(NULL, 1, TALLY_PERCPU) == NULL);
		CHECK_EQ(errno, a->r->err);
	}
}

/* Creates zone "z" in a fresh process with var=val set; returns the
 * errno (0: created) and leaves the message in r. */
static int try_env(struct result *r, const char *var, const char *val)
{
	struct attempt a = { { { var, val }, { NULL, NULL } }, "z", 0, r };

	memset(r, 0, sizeof(*r));
	r->err = -1;
	CHECK_CHILD_OK(harness_child(attempt_child, &a));
	return r->err;
}

static void expect_env_error(const char *var, const char *val, int err,
			     const char *needle)
{
	struct result *r = shared_result();
	int got = try_env(r, var, val);

	if (got != err)
		harness_fail(__FILE__, __LINE__, "%s=%s: errno %d, expected "
			     "%d (%s)", var, val, got, err, r->msg);
	if (needle && !strstr(r->msg, needle))
		harness_fail(__FILE__, __LINE__, "%s=%s: message \"%s\" does "
			     "not name %s", var, val, r->msg, needle);
	munmap(r, sizeof(*r));
}

TEST(dir_missing_is_enoent)
{
	char dir[PATH_MAX + 8], parent[PATH_MAX];

	subdir(parent, sizeof(parent), "missing");
	snprintf(dir, sizeof(dir), "%s/below", parent);
	expect_env_error("TALLY_DIR", dir, ENOENT, dir);
	CHECK(!exists(parent)); /* only the last component is created */
}

/* A missing TALLY_DIR whose parent exists is created, 0700. */
TEST(dir_missing_is_created)
{
	char dir[PATH_MAX];
	struct stat st;

	subdir(dir, sizeof(dir), "made");
	expect_env_error("TALLY_DIR", dir, 0, NULL);
	CHECK_EQ(lstat(dir, &st), 0);
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0700);
	CHECK_EQ(st.st_uid, geteuid());
}

/*
 * A volume as Kubernetes makes an in-memory emptyDir with an fsGroup:
 * root's, mode 2777, group G.  A writer of another uid, in group G, with
 * TALLY_GROUP=G and TALLY_DIR a name in the volume, creates that
 * directory itself: its own, 0750, group G (and the volume's setgid
 * bit), so that a monitoring user of group G reads it.
 */
struct vol {
	uid_t writer;
	gid_t group;
	char root[PATH_MAX], dir[PATH_MAX + 8];
};

static void vol_writer(void *arg)
{
	const struct vol *v = arg;
	char gid[16];

	snprintf(gid, sizeof(gid), "%u", (unsigned)v->group);
	CHECK_EQ(setgroups(1, &v->group), 0);
	CHECK_EQ(setgid(v->writer), 0);
	CHECK_EQ(setuid(v->writer), 0);
	fresh_setenv("TALLY_DIR", v->dir);
	fresh_setenv("TALLY_GROUP", gid);
	if (!tally_zone_create("app", NULL))
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
}

TEST(dir_created_in_a_kubernetes_volume)
{
	struct vol *v = shared_mem(sizeof(*v));
	struct stat st;
	char cmd[PATH_MAX + 16];
	int status;

	if (geteuid() != 0)
		harness_skip("needs root to play another user");
	v->writer = 600000 + (uid_t)(getpid() % 100000);
	v->group = (gid_t)v->writer + 1000000;
	snprintf(v->root, sizeof(v->root), "/dev/shm/tally-vol.%d", getpid());
	snprintf(v->dir, sizeof(v->dir), "%s/tally", v->root);
	CHECK_EQ(mkdir(v->root, 0700), 0);
	CHECK_EQ(chown(v->root, 0, v->group), 0);
	CHECK_EQ(chmod(v->root, 02777), 0);
	status = harness_child(vol_writer, v);
	if (status == 0) {
		CHECK_EQ(lstat(v->dir, &st), 0);
		CHECK_EQ(st.st_uid, v->writer);
		CHECK_EQ(st.st_gid, v->group);
		CHECK_EQ(st.st_mode & 0777, 0750);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", v->root);
	CHECK_EQ(system(cmd), 0);
	CHECK_CHILD_OK(status);
}

TEST(dir_that_is_a_file_is_enotdir)
{
	char path[PATH_MAX];
	int fd;

	subdir(path, sizeof(path), "file");
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	expect_env_error("TALLY_DIR", path, ENOTDIR, path);
}

TEST(dir_that_is_a_symlink_is_enotdir)
{
	char real[PATH_MAX], link[PATH_MAX];

	subdir(real, sizeof(real), "real");
	subdir(link, sizeof(link), "link");
	CHECK_EQ(mkdir(real, 0700), 0);
	CHECK_EQ(symlink(real, link), 0);
	expect_env_error("TALLY_DIR", link, ENOTDIR, link);
	/* The directory it points to is fine. */
	expect_env_error("TALLY_DIR", real, 0, NULL);
}

TEST(dir_writable_by_others_is_eperm)
{
	static const mode_t bad[] = { 0777, 0770, 0702, 01777 };
	static const mode_t good[] = { 0700, 0755, 0500 };
	char dir[PATH_MAX];

	subdir(dir, sizeof(dir), "d");
	CHECK_EQ(mkdir(dir, 0700), 0);
	for (unsigned i = 0; i < 4; i++) {
		CHECK_EQ(chmod(dir, bad[i]), 0);
		expect_env_error("TALLY_DIR", dir, EPERM, dir);
	}
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ(chmod(dir, good[i]), 0);
		/* Root writes to a 0500 directory anyway. */
		if (good[i] == 0500 && geteuid() != 0)
			continue;
		expect_env_error("TALLY_DIR", dir, 0, NULL);
	}
	CHECK_EQ(chmod(dir, 0700), 0);
	if (geteuid() == 0) {
		/* Owned by another user. */
		CHECK_EQ(chown(dir, 65534, 65534), 0);
		expect_env_error("TALLY_DIR", dir, EPERM, dir);
		CHECK_EQ(chown(dir, 0, 0), 0);
	}
}

TEST(bad_environment_is_einval)
{
	expect_env_error("TALLY_NSLABS", "abc", EINVAL, "TALLY_NSLABS");
	expect_env_error("TALLY_NSLABS", "0", EINVAL, "TALLY_NSLABS");
	expect_env_error("TALLY_NSLABS", "99999", EINVAL, "TALLY_NSLABS");
	expect_env_error("TALLY_NSLABS", "4097", EINVAL, "TALLY_NSLABS");
	expect_env_error("TALLY_NSLABS", "-1", EINVAL, "TALLY_NSLABS");
	expect_env_error("TALLY_NSLABS", "2x", EINVAL, "TALLY_NSLABS");
	expect_env_error("TALLY_NSLABS", "99999999999999999999", EINVAL,
			 "TALLY_NSLABS");
	expect_env_error("TALLY_NODES", "0", EINVAL, "TALLY_NODES");
	expect_env_error("TALLY_NODES", "abc", EINVAL, "TALLY_NODES");
	expect_env_error("TALLY_NODES", "4097", EINVAL, "TALLY_NODES");
	expect_env_error("TALLY_ZONE_SLOTS", "0", EINVAL, "TALLY_ZONE_SLOTS");
	expect_env_error("TALLY_ZONE_SLOTS", "many", EINVAL,
			 "TALLY_ZONE_SLOTS");
	expect_env_error("TALLY_DIR", "relative/dir", EINVAL, "TALLY_DIR");
	/* Yes/no variables take their documented values only. */
	expect_env_error("TALLY_KEEP", "yes", EINVAL, "TALLY_KEEP=yes");
	expect_env_error("TALLY_KEEP", "true", EINVAL, "TALLY_KEEP=true");
	expect_env_error("TALLY_KEEP", "2", EINVAL, "TALLY_KEEP=2");
	expect_env_error("TALLY_NO_RSEQ", "yes", EINVAL, "TALLY_NO_RSEQ=yes");
	expect_env_error("TALLY_NO_RSEQ", "2", EINVAL, "TALLY_NO_RSEQ=2");
	expect_env_error("TALLY_ZONE_SERIES", "0", EINVAL, "TALLY_ZONE_SERIES");
	expect_env_error("TALLY_ZONE_SERIES", "lots", EINVAL,
			 "TALLY_ZONE_SERIES");
	expect_env_error("TALLY_ZONE_SERIES", "16777217", EINVAL,
			 "TALLY_ZONE_SERIES");
	expect_env_error("TALLY_KEEP", "0", 0, NULL);
	expect_env_error("TALLY_KEEP", "1", 0, NULL);
	expect_env_error("TALLY_NO_RSEQ", "0", 0, NULL);
	expect_env_error("TALLY_NO_RSEQ", "1", 0, NULL);
}

/*
 * A shared directory (/dev/shm, /tmp: mode 1777) is not for tally's
 * files, and changing its mode would break every other program: the
 * message suggests a private subdirectory, never chmod; a directory that
 * its group can write to is called that, not "writable by others".
 */
TEST(shared_dir_message_suggests_a_subdirectory)
{
	struct result *r = shared_result();
	char dir[PATH_MAX];

	subdir(dir, sizeof(dir), "shared");
	CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
	CHECK_EQ(chmod(dir, 01777), 0);
	CHECK_EQ(try_env(r, "TALLY_DIR", dir), EPERM);
	if (strstr(r->msg, "chmod") || !strstr(r->msg, "subdirectory"))
		harness_fail(__FILE__, __LINE__, "bad advice: \"%s\"", r->msg);
	CHECK_EQ(chmod(dir, 0770), 0);
	CHECK_EQ(try_env(r, "TALLY_DIR", dir), EPERM);
	if (!strstr(r->msg, "writable by its group") ||
	    strstr(r->msg, "by others"))
		harness_fail(__FILE__, __LINE__, "0770 called \"%s\"", r->msg);
	CHECK_EQ(chmod(dir, 0700), 0);
}

/* The default zone's limits name the variables that raise them. */
static void default_limits_child(void *arg)
{
	struct tally_metric_desc d = desc(TALLY_COUNTER, "c_total");
	struct result *r = arg;
	tally_metric m;
	int rc = 0, i;

	fresh_setenv("TALLY_ZONE_SERIES", "100");
	fresh_setenv("TALLY_ZONE_SLOTS", "1008");
	for (i = 0; i < 200 && rc == 0; i++) {
		char v[16];
		struct tally_label l = { "i", v };

		snprintf(v, sizeof(v), "%d", i);
		d.labels = &l;
		d.nlabels = 1;
		rc = register_any(NULL, &d, &m);
	}
	CHECK_EQ(rc, -ENOSPC);
	CHECK_EQ(i, 101);
	if (!strstr(tally_errmsg(), "TALLY_ZONE_SERIES"))
		harness_fail(__FILE__, __LINE__, "\"%s\"", tally_errmsg());
	for (i = 0; i < 4096; i++)
		if (!tally_block_alloc(NULL, 8, TALLY_SHARED))
			break;
	CHECK_EQ(errno, ENOSPC);
	if (!strstr(tally_errmsg(), "TALLY_ZONE_SLOTS"))
		harness_fail(__FILE__, __LINE__, "\"%s\"", tally_errmsg());
	(void)r;
}

TEST(default_zone_limits_name_their_variables)
{
	CHECK_CHILD_OK(harness_child(default_limits_child, shared_result()));
}

/* Good values are taken as given. */
TEST(environment_is_applied)
{
	struct result *r = shared_result();

	CHECK_EQ(try_env(r, "TALLY_NSLABS", "1"), 0);
	CHECK_EQ(r->u.nslabs, 1);
	CHECK_EQ(try_env(r, "TALLY_NSLABS", "4096"), 0);
	CHECK_EQ(r->u.nslabs, 4096);
	CHECK_EQ(try_env(r, "TALLY_NSLABS", "7"), 0);
	CHECK_EQ(r->u.nslabs, 7);
	CHECK_EQ(r->u.mapped_bytes % 4096, 0);
	CHECK_EQ(try_env(r, "TALLY_NODES", "2"), 0);
	CHECK_EQ(r->u.nnodes, 2);
	CHECK_EQ(try_env(r, "TALLY_ZONE_SLOTS", "1000"), 0);
	CHECK_EQ(r->u.chunks_total, 2);
	CHECK_EQ(try_env(r, "TALLY_ZONE_SLOTS", "504"), 0);
	CHECK_EQ(r->u.chunks_total, 1);
}

/* ---- names and options ---- */

static void expect_create_error(const char *name,
				const struct tally_zone_opts *o, int err)
{
	errno = 0;
	if (tally_zone_create(name, o) != NULL)
		harness_fail(__FILE__, __LINE__, "zone \"%s\" was created",
			     name ? name : "(null)");
	CHECK_EQ(errno, err);
	CHECK(strlen(tally_errmsg()) > 0);
}

TEST(bad_zone_names_are_einval)
{
	static const char *const bad[] = {
		"", ".x", "..", ".", "a/b", "/a", "a b", "a\nb", "caf\xc3\xa9",
		"x*", "-..-/../x",
		"a123456789b123456789c123456789d123456789e123456789f123456789abcd",
	};
	static const char *const good[] = {
		"a", "x.", "a.b-c_D9", "-x", "_",
		"a123456789b123456789c123456789d123456789e123456789f123456789abc",
	};
	struct tally_zone_opts flags = { .flags = 0x80 };
	struct tally_zone_opts anon = { .flags = TALLY_ZONE_ANON };
	struct tally_zone_opts huge = { .capacity = ((size_t)1 << 32) + 1 };

	CHECK_EQ(strlen(bad[11]), 64);
	CHECK_EQ(strlen(good[5]), 63);
	expect_create_error(NULL, NULL, EINVAL);
	expect_create_error(NULL, &anon, EINVAL);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_create_error(bad[i], NULL, EINVAL);
		expect_create_error(bad[i], &anon, EINVAL);
	}
	expect_create_error("ok", &flags, EINVAL);
	expect_create_error("ok", &huge, EINVAL);
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct tally_zone *z = tally_zone_create(good[i], NULL);

		if (!z)
			harness_fail(__FILE__, __LINE__, "zone \"%s\": %s",
				     good[i], tally_errmsg());
		CHECK(strstr(tally_zone_path(z), good[i]) != NULL);
		CHECK_EQ(tally_zone_destroy(z), 0);
	}
}

TEST(duplicate_zone_name_is_eexist)
{
	struct tally_zone *z = tally_zone_create("dup", NULL), *z2;
	char path[PATH_MAX];

	CHECK(z != NULL);
	snprintf(path, sizeof(path), "%s", tally_zone_path(z));
	expect_create_error("dup", NULL, EEXIST);
	/* The first one is untouched. */
	CHECK(exists(path));
	CHECK(tally_block_alloc(z, 1, TALLY_PERCPU) != NULL);
	CHECK_EQ(tally_zone_destroy(z), 0);
	CHECK(!exists(path));
	z2 = tally_zone_create("dup", NULL);
	CHECK(z2 != NULL);
	CHECK_EQ(tally_zone_destroy(z2), 0);
}

TEST(destroy_refuses_null_and_default)
{
	CHECK_EQ(tally_zone_destroy(NULL), -EINVAL);
	CHECK_EQ(tally_zone_destroy(tally_zone_default()), -EINVAL);
	CHECK(tally_block_alloc(NULL, 1, TALLY_PERCPU) != NULL);
}

/* A process has a bounded number of zones; the limit is EMFILE and
 * leaves no file behind. */
TEST(too_many_zones_is_emfile)
{
	struct tally_zone_opts o = { .capacity = 512 };
	int n = 0, before = 0;
	char name[32];
	DIR *d = opendir(harness_dir());
	struct dirent *e;

	CHECK(d != NULL);
	while ((e = readdir(d)))
		before += e->d_name[0] != '.';
	closedir(d);
	for (;;) {
		snprintf(name, sizeof(name), "many%d", n);
		errno = 0;
		if (!tally_zone_create(name, &o))
			break;
		CHECK(++n < 100000);
	}
	CHECK_EQ(errno, EMFILE);
	CHECK(strlen(tally_errmsg()) > 0);
	CHECK(n >= 8);
	d = opendir(harness_dir());
	CHECK(d != NULL);
	while ((e = readdir(d)))
		before -= e->d_name[0] != '.';
	closedir(d);
	CHECK_EQ(-before, n);
}

/* ---- files ---- */

/* The file is <dir>/<name>.<pid>.<16 hex digits>.tally, 0600 even with
 * umask 0. */
TEST(zone_file_is_0600)
{
	char expect[PATH_MAX];
	struct tally_zone *z;
	struct stat st;
	size_t n;

	umask(0);
	z = tally_zone_create("modes", NULL);
	CHECK(z != NULL);
	n = (size_t)snprintf(expect, sizeof(expect), "%s/modes.%d.",
			     harness_dir(), (int)getpid());
	CHECK(strncmp(tally_zone_path(z), expect, n) == 0);
	CHECK_EQ(strlen(tally_zone_path(z)), n + 16 + 6);
	CHECK_EQ(strspn(tally_zone_path(z) + n, "0123456789abcdef"), 16);
	CHECK(strcmp(tally_zone_path(z) + n + 16, ".tally") == 0);
	snprintf(expect, sizeof(expect), "%s", tally_zone_path(z));
	CHECK_EQ(lstat(expect, &st), 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_EQ(st.st_uid, geteuid());
	CHECK_EQ(tally_zone_destroy(z), 0);
	CHECK(!exists(expect));
}

/* A uid nobody has, one per test process (runs of the suite at the same
 * time, and its -fallback twin, each have their own), as squat_uids(). */
static uid_t default_dir_uid(void)
{
	return 200000 + (uid_t)(getpid() % 100000);
}

static void default_dir_child(void *arg)
{
	struct result *r = arg;
	uid_t uid = *(uid_t *)r->msg;

	/* Another user, so that the default directory is ours to make. */
	CHECK_EQ(setgid(uid), 0);
	CHECK_EQ(setuid(uid), 0);
	umask(0);
	fresh_setenv("TALLY_DIR", NULL);
	fresh_setenv("XDG_RUNTIME_DIR", NULL);
	CHECK(tally_zone_default() != NULL);
	snprintf(r->path, sizeof(r->path), "%s",
		 tally_zone_path(tally_zone_default()));
}

/* The default directory, /dev/shm/tally-<uid>, is created 0700. */
TEST(default_dir_is_created_0700)
{
	struct result *r = shared_result();
	uid_t uid = default_dir_uid();
	char dir[64], cmd[128];
	struct stat st;

	if (geteuid() != 0)
		harness_skip("needs root to act as a user without a default "
			     "directory");
	snprintf(dir, sizeof(dir), "/dev/shm/tally-%u", (unsigned)uid);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	memcpy(r->msg, &uid, sizeof(uid));
	CHECK_CHILD_OK(harness_child(default_dir_child, r));
	CHECK(strncmp(r->path, dir, strlen(dir)) == 0 &&
	      r->path[strlen(dir)] == '/');
	CHECK_EQ(lstat(dir, &st), 0);
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0700);
	CHECK_EQ(st.st_uid, uid);
	CHECK_EQ(lstat(r->path, &st), 0);
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_EQ(system(cmd), 0);
}

/*
 * Squatting: another user creates this user's default directory before
 * its first run.  The users are uids nobody has, one pair per test
 * process, so that the test never touches a real user's directory.
 */
struct squat {
	uid_t victim, squatter;
	char shm[64];            /* /dev/shm/tally-<victim> */
	char xdg[64];            /* the victim's $XDG_RUNTIME_DIR, or "" */
	char xdg_made[64];       /* the one the test made for it */
	char run[64];            /* /run/user/<victim> */
	char dirs[2][PATH_MAX];  /* tally_default_dir(0), (1) */
	int err, walk_err, walked;
	char msg[1024], walk_msg[1024];
	char path[PATH_MAX];
};

static void squatter(void *arg)
{
	struct squat *q = arg;

	CHECK_EQ(setgid(q->squatter), 0);
	CHECK_EQ(setuid(q->squatter), 0);
	CHECK_EQ(mkdir(q->shm, 0777), 0);
	CHECK_EQ(chmod(q->shm, 0777), 0);
}

static int count_walk(const char *path, struct tally_seg *s,
		      const char *error, void *arg)
{
	(void)path;
	(void)error;
	*(int *)arg += s != NULL;
	return 0;
}

/* The victim: creates a zone with the default directory, and reads. */
static void squat_victim(void *arg)
{
	struct squat *q = arg;
	struct tally_zone *z;

	CHECK_EQ(setgid(q->victim), 0);
	CHECK_EQ(setuid(q->victim), 0);
	fresh_setenv("TALLY_DIR", NULL);
	fresh_setenv("TALLY_GROUP", NULL);
	fresh_setenv("XDG_RUNTIME_DIR", q->xdg[0] ? q->xdg : NULL);
	for (unsigned i = 0; i < 2; i++)
		if (tally_default_dir(i, q->dirs[i], sizeof(q->dirs[i])) < 0)
			q->dirs[i][0] = 0;
	z = tally_zone_create("squat", NULL);
	q->err = z ? 0 : errno;
	snprintf(q->msg, sizeof(q->msg), "%s", z ? "" : tally_errmsg());
	if (z)
		snprintf(q->path, sizeof(q->path), "%s", tally_zone_path(z));
	q->walked = 0;
	q->walk_err = tally_dir_foreach(NULL, NULL, count_walk, &q->walked);
	snprintf(q->walk_msg, sizeof(q->walk_msg), "%s", tally_errmsg());
	if (z)
		CHECK_EQ(tally_zone_destroy(z), 0);
}

/*
 * The default directory /dev/shm/tally-<uid>, made 0777 by another user
 * first: zone creation fails with a message that names the owner and the
 * ways out (remove it, TALLY_DIR, $XDG_RUNTIME_DIR), and readers refuse
 * to walk it, saying why.  Where $XDG_RUNTIME_DIR is the user's own 0700
 * directory, the default is $XDG_RUNTIME_DIR/tally, which nobody else can
 * take: creation works, readers find the zone there and do not stumble
 * on the squatted second place.  An $XDG_RUNTIME_DIR others can enter is
 * not used.
 */
static void squat_steps(void *arg)
{
	struct squat *q = arg;
	char want[PATH_MAX + 16];
	struct stat st;

	CHECK_CHILD_OK(harness_child(squatter, q));
	CHECK_EQ(lstat(q->shm, &st), 0);
	CHECK_EQ(st.st_uid, q->squatter);

	/* No $XDG_RUNTIME_DIR: the default is taken. */
	q->xdg[0] = 0;
	CHECK_CHILD_OK(harness_child(squat_victim, q));
	CHECK_EQ(q->err, EPERM);
	snprintf(want, sizeof(want), "owned by uid %u", (unsigned)q->squatter);
	if (!strstr(q->msg, want) || !strstr(q->msg, "TALLY_DIR") ||
	    !strstr(q->msg, "rm -r /dev/shm/tally-") ||
	    !strstr(q->msg, "XDG_RUNTIME_DIR"))
		harness_fail(__FILE__, __LINE__, "message: %s", q->msg);
	CHECK_EQ(q->walk_err, -EPERM);
	if (!strstr(q->walk_msg, q->shm) || !strstr(q->walk_msg, want))
		harness_fail(__FILE__, __LINE__, "walk: %s", q->walk_msg);
	CHECK_EQ(strcmp(q->dirs[0], q->shm), 0);
	CHECK_EQ(q->dirs[1][0], 0);
	/* Taken 0700, where the victim cannot even look: the same. */
	CHECK_EQ(chmod(q->shm, 0700), 0);
	CHECK_CHILD_OK(harness_child(squat_victim, q));
	CHECK_EQ(q->err, EPERM);
	if (!strstr(q->msg, want) || !strstr(q->msg, "TALLY_DIR"))
		harness_fail(__FILE__, __LINE__, "message: %s", q->msg);
	CHECK_EQ(q->walk_err, -EPERM);
	if (!strstr(q->walk_msg, want))
		harness_fail(__FILE__, __LINE__, "walk: %s", q->walk_msg);

	/* The victim's own $XDG_RUNTIME_DIR: nobody else can take it. */
	snprintf(q->xdg, sizeof(q->xdg), "%s", q->xdg_made);
	CHECK_CHILD_OK(harness_child(squat_victim, q));
	if (q->err)
		harness_fail(__FILE__, __LINE__, "%s", q->msg);
	snprintf(want, sizeof(want), "%s/tally", q->xdg);
	CHECK_EQ(strcmp(q->dirs[0], want), 0);
	CHECK_EQ(strcmp(q->dirs[1], q->shm), 0);
	CHECK_EQ(strncmp(q->path, want, strlen(want)), 0);
	CHECK_EQ(q->walk_err, 1);
	CHECK_EQ(q->walked, 1);
	CHECK_EQ(lstat(want, &st), 0);
	CHECK_EQ(st.st_mode & 07777, 0700);
	CHECK_EQ(st.st_uid, q->victim);

	/* An $XDG_RUNTIME_DIR that others can enter is not the default. */
	CHECK_EQ(chmod(q->xdg, 0755), 0);
	CHECK_CHILD_OK(harness_child(squat_victim, q));
	CHECK_EQ(q->err, EPERM);
	CHECK_EQ(strcmp(q->dirs[0], q->shm), 0);

	/* No $XDG_RUNTIME_DIR, but the user's /run/user/<uid>: readers also
	 * look where the user's session writers write. */
	if (access("/run/user", F_OK) == 0) {
		q->xdg[0] = 0;
		CHECK_EQ(mkdir(q->run, 0700), 0);
		CHECK_EQ(chown(q->run, q->victim, q->victim), 0);
		CHECK_CHILD_OK(harness_child(squat_victim, q));
		snprintf(want, sizeof(want), "%s/tally", q->run);
		CHECK_EQ(strcmp(q->dirs[0], q->shm), 0);
		CHECK_EQ(strcmp(q->dirs[1], want), 0);
	}
}

TEST(default_dir_cannot_be_squatted)
{
	struct squat *q = shared_mem(sizeof(*q));
	char cmd[256];
	int status;

	if (geteuid() != 0)
		harness_skip("needs root to play two users");
	q->victim = 300000 + (uid_t)(getpid() % 100000) * 2;
	q->squatter = q->victim + 1;
	snprintf(q->shm, sizeof(q->shm), "/dev/shm/tally-%u",
		 (unsigned)q->victim);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", q->shm);
	CHECK_EQ(system(cmd), 0);
	snprintf(q->xdg_made, sizeof(q->xdg_made),
		 "/dev/shm/tally-xdgtest.XXXXXX");
	CHECK(mkdtemp(q->xdg_made) != NULL);
	CHECK_EQ(chown(q->xdg_made, q->victim, q->victim), 0);
	CHECK_EQ(chmod(q->xdg_made, 0700), 0);
	/* The steps in a child, so that what they made goes whatever
	 * happens to them. */
	snprintf(q->run, sizeof(q->run), "/run/user/%u", (unsigned)q->victim);
	status = harness_child(squat_steps, q);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s %s", q->shm, q->xdg_made,
		 q->run);
	CHECK_EQ(system(cmd), 0);
	CHECK_CHILD_OK(status);
}

/*
 * TALLY_GROUP with a default directory made 0700 by an earlier run
 * without it: the writer opens the directory to the group (0750, its
 * group TALLY_GROUP), so that a monitoring user of the group reads the
 * segment with allow_group; without allow_group the directory, another
 * user's, is refused.  Fake uids and gids, one set per test process.
 */
struct grp {
	uid_t writer, monitor;
	gid_t group;
	char shm[64];
	int walked, walk_err, plain_err;
	char msg[1024];
};

static void grp_writer(void *arg)
{
	const struct grp *g = arg;
	struct tally_zone_opts o = { .flags = TALLY_ZONE_PERSIST };
	struct tally_zone *z;
	char gid[16];

	snprintf(gid, sizeof(gid), "%u", (unsigned)g->group);
	CHECK_EQ(setgroups(1, &g->group), 0);
	CHECK_EQ(setgid(g->writer), 0);
	CHECK_EQ(setuid(g->writer), 0);
	fresh_setenv("TALLY_DIR", NULL);
	fresh_setenv("XDG_RUNTIME_DIR", NULL);
	fresh_setenv("TALLY_GROUP", gid);
	z = tally_zone_create("grp", &o);
	if (!z)
		harness_fail(__FILE__, __LINE__, "%s", tally_errmsg());
}

static void grp_monitor(void *arg)
{
	struct grp *g = arg;
	struct tally_open_opts grp = { .allow_uid = -1, .allow_group = 1 };

	CHECK_EQ(setgroups(1, &g->group), 0);
	CHECK_EQ(setgid(g->monitor), 0);
	CHECK_EQ(setuid(g->monitor), 0);
	g->walked = 0;
	g->plain_err = tally_dir_foreach(g->shm, NULL, count_walk, &g->walked);
	snprintf(g->msg, sizeof(g->msg), "%s", tally_errmsg());
	g->walk_err = tally_dir_foreach(g->shm, &grp, count_walk, &g->walked);
}

static void grp_steps(void *arg)
{
	struct grp *g = arg;
	struct stat st;
	char want[64];

	CHECK_EQ(mkdir(g->shm, 0700), 0);
	CHECK_EQ(chown(g->shm, g->writer, g->writer), 0);
	CHECK_CHILD_OK(harness_child(grp_writer, g));
	CHECK_EQ(lstat(g->shm, &st), 0);
	CHECK_EQ(st.st_mode & 07777, 0750);
	CHECK_EQ(st.st_gid, g->group);
	CHECK_CHILD_OK(harness_child(grp_monitor, g));
	CHECK_EQ(g->plain_err, -EPERM);
	snprintf(want, sizeof(want), "owned by uid %u", (unsigned)g->writer);
	if (!strstr(g->msg, want) || !strstr(g->msg, g->shm))
		harness_fail(__FILE__, __LINE__, "message: %s", g->msg);
	CHECK_EQ(g->walk_err, 1);
	CHECK_EQ(g->walked, 1);
}

TEST(group_opens_a_0700_default_dir)
{
	struct grp *g = shared_mem(sizeof(*g));
	char cmd[128];
	int status;

	if (geteuid() != 0)
		harness_skip("needs root to play two users");
	g->writer = 500000 + (uid_t)(getpid() % 100000) * 2;
	g->monitor = g->writer + 1;
	g->group = (gid_t)g->writer + 1000000;
	snprintf(g->shm, sizeof(g->shm), "/dev/shm/tally-%u",
		 (unsigned)g->writer);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g->shm);
	CHECK_EQ(system(cmd), 0);
	status = harness_child(grp_steps, g);
	CHECK_EQ(system(cmd), 0);
	CHECK_CHILD_OK(status);
}

/*
 * A container's pid 1 that keeps restarting: each incarnation, pid 1 of
 * a new PID namespace, creates zone "inc" in the same directory and
 * leaves it dead (TALLY_KEEP=1).  Each creation keeps the last dead
 * incarnation and removes the earlier ones: after every run the
 * directory holds exactly the last two, never a pile.
 */
static void pid1_run(void *arg)
{
	const char *dir = arg;
	pid_t c;
	int st;

	CHECK_EQ(unshare(CLONE_NEWPID), 0);
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		struct tally_zone *z;

		if (getpid() != 1)
			_exit(3);
		fresh_setenv("TALLY_DIR", dir);
		fresh_setenv("TALLY_KEEP", "1");
		fresh_setenv("TALLY_RETAIN", NULL);
		z = tally_zone_create("inc", NULL);
		_exit(z ? 0 : 4);
	}
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The names of pid 1's files of zone "inc" in @dir, space-separated,
 * sorted; their number in @n. */
static void pid1_files(const char *dir, char *out, size_t size, int *n)
{
	char cmd[PATH_MAX + 64];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "cd %s && ls inc.1.*.tally 2>/dev/null",
		 dir);
	f = popen(cmd, "r");
	CHECK(f != NULL);
	out[0] = 0;
	*n = 0;
	for (char line[256]; fgets(line, sizeof(line), f);) {
		line[strcspn(line, "\n")] = 0;
		snprintf(out + strlen(out), size - strlen(out), "%s ", line);
		(*n)++;
	}
	pclose(f);
}

TEST(pid1_restarts_keep_one_dead_incarnation)
{
	char dir[PATH_MAX], before[1024], now[1024], last[256] = "";
	int n;

	if (geteuid() != 0)
		harness_skip("needs root for a PID namespace");
	subdir(dir, sizeof(dir), "pid1");
	CHECK_EQ(mkdir(dir, 0700), 0);
	for (int run = 1; run <= 6; run++) {
		char *tok, made[256] = "";

		pid1_files(dir, before, sizeof(before), &n);
		CHECK_CHILD_OK(harness_child(pid1_run, dir));
		pid1_files(dir, now, sizeof(now), &n);
		CHECK_EQ(n, run == 1 ? 1 : 2);
		/* This run's file, and the last run's: nothing older. */
		for (tok = strtok(now, " "); tok; tok = strtok(NULL, " ")) {
			if (strstr(before, tok))
				CHECK(strcmp(tok, last) == 0);
			else
				snprintf(made, sizeof(made), "%s", tok);
		}
		CHECK(made[0] != 0);
		snprintf(last, sizeof(last), "%s", made);
	}
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

TEST(anonymous_zone_has_no_file)
{
	struct tally_zone_opts o = { .flags = TALLY_ZONE_ANON };
	int before = count_entries(harness_dir());
	struct tally_zone *z = tally_zone_create("anon", &o);
	tally_block *b;
	int64_t v;

	CHECK(z != NULL);
	CHECK_EQ(count_entries(harness_dir()), before);
	CHECK(strcmp(tally_zone_path(z), "") == 0);
	b = tally_block_alloc(z, 2, TALLY_PERCPU);
	CHECK(b != NULL);
	tally_block_add(b, 1, 42);
	CHECK_EQ(tally_block_fetch(b, 1, &v), 0);
	CHECK_EQ(v, 42);
	CHECK_EQ(count_entries(harness_dir()), before);
	CHECK_EQ(tally_zone_destroy(z), 0);
}

/* ---- when the file goes ---- */

struct life {
	unsigned flags;          /* for the zone */
	const char *keep;        /* $TALLY_KEEP, or NULL */
	int how;                 /* 0 exit, 1 SIGKILL, 2 abort, 3 default */
	struct result *r;
};

static void life_child(void *arg)
{
	struct life *l = arg;
	struct tally_zone_opts o = { .flags = l->flags };
	struct tally_zone *z;
	tally_block *b;

	if (l->keep)
		fresh_setenv("TALLY_KEEP", l->keep);
	if (l->how == 3) {
		b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
		z = tally_zone_default();
	} else {
		z = tally_zone_create("life", &o);
		CHECK(z != NULL);
		b = tally_block_alloc(z, 1, TALLY_PERCPU);
	}
	CHECK(b != NULL);
	tally_block_add(b, 0, 1);
	snprintf(l->r->path, sizeof(l->r->path), "%s", tally_zone_path(z));
	CHECK(exists(l->r->path));
	switch (l->how) {
	case 1:
		kill(getpid(), SIGKILL);
		break;
	case 2:
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	exit(0);
}

/* Runs a child that makes a zone and ends as told; says whether its
 * file is left. */
static int file_left(unsigned flags, const char *keep, int how)
{
	struct result *r = shared_result();
	struct life l = { flags, keep, how, r };
	int status = harness_child(life_child, &l), left;

	switch (how) {
	case 1:
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		break;
	case 2:
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
		break;
	default:
		CHECK_CHILD_OK(status);
	}
	CHECK(r->path[0] != 0);
	left = exists(r->path);
	if (left)
		CHECK_EQ(unlink(r->path), 0);
	munmap(r, sizeof(*r));
	return left;
}

TEST(file_removed_on_normal_exit)
{
	CHECK_EQ(file_left(0, NULL, 0), 0);
	CHECK_EQ(file_left(0, NULL, 3), 0);  /* the default zone */
	CHECK_EQ(file_left(0, "0", 0), 0);
}

TEST(file_kept_with_keep_or_persist)
{
	CHECK_EQ(file_left(0, "1", 0), 1);
	CHECK_EQ(file_left(0, "1", 3), 1);
	CHECK_EQ(file_left(TALLY_ZONE_PERSIST, NULL, 0), 1);
}

TEST(file_kept_after_crash)
{
	CHECK_EQ(file_left(0, NULL, 1), 1);
	CHECK_EQ(file_left(0, NULL, 2), 1);
}

/*
 * The creator forks a child that goes on using the zone, then exits
 * normally: the file stays while the child lives and goes when the child
 * exits normally.  A clean-up (tally_dir_cleanup(), tally_dir_expire()
 * with no retention) while the creator is gone but the child still uses
 * the zone keeps the file: it judges a segment by the locks of every
 * process that holds it, not by its creator alone, or the child's later
 * adds would go to a file no reader can find.
 */
TEST(file_kept_while_forked_child_uses_it)
{
	struct result *r = shared_result();
	int hold[2], done[2], added[2], status;
	int64_t *seen = &r->value;
	pid_t creator;
	char c;

	CHECK_EQ(pipe(hold), 0);
	CHECK_EQ(pipe(done), 0);
	CHECK_EQ(pipe(added), 0);
	creator = fork();
	CHECK(creator >= 0);
	if (creator == 0) {
		struct tally_zone *z = tally_zone_create("shared", NULL);
		tally_block *b;
		pid_t user;

		close(done[0]);
		close(hold[1]);
		close(added[0]);
		CHECK(z != NULL);
		b = tally_block_alloc(z, 1, TALLY_SHARED);
		CHECK(b != NULL);
		tally_block_add(b, 0, 1);
		snprintf(r->path, sizeof(r->path), "%s", tally_zone_path(z));
		user = fork();
		CHECK(user >= 0);
		if (user == 0) {
			/* Wait for the creator to be gone, then use the zone
			 * and exit normally. */
			CHECK_EQ(read(hold[0], &c, 1), 1);
			tally_block_add(b, 0, 1);
			CHECK_EQ(tally_block_fetch(b, 0, seen), 0);
			CHECK_EQ(write(added[1], "x", 1), 1);
			CHECK_EQ(read(hold[0], &c, 1), 0);
			exit(0);
		}
		close(added[1]);
		exit(0);
	}
	close(hold[0]);
	close(done[1]);
	close(added[1]);
	CHECK_EQ(waitpid(creator, &status, 0), creator);
	CHECK_CHILD_OK(status);
	CHECK(exists(r->path));
	/* The creator is gone, the child still holds the zone. */
	CHECK(tally_dir_cleanup(NULL) >= 0);
	CHECK(exists(r->path));
	CHECK(tally_dir_expire(NULL, 0, NULL, NULL) >= 0);
	CHECK(exists(r->path));
	CHECK_EQ(write(hold[1], "x", 1), 1);
	/* The child's add went to the file that is still there. */
	CHECK_EQ(read(added[0], &c, 1), 1);
	CHECK_EQ(*seen, 2);
	CHECK(tally_dir_expire(NULL, 0, NULL, NULL) >= 0);
	CHECK(exists(r->path));
	close(hold[1]);
	close(added[0]);
	/* The user holds done[1] until it has exited. */
	CHECK_EQ(read(done[0], &c, 1), 0);
	CHECK_EQ(*seen, 2);
	CHECK(!exists(r->path));
}

/* The reverse: a forked child exits first, the creator last. */
static void creator_outlives_child(void *arg)
{
	struct result *r = arg;
	struct tally_zone *z = tally_zone_create("outlive", NULL);
	int status;
	pid_t pid;

	CHECK(z != NULL);
	snprintf(r->path, sizeof(r->path), "%s", tally_zone_path(z));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(tally_block_alloc(z, 1, TALLY_PERCPU) != NULL);
		exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_CHILD_OK(status);
	CHECK(exists(r->path));
	exit(0);
}

TEST(file_removed_when_last_user_exits)
{
	struct result *r = shared_result();

	CHECK_CHILD_OK(harness_child(creator_outlives_child, r));
	CHECK(r->path[0] != 0);
	CHECK(!exists(r->path));
}

/*
 * Children that exec, or exit with _exit(), stop using the zone: the
 * creator's normal exit removes the file while they still run.
 */
/* Waits until process pid runs "sleep" and sleeps in it. */
static void wait_sleeping(pid_t pid)
{
	double deadline = harness_now() + 60; /* a bound, not a speed */
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (;;) {
		FILE *f = fopen(path, "re");
		int ok = 0;

		if (f) {
			ok = fgets(buf, sizeof(buf), f) &&
			     strstr(buf, "(sleep) S ") != NULL;
			fclose(f);
		}
		if (ok)
			return;
		CHECK(harness_now() < deadline);
		usleep(1000);
	}
}

static void creator_with_exec_child(void *arg)
{
	struct result *r = arg;
	struct tally_zone *z = tally_zone_create("exec", NULL);
	int execd[2];
	pid_t pid;
	char c;

	CHECK(z != NULL);
	CHECK(tally_block_alloc(z, 1, TALLY_PERCPU) != NULL);
	snprintf(r->path, sizeof(r->path), "%s", tally_zone_path(z));
	CHECK_EQ(pipe2(execd, O_CLOEXEC), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	r->pid = pid;
	/* The exec closes the child's copy of execd[1]; the descriptors it
	 * closes are released on its way back to user space, before it
	 * sleeps. */
	close(execd[1]);
	CHECK_EQ(read(execd[0], &c, 1), 0);
	wait_sleeping(pid);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	CHECK_EQ(waitpid(pid, NULL, 0), pid);
	exit(0);
}

TEST(file_removed_despite_exec_and_exit_children)
{
	struct result *r = shared_result();

	CHECK_CHILD_OK(harness_child(creator_with_exec_child, r));
	CHECK(r->path[0] != 0);
	CHECK(!exists(r->path));
	CHECK(r->pid > 0);
	CHECK_EQ(kill(r->pid, 0), 0); /* the exec'd child still runs */
	kill(r->pid, SIGKILL);
}

/* ---- a full file system ---- */

/*
 * Mounts a 512 KiB tmpfs (128 pages) at <dir>/small, runs fn in a fresh
 * process with TALLY_DIR there (and var=val), unmounts.
 */
struct fullfs {
	const char *nslabs;      /* $TALLY_NSLABS or NULL */
	unsigned mode;
	int every_page;          /* also zero and promote: write every page */
	char dir[PATH_MAX];
	struct result *r;
};

static long alloc_until_full(tally_block ***out, unsigned mode)
{
	long n = 0, cap = 1024;
	tally_block **b = malloc((size_t)cap * sizeof(*b));

	CHECK(b != NULL);
	for (;;) {
		tally_block *x = tally_block_alloc(NULL, 1, mode);

		if (!x)
			break;
		if (n == cap) {
			cap *= 2;
			b = realloc(b, (size_t)cap * sizeof(*b));
			CHECK(b != NULL);
		}
		b[n++] = x;
	}
	CHECK_EQ(errno, ENOSPC);
	CHECK(strlen(tally_errmsg()) > 0);
	*out = b;
	return n;
}

struct contend {
	tally_block *b;
	int cpu;
	_Atomic int *stop;
};

static void *contend_thread(void *arg)
{
	struct contend *c = arg;

	harness_pin(c->cpu);
	while (!atomic_load(c->stop))
		for (int i = 0; i < 1000; i++)
			tally_block_add(c->b, 0, 1);
	return NULL;
}

/*
 * Two threads on two CPUs add to b until its slot is promoted.  A loaded
 * machine may not run them at once for a long time: after 20 s the slot
 * is promoted as the first failed compare-and-swap would.
 */
static void promote(tally_block *b)
{
	double deadline = harness_now() + 20;
	_Atomic int stop = 0;
	struct contend c[2] = { { b, 0, &stop }, { b, 1, &stop } };
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, contend_thread, &c[i]), 0);
	while (tally_block_promoted(b, 0) != 1 && harness_now() < deadline)
		usleep(100);
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	if (tally_block_promoted(b, 0) != 1)
		CHECK_EQ(tally_block_promote(b, 0), 0);
	CHECK_EQ(tally_block_promoted(b, 0), 1);
}

static void fullfs_child(void *arg)
{
	struct fullfs *f = arg;
	tally_block **b;
	long n;

	fresh_setenv("TALLY_DIR", f->dir);
	if (f->nslabs)
		fresh_setenv("TALLY_NSLABS", f->nslabs);
	n = alloc_until_full(&b, f->mode);
	CHECK(n > 0);
	snprintf(f->r->msg, sizeof(f->r->msg), "%ld blocks", n);
	if (f->every_page) {
		/* Contend one block of each chunk (their first copies share
		 * a page), and zero every block: the baseline page. */
		uintptr_t last = 0;

		for (long i = 0; i < n; i++) {
			uintptr_t page = (uintptr_t)b[i] & ~(uintptr_t)4095;

			int rc;

			if (f->mode == TALLY_ADAPTIVE && page != last)
				promote(b[i]);
			last = page;
			/* Shared and per-node chunks reserve their baseline
			 * page at their first zero: on a full file system
			 * that may be refused, cleanly. */
			rc = tally_block_zero(b[i], 0, NULL);
			if (f->mode == TALLY_SHARED || f->mode == TALLY_PERNODE)
				CHECK(rc == 0 || rc == -ENOSPC);
			else
				CHECK_EQ(rc, 0);
		}
	}
	/* Every CPU's copy, rseq or fallback (CPUs past TALLY_NSLABS, or
	 * TALLY_NO_RSEQ=1, take the fallback). */
	for (int c = 0; c < harness_ncpus(); c++) {
		harness_pin(c);
		for (long i = 0; i < n; i++)
			tally_block_add(b[i], 0, 1);
	}
	harness_pin(-1);
	for (long i = 0; i < n; i++) {
		int64_t v;

		CHECK_EQ(tally_block_fetch(b[i], 0, &v), 0);
		if (!f->every_page)
			CHECK_EQ(v, harness_ncpus());
	}
	free(b);
}

static void full_fs(const char *nslabs, unsigned mode, int every_page)
{
	struct fullfs f = { nslabs, mode, every_page, "", shared_result() };
	int status;

	subdir(f.dir, sizeof(f.dir), "small");
	CHECK(mkdir(f.dir, 0700) == 0 || errno == EEXIST);
	if (mount("tmpfs", f.dir, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=512k,mode=0700") < 0) {
		if (errno == EPERM)
			harness_skip("cannot mount a tmpfs: %s",
				     strerror(errno));
		harness_fail(__FILE__, __LINE__, "mount: %s", strerror(errno));
	}
	status = harness_child(fullfs_child, &f);
	CHECK_EQ(umount(f.dir), 0);
	if (WIFSIGNALED(status))
		harness_fail(__FILE__, __LINE__, "the writer was killed by "
			     "signal %d (%s) after allocating %s on a full "
			     "file system", WTERMSIG(status),
			     strsignal(WTERMSIG(status)), f.r->msg);
	CHECK_CHILD_OK(status);
}

/* Per-CPU blocks written from every CPU. */
TEST(full_fs_percpu_no_sigbus)
{
	full_fs(NULL, TALLY_PERCPU, 0);
}

/* One slab: the second CPU's adds take the fallback copies. */
TEST(full_fs_fallback_no_sigbus)
{
	full_fs("1", TALLY_PERCPU, 0);
}

/* Every page a chunk can have: baseline, adaptive shared copy and state,
 * rseq copy and fallback copy, for blocks of every chunk. */
TEST(full_fs_every_page_no_sigbus)
{
	full_fs("1", TALLY_ADAPTIVE, 1);
	full_fs(NULL, TALLY_ADAPTIVE, 1);
}

/* Shared and per-node blocks, zeroed too. */
TEST(full_fs_other_modes_no_sigbus)
{
	full_fs(NULL, TALLY_SHARED, 1);
	full_fs(NULL, TALLY_PERNODE, 1);
}

/* ---- creation on a full file system, and one account of space ---- */

/* Mounts a tmpfs of @size at <dir>/@name; skips when that is not allowed. */
static void mount_small(char *dir, size_t n, const char *name,
			const char *size)
{
	subdir(dir, n, name);
	mount_tmpfs_on(dir, size);
}

/* Fills the file system of @dir with a file until @leave bytes are free. */
static void fill(const char *dir, const char *name, uint64_t leave)
{
	char path[PATH_MAX], page[4096] = { 0 };
	struct statvfs sv;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	CHECK(fd >= 0);
	for (;;) {
		CHECK(fstatvfs(fd, &sv) == 0);
		if ((uint64_t)sv.f_bavail * sv.f_frsize <= leave)
			break;
		if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page))
			break;
	}
	close(fd);
}

struct fullcreate {
	char dir[PATH_MAX];
	struct result *r;
};

static void full_create_child(void *arg)
{
	struct fullcreate *f = arg;
	struct tally_metric_desc d = desc(TALLY_COUNTER, "requests_total");
	tally_metric m;

	fresh_setenv("TALLY_DIR", f->dir);
	errno = 0;
	CHECK(tally_zone_create("full", NULL) == NULL);
	CHECK_EQ(errno, ENOSPC);
	snprintf(f->r->msg, sizeof(f->r->msg), "%s", tally_errmsg());
	/* The default zone, as the first registration makes it. */
	CHECK_EQ(register_any(NULL, &d, &m), -ENOSPC);
}

/* No room for a zone's header: ENOSPC naming the directory, the space
 * needed and the space free; no SIGBUS, no file left behind. */
TEST(zone_create_on_full_fs_is_enospc)
{
	static const uint64_t leave[] = { 0, 4096 };

	for (unsigned i = 0; i < 2; i++) {
		struct fullcreate f = { "", shared_result() };
		int status;

		mount_small(f.dir, sizeof(f.dir), "fullcreate", "64k");
		fill(f.dir, "filler", leave[i]);
		int left;

		status = harness_child(full_create_child, &f);
		left = count_entries(f.dir);
		CHECK_EQ(umount(f.dir), 0);
		CHECK_EQ(left, 1); /* the filler alone */
		if (WIFSIGNALED(status))
			harness_fail(__FILE__, __LINE__, "zone creation was "
				     "killed by signal %d (%s)",
				     WTERMSIG(status),
				     strsignal(WTERMSIG(status)));
		CHECK_CHILD_OK(status);
		if (!strstr(f.r->msg, f.dir) || !strstr(f.r->msg, "needs") ||
		    !strstr(f.r->msg, "free"))
			harness_fail(__FILE__, __LINE__, "message \"%s\" does "
				     "not name the directory, the space "
				     "needed and the space free", f.r->msg);
	}
}

/*
 * Two zones of one process (an explicit one and the default one) on one
 * small file system, allocating in turns until both are full: together
 * they never promise more than the file system has, so writing every
 * block from every CPU kills nobody.
 */
static void two_zones_child(void *arg)
{
	struct fullcreate *f = arg;
	struct tally_zone *z[2];
	static tally_block *b[2][4096];
	long n[2] = { 0, 0 };
	int full[2] = { 0, 0 };

	fresh_setenv("TALLY_DIR", f->dir);
	/* One slab: a chunk is 4 pages, of which the adds below write the
	 * rseq and the fallback copy and the zeroing the baseline. */
	fresh_setenv("TALLY_NSLABS", "1");
	z[0] = tally_zone_create("explicit", NULL);
	CHECK(z[0] != NULL);
	z[1] = tally_zone_default();
	CHECK(z[1] != NULL);
	while (!full[0] || !full[1]) {
		for (int k = 0; k < 2; k++) {
			tally_block *x;

			if (full[k] || n[k] == 4096) {
				full[k] = 1;
				continue;
			}
			/* 16 slots: a chunk holds 32 blocks. */
			x = tally_block_alloc(z[k], 16, TALLY_PERCPU);
			if (!x) {
				CHECK_EQ(errno, ENOSPC);
				full[k] = 1;
				continue;
			}
			b[k][n[k]++] = x;
		}
	}
	CHECK(n[0] > 0 && n[1] > 0);
	snprintf(f->r->msg, sizeof(f->r->msg), "%ld + %ld blocks", n[0],
		 n[1]);
	for (int c = 0; c < harness_ncpus(); c++) {
		harness_pin(c);
		for (int k = 0; k < 2; k++)
			for (long i = 0; i < n[k]; i++)
				for (unsigned s = 0; s < 16; s++)
					tally_block_add(b[k][i], s, 1);
	}
	harness_pin(-1);
	for (int k = 0; k < 2; k++)
		for (long i = 0; i < n[k]; i++) {
			int64_t v;

			CHECK_EQ(tally_block_zero(b[k][i], 15, &v), 0);
			CHECK_EQ(v, harness_ncpus());
		}
}

TEST(two_zones_share_one_account_of_space)
{
	struct fullcreate f = { "", shared_result() };
	int status;

	mount_small(f.dir, sizeof(f.dir), "twozones", "1m");
	status = harness_child(two_zones_child, &f);
	CHECK_EQ(umount(f.dir), 0);
	if (WIFSIGNALED(status))
		harness_fail(__FILE__, __LINE__, "the writer was killed by "
			     "signal %d (%s) after allocating %s",
			     WTERMSIG(status), strsignal(WTERMSIG(status)),
			     f.r->msg);
	CHECK_CHILD_OK(status);
}

/*
 * Temporary files of zones being created: one whose creator died (no
 * creation lock, older than a few seconds) is removed by clean-up; one
 * whose creator still holds its lock, and a fresh one, stay.
 */
TEST(cleanup_removes_orphaned_temporary_files)
{
	char dir[PATH_MAX - 64], orphan[PATH_MAX], held[PATH_MAX], fresh[PATH_MAX];
	struct timespec old[2] = { { 0, 0 }, { 0, 0 } };
	int fd, pipefd[2], status;
	struct flock fl;
	pid_t pid;
	char c;

	subdir(dir, sizeof(dir), "tmpclean");
	CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(orphan, sizeof(orphan), "%s/z.99999991.tally.tmp", dir);
	snprintf(held, sizeof(held), "%s/z.99999992.tally.tmp", dir);
	snprintf(fresh, sizeof(fresh), "%s/z.99999993.tally.tmp", dir);
	old[0].tv_sec = old[1].tv_sec = time(NULL) - 3600;
	for (int i = 0; i < 3; i++) {
		const char *p = i == 0 ? orphan : i == 1 ? held : fresh;

		unlink(p);
		fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
		CHECK(fd >= 0);
		CHECK(ftruncate(fd, 8192) == 0);
		close(fd);
		if (i < 2)
			CHECK(utimensat(AT_FDCWD, p, old, 0) == 0);
	}
	/* A creator that still runs holds the creation lock (byte 1). */
	CHECK(pipe(pipefd) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		fd = open(held, O_RDWR);
		memset(&fl, 0, sizeof(fl));
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		fl.l_start = 1;
		fl.l_len = 1;
		if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) < 0)
			_exit(1);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	CHECK_EQ(read(pipefd[0], &c, 1), 1);
	CHECK_EQ(tally_dir_cleanup(dir), 1);
	CHECK(!exists(orphan));
	CHECK(exists(held));
	CHECK(exists(fresh));
	kill(pid, SIGKILL);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	/* Its creator gone, the held one goes too. */
	CHECK_EQ(tally_dir_cleanup(dir), 1);
	CHECK(!exists(held));
	CHECK(unlink(fresh) == 0);
}
