/*
 * test_store.c - the libpq store against a real PostgreSQL: the state
 * machine refused by C and by the database (and the two tables agree),
 * SQLSTATE translation, append-only and immutable tables, batched
 * idempotent inserts (also from concurrent writers), guarded batched
 * moves, retry on serialization failure, reconnection after the
 * server restarts (idle, and in the middle of a transaction), and
 * lease-epoch fencing: a second lease taker bumps the epoch, and the
 * first store's next transaction fails with AX_EFENCED and writes
 * nothing; a takeover waits for the deposed holder's transaction in
 * flight (and gives up when it lasts); the fence travels in the DSN;
 * autocommit writes of the store helpers are fenced.
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_harness.h"
#include "state.h"
#include "store_fixture.h"
#include "store.h"
#include "store_attempts.h"
#include "store_sched.h"

static ax_test_pg *pg;
static ax_store   *st;
static int64_t     dag_id, run_id;

static const int64_t LOGICAL_US = 1774749600000000LL; /* 2026-03-29 */

static int64_t
q64(const char *sql)
{
	int64_t v = -1;
	cr_assert_eq(ax_store_query_int64(st, sql, 0, NULL, &v), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	return v;
}

static void fill_names(void);

static void
setup(void)
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

static void
teardown(void)
{
	ax_store_close(st);
	st = NULL;
	ax_test_pg_stop(pg);
}

TestSuite(store, .init = setup, .fini = teardown, .timeout = 120);

/* Task names "t<i>", written once before a test starts: fill_row only
 * reads them, so writer threads never write memory another one reads
 * (glibc's snprintf empties its buffer first: a concurrent reader once
 * took "" for a name). */
static char tasks[512][16];

static void
fill_names(void)
{
	for (int i = 0; i < 512; i++)
		snprintf(tasks[i], sizeof(tasks[i]), "t%d", i);
}

/* Fills row i of a batch: task "t<i>", shard 0, PENDING, attempt 1. */
static void
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

static int64_t
one_instance(void)
{
	ax_store_ti_row r;
	fill_row(&r, 0, NULL);
	cr_assert_eq(ax_store_insert_instances(st, &r, 1, NULL), AX_OK, "%s",
	             ax_err_detail());
	return r.instance_id;
}

Test(store, c_and_sql_state_tables_agree)
{
	PGresult *r;
	cr_assert_eq(
	    ax_store_query(
	        st,
	        "SELECT f, t, ax_ti_move_legal(f, t)::int FROM "
	        "unnest(ARRAY['PENDING','READY','RUNNING','SUCCESS',"
	        "'FAILED','TIMEOUT','CANCELED','SKIPPED','UNKNOWN']) f,"
	        " unnest(ARRAY['PENDING','READY','RUNNING','SUCCESS',"
	        "'FAILED','TIMEOUT','CANCELED','SKIPPED','UNKNOWN']) t",
	        0, NULL, &r),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(PQntuples(r), AX_TI_STATE_COUNT_ * AX_TI_STATE_COUNT_);
	for (int i = 0; i < PQntuples(r); i++) {
		ax_ti_state f, t;
		cr_assert_eq(ax_state_parse(PQgetvalue(r, i, 0), &f), AX_OK);
		cr_assert_eq(ax_state_parse(PQgetvalue(r, i, 1), &t), AX_OK);
		cr_expect_eq(atoi(PQgetvalue(r, i, 2)), ax_state_legal(f, t),
		             "%s -> %s", PQgetvalue(r, i, 0),
		             PQgetvalue(r, i, 1));
	}
	PQclear(r);
}

Test(store, illegal_move_refused_by_c_before_writing)
{
	int64_t          id   = one_instance();
	ax_store_ti_move m[2] = {
		{ .instance_id = id,
		  .from        = AX_TI_PENDING,
		  .to          = AX_TI_READY },
		{ .instance_id = id + 1000,
		  .from        = AX_TI_PENDING,
		  .to          = AX_TI_SUCCESS },
	};
	size_t applied = 99;
	cr_assert_eq(ax_store_move_instances(st, m, 2, &applied), AX_ESTATE);
	cr_assert(strstr(ax_err_detail(),
	                 "PENDING -> SUCCESS is not a legal move") != NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(applied, 0);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances "
	                 "WHERE state = 'PENDING'"),
	             1, "the legal move of the batch was not written either");
}

Test(store, illegal_move_refused_by_sql_trigger)
{
	char        id[24];
	const char *p[1] = { id };
	snprintf(id, sizeof(id), "%lld", (long long) one_instance());
	cr_assert_eq(
	    ax_store_exec(st,
	                  "UPDATE task_instances SET state = 'SUCCESS' "
	                  "WHERE id = $1",
	                  1, p),
	    AX_ESTATE);
	cr_assert(strstr(ax_err_detail(),
	                 "PENDING -> SUCCESS is not a legal move") != NULL,
	          "%s", ax_err_detail());
	/* A legal raw move passes; an update not touching state passes. */
	cr_assert_eq(ax_store_exec(st,
	                           "UPDATE task_instances SET state = 'READY' "
	                           "WHERE id = $1",
	                           1, p),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(
	        st, "UPDATE task_instances SET priority = 5 WHERE id = $1", 1,
	        p),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_exec(st,
	                           "UPDATE task_instances SET state = 'BOGUS' "
	                           "WHERE id = $1",
	                           1, p),
	             AX_ESTATE, "unknown states are not legal targets");
}

/*
 * The SQL guard against the C table, pair by pair: from every state to
 * every state, a plain write passes exactly when ax_state_legal allows the
 * move, and a write that records a new start passes exactly when the move
 * is legal or goes through RUNNING. The guard's PL/pgSQL function runs
 * only for a refused move (its test sits in the trigger's WHEN clause):
 * before migration 0013 EXPLAIN ANALYZE showed a call per moved row.
 */
Test(store, sql_guard_matches_c_and_runs_only_to_refuse)
{
	char        id[24], from[16], to[16];
	const char *p[3] = { id, from, to };
	PGresult   *r    = NULL;
	int64_t     iid  = one_instance();

	snprintf(id, sizeof(id), "%lld", (long long) iid);
	for (int f = 0; f < AX_TI_STATE_COUNT_; f++)
		for (int t = 0; t < AX_TI_STATE_COUNT_; t++)
			for (int start = 0; start < 2; start++) {
				snprintf(from, sizeof(from), "%s",
				         ax_state_name((ax_ti_state) f));
				snprintf(to, sizeof(to), "%s",
				         ax_state_name((ax_ti_state) t));
				/* the row put in state f, no guard */
				cr_assert_eq(
				    ax_store_exec(
				        st,
				        "SET session_replication_role "
				        "= replica",
				        0, NULL),
				    AX_OK, "%s", ax_err_detail());
				cr_assert_eq(
				    ax_store_exec(
				        st,
				        "UPDATE task_instances SET "
				        "state = $2, started_at = NULL "
				        "WHERE id = $1 AND $3 <> ''",
				        3, p),
				    AX_OK, "%s", ax_err_detail());
				cr_assert_eq(
				    ax_store_exec(
				        st, "RESET session_replication_role",
				        0, NULL),
				    AX_OK, "%s", ax_err_detail());
				int legal = ax_state_legal((ax_ti_state) f,
				                           (ax_ti_state) t);
				int via   = ax_state_legal((ax_ti_state) f,
				                           AX_TI_RUNNING) &&
				    ax_state_legal(AX_TI_RUNNING,
				                   (ax_ti_state) t);
				ax_err rv = ax_store_exec(
				    st,
				    start
				        ? "UPDATE task_instances SET state "
				          "= $3, started_at = now() WHERE id "
				          "= $1 AND $2 <> ''"
				        : "UPDATE task_instances SET state "
				          "= $3 WHERE id = $1 AND $2 <> ''",
				    3, p);
				int want = f == t || legal || (start && via);
				cr_expect_eq(rv, want ? AX_OK : AX_ESTATE,
				             "%s -> %s%s: %s", from, to,
				             start ? " with a start" : "",
				             ax_err_detail());
				if (rv != AX_OK)
					cr_expect(
					    strstr(ax_err_detail(),
					           "is not a legal move") !=
					        NULL,
					    "%s", ax_err_detail());
			}
	/* a legal move of many rows: the guard's function is not called */
	cr_assert_eq(ax_store_exec(st,
	                           "SET session_replication_role = replica", 0,
	                           NULL),
	             AX_OK);
	cr_assert_eq(ax_store_exec(st,
	                           "UPDATE task_instances SET state = "
	                           "'PENDING'",
	                           0, NULL),
	             AX_OK);
	cr_assert_eq(
	    ax_store_exec(st, "RESET session_replication_role", 0, NULL),
	    AX_OK);
	cr_assert_eq(ax_store_query(st,
	                            "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE "
	                            "task_instances SET state = 'READY'",
	                            0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_not_null(strstr(PQgetvalue(r, 0, 0), "\"Actual Rows\""),
	                   "%s", PQgetvalue(r, 0, 0));
	cr_assert_null(
	    strstr(PQgetvalue(r, 0, 0), "task_instances_state_guard"),
	    "the guard function ran for a legal move: %s",
	    PQgetvalue(r, 0, 0));
	PQclear(r);
	/* nor is a function of the database in the WHEN clause: the
	 * executor prepares that clause for each statement, and inlining a
	 * SQL function there parses its body anew each time (ax_ti_move_ok
	 * and ax_ti_move_legal did so before migration 0021) */
	cr_assert_eq(ax_store_query(st,
	                            "SELECT coalesce(string_agg(m[1]::oid::"
	                            "regproc::text, ', '), '') FROM "
	                            "pg_trigger, regexp_matches(tgqual::text, "
	                            "':funcid (\\d+)', 'g') m WHERE tgname = "
	                            "'task_instances_state_guard' AND "
	                            "m[1]::oid >= 16384",
	                            0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_expect_str_empty(PQgetvalue(r, 0, 0),
	                    "the guard's WHEN clause calls %s",
	                    PQgetvalue(r, 0, 0));
	PQclear(r);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE state = "
	                 "'READY'"),
	             q64("SELECT count(*) FROM task_instances"));
}

/* A later migration that changes ax_ti_move_legal calls
 * ax_ti_guard_install() again: it replaces the trigger, never adds one. */
Test(store, guard_install_again_replaces_the_same_trigger)
{
	const char *def = "SELECT string_agg(pg_get_triggerdef(oid), ' | ') "
	                  "FROM pg_trigger WHERE tgrelid = "
	                  "'task_instances'::regclass AND tgname = "
	                  "'task_instances_state_guard'";
	PGresult   *a = NULL, *b = NULL;

	cr_assert_eq(ax_store_query(st, def, 0, NULL, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(st, "SELECT ax_ti_guard_install()", 0, NULL), AX_OK,
	    "%s", ax_err_detail());
	cr_assert_eq(ax_store_query(st, def, 0, NULL, &b), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_str_not_empty(PQgetvalue(a, 0, 0));
	cr_expect_str_eq(PQgetvalue(b, 0, 0), PQgetvalue(a, 0, 0));
	PQclear(a);
	PQclear(b);
}

/* A start and its end in one write: READY -> SUCCESS through RUNNING,
 * only with started_at recorded; never as a plain move. */
Test(store, move_through_running_records_the_start)
{
	char        id[24];
	const char *p[1] = { id };
	int64_t     iid  = one_instance();
	snprintf(id, sizeof(id), "%lld", (long long) iid);
	cr_assert_eq(ax_store_exec(st,
	                           "UPDATE task_instances SET state = 'READY' "
	                           "WHERE id = $1",
	                           1, p),
	             AX_OK, "%s", ax_err_detail());
	/* C: a plain READY -> SUCCESS is refused; PENDING through RUNNING
	 * too (PENDING -> RUNNING is not a move) */
	ax_store_ti_move m = { .instance_id = iid,
		               .from        = AX_TI_READY,
		               .to          = AX_TI_SUCCESS };
	cr_assert_eq(ax_store_move_instances(st, &m, 1, NULL), AX_ESTATE);
	m = (ax_store_ti_move) { .instance_id = iid,
		                 .from        = AX_TI_PENDING,
		                 .to          = AX_TI_SUCCESS,
		                 .via_running = 1 };
	cr_assert_eq(ax_store_move_instances(st, &m, 1, NULL), AX_ESTATE);
	/* SQL: skipping RUNNING without recording the start is refused */
	cr_assert_eq(ax_store_exec(st,
	                           "UPDATE task_instances SET state = "
	                           "'SUCCESS' WHERE id = $1",
	                           1, p),
	             AX_ESTATE);
	cr_assert(strstr(ax_err_detail(),
	                 "READY -> SUCCESS is not a legal move") != NULL,
	          "%s", ax_err_detail());
	m              = (ax_store_ti_move) { .instance_id = iid,
		                              .from        = AX_TI_READY,
		                              .to          = AX_TI_SUCCESS,
		                              .via_running = 1 };
	size_t applied = 0;
	cr_assert_eq(ax_store_move_instances(st, &m, 1, &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, 1);
	char q[160];
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances WHERE id = %lld AND "
	         "state = 'SUCCESS' AND started_at IS NOT NULL AND ended_at "
	         "IS NOT NULL",
	         (long long) iid);
	cr_assert_eq(q64(q), 1);
}

Test(store, guarded_moves_apply_only_from_expected_state)
{
	ax_store_ti_row rows[3];
	for (int i = 0; i < 3; i++)
		fill_row(&rows[i], i, NULL);
	cr_assert_eq(ax_store_insert_instances(st, rows, 3, NULL), AX_OK);
	ax_store_ti_move m[3] = {
		{ rows[0].instance_id, AX_TI_PENDING, AX_TI_READY, "ADMIT", 0,
		  0 },
		{ rows[1].instance_id, AX_TI_READY, AX_TI_RUNNING, NULL, 0,
		  0 },
		{ rows[2].instance_id, AX_TI_PENDING, AX_TI_SKIPPED, NULL, 0,
		  0 },
	};
	size_t applied = 0;
	cr_assert_eq(ax_store_move_instances(st, m, 3, &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, 2);
	cr_assert_eq(m[0].applied, 1);
	cr_assert_eq(m[1].applied, 0, "row 1 was PENDING, not READY");
	cr_assert_eq(m[2].applied, 1);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE state = "
	                 "'READY' AND reason = 'ADMIT' AND ready_at IS NOT "
	                 "NULL"),
	             1);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE state = "
	                 "'SKIPPED' AND ended_at IS NOT NULL"),
	             1);
	/* Same batch again: nothing is in the expected states any more. */
	cr_assert_eq(ax_store_move_instances(st, m, 3, &applied), AX_OK);
	cr_assert_eq(applied, 0);
	/* A duplicate id in one batch is refused. */
	m[1] = m[0];
	cr_assert_eq(ax_store_move_instances(st, m, 2, &applied), AX_EINVAL);
}

Test(store, reasons_change_only_on_waiting_instances)
{
	ax_store_ti_row rows[4];
	for (int i = 0; i < 4; i++) {
		fill_row(&rows[i], i, NULL);
		rows[i].reason = "WAIT_RESOURCE";
	}
	cr_assert_eq(ax_store_insert_instances(st, rows, 4, NULL), AX_OK);
	ax_store_ti_move m[2] = {
		{ rows[1].instance_id, AX_TI_PENDING, AX_TI_READY, NULL, 0,
		  0 },
		{ rows[2].instance_id, AX_TI_PENDING, AX_TI_SKIPPED, "X", 0,
		  0 },
	};
	cr_assert_eq(ax_store_move_instances(st, m, 2, NULL), AX_OK);
	ax_store_ti_reason r[5] = {
		{ "d1", "t0", LOGICAL_US, 0, "DAG_PAUSED", NULL, 0 },
		{ "d1", "t1", LOGICAL_US, 0, "DAG_PAUSED", NULL, 0 },
		{ "d1", "t2", LOGICAL_US, 0, "DAG_PAUSED", NULL, 0 },
		{ "d1", "t3", LOGICAL_US, 0, "DAG_PAUSED", "OTHER", 0 },
		{ "d1", "t9", LOGICAL_US, 0, "DAG_PAUSED", NULL, 0 },
	};
	size_t applied = 0;
	cr_assert_eq(ax_store_set_reasons(st, r, 5, &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, 2);
	cr_assert_eq(r[0].applied, 1, "PENDING row");
	cr_assert_eq(r[1].applied, 1, "READY row");
	cr_assert_eq(r[2].applied, 0, "a finished row keeps its reason");
	cr_assert_eq(r[3].applied, 0, "only_if did not match");
	cr_assert_eq(r[4].applied, 0, "no such row");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE reason = "
	                 "'DAG_PAUSED' AND task IN ('t0', 't1')"),
	             2);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE task = "
	                 "'t2' AND reason = 'X'"),
	             1);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE task = "
	                 "'t3' AND reason = 'WAIT_RESOURCE'"),
	             1);
	/* back: only where it is still DAG_PAUSED; NULL clears */
	ax_store_ti_reason back[2] = {
		{ "d1", "t0", LOGICAL_US, 0, "WAIT_RESOURCE", "DAG_PAUSED",
		  0 },
		{ "d1", "t1", LOGICAL_US, 0, NULL, "DAG_PAUSED", 0 },
	};
	cr_assert_eq(ax_store_set_reasons(st, back, 2, &applied), AX_OK);
	cr_assert_eq(applied, 2);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE task = "
	                 "'t0' AND reason = 'WAIT_RESOURCE'"),
	             1);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE task = "
	                 "'t1' AND reason IS NULL AND state = 'READY'"),
	             1);
	cr_assert_eq(ax_store_set_reasons(st, back, 2, &applied), AX_OK);
	cr_assert_eq(applied, 0, "nothing is DAG_PAUSED any more");
	back[0].task = "";
	cr_assert_eq(ax_store_set_reasons(st, back, 2, &applied), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "reason row 0: empty DAG or task") !=
	              NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(ax_store_set_reasons(st, back, 0, &applied), AX_OK);
}

