/*
 * test_bench.c - `axctl bench` as an operator runs it: the real axctl
 * (in $AX_BIN_DIR) with its own embedded PostgreSQL, axd and workers on
 * a temp home. At tiny sizes (the figures themselves are not judged:
 * benchmarks are not pass/fail on time) every scenario of `all` must
 * measure what it was asked for: the chain's edge count, the layered
 * DAG's instance count and its ratio to Dask, latency samples, a
 * throughput. SIGINT in the middle of a scenario must leave no process
 * and no temp home behind; a bad option exits 2 naming it.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"

TestSuite(bench, .timeout = 280);

static double
num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	cr_assert(json_is_number(v), "'%s' is not a number", key);
	return json_number_value(v);
}

/* After `axctl bench --json ...` into out/err with exit rc: the one JSON
 * object it printed (exit 0), or the test fails showing both streams. */
static json_t *
bench_json(int rc, const char *out, const char *err)
{
	json_t *o = json_loads(out, 0, NULL);
	if (o == NULL || rc != 0)
		fprintf(stderr, "---- axctl bench (exit %d) ----\n%s\n%s", rc,
		        out, err);
	cr_assert_eq(rc, 0);
	cr_assert_not_null(o, "one JSON object on stdout: %s", out);
	return o;
}

Test(bench, all_scenarios_measure_what_they_were_asked)
{
	static char out[65536], err[262144];
	char        bin[4096];
	json_t     *o;
	int         rc;

	cr_assert_not_null(getenv("AX_BIN_DIR"));
	snprintf(bin, sizeof(bin), "%s/axctl", getenv("AX_BIN_DIR"));
	rc = ax_cli_run(out, sizeof(out), err, sizeof(err), bin, "bench",
	                "--json", "--schedules", "60", "--duration", "8",
	                "--instances", "50", "--length", "5", "--runs", "2",
	                "--layers", "3", "--width", "4", NULL);
	o  = bench_json(rc, out, err);
	/* latency: about one fire a second */
	cr_assert_geq(num(o, "samples"), 1, "%s", out);
	cr_assert_leq(num(o, "p50_ms"), num(o, "p99_ms"));
	cr_assert_leq(num(o, "p99_ms"), num(o, "max_ms"));
	cr_assert_gt(num(o, "throughput_per_s"), 0);
	/* chain: 4 edges in each of 2 runs */
	cr_assert_eq(num(o, "chain_edges"), 8, "%s", out);
	cr_assert_geq(num(o, "chain_edge_p50_ms"), 0);
	cr_assert_leq(num(o, "chain_edge_p50_ms"),
	              num(o, "chain_edge_p99_ms"));
	cr_assert_leq(num(o, "chain_edge_p99_ms"),
	              num(o, "chain_edge_max_ms"));
	cr_assert_geq(num(o, "chain_edge_dispatch_p99_ms"), 0);
	/* the edge split into its steps, each measured and in causal order
	 * (every step's end is written after its start) */
	static const char *const steps[] = { "report", "release", "admit",
		                             "dispatch", "start" };
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		char p50[64], p99[64];
		snprintf(p50, sizeof(p50), "chain_split_%s_p50_ms", steps[k]);
		snprintf(p99, sizeof(p99), "chain_split_%s_p99_ms", steps[k]);
		cr_assert_geq(num(o, p50), 0, "%s: %s", p50, out);
		cr_assert_leq(num(o, p50), num(o, p99), "%s: %s", p50, out);
	}
	/* the first run's first edge is one of the edges measured */
	cr_assert_gt(num(o, "chain_first_start_ms"), 0, "%s", out);
	cr_assert_gt(num(o, "chain_first_edge_ms"), 0, "%s", out);
	cr_assert_leq(num(o, "chain_first_edge_ms"),
	              num(o, "chain_edge_max_ms"), "%s", out);
	cr_assert_leq(num(o, "chain_makespan_ms"),
	              num(o, "chain_makespan_max_ms"));
	/* a run of 5 tasks in a line lasts at least its 4 edges' median */
	cr_assert_geq(num(o, "chain_makespan_ms"),
	              4 * num(o, "chain_edge_p50_ms") / 2, "%s", out);
	/* layered: 3 x 4 instances */
	cr_assert_eq(num(o, "layered_instances"), 12, "%s", out);
	cr_assert_gt(num(o, "layered_makespan_s"), 0);
	/* per_s = 12 / makespan, up to 1 % and the 0.0005 s by which the
	 * makespan is rounded to 3 decimals in the JSON (a makespan of
	 * 0.027 s alone leaves 1.9 % open) */
	cr_assert(fabs(num(o, "layered_per_s") * num(o, "layered_makespan_s") -
	               12) <= 0.12 + 0.0005 * num(o, "layered_per_s"),
	          "%s", out);
	cr_assert(
	    fabs(num(o, "layered_vs_dask") - num(o, "layered_per_s") / 707) <
	        0.001 + 0.01 * num(o, "layered_vs_dask"),
	    "%s", out);
	cr_assert(json_is_null(json_object_get(o, "cpu_us_per_instance")) ||
	          num(o, "cpu_us_per_instance") >= 0);
	/* axd's and the workers' own CPU is measured and is part of the
	 * whole machine's: at most five clock ticks of 10 ms apart (each
	 * reading is rounded to a tick; 50 instances may take less than a
	 * tick of theirs) */
	cr_assert_geq(num(o, "ax_cpu_us_per_instance"), 0, "%s", out);
	if (!json_is_null(json_object_get(o, "cpu_us_per_instance")))
		cr_assert_leq(num(o, "ax_cpu_us_per_instance"),
		              num(o, "cpu_us_per_instance") + 5 * 10000 / 50.0,
		              "%s", out);
	json_decref(o);
}

