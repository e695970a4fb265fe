/*
 * executor.h - how a worker runs one attempt: the executor plug-in point.
 *
 * Role: ax-worker receives rendered attempts from the queue service and
 * hands each to the executor of its task type ("bash" -> the local
 * executor, "noop" -> the built-in no-op executor; k8s later). An executor
 * is a const ops table with designated initialisers, as nng does for its
 * protocols; ax_exec wraps one instance of it behind a stable API so the
 * worker's main loop does not care which kind it drives.
 *
 * Event loop contract: an executor never blocks for long and never uses
 * threads or signal handlers. The worker's loop polls ax_exec_fd() for
 * readability with a timeout derived from ax_exec_next_deadline(), then
 * calls ax_exec_poll(now), which reaps finished attempts, enforces
 * timeouts and kill grace periods, and returns the attempts that ended.
 * One ax_exec is used by one thread at a time (the caller serialises).
 *
 * Local executor (executor_local.c), for "bash" tasks:
 *  - fork/exec of `/bin/bash -c COMMAND` (or an argv) in a new process
 *    group; stdin is /dev/null; stdout and stderr are appended to the
 *    per-attempt log file (its directories are created); every other fd is
 *    closed on exec, so no worker fd leaks into user code.
 *  - supervisor: each task runs under a small supervisor process (the
 *    "shim", a fork of the worker that never execs) that is the task's
 *    parent, outside the task's group. It holds one end of a socket pair
 *    whose other end only the worker holds: when the worker dies (even of
 *    kill -9) the shim sees EOF and SIGKILLs the task's process group at
 *    once, so no task outlives its worker. It also knows the worker's
 *    lease deadline (ax_exec_set_lease) and SIGKILLs the group when it
 *    passes, even while the worker itself is stopped (SIGSTOP).
 *  - state records (ax_exec_set_state_dir): one file per running attempt
 *    naming its process group and the start time of its leader (against
 *    pid reuse); ax_task_records_kill_leftovers() (task_records.h)
 *    kills what a previous life of the worker left.
 *  - identity (spec.cred): the task's user. With cred->switch_ids the
 *    task's process drops to it before exec (setgroups, setgid, setuid,
 *    each checked; the shim stays with the worker's identity, so it can
 *    still kill the group and the cgroup). The log file is opened and the
 *    cgroup made by the worker, so neither needs the user's rights; the
 *    working directory is entered as the user (default: the user's HOME
 *    when switching, else the worker's current directory).
 *  - environment: clean, nothing of the worker's: PATH (a fixed default),
 *    HOME, USER, LOGNAME, SHELL of the task's user, then the task env
 *    (which may override those), then AX_RUN_ID, AX_DAG, AX_TASK,
 *    AX_LOGICAL_DATE, AX_ATTEMPT, AX_SHARD_INDEX, AX_SHARD_TOTAL (AX_*
 *    win over a task env entry of the same name).
 *  - rlimits applied in the child (see ax_exec_limits).
 *  - started_at is taken right after exec succeeded (learnt through a
 *    CLOEXEC pipe); an exec failure is reported by ax_exec_start itself.
 *  - timeout and kill: SIGTERM to the whole group, SIGKILL to the group
 *    after the grace period. Processes of the group that outlive the
 *    task's main process (e.g. `sleep 100 &`) get the same TERM -> KILL
 *    sequence, also after a normal exit: an attempt is reported only once
 *    its process group is empty (or SIGKILL was sent and a further 2 s
 *    passed), so no orphan survives it. A process that leaves the group on
 *    purpose (setsid, setpgid) escapes this unless the attempt has a
 *    cgroup (see below), which is killed whole when the attempt ends.
 *  - reaping: one pidfd per child, all in one epoll set (ax_exec_fd); no
 *    SIGCHLD handler. The executor makes its process a child subreaper
 *    (prctl), so processes orphaned by a task are reparented to the worker
 *    rather than to an init that may never reap them (zombies would keep
 *    a process group alive); poll() reaps them, and also any other dead
 *    child it did not start. So: in a process that uses the local
 *    executor (ax-worker), every child process belongs to it; do not set
 *    SIGCHLD to SIG_IGN, and do not wait for children elsewhere.
 *  - cgroups (ax_exec_use_cgroups, where a cgroup v2 tree is writable):
 *    each attempt gets a cgroup; the shim joins it before forking the
 *    task; cgroup.kill catches what left the process group. Limits stay
 *    rlimits (no controller is enabled).
 *
 * Noop executor (executor_noop.c): an attempt succeeds at once, inside
 * the worker, with no process; for measuring the scheduler without
 * fork/exec costs. Its fd (an eventfd) is readable while results wait.
 *
 * Workload: a worker runs tens to a few hundred concurrent attempts; the
 * per-attempt lookups are linear scans over that set.
 */
