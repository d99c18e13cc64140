/*
 * directory.c: walking a directory of segments, and cleaning it up
 * (segments of processes that are gone, temporaries of dead creators).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "segment.h"

/* What clean-up removes, and whom it tells. */
struct cleanup {
	tally_clean_fn fn;
	void *arg;
};

#define TMP_ORPHAN_AGE 10 /* seconds: older unlocked temporaries are dead */

/*
 * A temporary file of a zone being created (*.tally.tmp): its creator
 * holds a write lock on byte 1 from the moment it exists until it is
 * published (zone.c).  Nobody holding it, and a few seconds old (so that
 * the instant between open and lock is no risk), it is an orphan.
 */
static int orphaned_tmp(const char *path, struct stat *checked)
{
	struct flock fl;
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK),
	    orphan = 0;

	if (fd < 0)
		return 0;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = 1;
	fl.l_len = 1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && time(NULL) - st.st_mtime > TMP_ORPHAN_AGE &&
	    fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK) {
		orphan = 1;
		*checked = st;
	}
	close(fd);
	return orphan;
}

static int has_suffix(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n > k && strcmp(s + n - k, suffix) == 0;
}

/* Open @dir (NULL: $TALLY_DIR), which must be a real directory. */
static DIR *open_dir(const char **dir)
{
	struct stat st;
	DIR *d;

	if (!*dir) {
		tally__init();
		*dir = tally__env.dir;
	}
	if (lstat(*dir, &st) < 0) {
		tally__fail(errno, "%s: %s", *dir, strerror(errno));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		tally__fail(ENOTDIR, "%s: not a directory%s", *dir,
			    S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
		return NULL;
	}
	d = opendir(*dir);
	if (!d)
		tally__fail(errno, "%s: %s", *dir, strerror(errno));
	return d;
}

/*
 * Clean-up of one entry: 1 when @path (named @name) was removed.  The
 * decision is made on an open descriptor; the name is unlinked only if
 * it still names that file (a creator that reused the pid may have put a
 * new one there since).
 */
static int clean_entry(const char *path, const char *name,
		       const struct cleanup *c)
{
	struct tally_seg *s;
	struct stat checked, now;
	const char *why = NULL;

	if (has_suffix(name, strlen(name), ".tally.tmp")) {
		if (orphaned_tmp(path, &checked))
			why = "a temporary file whose creator died";
	} else if (has_suffix(name, strlen(name), ".tally")) {
		s = tally_seg_open(path, NULL);
		if (s && !(s->hdr.flags & TALLY__HDR_PERSIST) &&
		    !tally__seg_alive(&s->hdr) && !tally__use_locked(s->fd) &&
		    fstat(s->fd, &checked) == 0)
			why = "its processes are gone";
		tally_seg_close(s);
	}
	if (!why || lstat(path, &now) < 0 || now.st_dev != checked.st_dev ||
	    now.st_ino != checked.st_ino || unlink(path) < 0)
		return 0;
	if (c->fn)
		c->fn(path, why, c->arg);
	return 1;
}

static int dir_walk(const char *dir, int pid, const struct tally_open_opts *opts,
		    tally_seg_fn fn, void *arg, const struct cleanup *cleanup)
{
	char path[PATH_MAX], want[32];
	struct dirent *e;
	int count = 0, rc = 0;
	DIR *d = open_dir(&dir);

	if (!d)
		return -errno;
	if (pid > 0)
		snprintf(want, sizeof(want), ".%d.tally", pid);
	else
		snprintf(want, sizeof(want), ".tally");
	while ((e = readdir(d))) {
		struct tally_seg *s;

		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(path))
			continue;
		if (cleanup) {
			count += clean_entry(path, e->d_name, cleanup);
			continue;
		}
		if (!has_suffix(e->d_name, strlen(e->d_name), want))
			continue;
		s = tally_seg_open(path, opts);
		rc = fn(path, s, s ? NULL : tally_errmsg(), arg);
		if (s)
			count++;
		tally_seg_close(s);
		if (rc)
			break;
	}
	closedir(d);
	return rc ? rc : count;
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
	struct cleanup c = { fn, arg };

	return dir_walk(dir, 0, NULL, NULL, NULL, &c);
}
