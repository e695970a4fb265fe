/*
 * exec_child.h - what runs in the local executor's forked children: the
 * shim (the task's supervisor) and the task between fork and exec.
 *
 * Role: internal to the local executor (executor_local.c, which forks
 * the shim and reads its reports). The shim is a fork of a threaded
 * process that never execs, so everything in exec_child.c calls only
 * async-signal-safe functions: no malloc, no stdio, no locks, no logging.
 * Protocol: the shim writes ax_shim_msg records (one write each, atomic
 * on a pipe) to report_fd: AX_SHIM_PID once the task is forked, then
 * AX_SHIM_FENCED if the lease lapsed first, then AX_SHIM_ENDED with the
 * task main's wait status and rusage. It reads int64 lease deadlines
 * (monotonic us; INT64_MAX: none) from ctrl_fd, a SOCK_SEQPACKET socket
 * whose EOF means the worker died. With a cgroup (cg_procs), the shim
 * moves itself into it before it forks the task, and on EOF or a lapsed
 * lease also writes cgroup.kill, which kills what left the process group
 * (setsid); the shim first moves itself back to the parent cgroup, so
 * that it survives to remove the emptied cgroup (if that move fails, it
 * dies in the cgroup.kill and the worker removes it). The task reports a setup
 * failure as an ax_child_report on status_fd, which is close-on-exec: EOF
 * there means the exec succeeded.
 */
#ifndef AX_EXEC_CHILD_H
#define AX_EXEC_CHILD_H

#include <stdint.h>
#include <sys/types.h>

#include "executor.h"

/* The child's setup steps, reported through the status pipe on failure. */
enum ax_child_step {
	AX_STEP_SETPGID = 1,
	AX_STEP_DUP,
	AX_STEP_CHDIR,
	AX_STEP_RLIMIT_CPU,
	AX_STEP_RLIMIT_AS,
	AX_STEP_RLIMIT_NOFILE,
	AX_STEP_RLIMIT_NPROC,
	AX_STEP_RLIMIT_FSIZE,
	AX_STEP_EXEC,
	AX_STEP_FORK, /* the shim could not fork the task */
	AX_STEP_SETGROUPS,
	AX_STEP_SETGID,
	AX_STEP_SETUID, /* also: the old ids could be taken back */
};

typedef struct ax_child_report {
	int step;
	int err;
} ax_child_report;

/* Everything the child needs, prepared by the parent before fork. */
typedef struct ax_child_args {
	const char    *path;      /* file to execve */
	char *const   *argv;      /* NULL-terminated */
	char *const   *envp;      /* NULL-terminated */
	const char    *workdir;   /* or NULL */
	int            in_fd;     /* /dev/null */
	int            out_fd;    /* log file or /dev/null */
	int            status_fd; /* write end of the CLOEXEC pipe */
	int            ctrl_fd;   /* shim's end of the control socket */
	int            report_fd; /* write end of the report pipe */
	int64_t        lease;     /* lease deadline at start, mono us */
	const char    *cg_procs;  /* <cgroup>/cgroup.procs, or NULL */
	const char    *cg_kill;   /* <cgroup>/cgroup.kill, or NULL */
	const char    *cg_dir;    /* <cgroup>, or NULL */
	const char    *cg_out;    /* the parent cgroup's cgroup.procs */
	ax_exec_limits limits;
	int            switch_ids; /* drop to uid/gid/groups before exec */
	uid_t          uid;
	gid_t          gid;
	const gid_t   *groups;
	size_t         n_groups;
	const char    *home; /* working directory when workdir is NULL and
	                      * switch_ids (falls back to /) */
} ax_child_args;

/* Shim -> worker messages on the report pipe (one write each). */
enum { AX_SHIM_PID = 1, AX_SHIM_FENCED, AX_SHIM_ENDED };

typedef struct ax_shim_msg {
	int32_t kind;
	int32_t wstatus; /* AX_SHIM_ENDED: as from wait4; AX_SHIM_PID: 1
	                  * when shim and task are in the cgroup */
	int64_t pid;     /* AX_SHIM_PID: the task main */
	int64_t mono;    /* AX_SHIM_FENCED, AX_SHIM_ENDED: when, mono us */
	int64_t utime_us, stime_us, maxrss_kb; /* AX_SHIM_ENDED: rusage */
} ax_shim_msg;

/*
 * The shim's whole life (see the top). a and everything it points to
 * are the forking parent's memory, valid in the child as copied by fork.
 * Never returns: it exits, or dies of the SIGKILL the worker sends it
 * once the task's group is empty.
 */
void ax_child_shim_main(const ax_child_args *a) __attribute__((noreturn));

#endif /* AX_EXEC_CHILD_H */
