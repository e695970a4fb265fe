/*
 * test_bench_util.c - `axctl bench` pure parts: options and their errors,
 * nearest-rank percentiles, the spread of schedules over the minute, the
 * generated YAML (validated by the real DAG validator) and the JSON keys.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"

static int
parse(ax_bench_opts *o, char *err, size_t len, int argc, char **argv)
{
	FILE *e   = fmemopen(err, len, "w");
	FILE *out = fopen("/dev/null", "w");
	int   rc  = ax_bench_parse(argc, argv, o, out, e);
	fclose(e);
	fclose(out);
	return rc;
}

Test(bench_util, defaults)
{
	ax_bench_opts o;
	char          err[256] = "";
	char         *argv[]   = { "bench" };

	cr_assert_eq(parse(&o, err, sizeof(err), 1, argv), 0);
	cr_assert_eq(o.scenario, AX_BENCH_ALL);
	cr_assert_eq(o.schedules, 10000);
	cr_assert_eq(o.instances, 20000);
	cr_assert_eq(o.timers, 1000000);
	cr_assert_eq(o.timer_specs, 0);
	cr_assert_eq(o.duration, 120);
	cr_assert_eq(o.process, 0);
	cr_assert_eq(o.workers, 2);
	cr_assert_eq(o.json, 0);
	cr_assert_null(o.home);
}

Test(bench_util, every_option)
{
	ax_bench_opts o;
	char          err[256] = "";
	char         *argv[]   = { "bench",       "--home",     "/tmp/h",
		                   "--scenario",  "throughput", "--schedules=50",
		                   "--instances", "300",        "--timers",
		                   "7",           "--duration", "9",
		                   "--executor",  "process",    "--workers=3",
		                   "--slots",     "8",          "--json" };

	cr_assert_eq(parse(&o, err, sizeof(err), 18, argv), 0, "%s", err);
	cr_assert_str_eq(o.home, "/tmp/h");
	cr_assert_eq(o.scenario, AX_BENCH_THROUGHPUT);
	cr_assert_eq(o.schedules, 50);
	cr_assert_eq(o.instances, 300);
	cr_assert_eq(o.timers, 7);
	cr_assert_eq(o.duration, 9);
	cr_assert_eq(o.process, 1);
	cr_assert_eq(o.workers, 3);
	cr_assert_eq(o.slots, 8);
	cr_assert_eq(o.json, 1);
}

Test(bench_util, timer_specs)
{
	ax_bench_opts o;
	char          err[256] = "";
	char *argv[] = { "bench", "--scenario", "timers", "--timer-specs",
		         "60" };

	cr_assert_eq(parse(&o, err, sizeof(err), 5, argv), 0, "%s", err);
	cr_assert_eq(o.scenario, AX_BENCH_TIMERS);
	cr_assert_eq(o.timer_specs, 60);
}

struct bad_case {
	char arg[32];
	char val[32]; /* "" : no value */
	char msg[64]; /* expected in the error */
};

