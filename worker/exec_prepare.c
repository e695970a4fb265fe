/*
 * exec_prepare.c - the local executor's preparation of an attempt in the
 * parent, before any fork: the spec checked, the log file opened, the
 * environment built, argv[0] resolved on the task's PATH (see
 * executor_local_internal.h).
 *
 * Invariants: nothing here runs in a child; what the child needs is
 * ready before the fork, so the child only calls async-signal-safe
 * functions (exec_child.c).
 * Workload: once per attempt start.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec_child.h"

#include "executor_local_internal.h"

ax_err
axl_errno_to_ax(int e)
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

const char *
axl_step_name(int step)
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
void
axl_log_note(const char *path, const char *fmt, ...)
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
ax_err
axl_make_parent_dirs(const char *path)
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
			rv = ax_err_set(axl_errno_to_ax(errno),
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
	if (path == NULL || axl_make_parent_dirs(path) != AX_OK)
		return;
	axl_log_note(path, "%s", line);
}

ax_err
axl_open_log(const char *path, int *out)
{
	ax_err rv;

	if ((rv = axl_make_parent_dirs(path)) != AX_OK)
		return rv;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return ax_err_set(axl_errno_to_ax(errno),
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
ax_err
axl_build_env(const ax_exec_spec *spec, const ax_exec_cred *c, char ***out)
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
ax_err
axl_resolve_argv0(const ax_exec_spec *spec, const ax_exec_cred *c, char **out)
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

/* Checks what the executor can check of a spec before any fork. */
ax_err
axl_check_spec(const ax_exec_spec *spec)
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
	return AX_OK;
}
