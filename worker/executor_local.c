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
 * Child code (the shim, the task before exec) lives in exec_child.c.
 * Workload: tens to hundreds of concurrent attempts, tens of starts per
 * second per worker; the two forks cost about a millisecond each here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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
#include "task_records.h"

#define AX_LOCAL_TICK (10 * AX_USEC_PER_MSEC) /* group-empty probe period */
#define AX_LOCAL_BASH "/bin/bash"

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
	case AX_STEP_SETPGID:
		return "setpgid";
	case AX_STEP_DUP:
		return "redirect stdio";
	case AX_STEP_CHDIR:
		return "chdir to the working directory";
	case AX_STEP_RLIMIT_CPU:
		return "setrlimit RLIMIT_CPU";
	case AX_STEP_RLIMIT_AS:
		return "setrlimit RLIMIT_AS";
	case AX_STEP_RLIMIT_NOFILE:
		return "setrlimit RLIMIT_NOFILE";
	case AX_STEP_RLIMIT_NPROC:
		return "setrlimit RLIMIT_NPROC";
	case AX_STEP_RLIMIT_FSIZE:
		return "setrlimit RLIMIT_FSIZE";
	case AX_STEP_EXEC:
		return "exec";
	case AX_STEP_FORK:
		return "fork";
	case AX_STEP_SETGROUPS:
		return "setgroups (the task user's groups)";
	case AX_STEP_SETGID:
		return "setgid (the task user's group)";
	case AX_STEP_SETUID:
		return "setuid (the task user)";
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

void
ax_exec_log_note(const char *path, const char *line)
{
	if (path == NULL || make_parent_dirs(path) != AX_OK)
		return;
	log_note(path, "%s", line);
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

/* PATH of a task's clean environment (unless its env sets one). */
static const char *
default_path(const ax_exec_cred *c)
{
	return c->uid == 0 ? AX_EXEC_ROOT_PATH : AX_EXEC_PATH;
}

/*
 * Builds the child's environment, clean of the worker's: PATH, HOME,
 * USER, LOGNAME, SHELL for the task's user, then spec->env (a later
 * entry wins over an earlier one, and over the first five), then the
 * AX_* variables. The array and the strings it adds come from one
 * allocation, *out, freed with free().
 */
static ax_err
build_env(const ax_exec_spec *spec, const ax_exec_cred *c, char ***out)
{
	enum { NB = 5 };
	size_t      nx = 0;
	char        vals[AX_ENV_N][32];
	const char *sv[AX_ENV_N];
	const char *bn[NB] = { "PATH", "HOME", "USER", "LOGNAME", "SHELL" };
	const char *bv[NB] = { default_path(c), c->home, c->name, c->name,
		               c->shell };
	size_t      extra  = 0;

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
	for (size_t i = 0; i < NB; i++)
		extra += strlen(bn[i]) + strlen(bv[i]) + 2;

	size_t slots = NB + nx + AX_ENV_N + 1;
	char **envp  = malloc(slots * sizeof(char *) + extra);
	if (envp == NULL)
		return ax_err_set(AX_ENOMEM, "environment: out of memory");
	char  *str = (char *) (envp + slots);
	size_t k   = 0;
	for (size_t i = 0; i < NB; i++) {
		int w = sprintf(str, "%s=%s", bn[i], bv[i]);
		if (!env_shadowed(str, spec->env, 0))
			envp[k++] = str;
		str += w + 1;
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

/* Finds the value of PATH for argv lookups: the task's, else the
 * default of its clean environment. */
static const char *
search_path(const ax_exec_spec *spec, const ax_exec_cred *c)
{
	const char *p = NULL;
	for (size_t i = 0; spec->env != NULL && spec->env[i] != NULL; i++)
		if (env_is(spec->env[i], "PATH", 4))
			p = spec->env[i] + 5;
	return p != NULL ? p : default_path(c);
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
resolve_argv0(const ax_exec_spec *spec, const ax_exec_cred *c, char **out)
{
	const char *name = spec->argv[0];
	const char *path = search_path(spec, c);
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
	                  search_path(spec, c));
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

/* Writes s to the file dir/name (a cgroup control file); 0 on success,
 * else an errno. */
static int
cg_write(const char *dir, const char *name, const char *s)
{
	char path[PATH_MAX];
	int  fd, e = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return errno;
	if (write(fd, s, strlen(s)) != (ssize_t) strlen(s))
		e = errno ? errno : EIO;
	close(fd);
	return e;
}

/* Kills every process of the attempt's cgroup (those that left its
 * process group too). */
static void
cg_kill(const attempt *at)
{
	int e;
	if (at->cg != NULL && (e = cg_write(at->cg, "cgroup.kill", "1")) != 0)
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = at->run_id },
		        "cgroup.kill of %s: %s", at->cg, strerror(e));
}

/* Removes the attempt's cgroup once empty; 1 when it is gone (or when
 * waiting for it is over: it is then left, with a warning). */
static int
cg_remove(attempt *at, int64_t now)
{
	if (at->cg == NULL)
		return 1;
	if (rmdir(at->cg) < 0 && errno != ENOENT) {
		if (now < at->cg_until)
			return 0;
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = at->run_id },
		        "cgroup %s still busy after cgroup.kill (%s); left in "
		        "place",
		        at->cg, strerror(errno));
	}
	free(at->cg);
	at->cg = NULL;
	return 1;
}

