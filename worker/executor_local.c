/*
 * executor_local.c - the local executor: runs `bash` tasks as processes of
 * the worker's machine (fork/exec, own process group, rlimits, log file),
 * each under a supervisor process that kills it when the worker dies.
 *
 * Role: the "bash" ops table of executor.h, driven by ax-worker's loop.
 * Processes of one attempt:
 *   worker --fork--> shim --fork--> task main (group leader, execs)
 *                                      +-- its children (same group)
 *   The shim is a fork of the worker that never execs (so it only calls
 *   async-signal-safe functions, like any child of a threaded process).
 *   It sits in a group of its own, outside the task's, and ignores the
 *   stop signals meant for the worker. It waits for the task main
 *   (wait4: exit status and rusage), reports to the worker over a pipe,
 *   and SIGKILLs the task's group when (a) its control socket reaches EOF
 *   (the worker died: kill -9 included, since only the worker holds the
 *   other end) or (b) the lease deadline it was last sent passes. It
 *   lives until the worker SIGKILLs it once the task's group is empty.
 * Life of an attempt:
 *   start: spec checked, argv/envp/log fd prepared in the parent, fork of
 *          the shim, which forks the task; the shim sends the task's pid,
 *          and a CLOEXEC pipe tells the worker "exec'd" (EOF) or "failed
 *          at step S with errno E".
 *   run:   the shim's pidfd and its report pipe sit in the epoll set; a
 *          timeout or a kill request sends SIGTERM to the group and arms
 *          kill_at.
 *   end:   the shim reports the main process's end; then the group must
 *          empty: leftovers get TERM (if not sent yet), KILL at kill_at,
 *          and the group is probed every AX_LOCAL_TICK until
 *          kill(-pgid, 0) says ESRCH (or AX_EXEC_REAP_AFTER_KILL after the
 *          SIGKILL, when it is reported anyway with a warning); then the
 *          shim is killed and reaped.
 *   cgroup (ax_exec_use_cgroups): made before the fork, joined by the
 *          shim before it forks the task; at the end, after the group
 *          emptied, cgroup.kill takes what left the group (setsid) and
 *          the shim, and the cgroup is removed once empty.
 *   fence: the lease lapsed (the shim's own deadline or ax_exec_fence):
 *          SIGKILL to the group; the attempt ends FENCED unless its main
 *          process had ended before the lapse.
 * Invariants: an attempt is in `v` from a successful start until poll()
 * returns it; pidfd >= 0 exactly while the shim is not reaped; main_done
 * once the shim reported the main's end (or died without doing so); the
 * group id equals the main pid and stays reserved while any member lives,
 * so group signals cannot hit a stranger (the only window is between the
 * group emptying and the probe right after it, which would need a pid
 * wrap-around within milliseconds).
 * State records: with a state dir, each attempt has a record (group id,
 * leader start time; task_records.h) from its start until poll() returns
 * it; a worker killed together with its shims leaves them behind for
 * its next life (ax_task_records_kill_leftovers).
 * Child code (the shim, the task before exec) lives in exec_child.c; the
 * spec check and what the parent prepares before the fork (log file,
 * environment, argv[0]) in exec_prepare.c; cgroups in exec_cgroup.c; the
 * usage samples in exec_usage.c (executor_local_internal.h).
 * Workload: tens to hundreds of concurrent attempts, tens of starts per
 * second per worker; the two forks cost about a millisecond each here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "exec_child.h"
#include "executor.h"
#include "log.h"
#include "executor_local_internal.h"
#include "task_records.h"

#define AX_LOCAL_TICK (10 * AX_USEC_PER_MSEC) /* group-empty probe period */
#define AX_LOCAL_BASH "/bin/bash"

static ax_err
check_spec(const local *lx, const ax_exec_spec *spec)
{
	ax_err rv = axl_check_spec(spec);
	if (rv != AX_OK)
		return rv;
	for (size_t i = 0; i < lx->n; i++)
		if (strcmp(lx->v[i]->run_id, spec->run_id) == 0)
			return ax_err_set(AX_EEXIST,
			                  "attempt %s is already running",
			                  spec->run_id);
	return AX_OK;
}