/* Throughput on top of history: the history is built (its size in the
 * figures) and the figures count the triggered run alone: counted with
 * the history's runs, 2 days back and more, the rate of 30
 * instances would come out far below 1 a second. */
Test(bench, throughput_on_history_measures_the_triggered_run)
{
	static char out[65536], err[262144];
	char        bin[4096];
	json_t     *o;
	int         rc;

	snprintf(bin, sizeof(bin), "%s/axctl", getenv("AX_BIN_DIR"));
	rc = ax_cli_run(out, sizeof(out), err, sizeof(err), bin, "bench",
	                "--json", "--scenario", "throughput", "--instances",
	                "30", "--history", "1000", NULL);
	o  = bench_json(rc, out, err);
	cr_assert_eq(num(o, "history_instances"), 1000, "%s", out);
	cr_assert_gt(num(o, "history_build_s"), 0, "%s", out);
	cr_assert_gt(num(o, "throughput_per_s"), 1, "%s", out);
	/* the run's writes, counted by PostgreSQL without the history's:
	 * each instance is inserted and moved to SUCCESS (2 versions), at
	 * most through PENDING, READY and RUNNING too; its attempt likewise
	 * (QUEUED, DISPATCHED, RUNNING, SUCCESS); one event row per
	 * decision: admitted, running, succeeded (and the run's and the
	 * workers' few, under 2 an instance here); one run of 2-4 versions */
	cr_assert(num(o, "ti_versions_per_instance") >= 2 &&
	              num(o, "ti_versions_per_instance") <= 4,
	          "%s", out);
	cr_assert(num(o, "attempt_versions_per_instance") >= 2 &&
	              num(o, "attempt_versions_per_instance") <= 4,
	          "%s", out);
	cr_assert(num(o, "event_rows_per_instance") >= 3 &&
	              num(o, "event_rows_per_instance") < 5,
	          "%s", out);
	cr_assert(num(o, "run_versions_per_instance") >= 2.0 / 30 &&
	              num(o, "run_versions_per_instance") <= 4.0 / 30 + 1e-3,
	          "%s", out);
	/* every update but the inserts, at most; the WAL holds them all */
	cr_assert_leq(num(o, "nonhot_updates_per_instance"),
	              num(o, "ti_versions_per_instance") +
	                  num(o, "attempt_versions_per_instance") +
	                  num(o, "run_versions_per_instance"),
	              "%s", out);
	cr_assert_gt(num(o, "wal_bytes_per_instance"), 1000, "%s", out);
	cr_assert(
	    strstr(err, "history: generating 100 runs, 1000 instances") !=
	        NULL,
	    "%s", err);
	json_decref(o);
}

Test(bench, bad_options_exit_2_naming_the_option)
{
	static const struct {
		const char *arg, *val, *msg;
	} cases[] = {
		{ "--scenario", "gale", "--scenario must be latency, " },
		{ "--width", "2000",
		  "--width must be an integer from 1 to 1024" },
		{ "--runs", "0", "--runs must be an integer from 1" },
		{ "--executor", "docker",
		  "--executor must be noop or process" },
	};
	char out[4096], err[4096], bin[4096];

	cr_assert_not_null(getenv("AX_BIN_DIR"));
	snprintf(bin, sizeof(bin), "%s/axctl", getenv("AX_BIN_DIR"));
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int rc = ax_cli_run(out, sizeof(out), err, sizeof(err), bin,
		                    "bench", cases[k].arg, cases[k].val, NULL);
		cr_assert_eq(rc, 2, "%s %s: exit %d", cases[k].arg,
		             cases[k].val, rc);
		cr_assert(strstr(err, cases[k].msg) != NULL,
		          "'%s' not in '%s'", cases[k].msg, err);
		cr_assert_str_eq(out, "", "nothing on stdout");
	}
	cr_assert_eq(ax_cli_run(out, sizeof(out), err, sizeof(err), bin,
	                        "bench", "--help", NULL),
	             0);
	cr_assert(strstr(out, "chain") != NULL && strstr(out, "layered"), "%s",
	          out);
}

