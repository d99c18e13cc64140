/*
 * config.c: process-wide settings read once from the environment, the
 * rseq set-up of the update path, size classes, and error messages.
 *
 * Environment (each value is checked; a bad one makes zone creation fail
 * with EINVAL and a message naming the variable):
 *   TALLY_DIR         directory of segment files (default: see
 *                     default_dir below)
 *   TALLY_NSLABS      per-CPU copies per slot, 1..4096 (default: the
 *                     number of possible CPUs)
 *   TALLY_NODES       force this many NUMA nodes (CPU c on node c % N)
 *   TALLY_NO_RSEQ=1   never use rseq: add to a fallback copy the thread owns
 *                     (0 or 1)
 *   TALLY_ZONE_SLOTS  default zone capacity in slots
 *   TALLY_ZONE_SERIES default zone capacity in named series
 *   TALLY_KEEP=1      keep segment files when their processes exit (0 or 1)
 *   TALLY_RETAIN      how long dead writers' segments stay (default 1h)
 *   TALLY_GROUP       share segment files read-only with this group
 *                     (files 0640, a default directory 0750)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <grp.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "process/process.h"
#include "tally/reader.h"

struct tally__env tally__env;
struct tally__cfg tally__cfg = {
	.rseq_off = 0, .rseq_limit = 0, .nslabs = 1, .promoted = 1,
	.nnodes = 1, .cpu_node = tally__env.cpu_node,
};
/* The rseq ABI the inline add writes in asm (tally/arch/add.h), against
 * the kernel's and glibc's headers, and the thread's stand-in, which
 * plays an rseq area when the process does not use rseq. */
#if defined(__has_include)
#if __has_include(<linux/rseq.h>)
#include <linux/rseq.h>
_Static_assert(offsetof(struct rseq, cpu_id) == TALLY__RSEQ_CPU_ID_OFF &&
	       offsetof(struct rseq, rseq_cs) == TALLY__RSEQ_CS_OFF,
	       "the rseq offsets of tally/arch/add.h");
#endif
#if __has_include(<sys/rseq.h>) && defined(__x86_64__)
#include <sys/rseq.h>
#ifdef RSEQ_SIG
_Static_assert(RSEQ_SIG == TALLY__RSEQ_SIG, "glibc's rseq signature");
#endif
#endif
#endif
_Static_assert(offsetof(struct tally__thread, cpu_id) ==
		       TALLY__RSEQ_CPU_ID_OFF &&
	       offsetof(struct tally__thread, rseq_cs) == TALLY__RSEQ_CS_OFF,
	       "the stand-in's rseq fields");
/* The settings' loads must never have a copy's page offset (add.h). */
_Static_assert(TALLY__CFG_PAGE_OFF >= TALLY_CHUNK_SLOTS * 8u,
	       "the update path's settings overlap the slots' offsets");
_Static_assert(sizeof(struct tally__cfg) == TALLY__STRIDE,
	       "the update path's settings leave their page");

/*
 * Where the update path's restartable sequence finds "its" rseq area when
 * rseq is not used: the thread's stand-in (struct tally__thread), whose CPU
 * id (-1) is above any limit, so the sequence always goes to the fallback,
 * and whose rseq_cs field absorbs the sequence's store.  Never glibc's
 * area, and never another TCB field: rseq_off must always point at the
 * calling thread's stand-in or glibc's area.
 */
__thread struct tally__thread tally__thread
	__attribute__((tls_model("initial-exec"))) = { .cpu_id = UINT32_MAX };

/* glibc >= 2.35 exports these; weak so that an older glibc still links. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/*
 * This thread's last error message, and whether it still stands: a call
 * that succeeds clears the flag (tally__ok()), so that tally_errmsg() never
 * shows a message a success came after.  The flag alone is initial-exec,
 * one byte of static TLS, so that clearing it costs a store and no
 * __tls_get_addr() on paths that run often (a label family's child lookup).
 */
static __thread char errbuf[512];
__thread char tally__err_set __attribute__((tls_model("initial-exec")));

int tally__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	tally__err_set = 1;
	errno = err;
	return -err;
}

const char *tally_errmsg(void)
{
	return tally__err_set ? errbuf : "";
}

/* Parse an unsigned decimal in [lo, hi]; -1 when it is not one. */
static long long parse_range(const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	return v;
}

static void env_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* A yes/no variable: unset or empty is 0; "0" and "1" are themselves;
 * anything else is refused. */