/* ------------------------------------------------------------------ */
/* the parent                                                           */

/* Sends sig to the attempt's process group; ESRCH (empty) is fine. */
static void
signal_group(const attempt *at, int sig)
{
	if (at->pid <= 0)
		return;
	if (kill(-at->pid, sig) < 0 && errno != ESRCH)
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = at->run_id },
		        "kill(-%d, %s): %s", (int) at->pid, strsignal(sig),
		        strerror(errno));
}

/*
 * Whether the attempt's process group is gone. Members orphaned by the
 * main process were reparented to us (we are a child subreaper): reap the
 * dead ones first, since a zombie still counts as a member.
 */
static int
group_empty(const attempt *at)
{
	while (waitpid(-at->pid, NULL, WNOHANG) > 0)
		;
	return kill(-at->pid, 0) < 0 && errno == ESRCH;
}

/* Reads exactly len bytes from a blocking fd: 1, 0 on EOF, -1 error. */
static int
read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *) buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 && got == 0 ? 0 : -1;
		got += (size_t) n;
	}
	return 1;
}

/* Closes both ends of the pipes and the socket pair made for a shim. */
static void
close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* Kills and reaps the shim and task of a start that failed. */
static void
discard_shim(attempt *at)
{
	if (at->pid > 0)
		kill(-at->pid, SIGKILL);
	kill(at->shim, SIGKILL);
	while (waitpid(at->shim, NULL, 0) < 0 && errno == EINTR)
		;
	/* the task, if the shim had not reaped it, is ours now */
	if (at->pid > 0)
		while (waitpid(at->pid, NULL, 0) < 0 && errno == EINTR)
			;
	close_fds(&at->rfd, 1);
	close_fds(&at->cfd, 1);
	axl_cg_kill(at);
	at->cg_until = ax_clock_mono_us() + AX_EXEC_REAP_AFTER_KILL;
	while (!axl_cg_remove(at, ax_clock_mono_us()))
		ax_clock_sleep_us(AX_LOCAL_TICK);
}

/*
 * Forks the shim, which forks and execs the task. On AX_OK at->shim,
 * at->pid, at->rfd and at->cfd are set and the task has exec'd. On an
 * error the shim and the task have been reaped and nothing runs.
 */
