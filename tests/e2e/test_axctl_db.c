/*
 * test_axctl_db.c - `axctl db` driven as a user drives it: the real axctl
 * binary (path in $AXCTL, set by tests/meson.build), a real embedded
 * cluster in a temp home, and a harness cluster for `--dsn`; the history
 * commands (maintain, archive, restore) and their bad input.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs.h"
#include "pg_harness.h"

#include "cli_run.h"

static char home[64];

/* Output (stdout then stderr) and exit status of the last run. */
static char out[16384];
static char err[16384];

#define axctl(...) AX_CLI_AXCTL(__VA_ARGS__)

static void
setup(void)
{
	unsetenv("AX_DSN");
	unsetenv("AX_HOME");
	snprintf(home, sizeof(home), "/tmp/ax-test-axctl-XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	cr_assert_eq(chmod(home, 0711), 0);
}

static void
teardown(void)
{
	axctl("db", "down", "--home", home, NULL);
	cr_assert_eq(ax_fs_rm_rf(home), AX_OK, "%s", ax_err_detail());
}

TestSuite(axctl_db, .init = setup, .fini = teardown, .timeout = 180);

#define HAS(buf, s)                                                           \
	cr_assert(strstr(buf, s) != NULL, "no '%s' in:\n%s", s, buf)

Test(axctl_db, up_status_migrate_down)
{
	int rc;

	rc = axctl("db", "status", "--home", home, NULL);
	cr_assert_eq(rc, 1, "status before up: %s%s", out, err);
	HAS(out, "not created");

	rc = axctl("db", "up", "--home", home, NULL);
	cr_assert_eq(rc, 0, "up: %s%s", out, err);
	HAS(out, "created and started");
	HAS(out, "schema: applied");

	rc = axctl("db", "status", "--home", home, NULL);
	cr_assert_eq(rc, 0, "status: %s%s", out, err);
	HAS(out, "server: running");
	HAS(out, "schema: migrated");
	HAS(out, home);

	/* migrate twice: nothing left to apply, both succeed. */
	for (int k = 0; k < 2; k++) {
		rc = axctl("db", "migrate", "--home", home, NULL);
		cr_assert_eq(rc, 0, "migrate #%d: %s%s", k + 1, out, err);
		HAS(out, "schema: up to date");
	}

	/* A second up reuses the running cluster. */
	rc = axctl("db", "up", "--home", home, NULL);
	cr_assert_eq(rc, 0, "second up: %s%s", out, err);
	HAS(out, "already running");

	rc = axctl("db", "psql", "--home", home, "--", "-At", "-c",
	           "SELECT current_database()", NULL);
	cr_assert_eq(rc, 0, "psql: %s%s", out, err);
	cr_assert_str_eq(out, "ax\n");

	rc = axctl("db", "down", "--home", home, NULL);
	cr_assert_eq(rc, 0, "down: %s%s", out, err);
	HAS(out, "server: stopped");

	rc = axctl("db", "status", "--home", home, NULL);
	cr_assert_eq(rc, 1, "status after down: %s%s", out, err);
	HAS(out, "server: stopped");

	rc = axctl("db", "down", "--home", home, NULL);
	cr_assert_eq(rc, 0, "second down: %s%s", out, err);
	HAS(out, "was not running");

	/* Restart keeps the schema: status after up says migrated. */
	rc = axctl("db", "up", "--home", home, NULL);
	cr_assert_eq(rc, 0, "restart: %s%s", out, err);
	HAS(out, "server: started");
	HAS(out, "schema: up to date");
}

/* AX_HOME is the default home when --home is not given. */
Test(axctl_db, home_from_environment)
{
	setenv("AX_HOME", home, 1);
	int rc = axctl("db", "status", NULL);
	cr_assert_eq(rc, 1);
	HAS(out, home);
}

/* --dsn: a database nobody migrated yet, migrated twice. */
Test(axctl_db, dsn_migrate_twice)
{
	ax_test_pg *pg;
	int         rc;
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
	const char *dsn = ax_test_pg_dsn(pg);

	rc = axctl("db", "status", "--dsn", dsn, NULL);
	cr_assert_eq(rc, 0, "%s%s", out, err);
	HAS(out, "server: reachable");
	HAS(out, "pending");

	rc = axctl("db", "migrate", "--dsn", dsn, NULL);
	cr_assert_eq(rc, 0, "%s%s", out, err);
	HAS(out, "schema: applied");

	rc = axctl("db", "migrate", "--dsn", dsn, NULL);
	cr_assert_eq(rc, 0, "%s%s", out, err);
	HAS(out, "schema: up to date");

	setenv("AX_DSN", dsn, 1);
	rc = axctl("db", "status", NULL);
	cr_assert_eq(rc, 0, "%s%s", out, err);
	HAS(out, "schema: migrated");

	/* axctl never stops a database it did not start. */
	rc = axctl("db", "down", NULL);
	cr_assert_eq(rc, 1);
	HAS(err, "DSN");
	ax_test_pg_stop(pg);
}

Test(axctl_db, dsn_without_server_fails)
{
	const char *dsn = "host=127.0.0.1 port=1 dbname=ax password=hunter2 "
	                  "connect_timeout=5";
	const char *cmds[] = { "status", "migrate", "up" };
	for (size_t k = 0; k < 3; k++) {
		int rc = axctl("db", cmds[k], "--dsn", dsn, NULL);
		cr_assert_eq(rc, 1, "db %s: %s%s", cmds[k], out, err);
		HAS(err, "axctl db ");
		HAS(err, "127.0.0.1");
		cr_assert(strstr(err, "hunter2") == NULL &&
		              strstr(out, "hunter2") == NULL,
		          "password shown: %s%s", out, err);
	}
}

Test(axctl_db, home_not_usable)
{
	char bad[128];
	snprintf(bad, sizeof(bad), "%s/file", home);
	FILE *f = fopen(bad, "w");
	cr_assert_not_null(f);
	fclose(f);
	strcat(bad, "/home");
	int rc = axctl("db", "up", "--home", bad, NULL);
	cr_assert_eq(rc, 1, "%s%s", out, err);
	HAS(err, bad);
}

Test(axctl_db, missing_pgbin)
{
	setenv("AX_PGBIN", "/nonexistent/bin", 1);
	int rc = axctl("db", "up", "--home", home, NULL);
	unsetenv("AX_PGBIN");
	cr_assert_eq(rc, 1, "%s%s", out, err);
	HAS(err, "/nonexistent/bin/");
	HAS(err, "AX_PGBIN");
}

Test(axctl_db, usage_errors_exit_2)
{
	cr_assert_eq(axctl("db", NULL), 2);
	HAS(err, "usage: axctl db");
	cr_assert_eq(axctl("db", "bogus", NULL), 2);
	HAS(err, "unknown command 'bogus'");
	cr_assert_eq(axctl("db", "up", "--home", NULL), 2);
	HAS(err, "--home needs a value");
	cr_assert_eq(axctl("db", "up", "--frob", NULL), 2);
	HAS(err, "--frob");
	cr_assert_eq(axctl("db", "up", "down", NULL), 2);
	cr_assert_eq(axctl("db", "--help", NULL), 0);
	HAS(out, "migrate");
}

/* Runs sql on dsn, asserting success. */
static void
pq_exec(const char *dsn, const char *sql)
{
	PGconn   *c = PQconnectdb(dsn);
	PGresult *r = PQexec(c, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK ||
	              PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* The first cell of sql on dsn as a number, asserting one row. */
static long long
pq_int(const char *dsn, const char *sql)
{
	PGconn   *c = PQconnectdb(dsn);
	PGresult *r = PQexec(c, sql);
	long long v;
	cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
	          "%s: %s", sql, PQerrorMessage(c));
	v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

Test(axctl_db, history_archive_restore_maintain_and_bad_input)
{
	ax_test_pg *pg;
	char        dir[128], f1[192], f2[192], bad[192];
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
	const char *dsn = ax_test_pg_dsn(pg);

	AX_CLI_EXPECT_RC(, 0, "db", "migrate", "--dsn", dsn);
	/* one finished run of 2025-01 with an instance, and its event */
	pq_exec(dsn,
	        "INSERT INTO dags (name) VALUES ('h'); INSERT INTO "
	        "dag_versions (dag_id, version, content_hash, yaml, "
	        "definition) SELECT id, 1, repeat('a', 64), 'x', '{}' FROM "
	        "dags; INSERT INTO dag_runs (dag_id, dag_version_id, "
	        "run_type, logical_date, interval_start, interval_end, state) "
	        "SELECT d.id, v.id, 'manual', '2025-01-10', '2025-01-10', "
	        "'2025-01-10', 'SUCCESS' FROM dags d JOIN dag_versions v ON "
	        "v.dag_id = d.id; INSERT INTO task_instances (dag_run_id, "
	        "dag_id, task, logical_time, state) SELECT id, dag_id, 't', "
	        "logical_date, 'SUCCESS' FROM dag_runs; SELECT "
	        "ax_part_create('event_log', '2025-01-01'); INSERT INTO "
	        "event_log (event_id, type, time) VALUES (gen_random_uuid(), "
	        "'old', '2025-01-10')");

	/* bad input: usage errors exit 2, bad directories 1 */
	AX_CLI_EXPECT_RC(, 2, "db", "archive", "--dsn", dsn);
	HAS(err, "--to DIR is required");
	AX_CLI_EXPECT_RC(, 2, "db", "archive", "--dsn", dsn, "--to", "/tmp",
	                 "--before", "2025-02-30");
	HAS(err, "expected a date YYYY-MM-DD");
	AX_CLI_EXPECT_RC(, 1, "db", "archive", "--dsn", dsn, "--to",
	                 "/nonexistent/dir", "--before", "2025-03-01");
	HAS(err, "/nonexistent/dir is not a writable directory");
	AX_CLI_EXPECT_RC(, 2, "db", "restore", "--dsn", dsn);
	HAS(err, "name the archive files");
	snprintf(bad, sizeof(bad), "%s/event_log_p202501.csv.gz", home);
	AX_CLI_EXPECT_RC(, 1, "db", "restore", "--dsn", dsn, bad);
	HAS(err, bad);

	snprintf(dir, sizeof(dir), "%s/archive", home);
	cr_assert_eq(mkdir(dir, 0700), 0);
	AX_CLI_EXPECT_RC(, 0, "db", "archive", "--dsn", dsn, "--to", dir,
	                 "--before", "2025-03-01");
	HAS(out, "archived: dag_runs (1 rows)");
	HAS(out, "archived: task_instances (1 rows)");
	HAS(out, "archived: event_log_p202501 (1 rows)");
	snprintf(f1, sizeof(f1), "%s/task_instances_runs_1-1.csv.gz", dir);
	snprintf(f2, sizeof(f2), "%s/dag_runs_runs_1-1.csv.gz", dir);
	/* given instances first: restore puts the runs before them */
	AX_CLI_EXPECT_RC(, 0, "db", "restore", "--dsn", dsn, f1, f2);
	HAS(out, "restored: ");
	AX_CLI_EXPECT_RC(, 1, "db", "restore", "--dsn", dsn, f2);
	HAS(err, "nothing restored");

	/* retention: the restored run is older than 180 days */
	AX_CLI_EXPECT_RC(, 0, "db", "maintain", "--dsn", dsn);
	HAS(out, "deleted   1 runs");

	/* the instance history: a run that ended two days ago moves out of
	 * the pipeline's tables; a run of 2025-02 in history leaves with its
	 * month as files, and comes back */
	static const char add_run[] =
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state, ended_at) "
	    "SELECT d.id, v.id, 'manual', t, t, t, 'SUCCESS', t + interval "
	    "'1 day' FROM dags d JOIN dag_versions v ON v.dag_id = d.id, "
	    "(SELECT (%s)::timestamptz AS t) x; INSERT INTO task_instances "
	    "(dag_run_id, dag_id, task, logical_time, state) SELECT id, "
	    "dag_id, 't', logical_date, 'SUCCESS' FROM dag_runs r WHERE NOT "
	    "EXISTS (SELECT 1 FROM task_instances_all i WHERE i.dag_run_id "
	    "= r.id)";
	char q[1024];
	snprintf(q, sizeof(q), add_run, "now() - interval '3 days'");
	pq_exec(dsn, q);
	AX_CLI_EXPECT_RC(, 0, "db", "maintain", "--dsn", dsn);
	HAS(out, "moved     1 runs");
	cr_assert_eq(pq_int(dsn, "SELECT count(*) FROM task_instances"), 0);
	/* a run of 2025-02, moved to history when it was recent */
	snprintf(q, sizeof(q), add_run, "'2025-02-10'");
	pq_exec(dsn, q);
	pq_exec(dsn, "SELECT ax_history_move(now(), '-infinity', 10)");
	snprintf(dir, sizeof(dir), "%s/archive2", home);
	cr_assert_eq(mkdir(dir, 0700), 0);
	AX_CLI_EXPECT_RC(, 0, "db", "archive", "--dsn", dsn, "--to", dir,
	                 "--before", "2025-03-01");
	HAS(out, "archived: task_instances_history_p202502 (1 rows)");
	HAS(out, "archived: dag_runs_p202502 (1 rows)");
	HAS(out, "archived: attempts_history_p202502 (0 rows)");
	snprintf(f1, sizeof(f1), "%s/task_instances_history_p202502.csv.gz",
	         dir);
	snprintf(f2, sizeof(f2), "%s/dag_runs_p202502.csv.gz", dir);
	AX_CLI_EXPECT_RC(, 0, "db", "restore", "--dsn", dsn, f1, f2);
	HAS(out, "restored: ");
	cr_assert_eq(pq_int(dsn,
	                    "SELECT count(*) FROM task_instances_all t "
	                    "JOIN dag_runs r ON r.id = t.dag_run_id WHERE "
	                    "r.logical_date = '2025-02-10'"),
	             1);
	ax_test_pg_stop(pg);
}