/* 1 when some process's command line mentions s. */
static int
any_process_mentions(const char *s)
{
	DIR           *d = opendir("/proc");
	struct dirent *e;
	int            hit = 0;

	cr_assert_not_null(d);
	while (!hit && (e = readdir(d)) != NULL) {
		char   path[300], buf[8192];
		int    fd;
		size_t n;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		n = 0;
		for (ssize_t r; n < sizeof(buf) - 1 &&
		     (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0;)
			n += (size_t) r;
		close(fd);
		for (size_t i = 0; i < n; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[n] = '\0';
		hit    = strstr(buf, s) != NULL;
	}
	closedir(d);
	return hit;
}

/* The temp home axctl bench named on its stderr file, or "" so far. */
static void
home_from(const char *errfile, char *home, size_t len)
{
	char  line[4096];
	FILE *f = fopen(errfile, "r");

	home[0] = '\0';
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "bench: home ", 12) == 0) {
			line[strcspn(line, ";\n")] = '\0';
			snprintf(home, len, "%s", line + 12);
		}
	fclose(f);
}

static int
file_has(const char *path, const char *needle)
{
	static char buf[262144];
	FILE       *f = fopen(path, "r");
	size_t      n;

	if (f == NULL)
		return 0;
	n      = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, needle) != NULL;
}

Test(bench, sigint_leaves_no_process_and_no_temp_home)
{
	char        bin[4096], errfile[] = "/tmp/ax-test-bench-err-XXXXXX";
	char        home[4096], yaml[4200];
	int         fd, status = 0, waited = 0;
	pid_t       pid;
	struct stat sb;

	cr_assert_not_null(getenv("AX_BIN_DIR"));
	snprintf(bin, sizeof(bin), "%s/axctl", getenv("AX_BIN_DIR"));
	cr_assert_geq(fd = mkstemp(errfile), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		/* a failed assertion ends the test: axctl cleans up then */
		prctl(PR_SET_PDEATHSIG, SIGINT);
		dup2(null, 1);
		dup2(fd, 2);
		/* long enough to be interrupted in the middle */
		execl(bin, bin, "bench", "--scenario", "chain", "--length",
		      "50", "--runs", "10000", "--json", (char *) NULL);
		_exit(127);
	}
	close(fd);
	/* until the chain runs: axd and the workers of the home are up */
	for (int i = 0; i < 1800; i++) {
		home_from(errfile, home, sizeof(home));
		if (home[0] != '\0' && file_has(errfile, "chain: "))
			break;
		cr_assert_eq(waitpid(pid, &status, WNOHANG), 0,
		             "axctl bench ended before the chain ran");
		usleep(100 * 1000);
	}
	cr_assert_neq(home[0], '\0', "no 'bench: home' line");
	snprintf(yaml, sizeof(yaml), "%s/ax.yaml", home);
	for (int i = 0; i < 600 && !any_process_mentions(yaml); i++)
		usleep(100 * 1000);
	cr_assert(any_process_mentions(yaml), "axd never ran on %s", home);
	sleep(2); /* a few runs of the chain */
	cr_assert_eq(kill(pid, SIGINT), 0);
	for (int i = 0; i < 1200 && !waited; i++) {
		waited = waitpid(pid, &status, WNOHANG) == pid;
		if (!waited)
			usleep(100 * 1000);
	}
	if (!waited) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	cr_assert(waited, "axctl bench still ran 120 s after SIGINT");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	          "exit status 1 when interrupted (status %d)", status);
	cr_assert(file_has(errfile, "interrupted by SIGINT"));
	/* PostgreSQL's postmaster may take a moment after pg_ctl returns */
	for (int i = 0; i < 100 && any_process_mentions(home); i++)
		usleep(100 * 1000);
	cr_assert_not(any_process_mentions(home),
	              "a process of %s outlived axctl bench", home);
	cr_assert_neq(stat(home, &sb), 0, "%s was left behind", home);
	cr_assert_eq(errno, ENOENT);
	unlink(errfile);
}
