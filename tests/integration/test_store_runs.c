/*
 * test_store_runs.c - the guard of new instances against their run's
 * end (ax_store_runs_guard, engine/store_runs.c) against a real
 * PostgreSQL: the instances a canceled run gets late are canceled with
 * it, and a supersede that races the transaction writing them either is
 * seen by it or waits for it and then cancels them itself.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "state.h"
#include "store.h"
#include "store_attempts.h"
#include "store_fixture.h"
#include "store_runs.h"

static ax_test_pg *pg;
static ax_store   *st;
static int64_t     dag_id, run_id;

#define LOGICAL_US 1774749600000000LL /* 2026-03-29 */

static int64_t
q64(const char *sql)
{
	return ax_test_q_int(st, "%s", sql);
}

static void
setup(void)
{
	ax_test_store_db(&pg, &st);
	dag_id = q64("INSERT INTO dags (name) VALUES ('d1') RETURNING id");
	q64("WITH v AS (INSERT INTO dag_versions (dag_id, version, "
	    "content_hash, yaml, definition) SELECT id, 1, repeat('a', 64), "
	    "'name: d1', '{}' FROM dags WHERE name = 'd1' RETURNING id) "
	    "SELECT id FROM v");
	run_id =
	    q64("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	        "logical_date, interval_start, interval_end, state) "
	        "SELECT dag_id, id, 'scheduled', ax_ts(1774749600000000), "
	        "ax_ts(1774749600000000), ax_ts(1774749600000000), 'RUNNING' "
	        "FROM dag_versions RETURNING id");
}

static void
teardown(void)
{
	ax_test_store_db_stop(pg, st);
}

TestSuite(store_runs, .init = setup, .fini = teardown, .timeout = 120);

static const char *const tasks[] = { "t0", "t1", "t2", "t3" };

/* What a plan writes: the PENDING row of task i, then the guard. */
typedef struct plan_arg {
	int    task;
	size_t canceled;
	/* the racing test: set once the guard holds its lock, then waits
	 * for go before committing */
	atomic_int locked, go;
	int        hold;
} plan_arg;

static ax_err
plan_fn(ax_store *s, void *arg)
{
	plan_arg       *a = arg;
	ax_store_ti_row r = { .dag_run_id      = run_id,
		              .dag_id          = dag_id,
		              .task            = tasks[a->task],
		              .logical_time_us = LOGICAL_US,
		              .shard_total     = 1,
		              .max_tries       = 1,
		              .state           = AX_TI_PENDING };
	ax_err          rv;

	if ((rv = ax_store_insert_instances(s, &r, 1, NULL)) != AX_OK ||
	    (rv = ax_store_runs_guard(s, &run_id, 1, &a->canceled)) != AX_OK)
		return rv;
	atomic_store(&a->locked, 1);
	for (int i = 0; a->hold && !atomic_load(&a->go) && i < 1000; i++)
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
	return AX_OK;
}

static int64_t
state_count(const char *state, const char *reason)
{
	return ax_test_q_int(st,
	                     "SELECT count(*) FROM task_instances WHERE "
	                     "dag_run_id = %lld AND state = '%s' AND reason "
	                     "IS NOT DISTINCT FROM %s",
	                     (long long) run_id, state, reason);
}