Test(store, batched_insert_is_idempotent)
{
	enum { N = 200 };
	static ax_store_ti_row rows[N];
	static char            ids[N][37], ids2[N][37];
	static int64_t         first[N];
	size_t                 inserted = 0;

	for (int i = 0; i < N; i++) {
		snprintf(ids[i], 37, "00000000-0000-4000-8000-%012d", i);
		snprintf(ids2[i], 37, "00000000-0000-4000-9000-%012d", i);
		fill_row(&rows[i], i, ids[i]);
	}
	cr_assert_eq(ax_store_insert_instances(st, rows, N, &inserted), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(inserted, N);
	for (int i = 0; i < N; i++) {
		cr_assert(rows[i].created && rows[i].attempt_created);
		cr_assert_str_eq(rows[i].attempt_run_id, ids[i]);
		first[i] = rows[i].instance_id;
	}
	/* Again, with fresh run_ids: nothing new, the stored ids come back. */
	for (int i = 0; i < N; i++)
		fill_row(&rows[i], i, ids2[i]);
	cr_assert_eq(ax_store_insert_instances(st, rows, N, &inserted), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(inserted, 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(rows[i].instance_id, first[i]);
		cr_assert(!rows[i].created && !rows[i].attempt_created);
		cr_assert_str_eq(rows[i].attempt_run_id, ids[i]);
	}
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), N);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), N);
	/* due_at round-trips exactly through ax_ts / ax_us. */
	cr_assert_eq(q64("SELECT count(*) FROM attempts "
	                 "WHERE ax_us(due_at) = 1774749600000000"),
	             N);
}

