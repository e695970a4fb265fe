/*
 * test_migrate.c - the embedded migrations against a real PostgreSQL:
 * a fresh database is brought to the binary's version, a second run
 * applies nothing, concurrent migrators apply each file once, a newer
 * database and an edited migration are refused, a failing migration is
 * rolled back and named with its line, the hot tables keep only the
 * indexes a statement reads; plus the statement splitter.
 */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "migrate.h"
#include "pg_harness.h"
#include "store.h"

static ax_test_pg *pg;

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
}

static void
teardown(void)
{
	ax_test_pg_stop(pg);
}

static int64_t
query_int(const char *sql)
{
	ax_store *s;
	int64_t   v = -1;
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &s), AX_OK);
	cr_assert_eq(ax_store_query_int64(s, sql, 0, NULL, &v), AX_OK, "%s",
	             ax_err_detail());
	ax_store_close(s);
	return v;
}

TestSuite(migrate, .init = setup, .fini = teardown, .timeout = 120);

Test(migrate, fresh_database_then_idempotent)
{
	int applied = -1, dbv = -1, binv = -1;

	cr_assert_eq(ax_migrate_status(ax_test_pg_dsn(pg), &dbv, &binv), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(dbv, 0);
	cr_assert_eq(binv, (int) ax_migrations_count);
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, (int) ax_migrations_count);
	cr_assert_eq(ax_migrate_status(ax_test_pg_dsn(pg), &dbv, &binv),
	             AX_OK);
	cr_assert_eq(dbv, binv);
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, 0, "second run must apply nothing");
	/* The schema is there and recorded with its checksum. */
	cr_assert_eq(query_int("SELECT count(*) FROM scheduler_lease"), 1);
	cr_assert_eq(query_int("SELECT count(*) FROM schema_migrations "
	                       "WHERE length(checksum) = 64"),
	             (int64_t) ax_migrations_count);
}

/*
 * ax_ts() and ax_us() convert between UTC microseconds and timestamptz
 * exactly, whatever the session's time zone, and the planner inlines
 * them: the flow's batched statements call them several times per row,
 * and a call that is not inlined runs as a nested SQL function (about
 * five times the cost). Before 0011 EXPLAIN showed ax_ts(...) calls.
 */
Test(migrate, time_functions_exact_and_inlined)
{
	ax_store *s;
	PGresult *r = NULL;
	int       applied;

	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(query_int("SELECT count(*) FROM (VALUES (0::bigint), "
	                       "(-1), (1), (1764605000123457), "
	                       "(-2208988800000001), (4102444799999999)) "
	                       "v(g) WHERE ax_us(ax_ts(g)) <> g"),
	             0);
	cr_assert_eq(query_int("SELECT count(*) FROM generate_series(1, "
	                       "2000) k, LATERAL (SELECT (k * "
	                       "1999999999937::bigint - 1000000000000000) "
	                       "g) x WHERE ax_us(ax_ts(g)) <> g"),
	             0, "round trip over 1938..2065");
	cr_assert_eq(query_int("SELECT (ax_ts(1764605000123457) = "
	                       "timestamptz '2025-12-01 "
	                       "16:03:20.123457+00')::int"),
	             1);
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &s), AX_OK);
	cr_assert_eq(ax_store_exec(s, "SET TIME ZONE 'Asia/Kolkata'", 0, NULL),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_query(s,
	                            "SELECT (ax_ts(1764605000123457) = "
	                            "timestamptz '2025-12-01 "
	                            "21:33:20.123457+05:30')::int, "
	                            "ax_us(timestamptz '2025-12-01 "
	                            "21:33:20.123457+05:30')",
	                            0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "1");
	cr_assert_str_eq(PQgetvalue(r, 0, 1), "1764605000123457");
	PQclear(r);
	cr_assert_eq(ax_store_query(s,
	                            "EXPLAIN VERBOSE SELECT ax_ts(g), "
	                            "ax_us(now() + g * interval '1 us') "
	                            "FROM generate_series(1::bigint, 3) g",
	                            0, NULL, &r),
	             AX_OK, "%s", ax_err_detail());
	for (int i = 0; i < PQntuples(r); i++) {
		cr_assert_null(strstr(PQgetvalue(r, i, 0), "ax_ts("),
		               "not inlined: %s", PQgetvalue(r, i, 0));
		cr_assert_null(strstr(PQgetvalue(r, i, 0), "ax_us("),
		               "not inlined: %s", PQgetvalue(r, i, 0));
	}
	PQclear(r);
	ax_store_close(s);
}

/* Asserts that the plan of `sql` (sequential scans off on s) holds
 * `what` ("Index Cond": an index serves the filter) and scans no table
 * whole (on a partitioned table the plan names each partition's index,
 * so no index name is matched). */
