/*
 * executor_local.c - the local executor: runs `bash` tasks as processes of
 * the worker's machine (fork/exec, own process group, rlimits, log file).
 *
 * Role: the "bash" ops table of executor.h, driven by ax-worker's loop.
 * Life of an attempt:
 *   start: spec checked, argv/envp/log fd prepared in the parent (the child
 *          of a multi-threaded process may only call async-signal-safe
 *          functions), fork, child sets up and execs; a CLOEXEC pipe tells
 *          the parent "exec'd" (EOF) or "failed at step S with errno E".
 *   run:   the child's pidfd sits in the epoll set; a timeout or a kill
 *          request sends SIGTERM to the group and arms kill_at.
 *   end:   pidfd readable -> the main process is reaped; then the group
 *          must empty: leftovers get TERM (if not sent yet), KILL at
 *          kill_at, and the group is probed every AX_LOCAL_TICK until
 *          kill(-pgid, 0) says ESRCH (or AX_EXEC_REAP_AFTER_KILL after the
 *          SIGKILL, when it is reported anyway with a warning).
 * Invariants: an attempt is in `v` from a successful start until poll()
 * returns it; pidfd >= 0 exactly while its main process is not reaped; the
 * group id equals the main pid and stays reserved while any member lives,
 * so group signals cannot hit a stranger (the only window is between
 * reaping the main process of an already empty group and the probe right
 * after it, which would need a pid wrap-around within microseconds).
 * Workload: tens to hundreds of concurrent attempts, tens of starts per
 * second per worker; fork+exec costs about a millisecond here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "executor.h"
#include "log.h"

extern char **environ;

#define AX_LOCAL_TICK (10 * AX_USEC_PER_MSEC) /* group-empty probe period */
#define AX_LOCAL_BASH "/bin/bash"

/* The child's setup steps, reported through the status pipe on failure. */
enum child_step {
	STEP_SETPGID = 1,
	STEP_DUP,
	STEP_CHDIR,
	STEP_RLIMIT_CPU,
	STEP_RLIMIT_AS,
	STEP_RLIMIT_NOFILE,
	STEP_RLIMIT_NPROC,
	STEP_RLIMIT_FSIZE,
	STEP_EXEC,
};

struct child_report {
	int step;
	int err;
};

/* Everything the child needs, prepared by the parent before fork. */
struct child_args {
	const char    *path;      /* file to execve */
	char *const   *argv;      /* NULL-terminated */
	char *const   *envp;      /* NULL-terminated */
	const char    *workdir;   /* or NULL */
	int            in_fd;     /* /dev/null */
	int            out_fd;    /* log file or /dev/null */
	int            status_fd; /* write end of the CLOEXEC pipe */
	ax_exec_limits limits;
};

typedef struct attempt {
	char           run_id[AX_EXEC_RUN_ID_MAX];
	char          *log_path; /* owned copy, or NULL */
	void          *user;
	pid_t          pid;   /* main process, also the group id */
	int            pidfd; /* -1 once the main process is reaped */
	int            exit_code;
	int            term_signal;
	ax_exec_status stop;        /* TIMEOUT/KILLED once we stopped it */
	int            stopping;    /* SIGTERM sent to the group */
	int            killed;      /* SIGKILL sent to the group */
	int            done;        /* ready to be returned by poll() */
	int64_t        started_at;  /* UTC us */
	int64_t        ended_at;    /* UTC us */
	int64_t        deadline;    /* mono us of the timeout, or INT64_MAX */
	int64_t        grace;       /* us between TERM and KILL */
	int64_t        kill_at;     /* mono us of the SIGKILL, or INT64_MAX */
	int64_t        probe_at;    /* mono us of the next group probe */
	int64_t        give_up_at;  /* mono us: report even if not empty */
	int64_t        cpu_user_us; /* rusage of the main process and the */
	int64_t        cpu_sys_us;  /* descendants it waited for */
	int64_t        max_rss_kb;
} attempt;

typedef struct local {
	int       epfd;    /* epoll set of the pidfds: ax_exec_fd() */
	int       devnull; /* O_RDWR, CLOEXEC: stdin of every task */
	attempt **v;       /* attempts not yet returned, start order */
	size_t    n;
	size_t    cap;
} local;