static ax_err
spawn(local *lx, const ax_exec_spec *spec, const ax_child_args *tmpl,
      attempt *at)
{
	ax_child_args   a      = *tmpl;
	ax_child_report r      = { 0 };
	ax_shim_msg     m      = { 0 };
	int             fds[6] = { -1, -1, -1, -1, -1, -1 };
	char            cg_procs[PATH_MAX + 16], cg_kill[PATH_MAX + 16];
	char            cg_out[PATH_MAX + 16];
	ssize_t         got;
	pid_t           shim;

	if (pipe2(&fds[0], O_CLOEXEC) < 0 || pipe2(&fds[2], O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, &fds[4]) <
	        0) {
		int e = errno;
		close_fds(fds, 6);
		return ax_err_set(AX_EIO, "attempt %s: pipe: %s", spec->run_id,
		                  strerror(e));
	}
	a.status_fd = fds[1];
	a.report_fd = fds[3];
	a.ctrl_fd   = fds[5];
	a.lease     = lx->lease;
	if (at->cg != NULL) {
		snprintf(cg_procs, sizeof(cg_procs), "%s/cgroup.procs",
		         at->cg);
		snprintf(cg_kill, sizeof(cg_kill), "%s/cgroup.kill", at->cg);
		snprintf(cg_out, sizeof(cg_out), "%s/cgroup.procs",
		         lx->cg_base);
		a.cg_procs = cg_procs;
		a.cg_kill  = cg_kill;
		a.cg_dir   = at->cg;
		a.cg_out   = cg_out;
	}
	shim = fork();
	if (shim < 0) {
		int e = errno;
		close_fds(fds, 6);
		return ax_err_set(e == EAGAIN ? AX_EAGAIN : axl_errno_to_ax(e),
		                  "attempt %s: fork: %s", spec->run_id,
		                  strerror(e));
	}
	if (shim == 0)
		ax_child_shim_main(&a);
	setpgid(shim, shim);
	close(fds[1]);
	close(fds[3]);
	close(fds[5]);
	at->shim       = shim;
	at->rfd        = fds[2];
	at->cfd        = fds[4];
	at->lease_sent = lx->lease;
	/* the shim sends the task's pid first (EOF: it could not fork) */
	if (read_full(at->rfd, &m, sizeof(m)) == 1 && m.kind == AX_SHIM_PID)
		at->pid = (pid_t) m.pid;
	if (at->pid > 0 && at->cg != NULL && m.wstatus != 1) {
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = spec->run_id },
		        "could not join cgroup %s; the attempt runs in its "
		        "process group only",
		        at->cg);
		rmdir(at->cg);
		free(at->cg);
		at->cg = NULL;
	}
	do
		got = read(fds[0], &r, sizeof(r));
	while (got < 0 && errno == EINTR);
	close(fds[0]);
	if (got == 0 && at->pid > 0) {
		fcntl(at->rfd, F_SETFL, O_NONBLOCK);
		fcntl(at->cfd, F_SETFL, O_NONBLOCK);
		return AX_OK;
	}
	discard_shim(at);
	if (got != (ssize_t) sizeof(r))
		return ax_err_set(AX_EIO,
		                  "attempt %s: the child died before exec",
		                  spec->run_id);
	const char *what = r.step != AX_STEP_CHDIR ? a.path
	    : a.workdir != NULL                    ? a.workdir
	                                           : "/";
	axl_log_note(spec->log_path, "cannot start attempt %s: %s %s: %s",
	             spec->run_id, axl_step_name(r.step), what,
	             strerror(r.err));
	return ax_err_set(axl_errno_to_ax(r.err), "attempt %s: %s %s: %s",
	                  spec->run_id, axl_step_name(r.step), what,
	                  strerror(r.err));
}

static ax_err
local_track(local *lx, attempt *at)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = at };

	if (lx->n == lx->cap) {
		size_t    ncap = lx->cap ? lx->cap * 2 : 16;
		attempt **nv   = realloc(lx->v, ncap * sizeof(*nv));
		if (nv == NULL)
			return ax_err_set(AX_ENOMEM,
			                  "executor: out of memory");
		lx->v   = nv;
		lx->cap = ncap;
	}
	if ((at->pidfd = pidfd_open(at->shim, 0)) < 0)
		return ax_err_set(AX_EIO, "attempt %s: pidfd_open: %s",
		                  at->run_id, strerror(errno));
	if (epoll_ctl(lx->epfd, EPOLL_CTL_ADD, at->pidfd, &ev) < 0 ||
	    epoll_ctl(lx->epfd, EPOLL_CTL_ADD, at->rfd, &ev) < 0) {
		int e = errno;
		close(at->pidfd); /* leaves the epoll set with it */
		at->pidfd = -1;
		return ax_err_set(AX_EIO, "attempt %s: epoll_ctl: %s",
		                  at->run_id, strerror(e));
	}
	lx->v[lx->n++] = at;
	return AX_OK;
}

static void
attempt_free(attempt *at)
{
	if (at == NULL)
		return;
	if (at->record != NULL)
		ax_task_record_remove(at->record, at->run_id);
	free(at->record);
	free(at->cg);
	free(at->log_path);
	free(at);
}