ParameterizedTestParameters(bench_util, bad_options)
{
	static struct bad_case cases[] = {
		{ "--scenario", "fast", "--scenario must be latency" },
		{ "--executor", "docker",
		  "--executor must be noop or process" },
		{ "--schedules", "0",
		  "--schedules must be an integer from 1" },
		{ "--schedules", "ten", "--schedules must be an integer" },
		{ "--duration", "-5", "--duration must be an integer from 1" },
		{ "--timer-specs", "-1",
		  "--timer-specs must be an integer from 0" },
		{ "--workers", "65",
		  "--workers must be an integer from 1 to 64" },
		{ "--instances", "", "--instances needs a value" },
		{ "--frobnicate", "1", "unknown option '--frobnicate'" },
		{ "--nope", "", "unknown option '--nope'" },
		{ "latency", "", "unexpected argument 'latency'" },
	};
	return cr_make_param_array(struct bad_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *c, bench_util, bad_options)
{
	ax_bench_opts o;
	char          err[256] = "";
	char         *argv[]   = { "bench", c->arg, c->val };
	int           argc     = c->val[0] != '\0' ? 3 : 2;

	cr_assert_eq(parse(&o, err, sizeof(err), argc, argv), 2);
	cr_assert(strstr(err, c->msg) != NULL, "'%s' not in '%s'", c->msg,
	          err);
}

Test(bench_util, percentile_nearest_rank)
{
	double v[100];
	for (int i = 0; i < 100; i++)
		v[i] = 100 - i; /* 100 .. 1, unsorted */
	ax_bench_sort(v, 100);
	cr_assert_eq(v[0], 1);
	cr_assert_eq(ax_bench_percentile(v, 100, 50), 50);
	cr_assert_eq(ax_bench_percentile(v, 100, 99), 99);
	cr_assert_eq(ax_bench_percentile(v, 100, 100), 100);
	cr_assert_eq(ax_bench_percentile(v, 100, 1), 1);

	double w[] = { 3, 1, 2, 10, 4 };
	ax_bench_sort(w, 5);
	cr_assert_eq(ax_bench_percentile(w, 5, 50), 3);
	cr_assert_eq(ax_bench_percentile(w, 5, 99), 10, "one outlier in 5");
	cr_assert_eq(ax_bench_percentile(w, 5, 80), 4);
	double one[] = { 7.5 };
	cr_assert_eq(ax_bench_percentile(one, 1, 50), 7.5);
	cr_assert_eq(ax_bench_percentile(one, 1, 99), 7.5);
	cr_assert_eq(ax_bench_percentile(NULL, 0, 99), 0);
	/* 1000 values: P99 is the 990th, not the max. */
	double *big = malloc(1000 * sizeof(double));
	for (int i = 0; i < 1000; i++)
		big[i] = i + 1;
	cr_assert_eq(ax_bench_percentile(big, 1000, 99), 990);
	cr_assert_eq(ax_bench_percentile(big, 1000, 99.9), 999);
	free(big);
}

Test(bench_util, schedules_spread_over_the_minute)
{
	int per[60] = { 0 };
	for (int i = 0; i < 10000; i++) {
		int s = ax_bench_second(i, 10000);
		cr_assert(s >= 0 && s < 60);
		per[s]++;
	}
	for (int s = 0; s < 60; s++)
		cr_assert(per[s] == 166 || per[s] == 167, "second %d: %d", s,
		          per[s]);
	cr_assert_eq(ax_bench_second(0, 3), 0);
	cr_assert_eq(ax_bench_second(1, 3), 20);
	cr_assert_eq(ax_bench_second(2, 3), 40);
}

/* Validates text with the real loader; returns the dagset. */
static ax_dagset *
validate(const char *text)
{
	ax_dagset *set;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(
	    ax_dag_yaml_load_buf(set, "bench.yaml", text, strlen(text)), AX_OK,
	    "%s", ax_err_detail());
	if (ax_dagset_validate(set) != AX_OK) {
		ax_dagset_print_diags(set, stderr);
		cr_assert_fail("generated YAML is invalid:\n%s", text);
	}
	return set;
}

Test(bench_util, latency_yaml_is_a_valid_dag)
{
	char buf[512];

	ax_log_init(AX_LOG_OFF, 2);
	cr_assert_lt(ax_bench_yaml_latency(buf, sizeof(buf), 42, 60, 0),
	             (int) sizeof(buf));
	cr_assert(strstr(buf, "name: bench.lat.0000042") != NULL, "%s", buf);
	cr_assert(strstr(buf, "cron: \"42 * * * * ?\"") != NULL, "%s", buf);
	cr_assert(strstr(buf, "type: noop") != NULL);
	ax_dagset *set = validate(buf);
	cr_assert_eq(set->n_dags, 1);
	cr_assert_str_eq(set->dags[0]->name, "bench.lat.0000042");
	ax_dagset_free(set);
	ax_bench_yaml_latency(buf, sizeof(buf), 1, 2, 1);
	cr_assert(strstr(buf, "type: bash") != NULL);
	ax_dagset_free(validate(buf));
}

Test(bench_util, throughput_yaml_has_the_instances)
{
	char  *text = NULL;
	size_t len  = 0;
	FILE  *f    = open_memstream(&text, &len);

	ax_log_init(AX_LOG_OFF, 2);
	cr_assert_eq(ax_bench_yaml_throughput(f, 2500, 0), 3);
	fclose(f);
	cr_assert(strstr(text,
	                 "{name: t0, command: \"/bin/true\", shards: "
	                 "1000}") != NULL,
	          "%s", text);
	cr_assert(strstr(text,
	                 "{name: t2, command: \"/bin/true\", shards: "
	                 "500}") != NULL,
	          "%s", text);
	ax_dagset *set = validate(text);
	cr_assert_eq(set->n_dags, 1);
	ax_dagset_free(set);
	free(text);
}

Test(bench_util, json_has_the_issue_keys)
{
	char            buf[512];
	ax_bench_result r;
	FILE           *f = fmemopen(buf, sizeof(buf), "w");

	ax_bench_result_init(&r);
	r.p50_ms           = 1.5;
	r.p99_ms           = 8.25;
	r.max_ms           = 20;
	r.throughput_per_s = 5123.4;
	r.samples          = 99;
	ax_bench_json(f, &r);
	fclose(f);
	cr_assert_str_eq(buf,
	                 "{\"p50_ms\": 1.500, \"p99_ms\": 8.250, \"max_ms\": "
	                 "20.000, \"decision_p99_ms\": null, "
	                 "\"env_ready_p99_ms\": null, \"throughput_per_s\": "
	                 "5123.400, \"rss_mb\": null, "
	                 "\"cpu_us_per_instance\": null, \"samples\": 99}\n");
}
