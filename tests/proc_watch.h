/*
 * proc_watch.h - test helpers that watch real processes through /proc:
 * whether a pid still runs, waiting until a set of pids is gone, a
 * process's parent. For tests that kill workers with -9 or SIGSTOP and
 * check that the task processes went with them.
 */
#ifndef AX_TEST_PROC_WATCH_H
#define AX_TEST_PROC_WATCH_H

#include <stdint.h>
#include <sys/types.h>

/* Whether pid runs; a zombie counts as gone (it runs no code). */
int ax_test_alive(pid_t pid);

/*
 * Polls every 5 ms until no pid of pids[0..n) runs; returns how long
 * that took (us), or -1 after limit_ms. Reaps this process's dead
 * children meanwhile (orphans reparented to a subreaper test).
 */
int64_t ax_test_wait_gone(const pid_t *pids, int n, int limit_ms);

/* SIGKILL to every pid of pids[0..n) that still runs. */
void ax_test_kill_all(const pid_t *pids, int n);

/* The parent of pid (field 4 of /proc/PID/stat), or 0 if unknown. */
pid_t ax_test_ppid(pid_t pid);

/*
 * For each file matching owner_glob (e.g. "/tmp/ax-test-pg-*" "/owner":
 * a test's directory holding the pid of the test process that owns it)
 * whose pid no longer runs, calls sweep with that directory (the file's
 * dirname): what a killed test left behind. A file that does not hold a
 * pid is left alone.
 */
void ax_test_sweep_orphans(const char *owner_glob,
                           void (*sweep)(const char *dir));

#endif /* AX_TEST_PROC_WATCH_H */
