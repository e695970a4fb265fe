/*
 * executor_local_internal.h - what the local executor's files share:
 * the attempt and executor state, and the functions of its parts.
 * Include it from worker/executor_local.c and worker/exec_*.c only.
 *
 * Role: executor_local.c runs an attempt's life (fork of the shim,
 * reports, timeouts, kills, fencing, reaping: see its header);
 * exec_prepare.c checks a spec and prepares in the parent what the child
 * needs (log file, environment, argv[0] on PATH); exec_cgroup.c keeps an
 * attempt's cgroup v2 (made, killed, removed); exec_usage.c samples what
 * running attempts use (cgroup files, else /proc).
 * Invariants: as in executor_local.c; nothing here runs in a child
 * (exec_child.c holds the child's code).
 */
#ifndef AX_EXECUTOR_LOCAL_INTERNAL_H
#define AX_EXECUTOR_LOCAL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ax_err.h"
#include "executor.h"

typedef struct attempt {
	char           run_id[AX_EXEC_RUN_ID_MAX];
	char          *log_path; /* owned copy, or NULL */
	char          *record;   /* state record path, or NULL */
	void          *user;
	pid_t          pid;        /* main process, also the group id */
	pid_t          shim;       /* supervisor, our child */
	int            pidfd;      /* the shim's; -1 once it is reaped */
	int            rfd;        /* report pipe from the shim, or -1 */
	int            cfd;        /* control socket to the shim, or -1 */
	int            main_done;  /* the main's end is known */
	int64_t        main_end;   /* mono us of that end */
	int64_t        lease_sent; /* last deadline sent to the shim */
	int            exit_code;
	int            term_signal;
	ax_exec_status stop;       /* TIMEOUT/KILLED/FENCED once stopped */
	int            stopping;   /* SIGTERM (or SIGKILL) sent to the group */
	int            killed;     /* SIGKILL sent to the group */
	int            releasing;  /* group gone: the shim was killed */
	int            done;       /* ready to be returned by poll() */
	int64_t        started_at; /* UTC us */
	int64_t        ended_at;   /* UTC us */
	int64_t        deadline;   /* mono us of the timeout, or INT64_MAX */
	int64_t        grace;      /* us between TERM and KILL */
	int64_t        kill_at;    /* mono us of the SIGKILL, or INT64_MAX */
	int64_t        probe_at;   /* mono us of the next group probe */
	int64_t        give_up_at; /* mono us: report even if not empty */
	char          *cg;         /* the attempt's cgroup dir, or NULL */
	int64_t        cg_until;   /* mono us: stop waiting for it to empty */
	int64_t        cpu_user_us; /* rusage of the main process and the */
	int64_t        cpu_sys_us;  /* descendants it waited for */
	int64_t        max_rss_kb;
} attempt;

typedef struct local {
	int       epfd;    /* epoll set of the shims' fds: ax_exec_fd() */
	int       devnull; /* O_RDWR, CLOEXEC: stdin of every task */
	attempt **v;       /* attempts not yet returned, start order */
	size_t    n;
	size_t    cap;
	int64_t   lease;     /* lease deadline, mono us; INT64_MAX: none */
	char     *state_dir; /* records of running attempts, or NULL */
	char     *cg_base;   /* cgroup v2 dir for the attempts', or NULL */
	uint64_t  cg_seq;    /* names of the attempts' cgroups */
} local;

/* --- exec_prepare.c --- */

/* The AX error code of an errno (ENOENT, EACCES/EPERM, ENOMEM, else EIO). */
ax_err axl_errno_to_ax(int e);
/* The name of a child setup step (exec_child.h), for messages. */
const char *axl_step_name(int step);
/*
 * Appends one line, prefixed "ax: ", to the attempt's log file (path may
 * be NULL: nothing), so the user finds why the executor intervened next
 * to the task's own output. Best effort.
 */
void axl_log_note(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Makes the directories above path (mkdir -p of its parent). */
ax_err axl_make_parent_dirs(const char *path);
/* Opens (creates, appends) the attempt's log file into *out (CLOEXEC). */
ax_err axl_open_log(const char *path, int *out);
/*
 * Builds the child's environment, clean of the worker's: PATH, HOME,
 * USER, LOGNAME, SHELL for the task's user, then spec->env, then the
 * AX_* variables; *out is one allocation, freed with free().
 */
ax_err axl_build_env(const ax_exec_spec *spec, const ax_exec_cred *c,
                     char ***out);
/* argv[0] found on the task's PATH (or as given with a '/') into *out. */
ax_err axl_resolve_argv0(const ax_exec_spec *spec, const ax_exec_cred *c,
                         char **out);
/* What can be checked of a spec alone (AX_EINVAL naming the field). */
ax_err axl_check_spec(const ax_exec_spec *spec);

/* --- exec_cgroup.c --- */

/* Kills every process of the attempt's cgroup, if it has one. */
void axl_cg_kill(const attempt *at);
/* Removes the attempt's cgroup once empty; 1 when it is gone (or when
 * waiting for it is over: it is then left, with a warning). */
int axl_cg_remove(attempt *at, int64_t now);
/* A new attempt's cgroup under lx->cg_base, or NULL (none, or logged). */
char *axl_cg_make(local *lx, const char *run_id);
/* The use_cgroups operation of the ops table (executor.h). */
ax_err axl_use_cgroups(void *self);

/* --- exec_usage.c --- */

/* The usage operation of the ops table (executor.h). */
size_t axl_usage(void *self, ax_exec_usage *out, size_t cap);

#endif /* AX_EXECUTOR_LOCAL_INTERNAL_H */