/* Fills rows[0..n) with tasks 0..n-1 and stores the even ones only,
 * copied into even[0..n/2) with their ids. */
static void
store_even(ax_store_ti_row *rows, int n, ax_store_ti_row *even)
{
	for (int i = 0; i < n; i++)
		fill_row(&rows[i], i, NULL);
	for (int i = 0; i < n / 2; i++)
		even[i] = rows[2 * i];
	cr_assert_eq(ax_store_insert_instances(st, even, (size_t) n / 2, NULL),
	             AX_OK, "%s", ax_err_detail());
}

Test(store, find_instances_fills_ids_of_stored_rows_only)
{
	enum { N = 6 };
	ax_store_ti_row rows[N], look[N];
	size_t          found = 99;

	ax_store_ti_row even[N / 2];
	store_even(rows, N, even);
	for (int i = 0; i < N; i++) {
		look[i]             = rows[i];
		look[i].instance_id = 12345; /* overwritten, found or not */
	}
	cr_assert_eq(ax_store_find_instances(st, look, N, &found), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(found, N / 2);
	for (int i = 0; i < N; i++)
		if (i % 2 == 0)
			cr_assert_eq(look[i].instance_id,
			             even[i / 2].instance_id, "row %d", i);
		else
			cr_assert_eq(look[i].instance_id, 0, "row %d", i);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), N / 2,
	             "a lookup writes nothing");
	cr_assert_eq(ax_store_find_instances(st, look, 0, &found), AX_OK);
	cr_assert_eq(found, 0);
	cr_assert_eq(ax_store_find_instances(st, look, 10001, &found),
	             AX_EINVAL);
}

/* One admission row: by key (task i of the fixture's run) or by id. */
static ax_store_admit_row
admit_of(int i, int64_t id)
{
	return (ax_store_admit_row) { .instance_id     = id,
		                      .dag_id          = dag_id,
		                      .task            = tasks[i],
		                      .logical_time_us = LOGICAL_US,
		                      .shard           = 0,
		                      .due_at_us       = LOGICAL_US,
		                      .admitted_at_us  = LOGICAL_US };
}

/* The admission finds its instances by id or by their key in the one
 * locking statement; an instance named twice is admitted once. */
Test(store, admit_finds_instances_by_id_or_key_and_admits_each_once)
{
	enum { N = 6 };
	ax_store_ti_row rows[N];

	ax_store_ti_row even[N / 2];
	store_even(rows, N, even);
	/* t0 by key twice, t2 by id, t1 by key (not stored), t4 by key, an
	 * id that does not exist */
	ax_store_admit_row ad[6] = {
		admit_of(0, 0), admit_of(2, even[1].instance_id),
		admit_of(1, 0), admit_of(0, 0),
		admit_of(4, 0), admit_of(5, 987654321)
	};
	cr_assert_eq(ax_store_admit(st, ad, 6), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ad[0].action, AX_ADMIT_NEW);
	cr_assert_eq(ad[0].instance_id, even[0].instance_id);
	cr_assert_eq(ad[0].attempt, 1);
	cr_assert_eq(ad[3].action, AX_ADMIT_REPLAY, "the repeat replays");
	cr_assert_eq(ad[3].instance_id, even[0].instance_id);
	cr_assert_str_eq(ad[3].run_id, ad[0].run_id);
	cr_assert_eq(ad[1].action, AX_ADMIT_NEW);
	cr_assert_eq(ad[2].action, AX_ADMIT_MISSING);
	cr_assert_eq(ad[2].instance_id, 0);
	cr_assert_eq(ad[4].action, AX_ADMIT_NEW);
	cr_assert_eq(ad[4].instance_id, even[2].instance_id);
	cr_assert_eq(ad[5].action, AX_ADMIT_MISSING);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 3);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE state = "
	                 "'READY' AND try_number = 1"),
	             3);
	/* again: the stored attempts are replayed, nothing is written */
	char rid0[37];
	memcpy(rid0, ad[0].run_id, sizeof(rid0));
	ax_store_admit_row again[2] = { admit_of(0, 0), admit_of(4, 0) };
	cr_assert_eq(ax_store_admit(st, again, 2), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(again[0].action, AX_ADMIT_REPLAY);
	cr_assert_str_eq(again[0].run_id, rid0);
	cr_assert_eq(again[1].action, AX_ADMIT_REPLAY);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 3);
	cr_assert_eq(ax_store_admit(st, ad, 0), AX_OK);
	cr_assert_eq(ax_store_admit(st, ad, 10001), AX_EINVAL);
}

Test(store, batched_insert_rejects_bad_rows)
{
	ax_store_ti_row r[2];
	fill_row(&r[0], 0, NULL);
	fill_row(&r[1], 1, NULL);
	r[1].shard = 1; /* shard_total is 1 */
	cr_assert_eq(ax_store_insert_instances(st, r, 2, NULL), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "row 1") != NULL, "%s",
	          ax_err_detail());
	fill_row(&r[1], 1, NULL);
	r[1].state = AX_TI_RUNNING;
	cr_assert_eq(ax_store_insert_instances(st, r, 2, NULL), AX_EINVAL);
	fill_row(&r[1], 1, NULL);
	r[1].channel = "P9";
	cr_assert_eq(ax_store_insert_instances(st, r, 2, NULL), AX_EINVAL,
	             "CHECK violation -> AX_EINVAL: %s", ax_err_detail());
	fill_row(&r[1], 1, NULL);
	r[1].dag_run_id = 424242;
	cr_assert_eq(ax_store_insert_instances(st, r, 2, NULL), AX_ENOENT,
	             "%s", ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 0,
	             "a failed batch writes nothing");
}

struct writer {
	int    index;
	ax_err rv;
	char   detail[256];
	char   run_ids[100][37]; /* the run_id each key ended up with */
};

static void *
writer_thread(void *arg)
{
	struct writer  *w = arg;
	ax_store       *s;
	ax_store_ti_row rows[100];
	char            mine[100][37];

	if ((w->rv = ax_store_open(ax_test_pg_dsn(pg), &s)) != AX_OK)
		return NULL;
	for (int i = 0; i < 100; i++) {
		snprintf(mine[i], 37, "00000000-0000-4000-8%03d-%012d",
		         w->index, i);
		fill_row(&rows[i], i, mine[i]);
	}
	w->rv = ax_store_insert_instances(s, rows, 100, NULL);
	snprintf(w->detail, sizeof(w->detail), "%s", ax_err_detail());
	for (int i = 0; i < 100; i++)
		memcpy(w->run_ids[i], rows[i].attempt_run_id, 37);
	ax_store_close(s);
	return NULL;
}

Test(store, unique_keys_hold_under_concurrent_writers)
{
	enum { W = 6 };
	static struct writer w[W];
	pthread_t            th[W];

	for (int i = 0; i < W; i++) {
		w[i].index = i;
		pthread_create(&th[i], NULL, writer_thread, &w[i]);
	}
	for (int i = 0; i < W; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < W; i++)
		cr_assert_eq(w[i].rv, AX_OK, "writer %d: %s", i, w[i].detail);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 100);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 100);
	/* Every writer was told the same, stored run_id for each key. */
	for (int k = 0; k < 100; k++)
		for (int i = 1; i < W; i++)
			cr_assert_str_eq(w[i].run_ids[k], w[0].run_ids[k],
			                 "key %d", k);
}

struct ser_arg {
	ax_store *other;
	int       calls;
};

/* Reads a counter, lets another session change it on the first call,
 * then writes it: SERIALIZABLE must fail the first try with 40001. */
