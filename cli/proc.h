/*
 * proc.h - supervision of the child processes of `axctl standalone` and
 * `axctl bench` (axd, ax-worker, ax-api), also used by the e2e harness.
 *
 * Role: start an AX binary found next to the running executable (or in
 * $AX_BIN_DIR), with arguments and extra environment, its stdout and
 * stderr appended to a log file, in its own process group; notice when it
 * exits; stop it (SIGTERM to the group, wait, SIGKILL); show the tail of
 * its log when it died.
 *
 * Invariants: a child runs in its own process group (pgid = pid), so a
 * Ctrl-C on the terminal reaches only axctl, which then stops the
 * children in order. The child starts with an empty signal mask and the
 * default dispositions whatever the parent blocked or ignored, stdin from
 * /dev/null, and (when asked) SIGTERM as its parent-death signal, so a
 * crash of axctl does not leave daemons behind. An ax_proc is zeroed or
 * started; it is reaped exactly once, by ax_proc_poll / ax_proc_wait /
 * ax_proc_stop (only ever by its pid: other children of the caller, such
 * as the PostgreSQL postmaster of pg_embed, are never reaped here).
 *
 * Workload: a handful of children per axctl process; nothing here is on a
 * hot path. Not thread-safe per object.
 */
#ifndef AX_PROC_H
#define AX_PROC_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ax_err.h"

typedef struct ax_proc {
	char  name[64];           /* for messages: "axd", "worker-1" */
	char  bin[PATH_MAX];      /* the executable */
	char  log_path[PATH_MAX]; /* stdout+stderr, appended */
	pid_t pid;                /* also the pgid; 0 when never started */
	int   running;            /* 1 from start until reaped */
	int   status;             /* wait status once reaped */
	int   stopping; /* 1 once ax_proc_stop began: exit expected */
} ax_proc;

/* Options of ax_proc_start. */
typedef struct ax_proc_opts {
	const char *const *env; /* extra "NAME=VALUE" entries, NULL-ended;
	                           may be NULL */
	int pdeathsig;          /* signal sent to the child when the thread
	                           that started it dies; 0: none */
} ax_proc_opts;

/*
 * Path of the AX binary `name` (e.g. "axd"): in $AX_BIN_DIR when set,
 * else in the directory of the running executable (/proc/self/exe).
 * Writes it into buf (len bytes). AX_ENOENT when the file is not an
 * executable (the detail names the path and says to build it or set
 * AX_BIN_DIR); AX_ELIMIT when the path does not fit.
 */
ax_err ax_proc_find_bin(const char *name, char *buf, size_t len);

/*
 * Starts bin with argv (argv[0] included, NULL-ended) under the label
 * name, output appended to log_path (created 0644; its directory must
 * exist). opts may be NULL. Returns once the child has exec'd: AX_ENOENT /
 * AX_EPERM / AX_EIO when the log cannot be opened or exec fails (the
 * detail names the binary and the reason); the child is then reaped and
 * p->running is 0. p is overwritten.
 */
ax_err ax_proc_start(ax_proc *p, const char *name, const char *bin,
                     char *const argv[], const char *log_path,
                     const ax_proc_opts *opts);

/*
 * Non-blocking check: reaps the child if it has exited. Returns 1 while it
 * runs, 0 once it has exited (now or before; p->status holds the wait
 * status) or was never started.
 */
int ax_proc_poll(ax_proc *p);

/*
 * Waits up to timeout_us (monotonic) for the child to exit, reaping it.
 * Returns 0 when it has exited (or never ran), AX_ETIMEDOUT otherwise.
 */
ax_err ax_proc_wait(ax_proc *p, int64_t timeout_us);

/* Sends sig to the child's process group (to the pid when the group is
 * gone). No effect once it has been reaped. */
void ax_proc_signal(ax_proc *p, int sig);

/*
 * Stops the child: SIGTERM to its process group, waits up to grace_us,
 * then SIGKILL to the group and waits for the exit. Returns AX_OK when it
 * exited within the grace period (or was not running), AX_ETIMEDOUT when
 * it had to be killed. The child is reaped in both cases. Sets
 * p->stopping in every case, so a supervisor does not take the exit for
 * a crash.
 */
ax_err ax_proc_stop(ax_proc *p, int64_t grace_us);

/* "exited with status 3", "killed by signal 9", "running". Returns buf. */
char *ax_proc_describe(const ax_proc *p, char *buf, size_t len);

/*
 * The last `lines` lines of the file at path (at most len-1 bytes, the
 * most recent kept) into buf, NUL-terminated; "" when the file is missing
 * or empty. Returns buf.
 */
char *ax_proc_log_tail(const char *path, int lines, char *buf, size_t len);

#endif /* AX_PROC_H */
