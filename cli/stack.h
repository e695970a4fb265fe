/*
 * stack.h - a running AX installation on one machine: the config file
 * for the daemons, axd, N ax-worker processes and ax-api, started and
 * stopped in order. Shared by `axctl standalone`, `axctl bench`, `axctl
 * drill` and the e2e test harness (tests/e2e/e2e_harness.h).
 *
 * Role: given a home directory and a migrated database (the caller brings
 * PostgreSQL up: embedded or not), writes $home/ax.yaml (database.dsn,
 * queue.address and worker.server on an ipc:// socket under $home/run or,
 * when that path is too long for a Unix socket, a free TCP port;
 * events.pub under $home/run; worker.log_dir $home/logs/tasks; api.port),
 * then starts the children with cli/proc.h, logs in $home/logs/NAME.log.
 *
 * Supervision (ax_stack_supervise): a child that exits without being
 * stopped is logged (which child, exit status or signal, the end of its
 * log) and started again after a backoff of 100 ms doubling to 10 s; the
 * backoff goes back to 100 ms once a child stayed up 60 s. One child's
 * death never stops the others: axd, workers and ax-api only meet through
 * PostgreSQL and the queue socket, and each reconnects on its own.
 *
 * Invariants: axd counts as ready once it holds the scheduler lease with
 * an epoch above the one before it started (scheduler_lease row), so a
 * restarted axd is ready only after it took over. Stop order: ax-api,
 * workers (they drain), the standby axd, axd. Children get SIGTERM as
 * their parent-death signal: a crashed axctl leaves no daemon behind. A
 * child stopped on purpose (ax_proc_stop, or `stopping` set) is never
 * restarted until the caller starts it again.
 *
 * Workload: a few calls per process; waiting polls PostgreSQL every
 * 50 ms, which is fine for start-up (this is not the scheduling path).
 * Supervision polls every child with waitpid(WNOHANG): call it every
 * 100 ms or so.
 */
#ifndef AX_STACK_H
#define AX_STACK_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ax_err.h"
#include "cmd_db.h"
#include "proc.h"

#define AX_STACK_MAX_WORKERS 64

typedef struct ax_stack_opts {
	const char *home;          /* created when missing; made absolute */
	const char *dsn;           /* the (migrated) database */
	int         workers;       /* 0..AX_STACK_MAX_WORKERS */
	int         worker_slots;  /* worker.slots; 0: the config default */
	int         api_port;      /* api.port; 0: the config default */
	const char *log_level;     /* log.level of the children; NULL: info */
	const char *extra_yaml;    /* appended to ax.yaml verbatim (top-level
	                              keys); may be NULL */
	const char *worker_run_as; /* worker.run_as; NULL: the default */
} ax_stack_opts;

/* Restart state of one supervised child (see ax_stack_supervise). */
typedef struct ax_stack_sup {
	pid_t pid;          /* the pid this state is about (a new pid: a
	                       fresh start, the up-time clock restarts) */
	int64_t up_us;      /* monotonic time that pid was first seen */
	int64_t backoff_us; /* delay before the next restart; 0: initial */
	int64_t restart_at; /* monotonic time of the pending restart; 0:
	                       none pending */
	int restarts;       /* restarts so far */
} ax_stack_sup;

/* Children in supervision order: axd, the standby axd, ax-api, then the
 * workers (AX_STACK_WORKER0 + i). */
enum {
	AX_STACK_AXD      = 0,
	AX_STACK_STANDBY  = 1,
	AX_STACK_API      = 2,
	AX_STACK_WORKER0  = 3,
	AX_STACK_CHILDREN = AX_STACK_WORKER0 + AX_STACK_MAX_WORKERS,
};

typedef struct ax_stack {
	char    home[PATH_MAX];
	char    config[PATH_MAX + 16];     /* $home/ax.yaml */
	char    log_dir[PATH_MAX + 16];    /* $home/logs */
	char    queue_addr[PATH_MAX + 32]; /* what workers dial */
	char   *dsn;                       /* owned copy */
	int     n_workers;
	ax_proc axd;
	ax_proc standby; /* a second axd (ax_stack_start_standby), or
	                    never started */
	ax_proc api;
	ax_proc workers[AX_STACK_MAX_WORKERS];
	char    groups[AX_STACK_MAX_WORKERS][64]; /* worker.group; "": the
	                                             default group */
	int          api_up; /* ax-api was started and survived its start-up */
	ax_stack_sup sup[AX_STACK_CHILDREN]; /* by AX_STACK_* index */
} ax_stack;

/*
 * Creates $home, $home/logs, $home/logs/tasks and $home/run and writes the
 * config file. Starts nothing. AX_EINVAL for a bad option (the detail
 * names it), AX_EIO / AX_EPERM for the file system.
 */
ax_err ax_stack_init(ax_stack *st, const ax_stack_opts *o);

/*
 * Starts axd and waits (at most timeout_us) until it holds the scheduler
 * lease. AX_ENOENT when the binary is missing; AX_ECLOSED when axd exited
 * during start-up (the detail carries the end of its log);
 * AX_ETIMEDOUT when it never took the lease (it is stopped then).
 */