static ax_err
ser_body(ax_store *s, void *argp)
{
	struct ser_arg *a = argp;
	int64_t         v;
	ax_err          rv;

	a->calls++;
	if ((rv = ax_store_query_int64(s, "SELECT v FROM t_counter", 0, NULL,
	                               &v)) != AX_OK)
		return rv;
	if (a->calls == 1 &&
	    (rv = ax_store_exec(a->other, "UPDATE t_counter SET v = v + 1", 0,
	                        NULL)) != AX_OK)
		return rv;
	return ax_store_exec(s, "UPDATE t_counter SET v = v + 1", 0, NULL);
}

Test(store, serialization_failure_is_retried)
{
	struct ser_arg a = { 0 };
	cr_assert_eq(
	    ax_store_exec(st, "CREATE TABLE t_counter (v int)", 0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(st, "INSERT INTO t_counter VALUES (0)", 0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &a.other), AX_OK);
	cr_assert_eq(ax_store_tx_serializable(st, ser_body, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(a.calls, 2);
	cr_assert_eq(ax_store_retries(st), 1);
	cr_assert_eq(q64("SELECT v FROM t_counter"), 2);
	ax_store_close(a.other);
}

Test(store, sqlstates_translate)
{
	cr_assert_eq(ax_store_exec(st, "INSERT INTO dags (name) VALUES ('d1')",
	                           0, NULL),
	             AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "23505") != NULL);
	cr_assert_eq(ax_store_exec(st, "SELECT * FROM no_such_table", 0, NULL),
	             AX_EDB);
	cr_assert(strstr(ax_err_detail(), "no_such_table") != NULL);
	cr_assert_eq(ax_store_sqlstate_err("40001"), AX_ERETRY);
	cr_assert_eq(ax_store_sqlstate_err("40P01"), AX_ERETRY);
	cr_assert_eq(ax_store_sqlstate_err("P0001"), AX_ESTATE);
	cr_assert_eq(ax_store_sqlstate_err("08006"), AX_EDBCONN);
	cr_assert_eq(ax_store_sqlstate_err("23503"), AX_ENOENT);
	cr_assert_eq(ax_store_sqlstate_err("22P02"), AX_EINVAL);
	cr_assert_eq(ax_store_sqlstate_err(NULL), AX_EDB);
	cr_assert_eq(ax_store_sqlstate_err("XX000"), AX_EDB);
}

Test(store, event_log_is_append_only_and_versions_immutable)
{
	cr_assert_eq(
	    ax_store_exec(st,
	                  "INSERT INTO event_log (event_id, type) VALUES "
	                  "(gen_random_uuid(), 'test')",
	                  0, NULL),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_exec(st, "UPDATE event_log SET type = 'x'", 0, NULL),
	    AX_EPERM);
	cr_assert(strstr(ax_err_detail(), "append-only") != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(ax_store_exec(st, "DELETE FROM event_log", 0, NULL),
	             AX_EPERM);
	cr_assert_eq(ax_store_exec(st, "TRUNCATE event_log", 0, NULL),
	             AX_EPERM);
	cr_assert_eq(
	    ax_store_exec(st, "UPDATE dag_versions SET yaml = 'x'", 0, NULL),
	    AX_EPERM);
	cr_assert(strstr(ax_err_detail(), "immutable") != NULL);
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 1);
}

Test(store, prepared_statements_and_errors)
{
	PGresult   *r;
	const char *p[1] = { "41" };
	cr_assert_eq(ax_store_prepare(st, "plus1", "SELECT $1::int + 1", 1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_prepare(st, "plus1", "SELECT 1", 0), AX_EEXIST);
	cr_assert_eq(ax_store_prepare(st, "bad", "SELEC 1", 0), AX_EDB);
	cr_assert_eq(ax_store_query_prepared(st, "bad", 0, NULL, &r),
	             AX_ENOENT);
	cr_assert_null(r);
	cr_assert_eq(ax_store_query_prepared(st, "plus1", 1, p, &r), AX_OK);
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "42");
	PQclear(r);
}

/* The cached plan of `name` on st's connection, as EXPLAIN prints it. */
static char *
cached_plan(const char *name, const char *arg)
{
	char      sql[128];
	PGresult *r;
	size_t    len = 0;
	char     *out = calloc(1, 4096);
	snprintf(sql, sizeof(sql), "EXPLAIN EXECUTE %s('%s')", name, arg);
	cr_assert_eq(ax_store_query(st, sql, 0, NULL, &r), AX_OK, "%s",
	             ax_err_detail());
	for (int i = 0; i < PQntuples(r) && len < 4000; i++)
		len += (size_t) snprintf(out + len, 4096 - len, "%s\n",
		                         PQgetvalue(r, i, 0));
	PQclear(r);
	return out;
}

/* A generic plan made while a table was empty must not stay once the
 * table has grown: the batch lookups would scan the whole table at every
 * call (quadratic in the table's growth). */
Test(store, cached_plans_follow_table_growth)
{
	const char *sql    = "SELECT a.id FROM unnest($1::uuid[]) AS u(rid) "
	                     "JOIN attempts a ON a.run_id = u.rid";
	const char *arg[1] = { "{00000000-0000-7000-8000-000000000001}" };
	PGresult   *r;
	cr_assert_eq(ax_store_prepare(st, "lookup", sql, 1), AX_OK, "%s",
	             ax_err_detail());
	for (int i = 0; i < 8; i++) { /* the generic plan: table empty */
		cr_assert_eq(ax_store_query_prepared(st, "lookup", 1, arg, &r),
		             AX_OK, "%s", ax_err_detail());
		PQclear(r);
	}
	char *plan = cached_plan("lookup", arg[0]);
	cr_assert(strstr(plan, "Seq Scan on attempts") != NULL,
	          "expected the empty-table plan to scan:\n%s", plan);
	free(plan);
	int64_t iid = one_instance();
	char    ins[256];
	snprintf(
	    ins, sizeof(ins),
	    "WITH i AS (INSERT INTO attempts (run_id, instance_id, number, "
	    "due_at) SELECT gen_random_uuid(), %lld, g, now() FROM "
	    "generate_series(1, 50000) g RETURNING 1) SELECT count(*) "
	    "FROM i",
	    (long long) iid);
	cr_assert_eq(q64(ins), 50000);
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(ax_store_query_prepared(st, "lookup", 1, arg, &r),
		             AX_OK, "%s", ax_err_detail());
		PQclear(r);
	}
	plan = cached_plan("lookup", arg[0]);
	cr_assert(strstr(plan, "Seq Scan on attempts") == NULL,
	          "the plan still scans attempts after it grew to 50,000 "
	          "rows:\n%s",
	          plan);
	free(plan);
}

Test(store, connect_error_masks_password)
{
	ax_store *s = (ax_store *) 1;
	cr_assert_eq(
	    ax_store_open("postgresql://ax:hunter2@/ax?host=/nowhere", &s),
	    AX_EDBCONN);
	cr_assert_null(s);
	cr_assert(strstr(ax_err_detail(), "hunter2") == NULL, "%s",
	          ax_err_detail());
	cr_assert(strstr(ax_err_detail(), "/nowhere") != NULL, "%s",
	          ax_err_detail());
	char buf[128];
	ax_store_dsn_redact("host=h password='a b' user=u", buf, sizeof(buf));
	cr_assert_str_eq(buf, "user=u password=*** host=h");
}

static void
restart_server(void)
{
	ax_pg_embed *e = ax_test_pg_embed(pg);
	cr_assert_eq(ax_pg_embed_down(e), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
}

Test(store, reconnects_after_server_restart)
{
	PGresult   *r;
	const char *p[1] = { "1" };
	cr_assert_eq(ax_store_prepare(st, "plus1", "SELECT $1::int + 1", 1),
	             AX_OK);
	restart_server();
	cr_assert_eq(ax_store_query_prepared(st, "plus1", 1, p, &r), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "2", "re-prepared");
	PQclear(r);
	cr_assert_eq(ax_store_reconnects(st), 1);
	cr_assert_eq(q64("SELECT count(*) FROM dags"), 1);
}

struct restart_arg {
	int calls;
};

static ax_err
restart_body(ax_store *s, void *argp)
{
	struct restart_arg *a = argp;
	ax_err              rv;
	if ((rv = ax_store_exec(s,
	                        "INSERT INTO pools (name, slots) VALUES "
	                        "('p1', 4)",
	                        0, NULL)) != AX_OK)
		return rv;
	if (++a->calls == 1)
		restart_server(); /* the open transaction dies with it */
	return ax_store_exec(s, "UPDATE pools SET slots = 5", 0, NULL);
}

Test(store, transaction_survives_server_restart)
{
	struct restart_arg a = { 0 };
	cr_assert_eq(ax_store_tx(st, restart_body, &a), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(a.calls, 2);
	cr_assert_eq(q64("SELECT slots FROM pools WHERE name = 'p1'"), 5);
	cr_assert_eq(q64("SELECT count(*) FROM pools"), 1);
}

/* ---------------------------------------------------------------------- */
/* fencing (store.h, "Fencing") */

#define TTL_US (60 * AX_USEC_PER_SEC)

/* What the fence hook saw (one process per test). */
static int     hook_calls;
static int64_t hook_fence, hook_epoch;

static void
hook(void *arg, int64_t fence, int64_t epoch)
{
	(void) arg;
	hook_calls++;
	hook_fence = fence;
	hook_epoch = epoch;
}

/* Takes the lease for holder (after expiring whoever holds it). */
static int64_t
take(const char *holder)
{
	int64_t epoch = 0;
	q64("UPDATE scheduler_lease SET expires_at = now() - interval "
	    "'1 second' RETURNING 1");
	cr_assert_eq(ax_store_sched_lease_take(st, holder, TTL_US, &epoch),
	             AX_OK, "%s", ax_err_detail());
	return epoch;
}

/* A store opened with the DSN fenced at epoch. */
static ax_store *
open_fenced(int64_t epoch)
{
	char     *dsn = NULL;
	ax_store *s   = NULL;
	cr_assert_eq(ax_store_dsn_fenced(ax_test_pg_dsn(pg), epoch, &dsn),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_open(dsn, &s), AX_OK, "%s", ax_err_detail());
	free(dsn);
	cr_assert_eq(ax_store_fence(s), epoch);
	return s;
}

/* Transaction body: inserts the DAG named arg. */
static ax_err
insert_dag(ax_store *s, void *arg)
{
	const char *p[1] = { arg };
	return ax_store_exec(s, "INSERT INTO dags (name) VALUES ($1)", 1, p);
}

static int64_t
dags_named(const char *name)
{
	char sql[160];
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM dags WHERE name = '%s'", name);
	return q64(sql);
}

Test(store, fence_takeover_fences_the_deposed_store_which_writes_nothing)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	char      want[128];

	ax_store_set_fence_hook(hook, NULL);
	cr_assert_eq(ax_store_tx(a, insert_dag, "before"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(dags_named("before"), 1);

	int64_t e2 = take("axd B");
	cr_assert_eq(e2, e1 + 1);
	cr_assert_eq(ax_store_tx(a, insert_dag, "after"), AX_EFENCED);
	snprintf(want, sizeof(want),
	         "writes for scheduler lease epoch %lld, but the lease is at "
	         "epoch %lld (holder 'axd B')",
	         (long long) e1, (long long) e2);
	cr_assert(strstr(ax_err_detail(), want) != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(dags_named("after"), 0, "the fenced transaction wrote");
	cr_assert_eq(hook_calls, 1);
	cr_assert_eq(hook_fence, e1);
	cr_assert_eq(hook_epoch, e2);

	/* fenced for good, whatever the kind of transaction; the hook is
	 * told once */
	cr_assert_eq(ax_store_tx_relaxed(a, insert_dag, "after"), AX_EFENCED);
	cr_assert_eq(ax_store_tx_serializable(a, insert_dag, "after"),
	             AX_EFENCED);
	cr_assert_eq(ax_store_begin(a), AX_EFENCED);
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(ax_store_write(a, NULL,
	                            "INSERT INTO dags (name) VALUES ('after')",
	                            0, NULL, NULL),
	             AX_EFENCED);
	cr_assert_eq(dags_named("after"), 0);
	cr_assert_eq(hook_calls, 1);
	cr_assert_eq(ax_store_retries(a), 0, "a fence is not retried");

	/* reads still work (a deposed axd may look, not write) */
	int64_t one = 0;
	cr_assert_eq(ax_store_query_int64(a, "SELECT 1", 0, NULL, &one),
	             AX_OK);
	/* the new holder's store writes */
	ax_store *b = open_fenced(e2);
	cr_assert_eq(ax_store_tx(b, insert_dag, "by B"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(dags_named("by B"), 1);
	ax_store_close(b);
	ax_store_close(a);
}

Test(store, fence_a_store_without_fence_is_not_checked)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);

	cr_assert_eq(ax_store_set_fence(a, -1), AX_EINVAL);
	take("axd B");
	cr_assert_eq(ax_store_tx(a, insert_dag, "x"), AX_EFENCED);
	cr_assert_eq(ax_store_set_fence(a, 0), AX_OK);
	cr_assert_eq(ax_store_fence(a), 0);
	cr_assert_eq(ax_store_tx(a, insert_dag, "x"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_tx(st, insert_dag, "y"), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(dags_named("x") + dags_named("y"), 2);
	ax_store_close(a);
}

Test(store, fence_autocommit_writes_of_the_helpers_are_fenced)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	int64_t   sid =
	    q64("WITH d AS (INSERT INTO dags (name) VALUES ('d') RETURNING "
	        "id) INSERT INTO schedules (dag_id, expression) SELECT id, "
	        "'0 0 0 * * *' FROM d RETURNING id");
	int64_t next = 1774749600000000LL;

	cr_assert_eq(ax_store_sched_set_next(a, &sid, &next, 1), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT ax_us(next_fire_at) FROM schedules"), next);
	take("axd B");
	next += AX_USEC_PER_SEC;
	cr_assert_eq(ax_store_sched_set_next(a, &sid, &next, 1), AX_EFENCED);
	cr_assert_eq(q64("SELECT ax_us(next_fire_at) FROM schedules"),
	             next - AX_USEC_PER_SEC,
	             "a deposed time detector moved a schedule");
	ax_store_close(a);
}

/* The second taker, on its own thread. */
typedef struct taker {
	ax_store   *s;
	int64_t     ttl_us;
	int64_t     epoch;
	ax_err      rv;
	char        detail[512];
	atomic_int  done;
	const char *holder;
} taker;

static void *
take_thread(void *arg)
{
	taker *t = arg;
	t->rv =
	    ax_store_sched_lease_take(t->s, t->holder, t->ttl_us, &t->epoch);
	snprintf(t->detail, sizeof(t->detail), "%s", ax_err_detail());
	atomic_store(&t->done, 1);
	return NULL;
}

/*
 * A store fenced for "axd A" (epoch *e1) with a transaction open, its
 * fence check passed; then "axd B" takes the lease over (ttl_us) on its
 * own thread.
 */
static ax_store *
takeover_in_flight(taker *t, pthread_t *th, int64_t ttl_us, int64_t *e1)
{
	ax_store *a;

	*e1 = take("axd A");
	a   = open_fenced(*e1);
	cr_assert_eq(ax_store_begin(a), AX_OK, "%s", ax_err_detail());
	/* BEGIN and the fence check travel with the first statement */
	cr_assert_eq(ax_store_exec(a, "SELECT 1", 0, NULL), AX_OK, "%s",
	             ax_err_detail());
	memset(t, 0, sizeof(*t));
	t->holder = "axd B";
	t->ttl_us = ttl_us;
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &t->s), AX_OK);
	q64("UPDATE scheduler_lease SET expires_at = now() - interval "
	    "'1 second' RETURNING 1");
	cr_assert_eq(pthread_create(th, NULL, take_thread, t), 0);
	return a;
}

Test(store, fence_takeover_waits_for_the_transaction_in_flight)
{
	taker     t;
	pthread_t th;
	int64_t   e1;
	ax_store *a = takeover_in_flight(&t, &th, TTL_US, &e1);

	cr_assert_eq(insert_dag(a, "in flight"), AX_OK, "%s", ax_err_detail());
	ax_clock_sleep_us(400 * AX_USEC_PER_MSEC);
	cr_assert(!atomic_load(&t.done),
	          "the takeover did not wait for the deposed holder's "
	          "transaction (%s)",
	          t.detail);
	cr_assert_eq(q64("SELECT epoch FROM scheduler_lease"), e1);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	pthread_join(th, NULL);
	cr_assert_eq(t.rv, AX_OK, "%s", t.detail);
	cr_assert_eq(t.epoch, e1 + 1);
	/* committed under the epoch it was checked against */
	cr_assert_eq(dags_named("in flight"), 1);
	cr_assert_eq(ax_store_tx(a, insert_dag, "late"), AX_EFENCED);
	cr_assert_eq(dags_named("late"), 0);
	ax_store_close(t.s);
	ax_store_close(a);
}

Test(store, fence_takeover_gives_up_while_a_transaction_holds_on)
{
	taker     t;
	pthread_t th;
	int64_t   e1, t0 = ax_clock_mono_us();
	/* lease_ttl 600 ms: the takeover waits a third of it */
	ax_store *a = takeover_in_flight(&t, &th, 600 * AX_USEC_PER_MSEC, &e1);

	pthread_join(th, NULL);
	int64_t waited = ax_clock_mono_us() - t0;
	cr_assert_eq(t.rv, AX_EBUSY, "%d %s", t.rv, t.detail);
	cr_assert(strstr(t.detail, "transactions of its previous holder") !=
	              NULL,
	          "%s", t.detail);
	cr_assert_lt(waited, 5 * AX_USEC_PER_SEC);
	cr_assert_eq(q64("SELECT epoch FROM scheduler_lease"), e1,
	             "the epoch moved while a fenced transaction was open");
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	/* once it is over the takeover goes through */
	cr_assert_eq(ax_store_sched_lease_take(t.s, "axd B", TTL_US, &t.epoch),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(t.epoch, e1 + 1);
	ax_store_close(t.s);
	ax_store_close(a);
}

Test(store, fence_a_valid_lease_is_not_taken_and_locks_nothing)
{
	int64_t   e1    = take("axd A");
	ax_store *a     = open_fenced(e1);
	int64_t   epoch = 0;

	q64("UPDATE scheduler_lease SET expires_at = now() + interval "
	    "'1 minute' RETURNING 1");
	cr_assert_eq(ax_store_begin(a), AX_OK, "%s", ax_err_detail());
	int64_t t0 = ax_clock_mono_us();
	cr_assert_eq(ax_store_sched_lease_take(st, "axd B", TTL_US, &epoch),
	             AX_EBUSY);
	cr_assert(strstr(ax_err_detail(), "is held by 'axd A' until") != NULL,
	          "%s", ax_err_detail());
	cr_assert_lt(ax_clock_mono_us() - t0, 2 * AX_USEC_PER_SEC,
	             "a standby's poll waited for the holder's transaction");
	cr_assert_eq(ax_store_commit(a), AX_OK);
	ax_store_close(a);
}

Test(store, fence_the_fence_travels_in_the_dsn_to_the_server)
{
	char     *dsn = NULL, *dsn2 = NULL;
	ax_store *s = NULL;
	PGresult *r = NULL;

	cr_assert_eq(ax_store_dsn_fenced(ax_test_pg_dsn(pg), 7, &dsn), AX_OK);
	cr_assert_eq(ax_store_dsn_fenced(dsn, 9, &dsn2), AX_OK);
	cr_assert_eq(ax_store_open(dsn2, &s), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_fence(s), 9, "the later fence wins");
	cr_assert_eq(ax_store_query(s, "SHOW ax.fence_epoch", 0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "9");
	PQclear(r);
	/* the lease is at epoch 0: the store is fenced out at once */
	cr_assert_eq(ax_store_tx(s, insert_dag, "z"), AX_EFENCED);
	cr_assert_eq(dags_named("z"), 0);
	ax_store_close(s);
	free(dsn);
	free(dsn2);
}

/* Transaction body: the dags rows named arg, or -1. */
static int64_t
tx_dags_count(ax_store *s, const char *name)
{
	const char *p[1] = { name };
	PGresult   *r    = NULL;
	int64_t     n    = -1;
	if (ax_store_query(s, "SELECT count(*) FROM dags WHERE name = $1", 1,
	                   p, &r) == AX_OK)
		n = ax_store_cell_i64(r, 0, 0);
	PQclear(r);
	return n;
}

/*
 * BEGIN (with the relaxed durability and the fence check) travels with a
 * transaction's first statement, in one pipeline. Whatever that statement
 * does, the transaction behaves as if BEGIN had gone first on its own.
 */
Test(store, first_statement_carries_the_begin)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	PGresult *r  = NULL;

	/* its statements are one transaction: the insert is seen inside,
	 * not outside, until COMMIT */
	cr_assert_eq(ax_store_begin(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(insert_dag(a, "piped"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "piped"), 1);
	cr_assert_eq(dags_named("piped"), 0);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("piped"), 1);
	/* a rolled-back first statement leaves nothing */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "undone"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("undone"), 0);
	/* a first statement that fails: its SQLSTATE, the transaction
	 * aborted, and the connection usable for the next one */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "piped"), AX_EEXIST, "%s", ax_err_detail());
	cr_assert_str_eq(ax_store_error_sqlstate(a), "23505");
	cr_assert_neq(insert_dag(a, "after error"), AX_OK);
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(ax_store_tx_relaxed(a, insert_dag, "after error"), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(dags_named("after error"), 1);
	/* a transaction with no statement commits and sends nothing */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert(ax_store_in_tx(a));
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	/* a COPY first sends the BEGIN on its own */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(ax_store_copy_in(a, "COPY dags (name) FROM STDIN",
	                              "copied\n", 7, NULL),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("copied"), 0);
	/* the connection is out of pipeline mode between transactions */
	cr_assert_eq(ax_store_query(a, "SELECT 41 + 1", 0, NULL, &r), AX_OK);
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "42");
	PQclear(r);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	ax_store_close(a);
}

/* A deferred insert into dags of the DAG named name. */
static ax_err
defer_dag(ax_store *s, const char *name)
{
	const char *p[1] = { name };
	return ax_store_write_deferred(s, "t.ins_dag", 1, p);
}

/*
 * Writes sent without waiting answer with the transaction's next
 * statement or its COMMIT, in one pipeline; the transaction behaves as if
 * each had waited for its answer: all of it commits, or none of it.
 */
Test(store, deferred_writes_answer_with_the_next_statement_or_the_commit)
{
	int64_t   e1 = take("axd A");
	ax_store *a  = open_fenced(e1);
	char      name[32];

	cr_assert_eq(ax_store_prepare(a, "t.ins_dag",
	                              "INSERT INTO dags (name) VALUES ($1)",
	                              1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_write_deferred(a, "t.nope", 0, NULL), AX_ENOENT);
	/* outside a transaction: written at once */
	cr_assert_eq(defer_dag(a, "alone"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("alone"), 1);
	/* 40 deferred from the first on (the opening and the fence check go
	 * before the first), more than one pipeline holds: all land with
	 * the COMMIT, none before it */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "d-%d", i);
		cr_assert_eq(defer_dag(a, name), AX_OK, "%s", ax_err_detail());
	}
	cr_assert_eq(dags_named("d-0"), 0);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM dags WHERE name LIKE 'd-%'"),
	             40);
	/* a statement after deferred writes sees them */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "r-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "r-1"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "r-1"), 1);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("r-1"), 1);
	/* a deferred write that fails is the COMMIT's error, named; nothing
	 * of the transaction is kept, before or after it */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "x-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "x-1"), AX_OK);
	cr_assert_eq(defer_dag(a, "d-3"), AX_OK); /* taken */
	cr_assert_eq(defer_dag(a, "x-2"), AX_OK);
	cr_assert_eq(ax_store_commit(a), AX_EEXIST, "%s", ax_err_detail());
	cr_assert(strstr(ax_err_detail(), "t.ins_dag") != NULL, "%s",
	          ax_err_detail());
	cr_assert_str_eq(ax_store_error_sqlstate(a), "23505");
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(q64("SELECT count(*) FROM dags WHERE name LIKE 'x-%'"),
	             0);
	/* ... or the next statement's, when one follows */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "y-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "d-3"), AX_OK);
	cr_assert_eq(tx_dags_count(a, "y-0"), -1);
	cr_assert_str_eq(ax_store_error_sqlstate(a), "23505");
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("y-0"), 0);
	/* a rollback drops them */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "z-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(defer_dag(a, "z-1"), AX_OK);
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(dags_named("z-1"), 0);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	/* the store goes on: a transaction retried as a whole commits */
	cr_assert_eq(ax_store_tx(a, insert_dag, "z-2"), AX_OK, "%s",
	             ax_err_detail());
	/* a transaction of deferred writes only, and one that reads after
	 * them, on a store that is still the lease's */
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "v-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(dags_named("v-0"), 1);
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "v-1"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "v-1"), 1);
	cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
	/* deposed: a deferred write as the first statement is sent after
	 * the fence check, which is judged before the COMMIT is sent (the
	 * COMMIT's error) or with the next statement (its error) */
	take("axd B");
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "w-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_commit(a), AX_EFENCED, "%s", ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(dags_named("w-0"), 0);
	ax_store_close(a);
	a = open_fenced(e1);
	cr_assert_eq(ax_store_prepare(a, "t.ins_dag",
	                              "INSERT INTO dags (name) VALUES ($1)",
	                              1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(defer_dag(a, "w-1"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(tx_dags_count(a, "w-1"), -1);
	cr_assert(strstr(ax_err_detail(), "fenced") != NULL, "%s",
	          ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(ax_store_commit(a), AX_EINVAL);
	cr_assert_eq(dags_named("w-1"), 0);
	ax_store_close(a);
}

/* plan_cache_mode as the store's session sees it now. */
static void
assert_plan_mode_auto(ax_store *s)
{
	PGresult *r = NULL;
	cr_assert_eq(ax_store_query(s, "SHOW plan_cache_mode", 0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "auto");
	PQclear(r);
}

/* How often the session planned statement name generic and custom. */
static void
plans_of(ax_store *s, const char *name, int64_t *generic, int64_t *custom)
{
	cr_assert(ax_test_plans(s, name, generic, custom),
	          "%s is not prepared", name);
}

#define SQL_T_JOIN                                                            \
	"SELECT d.id FROM dags d JOIN dag_versions v ON v.dag_id = d.id "     \
	"WHERE d.name = ANY($1::text[])"

/*
 * A statement registered with ax_store_prepare_generic runs its generic
 * plan wherever it is sent: as a transaction's first statement (with the
 * BEGIN and the fence), as a later one, deferred, and on its own; the
 * setting never outlives the statement, also when the statement fails.
 * The same SQL registered plainly is planned for its values (custom) by
 * PostgreSQL, which is what the generic registration avoids.
 */
Test(store, generic_statements_run_their_generic_plan_and_leave_the_setting)
{
	int64_t     e1   = take("axd A");
	ax_store   *a    = open_fenced(e1);
	const char *p[1] = { "{d1}" }, *bad[1] = { "{1}" };
	PGresult   *r   = NULL;
	int64_t     gen = 0, cust = 0;

	cr_assert_eq(ax_store_prepare_generic(a, "t.gen", SQL_T_JOIN, 1),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_prepare_generic(a, "t.gen", SQL_T_JOIN, 1),
	             AX_OK, "registering twice is allowed");
	cr_assert_eq(ax_store_prepare_once(a, "t.cust", SQL_T_JOIN, 1), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(
	    ax_store_prepare_generic(
	        a, "t.bad", "SELECT 1 / (cardinality($1::int[]) - 1)", 1),
	    AX_OK, "%s", ax_err_detail());
	for (int i = 0; i < 2; i++) {
		/* first statement of a transaction, with the fence */
		cr_assert_eq(ax_store_begin(a), AX_OK);
		cr_assert_eq(ax_store_query_prepared(a, "t.gen", 1, p, &r),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(PQntuples(r), 1);
		cr_assert_eq(strtoll(PQgetvalue(r, 0, 0), NULL, 10), dag_id);
		PQclear(r);
		/* a later statement, then deferred ones */
		cr_assert_eq(ax_store_query_prepared(a, "t.gen", 1, p, &r),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(PQntuples(r), 1);
		PQclear(r);
		cr_assert_eq(ax_store_write_deferred(a, "t.gen", 1, p), AX_OK,
		             "%s", ax_err_detail());
		cr_assert_eq(ax_store_write_deferred(a, "t.gen", 1, p), AX_OK,
		             "%s", ax_err_detail());
		cr_assert_eq(ax_store_commit(a), AX_OK, "%s", ax_err_detail());
		assert_plan_mode_auto(a);
		/* the same SQL registered plainly, and on its own */
		cr_assert_eq(ax_store_query_prepared(a, "t.cust", 1, p, NULL),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(ax_store_query_prepared(a, "t.cust", 1, p, NULL),
		             AX_OK, "%s", ax_err_detail());
		cr_assert_eq(ax_store_query_prepared(a, "t.cust", 1, p, NULL),
		             AX_OK, "%s", ax_err_detail());
	}
	plans_of(a, "t.gen", &gen, &cust);
	cr_assert_eq(cust, 0, "t.gen was planned for its values %lld times",
	             (long long) cust);
	cr_assert_geq(gen, 8, "t.gen ran %lld times generic", (long long) gen);
	plans_of(a, "t.cust", &gen, &cust);
	cr_assert_geq(cust, 5, "t.cust: %lld custom plans", (long long) cust);
	assert_plan_mode_auto(a);
	/* a generic statement that fails: as a later statement, as the
	 * first, deferred (the COMMIT's error) and on its own; the setting
	 * goes with the aborted transaction */
	for (int later = 1; later >= 0; later--) {
		cr_assert_eq(ax_store_begin(a), AX_OK);
		if (later)
			cr_assert_eq(
			    ax_store_query_prepared(a, "t.gen", 1, p, NULL),
			    AX_OK, "%s", ax_err_detail());
		cr_assert_neq(
		    ax_store_query_prepared(a, "t.bad", 1, bad, NULL), AX_OK);
		cr_assert_str_eq(ax_store_error_sqlstate(a), "22012");
		cr_assert_eq(ax_store_rollback(a), AX_OK);
		assert_plan_mode_auto(a);
	}
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(insert_dag(a, "gen-0"), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_write_deferred(a, "t.bad", 1, bad), AX_OK);
	cr_assert_neq(ax_store_commit(a), AX_OK);
	cr_assert(strstr(ax_err_detail(), "t.bad") != NULL, "%s",
	          ax_err_detail());
	cr_assert(!ax_store_in_tx(a));
	cr_assert_eq(dags_named("gen-0"), 0);
	assert_plan_mode_auto(a);
	cr_assert_eq(
	    ax_store_prepare_generic(
	        st, "t.bad", "SELECT 1 / (cardinality($1::int[]) - 1)", 1),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_neq(ax_store_query_prepared(st, "t.bad", 1, bad, NULL),
	              AX_OK);
	assert_plan_mode_auto(st);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(st)), PQ_PIPELINE_OFF);
	ax_store_close(a);
}

/*
 * ax_store_warm plans every statement prepared on the store and runs
 * none: a generic statement has its generic plan before its first
 * execution, a statement that would delete every row with NULL
 * parameters deletes nothing, one that cannot be planned any more is
 * named in the error and does not keep the others from being planned;
 * the setting of plan_cache_mode is left as it was (also after that
 * failure, of a generic one), and a warm-up inside a transaction is
 * refused.
 */
Test(store, warm_plans_every_statement_and_runs_none)
{
	ax_store *a   = NULL;
	int64_t   gen = 0, cust = 0;
	PGresult *r = NULL;

	static const char *const ddl[] = {
		"CREATE TABLE warm_t (id int PRIMARY KEY, v text NOT NULL)",
		"CREATE TABLE warm_gone (id int)",
		"INSERT INTO warm_t VALUES (1, 'kept')",
	};
	/* the third would delete every row if it ran with NULL */
	static const ax_store_stmt_def defs[] = {
		{ "w.gone", "SELECT id FROM warm_gone WHERE id = $1", 1, 1 },
		{ "w.join", SQL_T_JOIN, 1, 1 },
		{ "w.ins",
		  "INSERT INTO warm_t (id, v) SELECT * FROM "
		  "unnest($1::int[], $2::text[])",
		  2, 1 },
		{ "w.del", "DELETE FROM warm_t WHERE id = $1 OR $1 IS NULL", 1,
		  0 },
	};

	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &a), AX_OK, "%s",
	             ax_err_detail());
	for (size_t i = 0; i < sizeof(ddl) / sizeof(ddl[0]); i++)
		cr_assert_eq(ax_store_exec(a, ddl[i], 0, NULL), AX_OK, "%s",
		             ax_err_detail());
	cr_assert_eq(ax_store_prepare_all(a, defs, 4), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_warm(a), AX_OK, "%s", ax_err_detail());
	plans_of(a, "w.join", &gen, &cust);
	cr_assert_eq(gen, 1, "w.join: %lld generic plans", (long long) gen);
	cr_assert_eq(cust, 0);
	plans_of(a, "w.ins", &gen, &cust);
	cr_assert_eq(gen, 1, "w.ins: %lld generic plans", (long long) gen);
	plans_of(a, "w.del", &gen, &cust);
	cr_assert_eq(gen + cust, 1, "w.del planned %lld times",
	             (long long) (gen + cust));
	cr_assert_eq(ax_store_query(a, "SELECT string_agg(v, ',') FROM warm_t",
	                            0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "kept", "a statement ran");
	PQclear(r);
	assert_plan_mode_auto(a);
	/* a statement whose table went away: named, the others planned */
	cr_assert_eq(ax_store_exec(a, "DROP TABLE warm_gone", 0, NULL), AX_OK);
	cr_assert_neq(ax_store_warm(a), AX_OK);
	cr_assert(strstr(ax_err_detail(), "w.gone") != NULL, "%s",
	          ax_err_detail());
	plans_of(a, "w.ins", &gen, &cust);
	cr_assert_eq(gen, 2, "w.ins not planned after the failed one");
	assert_plan_mode_auto(a);
	cr_assert_eq(ax_store_begin(a), AX_OK);
	cr_assert_eq(ax_store_warm(a), AX_EINVAL);
	cr_assert_eq(ax_store_rollback(a), AX_OK);
	cr_assert_eq(PQpipelineStatus(ax_store_conn(a)), PQ_PIPELINE_OFF);
	ax_store_close(a);
}

/* Events: the stored payload joins the row's context (dag, task, source,
 * logical time, shards when sharded) with the event's own payload, which
 * wins on a clash; a non-object payload is kept as {"raw": text}; a
 * re-sent event_id is stored once; a bad event_id is skipped. */
/* Payloads are spliced into the stored object without a JSON library
 * when they are valid objects; what jsonb would refuse is kept raw and
 * never fails the batch (the statement would abort the transaction). */
Test(store, event_payloads_that_jsonb_refuses_are_kept_raw)
{
	static const char *const pl[] = {
		"{\"a\":\"\\u0000\"}", /* jsonb refuses \u0000 */
		"{\"a\":\"\\ud800\"}", /* unpaired surrogate */
		"{\"a\":1,}",          /* not JSON */
		"{\"a\":1e200000}",    /* past jsonb's numeric range */
		" { \"x\" : [1, {\"y\": \"caf\xc3\xa9\"}] } ", /* fine */
		"{}",
	};
	enum { N = sizeof(pl) / sizeof(pl[0]) };
	ax_store_event_row r[N];
	char               ids[N][37];
	size_t             ins = 0;

	memset(r, 0, sizeof(r));
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]),
		         "0190a6e0-0000-7000-8000-00000000010%d", i);
		r[i].event_id     = ids[i];
		r[i].type         = "instance.succeeded";
		r[i].time_us      = LOGICAL_US;
		r[i].dag          = "d1";
		r[i].task         = "t\"q\\\n"; /* escaped in the payload */
		r[i].payload_json = pl[i];
	}
	cr_assert_eq(ax_store_insert_events(st, r, N, &ins, NULL), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ins, N);
	cr_assert_eq(
	    q64("SELECT count(*) FROM event_log WHERE payload->>'task' "
	        "= E't\"q\\\\\\n' AND payload->>'dag' = 'd1'"),
	    N, "every payload names the task, escaped");
	for (int i = 0; i < 4; i++) {
		char q[512];
		snprintf(
		    q, sizeof(q),
		    "SELECT count(*) FROM event_log WHERE event_id = '%s' "
		    "AND payload ? 'raw' AND NOT payload ? 'a'",
		    ids[i]);
		cr_assert_eq(q64(q), 1, "payload %d kept raw", i);
	}
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE "
	                 "payload->'x'->1->>'y' = E'caf\\u00e9' AND NOT "
	                 "payload ? 'raw'"),
	             1, "a valid object's members are kept as they are");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id = "
	                 "'0190a6e0-0000-7000-8000-000000000105' AND "
	                 "payload = '{\"dag\": \"d1\", \"task\": "
	                 "\"t\\\"q\\\\\\n\"}'::jsonb"),
	             1, "an empty object adds nothing");
}

