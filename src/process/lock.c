/*
 * lock.c: the one owner of the one-byte lock protocol of a zone file
 * (docs/FORMAT.md, "Where segments live"), and of the header's robust
 * mutexes.
 *
 * Liveness across processes is carried by open-file-description locks on
 * single bytes, never by pid numbers, which another PID namespace sharing
 * the directory sees differently: the use, creation, creator and attach
 * bytes (0 to 3), the bytes of the fallback copies (TALLY__FB_LOCK_BYTE +
 * f) and of the chunk owner tokens (TALLY__OWNER_LOCK_BYTE + t).  From
 * format 2.6 on they lie in the zone's writers' lock file, which readers
 * cannot open, and readers judge liveness by write locks on the zone file
 * (presence), which a reader cannot take: a reader has no power over a
 * writer (docs/FORMAT.md).  Every other file takes, tests and lets
 * go of them through the functions here, on a description it chose
 * (tally__reopen_fd makes one of a process's own).  The pool and the
 * series table are guarded by process-shared robust mutexes in the
 * header, made and taken here too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "process/process.h"

/*
 * The pool and metrics locks are glibc's pthread_mutex_t, laid out in the
 * shared header (docs/FORMAT.md, "Header"): a writer built on another C
 * library (musl) would take them with another layout and nothing would
 * notice.  Such a build is refused.
 */
#if defined(__linux__) && !defined(__GLIBC__)
#error "tally needs glibc: the zone's header holds glibc's robust mutexes"
#endif

/* A lock of @type on byte @byte, as fcntl() takes it. */
static struct flock one_byte(short type, uint64_t byte)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)byte;
	fl.l_len = 1;
	return fl;
}

int tally__lock_byte(int fd, short type, uint64_t byte, int wait)
{
	struct flock fl = one_byte(type, byte);

	if (!wait)
		return fcntl(fd, F_OFD_SETLK, &fl);
	while (fcntl(fd, F_OFD_SETLKW, &fl) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int tally__byte_locked(int fd, uint64_t byte)
{
	struct flock fl = one_byte(F_WRLCK, byte);

	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return 1;
	return fl.l_type != F_UNLCK;
}

int tally__write_held(int fd, uint64_t start, uint64_t len)
{
	struct flock fl = one_byte(F_RDLCK, start);

	fl.l_len = (off_t)len;
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return 1;
	return fl.l_type != F_UNLCK;
}

int tally__any_lock_held(int fd)
{
	struct flock fl = one_byte(F_WRLCK, 0);

	fl.l_len = 0;
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return 1;
	return fl.l_type != F_UNLCK;
}

int tally__lock_byte_bounded(int fd, short type, uint64_t byte)
{
	struct timespec t0, now, nap = { 0, 1000000 };

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (tally__lock_byte(fd, type, byte, 0) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES && errno != EINTR)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= TALLY__WAIT_BOUND_S) {
			errno = ETIMEDOUT;
			return -1;
		}
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 64000000)
			nap.tv_nsec *= 2;
	}
}

void tally__lockfile_name(char *out, size_t n, uint64_t ino)
{
	snprintf(out, n, TALLY__LOCKFILE_PREFIX "%llu",
		 (unsigned long long)ino);
}