#ifndef AX_EXECUTOR_H
#define AX_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ax_err.h"

#define AX_EXEC_RUN_ID_MAX      128 /* run_id buffer, NUL included */
#define AX_EXEC_DEFAULT_GRACE   (10 * 1000000LL) /* kill grace, us */
#define AX_EXEC_REAP_AFTER_KILL (2 * 1000000LL)  /* see header comment */

/*
 * Resource limits applied to the task's processes with setrlimit(2) in the
 * child; 0 means "inherit the worker's". Each process of the task gets the
 * limit separately (RLIMIT_NPROC counts the whole user and is ignored for
 * root). See ax_exec_limits_from_resources() for the DAG format mapping.
 */
typedef struct ax_exec_limits {
	int64_t cpu_seconds;   /* RLIMIT_CPU (SIGXCPU, then SIGKILL +1s) */
	int64_t address_space; /* RLIMIT_AS, bytes */
	int64_t open_files;    /* RLIMIT_NOFILE */
	int64_t processes;     /* RLIMIT_NPROC */
	int64_t file_size;     /* RLIMIT_FSIZE, bytes */
} ax_exec_limits;

/*
 * Who a task runs as (see ax_exec_cred_lookup). Strings and the group
 * array belong to the caller and only have to stay valid during
 * ax_exec_start().
 */
typedef struct ax_exec_cred {
	const char  *name;  /* USER, LOGNAME */
	const char  *home;  /* HOME, and the default working directory */
	const char  *shell; /* SHELL */
	uid_t        uid;
	gid_t        gid;
	const gid_t *groups; /* supplementary groups (with gid) */
	size_t       n_groups;
	int          switch_ids; /* 1: setgroups/setgid/setuid before exec */
} ax_exec_cred;

/* The default PATH of a task's clean environment. */
#define AX_EXEC_PATH "/usr/local/bin:/usr/bin:/bin"
#define AX_EXEC_ROOT_PATH                                                     \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/*
 * One attempt to run. The executor copies what it keeps, so every pointer
 * only has to stay valid during ax_exec_start(). Exactly one of command
 * and argv is set.
 */
typedef struct ax_exec_spec {
	const char    *run_id; /* required, unique among running attempts */
	const char    *dag;    /* AX_DAG */
	const char    *task;   /* AX_TASK */
	const char    *logical_date; /* AX_LOGICAL_DATE, ISO 8601 */
	int32_t        attempt;      /* AX_ATTEMPT, >= 1 */
	int32_t        shard_index;  /* AX_SHARD_INDEX, 0 <= index < total */
	int32_t        shard_total;  /* AX_SHARD_TOTAL, >= 1 (0 means 1) */
	const char    *command;      /* run as /bin/bash -c COMMAND */
	char *const   *argv;       /* or argv, NULL-terminated; PATH search */
	char *const   *env;        /* extra "NAME=VALUE", NULL-terminated */
	const char    *workdir;    /* NULL: the worker's current directory */
	int64_t        timeout_us; /* 0: none */
	int64_t        grace_us;   /* TERM -> KILL; 0: AX_EXEC_DEFAULT_GRACE */
	ax_exec_limits limits;
	const char    *log_path; /* stdout+stderr appended; NULL: /dev/null */
	void          *user;     /* returned untouched in the result */
	int64_t       *started_at; /* out, may be NULL: on AX_OK gets the start
	                            * time the result will carry (UTC us), the
	                            * instant the timeout counts from */
	const ax_exec_cred *cred;  /* NULL: the worker's own user, no switch */
} ax_exec_spec;

typedef enum ax_exec_status {
	AX_EXEC_SUCCESS = 0, /* exited with status 0 */
	AX_EXEC_FAILED,      /* exited non-zero, or died of a signal */
	AX_EXEC_TIMEOUT,     /* killed because timeout_us passed */
	AX_EXEC_KILLED,      /* killed on request (ax_exec_kill) */
	AX_EXEC_FENCED,      /* killed because the lease lapsed */
} ax_exec_status;