ax_err ax_stack_start_axd(ax_stack *st, int64_t timeout_us);

/*
 * Starts a second axd (log axd-standby.log) without waiting: it stands by
 * while axd holds the scheduler lease and takes over when that lease
 * goes. AX_ENOENT when the binary is missing.
 */
ax_err ax_stack_start_standby(ax_stack *st);

/* Starts worker i (0-based; log worker-<i+1>.log, id
 * standalone-<i+1>). Restarting a dead worker reuses its id. */
ax_err ax_stack_start_worker(ax_stack *st, int i);

/* Starts every worker. */
ax_err ax_stack_start_workers(ax_stack *st);

/*
 * Adds one more worker that joins worker group `group` (log
 * worker-<n>.log) and starts it. AX_ELIMIT past AX_STACK_MAX_WORKERS,
 * AX_EINVAL for an empty or over-long group name.
 */
ax_err ax_stack_add_group_worker(ax_stack *st, const char *group);

/*
 * Starts ax-api when its binary exists and waits 1 s: *up is 1 when it
 * still runs then, 0 when the binary is missing, $home/admin.token
 * cannot be written or it exited at once (then *why, when not NULL, says
 * which, with the end of its log). The admin token (ax_stack_admin_token)
 * is written before ax-api starts, so once /healthz answers the file is
 * there.
 */
ax_err ax_stack_start_api(ax_stack *st, int *up, char *why, size_t whylen);

/*
 * Polls every child; returns the first one that has exited without being
 * stopped (NULL when all run). Never blocks.
 */
ax_proc *ax_stack_check(ax_stack *st);

/*
 * One supervision pass, never blocking for long: every child that was
 * started, is not being stopped and has exited is reported on log (when
 * not NULL; each line starts with prefix) with its exit status or signal
 * and the end of its log, and a restart is scheduled after its backoff;
 * every restart that is due is done (axd without waiting for the lease:
 * it takes it when it can). A restart that fails is reported and
 * scheduled again with a doubled backoff. Returns the number of children
 * restarted in this pass.
 */
int ax_stack_supervise(ax_stack *st, FILE *log, const char *prefix);

/*
 * The restart delay after a death: BACKOFF_MIN (100 ms) for a first death
 * or after sup stayed up 60 s, else the previous delay doubled up to 10 s.
 * now is monotonic. Pure; also used for the embedded PostgreSQL.
 */
int64_t ax_stack_next_backoff(const ax_stack_sup *sup, int64_t now);

/* The child at supervision index k (AX_STACK_*), or NULL past the
 * workers. */
ax_proc *ax_stack_child(ax_stack *st, int k);

/*
 * Makes sure $home/admin.token holds an admin API token: created once
 * (stored hashed in PostgreSQL, the file is 0600), reused afterwards. Its
 * path goes into path (len bytes). Errors of the store or the file.
 */
ax_err ax_stack_admin_token(const ax_stack *st, char *path, size_t len);

/*
 * Loads the DAG YAML files of dir into the database dsn (the code of
 * `axctl dag load`) with its line per DAG on stdout silenced; errors
 * still go to stderr. Returns 0 when all were stored, else 1.
 */
int ax_stack_load_dags(const char *dir, const char *dsn);

/*
 * A home for a command that measures on its own installation (`axctl
 * bench`, `axctl drill`): the given directory or a temp dir, with its
 * embedded PostgreSQL up and migrated.
 */
typedef struct ax_stack_home {
	char        home[PATH_MAX];
	int         temp; /* 1: a temp dir, removed by ax_stack_home_close */
	ax_db_where w;    /* w.dsn: the database; w.embed: the cluster */
} ax_stack_home;

/*
 * Opens h on home (created when missing), or on a new temp dir
 * /tmp/ax-PREFIX-XXXXXX (0755: PostgreSQL may run as another user) when
 * home is NULL; starts the embedded cluster (never $AX_DSN: these
 * commands stop and start it, and empty its tables) and migrates it.
 * AX_EIO / AX_EPERM for the file system, the errors of ax_db_where_up
 * and ax_migrate_run.
 */
ax_err ax_stack_home_open(ax_stack_home *h, const char *home,
                          const char *prefix);

/* Stops the cluster, and removes the home when it was a temp dir (a
 * failure is said on stderr). Safe on zeroed memory. */
void ax_stack_home_close(ax_stack_home *h);

/* A TCP port free right now on 127.0.0.1 (the kernel picks it); -1 when
 * none can be had. */
int ax_stack_free_port(void);

/* Stops ax-api, the workers (in parallel: SIGTERM to all, then wait),
 * then the standby axd and axd, each with grace_us before SIGKILL. */
void ax_stack_stop(ax_stack *st, int64_t grace_us);

/* Frees what init allocated. Safe on zeroed memory; stops nothing. */
void ax_stack_fini(ax_stack *st);

#endif /* AX_STACK_H */
