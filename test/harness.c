/*
 * harness.c: runs the tests registered with TEST(), each in a child
 * process with a time limit, and prints one line per test and a summary.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAX_TESTS 256

static struct {
	const char *name;
	harness_fn fn;
	unsigned timeout;
} tests[MAX_TESTS];
static int ntests;

void harness_register(const char *name, harness_fn fn, unsigned timeout_s)
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "harness: too many tests\n");
		exit(2);
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	tests[ntests].timeout = timeout_s;
	ntests++;
}

void harness_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "  %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

long harness_scale(long n)
{
	const char *s = getenv("TALLY_TEST_SCALE");
	long d = s ? atol(s) : 1;

	if (d < 1)
		d = 1;
	n /= d;
	return n < 1 ? 1 : n;
}

double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define SKIP_STATUS 77

void harness_skip(const char *fmt, ...)
{
	va_list ap;

	printf("  SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	_exit(SKIP_STATUS);
}

int harness_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		harness_fail(__FILE__, __LINE__, "fork failed");
	if (pid == 0) {
		fn(arg);
		fflush(stdout);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		;
	return status;
}

static cpu_set_t start_cpus;
static int ncpus, cpus[CPU_SETSIZE];

static void read_cpus(void)
{
	if (sched_getaffinity(0, sizeof(start_cpus), &start_cpus) < 0) {
		perror("sched_getaffinity");
		exit(2);
	}
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &start_cpus))
			cpus[ncpus++] = c;
}

int harness_ncpus(void)
{
	return ncpus;
}

int harness_cpu(int i)
{
	return cpus[i % ncpus];
}

void harness_pin(int i)
{
	cpu_set_t set;
	int rc;

	if (i < 0) {
		set = start_cpus;
	} else {
		CPU_ZERO(&set);
		CPU_SET(harness_cpu(i), &set);
	}
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc)
		harness_fail(__FILE__, __LINE__, "pthread_setaffinity_np: %s",
			     strerror(rc));
}

/* The process of the running test (in the test and its children). */
static pid_t test_pid;

void harness_mount_point(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s.%d", harness_dir(), name, (int)test_pid);
}

/*
 * Unmounts and removes the mount points of test process @pid that are
 * still mounted (see harness_mount_point()).  The harness's parent does it
 * after the test's process group is gone, so that no failure of the test
 * can skip it.  Only mount points carrying @pid are touched: another test
 * program may share $TALLY_DIR.
 */
static void unmount_leftovers(pid_t pid)
{
	char line[4096], mp[PATH_MAX], prefix[PATH_MAX], suffix[32];
	size_t np, ns;
	FILE *f;
	int again;

	snprintf(prefix, sizeof(prefix), "%s/", harness_dir());
	snprintf(suffix, sizeof(suffix), ".%d", (int)pid);
	np = strlen(prefix);
	ns = strlen(suffix);
	/* Read again after each unmount: a mount may hide another below. */
	do {
		again = 0;
		f = fopen("/proc/self/mountinfo", "re");
		if (!f)
			return;
		while (fgets(line, sizeof(line), f)) {
			size_t n;

			/* Field 5 is the mount point; the test's names have
			 * no space to be escaped. */
			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
				continue;
			n = strlen(mp);
			if (n <= np + ns || strncmp(mp, prefix, np) != 0 ||
			    strcmp(mp + n - ns, suffix) != 0)
				continue;
			if (umount2(mp, MNT_DETACH) == 0) {
				fprintf(stderr, "harness: unmounted %s, which "
					"the test left mounted\n", mp);
				if (rmdir(mp) < 0)
					fprintf(stderr, "harness: cannot remove "
						"%s: %s\n", mp,
						strerror(errno));
				again = 1;
			} else {
				fprintf(stderr, "harness: cannot unmount %s: "
					"%s\n", mp, strerror(errno));
			}
			break;
		}
		fclose(f);
	} while (again);
}

static int run(int i)
{
	double t0 = harness_now();
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		test_pid = getpid();
		setpgid(0, 0);
		alarm(tests[i].timeout);
		tests[i].fn();
		fflush(stdout);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		;
	/* Reap anything the test left behind in its process group, then
	 * the file systems it left mounted. */
	kill(-pid, SIGKILL);
	unmount_leftovers(pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_STATUS) {
		printf("skip %-40s %7.2fs\n", tests[i].name, harness_now() - t0);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok   %-40s %7.2fs\n", tests[i].name, harness_now() - t0);
		return 0;
	}
	if (WIFSIGNALED(status))
		printf("FAIL %-40s killed by signal %d%s\n", tests[i].name,
		       WTERMSIG(status),
		       WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
	else
		printf("FAIL %-40s exit %d\n", tests[i].name,
		       WEXITSTATUS(status));
	return 1;
}

/* Unless $TALLY_DIR is set, give the tests a directory of their own in
 * /dev/shm, removed at the end.  libtally reads its environment on first
 * use, so this must happen before any tally call.  Its name holds the
 * harness's pid (tools/run-tests.sh tells by it whether a directory is
 * still in use) and a part of mkdtemp's: a directory left by a harness
 * that was killed never stops a later one that got the same pid. */
static char own_dir[64];

static void make_dir(void)
{
	if (getenv("TALLY_DIR"))
		return;
	snprintf(own_dir, sizeof(own_dir), "/dev/shm/tally-test.%d.XXXXXX",
		 (int)getpid());
	if (!mkdtemp(own_dir)) {
		perror(own_dir);
		own_dir[0] = 0;
		exit(2);
	}
	setenv("TALLY_DIR", own_dir, 1);
}

static void remove_dir(void)
{
	char cmd[128];

	if (!own_dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", own_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "harness: could not remove %s\n", own_dir);
}

const char *harness_dir(void)
{
	return getenv("TALLY_DIR");
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "-l"))) {
		for (int i = 0; i < ntests; i++)
			printf("%s\n", tests[i].name);
		return 0;
	}
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s [--list] [test-name...]\n"
		       "Runs the named tests, or all of them.\n", argv[0]);
		return 0;
	}
	read_cpus();
	make_dir();
	for (int i = 0; i < ntests; i++) {
		int wanted = argc == 1;

		for (int a = 1; a < argc; a++)
			wanted |= !strcmp(argv[a], tests[i].name);
		if (!wanted)
			continue;
		if (run(i))
			failed++;
		else
			passed++;
	}
	for (int a = 1; a < argc; a++) {
		int known = 0;

		for (int i = 0; i < ntests; i++)
			known |= !strcmp(argv[a], tests[i].name);
		if (!known) {
			fprintf(stderr, "%s: no test named %s\n", argv[0], argv[a]);
			failed++;
		}
	}
	remove_dir();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
