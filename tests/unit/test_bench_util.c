/*
 * test_bench_util.c - `axctl bench` pure parts: options and their errors,
 * nearest-rank percentiles, the spread of schedules over the minute, the
 * generated YAML (validated by the real DAG validator), the scenario
 * names and the JSON keys (fixed ones and those scenarios put).
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
	cr_assert_eq(o.runs, 1);
	cr_assert_eq(o.length, 100);
	cr_assert_eq(o.layers, 100);
	cr_assert_eq(o.width, 100);
}

Test(bench_util, chain_and_layered_options)
{
	ax_bench_opts o;
	char          err[256] = "";
	char *argv[] = { "bench",   "--scenario",  "chain",      "--runs",
		         "5",       "--length=30", "--layers",   "7",
		         "--width", "1024",        "--executor", "process" };

	cr_assert_eq(parse(&o, err, sizeof(err), 12, argv), 0, "%s", err);
	cr_assert_eq(o.scenario, AX_BENCH_CHAIN);
	cr_assert_eq(o.runs, 5);
	cr_assert_eq(o.length, 30);
	cr_assert_eq(o.layers, 7);
	cr_assert_eq(o.width, 1024);
	cr_assert_eq(o.process, 1);
	char *argv2[] = { "bench", "--scenario=layered" };
	cr_assert_eq(parse(&o, err, sizeof(err), 2, argv2), 0, "%s", err);
	cr_assert_eq(o.scenario, AX_BENCH_LAYERED);
}

Test(bench_util, scenario_names_and_all)
{
	cr_assert_str_eq(ax_bench_scenario_name(AX_BENCH_ALL), "all");
	cr_assert_str_eq(ax_bench_scenario_name(AX_BENCH_CHAIN), "chain");
	cr_assert_str_eq(ax_bench_scenario_name(AX_BENCH_LAYERED), "layered");
	cr_assert_null(ax_bench_scenario_name(AX_BENCH_N_SCENARIOS));
	cr_assert(ax_bench_in_all(AX_BENCH_LATENCY));
	cr_assert(ax_bench_in_all(AX_BENCH_THROUGHPUT));
	cr_assert(ax_bench_in_all(AX_BENCH_CHAIN));
	cr_assert(ax_bench_in_all(AX_BENCH_LAYERED));
	cr_assert_not(ax_bench_in_all(AX_BENCH_TIMERS), "timers: on demand");
	cr_assert_not(ax_bench_in_all(AX_BENCH_ALL));
	/* every name parses back to its scenario */
	for (int k = 0; k < AX_BENCH_N_SCENARIOS; k++) {
		ax_bench_opts o;
		char          err[256] = "";
		char         *argv[]   = { "bench", "--scenario",
			                   (char *) ax_bench_scenario_name(
			                       (ax_bench_scenario) k) };
		cr_assert_eq(parse(&o, err, sizeof(err), 3, argv), 0, "%s",
		             err);
		cr_assert_eq((int) o.scenario, k);
	}
}

Test(bench_util, help_names_every_scenario_and_option)
{
	char  *text = NULL;
	size_t len  = 0;
	FILE  *f    = open_memstream(&text, &len);

	ax_bench_usage(f);
	fclose(f);
	for (int k = 0; k < AX_BENCH_N_SCENARIOS; k++)
		cr_assert(strstr(text,
		                 ax_bench_scenario_name(
		                     (ax_bench_scenario) k)) != NULL,
		          "scenario %d not in --help", k);
	const char *opts[] = { "--runs N",          "--length N",
		               "--layers N",        "--width N",
		               "chain_edge_p99_ms", "layered_vs_dask" };
	for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++)
		cr_assert(strstr(text, opts[k]) != NULL, "'%s' not in --help",
		          opts[k]);
	free(text);
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

