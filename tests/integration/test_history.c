/*
 * test_history.c - event_log partitioned by month (migration 0015), the
 * instance history partitioned by month (0022) and
 * the history's retention, archive and restore (engine/history.c)
 * against a real PostgreSQL: a populated database of the previous schema
 * version converts without losing or changing a row and keeps every
 * constraint, ids and the id cursor; an event of any time finds a
 * partition and the writer's look-up reads one month; archive writes old
 * finished runs and old event months to files and removes them, keeps
 * what is unfinished and never overwrites a file; restore brings every
 * row back unchanged; retention deletes old finished runs and detaches
 * old event months; bad directories, names and files (not gzip, cut
 * short, bad rows) get errors that leave the database as it was. The
 * instance history (migration 0022): finished runs move to month
 * partitions and read back unchanged through the views, a run made active
 * again or restored brings its rows back, a deleted one takes them; old
 * months leave with their runs, as files, and restore whole.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
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

TestSuite(history, .init = setup, .fini = teardown, .timeout = 120);

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

/* The plan of q (EXPLAIN, one line per row) as a heap string. */
static char *
plan_of(const char *q)
{
	char      e[1200];
	PGresult *r;
	size_t    len = 0;
	char     *out = calloc(1, 8192);
	open_store();
	snprintf(e, sizeof(e), "EXPLAIN %s", q);
	cr_assert_eq(ax_store_query(st, e, 0, NULL, &r), AX_OK, "%s: %s", e,
	             ax_err_detail());
	for (int i = 0; i < PQntuples(r); i++)
		len += (size_t) snprintf(out + len, 8192 - len, "%s\n",
		                         PQgetvalue(r, i, 0));
	PQclear(r);
	return out;
}

/* The columns every schema version has, per history table. */
static const char *const snap_sql[] = {
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, dag_id, "
	"dag_version_id, run_type, logical_date, interval_start, "
	"interval_end, state, conf, created_at, started_at, ended_at, due_at, "
	"reason)::text, '|' ORDER BY id)), '') FROM dag_runs",
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, "
	"dag_run_id, dag_id, task, logical_time, shard, shard_total, state, "
	"reason, priority, channel, worker_group, pool, try_number, "
	"max_tries, created_at, updated_at, ready_at, started_at, "
	"ended_at)::text, '|' ORDER BY id)), '') FROM task_instances",
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, run_id, "
	"instance_id, number, state, worker_id, due_at, admitted_at, "
	"dispatched_at, started_at, ended_at, exit_status, log_path, reason, "
	"created_at, command)::text, '|' ORDER BY id)), '') FROM attempts",
	"SELECT count(*) || ':' || coalesce(md5(string_agg(row(id, event_id, "
	"type, time, dag_id, dag_run_id, instance_id, run_id, attempt, "
	"trace_id, reason, payload)::text, '|' ORDER BY id)), '') FROM "
	"event_log",
};

static const char *const tabs[] = { "dag_runs", "task_instances", "attempts",
	                            "event_log" };

/* Count and digest of every row of table t (0..3). */
static char *
snapshot(int t)
{
	return qstr(snap_sql[t]);
}

static void populate_instances(void);

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
	         "'%s 00:00+00'::timestamptz, '%s 00:00+00', '1 month') ts "
	         "ORDER BY ts, d.id",
	         from, to);
	sql(q);
	populate_instances();
}

/* Instances a and b with one attempt each for every run without
 * instances, two events per instance at the run's logical time. */
