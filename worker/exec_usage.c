/*
 * exec_usage.c - what the local executor's running attempts use (CPU
 * time, resident memory): from the attempt's cgroup files when it has
 * a cgroup, else summed over /proc/<pid>/stat of its process group
 * (see executor_local_internal.h).
 *
 * Workload: every few seconds (the worker's usage reports); one read of
 * /proc per call whatever the number of attempts.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor_local_internal.h"

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

size_t
axl_usage(void *self, ax_exec_usage *out, size_t cap)
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
