/*
 * test_standalone.c - `axctl standalone` as a user runs it: the real axctl
 * (in $AX_BIN_DIR) with its own embedded PostgreSQL in a temp home and a
 * DAG folder holding a seconds-level diamond; the diamond's instances
 * succeed; SIGTERM stops everything: exit 0, and no postgres, axd or
 * ax-worker process of that home is left.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "pg_embed.h"
#include "proc.h"

static char home[64];
static char dags[96];

static void
setup(void)
{
	snprintf(home, sizeof(home), "/tmp/ax-e2e-sa-XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	/* PostgreSQL runs as another user when we are root: let it in. */
	cr_assert_eq(chmod(home, 0755), 0);
	snprintf(dags, sizeof(dags), "%s/dags", home);
	cr_assert_eq(mkdir(dags, 0755), 0);
}

/* Processes whose command line mentions the home, other than us. */
static int
leftovers(char *names, size_t len)
{
	DIR           *d = opendir("/proc");
	struct dirent *de;
	int            n = 0;

	names[0] = '\0';
	cr_assert_not_null(d);
	while ((de = readdir(d)) != NULL) {
		char   path[300], cmd[4096];
		int    pid = atoi(de->d_name);
		size_t r;
		FILE  *f;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		r = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		for (size_t i = 0; i < r; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[r] = '\0';
		if (strstr(cmd, home) == NULL)
			continue;
		n++;
		size_t used = strlen(names);
		snprintf(names + used, len - used, "[%d] %.200s\n", pid, cmd);
	}
	closedir(d);
	return n;
}

static void
teardown(void)
{
	char         cmd[128], names[2048];
	ax_pg_embed *pg = NULL;

	/* If the test failed midway, do not leave a server behind. */
	if (leftovers(names, sizeof(names)) > 0 &&
	    ax_pg_embed_new(home, NULL, &pg) == AX_OK) {
		ax_pg_embed_down(pg);
		ax_pg_embed_free(pg);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", home);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", home);
}

TestSuite(standalone, .init = setup, .fini = teardown, .timeout = 240);

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void
dump(const ax_proc *p)
{
	char tail[8192], path[256];
	fprintf(stderr, "---- axctl output ----\n%s",
	        ax_proc_log_tail(p->log_path, 60, tail, sizeof(tail)));
	snprintf(path, sizeof(path), "%s/logs/axd.log", home);
	fprintf(stderr, "---- axd.log ----\n%s",
	        ax_proc_log_tail(path, 30, tail, sizeof(tail)));
	snprintf(path, sizeof(path), "%s/logs/worker-1.log", home);
	fprintf(stderr, "---- worker-1.log ----\n%s",
	        ax_proc_log_tail(path, 30, tail, sizeof(tail)));
}

/* Successful instances of the first successful demo.diamond run; -1 when
 * the database cannot be reached yet. */
static int64_t
diamond_done(const char *dsn)
{
	PGconn   *c = PQconnectdb(dsn);
	int64_t   v = -1;
	PGresult *r;

	if (PQstatus(c) == CONNECTION_OK) {
		r = PQexec(c,
		           "SELECT count(*) FROM task_instances t JOIN dags d "
		           "ON d.id = t.dag_id JOIN dag_runs r ON r.id = "
		           "t.dag_run_id WHERE d.name = 'demo.diamond' AND "
		           "r.state = 'SUCCESS' AND t.state = 'SUCCESS'");
		if (PQresultStatus(r) == PGRES_TUPLES_OK)
			v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
	}
	PQfinish(c);
	return v;
}

Test(standalone, runs_the_dags_and_stops_everything_on_sigterm)
{
	char         bin[PATH_MAX], log[128], names[4096], how[96];
	ax_pg_embed *pg;
	ax_proc      p;
	int64_t      deadline;
	char        *argv[] = { "axctl",  "standalone", "--home",    home,
		                "--dags", dags,         "--workers", "1",
		                "--port", "18099",      NULL };
	ax_proc_opts opts   = { .pdeathsig = SIGTERM };

	{
		char path[160];
		snprintf(path, sizeof(path), "%s/diamond.yaml", dags);
		write_file(
		    path,
		    "kind: DAG\nname: demo.diamond\n"
		    "schedule: {cron: \"*/3 * * * * ?\", timezone: UTC}\n"
		    "tasks:\n"
		    "  - {name: a, command: \"echo {{ ds }}\"}\n"
		    "  - {name: b, command: \"echo b\", depends_on: [a]}\n"
		    "  - {name: c, command: \"echo c\", depends_on: [a]}\n"
		    "  - {name: d, command: \"echo d\", depends_on: [b, "
		    "c]}\n");
	}
	cr_assert_eq(ax_proc_find_bin("axctl", bin, sizeof(bin)), AX_OK, "%s",
	             ax_err_detail());
	snprintf(log, sizeof(log), "%s/axctl.out", home);
	cr_assert_eq(ax_proc_start(&p, "axctl", bin, argv, log, &opts), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_new(home, NULL, &pg), AX_OK);

	deadline = ax_clock_mono_us() + 150 * AX_USEC_PER_SEC;
	while (diamond_done(ax_pg_embed_dsn(pg)) < 4) {
		if (!ax_proc_poll(&p)) {
			dump(&p);
			cr_assert_fail("axctl standalone %s",
			               ax_proc_describe(&p, how, sizeof(how)));
		}
		if (ax_clock_mono_us() > deadline) {
			dump(&p);
			ax_proc_stop(&p, 30 * AX_USEC_PER_SEC);
			cr_assert_fail("demo.diamond did not succeed in time");
		}
		ax_clock_sleep_us(250 * AX_USEC_PER_MSEC);
	}
	ax_pg_embed_free(pg);

	kill(p.pid, SIGTERM);
	if (ax_proc_wait(&p, 90 * AX_USEC_PER_SEC) != AX_OK) {
		dump(&p);
		ax_proc_stop(&p, AX_USEC_PER_SEC);
		cr_assert_fail("axctl standalone did not stop on SIGTERM");
	}
	if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 0)
		dump(&p);
	cr_assert_str_eq(ax_proc_describe(&p, how, sizeof(how)),
	                 "exited with status 0");
	/* Give reparented processes a moment to be reaped by init. */
	for (int i = 0; i < 20 && leftovers(names, sizeof(names)) > 0; i++)
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	cr_assert_eq(leftovers(names, sizeof(names)), 0,
	             "processes of the home left:\n%s", names);
	{
		char tail[8192];
		ax_proc_log_tail(log, 200, tail, sizeof(tail));
		cr_assert(strstr(tail, "demo.diamond") != NULL, "%s", tail);
		cr_assert(strstr(tail, "run ") != NULL,
		          "a line per finished run:\n%s", tail);
		cr_assert(strstr(tail, "stopped.") != NULL, "%s", tail);
	}
}