static ax_err
local_start(void *self, const ax_exec_spec *spec)
{
	local              *lx = self;
	ax_child_args       a;
	char               *resolved = NULL;
	char               *bash_argv[4];
	char              **envp  = NULL;
	attempt            *at    = NULL;
	ax_exec_cred       *own   = NULL;
	const ax_exec_cred *cred  = spec->cred;
	int                 logfd = -1;
	ax_err              rv;

	if ((rv = check_spec(lx, spec)) != AX_OK)
		return rv;
	memset(&a, 0, sizeof(a));
	/* the log first: it is where a user looks for why nothing ran */
	if (spec->log_path != NULL &&
	    (rv = axl_open_log(spec->log_path, &logfd)) != AX_OK)
		return rv;
	if (cred == NULL) {
		if ((rv = ax_exec_cred_lookup(NULL, &own)) != AX_OK)
			goto out;
		cred = own;
	}
	if (spec->argv != NULL) {
		if ((rv = axl_resolve_argv0(spec, cred, &resolved)) != AX_OK) {
			axl_log_note(spec->log_path,
			             "cannot start attempt %s: %s",
			             spec->run_id, ax_err_detail());
			goto out;
		}
		a.path = resolved;
		a.argv = spec->argv;
	} else {
		bash_argv[0] = (char *) "bash";
		bash_argv[1] = (char *) "-c";
		bash_argv[2] = (char *) spec->command;
		bash_argv[3] = NULL;
		a.path       = AX_LOCAL_BASH;
		a.argv       = bash_argv;
	}
	if ((rv = axl_build_env(spec, cred, &envp)) != AX_OK)
		goto out;
	if (cred->switch_ids) {
		a.switch_ids = 1;
		a.uid        = cred->uid;
		a.gid        = cred->gid;
		a.groups     = cred->groups;
		a.n_groups   = cred->n_groups;
	}
	a.home = cred->home;
	at     = calloc(1, sizeof(*at));
	if (at == NULL ||
	    (spec->log_path != NULL &&
	     (at->log_path = strdup(spec->log_path)) == NULL)) {
		rv = ax_err_set(AX_ENOMEM, "executor: out of memory");
		goto out;
	}
	at->pidfd = at->rfd = at->cfd = -1;
	a.envp                        = envp;
	a.workdir                     = spec->workdir;
	a.in_fd                       = lx->devnull;
	a.out_fd                      = logfd >= 0 ? logfd : lx->devnull;
	a.limits                      = spec->limits;
	at->cg                        = axl_cg_make(lx, spec->run_id);
	if ((rv = spawn(lx, spec, &a, at)) != AX_OK)
		goto out;

	strcpy(at->run_id, spec->run_id); /* length checked */
	at->user       = spec->user;
	at->started_at = ax_clock_utc_us();
	int64_t now    = ax_clock_mono_us();
	at->deadline =
	    spec->timeout_us > 0 ? now + spec->timeout_us : INT64_MAX;
	at->grace =
	    spec->grace_us > 0 ? spec->grace_us : AX_EXEC_DEFAULT_GRACE;
	at->kill_at    = INT64_MAX;
	at->probe_at   = INT64_MAX;
	at->give_up_at = INT64_MAX;
	if ((rv = local_track(lx, at)) != AX_OK) {
		discard_shim(at);
		goto out;
	}
	if (lx->state_dir != NULL)
		at->record = ax_task_record_write(lx->state_dir, at->run_id,
		                                  at->pid, at->cg);
	if (spec->started_at != NULL)
		*spec->started_at = at->started_at;
	at = NULL; /* owned by lx now */
out:
	if (at != NULL) {
		if (at->cg != NULL)
			rmdir(at->cg);
		free(at->cg);
		free(at->log_path);
		close_fds(&at->rfd, 1);
		close_fds(&at->cfd, 1);
	}
	free(at);
	free(envp);
	free(resolved);
	free(own);
	if (logfd >= 0)
		close(logfd);
	return rv;
}

/*
 * Starts the TERM -> KILL sequence for an attempt, once; reason is kept
 * only while the main process is alive (a late kill of an attempt that
 * already ended does not rewrite its status).
 */