static void
populate_instances(void)
{
	sql("INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, priority, try_number, started_at, ended_at) "
	    "SELECT r.id, r.dag_id, t, r.logical_date, 'SUCCESS', 3, 1, "
	    "r.logical_date, r.logical_date + interval '1 second' FROM "
	    "dag_runs r, unnest(ARRAY['a', 'b']) t WHERE NOT EXISTS (SELECT 1 "
	    "FROM task_instances x WHERE x.dag_run_id = r.id) ORDER BY r.id, "
	    "t");
	sql("INSERT INTO attempts (run_id, instance_id, number, state, "
	    "worker_id, due_at, started_at, ended_at, exit_status, log_path, "
	    "command) SELECT gen_random_uuid(), ti.id, 1, 'SUCCESS', 'w1', "
	    "ti.logical_time, ti.started_at, ti.ended_at, 0, '/logs/' || "
	    "ti.id, 'echo ' || ti.task FROM task_instances ti WHERE NOT "
	    "EXISTS (SELECT 1 FROM attempts a WHERE a.instance_id = ti.id) "
	    "ORDER BY ti.id");
	sql("INSERT INTO event_log (event_id, type, time, dag_id, dag_run_id, "
	    "instance_id, reason, payload) SELECT gen_random_uuid(), "
	    "'instance.' || g, ti.logical_time, ti.dag_id, ti.dag_run_id, "
	    "ti.id, 'R' || g, jsonb_build_object('g', g) FROM task_instances "
	    "ti, generate_series(1, 2) g WHERE NOT EXISTS (SELECT 1 FROM "
	    "event_log e WHERE e.instance_id = ti.id) ORDER BY ti.id, g");
}

static void
migrate_to(size_t version)
{
	int applied = -1;
	cr_assert_eq(ax_migrate_run_set(ax_test_pg_dsn(pg), ax_migrations,
	                                version, &applied),
	             AX_OK, "%s", ax_err_detail());
}

Test(history, converts_a_populated_database_keeping_every_row)
{
	char   *before[4];
	int     applied = -1;
	int64_t burnt, first, second;

	migrate_to(14);
	populate("1970-01-10", "1970-01-10");
	populate("2025-10-10", "2026-01-10");
	/* an unfinished instance, an event id burnt by a rolled-back
	 * insert: neither may change or come back */
	sql("UPDATE task_instances SET state = 'PENDING' WHERE id = (SELECT "
	    "max(id) FROM task_instances)");
	sql("BEGIN");
	burnt = q64("INSERT INTO event_log (event_id, type) VALUES "
	            "(gen_random_uuid(), 'burnt') RETURNING id");
	sql("ROLLBACK");
	for (int t = 0; t < 4; t++)
		before[t] = snapshot(t);
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 40);

	ax_store_close(st);
	st = NULL;
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), &applied), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(applied, (int) ax_migrations_count - 14);

	for (int t = 0; t < 4; t++) {
		char *after = snapshot(t);
		cr_assert_str_eq(after, before[t], "%s changed", tabs[t]);
		free(after);
		free(before[t]);
	}
	cr_assert_eq(q64("SELECT count(*) FROM pg_class WHERE relname = "
	                 "'event_log' AND relkind = 'p'"),
	             1, "event_log is partitioned");
	cr_assert_eq(q64("SELECT count(*) FROM pg_class WHERE relname IN "
	                 "('dag_runs', 'task_instances', 'attempts') AND "
	                 "relkind = 'r'"),
	             3, "the instance tables stay plain tables");
	/* every row has its month; none fell into the default */
	cr_assert_eq(q64("SELECT count(*) FROM event_log_default"), 0);
	cr_assert_eq(q64("SELECT count(*) FROM event_log_p197001"), 8);
	cr_assert_eq(q64("SELECT count(*) FROM event_log_p202510"), 8);
	cr_assert_eq(q64("SELECT count(*) FROM ax_history_partitions() "
	                 "WHERE parent = 'event_log'"),
	             5 + 4,
	             "five months with rows and this month and 3 ahead");
	cr_assert_eq(q64("SELECT count(*) FROM ax_history_partitions() "
	                 "WHERE parent <> 'event_log'"),
	             2 * 4, "the instance history's month and 3 ahead (0022)");
	cr_assert_eq(q64("SELECT count(*) FROM pg_namespace WHERE nspname = "
	                 "'ax_migrate_0015'"),
	             0);

	/* the keys PostgreSQL still enforces */
	cr_assert_eq(sql_err("INSERT INTO event_log (event_id, type, time) "
	                     "SELECT event_id, 'again', time FROM event_log "
	                     "LIMIT 1"),
	             AX_EEXIST, "a re-sent event");
	cr_assert_eq(q64("WITH i AS (INSERT INTO event_log (event_id, type, "
	                 "time) SELECT event_id, 'again', time FROM event_log "
	                 "ORDER BY id LIMIT 1 ON CONFLICT (event_id, time) DO "
	                 "NOTHING RETURNING 1) SELECT count(*) FROM i"),
	             0, "the writer's re-send is a no-op");
	cr_assert_neq(sql_err("INSERT INTO event_log (id, event_id, type, "
	                      "time) SELECT id, gen_random_uuid(), 'dup', "
	                      "'2026-03-03' FROM event_log ORDER BY id LIMIT "
	                      "1"),
	              AX_OK, "an id of another month");
	cr_assert(strstr(ax_err_detail(),
	                 "non-DEFAULT value into column "
	                 "\"id\"") != NULL,
	          "%s", ax_err_detail());
	/* the append-only triggers on every partition */
	cr_assert_eq(sql_err("UPDATE event_log SET type = 'x'"), AX_EPERM);
	cr_assert_eq(sql_err("DELETE FROM event_log"), AX_EPERM);
	cr_assert_eq(sql_err("DELETE FROM event_log_p202510"), AX_EPERM);
	cr_assert_eq(sql_err("TRUNCATE event_log"), AX_EPERM);
	/* ids continue past every id handed out, and ascend in insert
	 * order whatever the month: `id > cursor` misses nothing */
	first  = q64("INSERT INTO event_log (event_id, type, time) VALUES "
	              "(gen_random_uuid(), 'late', '2026-01-20') RETURNING id");
	second = q64("INSERT INTO event_log (event_id, type, time) VALUES "
	             "(gen_random_uuid(), 'early', '1970-01-20') RETURNING "
	             "id");
	cr_assert_gt(first, burnt);
	cr_assert_gt(second, first);
	char q[256];
	snprintf(q, sizeof(q),
	         "SELECT string_agg(type, ',' ORDER BY id) FROM (SELECT id, "
	         "type FROM event_log WHERE id > %lld ORDER BY id LIMIT 5) x",
	         (long long) burnt);
	char *order = qstr(q);
	cr_assert_str_eq(order, "late,early");
	free(order);
}