Test(store_runs, guard_cancels_the_late_instances_of_a_canceled_run)
{
	plan_arg a = { .task = 0 };

	cr_assert_eq(ax_store_tx(st, plan_fn, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(a.canceled, 0, "a running run keeps its instances");
	cr_assert_eq(state_count("PENDING", "NULL"), 1);

	/* superseded meanwhile: what its plan writes now is canceled, and
	 * so is what was PENDING */
	q64("UPDATE dag_runs SET state = 'CANCELED', reason = 'SUPERSEDED', "
	    "ended_at = now() RETURNING id");
	a.task = 1;
	cr_assert_eq(ax_store_tx(st, plan_fn, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(a.canceled, 2);
	cr_assert_eq(state_count("CANCELED", "'SUPERSEDED'"), 2);
	cr_assert_eq(state_count("PENDING", "NULL"), 0);

	/* canceled without a reason: RUN_CANCELED */
	q64("UPDATE dag_runs SET reason = NULL RETURNING id");
	a.task = 2;
	cr_assert_eq(ax_store_tx(st, plan_fn, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(state_count("CANCELED", "'RUN_CANCELED'"), 1);
	/* zeros and repeats are fine; nothing to do is one statement */
	int64_t ids[3] = { 0, run_id, run_id };
	size_t  n      = 9;
	cr_assert_eq(ax_store_runs_guard(st, ids, 3, &n), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(n, 0);
	cr_assert_eq(ax_store_runs_guard(st, NULL, 0, &n), AX_OK);
}

/*
 * The guard runs with every admission batch. While none of the batch's
 * runs is canceled it reads no instance row, however many instances of
 * the database wait: its plan once walked every PENDING instance (27 ms
 * a batch with 20,000 waiting). Counted from EXPLAIN ANALYZE of the
 * statement as the store prepared it: the loops of every plan node that
 * reads task_instances (not the update itself).
 */
Test(store_runs, guard_of_running_runs_reads_no_instance)
{
	char sql[64];

	q64("INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, shard, shard_total, state) SELECT r.id, r.dag_id, "
	    "'w' || g, r.logical_date, 0, 1, 'PENDING' FROM dag_runs r, "
	    "generate_series(1, 300) g RETURNING 0");
	cr_assert_eq(ax_store_runs_guard_prepare(st), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(
	        st,
	        "CREATE FUNCTION pg_temp.ti_loops(q text) RETURNS bigint "
	        "LANGUAGE plpgsql AS $$ DECLARE j jsonb; BEGIN "
	        "EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j; "
	        "RETURN (SELECT coalesce(sum(x::bigint), 0) FROM "
	        "jsonb_path_query(j, 'strict $.**? (@.\"Relation Name\" == "
	        "\"task_instances\" && @.\"Node Type\" != "
	        "\"ModifyTable\").\"Actual Loops\"') x); END $$",
	        0, NULL),
	    AX_OK, "%s", ax_err_detail());
	snprintf(sql, sizeof(sql),
	         "EXECUTE runs_guard_cancel(ARRAY[%lld, %lld])",
	         (long long) run_id, (long long) run_id);
	cr_assert_eq(ax_test_q_int(st, "SELECT pg_temp.ti_loops('%s')", sql),
	             0, "the guard of a running run read task_instances");
	/* the filter is not a blindfold: a canceled run is still guarded */
	q64("UPDATE dag_runs SET state = 'CANCELED', ended_at = now() "
	    "RETURNING id");
	cr_assert_gt(ax_test_q_int(st, "SELECT pg_temp.ti_loops('%s')", sql),
	             0);
	cr_assert_eq(state_count("CANCELED", "'RUN_CANCELED'"), 300);
}

/* The dependency detector's supersede: the run and its instances in one
 * transaction, as its batch writes them. */
typedef struct sup_arg {
	atomic_int done;
	ax_err     rv;
	size_t     live;
} sup_arg;

static ax_err
sup_fn(ax_store *s, void *arg)
{
	sup_arg            *a  = arg;
	ax_store_run_change rc = { .run_id = run_id,
		                   .state  = "CANCELED",
		                   .reason = "SUPERSEDED" };
	PGresult           *live;
	ax_err              rv;

	if ((rv = ax_store_deps_runs_update(s, &rc, 1)) != AX_OK ||
	    (rv = ax_store_deps_supersede(s, &run_id, 1, &live)) != AX_OK)
		return rv;
	a->live = (size_t) PQntuples(live);
	PQclear(live);
	return AX_OK;
}

static void *
sup_main(void *arg)
{
	sup_arg  *a = arg;
	ax_store *s;

	if ((a->rv = ax_store_open(ax_test_pg_dsn(pg), &s)) == AX_OK) {
		a->rv = ax_store_tx(s, sup_fn, a);
		ax_store_close(s);
	}
	atomic_store(&a->done, 1);
	return NULL;
}

static void *
plan_main(void *arg)
{
	plan_arg *a = arg;
	ax_store *s;

	if (ax_store_open(ax_test_pg_dsn(pg), &s) == AX_OK) {
		(void) ax_store_tx(s, plan_fn, a);
		ax_store_close(s);
	}
	atomic_store(&a->locked, 1);
	return NULL;
}

/*
 * The plan's transaction holds the run's lock when the supersede comes:
 * the supersede waits for it, then finds the plan's row and cancels it.
 * Without the lock the supersede's cancel does not see the row (not yet
 * committed), and the row stays PENDING under a CANCELED run: the task
 * of a superseded run would run.
 */
Test(store_runs, a_supersede_waits_for_the_plan_then_cancels_its_rows)
{
	plan_arg  p = { .task = 3, .hold = 1 };
	sup_arg   s = { 0 };
	pthread_t tp, ts;

	cr_assert_eq(pthread_create(&tp, NULL, plan_main, &p), 0);
	for (int i = 0; !atomic_load(&p.locked) && i < 500; i++)
		ax_clock_sleep_us(10 * AX_USEC_PER_MSEC);
	cr_assert(atomic_load(&p.locked), "the plan never took its lock");
	cr_assert_eq(pthread_create(&ts, NULL, sup_main, &s), 0);
	ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	cr_expect_not(atomic_load(&s.done),
	              "the supersede did not wait for the plan's lock");
	atomic_store(&p.go, 1);
	pthread_join(tp, NULL);
	pthread_join(ts, NULL);
	cr_assert_eq(s.rv, AX_OK);
	cr_assert_eq(state_count("CANCELED", "'SUPERSEDED'"), 1,
	             "the plan's row was left %s",
	             state_count("PENDING", "NULL") ? "PENDING" : "?");
	cr_assert_eq(p.canceled, 0);
}

/* The supersede came first (committed): the plan's guard sees it. */
Test(store_runs, a_plan_after_the_supersede_cancels_its_own_rows)
{
	sup_arg  s = { 0 };
	plan_arg p = { .task = 0 };

	cr_assert_eq(ax_store_tx(st, sup_fn, &s), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_tx(st, plan_fn, &p), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(p.canceled, 1);
	cr_assert_eq(state_count("CANCELED", "'SUPERSEDED'"), 1);
}
