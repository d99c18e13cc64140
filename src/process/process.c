/*
 * process.c: who this process is, and whether others are alive.
 *
 * It owns:
 *   - this process's identity (pid and start time), renewed in every
 *     child (hooks.c calls tally__self_get after fork; a child made
 *     without the hooks is caught by the getpid() key all the same);
 *   - whether another process is alive (tally__proc_alive), the first
 *     liveness test of the pool's chunk owners (their token locks are
 *     the second: a pid means something else in another PID namespace)
 *     and, for files of format 2.0 only, the reader's.
 * Whether a zone file's creator still runs, whether a process still uses
 * it, and whether the process of a chunk owner token still runs are
 * asked of locks on the file instead (lock.c).  It calls nothing else in
 * libtally: every file may ask it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "process/process.h"

static struct tally__self self;

uint64_t tally__proc_start(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* The name (field 2) may hold spaces and parentheses: skip to the
	 * last ')', then field 22 is the 20th field after it. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &start);
	return start;
}

/*
 * The identity is keyed on getpid(): the fork hook renews it, and a child
 * made without the hooks (a raw clone system call) is caught here all
 * the same.  Threads racing to fill it in write the same values.
 */
void tally__self_get(struct tally__self *out)
{
	int pid = (int)getpid();

	if (__atomic_load_n(&self.pid, __ATOMIC_ACQUIRE) != pid) {
		uint64_t start = tally__proc_start(pid);

		__atomic_store_n(&self.start, start, __ATOMIC_RELAXED);
		__atomic_store_n(&self.pid, pid, __ATOMIC_RELEASE);
	}
	out->pid = pid;
	out->start = __atomic_load_n(&self.start, __ATOMIC_RELAXED);
}

int tally__proc_alive(int pid, uint64_t start)
{
	uint64_t now;

	if (pid <= 0)
		return 0;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	/* The pid is taken; by the same process only if it started at the
	 * same time (an unknown start time, 0, cannot tell a recycled pid:
	 * it counts as alive, which never takes anything from the living). */
	now = tally__proc_start(pid);
	return start == 0 || now == 0 || now == start;
}

void tally__proc_name(char out[16])
{
	char buf[32] = "";
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		n = 0;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	memset(out, 0, 16);
	snprintf(out, 16, "%.15s", buf[0] ? buf : "process");
}