Test(history, an_event_of_any_time_finds_a_partition_and_one_month_is_read)
{
	char *plan;
	int   created = -1;

	migrate_to(ax_migrations_count);
	sql("INSERT INTO event_log (event_id, type, time) VALUES "
	    "(gen_random_uuid(), 'far', '2999-01-01')");
	cr_assert_eq(q64("SELECT count(*) FROM event_log_default"), 1);
	/* that month cannot be made while the default holds its rows: it is
	 * skipped with a warning, nothing moves, nothing fails */
	cr_assert_eq(q64("SELECT ax_part_create('event_log', "
	                 "'2999-01-01')::int"),
	             0);
	cr_assert_eq(q64("SELECT count(*) FROM event_log_default"), 1);
	cr_assert_neq(sql_err("SELECT ax_part_create('task_instances', "
	                      "'2025-01-01')"),
	              AX_OK);
	cr_assert(strstr(ax_err_detail(), "not a partitioned history table") !=
	              NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(ax_history_ensure(st, 2, &created), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(created, 0, "the migration made these months already");
	cr_assert_eq(ax_history_ensure(st, 5, &created), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(created, 6,
	             "months 4 and 5 ahead of event_log and the instance "
	             "history");
	cr_assert_eq(ax_history_ensure(st, 121, &created), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "partitions_ahead") != NULL);

	/* the event writer's look-up of known ids (store_events.c) names
	 * the batch's time span: it reads this month's partition only */
	sql("SELECT ax_part_create('event_log', '2025-01-01'), "
	    "ax_part_create('event_log', '2025-02-01')");
	plan = plan_of("SELECT event_id FROM event_log WHERE event_id = "
	               "ANY('{01a2330f-92c5-7dda-8210-5fd96723d114}'::uuid[]) "
	               "AND time >= ax_ts(ax_us(now())) AND time <= "
	               "ax_ts(ax_us(now()))");
	cr_assert_null(strstr(plan, "event_log_p2025"), "%s", plan);
	cr_assert_null(strstr(plan, "event_log_default"), "%s", plan);
	free(plan);
	plan = plan_of("SELECT event_id FROM event_log WHERE event_id = "
	               "ANY('{01a2330f-92c5-7dda-8210-5fd96723d114}'::uuid[]) "
	               "AND time >= '2025-01-05' AND time <= '2025-01-06'");
	cr_assert_not_null(strstr(plan, "event_log_p202501"), "%s", plan);
	cr_assert_null(strstr(plan, "event_log_p202502"), "%s", plan);
	free(plan);
}

/* Event months 2025-01 and 2025-02; finished history in both (two runs
 * a month), and one PENDING instance in February (id returned). */
static int64_t
two_months(void)
{
	migrate_to(ax_migrations_count);
	sql("SELECT ax_part_create('event_log', m) FROM unnest(ARRAY["
	    "'2025-01-01', '2025-02-01']::date[]) m");
	populate("2025-01-10", "2025-02-10");
	return q64("UPDATE task_instances SET state = 'PENDING' WHERE id = "
	           "(SELECT max(id) FROM task_instances) RETURNING id");
}

typedef struct seen {
	char    names[32][80];
	char    paths[32][300];
	int64_t rows[32];
	int     n;
} seen;

static void
record(void *arg, const char *what, const char *name, const char *path,
       int64_t rows)
{
	seen *s = arg;
	if (s->n < 32) {
		snprintf(s->names[s->n], 80, "%s %s", what, name);
		snprintf(s->paths[s->n], 300, "%s", path != NULL ? path : "");
		s->rows[s->n] = rows;
		s->n++;
	}
}

/* Index of the first record starting with prefix, -1 if none. */
static int
seen_find(const seen *s, const char *prefix)
{
	for (int i = 0; i < s->n; i++)
		if (strncmp(s->names[i], prefix, strlen(prefix)) == 0)
			return i;
	return -1;
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

/* Restores every file s recorded, in rank order. */
static void
restore_all(const seen *s)
{
	int64_t rows = 0;
	for (int rank = 0; rank < 4; rank++)
		for (int i = 0; i < s->n; i++) {
			if (s->paths[i][0] == '\0' ||
			    ax_history_restore_rank(s->paths[i]) != rank)
				continue;
			cr_assert_eq(
			    ax_history_restore(st, s->paths[i], &rows), AX_OK,
			    "%s", ax_err_detail());
			cr_assert_eq(rows, s->rows[i], "%s", s->paths[i]);
		}
}

Test(history, archive_keeps_unfinished_then_round_trips)
{
	seen    s = { 0 };
	char   *before[4], path[512], dir2[300];
	int64_t rows = 0, pending = two_months();
	int     i;

	for (int t = 0; t < 4; t++)
		before[t] = snapshot(t);

	/* everything before March: three runs and both event months leave;
	 * the run of the PENDING instance stays */
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-03-01"), dir, record, &s),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(files_in(dir), 3 + 2);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 1);
	char q[200];
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances WHERE dag_run_id = "
	         "(SELECT dag_run_id FROM task_instances WHERE id = %lld)",
	         (long long) pending);
	cr_assert_eq(q64(q), 2, "the unfinished run keeps its instances");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 0);
	cr_assert_eq(q64("SELECT count(*) FROM pg_tables WHERE schemaname = "
	                 "'ax_archive'"),
	             0, "archived months are dropped");
	cr_assert_geq(i = seen_find(&s, "kept"), 0);
	cr_assert_eq(s.rows[i], 1);
	cr_assert_geq(i = seen_find(&s, "archived task_instances"), 0);
	cr_assert_eq(s.rows[i], 6);
	cr_assert_geq(i = seen_find(&s, "archived event_log_p202501"), 0);
	cr_assert_eq(s.rows[i], 8);

	/* restore in dependency order: every row back as it was */
	restore_all(&s);
	for (int t = 0; t < 4; t++) {
		char *after = snapshot(t);
		cr_assert_str_eq(after, before[t], "%s", tabs[t]);
		free(after);
	}
	/* a second restore of a file adds nothing */
	i = seen_find(&s, "archived task_instances");
	cr_assert_eq(ax_history_restore(st, s.paths[i], &rows), AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "nothing restored") != NULL);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 8);

	/* the files are still there: archiving the same runs again must not
	 * overwrite them, and leaves those rows in the database */
	seen s2 = { 0 };
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-03-01"), dir, record, &s2),
	    AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "refusing to overwrite") != NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 8);
	cr_assert_eq(files_in(dir), 5);
	snprintf(dir2, sizeof(dir2), "%s/second", dir);
	cr_assert_eq(mkdir(dir2, 0700), 0);
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-03-01"), dir2, record, &s2),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(files_in(dir2), 5);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 2);

	/* attempts before their instances: refused, nothing restored */
	i = seen_find(&s2, "archived attempts");
	cr_assert_geq(i, 0);
	cr_assert_eq(ax_history_restore(st, s2.paths[i], &rows), AX_ENOENT,
	             "%s", ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 2);
	snprintf(path, sizeof(path), "%s", s2.paths[i]);
	cr_assert_eq(ax_history_restore_rank(path), 2);
	for (int t = 0; t < 4; t++)
		free(before[t]);
}