static void
assert_uses_index(ax_store *s, const char *sql, const char *what)
{
	PGresult *r = NULL;
	char      q[1024], plan[4096];
	size_t    at = 0;

	snprintf(q, sizeof(q), "EXPLAIN %s", sql);
	cr_assert_eq(ax_store_query(s, q, 0, NULL, &r), AX_OK, "%s",
	             ax_err_detail());
	plan[0] = '\0';
	for (int i = 0; i < PQntuples(r) && at + 1 < sizeof(plan); i++)
		at += (size_t) snprintf(plan + at, sizeof(plan) - at, "%s\n",
		                        PQgetvalue(r, i, 0));
	PQclear(r);
	cr_assert_not_null(strstr(plan, what), "%s: no %s in\n%s", sql, what,
	                   plan);
	cr_assert_null(strstr(plan, "Seq Scan"), "%s: a whole scan in\n%s",
	               sql, plan);
}

/*
 * Every index of event_log and attempts costs an entry per row version
 * the pipeline writes (about four event rows and three attempt versions
 * per instance); the ones no statement reads are gone, and the reads the
 * API and axd make still find an index. Before 0013 event_log_run_id_idx
 * and attempts_started_idx were still there.
 */
Test(migrate, hot_tables_keep_only_indexes_that_are_read)
{
	ax_store *s;
	int       applied;

	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(query_int("SELECT count(*) FROM pg_indexes WHERE "
	                       "indexname IN ('event_log_run_id_idx', "
	                       "'attempts_started_idx')"),
	             0, "an index nothing reads is maintained on every write");
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &s), AX_OK);
	cr_assert_eq(ax_store_exec(s, "SET enable_seqscan = off", 0, NULL),
	             AX_OK, "%s", ax_err_detail());
	/* the API's event filters (api_misc.c) and the id cursor */
	assert_uses_index(s,
	                  "SELECT id FROM event_log WHERE instance_id = 5 AND "
	                  "id > 0 ORDER BY id LIMIT 100",
	                  "Index Cond: ((instance_id = 5)");
	assert_uses_index(s,
	                  "SELECT id FROM event_log WHERE dag_run_id = 5 "
	                  "ORDER BY id LIMIT 100",
	                  "Index Cond: (dag_run_id = 5)");
	/* the event writer's look-up of ids it may have written already */
	assert_uses_index(s,
	                  "SELECT id FROM event_log WHERE event_id = "
	                  "'01a2330f-92c5-7dda-8210-5fd96723d114'",
	                  "Index Cond: (event_id = ");
	/* the queue's attempts in flight after a takeover (store_attempts.c)
	 */
	assert_uses_index(
	    s,
	    "SELECT run_id FROM attempts WHERE state IN "
	    "('DISPATCHED', 'RUNNING') AND worker_id IS NOT NULL "
	    "ORDER BY worker_id, id",
	    "Index Cond: (worker_id IS NOT NULL)");
	ax_store_close(s);
}

static void *
migrate_thread(void *arg)
{
	int   *applied = arg;
	ax_err rv      = ax_migrate_run(ax_test_pg_dsn(pg), applied);
	return (void *) (intptr_t) rv;
}

Test(migrate, concurrent_migrators_apply_each_file_once)
{
	enum { N = 4 };
	pthread_t th[N];
	int       applied[N], total = 0;

	for (int i = 0; i < N; i++)
		pthread_create(&th[i], NULL, migrate_thread, &applied[i]);
	for (int i = 0; i < N; i++) {
		void *rv;
		pthread_join(th[i], &rv);
		cr_assert_eq((ax_err) (intptr_t) rv, AX_OK);
		total += applied[i];
	}
	cr_assert_eq(total, (int) ax_migrations_count);
	cr_assert_eq(query_int("SELECT count(*) FROM schema_migrations"),
	             (int64_t) ax_migrations_count);
}

Test(migrate, newer_database_is_refused)
{
	int  applied, dbv, binv;
	char want[64];

	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK);
	query_int("WITH i AS (INSERT INTO schema_migrations (version, name, "
	          "checksum) VALUES (999, '0999_future.sql', 'x') "
	          "RETURNING 1) SELECT count(*) FROM i");
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_ESCHEMA);
	cr_assert_eq(applied, 0);
	snprintf(want, sizeof(want), "version %zu", ax_migrations_count);
	cr_assert(strstr(ax_err_detail(), "999") != NULL, "%s",
	          ax_err_detail());
	cr_assert(strstr(ax_err_detail(), want) != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(ax_migrate_status(ax_test_pg_dsn(pg), &dbv, &binv),
	             AX_OK);
	cr_assert_eq(dbv, 999);
}

/* Two small migration sets sharing version 1 with different text. */
static const ax_migration set_ok[] = {
	{ 1, "0001_a.sql", "CREATE TABLE a (x int);\n",
	  "1111111111111111111111111111111111111111111111111111111111111111" },
	{ 2, "0002_bad.sql",
	  "-- the second statement fails\n"
	  "CREATE TABLE b (x int);\n"
	  "INSERT INTO b VALUES (1);\n"
	  "SELECT * FROM\n   no_such_table;\n",
	  "2222222222222222222222222222222222222222222222222222222222222222" },
};