/* ------------------------------------------------------------------ */
/* helpers                                                              */

static ax_err
errno_to_ax(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return AX_ENOENT;
	case EACCES:
	case EPERM:
		return AX_EPERM;
	case ENOMEM:
		return AX_ENOMEM;
	default:
		return AX_EIO;
	}
}

static const char *
step_name(int step)
{
	switch (step) {
	case STEP_SETPGID:
		return "setpgid";
	case STEP_DUP:
		return "redirect stdio";
	case STEP_CHDIR:
		return "chdir to the working directory";
	case STEP_RLIMIT_CPU:
		return "setrlimit RLIMIT_CPU";
	case STEP_RLIMIT_AS:
		return "setrlimit RLIMIT_AS";
	case STEP_RLIMIT_NOFILE:
		return "setrlimit RLIMIT_NOFILE";
	case STEP_RLIMIT_NPROC:
		return "setrlimit RLIMIT_NPROC";
	case STEP_RLIMIT_FSIZE:
		return "setrlimit RLIMIT_FSIZE";
	case STEP_EXEC:
		return "exec";
	}
	return "setup";
}

/*
 * Appends one line, prefixed "ax: ", to the attempt's log file, so the user
 * finds why the executor intervened next to the task's own output. Best
 * effort: a failure here is not worth failing the attempt for.
 */
static void log_note(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
log_note(const char *path, const char *fmt, ...)
{
	char    buf[1024];
	int     len;
	va_list ap;

	if (path == NULL)
		return;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	len = snprintf(buf, sizeof(buf), "ax: ");
	va_start(ap, fmt);
	len += vsnprintf(buf + len, sizeof(buf) - (size_t) len - 1, fmt, ap);
	va_end(ap);
	if (len > (int) sizeof(buf) - 2)
		len = (int) sizeof(buf) - 2;
	buf[len++] = '\n';
	if (write(fd, buf, (size_t) len) < 0) {
		/* best effort, see above */
	}
	close(fd);
}

/* mkdir -p of the directory part of path. */
static ax_err
make_parent_dirs(const char *path)
{
	char  *dup = strdup(path);
	char  *p;
	ax_err rv = AX_OK;

	if (dup == NULL)
		return ax_err_set(AX_ENOMEM, "log path: out of memory");
	char *slash = strrchr(dup, '/');
	if (slash == NULL || slash == dup)
		goto out;
	*slash = '\0';
	for (p = dup + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p     = '\0';
		if (mkdir(dup, 0755) < 0 && errno != EEXIST) {
			rv = ax_err_set(errno_to_ax(errno),
			                "cannot create log directory %s: %s",
			                dup, strerror(errno));
			goto out;
		}
		*p = c;
		if (c == '\0')
			break;
	}
out:
	free(dup);
	return rv;
}

static ax_err
open_log(const char *path, int *out)
{
	ax_err rv;

	if ((rv = make_parent_dirs(path)) != AX_OK)
		return rv;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return ax_err_set(errno_to_ax(errno),
		                  "cannot open log file %s: %s", path,
		                  strerror(errno));
	*out = fd;
	return AX_OK;
}

/* Length of the NAME part of "NAME=VALUE"; 0 when it is not valid. */
static size_t
env_name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq == NULL ? 0 : (size_t) (eq - kv);
}

static int
env_is(const char *kv, const char *name, size_t len)
{
	return strncmp(kv, name, len) == 0 && kv[len] == '=';
}

static const char *const ax_env_names[] = {
	"AX_RUN_ID",  "AX_DAG",         "AX_TASK",        "AX_LOGICAL_DATE",
	"AX_ATTEMPT", "AX_SHARD_INDEX", "AX_SHARD_TOTAL",
};
#define AX_ENV_N (sizeof(ax_env_names) / sizeof(ax_env_names[0]))

static int
env_reserved(const char *kv)
{
	for (size_t i = 0; i < AX_ENV_N; i++)
		if (env_is(kv, ax_env_names[i], strlen(ax_env_names[i])))
			return 1;
	return 0;
}

