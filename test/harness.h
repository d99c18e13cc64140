/*
 * harness.h: tally's test runner.
 *
 * Each test file is one program; TEST(name) registers a test.  The program
 * runs every test (or those named on its command line), each in a forked
 * child with a time limit, and ends with the line "N passed, N failed".
 * CHECK() failures print file:line and the expression, and fail the test.
 */
#ifndef TALLY_TEST_HARNESS_H
#define TALLY_TEST_HARNESS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef void (*harness_fn)(void);
void harness_register(const char *name, harness_fn fn, unsigned timeout_s);
void harness_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

#define TEST_TIMEOUT(name, seconds)                                          \
	static void test_##name(void);                                       \
	__attribute__((constructor)) static void register_##name(void)       \
	{                                                                    \
		harness_register(#name, test_##name, seconds);               \
	}                                                                    \
	static void test_##name(void)

#define TEST(name) TEST_TIMEOUT(name, 120)

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond))                                                 \
			harness_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); \
	} while (0)

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long _a = (long long)(a), _b = (long long)(b);          \
		if (_a != _b)                                                \
			harness_fail(__FILE__, __LINE__,                     \
				     "%s == %s: %lld != %lld", #a, #b, _a, _b); \
	} while (0)

#define CHECK_STR(a, b)                                                      \
	do {                                                                 \
		const char *_a = (a), *_b = (b);                             \
		if (strcmp(_a, _b) != 0)                                     \
			harness_fail(__FILE__, __LINE__,                     \
				     "%s == %s: \"%s\" != \"%s\"", #a, #b,   \
				     _a, _b);                                \
	} while (0)

/* Number of threads/processes for oversubscription tests: scaled down
 * under sanitizers through $TALLY_TEST_SCALE (a divisor, default 1). */
long harness_scale(long n);

/* The segment directory of this test program ($TALLY_DIR). */
const char *harness_dir(void);

/*
 * Writes to @buf the path of a mount point of the running test:
 * <test dir>/@name.<pid of the test's process>.  Whatever is still mounted
 * there when the test ends, however it ended (a failed CHECK, a signal,
 * its time limit), the harness unmounts and removes: a test's clean-up
 * must not depend on the test getting that far.
 */
void harness_mount_point(char *buf, size_t n, const char *name);

/*
 * Ends the test as skipped (it counts as passed): prints "skip <name>
 * <reason>".  For conditions of the host, never of the code under test.
 */
void harness_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/*
 * Runs fn(arg) in a forked child of the test and returns its wait status;
 * the child exits 0 when fn returns, 1 when a CHECK fails in it.  The
 * harness's parent never calls libtally, so a test starts with libtally
 * uninitialised: a child forked before the test's first tally call may set
 * environment variables (TALLY_NSLABS, TALLY_DIR, ...) that libtally then
 * reads on its first use in that child.
 */
int harness_child(void (*fn)(void *), void *arg);

/* CHECKs that a wait status is a normal exit with status 0. */
#define CHECK_CHILD_OK(status)                                               \
	do {                                                                 \
		int _s = (status);                                           \
		if (!WIFEXITED(_s) || WEXITSTATUS(_s) != 0)                  \
			harness_fail(__FILE__, __LINE__,                     \
				     "child %s %d", WIFEXITED(_s) ?          \
				     "exited with" : "killed by signal",     \
				     WIFEXITED(_s) ? WEXITSTATUS(_s) :       \
				     WTERMSIG(_s));                          \
	} while (0)

/* The CPUs this program may run on (its affinity at start), in order. */
int harness_ncpus(void);
int harness_cpu(int i);

/* Pins the calling thread to the i-th usable CPU, or to all of them when
 * i < 0. */
void harness_pin(int i);

/* CLOCK_MONOTONIC in seconds. */
double harness_now(void);

#endif
