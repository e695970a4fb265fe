/*
 * task_user.c - see task_user.h.
 */
#include "task_user.h"

#include <criterion/criterion.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

uid_t
ax_test_task_user(void)
{
	struct passwd *pw;

	if (geteuid() != 0)
		return (uid_t) -1;
	if ((pw = getpwnam(AX_TEST_TASK_USER)) != NULL)
		return pw->pw_uid;
	/* another test may be making it at the same time: check after */
	if (system(
	        "useradd --system --home-dir /var/lib/" AX_TEST_TASK_USER
	        " --create-home --shell /usr/sbin/nologin " AX_TEST_TASK_USER
	        " 2>/dev/null") != 0)
		cr_log_warn("useradd " AX_TEST_TASK_USER " failed");
	pw = getpwnam(AX_TEST_TASK_USER);
	cr_assert_not_null(pw,
	                   "no user " AX_TEST_TASK_USER
	                   " and useradd could not make it; run "
	                   "deploy/install-deps.sh");
	return pw->pw_uid;
}