/* Writes len bytes of data to path. */
static void
write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

Test(history, bad_directories_names_and_files)
{
	seen    s = { 0 };
	char    path[512], *buf;
	int64_t rows = -1;
	FILE   *f;
	long    size;

	two_months();
	cr_assert_eq(ax_history_archive(st, us_of("2025-03-01"),
	                                "/nonexistent/dir", NULL, NULL),
	             AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "/nonexistent/dir") != NULL &&
	              strstr(ax_err_detail(), "create it first") != NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 4,
	             "a bad directory removes nothing");
	cr_assert_eq(q64("SELECT count(*) FROM ax_history_partitions() WHERE "
	                 "detached"),
	             0);
	/* names */
	cr_assert_eq(ax_history_restore(st, "/tmp/whatever.csv.gz", &rows),
	             AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "<table>_pYYYYMM.csv.gz") != NULL &&
	              strstr(ax_err_detail(), "task_instances_history") !=
	                  NULL,
	          "%s", ax_err_detail());
	cr_assert_eq(
	    ax_history_restore(st, "/tmp/event_log_p202513.csv.gz", &rows),
	    AX_EINVAL);
	cr_assert_eq(
	    ax_history_restore(st, "/tmp/dag_runs_runs_1-x.csv.gz", &rows),
	    AX_EINVAL);
	cr_assert_eq(ax_history_restore_rank("/a/dag_runs_runs_1-9.csv.gz"),
	             0);
	cr_assert_eq(ax_history_restore_rank("event_log_p202501.csv.gz"), 3);
	snprintf(path, sizeof(path), "%s/dag_runs_runs_1-2.csv.gz", dir);
	cr_assert_eq(ax_history_restore(st, path, &rows), AX_EIO);
	cr_assert(strstr(ax_err_detail(), path) != NULL);
	/* not gzip: read as plain text, refused at its header */
	write_file(path, "id;drop table dags\n1\n", 21);
	cr_assert_eq(ax_history_restore(st, path, &rows), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "line 1") != NULL, "%s",
	          ax_err_detail());
	/* a good header, bad rows: all or nothing */
	write_file(path, "id,dag_id\n1,not-a-number\n", 25);
	cr_assert_neq(ax_history_restore(st, path, &rows), AX_OK);
	cr_assert_eq(rows, 0);
	cr_assert(strstr(ax_err_detail(), "nothing restored") != NULL, "%s",
	          ax_err_detail());
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 4);
	unlink(path);

	/* a real archive file cut short, then one with a damaged body */
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-02-01"), dir, record, &s),
	    AX_OK, "%s", ax_err_detail());
	int i = seen_find(&s, "archived event_log_p202501");
	cr_assert_geq(i, 0);
	f = fopen(s.paths[i], "r");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t) size);
	cr_assert_eq(fread(buf, 1, (size_t) size, f), (size_t) size);
	fclose(f);
	cr_assert_gt(size, 60);
	write_file(s.paths[i], buf, (size_t) size - 12);
	cr_assert_eq(ax_history_restore(st, s.paths[i], &rows), AX_EIO, "%s",
	             ax_err_detail());
	cr_assert(strstr(ax_err_detail(), "damaged or cut-short") != NULL &&
	              strstr(ax_err_detail(), "nothing restored") != NULL,
	          "%s", ax_err_detail());
	for (long k = 30; k < size - 20; k++)
		buf[k] ^= 0x5a;
	write_file(s.paths[i], buf, (size_t) size);
	cr_assert_neq(ax_history_restore(st, s.paths[i], &rows), AX_OK);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE time < "
	                 "'2025-02-01'"),
	             0, "nothing of a damaged file is restored");
	free(buf);
	cr_assert_eq(ax_history_cutoff(0, 0, &rows), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "history.retention_days") != NULL);
}

