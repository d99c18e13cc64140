/*
 * zone-dir.c: the segment directory a zone is created or attached in,
 * checked (owner, permissions, the group of $TALLY_GROUP) before use.
 *
 * The directory is checked on a descriptor (tally__zone_dir_check), and
 * the files of a creation or an attach are opened, renamed and removed
 * relative to that descriptor (tally__zone_dirfd), so that a directory
 * swapped for another (or for a symbolic link) by whoever owns a
 * directory above it does not take the writer elsewhere after the check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/zone.h"

/*
 * The segment directory as checked by tally__zone_dir_check(), for the
 * creation or attach under way: only used under the registry's
 * create_lock, -1 otherwise.
 */
int tally__zone_dirfd = -1;

/* The last component of @path: the name of a file in tally__zone_dirfd. */
const char *tally__zone_base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * The default directory belongs to another user: it was created before
 * this user's first run, by mistake or to take it (the JVM's hsperfdata
 * had the same problem).  Name the owner and the ways out.
 */
static int dir_taken(const char *dir, const struct stat *st)
{
	char buf[1024], who[80] = "";
	struct passwd pw, *r = NULL;

	if (getpwuid_r(st->st_uid, &pw, buf, sizeof(buf), &r) == 0 && r)
		snprintf(who, sizeof(who), " (user %.60s)", r->pw_name);
	if (!tally__env.dir_is_default)
		return tally__fail(EPERM, "%s is owned by uid %u%s, not by "
				   "this user (uid %u): set TALLY_DIR to a "
				   "directory of your own", dir,
				   (unsigned)st->st_uid, who,
				   (unsigned)geteuid());
	return tally__fail(EPERM, "%s, tally's default directory for this "
			   "user, is owned by uid %u%s, not by this user (uid "
			   "%u): another user created it first and took it.  "
			   "Remove it (as its owner or root: rm -r %s), or set "
			   "TALLY_DIR to a directory of your own (mode 0700)%s",
			   dir, (unsigned)st->st_uid, who, (unsigned)geteuid(),
			   dir, tally__env.gid >= 0 ? "" :
			   "; with $XDG_RUNTIME_DIR set to a directory of "
			   "this user (a login session, systemd --user), the "
			   "default is $XDG_RUNTIME_DIR/tally, which nobody "
			   "else can take");
}

/*
 * With TALLY_GROUP, a default directory made 0700 by an earlier run
 * without it is opened to the group (0750, its group TALLY_GROUP): files
 * shared with a group it cannot enter would be of no use.  So is a
 * TALLY_DIR this process has just created (@created), whose group would
 * otherwise be its parent's or the process's.  On the descriptor, so the
 * directory changed is the one checked.  A TALLY_DIR that was there
 * before is the user's to set up and is left as it is.
 */
static int share_dir(int fd, const char *dir, struct stat *st, int created)
{
	int rfd, err = 0;

	if (tally__env.gid < 0 || (!tally__env.dir_is_default && !created) ||
	    (st->st_gid == (gid_t)tally__env.gid &&
	     (st->st_mode & 0750) == 0750))
		return 0;
	/* fchown and fchmod want more than the O_PATH descriptor. */
	rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || fchown(rfd, (uid_t)-1, (gid_t)tally__env.gid) < 0 ||
	    fchmod(rfd, (st->st_mode & 07777 & ~(mode_t)022) | 0750) < 0 ||
	    fstat(rfd, st) < 0)
		err = tally__fail(errno, "cannot give %s to group %ld: %s",
				  dir, tally__env.gid, strerror(errno));
	if (rfd >= 0)
		close(rfd);
	return err;
}

/*
 * Check (and for the default, create) the segment directory, and keep
 * its descriptor (O_PATH: enough for openat, renameat2, linkat and
 * unlinkat) in tally__zone_dirfd for the creation (tally__zone_dir_close()
 * closes it).
 */
int tally__zone_dir_check(void)
{
	const char *dir = tally__env.dir;
	mode_t mode = tally__env.gid >= 0 ? 0750 : 0700;
	struct stat st;
	int fd, err, created = 0;

	/* O_PATH: a directory of another user that we may not read is
	 * still checked, and named as taken, not just "permission denied".
	 * A missing directory, the default or TALLY_DIR, is created (its
	 * last component only): a container's volume is a root-owned
	 * directory that everybody may write to (an emptyDir with an
	 * fsGroup is 2777), where the writer makes its own.  What it finds
	 * there instead, made by someone else, is checked as any other. */
	fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (mkdir(dir, mode) == 0)
			created = 1;
		else if (errno != EEXIST && tally__env.dir_is_default)
			return tally__fail(errno, "cannot create %s: %s", dir,
					   strerror(errno));
		else if (errno != EEXIST)
			return tally__fail(errno, "TALLY_DIR %s does not "
					   "exist and cannot be created (%s): "
					   "create it with mode %04o%s, or "
					   "unset TALLY_DIR", dir,
					   strerror(errno), (unsigned)mode,
					   tally__env.gid >= 0 ?
					   " and the group of TALLY_GROUP" :
					   "");
		fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		struct stat ls;

		err = errno;
		if (err == ENOENT)
			return tally__fail(ENOENT, "TALLY_DIR %s does not "
					   "exist: create it with mode %04o, "
					   "or unset TALLY_DIR", dir,
					   (unsigned)mode);
		if (err == ELOOP || (err == ENOTDIR && lstat(dir, &ls) == 0 &&
				     S_ISLNK(ls.st_mode)))
			return tally__fail(ENOTDIR, "%s is a symbolic link; "
					   "tally wants a real directory", dir);
		if (err == ENOTDIR)
			return tally__fail(ENOTDIR, "%s is not a directory", dir);
		return tally__fail(err, "cannot open %s: %s", dir,
				   strerror(err));
	}
	if (fstat(fd, &st) < 0) {
		err = tally__fail(errno, "cannot stat %s: %s", dir,
				  strerror(errno));
		close(fd);
		return err;
	}
	err = 0;
	if (st.st_uid != geteuid())
		err = dir_taken(dir, &st);
	else if (st.st_mode & 002)
		err = tally__fail(EPERM, "%s is writable by others (mode %o), "
				   "as a shared directory like /dev/shm or a "
				   "container's volume is: tally keeps its "
				   "files in a private subdirectory, which it "
				   "creates itself (mode %04o%s): set "
				   "TALLY_DIR=%s/tally-%u, or unset TALLY_DIR "
				   "for the default", dir,
				   (unsigned)(st.st_mode & 07777),
				   (unsigned)mode, tally__env.gid >= 0 ?
				   ", group TALLY_GROUP" : "", dir,
				   (unsigned)geteuid());
	else if (st.st_mode & 020)
		err = tally__fail(EPERM, "%s is writable by its group (mode "
				   "%o): another member could plant or remove "
				   "segment files; use a directory only its "
				   "owner can write to (0700, or 0750 with "
				   "TALLY_GROUP)", dir,
				   (unsigned)(st.st_mode & 07777));
	if (err == 0)
		err = share_dir(fd, dir, &st, created);
	if (err < 0) {
		close(fd);
		return err;
	}
	tally__zone_dirfd = fd;
	return 0;
}

void tally__zone_dir_close(void)
{
	if (tally__zone_dirfd >= 0)
		close(tally__zone_dirfd);
	tally__zone_dirfd = -1;
}
