/*
 * directory.c: walking a directory of segments, and cleaning it up
 * (segments of processes that are gone, temporaries of dead creators),
 * at once or after a retention.
 *
 * Dead is a state a segment never leaves: nobody holds its creator lock
 * or a use lock (process/lock.c), and nobody can take them again (only the
 * creator and the children it forks do, while it lives).  When it died
 * is not recorded anywhere: a SIGKILLed writer writes nothing, and on
 * tmpfs stores through a mapping do not touch the file's times.  So the
 * retention counts from the first clean-up that finds a segment dead: it
 * stamps the file's mtime with that moment and takes away its owner's
 * write permission, which marks the stamp (a live writer's file is 0600
 * or 0640).  A dead segment is removed once its stamp is older than the
 * retention, so a crashed writer's values stay readable at least that
 * long after the crash.
 *
 * A walk reads each file once (by device and inode), whatever its names:
 * a writer may hard-link its segment under many names, and a reader's
 * cost must follow what was written, not the names.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "reader/segment.h"

/* What clean-up removes, and whom it tells. */
struct cleanup {
	tally_clean_fn fn;
	void *arg;
	long long retain_s;  /* 0: at once; -1: never */
	time_t now;
};

#define TMP_ORPHAN_AGE 10 /* seconds: older unlocked temporaries are dead */

/*
 * Is @name an orphan: a regular file of this user, a few seconds old (so
 * that the instant between its creation and its first lock is no risk),
 * that nobody holds the lock of: @byte's write lock, or any lock (@byte
 * ~0)?  *@checked is what was checked.
 */
static int orphaned(int dfd, const char *name, uint64_t byte,
		    struct stat *checked)
{
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
				   O_NONBLOCK),
	    orphan = 0;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && time(NULL) - st.st_mtime > TMP_ORPHAN_AGE &&
	    !(byte == ~0ull ? tally__any_lock_held(fd) :
			      tally__write_held(fd, byte, 1))) {
		orphan = 1;
		*checked = st;
	}
	close(fd);
	return orphan;
}

/*
 * A temporary file of a zone being created (*.tally.tmp): its creator holds
 * a write lock on byte 1 from the moment it exists until it is published
 * (core/zone-create.c).  Nobody holding it, it is an orphan.
 */
static int orphaned_tmp(int dfd, const char *name, struct stat *checked)
{
	return orphaned(dfd, name, TALLY__CREATION_LOCK_BYTE, checked);
}

/*
 * A writers' lock file (format 2.6, process/lock.c) that nobody holds a
 * lock on: the zone file it served is gone or dead, and a writer that
 * needs it again makes it anew.
 */
static int orphaned_lock_file(int dfd, const char *name, struct stat *checked)
{
	return orphaned(dfd, name, ~0ull, checked);
}

/*
 * Where clean-up reads the writers' locks of segment @s: its lock file
 * (format 2.6; made when missing, as writers do, so that an attaching
 * writer and this clean-up meet on the same attach lock), else the
 * segment itself.  Sets *@lkfd (-1: the segment).  0 when the lock file
 * cannot be opened: then nothing is decided about @s.
 */
static int writers_locks(int dfd, struct tally_seg *s, const struct stat *st,
			 int *lkfd)
{
	*lkfd = -1;
	if (s->hdr.minor < TALLY__FMT_MINOR_LOCK_FILE)
		return 1;
	*lkfd = tally__lockfile_open(dfd, (uint64_t)st->st_ino, 1);
	return *lkfd >= 0;
}

/*
 * A shared zone is attached by name (core/zone-attach.c): hold its attach
 * lock (a read lock, through the descriptor @fd of its lock file, or of
 * the segment, until it is closed) while deciding whether to remove it,
 * so that no process is between finding the file and holding its use
 * lock.  0 when a process is attaching it right now: leave it be.
 */
static int attach_locked(struct tally_seg *s, int fd)
{
	if (!(s->hdr.flags & TALLY__HDR_SHARED))
		return 1;
	return tally__lock_byte(fd, F_RDLCK, TALLY__ATTACH_LOCK_BYTE, 0) == 0;
}

/* Does a process use segment @s?  From 2.6 on, the use and creator locks
 * lie in its lock file @lkfd, where no reader can hold them. */
static int seg_used(struct tally_seg *s, int lkfd)
{
	if (lkfd < 0)
		return tally__seg_used(s);
	return tally__use_locked(lkfd) || tally__creator_locked(lkfd) ||
	       tally__seg_used(s);
}

static int has_suffix(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n > k && strcmp(s + n - k, suffix) == 0;
}

