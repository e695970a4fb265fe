/*
 * The YAML loader and the model: the issue's diamond, every example file,
 * template / defaults merging, merge keys, JSON form and content hashes,
 * scalars that decode to a NUL (refused with their place).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ax_config.h"
#include "clock.h"
#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"

static const char *diamond =
    "kind: DAG\n"
    "name: demo.diamond\n"
    "schedule: {cron: \"0 30 2 * * ?\", timezone: Asia/Shanghai}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo {{ ds }}\"}\n"
    "  - {name: b, type: bash, command: \"echo b\", depends_on: [a]}\n"
    "  - {name: c, type: bash, command: \"echo c\", depends_on: [a]}\n"
    "  - {name: d, type: bash, command: \"echo d\", depends_on: [b, c]}\n";

/* Loads and validates text; the set must be valid. */
static ax_dagset *
load_ok(const char *text)
{
	ax_dagset *set;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	ax_err rv = ax_dag_yaml_load_buf(set, "t.yaml", text, strlen(text));
	ax_err vr = ax_dagset_validate(set);
	if (rv != AX_OK || vr != AX_OK)
		ax_dagset_print_diags(set, stderr);
	cr_assert_eq(rv, AX_OK);
	cr_assert_eq(vr, AX_OK);
	return set;
}

Test(dag_yaml, issue_diamond_is_valid)
{
	ax_dagset *set = load_ok(diamond);
	cr_assert_eq(set->n_dags, 1);
	ax_dag *d = set->dags[0];
	cr_assert_str_eq(d->name, "demo.diamond");
	cr_assert(d->valid);
	cr_assert_eq(d->schedule.kind, AX_SCHED_CRON);
	cr_assert_str_eq(d->schedule.cron, "0 30 2 * * ?");
	cr_assert_str_eq(d->schedule.timezone, "Asia/Shanghai");
	cr_assert_eq(d->n_tasks, 4);
	cr_assert_str_eq(d->tasks[3].name, "d");
	cr_assert_eq(d->tasks[3].n_depends, 2);
	cr_assert_eq(d->tasks[3].deps[0], 1);
	cr_assert_eq(d->tasks[3].deps[1], 2);
	cr_assert_str_eq(d->tasks[0].eff.command, "echo {{ ds }}");
	cr_assert_str_eq(d->tasks[0].eff.type, "bash");
	/* positions: FILE:LINE:COL of values */
	cr_assert_str_eq(d->tasks[1].name_pos.file, "t.yaml");
	cr_assert_eq(d->tasks[1].name_pos.line, 6);
	cr_assert_eq(d->tasks[1].name_pos.col, 12);
	cr_assert_eq(d->schedule.cron_pos.col, 19); /* after the quote */
	/* topological order, upstream first */
	cr_assert_not_null(d->topo);
	cr_assert_eq(d->topo[0], 0);
	cr_assert_eq(d->topo[3], 3);
	/* defaults */
	cr_assert_eq(d->impact, AX_IMPACT_P2);
	cr_assert_eq(d->max_active_runs, 1);
	cr_assert_eq(d->tasks[0].eff.shards, 1);
	cr_assert_eq(d->tasks[0].eff.retries.count, 0);
	cr_assert_eq(strlen(d->hash), 64);
	cr_assert_str_eq(d->yaml, diamond);
	ax_dagset_free(set);
}