/* A batch of 128 events or more goes in through COPY: text with COPY's
 * special bytes arrives as written, an id twice in a batch (or in another
 * case) is stored once, and an unknown DAG name leaves dag_id NULL. The
 * same rows in a small batch take the INSERT path and must end the same.
 */
static void
copy_batch(int big, const char *prefix)
{
	enum { N = 200 };
	static ax_store_event_row r[N];
	static char               ids[N][37];
	size_t                    n = big ? N : 4, ins = 0, skip = 0;
	char                      q[768];

	memset(r, 0, sizeof(r));
	for (size_t i = 0; i < n; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%s-7000-8000-%012zu", prefix,
		         i);
		r[i].event_id = ids[i];
		r[i].type     = "instance.failed";
		r[i].time_us  = LOGICAL_US + 123456;
		r[i].dag      = "d1";
	}
	r[0].reason   = "tab\there\nnew\\N line\r";
	r[0].trace_id = "\\N";
	r[0].payload_json =
	    "{\"error\":\"a\\tb\\\\c\", \"raw\\tjson\":\"\\n\"}";
	/* row 1: row 0's id in upper case; row 3: row 2's id again */
	snprintf(ids[1], sizeof(ids[1]), "%s", ids[0]);
	for (char *c = ids[1]; *c; c++)
		*c = (char) (*c >= 'a' && *c <= 'f' ? *c - 32 : *c);
	r[2].dag = "no-such-dag";
	snprintf(ids[3], sizeof(ids[3]), "%s", ids[2]);
	cr_assert_eq(ax_store_insert_events(st, r, n, &ins, &skip), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ins, n - 2);
	cr_assert_eq(skip, 0);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = '%s' AND "
	         "reason = E'tab\\there\\nnew\\\\N line\\r' AND trace_id = "
	         "E'\\\\N' AND payload->>'error' = E'a\\tb\\\\c' AND "
	         "payload->>E'raw\\tjson' = E'\\n' AND "
	         "ax_us(time) = 1774749600123456",
	         ids[0]);
	cr_assert_eq(q64(q), 1, "text fields arrive byte for byte");
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = '%s' AND "
	         "dag_id IS NULL AND payload->>'dag' = 'no-such-dag'",
	         ids[2]);
	cr_assert_eq(q64(q), 1,
	             "an unknown DAG: no dag_id, the name in the payload");
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = '%.36s' "
	         "AND dag_id = %lld",
	         ids[0], (long long) dag_id);
	cr_assert_eq(q64(q), 1, "a known DAG's id is stored");
	/* the same batch again: all stored already */
	cr_assert_eq(ax_store_insert_events(st, r, n, &ins, &skip), AX_OK);
	cr_assert_eq(ins, 0);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id::text LIKE "
	         "'%.20s-%%'",
	         prefix);
	cr_assert_eq(q64(q), (int64_t) n - 2);
}