Test(migrate, failing_migration_is_rolled_back_and_named)
{
	int applied = -1;

	cr_assert_eq(
	    ax_migrate_run_set(ax_test_pg_dsn(pg), set_ok, 2, &applied),
	    AX_EDB);
	const char *d = ax_err_detail();
	cr_assert_eq(applied, 1, "0001 stays applied");
	cr_assert(strstr(d, "0002_bad.sql:5:4") != NULL, "%s", d);
	cr_assert(strstr(d, "statement 3") != NULL, "%s", d);
	cr_assert(strstr(d, "no_such_table") != NULL, "%s", d);
	cr_assert(strstr(d, "rolled back") != NULL, "%s", d);
	/* Nothing of 0002 remains: no table b, no record. */
	cr_assert_eq(query_int("SELECT (to_regclass('b') IS NULL)::int"), 1);
	cr_assert_eq(query_int("SELECT (to_regclass('a') IS NULL)::int"), 0);
	cr_assert_eq(query_int("SELECT max(version) FROM schema_migrations"),
	             1);
}

Test(migrate, edited_migration_is_reported)
{
	ax_migration edited = set_ok[0];
	int          applied;

	cr_assert_eq(
	    ax_migrate_run_set(ax_test_pg_dsn(pg), set_ok, 1, &applied), AX_OK,
	    "%s", ax_err_detail());
	edited.checksum =
	    "3333333333333333333333333333333333333333333333333333333333333333";
	cr_assert_eq(
	    ax_migrate_run_set(ax_test_pg_dsn(pg), &edited, 1, &applied),
	    AX_ESCHEMA);
	cr_assert(strstr(ax_err_detail(), "checksum mismatch") != NULL);
	cr_assert(strstr(ax_err_detail(), "0001_a.sql") != NULL, "%s",
	          ax_err_detail());
}

Test(migrate, unreachable_database_names_dsn_without_password)
{
	int applied = -1;

	cr_assert_eq(ax_migrate_run("host=/nonexistent/sock port=1 dbname=ax "
	                            "user=ax password=s3cret",
	                            &applied),
	             AX_EDBCONN);
	const char *d = ax_err_detail();
	cr_assert(strstr(d, "/nonexistent/sock") != NULL, "%s", d);
	cr_assert(strstr(d, "s3cret") == NULL, "%s", d);
	cr_assert(strstr(d, "password=***") != NULL, "%s", d);
	cr_assert_eq(applied, 0);
}

/* Splits sql and joins the statements with '|'. */
static void
split_all(const char *sql, char *out, size_t len)
{
	size_t pos = 0, start, n, o = 0;
	out[0] = '\0';
	while (ax_migrate_next_statement(sql, &pos, &start, &n)) {
		o += (size_t) snprintf(out + o, len - o, "%s%.*s",
		                       o > 0 ? "|" : "", (int) n, sql + start);
	}
}

struct split_case {
	char sql[160];
	char want[160];
};

Test(migrate_split, statements_quotes_comments_dollar_bodies)
{
	static const struct split_case cases[] = {
		{ "SELECT 1; SELECT 2", "SELECT 1|SELECT 2" },
		{ "  ;; -- only a comment;\n /* and ; this */ ", "" },
		{ "SELECT ';' ; SELECT 'it''s;'",
		  "SELECT ';'|SELECT 'it''s;'" },
		{ "SELECT E'a\\';b'; x", "SELECT E'a\\';b'|x" },
		{ "SELECT \"a;b\" FROM t;", "SELECT \"a;b\" FROM t" },
		{ "CREATE FUNCTION f() AS $$ a; b $$; y",
		  "CREATE FUNCTION f() AS $$ a; b $$|y" },
		{ "DO $x$ a; $$ ; $x$; z", "DO $x$ a; $$ ; $x$|z" },
		{ "SELECT $1; w", "SELECT $1|w" },
		{ "a /* x /* nested; */ ; */ b; c",
		  "a /* x /* nested; */ ; */ b|c" },
		{ "SELECT 1 -- trailing; comment\n; d", "SELECT 1|d" },
	};
	char out[512];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		split_all(cases[i].sql, out, sizeof(out));
		cr_expect_str_eq(out, cases[i].want, "case %zu: %s", i,
		                 cases[i].sql);
	}
}

Test(migrate_split, embedded_migrations_are_well_formed)
{
	cr_assert_gt(ax_migrations_count, 0);
	for (size_t i = 0; i < ax_migrations_count; i++) {
		cr_assert_eq(ax_migrations[i].version, (int) i + 1);
		cr_assert_eq(strlen(ax_migrations[i].checksum), 64);
		cr_assert_gt(strlen(ax_migrations[i].sql), 0);
	}
}