static int parse_flag(const char *name)
{
	const char *s = getenv(name);

	if (!s || !*s || strcmp(s, "0") == 0)
		return 0;
	if (strcmp(s, "1") == 0)
		return 1;
	env_error("%s=%.40s: expected 0 or 1", name, s);
	return 0;
}
static void env_error(const char *fmt, ...)
{
	va_list ap;

	if (tally__env.error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(tally__env.error, sizeof(tally__env.error), fmt, ap);
	va_end(ap);
}

/*
 * $TALLY_RETAIN: how long the segment of a dead writer stays, from the
 * moment a clean-up first found it dead (reader/directory.c).  A whole
 * number of seconds, or with a unit (s, m, h, d); 0 removes dead segments
 * at once; "forever" (or "off") keeps them.  Unset or empty: the default,
 * long enough to read a crashed writer's last values.  Returns seconds, -1
 * for forever, or TALLY__RETAIN_BAD with the reason in @err.  Readers parse
 * it on each call (tally_dir_expire), writers once.
 */
long long tally__parse_retain(const char *s, char *err, size_t n)
{
	static const struct { char unit; long long mult; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 },
	};
	long long v = 0, mult = 1;
	const char *p = s;

	if (!s || !*s)
		return TALLY__RETAIN_DEFAULT;
	if (strcmp(s, "forever") == 0 || strcmp(s, "off") == 0)
		return -1;
	for (; *p >= '0' && *p <= '9' && v <= TALLY__RETAIN_MAX; p++)
		v = v * 10 + (*p - '0');
	for (size_t i = 0; *p && i < sizeof(units) / sizeof(units[0]); i++)
		if (p[0] == units[i].unit && !p[1]) {
			mult = units[i].mult;
			p++;
		}
	if (p == s || *p || v > TALLY__RETAIN_MAX / mult) {
		snprintf(err, n, "TALLY_RETAIN=%.40s: expected a duration "
			 "such as 3600, 90m, 1h or 7d (at most 3650d), 0 to "
			 "remove dead writers' segments at once, or "
			 "\"forever\"", s);
		return TALLY__RETAIN_BAD;
	}
	return v * mult;
}

/*
 * $TALLY_GROUP: a group name or number that segment files are shared
 * with (read-only).  The process must belong to it, or be root.
 */
static long parse_group(const char *s)
{
	char buf[4096];
	struct group g, *r = NULL;
	long long v = parse_range(s, 0, 0x7fffffff);
	gid_t gid;

	if (v < 0) {
		if (getgrnam_r(s, &g, buf, sizeof(buf), &r) != 0 || !r) {
			env_error("TALLY_GROUP=%.40s: no such group", s);
			return -1;
		}
		gid = r->gr_gid;
	} else {
		gid = (gid_t)v;
	}
	if (geteuid() != 0 && gid != getegid()) {
		gid_t groups[256];
		int n = getgroups(256, groups), member = 0;

		for (int i = 0; i < n; i++)
			member |= groups[i] == gid;
		if (!member) {
			env_error("TALLY_GROUP=%.40s: this process is not a "
				  "member of group %u", s, (unsigned)gid);
			return -1;
		}
	}
	return (long)gid;
}

/* Fill cpu_node from /sys/devices/system/node/node<N>/cpulist. */
static unsigned read_numa_map(unsigned nslabs)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;
	unsigned nnodes = 1;

	if (!d)
		return 1;
	while ((e = readdir(d))) {
		char path[300], buf[4096], *p;
		unsigned node;
		FILE *f;

		if (sscanf(e->d_name, "node%u", &node) != 1 || node >= 1024)
			continue;
		snprintf(path, sizeof(path),
			 "/sys/devices/system/node/%s/cpulist", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
		for (p = buf; *p && *p != '\n';) {
			char *end;
			unsigned long a = strtoul(p, &end, 10), b = a;

			if (end == p)
				break;
			if (*end == '-')
				b = strtoul(end + 1, &end, 10);
			for (unsigned long c = a; c <= b && c < nslabs; c++)
				tally__env.cpu_node[c] = (uint16_t)node;
			if (node + 1 > nnodes)
				nnodes = node + 1;
			p = *end == ',' ? end + 1 : end;
		}
	}
	closedir(d);
	return nnodes;
}

/*
 * Size classes: a chunk holds blocks of one size; a request is rounded up
 * to the next class, so at most a quarter of a block is slack above 16.
 */
const uint16_t tally__class_size[TALLY__NCLASS] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128,
	160, 192, 224, 256, 320, 384, 448, 504,
};

/* class_of[n]: the size class of a block of n slots. */
uint8_t tally__class_tab[TALLY_BLOCK_MAX_SLOTS + 1];

static void init_classes(void)
{
	unsigned c = 0;

	for (unsigned n = 1; n <= TALLY_BLOCK_MAX_SLOTS; n++) {
		while (tally__class_size[c] < n)
			c++;
		tally__class_tab[n] = (uint8_t)c;
	}
}