static void
stop_attempt(attempt *at, ax_exec_status reason, int64_t now)
{
	if (at->stopping)
		return;
	if (!at->main_done)
		at->stop = reason;
	at->stopping = 1;
	at->kill_at  = now + at->grace;
	signal_group(at, SIGTERM);
}

static ax_err
local_kill(void *self, const char *run_id, int64_t grace_us)
{
	local *lx = self;

	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		if (strcmp(at->run_id, run_id) != 0 || at->done)
			continue;
		if (!at->main_done && !at->stopping)
			axl_log_note(
			    at->log_path,
			    "kill requested: SIGTERM to the process group");
		if (grace_us > 0 && !at->stopping)
			at->grace = grace_us; /* this kill's own grace */
		stop_attempt(at, AX_EXEC_KILLED, ax_clock_mono_us());
		return AX_OK;
	}
	return ax_err_set(AX_ENOENT, "attempt %s is not running", run_id);
}

/* SIGKILL to the group now, no grace: the sequence ends here. */
static void
kill_group_now(attempt *at, int64_t now)
{
	signal_group(at, SIGKILL);
	at->stopping = 1;
	if (!at->killed) {
		at->killed     = 1;
		at->give_up_at = now + AX_EXEC_REAP_AFTER_KILL;
	}
}

/* SIGKILL to the group now (lease lapsed); the result says FENCED. */
static void
fence_attempt(attempt *at, int64_t now)
{
	if (at->stop != AX_EXEC_FENCED)
		axl_log_note(
		    at->log_path,
		    "the worker's lease lapsed: SIGKILL to the process "
		    "group");
	if (!at->stopping ||
	    (at->stop != AX_EXEC_TIMEOUT && at->stop != AX_EXEC_KILLED))
		at->stop = AX_EXEC_FENCED;
	kill_group_now(at, now);
}

/* Reads what the shim reported (non-blocking). */
static void
read_reports(local *lx, attempt *at, int64_t now)
{
	ax_shim_msg m;
	ssize_t     got = -1;

	while (at->rfd >= 0 &&
	       (got = read(at->rfd, &m, sizeof(m))) == (ssize_t) sizeof(m)) {
		if (m.kind == AX_SHIM_FENCED && !at->main_done) {
			fence_attempt(at, now);
		} else if (m.kind == AX_SHIM_ENDED && !at->main_done) {
			if (WIFEXITED(m.wstatus)) {
				at->exit_code   = WEXITSTATUS(m.wstatus);
				at->term_signal = 0;
			} else {
				at->exit_code   = -1;
				at->term_signal = WTERMSIG(m.wstatus);
			}
			at->cpu_user_us = m.utime_us;
			at->cpu_sys_us  = m.stime_us;
			at->max_rss_kb  = m.maxrss_kb;
			at->main_done   = 1;
			at->main_end    = m.mono;
			at->probe_at    = now;
		}
	}
	if (got == 0 && at->rfd >= 0) { /* the shim is gone */
		epoll_ctl(lx->epfd, EPOLL_CTL_DEL, at->rfd, NULL);
		close_fds(&at->rfd, 1);
	}
}

/* The shim ended (we killed it, or something else did): reap it. */
static void
reap_shim(local *lx, attempt *at, int64_t now)
{
	int   st = 0;
	pid_t got;

	if (at->pidfd < 0)
		return;
	got = waitpid(at->shim, &st, WNOHANG);
	if (got == 0 || (got < 0 && errno == EINTR))
		return; /* spurious wake-up; still readable if not */
	read_reports(lx, at, now); /* its last words, if any */
	epoll_ctl(lx->epfd, EPOLL_CTL_DEL, at->pidfd, NULL);
	close_fds(&at->pidfd, 1);
	if (at->rfd >= 0)
		epoll_ctl(lx->epfd, EPOLL_CTL_DEL, at->rfd, NULL);
	close_fds(&at->rfd, 1);
	close_fds(&at->cfd, 1);
	if (at->main_done)
		return;
	/* The shim died before its task: nobody guards the group. */
	ax_logf(AX_LOG_ERROR, "executor", NULL,
	        &(ax_log_ids) { .run_id = at->run_id },
	        "supervisor %d of process group %d died (%s %d); killing "
	        "the group",
	        (int) at->shim, (int) at->pid,
	        got < 0               ? "lost, errno"
	            : WIFSIGNALED(st) ? "signal"
	                              : "exit",
	        got < 0               ? errno
	            : WIFSIGNALED(st) ? WTERMSIG(st)
	                              : WEXITSTATUS(st));
	axl_log_note(at->log_path,
	             "the attempt's supervisor process died: SIGKILL to the "
	             "process group");
	at->exit_code   = -1;
	at->term_signal = SIGKILL;
	at->main_done   = 1;
	at->main_end    = now;
	at->probe_at    = now;
	kill_group_now(at, now);
}