/* How one attempt ended; filled by ax_exec_poll(). */
typedef struct ax_exec_result {
	char           run_id[AX_EXEC_RUN_ID_MAX];
	void          *user; /* spec.user */
	ax_exec_status status;
	int            exit_code;   /* exit status, or -1 if signalled */
	int            term_signal; /* signal that ended it, or 0 */
	int64_t        started_at;  /* UTC us, right after exec succeeded */
	int64_t        ended_at;    /* UTC us, when its end was observed */
	int            pid;         /* main process, also the process group
	                             * id; 0: noop */
	int64_t cpu_user_us;        /* rusage of the main process and of */
	int64_t cpu_sys_us;         /* the descendants it waited for */
	int64_t max_rss_kb;         /* peak RSS among those, KiB */
	int64_t log_bytes;          /* log file size at the end; 0: none */
} ax_exec_result;

/* What a running attempt uses now (ax_exec_usage). */
typedef struct ax_exec_usage {
	const char *run_id; /* valid until the attempt is returned by poll */
	int64_t     cpu_us; /* CPU time of its processes so far, user+system */
	int64_t     rss_kb; /* resident memory of its processes now */
} ax_exec_usage;

/*
 * The plug-in interface. `self` is the executor's private state made by
 * init. Contracts are those of the ax_exec_* wrappers below.
 */
typedef struct ax_exec_ops {
	const char *name; /* task type it serves, e.g. "bash" */
	ax_err (*init)(void **self);
	void (*fini)(void *self);
	ax_err (*start)(void *self, const ax_exec_spec *spec);
	ax_err (*kill)(void *self, const char *run_id, int64_t grace_us);
	int (*fd)(void *self);
	int64_t (*next_deadline)(void *self);
	ax_err (*poll)(void *self, int64_t now_us, ax_exec_result *out,
	               size_t cap, size_t *n);
	size_t (*running)(void *self);
	/* optional (NULL: nothing to do) */
	void (*set_lease)(void *self, int64_t deadline_mono_us);
	void (*fence)(void *self, int64_t lapsed_at_mono_us);
	ax_err (*set_state_dir)(void *self, const char *dir);
	ax_err (*use_cgroups)(void *self);
	size_t (*usage)(void *self, ax_exec_usage *out, size_t cap);
} ax_exec_ops;

extern const ax_exec_ops ax_exec_local_ops; /* "bash" */
extern const ax_exec_ops ax_exec_noop_ops;  /* "noop" */

typedef struct ax_exec ax_exec;

/* The ops table serving a task type ("bash", "noop"); NULL if none. */
const ax_exec_ops *ax_exec_ops_find(const char *type);

/*
 * Creates an executor of the given kind. *out is owned by the caller and
 * freed with ax_exec_free(). Errors: AX_EINVAL (NULL ops), AX_ENOMEM,
 * AX_EIO (epoll/eventfd failed).
 */
ax_err ax_exec_new(const ax_exec_ops *ops, ax_exec **out);

/*
 * Frees an executor; accepts NULL. Attempts still running are killed at
 * once (SIGKILL to each process group) and reaped, without results: drain
 * with ax_exec_poll() first to report them.
 */
void ax_exec_free(ax_exec *ex);

/* The ops table the executor was made with. */
const ax_exec_ops *ax_exec_ops_of(const ax_exec *ex);

/*
 * Starts an attempt. On AX_OK the attempt runs (local: its process has
 * exec'd) and will be returned exactly once by ax_exec_poll(). Errors:
 * AX_EINVAL (bad spec: detail names the field), AX_EEXIST (run_id already
 * running), AX_ENOENT (argv[0] not found / not executable, workdir
 * missing), AX_EPERM, AX_EIO (log file, fork, rlimit ...), AX_ENOMEM. On an
 * error nothing runs; for exec-time failures a line saying why is also
 * appended to the log file, so the user sees it next to the task output.
 */
ax_err ax_exec_start(ax_exec *ex, const ax_exec_spec *spec);

/*
 * Asks a running attempt to stop: SIGTERM to its process group now,
 * SIGKILL after grace_us (0: the attempt's own grace period, its spec's
 * grace_us); its result says AX_EXEC_KILLED (unless it had already ended
 * or timed out). A preemption passes its own grace (preemption.grace).
 * Returns AX_ENOENT when no attempt with that run_id is running. Calling
 * it twice does not restart the grace.
 */
ax_err ax_exec_kill(ax_exec *ex, const char *run_id, int64_t grace_us);

/*
 * What the running attempts use now, up to cap of them, into out;
 * returns how many. From the attempt's cgroup when it has one
 * (cpu.stat, memory.current: everything it started, even what left its
 * process group), else summed over the processes of its process group
 * (one read of /proc for all of them). 0 for an executor without it.
 */
size_t ax_exec_usage_now(ax_exec *ex, ax_exec_usage *out, size_t cap);

/*
 * A file descriptor that becomes readable when ax_exec_poll() has work
 * (a child ended, a noop result waits). Owned by the executor; -1 if the
 * executor has none. Deadlines do not make it readable: see below.
 */
