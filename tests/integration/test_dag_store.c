/*
 * test_dag_store.c - DAG and template versions in a real PostgreSQL:
 * submit, resubmit unchanged, change -> new active version, revert ->
 * the old version active again, nothing stored for an invalid DAG.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "pg_harness.h"
#include "store.h"

static ax_test_pg *pg;
static ax_store   *st;

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK, "%s",
	             ax_err_detail());
}

static void
teardown(void)
{
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

TestSuite(dag_store, .init = setup, .fini = teardown, .timeout = 120);

static const char *v1 =
    "kind: TaskTemplate\nname: tpl.echo\ncommand: echo {{ params.x }}\n"
    "params: {x: one}\n"
    "---\n"
    "kind: DAG\n"
    "name: demo.diamond\n"
    "schedule: {cron: \"0 30 2 * * ?\", timezone: Asia/Shanghai}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo {{ ds }}\"}\n"
    "  - {name: b, type: bash, command: \"echo b\", depends_on: [a]}\n"
    "  - {name: c, template: tpl.echo, depends_on: [a]}\n"
    "  - {name: d, type: bash, command: \"echo d\", depends_on: [b, c]}\n";

/* Parses text and submits its template and DAG; returns the DAG result. */
static ax_dag_store_result
submit(const char *text, ax_dag_store_result *tres)
{
	ax_dagset          *set;
	ax_dag_store_result r, t;
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(ax_dag_yaml_load_buf(set, "t.yaml", text, strlen(text)),
	             AX_OK);
	cr_assert_eq(ax_dagset_validate(set), AX_OK);
	cr_assert_eq(
	    ax_dag_store_submit_template(st, set->templates[0], "t.yaml", &t),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_dag_store_submit(st, set->dags[0], "t.yaml", &r),
	             AX_OK, "%s", ax_err_detail());
	if (tres != NULL)
		*tres = t;
	ax_dagset_free(set);
	return r;
}

static int64_t
count(const char *sql)
{
	int64_t n = -1;
	cr_assert_eq(ax_store_query_int64(st, sql, 0, NULL, &n), AX_OK, "%s",
	             ax_err_detail());
	return n;
}

static int64_t
active_version(void)
{
	return count("SELECT v.version FROM dags d JOIN dag_versions v ON "
	             "v.id = d.active_version_id WHERE d.name = "
	             "'demo.diamond'");
}

Test(dag_store, submit_resubmit_change_revert)
{
	ax_dag_store_result r, t;

	r = submit(v1, &t);
	cr_assert_eq(r.outcome, AX_DAG_CREATED);
	cr_assert_eq(r.version, 1);
	cr_assert_eq(t.outcome, AX_DAG_CREATED);
	cr_assert_eq(active_version(), 1);

	/* identical YAML: a no-op */
	r = submit(v1, &t);
	cr_assert_eq(r.outcome, AX_DAG_UNCHANGED);
	cr_assert_eq(t.outcome, AX_DAG_UNCHANGED);
	cr_assert_eq(r.version, 1);
	cr_assert_eq(count("SELECT count(*) FROM dag_versions"), 1);

	/* formatting and comments only: same content, still a no-op */
	char *fmt = malloc(strlen(v1) + 64);
	sprintf(fmt, "# reformatted\n%s", v1);
	r = submit(fmt, NULL);
	cr_assert_eq(r.outcome, AX_DAG_UNCHANGED);
	free(fmt);

	/* a change: version 2, active */
	char *v2              = strdup(v1);
	*strstr(v2, "echo d") = 'E';
	r                     = submit(v2, NULL);
	cr_assert_eq(r.outcome, AX_DAG_UPDATED);
	cr_assert_eq(r.version, 2);
	cr_assert_eq(active_version(), 2);
	cr_assert_eq(count("SELECT count(*) FROM dag_versions"), 2);
	cr_assert_eq(count("SELECT count(*) FROM dag_versions WHERE "
	                   "definition->'tasks'->3->>'command' = 'Echo d'"),
	             1);

	/* back to the first content: version 1 active again, no new row */
	r = submit(v1, NULL);
	cr_assert_eq(r.outcome, AX_DAG_UPDATED);
	cr_assert_eq(r.version, 1);
	cr_assert_eq(active_version(), 1);
	cr_assert_eq(count("SELECT count(*) FROM dag_versions"), 2);
	free(v2);

	/* stored versions are immutable (trigger of the schema) */
	cr_assert_neq(
	    ax_store_exec(st, "UPDATE dag_versions SET yaml = 'x'", 0, NULL),
	    AX_OK);
}

Test(dag_store, template_change_is_a_new_template_and_dag_version)
{
	ax_dag_store_result r, t;
	submit(v1, NULL);
	char *v2              = strdup(v1);
	*strstr(v2, "x: one") = 'y'; /* rename the param default... */
	memcpy(strstr(v2, "y: one"), "x: two", 6);
	r = submit(v2, &t);
	cr_assert_eq(t.outcome, AX_DAG_UPDATED);
	cr_assert_eq(t.version, 2);
	/* the DAG pins the effective task, so it changes too */
	cr_assert_eq(r.outcome, AX_DAG_UPDATED);
	cr_assert_eq(r.version, 2);
	cr_assert_eq(count("SELECT count(*) FROM task_template_versions"), 2);
	free(v2);
}

Test(dag_store, invalid_dag_is_refused)
{
	ax_dagset          *set;
	ax_dag_store_result r;
	const char         *bad =
	    "kind: DAG\nname: bad\ntasks:\n  - {name: a, command: "
	    "echo, depends_on: [zz]}\n";
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	ax_dag_yaml_load_buf(set, "b.yaml", bad, strlen(bad));
	cr_assert_eq(ax_dagset_validate(set), AX_EINVAL);
	cr_assert_eq(ax_dag_store_submit(st, set->dags[0], "b.yaml", &r),
	             AX_EINVAL);
	cr_assert_eq(count("SELECT count(*) FROM dags"), 0);
	ax_dagset_free(set);
}
