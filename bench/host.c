/*
 * host.c: where a tally-bench run ran, for its text, JSON and SUMMARY
 * output: the CPU's vendor, family, model and model name (from
 * /proc/cpuinfo), the kernel release, whether glibc registered rseq for
 * the thread, the CPUs online and the load average when the figures were
 * printed.  Several targets depend on the microarchitecture (the cost of
 * a locked add, of rseq), so a figure means something only next to the
 * machine it came from.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench.h"

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/* The value of "key<tabs>: value" in the first processor's block. */
static void cpuinfo_field(const char *key, char *out, size_t n)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	size_t k = strlen(key);

	snprintf(out, n, "?");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon;

		if (line[0] == '\n')
			break; /* the end of processor 0's block */
		if (strncmp(line, key, k) != 0 ||
		    (line[k] != '\t' && line[k] != ' ' && line[k] != ':'))
			continue;
		colon = strchr(line, ':');
		if (!colon)
			continue;
		colon++;
		while (*colon == ' ')
			colon++;
		colon[strcspn(colon, "\n")] = 0;
		snprintf(out, n, "%s", colon);
		break;
	}
	fclose(f);
}

/* 1 when glibc registered an rseq area for this thread: it says it has
 * one (__rseq_size, glibc 2.35 and later) and the kernel keeps its CPU
 * id (not -1 "never registered" or -2 "registration failed"). */
static int glibc_rseq(void)
{
#if defined(__x86_64__) && defined(__linux__)
	if (&__rseq_size && &__rseq_offset && __rseq_size >= 20) {
		const volatile int32_t *cpu_id = (const volatile int32_t *)
			((char *)__builtin_thread_pointer() + __rseq_offset + 4);

		return *cpu_id >= 0;
	}
#endif
	return 0;
}

void bench_host(struct bench_host *h)
{
	struct utsname u;
	double load[1];

	memset(h, 0, sizeof(*h));
	cpuinfo_field("vendor_id", h->vendor, sizeof(h->vendor));
	cpuinfo_field("cpu family", h->family, sizeof(h->family));
	cpuinfo_field("model", h->model, sizeof(h->model));
	cpuinfo_field("model name", h->model_name, sizeof(h->model_name));
	if (uname(&u) == 0)
		snprintf(h->kernel, sizeof(h->kernel), "%.63s %.64s", u.sysname,
			 u.release);
	else
		snprintf(h->kernel, sizeof(h->kernel), "?");
	h->glibc_rseq = glibc_rseq();
	h->cpus = sysconf(_SC_NPROCESSORS_ONLN);
	h->load1 = getloadavg(load, 1) == 1 ? load[0] : -1;
}

void bench_print_host(FILE *f)
{
	struct bench_host h;

	bench_host(&h);
	fprintf(f, "ran on: %s family %s model %s (%s), %s, glibc rseq %s, "
		"%ld CPUs, load %.2f\n", h.vendor, h.family, h.model,
		h.model_name, h.kernel,
		h.glibc_rseq ? "registered" : "NOT registered", h.cpus,
		h.load1);
}

void bench_json_host(FILE *f)
{
	struct bench_host h;

	bench_host(&h);
	fputs("\"host\":{\"vendor\":", f);
	bench_json_str(f, h.vendor);
	fputs(",\"family\":", f);
	bench_json_str(f, h.family);
	fputs(",\"model\":", f);
	bench_json_str(f, h.model);
	fputs(",\"model_name\":", f);
	bench_json_str(f, h.model_name);
	fputs(",\"kernel\":", f);
	bench_json_str(f, h.kernel);
	fprintf(f, ",\"glibc_rseq\":%s,\"cpus\":%ld,\"load1\":",
		h.glibc_rseq ? "true" : "false", h.cpus);
	bench_json_num(f, h.load1 >= 0 ? h.load1 : NAN);
	fputc('}', f);
}

/* Tokens of the SUMMARY line: no spaces inside a value. */
void bench_print_summary(const struct bench_doc *d)
{
	struct bench_host h;
	char *s;

	bench_print_host(stdout);
	bench_host(&h);
	for (s = h.kernel; *s; s++)
		if (*s == ' ')
			*s = '-';
	printf("SUMMARY %s cpu=%s-%s-%s kernel=%s glibc_rseq=%d load=%.2f\n",
	       d->summary, h.vendor, h.family, h.model, h.kernel,
	       h.glibc_rseq, h.load1);
}
