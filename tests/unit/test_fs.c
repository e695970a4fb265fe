/*
 * test_fs.c - engine/fs.c: the tree copy keeps what a cluster template
 * needs (contents, modes, links, empty directories), refuses to overwrite
 * and names what it cannot copy; rm -rf removes links, not their targets.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs.h"

static char root[64];

static void
setup(void)
{
	snprintf(root, sizeof(root), "/tmp/ax-test-fs-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void
teardown(void)
{
	cr_assert_eq(ax_fs_rm_rf(root), AX_OK, "%s", ax_err_detail());
}

TestSuite(fs, .init = setup, .fini = teardown);

static void
write_at(const char *rel, const char *text, size_t len, mode_t mode)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	cr_assert_geq(fd, 0, "%s", p);
	cr_assert_eq(write(fd, text, len), (ssize_t) len);
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static char *
read_at(const char *rel, size_t *len)
{
	char  p[256];
	FILE *f;
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	cr_assert_not_null(f = fopen(p, "rb"), "%s", p);
	char *buf = malloc(1 << 22);
	*len      = fread(buf, 1, 1 << 22, f);
	fclose(f);
	return buf;
}

static mode_t
mode_of(const char *rel)
{
	char        p[256];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	cr_assert_eq(lstat(p, &st), 0, "%s", p);
	return st.st_mode;
}

static const char *
at(const char *rel)
{
	static char p[4][256];
	static int  i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", root, rel);
	return p[i];
}

Test(fs, copy_tree_keeps_contents_modes_links_and_empty_dirs)
{
	size_t big_len = 3 * 1024 * 1024 + 17, n;
	char  *big     = malloc(big_len);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (char) (i * 31 + (i >> 12));
	cr_assert_eq(mkdir(at("src"), 0700), 0);
	cr_assert_eq(mkdir(at("src/base"), 0750), 0);
	cr_assert_eq(mkdir(at("src/base/empty"), 0700), 0);
	write_at("src/PG_VERSION", "15\n", 3, 0600);
	write_at("src/base/big", big, big_len, 0640);
	write_at("src/base/zero", "", 0, 0400);
	cr_assert_eq(symlink("base/big", at("src/link")), 0);
	cr_assert_eq(symlink("/nonexistent/target", at("src/dangling")), 0);

	cr_assert_eq(ax_fs_copy_tree(at("src"), at("dst")), AX_OK, "%s",
	             ax_err_detail());

	char *got = read_at("dst/base/big", &n);
	cr_assert_eq(n, big_len);
	cr_assert_eq(memcmp(got, big, big_len), 0, "same bytes");
	free(got);
	got = read_at("dst/PG_VERSION", &n);
	cr_assert_eq(n, 3);
	cr_assert_eq(memcmp(got, "15\n", 3), 0);
	free(got);
	cr_assert_eq(mode_of("dst/base/zero") & 07777, 0400);
	cr_assert_eq(mode_of("dst/base/big") & 07777, 0640);
	cr_assert_eq(mode_of("dst/PG_VERSION") & 07777, 0600);
	cr_assert_eq(mode_of("dst/base") & 07777, 0750);
	cr_assert(S_ISDIR(mode_of("dst/base/empty")));
	cr_assert(S_ISLNK(mode_of("dst/link")), "a link stays a link");
	cr_assert(S_ISLNK(mode_of("dst/dangling")));
	char target[64] = "";
	cr_assert_gt(readlink(at("dst/link"), target, sizeof(target) - 1), 0);
	cr_assert_str_eq(target, "base/big");
	free(big);
}

Test(fs, copy_tree_keeps_the_owner_when_root)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to give a file away");
	cr_assert_eq(mkdir(at("src"), 0700), 0);
	write_at("src/f", "x", 1, 0600);
	cr_assert_eq(chown(at("src/f"), 65534, 65534), 0);
	cr_assert_eq(chown(at("src"), 65534, 65534), 0);
	cr_assert_eq(ax_fs_copy_tree(at("src"), at("dst")), AX_OK, "%s",
	             ax_err_detail());
	struct stat st;
	cr_assert_eq(stat(at("dst/f"), &st), 0);
	cr_assert_eq(st.st_uid, 65534u);
	cr_assert_eq(st.st_gid, 65534u);
	cr_assert_eq(stat(at("dst"), &st), 0);
	cr_assert_eq(st.st_uid, 65534u);
}

Test(fs, copy_tree_refuses_an_existing_destination)
{
	cr_assert_eq(mkdir(at("src"), 0700), 0);
	write_at("src/f", "new", 3, 0600);
	cr_assert_eq(mkdir(at("dst"), 0700), 0);
	write_at("dst/f", "old", 3, 0600);
	cr_assert_eq(ax_fs_copy_tree(at("src"), at("dst")), AX_EIO);
	cr_assert(strstr(ax_err_detail(), "exists") != NULL, "%s",
	          ax_err_detail());
	size_t n;
	char  *got = read_at("dst/f", &n);
	cr_assert_eq(memcmp(got, "old", 3), 0, "nothing overwritten");
	free(got);
}

Test(fs, copy_tree_names_what_it_cannot_copy)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int                s = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(mkdir(at("src"), 0700), 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", at("src/sock"));
	cr_assert_eq(bind(s, (struct sockaddr *) &a, sizeof(a)), 0);
	cr_assert_eq(ax_fs_copy_tree(at("src"), at("dst")), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "src/sock") != NULL, "%s",
	          ax_err_detail());
	close(s);
	/* the longest target a link can have (PATH_MAX - 1) copies whole */
	static char longt[PATH_MAX], got[PATH_MAX];
	memset(longt, 'x', PATH_MAX - 1);
	cr_assert_eq(mkdir(at("src2"), 0700), 0);
	cr_assert_eq(symlink(longt, at("src2/l")), 0);
	cr_assert_eq(ax_fs_copy_tree(at("src2"), at("dst3")), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(readlink(at("dst3/l"), got, sizeof(got)), PATH_MAX - 1);
	cr_assert_eq(memcmp(got, longt, PATH_MAX - 1), 0);
	cr_assert_eq(ax_fs_copy_tree(at("missing"), at("dst2")), AX_EIO);
	cr_assert(strstr(ax_err_detail(), "missing") != NULL, "%s",
	          ax_err_detail());
}

Test(fs, rm_rf_removes_a_link_not_its_target)
{
	cr_assert_eq(mkdir(at("keep"), 0700), 0);
	write_at("keep/f", "x", 1, 0600);
	cr_assert_eq(mkdir(at("gone"), 0700), 0);
	cr_assert_eq(symlink(at("keep"), at("gone/link")), 0);
	cr_assert_eq(ax_fs_rm_rf(at("gone")), AX_OK, "%s", ax_err_detail());
	cr_assert_neq(access(at("gone"), F_OK), 0);
	cr_assert_eq(access(at("keep/f"), F_OK), 0, "the target stays");
	cr_assert_eq(ax_fs_rm_rf(at("gone")), AX_OK, "missing is fine");
}
