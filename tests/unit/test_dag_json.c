/*
 * ax_dag_from_json: a DAG read back from its stored definition is the
 * same DAG (to_json -> from_json -> to_json equal, same content hash),
 * for every feature of the format; a damaged definition is refused with
 * the JSON pointer of the bad member.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"

static const char *const yaml =
    "kind: TaskTemplate\n"
    "name: tpl.sql\n"
    "type: bash\n"
    "command: \"run {{ params.sql }}\"\n"
    "retries: {count: 2, backoff: exponential, delay: 30s, max_delay: 5m}\n"
    "params: {sql: none.sql, engine: spark}\n"
    "---\n"
    "kind: DAG\n"
    "name: ods.orders\n"
    "owner: dp\n"
    "impact: P1\n"
    "description: the ODS layer\n"
    "tags: [warehouse, ods]\n"
    "schedule: {cron: \"0 0 1 * * ?\", timezone: Asia/Shanghai}\n"
    "start: 2026-01-01\n"
    "end: 2027-01-01T00:00:00Z\n"
    "catchup: true\n"
    "deadline: {at: \"08:00\", day: 1}\n"
    "concurrency: {max_active_runs: 3, policy: replace}\n"
    "params: {region: cn, tier: gold}\n"
    "defaults: {worker_group: etl, priority: 70, resources: {ssd: 1}}\n"
    "tasks:\n"
    "  - {name: a, template: tpl.sql, params: {sql: a.sql}}\n"
    "  - name: b\n"
    "    command: echo b\n"
    "    shards: 4\n"
    "    routing: {strategy: consistent_hash, key: \"s{{ shard.index }}\"}\n"
    "    resources: {cpu: 500m, memory: 512Mi, gpu: 2, ssd: 3}\n"
    "    timeout: 1h30m\n"
    "    channel: biz\n"
    "    pool: spark\n"
    "    env: {A: \"1\", B: two}\n"
    "    depends_on: [a]\n"
    "  - {name: c, command: echo c, routing: {strategy: pinned, node: n1},"
    " depends_on: [a]}\n"
    "  - {name: d, command: echo d, depends_on: [b, c], retries: 1,"
    " deadline: {after: 90m}}\n"
    "---\n"
    "kind: DAG\n"
    "name: dwd.orders\n"
    "schedule: {every: 90s}\n"
    "depends_on_dags:\n"
    "  - {dag: ods.orders, mode: same_period}\n"
    "  - {dag: other, mode: latest_success}\n"
    "tasks:\n"
    "  - {name: x, command: echo x, preemptible: true}\n"
    "  - {name: x2, command: echo x2, preemptible: false}\n"
    "---\n"
    "kind: DAG\n"
    "name: once\n"
    "schedule: {at: \"2026-05-01T10:00:00Z\"}\n"
    "tasks:\n"
    "  - {name: y, command: \"true\", timeout: 90s}\n";

static ax_dagset *
load(void)
{
	ax_dagset *set;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	ax_dag_yaml_load_buf(set, "t.yaml", yaml, strlen(yaml));
	ax_dagset_validate(set);
	if (ax_dagset_error_count(set, NULL) > 0)
		ax_dagset_print_diags(set, stderr);
	cr_assert_eq(ax_dagset_error_count(set, NULL), 0);
	cr_assert_eq(set->n_dags, 3);
	return set;
}

Test(dag_json, round_trip_every_feature)
{
	ax_dagset *set = load(), *back;

	cr_assert_eq(ax_dagset_new(NULL, &back), AX_OK);
	for (size_t i = 0; i < set->n_dags; i++) {
		const ax_dag *d  = set->dags[i];
		json_t       *j1 = ax_dag_to_json(d), *j2;
		ax_dag       *r;

		cr_assert_not_null(j1);
		cr_assert_eq(ax_dag_from_json(back, j1, &r), AX_OK, "%s: %s",
		             d->name, ax_err_detail());
		j2       = ax_dag_to_json(r);
		char *s1 = json_dumps(j1, JSON_SORT_KEYS | JSON_COMPACT);
		char *s2 = json_dumps(j2, JSON_SORT_KEYS | JSON_COMPACT);
		cr_assert_str_eq(s2, s1);
		cr_assert_str_eq(r->hash, d->hash, "hash of %s", d->name);
		cr_assert(r->valid);
		cr_assert_not_null(r->topo);
		cr_assert_eq(r->n_tasks, d->n_tasks);
		for (size_t t = 0; t < d->n_tasks; t++) {
			cr_assert_str_eq(r->tasks[t].name, d->tasks[t].name);
			cr_assert_eq(r->tasks[t].n_depends,
			             d->tasks[t].n_depends);
			for (size_t k = 0; k < d->tasks[t].n_depends; k++)
				cr_assert_eq(r->tasks[t].deps[k],
				             d->tasks[t].deps[k]);
			cr_assert_eq(r->tasks[t].eff.shards,
			             d->tasks[t].eff.shards);
			cr_assert_eq(r->tasks[t].eff.retries.count,
			             d->tasks[t].eff.retries.count);
		}
		free(s1);
		free(s2);
		json_decref(j1);
		json_decref(j2);
	}
	/* spot checks of the decoded model */
	ax_dag *o = ax_dagset_find_dag(back, "ods.orders");
	cr_assert_not_null(o);
	cr_assert_eq(o->policy, AX_OVERLAP_REPLACE);
	cr_assert_eq(o->max_active_runs, 3);
	cr_assert(o->catchup);
	cr_assert_str_eq(o->schedule.timezone, "Asia/Shanghai");
	cr_assert_eq(o->tasks[1].eff.timeout_us, 5400LL * 1000000);
	cr_assert_eq(o->tasks[1].eff.channel, AX_CHANNEL_BIZ);
	cr_assert_str_eq(o->tasks[0].eff.worker_group, "etl");
	/* named resources: the defaults' ssd, the task's own over it */
	cr_assert_eq(o->tasks[0].eff.res.n, 1);
	cr_assert_str_eq(o->tasks[0].eff.res.v[0].key, "ssd");
	cr_assert_str_eq(o->tasks[0].eff.res.v[0].value, "1");
	cr_assert_eq(o->tasks[1].eff.res.n, 2);
	for (size_t i = 0; i < 2; i++) {
		const ax_kv *kv = &o->tasks[1].eff.res.v[i];
		cr_assert_str_eq(kv->value,
		                 strcmp(kv->key, "gpu") == 0 ? "2" : "3", "%s",
		                 kv->key);
	}
	/* deadlines: the DAG's wall-clock one, task d's duration */
	cr_assert_eq(o->deadline.spec.kind, AX_DEADLINE_AT);
	cr_assert_eq(o->deadline.spec.at_sec, 8 * 3600);
	cr_assert_eq(o->deadline.spec.day, 1);
	cr_assert_eq(o->tasks[3].deadline.spec.kind, AX_DEADLINE_AFTER);
	cr_assert_eq(o->tasks[3].deadline.spec.after_us, 90LL * 60 * 1000000);
	cr_assert_eq(o->tasks[0].deadline.spec.kind, AX_DEADLINE_NONE);
	ax_dag *w = ax_dagset_find_dag(back, "dwd.orders");
	cr_assert_eq(w->deadline.spec.kind, AX_DEADLINE_NONE);
	cr_assert_eq(w->schedule.kind, AX_SCHED_EVERY);
	cr_assert_eq(w->schedule.every_us, 90LL * 1000000);
	cr_assert_eq(w->n_deps, 2);
	cr_assert_eq(w->deps[1].mode, AX_DEP_LATEST_SUCCESS);
	cr_assert_eq(w->tasks[0].eff.preemptible, 1);
	cr_assert_eq(w->tasks[1].eff.preemptible, 0);
	/* written only when true: DAGs without it keep their hashes */
	json_t *wj = ax_dag_to_json(w);
	char   *ws = json_dumps(wj, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert_not_null(strstr(ws, "\"preemptible\":true"));
	cr_assert_null(strstr(ws, "\"preemptible\":false"));
	/* a DAG without a deadline has no member (its hash is kept) */
	cr_assert_null(strstr(ws, "deadline"));
	free(ws);
	json_decref(wj);
	ax_dagset_free(back);
	ax_dagset_free(set);
}

