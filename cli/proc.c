/*
 * proc.c - child process supervision for axctl standalone / bench and the
 * e2e harness (see proc.h for the contract).
 *
 * A child is started with fork + execv (never a shell). An O_CLOEXEC pipe
 * tells the parent whether exec succeeded: the child writes the failing
 * step and errno into it, a successful exec closes it with nothing
 * written. Every descriptor above stderr is marked close-on-exec in the
 * child so daemons do not inherit axctl's database sockets.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

/* What the child reports through the exec pipe when a step fails. */
typedef struct child_err {
	int step; /* 1 open log, 2 open /dev/null, 3 exec */
	int err;  /* errno */
} child_err;

ax_err
ax_proc_find_bin(const char *name, char *buf, size_t len)
{
	char        self[PATH_MAX];
	const char *dir = getenv("AX_BIN_DIR");
	int         n;

	if (dir == NULL || dir[0] == '\0') {
		ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (r < 0)
			return ax_err_set(
			    AX_EIO,
			    "cannot read /proc/self/exe: %s; set "
			    "AX_BIN_DIR to the directory of %s",
			    strerror(errno), name);
		self[r] = '\0';
		dir     = dirname(self);
	}
	n = snprintf(buf, len, "%s/%s", dir, name);
	if (n < 0 || (size_t) n >= len)
		return ax_err_set(AX_ELIMIT, "path of %s in %s is too long",
		                  name, dir);
	if (access(buf, X_OK) != 0)
		return ax_err_set(AX_ENOENT,
		                  "%s: %s; build it (ninja -C BUILD) or set "
		                  "AX_BIN_DIR to the directory holding it",
		                  buf, strerror(errno));
	return AX_OK;
}

/* In the child: never returns. Only async-signal-safe calls. */
static void
child_exec(int errfd, const char *bin, char *const argv[],
           const char *log_path, const ax_proc_opts *opts)
{
	child_err        ce = { 0, 0 };
	sigset_t         none;
	struct sigaction dfl;
	int              fd;

	setpgid(0, 0);
	if (opts != NULL && opts->pdeathsig > 0)
		prctl(PR_SET_PDEATHSIG, opts->pdeathsig);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((fd = open("/dev/null", O_RDONLY)) < 0) {
		ce.step = 2;
		goto fail;
	}
	dup2(fd, 0);
	if (fd > 0)
		close(fd);
	fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0) {
		ce.step = 1;
		goto fail;
	}
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
	for (size_t i = 0; opts != NULL && opts->env != NULL && opts->env[i];
	     i++)
		putenv((char *) opts->env[i]);
	execv(bin, argv);
	ce.step = 3;
fail:
	ce.err = errno;
	if (write(errfd, &ce, sizeof(ce)) < 0) {
		/* nothing left to report to */
	}
	_exit(127);
}

ax_err
ax_proc_start(ax_proc *p, const char *name, const char *bin,
              char *const argv[], const char *log_path,
              const ax_proc_opts *opts)
{
	static const char *steps[] = { "", "open log", "open /dev/null",
		                       "exec" };
	int                fds[2];
	child_err          ce;
	ssize_t            r;
	pid_t              pid;

	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->bin, sizeof(p->bin), "%s", bin);
	snprintf(p->log_path, sizeof(p->log_path), "%s", log_path);
	if (pipe2(fds, O_CLOEXEC) != 0)
		return ax_err_set(AX_EIO, "pipe for %s: %s", name,
		                  strerror(errno));
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		return ax_err_set(AX_EIO, "fork for %s: %s", name,
		                  strerror(errno));
	}
	if (pid == 0) {
		close(fds[0]);
		child_exec(fds[1], bin, argv, log_path, opts);
	}
	/* Both sides set the group: whichever runs first wins the race. */
	setpgid(pid, pid);
	close(fds[1]);
	p->pid     = pid;
	p->running = 1;
	while ((r = read(fds[0], &ce, sizeof(ce))) < 0 && errno == EINTR)
		;
	close(fds[0]);
	if (r == (ssize_t) sizeof(ce)) {
		ax_proc_wait(p, 5 * AX_USEC_PER_SEC);
		return ax_err_set(ce.err == ENOENT       ? AX_ENOENT
		                      : ce.err == EACCES ? AX_EPERM
		                                         : AX_EIO,
		                  "cannot start %s (%s): %s %s: %s", name, bin,
		                  steps[ce.step],
		                  ce.step == 1 ? log_path : bin,
		                  strerror(ce.err));
	}
	return AX_OK;
}

