/*
 * exec_child.c - the local executor's forked children: the shim that
 * supervises one task, and the task's setup between fork and exec (see
 * exec_child.h for the protocol, executor_local.c for the lifecycle).
 *
 * Everything here runs in a child of a threaded process: only
 * async-signal-safe calls (syscall wrappers, _Fork, memcpy). The task's
 * setup order matters: its own process group first, so that a group
 * kill from the shim or the worker reaches it from the start; rlimits
 * while still privileged; then the identity drop (groups, gid, uid:
 * prepared by the worker, since reading the user database is not
 * async-signal-safe); then the working directory, entered as the user.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "exec_child.h"

/* ------------------------------------------------------------------ */
/* the task, between fork and exec                                      */

static void __attribute__((noreturn))
child_fail(const ax_child_args *a, int step)
{
	ax_child_report r = { .step = step, .err = errno };
	if (write(a->status_fd, &r, sizeof(r)) < 0) {
		/* the parent then sees EOF plus exit status 127 */
	}
	_exit(127);
}

static int
child_dup(int fd, int target)
{
	if (fd == target) /* dup2 would keep FD_CLOEXEC set */
		return fcntl(fd, F_SETFD, 0);
	return dup2(fd, target) < 0 ? -1 : 0;
}

static int
child_limit(int resource, int64_t v, int64_t hard_extra)
{
	struct rlimit rl;
	if (v <= 0)
		return 0;
	rl.rlim_cur = (rlim_t) v;
	rl.rlim_max = (rlim_t) (v + hard_extra);
	return setrlimit(resource, &rl);
}

/*
 * Becomes the task's user: groups first (setgroups needs root), then the
 * group, then the user (after it nothing else can be changed), each
 * checked; then proves that root cannot be taken back. Any failure ends
 * the child before exec: a task never runs with the worker's identity
 * by accident.
 */
static void
child_drop_ids(const ax_child_args *a)
{
	if (setgroups(a->n_groups, a->groups) < 0)
		child_fail(a, AX_STEP_SETGROUPS);
	if (setgid(a->gid) < 0 || getgid() != a->gid || getegid() != a->gid)
		child_fail(a, AX_STEP_SETGID);
	if (setuid(a->uid) < 0 || getuid() != a->uid || geteuid() != a->uid)
		child_fail(a, AX_STEP_SETUID);
	if (a->uid != 0 && setuid(0) == 0) {
		errno = EPERM;
		child_fail(a, AX_STEP_SETUID);
	}
}

static void __attribute__((noreturn)) child_exec(const ax_child_args *a)
{
	struct sigaction dfl;
	sigset_t         none;

	/* Ignored signals survive exec: hand the task the defaults. */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	if (setpgid(0, 0) < 0)
		child_fail(a, AX_STEP_SETPGID);
	if (child_dup(a->in_fd, 0) < 0 || child_dup(a->out_fd, 1) < 0 ||
	    child_dup(a->out_fd, 2) < 0)
		child_fail(a, AX_STEP_DUP);
	/* Belt and braces for fds some library opened without CLOEXEC. */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	/* CPU: SIGXCPU at the soft limit, SIGKILL one second later. The
	 * limits are set before the identity drop: only root may raise a
	 * hard limit, and they bind the task's user the same way. */
	if (child_limit(RLIMIT_CPU, a->limits.cpu_seconds, 1) < 0)
		child_fail(a, AX_STEP_RLIMIT_CPU);
	if (child_limit(RLIMIT_AS, a->limits.address_space, 0) < 0)
		child_fail(a, AX_STEP_RLIMIT_AS);
	if (child_limit(RLIMIT_NOFILE, a->limits.open_files, 0) < 0)
		child_fail(a, AX_STEP_RLIMIT_NOFILE);
	if (child_limit(RLIMIT_NPROC, a->limits.processes, 0) < 0)
		child_fail(a, AX_STEP_RLIMIT_NPROC);
	if (child_limit(RLIMIT_FSIZE, a->limits.file_size, 0) < 0)
		child_fail(a, AX_STEP_RLIMIT_FSIZE);
	if (a->switch_ids)
		child_drop_ids(a);
	/* entered as the task's user: it must be able to */
	if (a->workdir != NULL) {
		if (chdir(a->workdir) < 0)
			child_fail(a, AX_STEP_CHDIR);
	} else if (a->switch_ids && (a->home == NULL || chdir(a->home) < 0) &&
	           chdir("/") < 0) {
		child_fail(a, AX_STEP_CHDIR);
	}
	execve(a->path, a->argv, a->envp);
	child_fail(a, AX_STEP_EXEC);
}

/* ------------------------------------------------------------------ */
/* the shim                                                             */

static void
shim_send(int fd, const ax_shim_msg *m)
{
	while (write(fd, m, sizeof(*m)) < 0 && errno == EINTR)
		;
}

/* Writes s to the file path (a cgroup control file); 1 when it took. */
static int
write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ok;
	if (fd < 0)
		return 0;
	ok = write(fd, s, strlen(s)) == (ssize_t) strlen(s);
	close(fd);
	return ok;
}

/* Reaps the task main (flags: WNOHANG or 0) and reports its end; 1
 * when it was reaped. */
