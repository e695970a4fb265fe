/*
 * proc_watch.c - watching real processes through /proc (see
 * proc_watch.h).
 */
#include "proc_watch.h"

#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "clock.h"

/* The part of /proc/PID/stat after the command's closing ")", in buf. */
static const char *
stat_tail(pid_t pid, char *buf, size_t len)
{
	char  path[64], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	p = fgets(buf, (int) len, f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL || p[1] != ' ')
		return NULL;
	return p + 2;
}

int
ax_test_alive(pid_t pid)
{
	char        buf[512];
	const char *t = stat_tail(pid, buf, sizeof(buf));
	return t != NULL && *t != 'Z' && *t != 'X';
}

int64_t
ax_test_wait_gone(const pid_t *pids, int n, int limit_ms)
{
	int64_t t0 = ax_clock_mono_us();
	for (;;) {
		int left = 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		for (int i = 0; i < n; i++)
			left += ax_test_alive(pids[i]);
		if (left == 0)
			return ax_clock_mono_us() - t0;
		if (ax_clock_mono_us() - t0 > limit_ms * AX_USEC_PER_MSEC)
			return -1;
		ax_clock_sleep_us(5 * AX_USEC_PER_MSEC);
	}
}

void
ax_test_kill_all(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		if (ax_test_alive(pids[i]))
			kill(pids[i], SIGKILL);
}

pid_t
ax_test_ppid(pid_t pid)
{
	char        buf[512];
	const char *t  = stat_tail(pid, buf, sizeof(buf));
	int         pp = 0;
	if (t == NULL || sscanf(t, "%*c %d", &pp) != 1)
		return 0;
	return (pid_t) pp;
}

void
ax_test_sweep_orphans(const char *owner_glob, void (*sweep)(const char *dir))
{
	glob_t g;

	if (glob(owner_glob, 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char  dir[PATH_MAX];
		long  owner = 0;
		FILE *f     = fopen(g.gl_pathv[i], "re");
		if (f == NULL)
			continue;
		if (fscanf(f, "%ld", &owner) != 1)
			owner = 0;
		fclose(f);
		if (owner <= 0 || ax_test_alive((pid_t) owner) ||
		    strlen(g.gl_pathv[i]) >= sizeof(dir))
			continue;
		snprintf(dir, sizeof(dir), "%s", g.gl_pathv[i]);
		*strrchr(dir, '/') = '\0';
		sweep(dir);
	}
	globfree(&g);
}
