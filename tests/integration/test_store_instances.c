/*
 * test_store_instances.c - task instances in a real PostgreSQL: the
 * state machine refused by C and by the database (and the two tables
 * agree, the guard's WHEN clause included), guarded batched moves,
 * reasons, batched idempotent inserts (also from concurrent writers),
 * finding and admitting instances (fixture: store_suite.h).
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
#include "store_suite.h"

TestSuite(store, .init = ax_store_suite_setup, .fini = ax_store_suite_teardown,
          .timeout = 120);

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