Test(history, retention_deletes_old_runs_detaches_old_months_keeps_the_rest)
{
	seen       s = { 0 };
	ax_config *cfg;
	int        i;

	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_config_int(cfg, "history.retention_days"), 180);
	ax_config_free(cfg);
	two_months();
	/* a run of ten days ago: inside the retention */
	sql("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state) SELECT id, "
	    "active_version_id, 'manual', now() - interval '10 days', now() - "
	    "interval '10 days', now() - interval '10 days', 'SUCCESS' FROM "
	    "dags WHERE name = 'h1'");
	cr_assert_eq(ax_history_maintain(st, 180, 24, 3, record, &s), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_geq(i = seen_find(&s, "deleted"), 0);
	cr_assert_eq(s.rows[i], 3);
	cr_assert_geq(i = seen_find(&s, "kept"), 0);
	cr_assert_eq(s.rows[i], 1, "the run with a PENDING instance stays");
	cr_assert_geq(seen_find(&s, "detached event_log_p202501"), 0);
	cr_assert_geq(seen_find(&s, "detached event_log_p202502"), 0);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs WHERE logical_date > "
	                 "now() - interval '11 days'"),
	             1, "recent history stays");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 2);
	cr_assert_eq(q64("SELECT count(*) FROM ax_archive.event_log_p202501"),
	             8, "detached rows stay in the database");
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 0);
	/* archive picks up what retention detached */
	s.n = 0;
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-01-01"), dir, record, &s),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(files_in(dir), 2);
	cr_assert_eq(q64("SELECT count(*) FROM pg_tables WHERE schemaname = "
	                 "'ax_archive'"),
	             0);
	cr_assert_eq(ax_history_maintain(st, 0, 24, 3, record, &s), AX_EINVAL);
}