/* Each damage gives AX_EPARSE naming where. */
Test(dag_json, damaged_definition_names_the_member)
{
	static const struct {
		const char *path; /* member to replace, "/"-separated */
		const char *json; /* replacement value */
		const char *want; /* in the detail */
	} cases[] = {
		{ "kind", "\"TaskTemplate\"", "/kind: expected \"DAG\"" },
		{ "name", "3", "/name: expected a string" },
		{ "impact", "\"P9\"", "/impact: unknown value 'P9'" },
		{ "concurrency", "[]", "/concurrency: expected an object" },
		{ "catchup", "\"yes\"", "/catchup: expected a boolean" },
		{ "tasks", "{}", "/tasks: expected an array" },
	};
	ax_dagset *set = load();
	json_t *good   = ax_dag_to_json(ax_dagset_find_dag(set, "ods.orders"));

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t    *j = json_deep_copy(good);
		ax_dagset *b;
		ax_dag    *r = (ax_dag *) 1;
		json_object_set_new(
		    j, cases[i].path,
		    json_loads(cases[i].json, JSON_DECODE_ANY, NULL));
		cr_assert_eq(ax_dagset_new(NULL, &b), AX_OK);
		cr_assert_eq(ax_dag_from_json(b, j, &r), AX_EPARSE, "%s",
		             cases[i].path);
		cr_assert_null(r);
		cr_assert(strstr(ax_err_detail(), cases[i].want) != NULL,
		          "%s: got '%s'", cases[i].path, ax_err_detail());
		cr_assert_eq(b->n_dags, 0);
		ax_dagset_free(b);
		json_decref(j);
	}
	/* a dependency on a task that is not there */
	json_t *j  = json_deep_copy(good);
	json_t *dj = json_object_get(
	    json_array_get(json_object_get(j, "tasks"), 3), "depends_on");
	json_array_append_new(dj, json_string("zz"));
	ax_dagset *b;
	ax_dag    *r;
	cr_assert_eq(ax_dagset_new(NULL, &b), AX_OK);
	cr_assert_eq(ax_dag_from_json(b, j, &r), AX_EPARSE);
	cr_assert(strstr(ax_err_detail(),
	                 "/tasks/3/depends_on/2: unknown task 'zz'") != NULL,
	          "%s", ax_err_detail());
	/* not an object at all */
	json_t *arr = json_array();
	cr_assert_eq(ax_dag_from_json(b, arr, &r), AX_EPARSE);
	json_decref(arr);
	ax_dagset_free(b);
	json_decref(j);
	json_decref(good);
	ax_dagset_free(set);
}