/*
 * A directory being walked: the descriptor it was checked on, which every
 * later open, stat and unlink is relative to.  Whoever can rename the
 * directory or one above it may swap it for a symbolic link or another
 * directory at any moment; the walk never resolves its path again, so it
 * stays in the directory it checked.
 */
struct dir_handle {
	DIR *d;
	int fd;
	struct stat st;
};

/*
 * Open @dir, which must be a real directory (not a symbolic link) that
 * the reader may walk (tally__dir_allowed: the writers' rule).
 */
static int open_dir(const char *dir, const struct tally_open_opts *opts,
		    struct dir_handle *h)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
	    rfd, err;

	if (fd < 0) {
		err = errno;
		if (err == ELOOP || err == ENOTDIR) {
			struct stat st;

			return tally__fail(ENOTDIR, "%s: not a directory%s",
					   dir, lstat(dir, &st) == 0 &&
					   S_ISLNK(st.st_mode) ?
					   " (a symbolic link)" : "");
		}
		return tally__fail(err, "%s: %s", dir, strerror(err));
	}
	if (fstat(fd, &h->st) < 0) {
		err = tally__fail(errno, "%s: %s", dir, strerror(errno));
		close(fd);
		return err;
	}
	if ((err = tally__dir_allowed(&h->st, dir, opts)) < 0) {
		close(fd);
		return err;
	}
	/* Opened with O_PATH, so that a directory we may not list is still
	 * judged by its owner and mode; listed through that descriptor. */
	rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	err = errno;
	close(fd);
	/* Allowed (allow_uid, say) but not listable: the file system has
	 * the last word, and the way to share is a group. */
	if (rfd < 0 && err == EACCES && h->st.st_uid != geteuid())
		return tally__fail(err, "%s: permission denied: uid %u's "
				   "directory, mode %04o, group %u; to be "
				   "read by another user, its writers share "
				   "it with a group this user is in "
				   "(TALLY_GROUP: 0750, files 0640), read with "
				   "allow_group (--allow-group)", dir,
				   (unsigned)h->st.st_uid,
				   (unsigned)(h->st.st_mode & 07777),
				   (unsigned)h->st.st_gid);
	if (rfd < 0)
		return tally__fail(err, "%s: %s", dir, strerror(err));
	fd = rfd;
	h->d = fdopendir(fd);
	if (!h->d) {
		err = tally__fail(errno, "%s: %s", dir, strerror(errno));
		close(fd);
		return err;
	}
	h->fd = fd;
	return 0;
}

/* "1h", "90m", "45s": the retention, for a message. */
static void fmt_duration(char *out, size_t n, long long s)
{
	if (s % 86400 == 0)
		snprintf(out, n, "%lldd", s / 86400);
	else if (s % 3600 == 0)
		snprintf(out, n, "%lldh", s / 3600);
	else if (s % 60 == 0)
		snprintf(out, n, "%lldm", s / 60);
	else
		snprintf(out, n, "%llds", s);
}

/*
 * A dead segment under a retention: removed (returns 1) when the stamp
 * of the first clean-up that found it dead is older than the retention;
 * stamped now if it has no stamp yet.
 */
static int expired(struct tally_seg *s, const struct stat *st,
		   const struct cleanup *c, char *why, size_t n)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
	char d[32];

	if (c->retain_s == 0) {
		snprintf(why, n, "its processes are gone");
		return 1;
	}
	if (st->st_mode & S_IWUSR) {
		/* First found dead: stamp, then mark the stamp (in this
		 * order, a clean-up interrupted between the two only
		 * stamps again later). */
		if (futimens(s->fd, ts) == 0)
			fchmod(s->fd, st->st_mode & 07777 & ~(mode_t)S_IWUSR);
		return 0;
	}
	if (c->retain_s < 0 || c->now - st->st_mtime < c->retain_s)
		return 0;
	fmt_duration(d, sizeof(d), c->retain_s);
	snprintf(why, n, "its processes are gone, and it was found dead more "
		 "than %s ago (TALLY_RETAIN)", d);
	return 1;
}

/*
 * The name under which clean-up reports what it removed from the
 * directory open as @h, configured as @dir: @dir while it still leads to
 * that directory, else (a directory above it was renamed or swapped
 * meanwhile; the walk stayed where it was) the directory's real path
 * now, as the kernel names its descriptor.  In @buf (PATH_MAX bytes).
 */