/* Whether list[from..] holds an entry with the same NAME as kv. */
static int
env_shadowed(const char *kv, char *const *list, size_t from)
{
	size_t len = env_name_len(kv);
	if (list == NULL)
		return 0;
	for (size_t i = from; list[i] != NULL; i++)
		if (env_is(list[i], kv, len))
			return 1;
	return 0;
}

/*
 * Builds the child's environment: the worker's, then spec->env (a later
 * entry wins over an earlier one), then the AX_* variables. The array and
 * the AX_* strings come from one allocation, *out, freed with free().
 */
static ax_err
build_env(const ax_exec_spec *spec, char ***out)
{
	size_t      ne = 0, nx = 0;
	char        vals[AX_ENV_N][32];
	const char *sv[AX_ENV_N];
	size_t      extra = 0;

	while (environ != NULL && environ[ne] != NULL)
		ne++;
	while (spec->env != NULL && spec->env[nx] != NULL)
		nx++;
	snprintf(vals[0], sizeof(vals[0]), "%d", spec->attempt);
	snprintf(vals[1], sizeof(vals[1]), "%d", spec->shard_index);
	snprintf(vals[2], sizeof(vals[2]), "%d",
	         spec->shard_total > 0 ? spec->shard_total : 1);
	sv[0] = spec->run_id;
	sv[1] = spec->dag ? spec->dag : "";
	sv[2] = spec->task ? spec->task : "";
	sv[3] = spec->logical_date ? spec->logical_date : "";
	sv[4] = vals[0];
	sv[5] = vals[1];
	sv[6] = vals[2];
	for (size_t i = 0; i < AX_ENV_N; i++)
		extra += strlen(ax_env_names[i]) + strlen(sv[i]) + 2;

	size_t slots = ne + nx + AX_ENV_N + 1;
	char **envp  = malloc(slots * sizeof(char *) + extra);
	if (envp == NULL)
		return ax_err_set(AX_ENOMEM, "environment: out of memory");
	char  *str = (char *) (envp + slots);
	size_t k   = 0;
	for (size_t i = 0; i < ne; i++) {
		if (env_name_len(environ[i]) == 0 ||
		    env_reserved(environ[i]) ||
		    env_shadowed(environ[i], spec->env, 0))
			continue;
		envp[k++] = environ[i];
	}
	for (size_t i = 0; i < nx; i++) {
		if (env_reserved(spec->env[i]) ||
		    env_shadowed(spec->env[i], spec->env, i + 1))
			continue;
		envp[k++] = spec->env[i];
	}
	for (size_t i = 0; i < AX_ENV_N; i++) {
		int w     = sprintf(str, "%s=%s", ax_env_names[i], sv[i]);
		envp[k++] = str;
		str += w + 1;
	}
	envp[k] = NULL;
	*out    = envp;
	return AX_OK;
}

/* Finds the value of PATH for argv lookups: the task's, else the worker's */
static const char *
search_path(const ax_exec_spec *spec)
{
	const char *p = NULL;
	for (size_t i = 0; spec->env != NULL && spec->env[i] != NULL; i++)
		if (env_is(spec->env[i], "PATH", 4))
			p = spec->env[i] + 5;
	if (p == NULL)
		p = getenv("PATH");
	return p != NULL ? p : "/usr/local/bin:/usr/bin:/bin";
}

static int
is_executable_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    access(path, X_OK) == 0;
}

/*
 * Resolves argv[0] as execvp would, but in the parent (execvp is not
 * async-signal-safe). *out is malloc'd.
 */
static ax_err
resolve_argv0(const ax_exec_spec *spec, char **out)
{
	const char *name = spec->argv[0];
	const char *path = search_path(spec);
	size_t      nlen = strlen(name);

	if (strchr(name, '/') != NULL) {
		if (!is_executable_file(name))
			return ax_err_set(
			    AX_ENOENT, "argv[0] %s is not an executable file",
			    name);
		if ((*out = strdup(name)) == NULL)
			return ax_err_set(AX_ENOMEM, "argv: out of memory");
		return AX_OK;
	}
	while (*path != '\0') {
		const char *end  = strchrnul(path, ':');
		size_t      dlen = (size_t) (end - path);
		char       *cand = malloc(dlen + nlen + 3);
		if (cand == NULL)
			return ax_err_set(AX_ENOMEM, "argv: out of memory");
		if (dlen == 0)
			sprintf(cand, "./%s", name);
		else
			sprintf(cand, "%.*s/%s", (int) dlen, path, name);
		if (is_executable_file(cand)) {
			*out = cand;
			return AX_OK;
		}
		free(cand);
		path = *end == ':' ? end + 1 : end;
	}
	return ax_err_set(AX_ENOENT,
	                  "argv[0] %s: command not found in PATH %s", name,
	                  search_path(spec));
}

