/*
 * fs.c - file-system helpers (see fs.h).
 */
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void) sb;
	(void) flag;
	(void) ftw;
	return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

ax_err
ax_fs_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return AX_OK;
	if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return ax_err_set(AX_EIO, "cannot remove %s: %s", path,
		                  strerror(errno));
	return AX_OK;
}

/* The owner of a copy: only root may give a file away, others keep it. */
static ax_err
copy_owner(int fd, const char *path, const struct stat *st, int link)
{
	int rc;
	if (geteuid() != 0)
		return AX_OK;
	rc = link ? lchown(path, st->st_uid, st->st_gid)
	          : fchown(fd, st->st_uid, st->st_gid);
	return rc == 0
	    ? AX_OK
	    : ax_err_set(AX_EIO, "cannot chown %s: %s", path, strerror(errno));
}

static ax_err
copy_file(const char *src, const char *dst, const struct stat *st)
{
	int    in, out;
	off_t  off = 0;
	ax_err rv  = AX_OK;

	if ((in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return ax_err_set(AX_EIO, "cannot open %s: %s", src,
		                  strerror(errno));
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	           st->st_mode & 07777);
	if (out < 0) {
		rv = ax_err_set(AX_EIO, "cannot create %s: %s", dst,
		                strerror(errno));
		close(in);
		return rv;
	}
	while (off < st->st_size) {
		ssize_t n =
		    sendfile(out, in, &off, (size_t) (st->st_size - off));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rv = ax_err_set(AX_EIO, "cannot copy %s to %s: %s",
			                src, dst,
			                n < 0 ? strerror(errno) : "it shrank");
			break;
		}
	}
	/* open's mode went through the umask */
	if (rv == AX_OK && fchmod(out, st->st_mode & 07777) != 0)
		rv = ax_err_set(AX_EIO, "cannot chmod %s: %s", dst,
		                strerror(errno));
	if (rv == AX_OK)
		rv = copy_owner(out, dst, st, 0);
	close(in);
	if (close(out) != 0 && rv == AX_OK)
		rv = ax_err_set(AX_EIO, "cannot write %s: %s", dst,
		                strerror(errno));
	return rv;
}

static ax_err
copy_entry(const char *src, const char *dst)
{
	struct stat st;
	ax_err      rv = AX_OK;

	if (lstat(src, &st) != 0)
		return ax_err_set(AX_EIO, "cannot stat %s: %s", src,
		                  strerror(errno));
	if (S_ISREG(st.st_mode))
		return copy_file(src, dst, &st);
	if (S_ISLNK(st.st_mode)) {
		char    target[PATH_MAX];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return ax_err_set(AX_EIO, "cannot read link %s: %s",
			                  src, strerror(errno));
		target[n] = '\0';
		if (symlink(target, dst) != 0)
			return ax_err_set(AX_EIO, "cannot create link %s: %s",
			                  dst, strerror(errno));
		return copy_owner(-1, dst, &st, 1);
	}
	if (!S_ISDIR(st.st_mode))
		return ax_err_set(AX_EINVAL,
		                  "cannot copy %s: not a directory, regular "
		                  "file or symbolic link",
		                  src);
	if (mkdir(dst, 0700) != 0)
		return ax_err_set(AX_EIO, "cannot create %s: %s", dst,
		                  strerror(errno));
	DIR *d = opendir(src);
	if (d == NULL)
		return ax_err_set(AX_EIO, "cannot open %s: %s", src,
		                  strerror(errno));
	for (struct dirent *de; rv == AX_OK && (de = readdir(d)) != NULL;) {
		char s[PATH_MAX], t[PATH_MAX];
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t) snprintf(s, sizeof(s), "%s/%s", src,
		                      de->d_name) >= sizeof(s) ||
		    (size_t) snprintf(t, sizeof(t), "%s/%s", dst,
		                      de->d_name) >= sizeof(t)) {
			rv = ax_err_set(AX_EIO, "path too long under %s", src);
			break;
		}
		rv = copy_entry(s, t);
	}
	closedir(d);
	/* the mode last, so that a read-only directory could be filled */
	if (rv == AX_OK && chmod(dst, st.st_mode & 07777) != 0)
		rv = ax_err_set(AX_EIO, "cannot chmod %s: %s", dst,
		                strerror(errno));
	if (rv == AX_OK)
		rv = copy_owner(-1, dst, &st, 1);
	return rv;
}

ax_err
ax_fs_copy_tree(const char *src, const char *dst)
{
	struct stat st;
	if (lstat(dst, &st) == 0)
		return ax_err_set(AX_EIO, "cannot copy %s to %s: it exists",
		                  src, dst);
	return copy_entry(src, dst);
}