Test(bench_util, scale_options)
{
	ax_bench_opts o;
	char          err[256] = "";
	char         *argv[]   = { "bench" };
	char         *argv2[]  = { "bench",  "--scenario", "scale",
		                   "--dags", "500",        "--history=0" };
	char         *argv3[]  = { "bench", "--history", "-1" };
	char         *argv4[]  = { "bench", "--dags", "0" };

	cr_assert_eq(parse(&o, err, sizeof(err), 1, argv), 0);
	cr_assert_eq(o.dags, 100000);
	cr_assert_eq(o.history, 10000000);
	cr_assert_not(o.history_set, "throughput builds no history unasked");
	cr_assert_eq(parse(&o, err, sizeof(err), 6, argv2), 0, "%s", err);
	cr_assert_eq(o.scenario, AX_BENCH_SCALE);
	cr_assert_eq(o.dags, 500);
	cr_assert_eq(o.history, 0);
	cr_assert(o.history_set);
	cr_assert_not(ax_bench_in_all(AX_BENCH_SCALE), "scale: on demand");
	cr_assert_not(ax_bench_in_all(AX_BENCH_STORM), "storm: on demand");
	cr_assert_str_eq(ax_bench_scenario_name(AX_BENCH_STORM), "storm");
	cr_assert_eq(parse(&o, err, sizeof(err), 3, argv3), 2);
	cr_assert(strstr(err, "--history must be an integer from 0 to") !=
	              NULL,
	          "%s", err);
	cr_assert_eq(parse(&o, err, sizeof(err), 3, argv4), 2);
	cr_assert(strstr(err, "--dags must be an integer from 1 to") != NULL,
	          "%s", err);
}