/*
 * The group is gone (or given up on): kill what is left in the cgroup
 * (processes that left the group) and the shim; done once the shim is
 * reaped and the cgroup removed.
 */
static void
release(local *lx, attempt *at, int64_t now)
{
	if (!at->releasing) {
		axl_cg_kill(at);
		if (at->pidfd >= 0)
			kill(at->shim, SIGKILL);
		at->cg_until = now + AX_EXEC_REAP_AFTER_KILL;
	}
	at->releasing = 1;
	reap_shim(lx, at, now);
}

/*
 * Advances one attempt against now: timeout, SIGKILL after the grace,
 * group probes once the main process is gone, the shim's release.
 */
static void
advance(local *lx, attempt *at, int64_t now)
{
	if (at->done)
		return;
	if (!at->releasing) {
		if (!at->main_done && !at->stopping && now >= at->deadline) {
			axl_log_note(
			    at->log_path,
			    "timeout: SIGTERM to the process group, "
			    "SIGKILL in %lld ms",
			    (long long) (at->grace / AX_USEC_PER_MSEC));
			ax_logf(AX_LOG_INFO, "executor", "TIMEOUT_EXEC",
			        &(ax_log_ids) { .run_id = at->run_id },
			        "attempt timed out: SIGTERM to process group "
			        "%d",
			        (int) at->pid);
			stop_attempt(at, AX_EXEC_TIMEOUT, now);
		}
		if (at->stopping && !at->killed && now >= at->kill_at) {
			if (!at->main_done || !group_empty(at))
				signal_group(at, SIGKILL);
			at->killed     = 1;
			at->give_up_at = now + AX_EXEC_REAP_AFTER_KILL;
		}
		if (!at->main_done || now < at->probe_at)
			return;
		if (group_empty(at)) {
			release(lx, at, now);
		} else if (!at->stopping) {
			/* leftovers of a finished task: same TERM -> KILL */
			axl_log_note(
			    at->log_path,
			    "the task exited but left processes in its "
			    "group: SIGTERM to the group");
			stop_attempt(at, AX_EXEC_FAILED, now);
		} else if (now >= at->give_up_at) {
			ax_logf(AX_LOG_WARN, "executor", NULL,
			        &(ax_log_ids) { .run_id = at->run_id },
			        "process group %d still not empty %lld ms "
			        "after SIGKILL; reporting the attempt anyway",
			        (int) at->pid,
			        (long long) (AX_EXEC_REAP_AFTER_KILL /
			                     AX_USEC_PER_MSEC));
			release(lx, at, now);
		}
	} else {
		reap_shim(lx, at, now);
	}
	if (at->releasing && at->pidfd < 0 && axl_cg_remove(at, now)) {
		at->done     = 1;
		at->ended_at = ax_clock_utc_us();
	} else {
		at->probe_at = now + AX_LOCAL_TICK;
	}
}

/* The attempt whose shim is pid and not yet reaped, or NULL. */
static attempt *
find_shim(const local *lx, pid_t pid)
{
	for (size_t i = 0; i < lx->n; i++)
		if (lx->v[i]->shim == pid && lx->v[i]->pidfd >= 0)
			return lx->v[i];
	return NULL;
}

