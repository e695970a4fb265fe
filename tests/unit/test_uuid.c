#include <criterion/criterion.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uuid.h"

Test(uuid, v4_is_canonical_and_distinct)
{
	char a[AX_UUID_LEN], b[AX_UUID_LEN];
	ax_uuid_v4(a);
	ax_uuid_v4(b);
	cr_assert(ax_uuid_valid(a), "%s", a);
	cr_assert_eq(a[14], '4', "version nibble in %s", a);
	cr_assert(strchr("89ab", a[19]) != NULL, "variant in %s", a);
	cr_assert_str_neq(a, b);
}

Test(uuid, valid_rejects_malformed)
{
	cr_assert_not(ax_uuid_valid(NULL));
	cr_assert_not(ax_uuid_valid(""));
	cr_assert_not(ax_uuid_valid("123e4567-e89b-12d3-a456-42661417400"));
	cr_assert_not(ax_uuid_valid("123e4567xe89b-12d3-a456-426614174000"));
	cr_assert_not(ax_uuid_valid("123e4567-e89b-12d3-a456-42661417400g"));
	cr_assert(ax_uuid_valid("123e4567-e89b-12d3-a456-426614174000"));
}

Test(uuid, v7_is_canonical_and_time_ordered)
{
	char a[AX_UUID_LEN], b[AX_UUID_LEN];
	ax_uuid_v7(a);
	usleep(2000);
	ax_uuid_v7(b);
	cr_assert(ax_uuid_valid(a), "%s", a);
	cr_assert_eq(a[14], '7', "version nibble in %s", a);
	cr_assert(strchr("89ab", a[19]) != NULL, "variant in %s", a);
	cr_assert_lt(strcmp(a, b), 0, "%s made before %s sorts first", a, b);
}

/* The random bytes come from a per-thread pool: a forked child must not
 * hand out the bytes its parent hands out next. */
Test(uuid, fork_never_repeats_the_parent)
{
	char a[AX_UUID_LEN], p[AX_UUID_LEN], c[AX_UUID_LEN] = { 0 };
	int  fds[2];
	ax_uuid_v4(a); /* the pool now holds unused bytes */
	cr_assert_eq(pipe(fds), 0);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		ax_uuid_v4(c);
		ssize_t w = write(fds[1], c, AX_UUID_LEN);
		_exit(w == AX_UUID_LEN ? 0 : 1);
	}
	ax_uuid_v4(p);
	cr_assert_eq(read(fds[0], c, AX_UUID_LEN), AX_UUID_LEN);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_str_neq(p, c, "parent and child made the same UUID %s", p);
	cr_assert(ax_uuid_valid(c) && ax_uuid_valid(p));
	close(fds[0]);
	close(fds[1]);
}
