/*
 * task_records.c - records of running tasks and the killing of leftovers
 * (see task_records.h for the format and the pid-reuse rules).
 */
#include "task_records.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor.h"
#include "log.h"

/*
 * Fields 5 (process group) and 22 (start time, clock ticks since boot)
 * of /proc/PID/stat; 0 when the process does not exist.
 */
static int
proc_stat(pid_t pid, pid_t *pgrp, uint64_t *start)
{
	char  path[64], buf[1024], *p;
	int   fd;
	long  n;
	pid_t g = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	p++;
	/* after ')': field 3 (state) onwards, space separated */
	for (int field = 3; field <= 22; field++) {
		char *end;
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return 0;
		if (field == 5)
			g = (pid_t) strtol(p, &end, 10);
		if (field == 22) {
			*start = strtoull(p, &end, 10);
			*pgrp  = g;
			return 1;
		}
		while (*p != ' ' && *p != '\0')
			p++;
	}
	return 0;
}

/* This boot's id (/proc/sys/kernel/random/boot_id), "" if unknown. */
static void
boot_id(char *buf, size_t cap)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	long n = fd < 0 ? -1 : read(fd, buf, cap - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0]      = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* The record file of an attempt: <dir>/<run_id with '/' as '_'>.task */
static char *
record_path(const char *dir, const char *run_id)
{
	char *p;
	if (asprintf(&p, "%s/%s.task", dir, run_id) < 0)
		return NULL;
	for (char *c = p + strlen(dir) + 1; *c; c++)
		if (*c == '/')
			*c = '_';
	return p;
}

/* Writes the record of a started attempt (see the header). */
char *
ax_task_record_write(const char *dir, const char *run_id, pid_t pgid,
                     const char *cgroup)
{
	char     boot[64], tmp[PATH_MAX];
	pid_t    g     = 0;
	uint64_t start = 0;
	char    *path  = record_path(dir, run_id);
	FILE    *f;
	int      ok;

	if (path == NULL)
		return NULL;
	boot_id(boot, sizeof(boot));
	proc_stat(pgid, &g, &start);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((f = fopen(tmp, "we")) == NULL) {
		ok = 0;
	} else {
		ok = fprintf(f,
		             "ax-task 1\nboot %s\npgid %d\nstart %llu\n"
		             "run_id %s\ncgroup %s\n",
		             boot, (int) pgid, (unsigned long long) start,
		             run_id, cgroup != NULL ? cgroup : "-") > 0;
		ok = fclose(f) == 0 && ok;
		ok = ok && rename(tmp, path) == 0;
	}
	if (!ok) {
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = run_id },
		        "cannot write state record %s: %s; a worker killed "
		        "with this task's supervisor would leave it running",
		        path, strerror(errno));
		unlink(tmp);
		free(path);
		return NULL;
	}
	return path;
}

void
ax_task_record_remove(const char *path, const char *run_id)
{
	if (unlink(path) < 0 && errno != ENOENT)
		ax_logf(AX_LOG_WARN, "executor", NULL,
		        &(ax_log_ids) { .run_id = run_id },
		        "cannot remove state record %s: %s", path,
		        strerror(errno));
}

/* Whether /proc/PID/environ holds exactly the entry kv. */
static int
environ_has(pid_t pid, const char *kv)
{
	char   path[64], buf[65536];
	size_t len = strlen(kv), got = 0;
	int    fd;
	long   n;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int) pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	while (got < sizeof(buf) - 1 &&
	       (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t) n;
	close(fd);
	buf[got] = '\0';
	for (size_t i = 0; i < got; i += strlen(buf + i) + 1)
		if (strlen(buf + i) == len && memcmp(buf + i, kv, len) == 0)
			return 1;
	return 0;
}

/* Kills what is left of one recorded attempt; 1 if anything was. */
static int
kill_recorded(pid_t pgid, uint64_t start, const char *run_id)
{
	pid_t          g = 0;
	uint64_t       s = 0;
	char           kv[AX_EXEC_RUN_ID_MAX + 16];
	DIR           *d;
	struct dirent *e;
	int            hit = 0;

	if (proc_stat(pgid, &g, &s) && s == start && g == pgid)
		return kill(-pgid, SIGKILL) == 0;
	/* The leader is gone (or its pid was reused): kill the members of
	 * the group that were started after it and carry its AX_RUN_ID. */
	snprintf(kv, sizeof(kv), "AX_RUN_ID=%s", run_id);
	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long  pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0)
			continue;
		if (proc_stat((pid_t) pid, &g, &s) && g == pgid &&
		    s >= start && environ_has((pid_t) pid, kv) &&
		    kill((pid_t) pid, SIGKILL) == 0)
			hit = 1;
	}
	closedir(d);
	return hit;
}

/*
 * Kills the processes of a recorded attempt cgroup (named ax-* by the
 * local executor; anything else is not ours to kill) and removes it,
 * waiting up to 1 s for it to empty. 1 if it still had processes.
 */
static int
kill_cgroup(const char *dir)
{
	const char *base = strrchr(dir, '/');
	char        path[PATH_MAX + 32], buf[16];
	int         fd, hit = 0;

	if (base == NULL || strncmp(base, "/ax-", 4) != 0)
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* gone with its processes */
	hit = read(fd, buf, sizeof(buf)) > 0;
	close(fd);
	snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
	if (hit && (fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "1", 1) != 1)
			ax_log_warn("executor", "cgroup.kill of %s: %s", dir,
			            strerror(errno));
		close(fd);
	}
	for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(10000);
	return hit;
}

ax_err
ax_task_records_kill_leftovers(const char *dir, int *killed)
{
	char           boot[64];
	DIR           *d;
	struct dirent *e;
	int            n = 0;

	if (killed != NULL)
		*killed = 0;
	if ((d = opendir(dir)) == NULL) {
		if (errno == ENOENT)
			return AX_OK;
		return ax_err_set(AX_EIO, "worker state directory %s: %s", dir,
		                  strerror(errno));
	}
	boot_id(boot, sizeof(boot));
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		char   path[PATH_MAX], rboot[64] = "",
		                     run_id[AX_EXEC_RUN_ID_MAX],
		                     cg[PATH_MAX] = "-";
		int                pgid           = 0, ok;
		unsigned long long start          = 0;
		FILE              *f;

		if (len < 6 || strcmp(e->d_name + len - 5, ".task") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		ok = fscanf(f,
		            "ax-task 1\nboot %63s\npgid %d\nstart %llu\n"
		            "run_id %127s\ncgroup %4095s",
		            rboot, &pgid, &start, run_id, cg) >= 4;
		fclose(f);
		if (!ok || pgid <= 1)
			ax_log_warn(
			    "executor",
			    "state record %s is not ax-task 1; removed", path);
		else if (strcmp(rboot, boot) != 0)
			; /* an earlier boot: its processes are gone */
		else if (kill_cgroup(cg) + kill_recorded(pgid, start, run_id) >
		         0) {
			n++;
			ax_logf(AX_LOG_WARN, "executor", "LEFTOVER_KILLED",
			        &(ax_log_ids) { .run_id = run_id },
			        "killed process group %d left by an earlier "
			        "life of this worker",
			        pgid);
		}
		unlink(path);
	}
	closedir(d);
	if (killed != NULL)
		*killed = n;
	return AX_OK;
}