Test(dag_yaml, every_example_validates)
{
	char           dir[1024], path[1200];
	DIR           *dp;
	struct dirent *e;
	ax_dagset     *set;
	int            files = 0;

	snprintf(dir, sizeof(dir), "%s/examples", AX_SOURCE_ROOT);
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_not_null(dp = opendir(dir));
	while ((e = readdir(dp)) != NULL) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		cr_assert_eq(ax_dag_yaml_load_file(set, path), AX_OK, "%s",
		             path);
		files++;
	}
	closedir(dp);
	ax_err rv = ax_dagset_validate(set);
	ax_dagset_print_diags(set, stderr);
	cr_assert_eq(rv, AX_OK);
	cr_assert_geq(files, 8);
	const char *must[] = {
		"demo.diamond",       "ods.orders.daily",
		"dwd.orders.daily",   "ads.sales.daily",
		"metrics.api.hourly", "export.user_events.daily",
		"ops.probe.10s"
	};
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
		cr_assert_not_null(ax_dagset_find_dag(set, must[i]), "%s",
		                   must[i]);
	/* the warehouse chain ODS -> DWD -> ADS */
	ax_dag *dwd = ax_dagset_find_dag(set, "dwd.orders.daily");
	ax_dag *ads = ax_dagset_find_dag(set, "ads.sales.daily");
	cr_assert_eq(dwd->n_deps, 1);
	cr_assert_str_eq(dwd->deps[0].dag, "ods.orders.daily");
	cr_assert_eq(ads->n_deps, 1);
	cr_assert_str_eq(ads->deps[0].dag, "dwd.orders.daily");
	/* one template used by two DAGs */
	ax_dag *ods = ax_dagset_find_dag(set, "ods.orders.daily");
	cr_assert_str_eq(ods->tasks[2].template_name, "tpl.partition_check");
	cr_assert_str_eq(ads->tasks[1].template_name, "tpl.partition_check");
	/* sharded, seconds-level, hourly with retries and timeout */
	ax_dag *sh = ax_dagset_find_dag(set, "export.user_events.daily");
	cr_assert_eq(sh->tasks[0].eff.shards, 4);
	cr_assert_eq(sh->tasks[0].eff.routing.kind, AX_ROUTE_CONSISTENT_HASH);
	ax_dag *hr = ax_dagset_find_dag(set, "metrics.api.hourly");
	cr_assert_eq(hr->tasks[0].eff.retries.count, 3);
	cr_assert_eq(hr->tasks[0].eff.timeout_us, 600 * AX_USEC_PER_SEC);
	ax_dagset_free(set);
}

Test(dag_yaml, effective_task_merges_defaults_template_task)
{
	ax_dagset *set =
	    load_ok("kind: TaskTemplate\n"
	            "name: tpl.x\n"
	            "command: \"run {{ params.table }} {{ params.mode }}\"\n"
	            "params: {table: none, mode: full}\n"
	            "retries: {count: 3, delay: 10s}\n"
	            "timeout: 5m\n"
	            "env: {A: tpl, B: tpl}\n"
	            "---\n"
	            "kind: DAG\n"
	            "name: m\n"
	            "params: {region: eu}\n"
	            "defaults:\n"
	            "  priority: 70\n"
	            "  retries: {count: 1, backoff: exponential}\n"
	            "  timeout: 1h\n"
	            "  env: {A: dag, C: dag}\n"
	            "tasks:\n"
	            "  - name: t\n"
	            "    template: tpl.x\n"
	            "    params: {table: orders}\n"
	            "    retries: {delay: 20s}\n"
	            "    env: {B: task}\n");
	ax_task *t = &set->dags[0]->tasks[0];
	cr_assert_str_eq(t->eff.command,
	                 "run {{ params.table }} {{ params.mode }}");
	cr_assert_eq(t->eff.priority, 70);     /* DAG defaults */
	cr_assert_eq(t->eff.retries.count, 3); /* template */
	cr_assert_eq(t->eff.retries.backoff, AX_BACKOFF_EXPONENTIAL);
	cr_assert_eq(t->eff.retries.delay_us, 20 * AX_USEC_PER_SEC); /* task */
	cr_assert_eq(t->eff.timeout_us, 300 * AX_USEC_PER_SEC);
	cr_assert_eq(t->eff.params.n, 3);
	const char *want[][2] = { { "region", "eu" },
		                  { "table", "orders" },
		                  { "mode", "full" } };
	for (int i = 0; i < 3; i++) {
		cr_assert_str_eq(t->eff.params.v[i].key, want[i][0]);
		cr_assert_str_eq(t->eff.params.v[i].value, want[i][1]);
	}
	cr_assert_eq(t->eff.env.n, 3);
	cr_assert_str_eq(t->eff.env.v[0].value, "tpl");  /* A */
	cr_assert_str_eq(t->eff.env.v[1].value, "dag");  /* C */
	cr_assert_str_eq(t->eff.env.v[2].value, "task"); /* B */
	ax_dagset_free(set);
}

/* worker_group as a name, a list and a label selector: each becomes
 * the text engine/group_spec.h reads, and a DAG default is inherited. */