static ax_err
check_spec(const local *lx, const ax_exec_spec *spec)
{
	size_t len;

	if (spec->run_id == NULL || spec->run_id[0] == '\0')
		return ax_err_set(AX_EINVAL, "attempt spec: run_id is empty");
	if ((len = strlen(spec->run_id)) >= AX_EXEC_RUN_ID_MAX)
		return ax_err_set(
		    AX_EINVAL,
		    "attempt spec: run_id is %zu bytes long, the "
		    "limit is %d",
		    len, AX_EXEC_RUN_ID_MAX - 1);
	if ((spec->command == NULL) == (spec->argv == NULL))
		return ax_err_set(AX_EINVAL,
		                  "attempt %s: set exactly one of command and "
		                  "argv",
		                  spec->run_id);
	if (spec->argv != NULL &&
	    (spec->argv[0] == NULL || spec->argv[0][0] == '\0'))
		return ax_err_set(AX_EINVAL, "attempt %s: argv[0] is empty",
		                  spec->run_id);
	if (spec->attempt < 1)
		return ax_err_set(
		    AX_EINVAL, "attempt %s: attempt number %d, must be >= 1",
		    spec->run_id, spec->attempt);
	if (spec->shard_total < 0 || spec->shard_index < 0 ||
	    spec->shard_index >=
	        (spec->shard_total > 0 ? spec->shard_total : 1))
		return ax_err_set(
		    AX_EINVAL,
		    "attempt %s: shard %d of %d, need 0 <= index "
		    "< total",
		    spec->run_id, spec->shard_index, spec->shard_total);
	if (spec->timeout_us < 0 || spec->grace_us < 0)
		return ax_err_set(
		    AX_EINVAL, "attempt %s: negative timeout or grace period",
		    spec->run_id);
	const ax_exec_limits *l = &spec->limits;
	if (l->cpu_seconds < 0 || l->address_space < 0 || l->open_files < 0 ||
	    l->processes < 0 || l->file_size < 0)
		return ax_err_set(AX_EINVAL, "attempt %s: negative rlimit",
		                  spec->run_id);
	for (size_t i = 0; spec->env != NULL && spec->env[i] != NULL; i++)
		if (env_name_len(spec->env[i]) == 0)
			return ax_err_set(AX_EINVAL,
			                  "attempt %s: env[%zu] \"%s\" is not "
			                  "NAME=VALUE",
			                  spec->run_id, i, spec->env[i]);
	for (size_t i = 0; i < lx->n; i++)
		if (strcmp(lx->v[i]->run_id, spec->run_id) == 0)
			return ax_err_set(AX_EEXIST,
			                  "attempt %s is already running",
			                  spec->run_id);
	return AX_OK;
}

/* ------------------------------------------------------------------ */
/* the child, between fork and exec: async-signal-safe calls only       */

