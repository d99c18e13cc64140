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

/* Number of threads/processes for oversubscription tests: scaled down
 * under sanitizers through $TALLY_TEST_SCALE (a divisor, default 1). */
long harness_scale(long n);

/* The segment directory of this test program ($TALLY_DIR). */
const char *harness_dir(void);

#endif
