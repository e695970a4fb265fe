/*
 * test_history.c - the history partitioned by month (migration 0014 and
 * engine/history.c) against a real PostgreSQL: a populated database of
 * the previous schema version converts without losing or changing a row
 * and keeps every constraint; an insert of any time finds a partition;
 * archive refuses a month with unfinished work, writes the others to
 * files and drops them; restore brings them back unchanged; retention
 * keeps what is unfinished; bad paths, names and files get errors.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "history.h"
#include "log.h"
#include "migrate.h"
#include "pg_harness.h"
#include "store.h"

static ax_test_pg *pg;
static ax_store   *st;
static char        dir[256];

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
	snprintf(dir, sizeof(dir), "/tmp/ax-test-history-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[300];
	ax_store_close(st);
	st = NULL;
	ax_test_pg_stop(pg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void) system(cmd);
}

TestSuite(history, .init = setup, .fini = teardown, .timeout = 240);

static void
open_store(void)
{
	if (st == NULL)
		cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK,
		             "%s", ax_err_detail());
}

static void
sql(const char *q)
{
	open_store();
	cr_assert_eq(ax_store_exec(st, q, 0, NULL), AX_OK, "%s: %s", q,
	             ax_err_detail());
}

static ax_err
sql_err(const char *q)
{
	open_store();
	return ax_store_exec(st, q, 0, NULL);
}

static int64_t
q64(const char *q)
{
	int64_t v = -1;
	open_store();
	cr_assert_eq(ax_store_query_int64(st, q, 0, NULL, &v), AX_OK, "%s: %s",
	             q, ax_err_detail());
	return v;
}

/* First cell of q as a heap string. */
static char *
qstr(const char *q)
{
	PGresult *r;
	char     *s;
	open_store();
	cr_assert_eq(ax_store_query(st, q, 0, NULL, &r), AX_OK, "%s: %s", q,
	             ax_err_detail());
	cr_assert_eq(PQntuples(r), 1, "%s", q);
	s = strdup(PQgetisnull(r, 0, 0) ? "NULL" : PQgetvalue(r, 0, 0));
	PQclear(r);
	return s;
}

/* The columns every schema version has, per history table. */
static const char *const snap_sql[] = {
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, dag_id, "
	"dag_version_id, run_type, logical_date, interval_start, "
	"interval_end, "
	"state, conf, created_at, started_at, ended_at, due_at, "
	"reason)::text, "
	"'|' ORDER BY id)), '') FROM dag_runs%s",
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, "
	"dag_run_id, "
	"dag_id, task, logical_time, shard, shard_total, state, reason, "
	"priority, channel, worker_group, pool, try_number, max_tries, "
	"created_at, updated_at, ready_at, started_at, ended_at)::text, '|' "
	"ORDER BY id)), '') FROM task_instances%s",
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, run_id, "
	"instance_id, number, state, worker_id, due_at, admitted_at, "
	"dispatched_at, started_at, ended_at, exit_status, log_path, reason, "
	"created_at, command)::text, '|' ORDER BY id)), '') FROM attempts%s",
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, event_id, "
	"type, time, dag_id, dag_run_id, instance_id, run_id, attempt, "
	"trace_id, reason, payload)::text, '|' ORDER BY id)), '') FROM "
	"event_log%s",
};

/* Count and digest of every row of table t (0..3), optionally filtered. */
static char *
snapshot(int t, const char *where)
{
	char q[1200];
	snprintf(q, sizeof(q), snap_sql[t], where != NULL ? where : "");
	return qstr(q);
}

/* Two DAGs; finished runs on the 10th of each month from..to (UTC
 * "YYYY-MM-DD"), instances a and b with one attempt each, two events per
 * instance at the run's logical time. */