struct bad_case {
	char arg[32];
	char val[32]; /* "" : no value */
	char msg[96]; /* expected in the error */
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
		{ "--scenario", "gale",
		  "chain, layered, timers, scale, storm or all, not 'gale'" },
		{ "--history", "x", "--history must be an integer from 0" },
		{ "--dags", "0", "--dags must be an integer from 1" },
		{ "--runs", "0", "--runs must be an integer from 1 to 10000" },
		{ "--length", "1",
		  "--length must be an integer from 2 to 5000" },
		{ "--length", "5001", "--length must be an integer from 2" },
		{ "--layers", "x", "--layers must be an integer from 2" },
		{ "--width", "1025",
		  "--width must be an integer from 1 to 1024" },
		{ "--width", "0", "--width must be an integer from 1" },
		{ "--runs", "", "--runs needs a value" },
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

Test(bench_util, chain_yaml_is_a_line)
{
	char  *text = NULL;
	size_t len  = 0;
	FILE  *f    = open_memstream(&text, &len);

	ax_log_init(AX_LOG_OFF, 2);
	ax_bench_yaml_chain(f, 100, 0);
	fclose(f);
	cr_assert(strstr(text, "name: bench.chain\n") != NULL, "%s", text);
	cr_assert(strstr(text, "{name: t1, command: \"/bin/true\"}") != NULL);
	cr_assert(strstr(text,
	                 "{name: t100, command: \"/bin/true\", "
	                 "depends_on: [t99]}") != NULL);
	cr_assert_null(strstr(text, "t101"));
	cr_assert(strstr(text, "type: noop") != NULL);
	ax_dagset *set = validate(text);
	cr_assert_eq(set->n_dags, 1);
	cr_assert_eq(set->dags[0]->n_tasks, 100);
	ax_dagset_free(set);
	free(text);
	f = open_memstream(&text, &len);
	ax_bench_yaml_chain(f, 2, 1);
	fclose(f);
	cr_assert(strstr(text, "type: bash") != NULL);
	ax_dagset_free(validate(text));
	free(text);
}

Test(bench_util, layered_yaml_is_fully_connected_layers)
{
	char  *text = NULL;
	size_t len  = 0;
	FILE  *f    = open_memstream(&text, &len);

	ax_log_init(AX_LOG_OFF, 2);
	ax_bench_yaml_layered(f, 100, 100, 0);
	fclose(f);
	cr_assert(strstr(text, "name: bench.layered\n") != NULL, "%s", text);
	cr_assert(strstr(text,
	                 "{name: l1, command: \"/bin/true\", shards: "
	                 "100}") != NULL);
	cr_assert(strstr(text,
	                 "{name: l100, command: \"/bin/true\", shards: "
	                 "100, depends_on: [l99]}") != NULL);
	cr_assert_null(strstr(text, "l101"));
	ax_dagset *set = validate(text);
	cr_assert_eq(set->dags[0]->n_tasks, 100);
	ax_dagset_free(set);
	free(text);
}

Test(bench_util, put_get_and_say)
{
	ax_bench_result r;
	char            key[64];

	ax_bench_result_init(&r);
	cr_assert_eq(ax_bench_get(&r, "chain_edge_p99_ms"), -1);
	cr_assert_eq(ax_bench_put(&r, "chain_edge_p99_ms", 4.5), 0);
	cr_assert_eq(ax_bench_put(&r, "chain_edge_p99_ms", 3.25), 0,
	             "a second put replaces");
	cr_assert_eq(r.n_extra, 1);
	cr_assert_eq(ax_bench_get(&r, "chain_edge_p99_ms"), 3.25);
	cr_assert_eq(ax_bench_put(&r, "", 1), -1);
	cr_assert_eq(ax_bench_put(&r, "Bad-Key", 1), -1);
	cr_assert_eq(ax_bench_put(&r, "quote\"key", 1), -1);
	memset(key, 'a', 48);
	key[48] = '\0';
	cr_assert_eq(ax_bench_put(&r, key, 1), -1, "48 characters");
	key[47] = '\0';
	cr_assert_eq(ax_bench_put(&r, key, 1), 0, "47 characters");
	for (int k = r.n_extra; k < AX_BENCH_EXTRA_MAX; k++) {
		snprintf(key, sizeof(key), "k%d", k);
		cr_assert_eq(ax_bench_put(&r, key, k), 0);
	}
	cr_assert_eq(ax_bench_put(&r, "one_too_many", 1), -1);
	cr_assert_eq(ax_bench_put(&r, "k5", 55), 0, "replacing when full");
	cr_assert_eq(ax_bench_get(&r, "k5"), 55);

	ax_bench_say(&r, "chain: P99 %.2f ms", 3.25);
	ax_bench_say(&r, "layered: %d/s", 800);
	cr_assert_str_eq(r.human, "chain: P99 3.25 ms\nlayered: 800/s\n");
	for (int k = 0; k < 200; k++)
		ax_bench_say(&r, "%s",
		             "a line long enough to fill the buffer");
	cr_assert_lt(strlen(r.human), sizeof(r.human));
	cr_assert_eq(r.human[strlen(r.human) - 1], '\n');
}

Test(bench_util, json_has_the_figures_put)
{
	char            buf[768];
	ax_bench_result r;
	FILE           *f = fmemopen(buf, sizeof(buf), "w");

	ax_bench_result_init(&r);
	r.rss_mb = 12;
	ax_bench_put(&r, "chain_edge_p99_ms", 4.5);
	ax_bench_put(&r, "layered_per_s", 1414);
	ax_bench_put(&r, "layered_vs_dask", -1);
	ax_bench_json(f, &r);
	fclose(f);
	cr_assert_str_eq(buf,
	                 "{\"p50_ms\": null, \"p99_ms\": null, \"max_ms\": "
	                 "null, \"decision_p99_ms\": null, "
	                 "\"env_ready_p99_ms\": null, \"throughput_per_s\": "
	                 "null, \"rss_mb\": 12.000, "
	                 "\"cpu_us_per_instance\": null, \"samples\": 0, "
	                 "\"chain_edge_p99_ms\": 4.500, \"layered_per_s\": "
	                 "1414.000, \"layered_vs_dask\": null}\n");
}