/*
 * Reaps dead children that are not shims of attempts: task processes
 * reparented to us as the subreaper (orphans, setsid daemons, a task
 * whose shim died). Without this they would stay zombies for the
 * worker's lifetime. Peeks with WNOWAIT first so a shim is reaped by
 * reap_shim (which reads its last report), never here.
 */
static void
reap_strays(local *lx, int64_t now)
{
	siginfo_t si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
		    si.si_pid == 0)
			return;
		attempt *at = find_shim(lx, si.si_pid);
		if (at != NULL)
			reap_shim(lx, at, now);
		else
			while (waitpid(si.si_pid, NULL, 0) < 0 &&
			       errno == EINTR)
				;
	}
}

static void
fill_result(const attempt *at, ax_exec_result *r)
{
	struct stat st;

	memset(r, 0, sizeof(*r));
	memcpy(r->run_id, at->run_id, sizeof(r->run_id));
	r->user        = at->user;
	r->exit_code   = at->exit_code;
	r->term_signal = at->term_signal;
	r->started_at  = at->started_at;
	r->ended_at    = at->ended_at;
	r->pid         = (int) at->pid;
	r->cpu_user_us = at->cpu_user_us;
	r->cpu_sys_us  = at->cpu_sys_us;
	r->max_rss_kb  = at->max_rss_kb;
	if (at->log_path != NULL && stat(at->log_path, &st) == 0)
		r->log_bytes = (int64_t) st.st_size;
	if (at->stop == AX_EXEC_TIMEOUT || at->stop == AX_EXEC_KILLED ||
	    at->stop == AX_EXEC_FENCED)
		r->status = at->stop;
	else if (at->term_signal == 0 && at->exit_code == 0)
		r->status = AX_EXEC_SUCCESS;
	else
		r->status = AX_EXEC_FAILED;
}

static ax_err
local_poll(void *self, int64_t now, ax_exec_result *out, size_t cap, size_t *n)
{
	local             *lx = self;
	struct epoll_event evs[64];
	int                k;

	do {
		k = epoll_wait(lx->epfd, evs, 64, 0);
		for (int i = 0; i < k; i++) {
			attempt *at = evs[i].data.ptr;
			read_reports(lx, at, now);
			reap_shim(lx, at, now);
		}
	} while (k == 64);
	reap_strays(lx, now);

	size_t got = 0, keep = 0;
	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		advance(lx, at, now);
		if (at->done && got < cap) {
			fill_result(at, &out[got++]);
			attempt_free(at);
		} else {
			lx->v[keep++] = at;
		}
	}
	lx->n = keep;
	*n    = got;
	return AX_OK;
}

static int64_t
local_next_deadline(void *self)
{
	const local *lx = self;
	int64_t      t  = INT64_MAX;

	for (size_t i = 0; i < lx->n; i++) {
		const attempt *at = lx->v[i];
		int64_t        d  = INT64_MAX;
		if (at->done)
			return 0; /* left over by a short poll */
		if (!at->main_done && !at->stopping)
			d = at->deadline;
		if (at->stopping && !at->killed && at->kill_at < d)
			d = at->kill_at;
		if (at->main_done && at->probe_at < d)
			d = at->probe_at;
		if (d < t)
			t = d;
	}
	return t;
}

static size_t
local_running(void *self)
{
	return ((const local *) self)->n;
}

static int
local_fd(void *self)
{
	return ((const local *) self)->epfd;
}

static void
local_set_lease(void *self, int64_t deadline)
{
	local *lx = self;

	lx->lease = deadline;
	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		if (at->cfd < 0 || at->lease_sent == deadline)
			continue;
		/* a full socket (a stuck shim) keeps the older deadline,
		 * which only fences earlier */
		if (send(at->cfd, &deadline, sizeof(deadline),
		         MSG_NOSIGNAL | MSG_DONTWAIT) ==
		    (ssize_t) sizeof(deadline))
			at->lease_sent = deadline;
	}
}