static void
populate(const char *from, const char *to)
{
	char q[2400];
	sql("INSERT INTO dags (name) VALUES ('h1'), ('h2') ON CONFLICT DO "
	    "NOTHING");
	sql("INSERT INTO dag_versions (dag_id, version, content_hash, yaml, "
	    "definition) SELECT id, 1, repeat('a', 64), 'x', '{}' FROM dags "
	    "ON CONFLICT DO NOTHING");
	sql("UPDATE dags SET active_version_id = v.id FROM dag_versions v "
	    "WHERE v.dag_id = dags.id");
	snprintf(q, sizeof(q),
	         "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	         "logical_date, interval_start, interval_end, state, conf, "
	         "started_at, ended_at, due_at, reason) SELECT d.id, "
	         "d.active_version_id, 'scheduled', ts, ts, ts + interval "
	         "'1 day', 'SUCCESS', jsonb_build_object('k', d.id), ts, ts + "
	         "interval '1 minute', ts, NULL FROM dags d, generate_series("
	         "'%s 00:00+00'::timestamptz, '%s 00:00+00', '1 month') ts",
	         from, to);
	sql(q);
	sql("INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, priority, try_number, started_at, ended_at) "
	    "SELECT r.id, r.dag_id, t, r.logical_date, 'SUCCESS', 3, 1, "
	    "r.logical_date, r.logical_date + interval '1 second' FROM "
	    "dag_runs "
	    "r, unnest(ARRAY['a', 'b']) t WHERE NOT EXISTS (SELECT 1 FROM "
	    "task_instances x WHERE x.dag_run_id = r.id)");
	sql("INSERT INTO event_log (event_id, type, time, dag_id, dag_run_id, "
	    "instance_id, reason, payload) SELECT gen_random_uuid(), "
	    "'instance.' || g, ti.logical_time, ti.dag_id, ti.dag_run_id, "
	    "ti.id, 'R' || g, jsonb_build_object('g', g) FROM task_instances "
	    "ti, generate_series(1, 2) g WHERE NOT EXISTS (SELECT 1 FROM "
	    "event_log e WHERE e.instance_id = ti.id)");
}

/* One attempt per instance that has none: v13 for the schema of version 13
 * and before (no attempts.logical_time), 0 for a later one. */
static void
add_attempts(int v13)
{
	char q[1200];
	snprintf(
	    q, sizeof(q),
	    "INSERT INTO attempts (run_id, instance_id, %s number, state, "
	    "worker_id, due_at, started_at, ended_at, exit_status, "
	    "log_path, command) SELECT gen_random_uuid(), ti.id, %s 1, "
	    "'SUCCESS', 'w1', ti.logical_time, ti.started_at, ti.ended_at, "
	    "0, '/logs/' || ti.id, 'echo ' || ti.task FROM task_instances "
	    "ti WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE "
	    "a.instance_id = ti.id)",
	    v13 ? "" : "logical_time,", v13 ? "" : "ti.logical_time,");
	sql(q);
}

static void
migrate_to(size_t version)
{
	int applied = -1;
	cr_assert_eq(ax_migrate_run_set(ax_test_pg_dsn(pg), ax_migrations,
	                                version, &applied),
	             AX_OK, "%s", ax_err_detail());
}

static const char *const tabs[] = { "dag_runs", "task_instances", "attempts",
	                            "event_log" };