/* $TALLY_NSLABS, $TALLY_NODES and the NUMA map. */
static void read_cpus(struct tally__env *e)
{
	const char *s;
	long long v;

	e->nslabs = (unsigned)get_nprocs_conf();
	if (e->nslabs < 1)
		e->nslabs = 1;
	if (e->nslabs > TALLY__MAX_SLABS)
		e->nslabs = TALLY__MAX_SLABS;
	if ((s = getenv("TALLY_NSLABS"))) {
		v = parse_range(s, 1, TALLY__MAX_SLABS);
		if (v < 0)
			env_error("TALLY_NSLABS=%.40s: expected a whole number "
				  "from 1 to %u", s, TALLY__MAX_SLABS);
		else
			e->nslabs = (unsigned)v;
	}
	e->nnodes = read_numa_map(e->nslabs);
	if ((s = getenv("TALLY_NODES"))) {
		v = parse_range(s, 1, e->nslabs);
		if (v < 0) {
			env_error("TALLY_NODES=%.40s: expected a whole number "
				  "from 1 to the slab count (%u)", s, e->nslabs);
		} else {
			e->nnodes = (unsigned)v;
			for (unsigned c = 0; c < e->nslabs; c++)
				e->cpu_node[c] = (uint16_t)(c % e->nnodes);
		}
	}
	if (e->nnodes > e->nslabs) /* nodes without CPUs get no copy */
		e->nnodes = e->nslabs;
	for (unsigned c = 0; c < e->nslabs; c++)
		if (e->cpu_node[c] >= e->nnodes)
			e->cpu_node[c] = 0;
}

/*
 * The default directory, when $TALLY_DIR is not set.  /dev/shm/tally-<uid>
 * is a name in a directory every user can write to: another user can
 * create it first (0777, or any mode) and take it, as with the JVM's
 * hsperfdata.  $XDG_RUNTIME_DIR, where it is a directory of this user
 * that nobody else can enter (systemd's per-user tmpfs, /run/user/<uid>),
 * is a place nobody else can create a name in: its "tally" subdirectory
 * is the default there.  Readers read both places (reader/directory.c), since
 * the writers of a user do not all have $XDG_RUNTIME_DIR (a system
 * service running as that user has none).  With $TALLY_GROUP, files are
 * for a group that cannot enter $XDG_RUNTIME_DIR: /dev/shm/tally-<uid>
 * then.
 */
static int private_dir(const char *d)
{
	struct stat st;
	int fd, ok;

	if (!d || d[0] != '/' || strlen(d) >= PATH_MAX - 80)
		return 0;
	fd = open(d, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ok = fstat(fd, &st) == 0 && st.st_uid == geteuid() &&
	     !(st.st_mode & 077);
	close(fd);
	return ok;
}

static void default_dir(struct tally__env *e)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	char run[64];

	e->dir_is_default = 1;
	snprintf(e->dir, sizeof(e->dir), "/dev/shm/tally-%u",
		 (unsigned)getuid());
	e->dir_alt[0] = 0;
	if (e->gid < 0 && private_dir(x)) {
		snprintf(e->dir_alt, sizeof(e->dir_alt), "%s", e->dir);
		snprintf(e->dir, sizeof(e->dir), "%s/tally", x);
		return;
	}
	/* No $XDG_RUNTIME_DIR here (a cron job, a system service), but the
	 * user's runtime directory exists: a reader also looks where this
	 * user's writers with $XDG_RUNTIME_DIR write. */
	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)geteuid());
	if ((!x || !*x) && private_dir(run))
		snprintf(e->dir_alt, sizeof(e->dir_alt), "%s/tally", run);
}

int tally_default_dir(unsigned i, char *buf, size_t n)
{
	const char *d;

	tally__init();
	d = i == 0 ? tally__env.dir : i == 1 ? tally__env.dir_alt : "";
	if (!buf && n)
		return tally__fail(EINVAL, "tally_default_dir: NULL buffer");
	if (!d[0])
		return tally__fail(ENOENT, "tally_default_dir: no default "
				   "directory %u", i);
	if (strlen(d) >= n)
		return tally__fail(ERANGE, "tally_default_dir: %zu bytes are "
				   "too few for %s", n, d);
	memcpy(buf, d, strlen(d) + 1);
	return 0;
}

/* $TALLY_ZONE_SLOTS, $TALLY_ZONE_SERIES, $TALLY_KEEP, $TALLY_RETAIN,
 * $TALLY_ZONE, $TALLY_GROUP and $TALLY_DIR. */
