/*
 * fs.h - file-system helpers shared by the daemons, axctl and the tests.
 */
#ifndef AX_FS_H
#define AX_FS_H

#include "ax_err.h"

/*
 * Removes path and, when it is a directory, everything below it (`rm
 * -rf`), without following symbolic links (a link is removed, never its
 * target). A path that does not exist is AX_OK. An entry that cannot be
 * removed: AX_EIO naming it (what could be removed is gone).
 */
ax_err ax_fs_rm_rf(const char *path);

#endif /* AX_FS_H */