Test(history, converts_a_populated_database_keeping_every_row)
{
	char *before[4], q[512];
	int   applied = -1;

	migrate_to(13);
	populate("1970-01-10", "1970-01-10");
	populate("2025-10-10", "2026-01-10");
	add_attempts(1);
	/* an unfinished instance, a retried attempt, an id burnt by a
	 * deleted run: none may change or come back */
	sql("UPDATE task_instances SET state = 'PENDING' WHERE id = (SELECT "
	    "max(id) FROM task_instances)");
	sql("INSERT INTO attempts (run_id, instance_id, number, state, "
	    "due_at) "
	    "SELECT gen_random_uuid(), max(id), 2, 'QUEUED', now() FROM "
	    "task_instances");
	sql("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end) SELECT id, "
	    "active_version_id, 'manual', '2030-01-01', '2030-01-01', "
	    "'2030-01-01' FROM dags WHERE name = 'h1'");
	int64_t burnt = q64("SELECT max(id) FROM dag_runs");
	sql("DELETE FROM dag_runs WHERE id = (SELECT max(id) FROM dag_runs)");
	for (int t = 0; t < 4; t++)
		before[t] = snapshot(t, NULL);
	cr_assert(q64("SELECT count(*) FROM attempts") > 10);

	ax_store_close(st);
	st = NULL;
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, (int) ax_migrations_count - 13);

	for (int t = 0; t < 4; t++) {
		char *after = snapshot(t, NULL);
		cr_assert_str_eq(after, before[t], "%s changed", tabs[t]);
		free(after);
		free(before[t]);
		snprintf(
		    q, sizeof(q),
		    "SELECT count(*) FROM pg_class WHERE relname = '%s' AND "
		    "relkind = 'p'",
		    tabs[t]);
		cr_assert_eq(q64(q), 1, "%s is partitioned", tabs[t]);
		/* every row has its month; none fell into the default */
		snprintf(q, sizeof(q), "SELECT count(*) FROM %s_default",
		         tabs[t]);
		cr_assert_eq(q64(q), 0, "%s_default", tabs[t]);
	}
	cr_assert_eq(q64("SELECT count(*) FROM task_instances_p202510"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs_p197001"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM attempts a JOIN task_instances "
	                 "ti ON ti.id = a.instance_id WHERE a.logical_time = "
	                 "ti.logical_time"),
	             q64("SELECT count(*) FROM attempts"));
	cr_assert_eq(q64("SELECT count(*) FROM pg_namespace WHERE nspname = "
	                 "'ax_migrate_0014'"),
	             0);
	/* the list pages' indexes (0015) on every partition */
	cr_assert_eq(q64("SELECT count(*) FROM pg_class WHERE relkind = 'I' "
	                 "AND relname IN ('dag_runs_finished_bad_idx', "
	                 "'task_instances_finished_bad_idx', "
	                 "'event_log_dag_idx', 'event_log_type_idx')"),
	             4);
	cr_assert_eq(q64("SELECT count(*) FROM pg_indexes WHERE indexname = "
	                 "'task_instances_p202510_state_id_idx'"),
	             1);

	/* the keys PostgreSQL still enforces */
	cr_assert_eq(q64("WITH i AS (INSERT INTO task_instances (dag_run_id, "
	                 "dag_id, task, logical_time) SELECT dag_run_id, "
	                 "dag_id, task, logical_time FROM task_instances "
	                 "ORDER BY id LIMIT 1 ON CONFLICT (dag_id, task, "
	                 "logical_time, shard) DO NOTHING RETURNING 1) SELECT "
	                 "count(*) FROM i"),
	             0, "the instance key makes creation idempotent");
	cr_assert_eq(sql_err("INSERT INTO task_instances (dag_run_id, dag_id, "
	                     "task, logical_time) SELECT dag_run_id, dag_id, "
	                     "task, logical_time FROM task_instances ORDER BY "
	                     "id LIMIT 1"),
	             AX_EEXIST);
	cr_assert_eq(sql_err("INSERT INTO dag_runs (dag_id, dag_version_id, "
	                     "run_type, logical_date, interval_start, "
	                     "interval_end) SELECT dag_id, dag_version_id, "
	                     "'manual', logical_date, logical_date, "
	                     "logical_date FROM dag_runs LIMIT 1"),
	             AX_EEXIST, "one run per (dag, logical_date)");
	cr_assert_eq(sql_err("INSERT INTO attempts (run_id, instance_id, "
	                     "logical_time, number, due_at) SELECT "
	                     "gen_random_uuid(), instance_id, logical_time, "
	                     "number, now() FROM attempts LIMIT 1"),
	             AX_EEXIST, "one attempt per (instance, number)");
	cr_assert_eq(
	    q64("WITH i AS (INSERT INTO attempts (run_id, instance_id, "
	        "logical_time, number, due_at) SELECT gen_random_uuid(), "
	        "instance_id, logical_time, number, now() FROM attempts "
	        "ORDER BY id LIMIT 1 ON CONFLICT DO NOTHING RETURNING 1) "
	        "SELECT count(*) FROM i"),
	    0, "idempotent attempt creation");
	cr_assert_eq(sql_err("INSERT INTO attempts (run_id, instance_id, "
	                     "logical_time, number, due_at) SELECT a.run_id, "
	                     "a.instance_id, a.logical_time, 9, now() FROM "
	                     "attempts a LIMIT 1"),
	             AX_EEXIST, "run_id unique");
	cr_assert_eq(sql_err("INSERT INTO event_log (event_id, type, time) "
	                     "SELECT event_id, 'again', time FROM event_log "
	                     "LIMIT 1"),
	             AX_EEXIST, "a re-sent event");
	/* foreign keys */
	cr_assert_eq(sql_err("INSERT INTO attempts (run_id, instance_id, "
	                     "logical_time, number, due_at) VALUES "
	                     "(gen_random_uuid(), 999999, now(), 1, now())"),
	             AX_ENOENT);
	cr_assert_eq(sql_err("INSERT INTO task_instances (dag_run_id, dag_id, "
	                     "task, logical_time) SELECT id, dag_id, 'zz', "
	                     "logical_date + interval '1 second' FROM "
	                     "dag_runs LIMIT 1"),
	             AX_ENOENT, "an instance has its run's logical time");
	/* triggers */
	cr_assert_eq(sql_err("UPDATE task_instances SET state = 'RUNNING' "
	                     "WHERE state = 'SUCCESS'"),
	             AX_ESTATE, "the state machine guards every partition");
	cr_assert_eq(sql_err("UPDATE event_log SET type = 'x'"), AX_EPERM);
	cr_assert_eq(sql_err("DELETE FROM event_log"), AX_EPERM);
	cr_assert_eq(sql_err("TRUNCATE event_log"), AX_EPERM);
	/* ids continue past every id handed out, kept or not */
	cr_assert_gt(q64("INSERT INTO dag_runs (dag_id, dag_version_id, "
	                 "run_type, logical_date, interval_start, "
	                 "interval_end) SELECT id, active_version_id, "
	                 "'manual', '2031-05-05', '2031-05-05', '2031-05-05' "
	                 "FROM dags WHERE name = 'h1' RETURNING id"),
	             burnt);
	/* ids come from the identity sequences only: an id of another
	 * month (which the keys (id, time) alone would let in) is refused
	 * on every table; COPY (restore) writes ids, and a second restore
	 * of a file hits the keys (archive_refuses_unfinished_then_...) */
	static const char *const copy_id[] = {
		"INSERT INTO dag_runs (id, dag_id, dag_version_id, run_type, "
		"logical_date, interval_start, interval_end) SELECT id, "
		"dag_id, "
		"dag_version_id, 'manual', '2032-02-02', '2032-02-02', "
		"'2032-02-02' FROM dag_runs ORDER BY id LIMIT 1",
		"INSERT INTO task_instances (id, dag_run_id, dag_id, task, "
		"logical_time) SELECT ti.id, r.id, r.dag_id, 'dup', "
		"r.logical_date FROM task_instances ti, dag_runs r WHERE "
		"r.logical_date <> ti.logical_time ORDER BY ti.id, r.id LIMIT "
		"1",
		"INSERT INTO attempts (id, run_id, instance_id, logical_time, "
		"number, due_at) SELECT a.id, gen_random_uuid(), ti.id, "
		"ti.logical_time, 7, now() FROM attempts a, task_instances ti "
		"WHERE ti.logical_time <> a.logical_time ORDER BY a.id, ti.id "
		"LIMIT 1",
		"INSERT INTO event_log (id, event_id, type, time) SELECT id, "
		"gen_random_uuid(), 'dup', '2032-02-02' FROM event_log ORDER "
		"BY "
		"id LIMIT 1",
	};
	for (int t = 0; t < 4; t++) {
		cr_assert_neq(sql_err(copy_id[t]), AX_OK, "%s", tabs[t]);
		cr_assert(strstr(ax_err_detail(),
		                 "non-DEFAULT value into "
		                 "column \"id\"") != NULL,
		          "%s: %s", tabs[t], ax_err_detail());
		snprintf(q, sizeof(q),
		         "SELECT count(*) FROM (SELECT id FROM %s GROUP BY id "
		         "HAVING count(*) > 1) x",
		         tabs[t]);
		cr_assert_eq(q64(q), 0, "%s: an id twice", tabs[t]);
	}
	/* deleting a DAG still removes its history, in every month */
	sql("DELETE FROM dags WHERE name = 'h2'");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances ti JOIN dags d "
	                 "ON d.id = ti.dag_id"),
	             q64("SELECT count(*) FROM task_instances"));
	cr_assert_eq(q64("SELECT count(*) FROM attempts a WHERE NOT EXISTS "
	                 "(SELECT 1 FROM task_instances ti WHERE ti.id = "
	                 "a.instance_id)"),
	             0);
}