Test(store, events_copy_keeps_text_and_stores_each_id_once)
{
	copy_batch(1, "0190a6e0-0001");
}

Test(store, events_small_batch_keeps_text_and_stores_each_id_once)
{
	copy_batch(0, "0190a6e0-0002");
}

/* Another writer holds an uncommitted row with one of the batch's ids:
 * the lookup does not see it, the COPY waits on the unique key and fails
 * once it commits. The transaction runs again and leaves the id out:
 * nothing lost, nothing twice (the INSERT path waits and skips it). */
static void *
commit_later(void *arg)
{
	ax_clock_sleep_us(300000);
	PQclear(PQexec(arg, "COMMIT"));
	return NULL;
}

typedef struct ev_batch {
	ax_store_event_row *rows;
	size_t              n;
} ev_batch;

static ax_err
ev_batch_tx(ax_store *s, void *arg)
{
	ev_batch *b = arg;
	return ax_store_insert_events(s, b->rows, b->n, NULL, NULL);
}

Test(store, events_copy_runs_again_past_a_concurrent_writer)
{
	enum { N = 200 };
	static ax_store_event_row r[N];
	static char               ids[N][37];
	pthread_t                 t;
	PGconn                   *other = PQconnectdb(ax_test_pg_dsn(pg));

	cr_assert_eq(PQstatus(other), CONNECTION_OK);
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]),
		         "0190a6e0-0003-7000-8000-%012d", i);
		r[i] = (ax_store_event_row) { .event_id = ids[i],
			                      .type     = "instance.running",
			                      .time_us  = LOGICAL_US };
	}
	PQclear(PQexec(other, "BEGIN"));
	/* the same event (id and time: event_log is unique per both, 0015)
	 * from another writer */
	char oins[256];
	snprintf(oins, sizeof(oins),
	         "INSERT INTO event_log (event_id, type, time) VALUES "
	         "('0190a6e0-0003-7000-8000-000000000007', 'other.writer', "
	         "ax_ts(%lld))",
	         (long long) LOGICAL_US);
	PGresult *res = PQexec(other, oins);
	cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(other));
	PQclear(res);
	cr_assert_eq(pthread_create(&t, NULL, commit_later, other), 0);
	ev_batch b = { r, N };
	cr_assert_eq(ax_store_tx(st, ev_batch_tx, &b), AX_OK, "%s",
	             ax_err_detail());
	pthread_join(t, NULL);
	PQfinish(other);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id::text "
	                 "LIKE '0190a6e0-0003-%'"),
	             N, "every id once");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'other.writer'"),
	             1, "the other writer's row is the one kept");
}

