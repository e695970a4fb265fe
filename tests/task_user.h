/*
 * task_user.h - the tests' task user: ax-task, the user ax-worker runs
 * tasks as when it is root (worker.run_as). deploy/install-deps.sh makes
 * it; a test that needs it makes it too when missing, so the suites also
 * pass on a machine where only the packages were installed.
 */
#ifndef AX_TEST_TASK_USER_H
#define AX_TEST_TASK_USER_H

#include <sys/types.h>

#define AX_TEST_TASK_USER "ax-task"

/*
 * As root: makes sure ax-task exists (useradd --system, as
 * install-deps.sh does) and returns its uid; fails the current test when
 * it cannot. Not root: returns (uid_t) -1 (the caller skips).
 */
uid_t ax_test_task_user(void);

#endif /* AX_TEST_TASK_USER_H */