Test(dag_yaml, worker_group_list_and_selector)
{
	ax_dagset *set =
	    load_ok("kind: DAG\n"
	            "name: g\n"
	            "defaults: {worker_group: [gpu-a, gpu-b]}\n"
	            "tasks:\n"
	            "  - {name: d, command: echo}\n"
	            "  - {name: one, command: echo, worker_group: etl}\n"
	            "  - name: sel\n"
	            "    command: echo\n"
	            "    worker_group: {labels: {gpu: a100, zone: east}}\n");
	cr_assert_str_eq(set->dags[0]->tasks[0].eff.worker_group,
	                 "gpu-a,gpu-b");
	cr_assert_str_eq(set->dags[0]->tasks[1].eff.worker_group, "etl");
	cr_assert_str_eq(set->dags[0]->tasks[2].eff.worker_group,
	                 "gpu=a100,zone=east");
	ax_dagset_free(set);
}

Test(dag_yaml, merge_keys_and_short_forms)
{
	ax_dagset *set = load_ok(
	    "kind: DAG\n"
	    "name: k\n"
	    "schedule: {every: 90s}\n"
	    "tasks:\n"
	    "  - &base {name: a, command: echo, timeout: 2m, retries: 2}\n"
	    "  - {<<: *base, name: b, depends_on: [a], routing: "
	    "least_load}\n");
	ax_dag *d = set->dags[0];
	cr_assert_eq(d->schedule.kind, AX_SCHED_EVERY);
	cr_assert_eq(d->schedule.every_us, 90 * AX_USEC_PER_SEC);
	cr_assert_str_eq(d->tasks[1].name, "b");
	cr_assert_str_eq(d->tasks[1].eff.command, "echo");
	cr_assert_eq(d->tasks[1].eff.timeout_us, 120 * AX_USEC_PER_SEC);
	cr_assert_eq(d->tasks[1].eff.retries.count, 2);
	cr_assert_eq(d->tasks[1].eff.routing.kind, AX_ROUTE_LEAST_LOAD);
	ax_dagset_free(set);
}

static void
hash_of(const char *text, char out[AX_SHA256_HEX_LEN])
{
	ax_dagset *set = load_ok(text);
	memcpy(out, set->dags[set->n_dags - 1]->hash, AX_SHA256_HEX_LEN);
	ax_dagset_free(set);
}

Test(dag_yaml, content_hash_ignores_formatting_only)
{
	char h1[65], h2[65], h3[65], h4[65], h5[65];
	hash_of(diamond, h1);
	hash_of("# a comment\n"
	        "kind: DAG\n"
	        "schedule:\n"
	        "  timezone: Asia/Shanghai\n"
	        "  cron: '0 30 2 * * ?'\n"
	        "name: demo.diamond\n"
	        "tasks:\n"
	        "  - name: a\n"
	        "    command: echo {{ ds }}\n"
	        "  - {name: b, command: echo b, depends_on: [a]}\n"
	        "  - {name: c, command: echo c, depends_on: [a]}\n"
	        "  - {name: d, command: echo d, depends_on: [b, c]}\n",
	        h2);
	cr_assert_str_eq(h1, h2);
	char *changed              = strdup(diamond);
	*strstr(changed, "echo d") = 'E';
	hash_of(changed, h3);
	cr_assert_str_neq(h1, h3);
	free(changed);
	/* a change in the template a DAG uses changes the DAG's hash */
	hash_of("kind: TaskTemplate\nname: t\ncommand: echo 1\n---\n"
	        "kind: DAG\nname: x\ntasks:\n  - {name: a, template: t}\n",
	        h4);
	hash_of("kind: TaskTemplate\nname: t\ncommand: echo 2\n---\n"
	        "kind: DAG\nname: x\ntasks:\n  - {name: a, template: t}\n",
	        h5);
	cr_assert_str_neq(h4, h5);
}

Test(dag_yaml, json_form)
{
	ax_dagset *set = load_ok(diamond);
	json_t    *j   = ax_dag_to_json(set->dags[0]);
	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(j, "name")),
	                 "demo.diamond");
	json_t *s = json_object_get(j, "schedule");
	cr_assert_str_eq(json_string_value(json_object_get(s, "kind")),
	                 "cron");
	json_t *tasks = json_object_get(j, "tasks");
	cr_assert_eq(json_array_size(tasks), 4);
	json_t *d = json_array_get(tasks, 3);
	cr_assert_eq(json_array_size(json_object_get(d, "depends_on")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(d, "channel")),
	                 "px");
	char hex[65];
	cr_assert_eq(ax_json_hash(j, hex), AX_OK);
	cr_assert_str_eq(hex, set->dags[0]->hash);
	json_decref(j);
	ax_dagset_free(set);
}

