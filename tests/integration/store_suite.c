/*
 * store_suite.c - the fixture of the store's integration suites (see
 * store_suite.h).
 */
#include "store_suite.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "state.h"

ax_test_pg *pg;
ax_store   *st;
int64_t     dag_id, run_id;

int64_t
q64(const char *sql)
{
	int64_t v = -1;
	cr_assert_eq(ax_store_query_int64(st, sql, 0, NULL, &v), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	return v;
}

void
ax_store_suite_setup(void)
{
	fill_names();
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK, "%s",
	             ax_err_detail());
	dag_id = q64("INSERT INTO dags (name) VALUES ('d1') RETURNING id");
	q64("WITH v AS (INSERT INTO dag_versions (dag_id, version, "
	    "content_hash, yaml, definition) SELECT id, 1, repeat('a', 64), "
	    "'name: d1', '{}' FROM dags WHERE name = 'd1' RETURNING id) "
	    "SELECT id FROM v");
	run_id =
	    q64("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	        "logical_date, interval_start, interval_end) "
	        "SELECT dag_id, id, 'scheduled', ax_ts(1774749600000000), "
	        "ax_ts(1774749600000000), ax_ts(1774749600000000) "
	        "FROM dag_versions RETURNING id");
}

void
ax_store_suite_teardown(void)
{
	ax_store_close(st);
	st = NULL;
	ax_test_pg_stop(pg);
}

/* Task names "t<i>", written once before a test starts: fill_row only
 * reads them, so writer threads never write memory another one reads
 * (glibc's snprintf empties its buffer first: a concurrent reader once
 * took "" for a name). */
char tasks[512][16];

void
fill_names(void)
{
	for (int i = 0; i < 512; i++)
		snprintf(tasks[i], sizeof(tasks[i]), "t%d", i);
}

/* Fills row i of a batch: task "t<i>", shard 0, PENDING, attempt 1. */
void
fill_row(ax_store_ti_row *r, int i, const char *run_uuid)
{
	memset(r, 0, sizeof(*r));
	r->dag_run_id      = run_id;
	r->dag_id          = dag_id;
	r->task            = tasks[i];
	r->logical_time_us = LOGICAL_US;
	r->shard_total     = 1;
	r->max_tries       = 3;
	r->state           = AX_TI_PENDING;
	r->run_id          = run_uuid;
	r->attempt         = 1;
	r->due_at_us       = LOGICAL_US;
}

int64_t
one_instance(void)
{
	ax_store_ti_row r;
	fill_row(&r, 0, NULL);
	cr_assert_eq(ax_store_insert_instances(st, &r, 1, NULL), AX_OK, "%s",
	             ax_err_detail());
	return r.instance_id;
}