static void
local_fence(void *self, int64_t lapsed_at)
{
	local  *lx  = self;
	int64_t now = ax_clock_mono_us();

	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		if (at->done || at->releasing)
			continue;
		read_reports(lx, at, now);
		if (at->main_done && at->main_end < lapsed_at) {
			/* ended in time: its status stands; leftovers die */
			if (!group_empty(at))
				kill_group_now(at, now);
			continue;
		}
		fence_attempt(at, now);
	}
}

static ax_err
local_set_state_dir(void *self, const char *dir)
{
	local *lx = self;
	char  *probe, *copy;
	ax_err rv;

	if (asprintf(&probe, "%s/x", dir) < 0)
		return ax_err_set(AX_ENOMEM, "state dir: out of memory");
	rv = axl_make_parent_dirs(probe);
	free(probe);
	if (rv != AX_OK)
		return ax_err_set(rv, "worker state directory: %s",
		                  ax_err_detail());
	if ((copy = strdup(dir)) == NULL)
		return ax_err_set(AX_ENOMEM, "state dir: out of memory");
	free(lx->state_dir);
	lx->state_dir = copy;
	return AX_OK;
}
static ax_err
local_init(void **self)
{
	local *lx = calloc(1, sizeof(*lx));
	if (lx == NULL)
		return ax_err_set(AX_ENOMEM, "local executor: out of memory");
	/* Orphans of our tasks come to us, not to an init that may never
	 * reap them (as in minimal containers): see group_empty(). */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		ax_log_warn("executor",
		            "PR_SET_CHILD_SUBREAPER: %s; orphans of tasks are "
		            "left to init",
		            strerror(errno));
	lx->lease   = INT64_MAX;
	lx->epfd    = epoll_create1(EPOLL_CLOEXEC);
	lx->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (lx->epfd < 0 || lx->devnull < 0) {
		int e = errno;
		if (lx->epfd >= 0)
			close(lx->epfd);
		if (lx->devnull >= 0)
			close(lx->devnull);
		free(lx);
		return ax_err_set(AX_EIO, "local executor: %s", strerror(e));
	}
	*self = lx;
	return AX_OK;
}

static void
local_fini(void *self)
{
	local *lx = self;
	if (lx == NULL)
		return;
	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		if (!at->done)
			kill(-at->pid, SIGKILL);
		if (at->pidfd >= 0) {
			kill(at->shim, SIGKILL);
			while (waitpid(at->shim, NULL, 0) < 0 &&
			       errno == EINTR)
				;
			close(at->pidfd);
		}
		close_fds(&at->rfd, 1);
		close_fds(&at->cfd, 1);
		axl_cg_kill(at);
		/* the task and its orphans are our children (subreaper) */
		while (waitpid(-at->pid, NULL, 0) > 0 || errno == EINTR)
			;
		at->cg_until = ax_clock_mono_us() + AX_EXEC_REAP_AFTER_KILL;
		while (!axl_cg_remove(at, ax_clock_mono_us())) {
			reap_strays(lx, ax_clock_mono_us());
			ax_clock_sleep_us(AX_LOCAL_TICK);
		}
		attempt_free(at);
	}
	free(lx->v);
	free(lx->state_dir);
	free(lx->cg_base);
	close(lx->epfd);
	close(lx->devnull);
	free(lx);
}

const ax_exec_ops ax_exec_local_ops = {
	.name          = "bash",
	.init          = local_init,
	.fini          = local_fini,
	.start         = local_start,
	.kill          = local_kill,
	.fd            = local_fd,
	.next_deadline = local_next_deadline,
	.poll          = local_poll,
	.running       = local_running,
	.set_lease     = local_set_lease,
	.fence         = local_fence,
	.set_state_dir = local_set_state_dir,
	.use_cgroups   = axl_use_cgroups,
	.usage         = axl_usage,
};