Test(dag_yaml, empty_documents_and_template_only_files)
{
	ax_dagset *set = load_ok("---\n---\nkind: TaskTemplate\nname: only\n"
	                         "command: echo\n---\n");
	cr_assert_eq(set->n_dags, 0);
	cr_assert_eq(set->n_templates, 1);
	cr_assert_eq(strlen(set->templates[0]->hash), 64);
	ax_dagset_free(set);
}

Test(dag_yaml, unreadable_file_is_an_error_not_a_crash)
{
	ax_dagset *set;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(ax_dag_yaml_load_file(set, "/nonexistent/x.yaml"),
	             AX_EIO);
	cr_assert_eq(set->n_diags, 1);
	cr_assert_str_eq(set->diags[0].msg,
	                 "cannot read: No such file or directory");
	ax_dagset_free(set);
}

/*
 * A double-quoted "\0" (or "\x00", "\u0000") decodes to a NUL byte. The
 * loader copied scalars as C strings, so the value was cut at the NUL and
 * the parsed DAG differed from the YAML kept in dag_versions (and
 * PostgreSQL text cannot hold the NUL anyway): the file is refused with the
 * position of the scalar, whether the NUL is in a value or a key.
 */
typedef struct nul_case {
	const char *yaml;
	uint32_t    line, col;
} nul_case;

Test(dag_yaml, nul_escape_in_a_scalar_is_refused_with_its_place)
{
	static const nul_case cases[] = {
		/* a command */
		{ "kind: DAG\nname: n\ntasks:\n"
		  "  - {name: a, command: \"echo a\\0; rm -rf /tmp/x\"}\n",
		  4, 25 },
		/* a key */
		{ "kind: DAG\nname: n\n\"na\\0me\": x\ntasks:\n"
		  "  - {name: a, command: echo}\n",
		  3, 2 },
		/* a param, as \x00 */
		{ "kind: DAG\nname: n\nparams:\n  region: \"eu\\x00west\"\n"
		  "tasks:\n  - {name: a, command: echo}\n",
		  4, 12 },
		/* an env value, as \u0000, in a block mapping */
		{ "kind: DAG\nname: n\ntasks:\n  - name: a\n    command: "
		  "echo\n"
		  "    env:\n      K: \"v\\u0000w\"\n",
		  7, 11 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const nul_case *c = &cases[i];
		ax_dagset      *set;
		cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
		cr_assert_eq(ax_dag_yaml_load_buf(set, "n.yaml", c->yaml,
		                                  strlen(c->yaml)),
		             AX_EPARSE, "case %zu", i);
		cr_assert_eq(set->n_dags, 0, "case %zu: a DAG was loaded", i);
		cr_assert_eq(set->n_diags, 1, "case %zu", i);
		cr_assert_str_eq(
		    set->diags[0].msg,
		    "NUL (\\0) is not allowed in DAG YAML values; "
		    "remove the escape",
		    "case %zu", i);
		cr_assert_str_eq(set->diags[0].pos.file, "n.yaml");
		cr_assert_eq(set->diags[0].pos.line, c->line, "case %zu: %u",
		             i, set->diags[0].pos.line);
		cr_assert_eq(set->diags[0].pos.col, c->col, "case %zu: %u", i,
		             set->diags[0].pos.col);
		ax_dagset_free(set);
	}
}

Test(dag_yaml, every_nul_scalar_is_reported)
{
	const char *y = "kind: DAG\nname: \"n\\0\"\ntasks:\n"
	                "  - {name: a, command: \"x\\0\"}\n";
	ax_dagset  *set;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(ax_dag_yaml_load_buf(set, "n.yaml", y, strlen(y)),
	             AX_EPARSE);
	cr_assert_eq(set->n_diags, 2);
	cr_assert_eq(set->diags[0].pos.line, 2);
	cr_assert_eq(set->diags[1].pos.line, 4);
	ax_dagset_free(set);
}