Test(history, conversion_refuses_an_instance_off_its_runs_time)
{
	int applied = -1;

	migrate_to(13);
	populate("2025-10-10", "2025-11-10");
	sql("INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time) SELECT id, dag_id, 'odd', logical_date + interval "
	    "'1 hour' FROM dag_runs ORDER BY id LIMIT 1");
	char *before = snapshot(1, NULL);
	ax_store_close(st);
	st = NULL;
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_EDB);
	cr_assert(strstr(ax_err_detail(), "logical_time is not their run") !=
	              NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(applied, 0);
	/* rolled back: the old table with every row */
	cr_assert_eq(q64("SELECT count(*) FROM pg_class WHERE relname = "
	                 "'task_instances' AND relkind = 'r'"),
	             1);
	char *after = snapshot(1, NULL);
	cr_assert_str_eq(after, before);
	free(after);
	free(before);
}

Test(history, any_time_finds_a_partition)
{
	migrate_to(ax_migrations_count);
	populate("1971-03-10", "1971-03-10");
	add_attempts(0);
	sql("INSERT INTO event_log (event_id, type, time) VALUES "
	    "(gen_random_uuid(), 'far', '2999-01-01')");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances_default"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM attempts_default"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM event_log_default"), 9);
	/* that month cannot be made while the default holds its rows: it is
	 * skipped with a warning, nothing moves, nothing fails */
	cr_assert_eq(q64("SELECT ax_part_create('task_instances', "
	                 "'1971-03-01')::int"),
	             0);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances_default"), 4);
	int created = -1;
	cr_assert_eq(ax_history_ensure(st, 2, &created), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(created, 0, "the migration made these months already");
	cr_assert_eq(ax_history_ensure(st, 121, &created), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "partitions_ahead") != NULL);
}