static int
report_end(pid_t t, int flags)
{
	struct rusage ru;
	ax_shim_msg   m;
	int           st = 0;

	memset(&ru, 0, sizeof(ru));
	while (wait4(t, &st, flags, &ru) != t)
		if (flags != 0 || errno != EINTR)
			return 0;
	memset(&m, 0, sizeof(m));
	m.kind     = AX_SHIM_ENDED;
	m.wstatus  = st;
	m.mono     = ax_clock_mono_us();
	m.utime_us = (int64_t) ru.ru_utime.tv_sec * AX_USEC_PER_SEC +
	    ru.ru_utime.tv_usec;
	m.stime_us = (int64_t) ru.ru_stime.tv_sec * AX_USEC_PER_SEC +
	    ru.ru_stime.tv_usec;
	m.maxrss_kb = ru.ru_maxrss;
	shim_send(4, &m);
	return 1;
}

/*
 * Kills everything in the attempt's cgroup. The shim leaves the cgroup
 * first and removes it once empty (up to 1 s): nobody else may be left
 * to do it.
 */
static void
cg_kill_all(const ax_child_args *a)
{
	int out = write_file(a->cg_out, "0");
	write_file(a->cg_kill, "1"); /* kills us too unless we left */
	for (int i = 0; out && i < 100; i++) {
		if (rmdir(a->cg_dir) == 0 || errno != EBUSY)
			return;
		poll(NULL, 0, 10);
	}
}

void
ax_child_shim_main(const ax_child_args *tmpl)
{
	static const int ign[] = {
		SIGTERM, SIGINT,  SIGHUP,  SIGQUIT, SIGPIPE,
		SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU
	};
	ax_child_args    a = *tmpl;
	struct sigaction sa;
	sigset_t         none;
	ax_shim_msg      m;
	int              src[6], hi[6], pfd, fenced = 0, ended = 0, in_cg;
	int64_t          lease = a.lease;
	pid_t            t;

	/* Stop requests are for the worker; the task gets its own. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	for (size_t i = 0; i < sizeof(ign) / sizeof(ign[0]); i++)
		sigaction(ign[i], &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	/* Keep only our fds, at 0..5: another shim must never hold this
	 * one's control socket, or the worker's death would go unseen. */
	src[0] = a.in_fd;
	src[1] = a.out_fd;
	src[2] = a.out_fd;
	src[3] = a.ctrl_fd;
	src[4] = a.report_fd;
	src[5] = a.status_fd;
	for (int k = 0; k < 6; k++)
		if ((hi[k] = fcntl(src[k], F_DUPFD_CLOEXEC, 10)) < 0)
			_exit(127);
	for (int k = 0; k < 6; k++)
		if (dup2(hi[k], k) < 0)
			_exit(127);
	close_range(6, ~0U, 0);
	for (int k = 3; k < 6; k++)
		fcntl(k, F_SETFD, FD_CLOEXEC);
	fcntl(3, F_SETFL, O_NONBLOCK);
	a.in_fd     = 0;
	a.out_fd    = 1;
	a.status_fd = 5;
	/* into the attempt's cgroup first: the task is born in it */
	in_cg = a.cg_procs != NULL && write_file(a.cg_procs, "0");

	t = _Fork();
	if (t < 0)
		child_fail(&a, AX_STEP_FORK);
	if (t == 0)
		child_exec(&a);
	setpgid(t, t); /* also here: no window for a group kill to miss */
	close(5);
	memset(&m, 0, sizeof(m));
	m.kind    = AX_SHIM_PID;
	m.pid     = t;
	m.wstatus = in_cg;
	shim_send(4, &m);
	pfd = pidfd_open(t, 0); /* without it: a 20 ms tick */

	for (;;) {
		struct pollfd pf[2] = { { .fd = 3, .events = POLLIN },
			                { .fd     = ended ? -1 : pfd,
			                  .events = POLLIN } };
		int64_t       now   = ax_clock_mono_us();
		int           to    = -1;
		char          buf[sizeof(int64_t)];
		ssize_t       n;

		if (!fenced && lease != INT64_MAX) {
			if (now >= lease) {
				/* the worker's lease lapsed: the scheduler
				 * may hand the attempt to another worker */
				if (!ended) {
					memset(&m, 0, sizeof(m));
					m.kind = AX_SHIM_FENCED;
					m.mono = now;
					shim_send(4, &m);
				}
				kill(-t, SIGKILL);
				fenced = 1;
				if (in_cg) {
					/* what left the group dies too, and
					 * so do we, once the end is told */
					if (!ended)
						ended = report_end(t, 0);
					cg_kill_all(&a);
				}
			} else {
				int64_t ms = (lease - now + 999) / 1000;
				to         = ms > 3600000 ? 3600000 : (int) ms;
			}
		}
		if (!ended && pfd < 0 && (to < 0 || to > 20))
			to = 20;
		if (poll(pf, 2, to) < 0 && errno != EINTR)
			to = 20;
		while ((n = read(3, buf, sizeof(buf))) ==
		       (ssize_t) sizeof(buf))
			if (!fenced)
				memcpy(&lease, buf, sizeof(lease));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			/* EOF: the worker is gone (killed, crashed) */
			kill(-t, SIGKILL);
			if (in_cg)
				cg_kill_all(&a);
			_exit(0);
		}
		if (!ended)
			ended = report_end(t, WNOHANG);
	}
}