static void __attribute__((noreturn))
child_fail(const struct child_args *a, int step)
{
	struct child_report r = { .step = step, .err = errno };
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

static void __attribute__((noreturn)) child_exec(const struct child_args *a)
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
		child_fail(a, STEP_SETPGID);
	if (child_dup(a->in_fd, 0) < 0 || child_dup(a->out_fd, 1) < 0 ||
	    child_dup(a->out_fd, 2) < 0)
		child_fail(a, STEP_DUP);
	/* Belt and braces for fds some library opened without CLOEXEC. */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (a->workdir != NULL && chdir(a->workdir) < 0)
		child_fail(a, STEP_CHDIR);
	/* CPU: SIGXCPU at the soft limit, SIGKILL one second later. */
	if (child_limit(RLIMIT_CPU, a->limits.cpu_seconds, 1) < 0)
		child_fail(a, STEP_RLIMIT_CPU);
	if (child_limit(RLIMIT_AS, a->limits.address_space, 0) < 0)
		child_fail(a, STEP_RLIMIT_AS);
	if (child_limit(RLIMIT_NOFILE, a->limits.open_files, 0) < 0)
		child_fail(a, STEP_RLIMIT_NOFILE);
	if (child_limit(RLIMIT_NPROC, a->limits.processes, 0) < 0)
		child_fail(a, STEP_RLIMIT_NPROC);
	if (child_limit(RLIMIT_FSIZE, a->limits.file_size, 0) < 0)
		child_fail(a, STEP_RLIMIT_FSIZE);
	execve(a->path, a->argv, a->envp);
	child_fail(a, STEP_EXEC);
}

/* ------------------------------------------------------------------ */
/* the parent                                                           */