int
ax_proc_poll(ax_proc *p)
{
	int   st;
	pid_t r;

	if (!p->running)
		return 0;
	while ((r = waitpid(p->pid, &st, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == p->pid || (r < 0 && errno == ECHILD)) {
		p->status  = r == p->pid ? st : 0;
		p->running = 0;
		return 0;
	}
	return 1;
}

ax_err
ax_proc_wait(ax_proc *p, int64_t timeout_us)
{
	int64_t deadline = ax_clock_mono_us() + timeout_us;
	int64_t step     = 1000; /* 1 ms, doubling to 50 ms */

	while (ax_proc_poll(p)) {
		int64_t left = deadline - ax_clock_mono_us();
		if (left <= 0)
			return AX_ETIMEDOUT;
		ax_clock_sleep_us(step < left ? step : left);
		if (step < 50000)
			step *= 2;
	}
	return AX_OK;
}

void
ax_proc_signal(ax_proc *p, int sig)
{
	if (!p->running)
		return;
	if (kill(-p->pid, sig) != 0)
		kill(p->pid, sig);
}

ax_err
ax_proc_stop(ax_proc *p, int64_t grace_us)
{
	p->stopping = 1; /* even when it already exited: not a crash */
	if (!ax_proc_poll(p))
		return AX_OK;
	ax_proc_signal(p, SIGTERM);
	if (ax_proc_wait(p, grace_us) == AX_OK) {
		/* Anything left in its group (a stray grandchild) goes too. */
		kill(-p->pid, SIGKILL);
		return AX_OK;
	}
	kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
	ax_proc_wait(p, 10 * AX_USEC_PER_SEC);
	return AX_ETIMEDOUT;
}

char *
ax_proc_describe(const ax_proc *p, char *buf, size_t len)
{
	if (p->running)
		snprintf(buf, len, "running (pid %d)", (int) p->pid);
	else if (p->pid == 0)
		snprintf(buf, len, "not started");
	else if (WIFEXITED(p->status))
		snprintf(buf, len, "exited with status %d",
		         WEXITSTATUS(p->status));
	else if (WIFSIGNALED(p->status))
		snprintf(buf, len, "killed by signal %d (%s)",
		         WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
	else
		snprintf(buf, len, "ended (wait status %d)", p->status);
	return buf;
}

char *
ax_proc_log_tail(const char *path, int lines, char *buf, size_t len)
{
	FILE  *f = fopen(path, "r");
	long   size, from;
	size_t n, start;
	int    seen = 0;

	buf[0] = '\0';
	if (f == NULL || len < 2) {
		if (f != NULL)
			fclose(f);
		return buf;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	from = size > (long) (len - 1) ? size - (long) (len - 1) : 0;
	fseek(f, from, SEEK_SET);
	n      = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	if (from > 0) { /* drop the partial first line */
		char *nl = memchr(buf, '\n', n);
		if (nl != NULL && (size_t) (nl - buf) + 1 < n) {
			n -= (size_t) (nl - buf) + 1;
			memmove(buf, nl + 1, n + 1);
		}
	}
	/* Walk back over `lines` newlines (a final newline ends a line). */
	start = n;
	if (start > 0 && buf[start - 1] == '\n')
		start--;
	while (start > 0) {
		if (buf[start - 1] == '\n' && ++seen == lines)
			break;
		start--;
	}
	if (start > 0)
		memmove(buf, buf + start, n - start + 1);
	return buf;
}