/*
 * Makes the cgroup of a new attempt under lx->cg_base; NULL without
 * cgroups or when mkdir fails (the attempt runs with its process group
 * only, logged).
 */
static char *
cg_make(local *lx, const char *run_id)
{
	char *dir;

	if (lx->cg_base == NULL)
		return NULL;
	for (int tries = 0; tries < 8; tries++) {
		if (asprintf(&dir, "%s/ax-%d-%llu", lx->cg_base,
		             (int) getpid(),
		             (unsigned long long) ++lx->cg_seq) < 0)
			return NULL;
		if (mkdir(dir, 0755) == 0)
			return dir;
		int e = errno;
		free(dir);
		if (e != EEXIST) {
			ax_logf(AX_LOG_WARN, "executor", NULL,
			        &(ax_log_ids) { .run_id = run_id },
			        "cannot create a cgroup under %s: %s; the "
			        "attempt runs in its process group only",
			        lx->cg_base, strerror(e));
			return NULL;
		}
	}
	return NULL;
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
	cg_kill(at);
	at->cg_until = ax_clock_mono_us() + AX_EXEC_REAP_AFTER_KILL;
	while (!cg_remove(at, ax_clock_mono_us()))
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
		return ax_err_set(e == EAGAIN ? AX_EAGAIN : errno_to_ax(e),
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
	log_note(spec->log_path, "cannot start attempt %s: %s %s: %s",
	         spec->run_id, step_name(r.step), what, strerror(r.err));
	return ax_err_set(errno_to_ax(r.err), "attempt %s: %s %s: %s",
	                  spec->run_id, step_name(r.step), what,
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
	    (rv = open_log(spec->log_path, &logfd)) != AX_OK)
		return rv;
	if (cred == NULL) {
		if ((rv = ax_exec_cred_lookup(NULL, &own)) != AX_OK)
			goto out;
		cred = own;
	}
	if (spec->argv != NULL) {
		if ((rv = resolve_argv0(spec, cred, &resolved)) != AX_OK) {
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
	if ((rv = build_env(spec, cred, &envp)) != AX_OK)
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
	at->cg                        = cg_make(lx, spec->run_id);
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
			log_note(
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
		log_note(at->log_path,
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
	log_note(at->log_path,
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
		cg_kill(at);
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
			log_note(at->log_path,
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
			log_note(at->log_path,
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
	if (at->releasing && at->pidfd < 0 && cg_remove(at, now)) {
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
	rv = make_parent_dirs(probe);
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

/*
 * The cgroup v2 directory this process is in (mount point of the
 * cgroup2 hierarchy + our path from /proc/self/cgroup), or NULL.
 */
static char *
cg_self_dir(void)
{
	char  line[4096], mnt[PATH_MAX] = "", path[PATH_MAX] = "", *dir;
	FILE *f;

	if ((f = fopen("/proc/self/mountinfo", "re")) != NULL) {
		while (!*mnt && fgets(line, sizeof(line), f) != NULL) {
			char *sep = strstr(line, " - cgroup2 ");
			if (sep != NULL &&
			    sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
				mnt[0] = '\0';
		}
		fclose(f);
	}
	if ((f = fopen("/proc/self/cgroup", "re")) != NULL) {
		while (!*path && fgets(line, sizeof(line), f) != NULL)
			if (strncmp(line, "0::", 3) == 0)
				snprintf(path, sizeof(path), "%.*s",
				         (int) strcspn(line + 3, "\n"),
				         line + 3);
		fclose(f);
	}
	if (!*mnt || !*path)
		return NULL;
	if (asprintf(&dir, "%s%s", mnt, strcmp(path, "/") == 0 ? "" : path) <
	    0)
		return NULL;
	return dir;
}

static ax_err
local_use_cgroups(void *self)
{
	local *lx = self;
	char  *base, probe[PATH_MAX];
	int    st = 0, e;
	pid_t  p;

	if (lx->cg_base != NULL)
		return AX_OK;
	if ((base = cg_self_dir()) == NULL)
		return ax_err_set(AX_ENOENT,
		                  "no cgroup v2 hierarchy is mounted (see "
		                  "/proc/self/mountinfo)");
	/* A child must be able to join a new cgroup there, and
	 * cgroup.kill must exist (Linux 5.14): try it once. */
	snprintf(probe, sizeof(probe), "%s/ax-probe-%d", base, (int) getpid());
	if (mkdir(probe, 0755) < 0 && errno != EEXIST) {
		e = errno;
		free(base);
		return ax_err_set(errno_to_ax(e),
		                  "cannot create cgroup %s: %s", probe,
		                  strerror(e));
	}
	if ((p = fork()) == 0)
		_exit(cg_write(probe, "cgroup.procs", "0") == 0 ? 0 : 1);
	while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	e = access(strcat(probe, "/cgroup.kill"), W_OK) == 0 ? 0 : errno;
	probe[strlen(probe) - strlen("/cgroup.kill")] = '\0';
	rmdir(probe);
	if (p < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || e != 0) {
		free(base);
		return ax_err_set(AX_EPERM,
		                  "cgroup %s: a process cannot join it or it "
		                  "has no cgroup.kill (needs write access to "
		                  "a cgroup v2 tree without internal-process "
		                  "restrictions, Linux 5.14+)",
		                  probe);
	}
	lx->cg_base = base;
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
		cg_kill(at);
		/* the task and its orphans are our children (subreaper) */
		while (waitpid(-at->pid, NULL, 0) > 0 || errno == EINTR)
			;
		at->cg_until = ax_clock_mono_us() + AX_EXEC_REAP_AFTER_KILL;
		while (!cg_remove(at, ax_clock_mono_us())) {
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

/* ------------------------------------------------------------------ */
/* live usage                                                           */

/* A number after key in the file dir/name ("usage_usec 123"; key NULL:
 * the file's first number); -1 when absent. */
static int64_t
cg_read(const char *dir, const char *name, const char *key)
{
	char      path[PATH_MAX], line[256];
	long long v  = -1;
	size_t    kl = key ? strlen(key) : 0;
	FILE     *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (key == NULL) {
			v = strtoll(line, NULL, 10);
			break;
		}
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			v = strtoll(line + kl + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Adds the /proc/<pid>/stat of every process whose group is an
 * attempt's (v[i]) to its usage (*u[i]). */
static void
proc_scan(attempt **v, ax_exec_usage **u, size_t n)
{
	static long    tck, page_kb;
	DIR           *d;
	struct dirent *e;

	if (n == 0 || (d = opendir("/proc")) == NULL)
		return;
	if (tck <= 0)
		tck = sysconf(_SC_CLK_TCK);
	if (page_kb <= 0)
		page_kb = sysconf(_SC_PAGESIZE) / 1024;
	while ((e = readdir(d)) != NULL) {
		char               path[300], buf[1024], *p;
		int                pgrp;
		unsigned long long ut, st;
		long               rss;
		FILE              *f;
		size_t             len;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		len      = fread(buf, 1, sizeof(buf) - 1, f);
		buf[len] = '\0';
		fclose(f);
		/* after the command's ")": state ppid pgrp ... utime(14)
		 * stime(15) ... rss(24) */
		if ((p = strrchr(buf, ')')) == NULL ||
		    sscanf(p + 1,
		           " %*c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
		           "%llu %*d %*d %*d %*d %*d %*d %*u %*u %ld",
		           &pgrp, &ut, &st, &rss) != 4)
			continue;
		for (size_t i = 0; i < n; i++)
			if (v[i]->pid == pgrp) {
				u[i]->cpu_us +=
				    (int64_t) ((ut + st) * 1000000ULL /
				               (unsigned long long) tck);
				u[i]->rss_kb += rss * page_kb;
				break;
			}
	}
	closedir(d);
}

static size_t
local_usage(void *self, ax_exec_usage *out, size_t cap)
{
	local          *lx   = self;
	attempt       **scan = calloc(lx->n + 1, sizeof(*scan));
	ax_exec_usage **dst  = calloc(lx->n + 1, sizeof(*dst));
	size_t          n = 0, ns = 0;

	if (scan == NULL || dst == NULL) {
		free(scan);
		free(dst);
		return 0;
	}
	for (size_t i = 0; i < lx->n && n < cap; i++) {
		attempt *at = lx->v[i];
		if (at->done || at->main_done || at->pid <= 0)
			continue;
		out[n] = (ax_exec_usage) { .run_id = at->run_id };
		if (at->cg != NULL) {
			int64_t cpu =
			    cg_read(at->cg, "cpu.stat", "usage_usec");
			int64_t mem = cg_read(at->cg, "memory.current", NULL);
			if (cpu >= 0 && mem >= 0) {
				out[n].cpu_us = cpu;
				out[n].rss_kb = mem / 1024;
				n++;
				continue;
			}
		}
		scan[ns]  = at;
		dst[ns++] = &out[n++];
	}
	proc_scan(scan, dst, ns);
	free(scan);
	free(dst);
	return n;
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
	.use_cgroups   = local_use_cgroups,
	.usage         = local_usage,
};