/* snap_sql[t] read through the views of hot rows and history. */
static char *
snapshot_all(int t)
{
	char q[1200];
	snprintf(q, sizeof(q), "%s", snap_sql[t]);
	char *from = strstr(q, " FROM task_instances");
	if (from == NULL)
		from = strstr(q, " FROM attempts");
	if (from != NULL)
		strcat(from, "_all");
	return qstr(q);
}

Test(history, finished_runs_move_to_month_partitions_and_come_back)
{
	char   *before[3], q[400];
	int64_t moved = -1, rows = 0, pending = two_months();
	int     more = -1;
	seen    s    = { 0 };

	/* a run that finished ten days ago, one that ended a minute ago */
	sql("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state, started_at, "
	    "ended_at) SELECT id, active_version_id, 'manual', now() - "
	    "interval '10 days', now() - interval '10 days', now() - interval "
	    "'10 days', 'SUCCESS', now() - interval '10 days', now() - "
	    "interval '10 days' FROM dags WHERE name = 'h1' UNION ALL SELECT "
	    "id, active_version_id, 'manual', now() - interval '1 hour', "
	    "now() - interval '1 hour', now() - interval '1 hour', "
	    "'FAILED', now() - interval '1 hour', now() - interval '1 minute' "
	    "FROM dags WHERE name = 'h2'");
	populate_instances();
	for (int t = 0; t < 3; t++)
		before[t] = snapshot(t);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 12);

	/* runs that ended over an hour ago: the four old finished ones and
	 * the ten-day one; the one with a PENDING instance and the one that
	 * ended a minute ago stay hot */
	cr_assert_eq(ax_history_move(st, ax_clock_utc_us() - 3600000000LL,
	                             us_of("2000-01-01"), 0, &moved, &more),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(moved, 4);
	cr_assert_eq(more, 0);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances_history"), 8);
	cr_assert_eq(q64("SELECT count(*) FROM attempts_history"), 8);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs WHERE history_at IS "
	                 "NOT NULL"),
	             4);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances WHERE dag_run_id = "
	         "(SELECT dag_run_id FROM task_instances WHERE id = %lld)",
	         (long long) pending);
	cr_assert_eq(q64(q), 2, "a run with an unfinished instance stays hot");
	/* each month in its partition, none in the default ones */
	cr_assert_eq(
	    q64("SELECT count(*) FROM task_instances_history_p202501"), 4);
	cr_assert_eq(q64("SELECT count(*) FROM attempts_history_p202502"), 2);
	cr_assert_eq(q64("SELECT (SELECT count(*) FROM "
	                 "task_instances_history_default) + (SELECT count(*) "
	                 "FROM attempts_history_default)"),
	             0);
	/* the views read every row as it was; a look-up by id reads the
	 * history's month partitions through their indexes */
	for (int t = 0; t < 3; t++) {
		char *after = t == 0 ? snapshot(0) : snapshot_all(t);
		cr_assert_str_eq(after, before[t], "%s", tabs[t]);
		free(after);
	}
	/* nothing left to move */
	cr_assert_eq(ax_history_move(st, ax_clock_utc_us(),
	                             us_of("2000-01-01"), 0, &moved, &more),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(moved, 1, "the run that ended a minute ago");

	/* a run made RUNNING again (a clear) brings its rows back, ids and
	 * all, in the same statement */
	int64_t run = q64("SELECT min(id) FROM dag_runs");
	snprintf(q, sizeof(q),
	         "UPDATE dag_runs SET state = 'RUNNING' WHERE id = %lld",
	         (long long) run);
	sql(q);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances t JOIN attempts a ON "
	         "a.instance_id = t.id WHERE t.dag_run_id = %lld",
	         (long long) run);
	cr_assert_eq(q64(q), 2);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances_history WHERE "
	         "dag_run_id = %lld",
	         (long long) run);
	cr_assert_eq(q64(q), 0);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM dag_runs WHERE id = %lld AND "
	         "history_at IS NULL",
	         (long long) run);
	cr_assert_eq(q64(q), 1);
	/* a writer that changes an instance of a finished run restores it
	 * first; a hot run has nothing to restore */
	run = q64("SELECT max(id) FROM dag_runs WHERE history_at IS NOT NULL");
	snprintf(q, sizeof(q), "SELECT ax_history_restore_run(%lld)::int",
	         (long long) run);
	cr_assert_eq(q64(q), 1);
	cr_assert_eq(q64(q), 0);
	snprintf(q, sizeof(q), "SELECT ax_history_restore_run(-1)::int");
	cr_assert_eq(q64(q), 0);
	/* the same from C, by an instance of the run */
	int     back = -1;
	int64_t ti   = q64("SELECT max(id) FROM task_instances_history WHERE "
	                     "logical_time >= '2025-02-01'");
	cr_assert_eq(ax_history_restore_instance_run(st, ti, &back), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(back, 1);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances t JOIN attempts a ON "
	         "a.instance_id = t.id WHERE t.id = %lld",
	         (long long) ti);
	cr_assert_eq(q64(q), 1, "the instance and its attempt are hot");
	cr_assert_eq(ax_history_restore_instance_run(st, ti, &back), AX_OK);
	cr_assert_eq(back, 0);
	cr_assert_eq(ax_history_restore_instance_run(st, -5, &back), AX_OK);
	cr_assert_eq(back, 0);
	/* a deleted run takes its history rows with it */
	run = q64("SELECT max(id) FROM dag_runs WHERE history_at IS NOT NULL "
	          "AND logical_date < '2025-02-01'");
	snprintf(q, sizeof(q), "DELETE FROM dag_runs WHERE id = %lld",
	         (long long) run);
	sql(q);
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM task_instances_all WHERE dag_run_id = "
	         "%lld",
	         (long long) run);
	cr_assert_eq(q64(q), 0);
	cr_assert_eq(q64("SELECT count(*) FROM attempts_history WHERE "
	                 "instance_id NOT IN (SELECT id FROM "
	                 "task_instances_history)"),
	             0);

	/* the finished runs of January and February back to history, then
	 * archive: January and February of the instance history leave as
	 * month files with their runs; restore brings every row back */
	sql("UPDATE dag_runs SET state = 'SUCCESS' WHERE state = 'RUNNING'");
	cr_assert_eq(ax_history_move(st, ax_clock_utc_us(),
	                             us_of("2000-01-01"), 0, &moved, &more),
	             AX_OK, "%s", ax_err_detail());
	for (int t = 0; t < 3; t++) {
		free(before[t]);
		before[t] = t == 0 ? snapshot(0) : snapshot_all(t);
	}
	cr_assert_eq(
	    ax_history_archive(st, us_of("2025-03-01"), dir, record, &s),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_geq(seen_find(&s, "archived task_instances_history_p202501"),
	              0);
	cr_assert_geq(seen_find(&s, "archived attempts_history_p202502"), 0);
	int i = seen_find(&s, "archived dag_runs_p202501");
	cr_assert_geq(i, 0);
	cr_assert_eq(s.rows[i], 1, "January's runs less the one deleted");
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs WHERE logical_date < "
	                 "'2025-03-01'"),
	             1, "the run with a PENDING instance stays");
	cr_assert_eq(q64("SELECT count(*) FROM task_instances_all WHERE "
	                 "logical_time < '2025-03-01'"),
	             2);
	cr_assert_eq(q64("SELECT count(*) FROM ax_history_partitions() WHERE "
	                 "month_end <= '2025-03-01'"),
	             0, "the months left the database");
	restore_all(&s);
	for (int t = 0; t < 3; t++) {
		char *after = t == 0 ? snapshot(0) : snapshot_all(t);
		cr_assert_str_eq(after, before[t], "%s", tabs[t]);
		free(after);
		free(before[t]);
	}
	cr_assert_eq(ax_history_restore_rank("task_instances_history_p202501."
	                                     "csv.gz"),
	             1);
	cr_assert_eq(
	    ax_history_restore_rank("attempts_history_p202501.csv.gz"), 2);
	cr_assert_eq(ax_history_restore_rank("dag_runs_p202501.csv.gz"), 0);
	cr_assert_eq(ax_history_restore_rank("attempts_history_p2025.csv.gz"),
	             -1);
	(void) rows;
}

