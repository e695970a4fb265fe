/*
 * fs.c - file-system helpers (see fs.h).
 */
#include "fs.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
