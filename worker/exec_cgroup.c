/*
 * exec_cgroup.c - the local executor's cgroups v2: the probe of whether
 * this process may make them (use_cgroups), and each attempt's cgroup,
 * made before its fork, killed (cgroup.kill takes what left the task's
 * process group) and removed once empty (see
 * executor_local_internal.h).
 *
 * Workload: once per attempt start and end.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

#include "executor_local_internal.h"

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
void
axl_cg_kill(const attempt *at)
{
	int e;
	if (at->cg != NULL && (e = cg_write(at->cg, "cgroup.kill", "1")) != 0)
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = at->run_id },
		        "cgroup.kill of %s: %s", at->cg, strerror(e));
}

/* Removes the attempt's cgroup once empty; 1 when it is gone (or when
 * waiting for it is over: it is then left, with a warning). */
int
axl_cg_remove(attempt *at, int64_t now)
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
char *
axl_cg_make(local *lx, const char *run_id)
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

ax_err
axl_use_cgroups(void *self)
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
		return ax_err_set(axl_errno_to_ax(e),
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