Test(history, maintain_moves_then_detaches_old_instance_months)
{
	seen s = { 0 };
	int  i;

	two_months();
	sql("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state, started_at, "
	    "ended_at) SELECT id, active_version_id, 'manual', now() - "
	    "interval '3 days', now() - interval '3 days', now() - interval "
	    "'3 days', 'SUCCESS', now() - interval '3 days', now() - "
	    "interval '2 days' FROM dags WHERE name = 'h1'");
	populate_instances();
	/* the finished runs of 2025 reach history (as if moved when they
	 * were recent) */
	cr_assert_eq(q64("SELECT ax_history_move('2025-03-01', '2025-01-01', "
	                 "100)"),
	             3);
	cr_assert_eq(ax_history_maintain(st, 180, 24, 3, record, &s), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_geq(i = seen_find(&s, "moved"), 0);
	cr_assert_eq(s.rows[i], 1, "the run that ended two days ago");
	/* history months older than the retention
	 * left for ax_archive with their runs, event months too */
	cr_assert_geq(seen_find(&s, "detached task_instances_history_p202501"),
	              0);
	cr_assert_geq(seen_find(&s, "detached dag_runs_p202501"), 0);
	cr_assert_geq(seen_find(&s, "detached attempts_history_p202502"), 0);
	cr_assert_eq(q64("SELECT count(*) FROM ax_archive.dag_runs_p202501"),
	             2);
	cr_assert_eq(q64("SELECT count(*) FROM "
	                 "ax_archive.task_instances_history_p202501"),
	             4);
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs"), 2,
	             "the recent run and the unfinished one");
	cr_assert_eq(q64("SELECT count(*) FROM dag_runs WHERE history_at IS "
	                 "NOT NULL AND logical_date > now() - interval '4 "
	                 "days'"),
	             1);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances_all"), 4);
	cr_assert_geq(i = seen_find(&s, "kept"), 0);
	cr_assert_eq(s.rows[i], 1);
	cr_assert_eq(ax_history_maintain(st, 180, -1, 3, record, &s),
	             AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "history.hot_hours") != NULL);
}