static const char *cleaned_dir(const char *dir, const struct dir_handle *h,
			       char *buf)
{
	char proc[64];
	struct stat st;
	ssize_t n;

	if (stat(dir, &st) == 0 && st.st_dev == h->st.st_dev &&
	    st.st_ino == h->st.st_ino)
		return dir;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", h->fd);
	n = readlink(proc, buf, PATH_MAX - 1);
	if (n <= 0 || buf[0] != '/') {
		snprintf(buf, PATH_MAX, "%.*s (no longer at that path)",
			 PATH_MAX - 32, dir);
		return buf;
	}
	buf[n] = 0;
	return buf;
}

/*
 * Clean-up of one entry @name of the directory @dir open as @h (@path
 * names it in messages): 1 when it was removed.  The decision is made on
 * an open descriptor; the name is unlinked only if it still names that
 * file, in that directory, and reported under the directory's real name
 * (cleaned_dir).
 */
static int clean_entry(const char *dir, const struct dir_handle *h,
		       const char *path, const char *name,
		       const struct cleanup *c)
{
	int dfd = h->fd;
	const struct stat *dst = &h->st;
	struct tally_seg *s = NULL;
	struct stat checked, now;
	char why[160] = "", lkname[64] = "";
	int removed = 0, lkfd = -1;

	if (strncmp(name, TALLY__LOCKFILE_PREFIX,
		    strlen(TALLY__LOCKFILE_PREFIX)) == 0) {
		/* Not reported: a lock file holds no values. */
		if (orphaned_lock_file(dfd, name, &checked) &&
		    fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == checked.st_dev &&
		    now.st_ino == checked.st_ino)
			unlinkat(dfd, name, 0);
		return 0;
	}
	if (has_suffix(name, strlen(name), ".tally.tmp")) {
		if (orphaned_tmp(dfd, name, &checked))
			snprintf(why, sizeof(why), "a temporary file whose "
				 "creator died");
	} else if (has_suffix(name, strlen(name), ".tally")) {
		s = tally__seg_openat(dfd, dst, name, path, NULL);
		if (s && !(s->hdr.flags & TALLY__HDR_PERSIST) &&
		    fstat(s->fd, &checked) == 0 &&
		    writers_locks(dfd, s, &checked, &lkfd) &&
		    attach_locked(s, lkfd >= 0 ? lkfd : s->fd) &&
		    !seg_used(s, lkfd) &&
		    !expired(s, &checked, c, why, sizeof(why)))
			why[0] = 0;
	}
	/* Unlinked before the segment and its lock file are closed, so
	 * under its attach lock, and while its inode number (which names
	 * the lock file) is not another file's. */
	if (why[0] && fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    now.st_dev == checked.st_dev && now.st_ino == checked.st_ino &&
	    unlinkat(dfd, name, 0) == 0)
		removed = 1;
	if (removed && lkfd >= 0) {
		struct stat a, b;

		tally__lockfile_name(lkname, sizeof(lkname),
				     (uint64_t)checked.st_ino);
		if (fstatat(dfd, lkname, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
		    fstat(lkfd, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			unlinkat(dfd, lkname, 0);
	}
	if (lkfd >= 0)
		close(lkfd);
	tally_seg_close(s);
	if (removed && c->fn) {
		char real[PATH_MAX], at[PATH_MAX];
		const char *d = cleaned_dir(dir, h, real);

		/* Named where it really was, should a directory above have
		 * moved since the walk checked its own. */
		if (d != dir && snprintf(at, sizeof(at), "%s/%s", d, name) <
					(int)sizeof(at))
			path = at;
		c->fn(path, why, c->arg);
	}
	return removed;
}

/*
 * Does file @name carry @pid: <zone>.<pid>.<16 hex digits>.tally, or
 * <zone>.<pid>.tally as files made before the names had an id?  The pid
 * is the creator's in its own PID namespace: several processes' files
 * may carry the same.
 */
static int name_has_pid(const char *name, int pid)
{
	size_t n = strlen(name), k;
	char want[32];

	k = (size_t)snprintf(want, sizeof(want), ".%d.tally", pid);
	if (has_suffix(name, n, want))
		return 1;
	if (!has_suffix(name, n, ".tally") || n < 6 + 17)
		return 0;
	n -= 6;
	for (size_t i = n - 16; i < n; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		      (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	n -= 17;
	if (name[n] != '.')
		return 0;
	k -= 6; /* ".<pid>" */
	return n > k && memcmp(name + n - k, want, k) == 0;
}

/*
 * The files a pass has read, by device and inode: a file hard-linked
 * under many names in a directory (its writer can do that) is read once,
 * so a pass costs what was written, not what the names multiply.  An
 * open-addressing hash set; a pass that cannot grow it reads on, as it
 * did before it existed.
 */
struct seen {
	struct { dev_t dev; ino_t ino; } *slot;
	size_t n, cap;
};

/* 1 when (@dev, @ino) was in @v already; adds it otherwise. */
static int seen_before(struct seen *v, dev_t dev, ino_t ino)
{
	size_t h;

	if (2 * (v->n + 1) > v->cap) {
		struct seen w = { NULL, 0, v->cap ? 2 * v->cap : 64 };

		w.slot = calloc(w.cap, sizeof(*w.slot));
		if (!w.slot)
			return 0;
		for (size_t i = 0; i < v->cap; i++)
			if (v->slot[i].ino || v->slot[i].dev)
				seen_before(&w, v->slot[i].dev,
					    v->slot[i].ino);
		free(v->slot);
		*v = w;
	}
	h = (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) & (v->cap - 1);
	for (;; h = (h + 1) & (v->cap - 1)) {
		if (!v->slot[h].ino && !v->slot[h].dev) {
			v->slot[h].dev = dev;
			v->slot[h].ino = ino;
			v->n++;
			return 0;
		}
		if (v->slot[h].dev == dev && v->slot[h].ino == ino)
			return 1;
	}
}

/*
 * The incarnations of one pid and zone: a container's pid 1 restarted
 * after each crash leaves a dead segment with the same pid and zone
 * every time, which no retention bounds while it crash-loops (a 64 MiB
 * volume holds a few hundred), and which readers show under the same
 * labels anyway.  A writer creating its zone file keeps the last of them
 * (the previous incarnation's values, for a post-mortem, until the
 * retention) and removes the others, as clean-up would.
 */
struct supersede {
	int pid;
	const char *zone;
	char newest[NAME_MAX + 1];  /* the newest dead one so far, or "" */
	uint64_t newest_ns;
};

/* @name, open as @s, is a dead, non-persistent segment of the pid and
 * zone of @u: its creation time in @created_ns. */
static int incarnation(struct tally_seg *s, const struct supersede *u,
		       uint64_t *created_ns)
{
	struct tally_seg_info info;

	if (!s || (s->hdr.flags & (TALLY__HDR_PERSIST | TALLY__HDR_SHARED)) ||
	    tally__seg_used(s) || tally_seg_info(s, &info) < 0 ||
	    info.pid != u->pid || strcmp(info.zone_name, u->zone) != 0)
		return 0;
	*created_ns = info.created_ns;
	return 1;
}

int tally__dir_supersede(int dfd, const char *dir, int pid, const char *zone)
{
	struct cleanup now = { NULL, NULL, 0, 0 };
	struct supersede u = { pid, zone, "", 0 };
	char path[PATH_MAX];
	struct dir_handle h;
	struct dirent *e;
	struct stat st;
	int removed = 0, rfd;
	DIR *d;

	rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || fstat(rfd, &st) < 0 || !(d = fdopendir(rfd))) {
		if (rfd >= 0)
			close(rfd);
		return -errno;
	}
	h.d = d;
	h.fd = rfd;
	h.st = st;
	while ((e = readdir(d))) {
		struct tally_seg *s;
		uint64_t ns;
		int is;

		if (!name_has_pid(e->d_name, pid) ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(path))
			continue;
		s = tally__seg_openat(rfd, &st, e->d_name, path, NULL);
		is = incarnation(s, &u, &ns);
		tally_seg_close(s);
		if (!is)
			continue;
		if (u.newest[0] && ns < u.newest_ns) {
			removed += clean_entry(dir, &h, path, e->d_name, &now);
			continue;
		}
		if (u.newest[0]) {
			snprintf(path, sizeof(path), "%s/%s", dir, u.newest);
			removed += clean_entry(dir, &h, path, u.newest, &now);
		}
		snprintf(u.newest, sizeof(u.newest), "%s", e->d_name);
		u.newest_ns = ns;
	}
	closedir(d);
	return removed;
}

static int walk_one(const char *dir, int pid,
		    const struct tally_open_opts *opts, tally_seg_fn fn,
		    void *arg, const struct cleanup *cleanup, int *stop,
		    struct seen *seen)
{
	char path[PATH_MAX];
	struct dir_handle h;
	struct dirent *e;
	int count = 0, rc = 0;

	if ((rc = open_dir(dir, cleanup ? NULL : opts, &h)) < 0)
		return rc;
	while ((e = readdir(h.d))) {
		struct tally_seg *s;

		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(path))
			continue;
		if (cleanup) {
			count += clean_entry(dir, &h, path, e->d_name,
					     cleanup);
			continue;
		}
		if (pid > 0 ? !name_has_pid(e->d_name, pid) :
			      !has_suffix(e->d_name, strlen(e->d_name), ".tally"))
			continue;
		s = tally__seg_openat(h.fd, &h.st, e->d_name, path, opts);
		if (s) {
			struct stat st;

			if (fstat(s->fd, &st) == 0 &&
			    seen_before(seen, st.st_dev, st.st_ino)) {
				tally_seg_close(s);
				continue;
			}
		}
		rc = fn(path, s, s ? NULL : tally_errmsg(), arg);
		if (s)
			count++;
		tally_seg_close(s);
		if (rc) {
			*stop = rc;
			break;
		}
	}
	closedir(h.d);
	return count;
}

/*
 * @dir, or (NULL) the default places: this process's directory, then
 * the other place writers of this user may use (config.c).  A default
 * place that does not exist holds nothing, as long as one of them does.
 */
static int walk_places(const char *dir, int pid,
		       const struct tally_open_opts *opts, tally_seg_fn fn,
		       void *arg, const struct cleanup *cleanup,
		       struct seen *seen)
{
	int rc, rc2, stop = 0;

	if (dir) {
		rc = walk_one(dir, pid, opts, fn, arg, cleanup, &stop, seen);
		return stop ? stop : rc;
	}
	tally__init();
	/* A bad $TALLY_DIR left no directory: say what was wrong with it,
	 * not that "" does not exist. */
	if (!tally__env.dir[0])
		return tally__fail(EINVAL, "%s", tally__env.error);
	rc = walk_one(tally__env.dir, pid, opts, fn, arg, cleanup, &stop,
		      seen);
	if (stop || !tally__env.dir_alt[0] || (rc < 0 && rc != -ENOENT))
		return stop ? stop : rc;
	rc2 = walk_one(tally__env.dir_alt, pid, opts, fn, arg, cleanup, &stop,
		       seen);
	if (stop)
		return stop;
	/* Writers never write to a default place they cannot use (taken by
	 * another user, say): when the first place was read, a second that
	 * cannot be holds nothing of theirs. */
	if (rc2 == -ENOENT && rc == -ENOENT)
		return tally__fail(ENOENT, "%s: %s", tally__env.dir,
				   strerror(ENOENT));
	if (rc2 < 0)
		return rc == -ENOENT ? rc2 : rc;
	return rc == -ENOENT ? rc2 : rc + rc2;
}

static int dir_walk(const char *dir, int pid, const struct tally_open_opts *opts,
		    tally_seg_fn fn, void *arg, const struct cleanup *cleanup)
{
	struct seen seen = { NULL, 0, 0 };
	int rc = walk_places(dir, pid, opts, fn, arg, cleanup, &seen);

	free(seen.slot);

	/* The files that failed were @fn's to report: a walk that went
	 * through leaves no message (tally__ok()). */
	if (rc >= 0)
		tally__ok();
	return rc;
}

int tally_dir_foreach(const char *dir, const struct tally_open_opts *opts,
		      tally_seg_fn fn, void *arg)
{
	if (!fn)
		return tally__fail(EINVAL, "tally_dir_foreach: NULL function");
	return dir_walk(dir, 0, opts, fn, arg, NULL);
}

int tally_seg_foreach_pid(const char *dir, int pid,
			  const struct tally_open_opts *opts, tally_seg_fn fn,
			  void *arg)
{
	if (!fn || pid <= 0)
		return tally__fail(EINVAL, "tally_seg_foreach_pid: bad "
				   "arguments");
	return dir_walk(dir, pid, opts, fn, arg, NULL);
}

int tally_dir_cleanup(const char *dir)
{
	return tally_dir_cleanup_report(dir, NULL, NULL);
}

int tally_dir_cleanup_report(const char *dir, tally_clean_fn fn, void *arg)
{
	struct cleanup c = { fn, arg, 0, 0 };

	return dir_walk(dir, 0, NULL, NULL, NULL, &c);
}

int tally_dir_expire(const char *dir, long long retain_s, tally_clean_fn fn,
		     void *arg)
{
	struct cleanup c = { fn, arg, retain_s, time(NULL) };

	char err[200];

	if (retain_s == TALLY_RETAIN_ENV) {
		c.retain_s = tally__parse_retain(getenv("TALLY_RETAIN"), err,
						 sizeof(err));
		if (c.retain_s == TALLY__RETAIN_BAD)
			return tally__fail(EINVAL, "%s", err);
	} else if (retain_s < TALLY_RETAIN_FOREVER) {
		return tally__fail(EINVAL, "tally_dir_expire: retention %lld: "
				   "expected seconds, TALLY_RETAIN_FOREVER or "
				   "TALLY_RETAIN_ENV", retain_s);
	}
	return dir_walk(dir, 0, NULL, NULL, NULL, &c);
}