/* Month partitions for 2025-01 and 2025-02 with finished history, and
 * one PENDING instance in February (id returned). */
static int64_t
two_months(void)
{
	migrate_to(ax_migrations_count);
	sql("SELECT ax_part_create(t, m) FROM unnest(ARRAY['dag_runs', "
	    "'task_instances', 'attempts', 'event_log']) t, unnest(ARRAY["
	    "'2025-01-01', '2025-02-01']::date[]) m");
	populate("2025-01-10", "2025-02-10");
	add_attempts(0);
	return q64("UPDATE task_instances SET state = 'PENDING' WHERE id = "
	           "(SELECT max(id) FROM task_instances WHERE logical_time >= "
	           "'2025-02-01') RETURNING id");
}

typedef struct seen {
	char names[16][80];
	char paths[16][300];
	int  n;
} seen;

static void
record(void *arg, const char *what, const char *name, const char *path,
       int64_t rows)
{
	seen *s = arg;
	if (s->n < 16) {
		snprintf(s->names[s->n], 80, "%s %s", what, name);
		snprintf(s->paths[s->n], 300, "%s", path != NULL ? path : "");
		s->n++;
	}
}

static int64_t
us_of(const char *ts)
{
	char q[128];
	snprintf(q, sizeof(q), "SELECT ax_us('%s')", ts);
	return q64(q);
}

static int
files_in(const char *d)
{
	DIR           *dh = opendir(d);
	struct dirent *e;
	int            n = 0;
	cr_assert_not_null(dh);
	while ((e = readdir(dh)) != NULL)
		n += e->d_name[0] != '.';
	closedir(dh);
	return n;
}

static const char *const jan = " WHERE %s >= '2025-01-01' AND %s < "
                               "'2025-02-01'";

static char *
jan_snapshot(int t)
{
	char        w[160];
	const char *col = t == 0 ? "logical_date"
	    : t == 3             ? "time"
	                         : "logical_time";
	snprintf(w, sizeof(w), jan, col, col);
	return snapshot(t, w);
}