Test(store, events_payload_idempotence_and_bad_rows)
{
	ax_store_event_row r[4];
	size_t             ins = 0, skip = 0;
	char               q[512];

	memset(r, 0, sizeof(r));
	for (int i = 0; i < 4; i++) {
		r[i].type            = "instance.running";
		r[i].time_us         = LOGICAL_US;
		r[i].dag             = "d1";
		r[i].dag_run_id      = run_id;
		r[i].task            = "t";
		r[i].source          = "test";
		r[i].logical_time_us = LOGICAL_US;
		r[i].shard_total     = 1;
	}
	r[0].event_id     = "0190a6e0-0000-7000-8000-000000000001";
	r[0].payload_json = "{\"worker\":\"w1\",\"source\":\"mine\"}";
	r[1].event_id     = "0190a6e0-0000-7000-8000-000000000002";
	r[1].payload_json = "[1,2]";
	r[1].shard_index  = 2;
	r[1].shard_total  = 3;
	r[2].event_id     = "not-a-uuid";
	r[3].event_id     = "0190a6e0-0000-7000-8000-000000000003";
	cr_assert_eq(ax_store_insert_events(st, r, 4, &ins, &skip), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ins, 3);
	cr_assert_eq(skip, 1);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE event_id = "
	         "'0190a6e0-0000-7000-8000-000000000001' AND dag_id = %lld "
	         "AND payload = '{\"dag\": \"d1\", \"task\": \"t\", "
	         "\"source\": \"mine\", \"worker\": \"w1\", "
	         "\"logical_time_us\": %lld}'::jsonb",
	         (long long) dag_id, (long long) LOGICAL_US);
	cr_assert_eq(q64(q), 1, "payload of the first event");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id = "
	                 "'0190a6e0-0000-7000-8000-000000000002' AND "
	                 "payload->>'raw' = '[1,2]' AND "
	                 "(payload->>'shard_index')::int = 2 AND "
	                 "(payload->>'shard_total')::int = 3"),
	             1, "non-object payload kept raw, shards recorded");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id = "
	                 "'0190a6e0-0000-7000-8000-000000000003' AND NOT "
	                 "payload ? 'shard_index' AND payload ? 'dag'"),
	             1, "an unsharded event has no shard keys");
	/* the same events again: nothing new */
	cr_assert_eq(ax_store_insert_events(st, r, 4, &ins, &skip), AX_OK);
	cr_assert_eq(ins, 0);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE event_id::text "
	                 "LIKE '0190a6e0-%'"),
	             3);
}