static void read_files(struct tally__env *e)
{
	char msg[200];
	const char *s;
	long long v;

	e->default_capacity = 4u << 20;
	if ((s = getenv("TALLY_ZONE_SLOTS"))) {
		v = parse_range(s, 1, 1ll << 32);
		if (v < 0)
			env_error("TALLY_ZONE_SLOTS=%.40s: expected a whole "
				  "number from 1 to 4294967296", s);
		else
			e->default_capacity = (size_t)v;
	}
	e->default_series = 1u << 20;
	if ((s = getenv("TALLY_ZONE_SERIES"))) {
		v = parse_range(s, 1, 1ll << 24);
		if (v < 0)
			env_error("TALLY_ZONE_SERIES=%.40s: expected a whole "
				  "number from 1 to 16777216", s);
		else
			e->default_series = (size_t)v;
	}
	e->keep = parse_flag("TALLY_KEEP");
	e->retain_s = tally__parse_retain(getenv("TALLY_RETAIN"), msg,
					  sizeof(msg));
	if (e->retain_s == TALLY__RETAIN_BAD) {
		env_error("%s", msg);
		e->retain_s = TALLY__RETAIN_DEFAULT;
	}
	if ((s = getenv("TALLY_ZONE")) && *s) {
		if (!tally__valid_zone_name(s))
			env_error("TALLY_ZONE=%.60s: expected a zone name, 1 to "
				  "63 characters of [A-Za-z0-9_.-] not starting "
				  "with a dot", s);
		else
			snprintf(e->zone, sizeof(e->zone), "%s", s);
	}
	e->gid = -1;
	if ((s = getenv("TALLY_GROUP")) && *s)
		e->gid = parse_group(s);
	if ((s = getenv("TALLY_DIR")) && *s) {
		if (s[0] != '/' || strlen(s) >= sizeof(e->dir) - 80)
			env_error("TALLY_DIR=%.60s: expected an absolute path "
				  "shorter than %zu bytes", s,
				  sizeof(e->dir) - 80);
		else
			snprintf(e->dir, sizeof(e->dir), "%s", s);
	} else {
		default_dir(e);
	}
}

/* The update path's settings: rseq (glibc's area) unless unavailable or
 * $TALLY_NO_RSEQ says no; published last. */
static void set_update_path(const struct tally__env *e)
{
	int rseq_ok = &__rseq_size && &__rseq_offset && __rseq_size >= 20 &&
		      !parse_flag("TALLY_NO_RSEQ");

	tally__cfg.nslabs = e->nslabs;
	tally__cfg.nnodes = e->nnodes;
	tally__cfg.cpu_node = e->cpu_node;
#if defined(__x86_64__)
	tally__cfg.thread_off = (long)((char *)&tally__thread -
				       (char *)__builtin_thread_pointer());
	tally__cfg.rseq_off = rseq_ok ? (long)__rseq_offset :
			      tally__cfg.thread_off;
#endif
	__atomic_store_n(&tally__cfg.rseq_limit, rseq_ok ? e->nslabs : 0,
			 __ATOMIC_RELEASE);
}

static void init_once(void)
{
	init_classes();
	read_cpus(&tally__env);
	read_files(&tally__env);
	set_update_path(&tally__env);
}

/*
 * 0: not read, 1: being read by some thread, 2: done.  Not pthread_once:
 * a fork() while another thread runs the initialisation would leave the
 * child waiting for a thread it does not have, so the child resets an
 * unfinished state (init_postfork_child) and reads it again.
 */
static _Atomic int init_state;

static void init_postfork_child(void)
{
	if (atomic_load(&init_state) == 1)
		atomic_store(&init_state, 0);
}

void tally__init(void)
{
	int expected = 0;

	if (atomic_load_explicit(&init_state, memory_order_acquire) == 2)
		return;
	tally__hook_child(TALLY__CHILD_INIT, init_postfork_child);
	if (atomic_compare_exchange_strong(&init_state, &expected, 1)) {
		init_once();
		atomic_store_explicit(&init_state, 2, memory_order_release);
		return;
	}
	while (atomic_load_explicit(&init_state, memory_order_acquire) != 2)
		sched_yield();
}

/* Zone names ($TALLY_ZONE, tally_zone_create()). */
int tally__valid_zone_name(const char *name)
{
	size_t n = 0;

	if (!name || name[0] == '.' || name[0] == 0)
		return 0;
	for (const char *p = name; *p; p++, n++) {
		char c = *p;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return 0;
	}
	return n <= 63;
}

int tally_rseq_active(void)
{
#if defined(__x86_64__) && !defined(TALLY_NO_RSEQ_INLINE)
	const volatile unsigned *cpu;

	tally__init();
	if (!tally__cfg.rseq_limit)
		return 0;
	cpu = (const volatile unsigned *)((char *)__builtin_thread_pointer() +
					  tally__cfg.rseq_off + 4);
	return *cpu < tally__cfg.rseq_limit;
#else
	return 0;
#endif
}