int ax_exec_fd(const ax_exec *ex);

/*
 * The earliest monotonic instant (ax_clock_mono_us) at which ax_exec_poll()
 * must be called even if the fd stays quiet (a timeout, a grace period, a
 * wait for a process group to empty), or INT64_MAX when there is none.
 */
int64_t ax_exec_next_deadline(const ax_exec *ex);

/*
 * Reaps, enforces deadlines against now_us (monotonic), and copies up to
 * cap ended attempts into out[0..*n). Never blocks. When more than cap
 * attempts have ended, the rest wait for the next call (and
 * ax_exec_next_deadline() returns a past instant). Returns AX_OK, or
 * AX_EINVAL for bad arguments.
 */
ax_err ax_exec_poll(ax_exec *ex, int64_t now_us, ax_exec_result *out,
                    size_t cap, size_t *n);

/* Attempts started and not yet returned by ax_exec_poll(). */
size_t ax_exec_running(const ax_exec *ex);

/*
 * The worker's lease deadline (monotonic us; INT64_MAX: none, the
 * default): the local executor's supervisors SIGKILL their task's group
 * once it passes without a newer deadline, whatever the worker is doing.
 * Attempts started later get the latest deadline at start.
 */
void ax_exec_set_lease(ax_exec *ex, int64_t deadline_mono_us);

/*
 * The lease lapsed at lapsed_at (monotonic us): every attempt whose main
 * process had not ended before that instant gets SIGKILL to its process
 * group now and ends with AX_EXEC_FENCED; leftovers of attempts that had
 * ended are killed too (those keep their status). Results still come
 * from ax_exec_poll().
 */
void ax_exec_fence(ax_exec *ex, int64_t lapsed_at_mono_us);

/*
 * Puts each later attempt in a cgroup v2 of its own, made under the
 * cgroup this process is in, if a probe shows that works here (a child
 * can join a new cgroup there and cgroup.kill exists). Its processes
 * then die by cgroup.kill when the worker dies, when the lease lapses
 * and when the attempt ends: those that left the process group (setsid,
 * double fork into a new session) included. Without it (the default, or
 * when this fails) kills go to process groups only. Errors: AX_ENOENT
 * (no cgroup v2 hierarchy), AX_EPERM (not usable here: detail says why),
 * AX_EINVAL (an executor without processes).
 */
ax_err ax_exec_use_cgroups(ax_exec *ex);

/*
 * Keeps one record per running attempt in dir (created if missing) until
 * ax_exec_poll() returns the attempt, for ax_task_records_kill_leftovers()
 * in a later life of the process (task_records.h). Errors: AX_EIO (dir cannot
 * be created), AX_EINVAL (an executor without processes).
 */
ax_err ax_exec_set_state_dir(ax_exec *ex, const char *dir);

/*
 * Maps a task's `resources` (DAG format) and timeout to rlimits:
 * memory -> RLIMIT_AS (bytes of address space per process); cpu (cores,
 * may be fractional) -> RLIMIT_CPU = ceil(cpu * timeout) seconds, a budget
 * a task using its cores for its whole timeout would not exceed (no CPU
 * limit without a timeout: rlimits cannot cap a rate; cgroups could).
 * Zero or negative inputs leave the matching limit at 0 (inherit). Other
 * fields of out are left untouched.
 */
void ax_exec_limits_from_resources(double cpu, int64_t memory_bytes,
                                   int64_t timeout_us, ax_exec_limits *out);

/*
 * Who the tasks of this process run as when they name user `name` (NULL:
 * the process's own user). As root: that user's uid, gid, supplementary
 * groups (as initgroups would set them), HOME and SHELL, with
 * switch_ids set unless it is root itself. Not root: only the process's
 * own user can be named (no switch). *out is one malloc'd block (strings
 * and groups inside), freed with free(). Errors: AX_ENOENT (no such
 * user: detail names it), AX_EPERM (not root and name is another user),
 * AX_ENOMEM. Not async-signal-safe (reads the user database): call it in
 * the worker, never in a child.
 */
ax_err ax_exec_cred_lookup(const char *name, ax_exec_cred **out);

/*
 * Appends "ax: LINE" to an attempt's log file (its directories are made),
 * as the local executor does when it intervenes: for the worker to say
 * why an attempt did not start. Best effort; path NULL is a no-op.
 */
void ax_exec_log_note(const char *path, const char *line);

/* "SUCCESS", "FAILED", "TIMEOUT", "KILLED", "FENCED". */
const char *ax_exec_status_name(ax_exec_status s);

#endif /* AX_EXECUTOR_H */