/* Sends sig to the attempt's process group; ESRCH (empty) is fine. */
static void
signal_group(const attempt *at, int sig)
{
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

/*
 * Forks and execs; on AX_OK *pid is the running child (exec succeeded).
 * On an error the child has been reaped and nothing runs.
 */
static ax_err
spawn(const ax_exec_spec *spec, const struct child_args *tmpl, pid_t *pid)
{
	struct child_args   a = *tmpl;
	struct child_report r;
	int                 sp[2];
	ssize_t             got;

	if (pipe2(sp, O_CLOEXEC) < 0)
		return ax_err_set(AX_EIO, "attempt %s: pipe: %s", spec->run_id,
		                  strerror(errno));
	a.status_fd = sp[1];
	pid_t child = fork();
	if (child < 0) {
		int e = errno;
		close(sp[0]);
		close(sp[1]);
		return ax_err_set(e == EAGAIN ? AX_EAGAIN : errno_to_ax(e),
		                  "attempt %s: fork: %s", spec->run_id,
		                  strerror(e));
	}
	if (child == 0)
		child_exec(&a);

	/* Also from here: no window in which a group kill could miss it */
	setpgid(child, child);
	close(sp[1]);
	do
		got = read(sp[0], &r, sizeof(r));
	while (got < 0 && errno == EINTR);
	close(sp[0]);
	if (got == 0) {
		*pid = child;
		return AX_OK;
	}
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	if (got != (ssize_t) sizeof(r))
		return ax_err_set(AX_EIO,
		                  "attempt %s: the child died before exec",
		                  spec->run_id);
	log_note(spec->log_path, "cannot start attempt %s: %s %s: %s",
	         spec->run_id, step_name(r.step),
	         r.step == STEP_CHDIR ? spec->workdir : a.path,
	         strerror(r.err));
	return ax_err_set(errno_to_ax(r.err), "attempt %s: %s %s: %s",
	                  spec->run_id, step_name(r.step),
	                  r.step == STEP_CHDIR ? spec->workdir : a.path,
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
	if ((at->pidfd = pidfd_open(at->pid, 0)) < 0)
		return ax_err_set(AX_EIO, "attempt %s: pidfd_open: %s",
		                  at->run_id, strerror(errno));
	if (epoll_ctl(lx->epfd, EPOLL_CTL_ADD, at->pidfd, &ev) < 0) {
		int e = errno;
		close(at->pidfd);
		at->pidfd = -1;
		return ax_err_set(AX_EIO, "attempt %s: epoll_ctl: %s",
		                  at->run_id, strerror(e));
	}
	lx->v[lx->n++] = at;
	return AX_OK;
}

/* Kills and reaps a child that could not be tracked. */
static void
discard_child(pid_t pid)
{
	kill(-pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static ax_err
local_start(void *self, const ax_exec_spec *spec)
{
	local            *lx = self;
	struct child_args a;
	char             *resolved = NULL;
	char             *bash_argv[4];
	char            **envp  = NULL;
	attempt          *at    = NULL;
	int               logfd = -1;
	pid_t             pid   = -1;
	ax_err            rv;

	if ((rv = check_spec(lx, spec)) != AX_OK)
		return rv;
	memset(&a, 0, sizeof(a));
	/* the log first: it is where a user looks for why nothing ran */
	if (spec->log_path != NULL &&
	    (rv = open_log(spec->log_path, &logfd)) != AX_OK)
		return rv;
	if (spec->argv != NULL) {
		if ((rv = resolve_argv0(spec, &resolved)) != AX_OK) {
			log_note(spec->log_path, "cannot start attempt %s: %s",
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
	if ((rv = build_env(spec, &envp)) != AX_OK)
		goto out;
	at = calloc(1, sizeof(*at));
	if (at == NULL ||
	    (spec->log_path != NULL &&
	     (at->log_path = strdup(spec->log_path)) == NULL)) {
		rv = ax_err_set(AX_ENOMEM, "executor: out of memory");
		goto out;
	}
	a.envp    = envp;
	a.workdir = spec->workdir;
	a.in_fd   = lx->devnull;
	a.out_fd  = logfd >= 0 ? logfd : lx->devnull;
	a.limits  = spec->limits;
	if ((rv = spawn(spec, &a, &pid)) != AX_OK)
		goto out;

	strcpy(at->run_id, spec->run_id); /* length checked */
	at->user       = spec->user;
	at->pid        = pid;
	at->pidfd      = -1;
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
		discard_child(pid);
		goto out;
	}
	at = NULL; /* owned by lx now */
out:
	if (at != NULL)
		free(at->log_path);
	free(at);
	free(envp);
	free(resolved);
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
	if (at->pidfd >= 0)
		at->stop = reason;
	at->stopping = 1;
	at->kill_at  = now + at->grace;
	signal_group(at, SIGTERM);
}

static ax_err
local_kill(void *self, const char *run_id)
{
	local *lx = self;

	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		if (strcmp(at->run_id, run_id) != 0 || at->done)
			continue;
		if (at->pidfd >= 0 && !at->stopping)
			log_note(
			    at->log_path,
			    "kill requested: SIGTERM to the process group");
		stop_attempt(at, AX_EXEC_KILLED, ax_clock_mono_us());
		return AX_OK;
	}
	return ax_err_set(AX_ENOENT, "attempt %s is not running", run_id);
}

/* The main process ended: reap it and start waiting for its group. */
static void
reap_main(local *lx, attempt *at, int64_t now)
{
	struct rusage ru;
	int           st = 0;
	pid_t         got;

	memset(&ru, 0, sizeof(ru));
	/* wait4, not waitid: it also gives the CPU and memory used */
	got = wait4(at->pid, &st, WNOHANG, &ru);
	if (got == 0 || (got < 0 && errno == EINTR))
		return; /* spurious wake-up; still readable if not */
	if (got < 0) {
		/* ECHILD: someone else reaped it (a wait elsewhere) */
		ax_logf(AX_LOG_ERROR, "executor", NULL,
		        &(ax_log_ids) { .run_id = at->run_id },
		        "wait4(%d): %s; exit status lost", (int) at->pid,
		        strerror(errno));
		st = SIGKILL; /* as if killed: W_TERMSIG(st) == SIGKILL */
	}
	if (WIFEXITED(st)) {
		at->exit_code   = WEXITSTATUS(st);
		at->term_signal = 0;
	} else {
		at->exit_code   = -1;
		at->term_signal = WTERMSIG(st);
	}
	at->cpu_user_us = (int64_t) ru.ru_utime.tv_sec * AX_USEC_PER_SEC +
	    ru.ru_utime.tv_usec;
	at->cpu_sys_us = (int64_t) ru.ru_stime.tv_sec * AX_USEC_PER_SEC +
	    ru.ru_stime.tv_usec;
	at->max_rss_kb = ru.ru_maxrss;
	epoll_ctl(lx->epfd, EPOLL_CTL_DEL, at->pidfd, NULL);
	close(at->pidfd);
	at->pidfd    = -1;
	at->probe_at = now;
}

/*
 * Advances one attempt against now: timeout, SIGKILL after the grace,
 * group probes once the main process is gone.
 */
static void
advance(attempt *at, int64_t now)
{
	if (at->done)
		return;
	if (at->pidfd >= 0 && !at->stopping && now >= at->deadline) {
		log_note(at->log_path,
		         "timeout: SIGTERM to the process group, SIGKILL in "
		         "%lld ms",
		         (long long) (at->grace / AX_USEC_PER_MSEC));
		ax_logf(AX_LOG_INFO, "executor", "TIMEOUT_EXEC",
		        &(ax_log_ids) { .run_id = at->run_id },
		        "attempt timed out: SIGTERM to process group %d",
		        (int) at->pid);
		stop_attempt(at, AX_EXEC_TIMEOUT, now);
	}
	if (at->stopping && !at->killed && now >= at->kill_at) {
		if (at->pidfd >= 0 || !group_empty(at))
			signal_group(at, SIGKILL);
		at->killed     = 1;
		at->give_up_at = now + AX_EXEC_REAP_AFTER_KILL;
	}
	if (at->pidfd >= 0 || now < at->probe_at)
		return;
	if (group_empty(at)) {
		at->done = 1;
	} else if (!at->stopping) {
		/* leftovers of a finished task: same TERM -> KILL */
		log_note(at->log_path,
		         "the task exited but left processes in its group: "
		         "SIGTERM to the group");
		stop_attempt(at, AX_EXEC_FAILED, now);
	} else if (now >= at->give_up_at) {
		ax_logf(
		    AX_LOG_WARN, "executor", NULL,
		    &(ax_log_ids) { .run_id = at->run_id },
		    "process group %d still not empty %lld ms after "
		    "SIGKILL; reporting the attempt anyway",
		    (int) at->pid,
		    (long long) (AX_EXEC_REAP_AFTER_KILL / AX_USEC_PER_MSEC));
		at->done = 1;
	}
	if (!at->done)
		at->probe_at = now + AX_LOCAL_TICK;
	else
		at->ended_at = ax_clock_utc_us();
}

/* The attempt whose main process is pid and not yet reaped, or NULL. */
static attempt *
find_main(const local *lx, pid_t pid)
{
	for (size_t i = 0; i < lx->n; i++)
		if (lx->v[i]->pid == pid && lx->v[i]->pidfd >= 0)
			return lx->v[i];
	return NULL;
}

/*
 * Reaps dead children that are not main processes of attempts: task
 * processes that left their group (setsid daemons) and were reparented to
 * us as the subreaper. Without this they would stay zombies for the
 * worker's lifetime. Peeks with WNOWAIT first so a main process is reaped
 * by reap_main (which records its status), never here.
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
		attempt *at = find_main(lx, si.si_pid);
		if (at != NULL)
			reap_main(lx, at, now);
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
	if (at->stop == AX_EXEC_TIMEOUT || at->stop == AX_EXEC_KILLED)
		r->status = at->stop;
	else if (at->term_signal == 0 && at->exit_code == 0)
		r->status = AX_EXEC_SUCCESS;
	else
		r->status = AX_EXEC_FAILED;
}

static void
attempt_free(attempt *at)
{
	if (at == NULL)
		return;
	free(at->log_path);
	free(at);
}

static ax_err
local_poll(void *self, int64_t now, ax_exec_result *out, size_t cap, size_t *n)
{
	local             *lx = self;
	struct epoll_event evs[64];
	int                k;

	do {
		k = epoll_wait(lx->epfd, evs, 64, 0);
		for (int i = 0; i < k; i++)
			reap_main(lx, evs[i].data.ptr, now);
	} while (k == 64);
	reap_strays(lx, now);

	size_t got = 0, keep = 0;
	for (size_t i = 0; i < lx->n; i++) {
		attempt *at = lx->v[i];
		advance(at, now);
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
		if (at->pidfd >= 0 && !at->stopping)
			d = at->deadline;
		if (at->stopping && !at->killed && at->kill_at < d)
			d = at->kill_at;
		if (at->pidfd < 0 && at->probe_at < d)
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
			while (waitpid(at->pid, NULL, 0) < 0 && errno == EINTR)
				;
			close(at->pidfd);
		}
		/* the group's orphans are our children (subreaper) */
		while (waitpid(-at->pid, NULL, 0) > 0 || errno == EINTR)
			;
		attempt_free(at);
	}
	free(lx->v);
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
};