Test(history, archive_refuses_unfinished_then_round_trips)
{
	seen    s = { 0 };
	char   *before[4], path[512];
	int64_t pending = two_months(), rows = 0;

	for (int t = 0; t < 4; t++)
		before[t] = jan_snapshot(t);
	cr_assert(strncmp(before[2], "4:", 2) == 0, "%s", before[2]);

	/* February holds a PENDING instance: nothing leaves */
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-03-01"), dir, record, &s),
	    AX_ESTATE);
	char idtxt[32];
	snprintf(idtxt, sizeof(idtxt), "id %lld", (long long) pending);
	cr_assert(strstr(ax_err_detail(), "2025-02") != NULL &&
	              strstr(ax_err_detail(), idtxt) != NULL &&
	              strstr(ax_err_detail(), "unfinished") != NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(s.n, 0);
	cr_assert_eq(files_in(dir), 0);
	cr_assert_eq(q64("SELECT count(*) FROM ax_history_partitions() WHERE "
	                 "detached"),
	             0);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 8);

	/* January alone: four files, the rows gone, February untouched */
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-02-01"), dir, record, &s),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(files_in(dir), 4);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM pg_tables WHERE schemaname = "
	                 "'ax_archive'"),
	             0);
	int archived = 0;
	for (int i = 0; i < s.n; i++)
		archived += strncmp(s.names[i], "archived ", 9) == 0;
	cr_assert_eq(archived, 4);

	/* restore in dependency order: every row back as it was */
	for (int rank = 0; rank < 4; rank++)
		for (int i = 0; i < s.n; i++) {
			if (s.paths[i][0] == '\0' ||
			    ax_history_restore_rank(s.paths[i]) != rank)
				continue;
			cr_assert_eq(ax_history_restore(st, s.paths[i], &rows),
			             AX_OK, "%s", ax_err_detail());
			cr_assert_gt(rows, 0);
		}
	for (int t = 0; t < 4; t++) {
		char *after = jan_snapshot(t);
		cr_assert_str_eq(after, before[t], "%s", tabs[t]);
		free(after);
	}
	/* a second restore of a file adds nothing */
	snprintf(path, sizeof(path), "%s/task_instances_p202501.csv.gz", dir);
	cr_assert_eq(ax_history_restore(st, path, &rows), AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "nothing restored") != NULL);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 8);

	/* the files are still there: archiving January again must not
	 * overwrite them, and keeps the detached tables */
	s.n = 0;
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-02-01"), dir, record, &s),
	    AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "refusing to overwrite") != NULL);
	cr_assert(q64("SELECT count(*) FROM pg_tables WHERE schemaname = "
	              "'ax_archive'") >= 1);
	char dir2[300];
	snprintf(dir2, sizeof(dir2), "%s/second", dir);
	cr_assert_eq(mkdir(dir2, 0700), 0);
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-02-01"), dir2, record, &s),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(files_in(dir2), 4);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 4);

	/* attempts before their instances: refused, nothing restored */
	snprintf(path, sizeof(path), "%s/attempts_p202501.csv.gz", dir2);
	cr_assert_eq(ax_history_restore(st, path, &rows), AX_ENOENT, "%s",
	             ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 4);
	for (int t = 0; t < 4; t++)
		free(before[t]);
}

Test(history, bad_paths_names_and_files)
{
	char    path[512];
	int64_t rows = -1;
	FILE   *f;

	two_months();
	cr_assert_eq(ax_history_archive(st, us_of("2025-02-01"),
	                                "/nonexistent/dir", NULL, NULL),
	             AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "/nonexistent/dir") != NULL);
	cr_assert_eq(q64("SELECT count(*) FROM ax_history_partitions() WHERE "
	                 "detached"),
	             0, "a bad directory detaches nothing");
	cr_assert_eq(ax_history_restore(st, "/tmp/whatever.csv.gz", &rows),
	             AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "<table>_pYYYYMM.csv.gz") != NULL);
	cr_assert_eq(
	    ax_history_restore(st, "/tmp/dag_runs_p202513.csv.gz", &rows),
	    AX_EINVAL);
	snprintf(path, sizeof(path), "%s/dag_runs_p202401.csv.gz", dir);
	cr_assert_eq(ax_history_restore(st, path, &rows), AX_EIO);
	/* not gzip: read as plain text, refused at its header */
	f = fopen(path, "w");
	fputs("id;drop table dags\n1\n", f);
	fclose(f);
	cr_assert_eq(ax_history_restore(st, path, &rows), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "line 1") != NULL, "%s",
	          ax_err_detail());
	/* a good header, bad rows: all or nothing */
	f = fopen(path, "w");
	fputs("id,dag_id\n1,not-a-number\n", f);
	fclose(f);
	cr_assert_neq(ax_history_restore(st, path, &rows), AX_OK);
	cr_assert_eq(rows, 0);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 4);
	cr_assert_eq(ax_history_cutoff(0, 0, &rows), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "history.retention_days") != NULL);
}

Test(history, retention_detaches_old_months_and_keeps_unfinished)
{
	seen s    = { 0 };
	int  kept = -1;

	two_months();
	cr_assert_eq(ax_history_maintain(st, 180, 3, record, &s, &kept), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(kept, 1);
	int saw_kept = 0, detached = 0;
	for (int i = 0; i < s.n; i++) {
		saw_kept += strcmp(s.names[i], "kept 2025-02") == 0;
		detached += strncmp(s.names[i], "detached ", 9) == 0;
	}
	cr_assert_eq(saw_kept, 1);
	/* January's four, and February's events (events have no state) */
	cr_assert_eq(detached, 5);
	cr_assert_eq(q64("SELECT count(*) FROM ax_archive.task_instances_"
	                 "p202501"),
	             4, "detached rows stay in the database");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 4);
	/* archive picks up what retention detached */
	s.n = 0;
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-02-01"), dir, record, &s),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(files_in(dir), 5);
}