int tally__lockfile_open(int dfd, uint64_t ino, int create)
{
	char name[64];
	struct stat st;
	int fd, flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, err;

	tally__lockfile_name(name, sizeof(name), ino);
	if (create == 2) {
		/* The zone file is new, so a lock file of its inode number is
		 * the leftover of a removed file that had it. */
		unlinkat(dfd, name, 0);
		flags |= O_CREAT | O_EXCL;
	} else if (create) {
		flags |= O_CREAT;
	}
	fd = openat(dfd, name, flags, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077)) {
		err = EPERM;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int tally__use_locked(int fd)
{
	return tally__byte_locked(fd, TALLY__USE_LOCK_BYTE);
}

int tally__creator_locked(int fd)
{
	return tally__byte_locked(fd, TALLY__CREATOR_LOCK_BYTE);
}

int tally__token_locked(int fd, uint32_t token)
{
	return tally__byte_locked(fd, TALLY__OWNER_LOCK_BYTE + token);
}

/*
 * A description of its own (opened with @flags) on the file open as
 * @old: reopened through /proc/self/fd, or by @path when /proc is not
 * mounted (then checked to be the same file).
 */
int tally__reopen_fd(int old, const char *path, int flags)
{
	struct stat a, b;
	char p[64];
	int fd;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", old);
	fd = open(p, flags | O_CLOEXEC);
	if (fd >= 0 || !path[0] || errno == EACCES)
		return fd;
	fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &a) < 0 || fstat(old, &b) < 0 ||
			a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
		close(fd);
		errno = ESTALE;
		fd = -1;
	}
	return fd;
}

int tally__robust_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int rc;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	rc = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return rc;
}

/*
 * Returns 1 when its last owner died holding it: the caller repairs what
 * it guards from the records (which stay valid whatever step the dead
 * process reached), then calls pthread_mutex_consistent().  The wait is
 * bounded (TALLY__WAIT_BOUND_S): a process that holds the mutex for ever,
 * or a participant that wrote a live thread's id into it, makes this
 * return -ETIMEDOUT with a message naming the lock (@which), @zone and
 * the holder.
 * (CLOCK_REALTIME, as pthread_mutex_timedlock takes it: a clock set back
 * meanwhile lengthens the wait, never makes it endless.)
 */
/*
 * pthread_mutex_timedlock(), but under ThreadSanitizer, whose interceptor
 * of it does not take EOWNERDEAD as a lock taken (it then reports the
 * unlock that follows the repair): tries again every few milliseconds
 * instead, as its trylock interceptor knows EOWNERDEAD.
 */
#if defined(__SANITIZE_THREAD__)
#define TALLY__POLL_ROBUST 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TALLY__POLL_ROBUST 1
#endif
#endif
static int timed_lock(pthread_mutex_t *m, const struct timespec *until)
{
#ifdef TALLY__POLL_ROBUST
	struct timespec now, nap = { 0, 2000000 };
	int rc;

	while ((rc = pthread_mutex_trylock(m)) == EBUSY) {
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > until->tv_sec ||
		    (now.tv_sec == until->tv_sec &&
		     now.tv_nsec >= until->tv_nsec))
			return ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
	return rc;
#else
	return pthread_mutex_timedlock(m, until);
#endif
}

int tally__robust_lock(pthread_mutex_t *m, const char *which,
		       const char *zone)
{
	struct timespec t;
	int rc;

	rc = pthread_mutex_trylock(m);
	if (rc == EBUSY) {
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += TALLY__WAIT_BOUND_S;
		rc = timed_lock(m, &t);
	}
	if (rc == EOWNERDEAD)
		return 1;
	if (rc == 0)
		return 0;
	if (rc == ETIMEDOUT) {
		int holder = 0;

#ifdef __GLIBC__
		/* glibc keeps the holder's thread id in the mutex; it is in
		 * the shared mapping, so any participant may have written
		 * it: a hint for the message, nothing more. */
		holder = (int)(__atomic_load_n(&m->__data.__owner,
					       __ATOMIC_RELAXED) & 0x3fffffff);
#endif
		if (holder)
			return tally__fail(ETIMEDOUT, "the %s lock of zone %s "
					   "has been held for more than %d s "
					   "by thread %d: given up", which,
					   zone, TALLY__WAIT_BOUND_S, holder);
		return tally__fail(ETIMEDOUT, "the %s lock of zone %s has been "
				   "held for more than %d s: given up", which,
				   zone, TALLY__WAIT_BOUND_S);
	}
	return tally__fail(rc, "the %s lock of zone %s: %s", which, zone,
			   strerror(rc));
}
