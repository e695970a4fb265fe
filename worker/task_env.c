/*
 * task_env.c - a task's user and its worker-read env values (see
 * task_env.h).
 *
 * Why a list and a directory: the author of a DAG is not the operator of
 * the worker. Without worker.run_as_allowed any author could ask for
 * run_as: root; without worker.secrets_dir a from_file could read
 * /etc/shadow into the task's environment; without worker.secrets_env a
 * from_env could read whatever the worker was started with. Each is the
 * worker operator's decision, written in the worker's configuration.
 */
#include "task_env.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define SECRET_MAX (64 * 1024) /* largest from_file value, bytes */

ax_err
ax_task_default_cred(const char *run_as, ax_exec_cred **out)
{
	ax_err rv;

	if (geteuid() != 0 || run_as == NULL || run_as[0] == '\0')
		return ax_exec_cred_lookup(NULL, out);
	if ((rv = ax_exec_cred_lookup(run_as, out)) != AX_ENOENT)
		return rv;
	return ax_err_set(
	    AX_ECONFIG,
	    "worker.run_as: no user '%s' on this machine, and a worker "
	    "started as root runs its tasks as worker.run_as. Create it "
	    "(deploy/install-deps.sh does: useradd --system --home-dir "
	    "/var/lib/%s --create-home --shell /usr/sbin/nologin %s), "
	    "or set worker.run_as to an existing unprivileged user (or to "
	    "root, to run tasks as root on purpose)",
	    run_as, run_as, run_as);
}

ax_err
ax_task_cred(const ax_task_policy *p, const char *want, ax_exec_cred **own,
             const ax_exec_cred **out)
{
	ax_err rv;

	*own = NULL;
	*out = p->dflt;
	if (want == NULL || want[0] == '\0' ||
	    strcmp(want, p->dflt->name) == 0)
		return AX_OK;
	if (!ax_names_has(p->allowed, want))
		return ax_err_set(
		    AX_EPERM,
		    "run_as '%s': this worker does not allow it, so the task "
		    "did not run; its operator may add the user to "
		    "worker.run_as_allowed in the worker's configuration "
		    "(allowed now: %s)",
		    want, p->allowed && p->allowed[0] ? p->allowed : "none");
	if ((rv = ax_exec_cred_lookup(want, own)) == AX_OK) {
		*out = *own;
		return AX_OK;
	}
	if (rv == AX_ENOENT)
		return ax_err_set(AX_ENOENT,
		                  "run_as '%s' (in worker.run_as_allowed): no "
		                  "such user on this worker; create it here",
		                  want);
	if (rv == AX_EPERM) {
		char d[600];
		snprintf(d, sizeof(d), "%s", ax_err_detail());
		return ax_err_set(AX_EPERM,
		                  "run_as '%s': %s; run the worker as root to "
		                  "switch users",
		                  want, d);
	}
	return rv;
}

/* "KEY=" + value[0..n) into a fresh string. */
static ax_err
make_kv(const char *key, const char *v, size_t n, char **out)
{
	size_t kl = strlen(key);
	char  *s  = malloc(kl + n + 2);
	if (s == NULL)
		return ax_err_set(AX_ENOMEM, "env %s: out of memory", key);
	memcpy(s, key, kl);
	s[kl] = '=';
	memcpy(s + kl + 1, v, n);
	s[kl + 1 + n] = '\0';
	*out          = s;
	return AX_OK;
}

/* Whether path (resolved) lies inside dir (resolved). */
static int
is_inside(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return 1;
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static ax_err
read_file(const ax_task_policy *p, const char *key, const char *path,
          char **out)
{
	char        rdir[PATH_MAX], rp[PATH_MAX], buf[SECRET_MAX + 1];
	const char *dir = p->secrets_dir ? p->secrets_dir : "";
	struct stat st;
	size_t      got = 0;
	ax_err      rv;
	int         fd;

	if (path[0] != '/')
		return ax_err_set(AX_EPERM,
		                  "env %s: from_file '%s' must be an absolute "
		                  "path under worker.secrets_dir (%s)",
		                  key, path, dir);
	if (dir[0] == '\0' || realpath(dir, rdir) == NULL)
		return ax_err_set(AX_EPERM,
		                  "env %s: from_file %s: worker.secrets_dir "
		                  "'%s' is not a directory here (%s); set it "
		                  "in the worker's configuration",
		                  key, path, dir,
		                  dir[0] ? strerror(errno) : "empty");
	if (realpath(path, rp) == NULL)
		return ax_err_set(errno == ENOENT ? AX_ENOENT : AX_EPERM,
		                  "env %s: from_file %s: %s", key, path,
		                  strerror(errno));
	if (!is_inside(rdir, rp))
		return ax_err_set(AX_EPERM,
		                  "env %s: from_file %s is not under "
		                  "worker.secrets_dir (%s); the worker reads "
		                  "secrets only from there",
		                  key, path, rdir);
	if ((fd = open(rp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return ax_err_set(errno == ENOENT ? AX_ENOENT : AX_EPERM,
		                  "env %s: from_file %s: %s", key, path,
		                  strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ax_err_set(AX_EINVAL,
		                  "env %s: from_file %s is not a regular file",
		                  key, path);
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			explicit_bzero(buf, got);
			return ax_err_set(AX_EIO, "env %s: from_file %s: %s",
			                  key, path, strerror(e));
		}
		if (n == 0 || (got += (size_t) n) == sizeof(buf))
			break;
	}
	close(fd);
	if (got > SECRET_MAX || memchr(buf, '\0', got) != NULL) {
		explicit_bzero(buf, got);
		return ax_err_set(AX_EINVAL,
		                  "env %s: from_file %s is %s; a value is at "
		                  "most %d bytes of text",
		                  key, path,
		                  got > SECRET_MAX ? "too large"
		                                   : "binary (a NUL byte)",
		                  SECRET_MAX);
	}
	if (got > 0 && buf[got - 1] == '\n')
		got--;
	if (got > 0 && buf[got - 1] == '\r')
		got--;
	rv = make_kv(key, buf, got, out);
	explicit_bzero(buf, sizeof(buf));
	return rv;
}

ax_err
ax_task_env_read(const ax_task_policy *p, const ax_task_env_src *src,
                 char **out)
{
	const char *v;

	*out = NULL;
	if (src->from_file != NULL)
		return read_file(p, src->key, src->from_file, out);
	if (src->from_env == NULL)
		return ax_err_set(AX_EINVAL, "env %s: no source", src->key);
	if (!ax_names_has(p->secrets_env, src->from_env))
		return ax_err_set(AX_EPERM,
		                  "env %s: from_env %s: the worker does not "
		                  "hand out that variable; its operator may "
		                  "list it in worker.secrets_env (listed now: "
		                  "%s)",
		                  src->key, src->from_env,
		                  p->secrets_env && p->secrets_env[0]
		                      ? p->secrets_env
		                      : "none");
	if ((v = getenv(src->from_env)) == NULL)
		return ax_err_set(AX_ENOENT,
		                  "env %s: from_env %s: the worker's "
		                  "environment has no such variable",
		                  src->key, src->from_env);
	return make_kv(src->key, v, strlen(v), out);
}

void
ax_task_env_wipe(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}
