/*
 * test_axctl_api.c - the real axctl binary as the client of ax-api: every
 * API subcommand (dag submit/list/show/pause/unpause/trigger/backfill,
 * run list/show, instance list/show/logs/kill/clear/mark, worker list,
 * events [--follow]) in table and --json form, against an ax-api running
 * in-process on a throwaway PostgreSQL (tests/api_fixture.h); tokens
 * from AX_TOKEN, --token-file and $AX_HOME/admin.token; a bad token, a
 * role too low and an unreachable server exit 1 with their message;
 * usage errors exit 2.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_fixture.h"
#include "cli_run.h"
#include "log.h"

static ax_api_fixture fx;
static char           dir[128]; /* temp folder: files, AX_HOME */
static char           out[65536], err[16384];

static const char *chain_yaml =
    "kind: DAG\n"
    "name: demo.chain\n"
    "owner: data\n"
    "schedule: {cron: \"0 0 * * * ?\"}\n"
    "params: {region: us, x: \"\"}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo a\"}\n"
    "  - {name: b, type: bash, command: \"echo b\", depends_on: [a]}\n"
    "  - {name: c, type: bash, command: \"echo c\", depends_on: [b]}\n";

static const char *bad_yaml =
    "kind: DAG\n"
    "name: demo.bad\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo a\", depends_on: [zzz]}\n";

static void
write_file(const char *name, const char *text, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void
make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ax-test-axctl-api-%d",
	         (int) getpid());
	mkdir(dir, 0700);
	setenv("AX_HOME", dir, 1); /* no admin.token there yet */
}

static void
remove_dir(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	make_dir();
	ax_api_fixture_start(&fx, 0);
	setenv("AX_SERVER", fx.url, 1);
	setenv("AX_TOKEN", fx.admin, 1);
}

static void
teardown(void)
{
	ax_api_fixture_stop(&fx);
	remove_dir();
}

TestSuite(axctl_api, .init = setup, .fini = teardown, .timeout = 120);

#define AXCTL(...) AX_CLI_AXCTL(__VA_ARGS__, NULL)

/* Runs axctl and asserts its exit status; out / err hold the output. */
#define EXPECT_RC(rc, ...) AX_CLI_EXPECT_RC((void) 0, rc, __VA_ARGS__)

/* stdout parsed as JSON (new reference; fails the test otherwise). */
static json_t *
out_json(void)
{
	json_error_t e;
	json_t      *j = json_loads(out, 0, &e);
	cr_assert_not_null(j, "stdout is not JSON (%s): %s", e.text, out);
	return j;
}

/* 1 when some line of text starts with the words of want, columns
 * separated by runs of spaces (so tables are checked cell by cell). */
static int
has_row(const char *text, const char *const *cells)
{
	const char *line = text;
	while (line && *line) {
		const char *p  = line;
		int         ok = 1;
		for (const char *const *c = cells; *c && ok; c++) {
			size_t n = strlen(*c);
			if (strncmp(p, *c, n) != 0 ||
			    (p[n] != ' ' && p[n] != '\n' && p[n] != '\0'))
				ok = 0;
			p += n;
			while (*p == ' ')
				p++;
		}
		if (ok)
			return 1;
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return 0;
}

#define ROW(...) ((const char *const[]) { __VA_ARGS__, NULL })

static void
submit_chain(void)
{
	char path[256];
	write_file("chain.yaml", chain_yaml, path, sizeof(path));
	EXPECT_RC(0, "dag", "submit", path);
	/* delivered asynchronously: wait for it, so it is not mistaken
	 * for the next request's */
	json_decref(ax_api_fixture_notify(&fx));
	ax_api_fixture_drain(&fx);
}

/* ---- DAG subcommands ---------------------------------------------------- */

Test(axctl_api, dag_submit_list_show)
{
	char    path[256], bad[256];
	json_t *j;

	write_file("chain.yaml", chain_yaml, path, sizeof(path));
	EXPECT_RC(0, "dag", "submit", path);
	cr_expect(has_row(out, ROW("KIND", "NAME", "OUTCOME", "VERSION")),
	          "%s", out);
	cr_expect(has_row(out, ROW("dag", "demo.chain", "created", "v1")),
	          "%s", out);
	EXPECT_RC(0, "dag", "submit", "--json", path);
	j = out_json();
	cr_expect_str_eq(
	    json_string_value(json_object_get(
	        json_array_get(json_object_get(j, "dags"), 0), "outcome")),
	    "unchanged");
	json_decref(j);

	/* validation errors: FILE:LINE:COL: error: MSG, as `dag validate` */
	write_file("bad.yaml", bad_yaml, bad, sizeof(bad));
	EXPECT_RC(1, "dag", "validate", bad);
	char want[1024];
	snprintf(want, sizeof(want), "%.*s", (int) strcspn(err, "\n"), err);
	cr_assert(strstr(want, ": error: ") != NULL, "%s", err);
	EXPECT_RC(1, "dag", "submit", bad);
	cr_expect(strncmp(err, want, strlen(want)) == 0,
	          "submit: %s\nvalidate: %s", err, want);
	cr_expect(strstr(err, "bad.yaml:4:") != NULL, "%s", err);
	cr_expect(strstr(err, "zzz") != NULL, "%s", err);
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM dags "
	                                "WHERE name = 'demo.bad'"),
	             0);
	EXPECT_RC(1, "dag", "submit", "/nonexistent/x.yaml");
	cr_expect(strstr(err, "cannot read /nonexistent/x.yaml") != NULL, "%s",
	          err);

	EXPECT_RC(0, "dag", "list");
	cr_expect(has_row(out,
	                  ROW("NAME", "VERSION", "PAUSED", "OWNER", "SCHEDULE",
	                      "UPDATED")),
	          "%s", out);
	cr_expect(
	    has_row(out, ROW("demo.chain", "1", "no", "data", "0 0 * * * ?")),
	    "%s", out);
	cr_expect(strstr(out, "(has errors)") == NULL);
	EXPECT_RC(0, "dag", "list", "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "dags")), 1);
	json_decref(j);

	EXPECT_RC(0, "dag", "show", "demo.chain");
	cr_expect(has_row(out, ROW("name:", "demo.chain")), "%s", out);
	cr_expect(has_row(out, ROW("paused:", "no")), "%s", out);
	cr_expect(has_row(out, ROW("b", "bash", "a")), "%s", out);
	cr_expect(has_row(out, ROW("a", "bash", "-")), "%s", out);
	cr_expect(has_row(out, ROW("1", "yes")), "versions: %s", out);
	/* times are ISO 8601 UTC to the second */
	cr_expect(strstr(out, "created_at:") != NULL &&
	              strstr(strstr(out, "created_at:"), "Z\n") != NULL,
	          "%s", out);
	EXPECT_RC(0, "dag", "show", "demo.chain", "--json");
	j = out_json();
	cr_expect_str_eq(json_string_value(json_object_get(j, "name")),
	                 "demo.chain");
	cr_expect(json_is_object(json_object_get(j, "definition")));
	json_decref(j);
	EXPECT_RC(1, "dag", "show", "nope");
	cr_expect(strstr(err, "not_found: no DAG named 'nope'") != NULL, "%s",
	          err);
}

Test(axctl_api, dag_pause_trigger_backfill)
{
	json_t *n, *j;

	submit_chain();
	EXPECT_RC(0, "dag", "pause", "demo.chain");
	cr_expect(strncmp(out, "paused demo.chain\ncommand ", 26) == 0, "%s",
	          out);
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT paused::int FROM dags"),
	             1);
	n = ax_api_fixture_notify(&fx);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "paused");
	json_decref(n);
	EXPECT_RC(0, "dag", "unpause", "demo.chain", "--json");
	j = out_json();
	cr_expect(json_is_false(json_object_get(j, "paused")));
	json_decref(j);
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT paused::int FROM dags"),
	             0);
	EXPECT_RC(1, "dag", "pause", "nope");
	cr_expect(strstr(err, "not_found") != NULL, "%s", err);

	ax_api_fixture_drain(&fx);
	EXPECT_RC(0, "dag", "trigger", "demo.chain", "--date",
	          "2024-03-01T10:00:00Z", "--param", "region=eu", "--param",
	          "x=a=b");
	cr_expect(strstr(out,
	                 "triggered demo.chain: logical date "
	                 "2024-03-01T10:00:00Z") != NULL,
	          "%s", out);
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "trigger");
	cr_expect_eq(json_integer_value(json_object_get(n, "logical_date_us")),
	             1709287200000000LL);
	json_t *p = json_object_get(n, "params");
	cr_expect_str_eq(json_string_value(json_object_get(p, "region")),
	                 "eu");
	cr_expect_str_eq(json_string_value(json_object_get(p, "x")), "a=b");
	json_decref(n);
	EXPECT_RC(0, "dag", "trigger", "demo.chain", "--json");
	j = out_json();
	cr_expect(json_is_integer(json_object_get(j, "logical_date_us")));
	json_decref(j);
	EXPECT_RC(1, "dag", "trigger", "demo.chain", "--date", "soon");
	cr_expect(strstr(err, "invalid: 'logical_date'") != NULL, "%s", err);
	EXPECT_RC(2, "dag", "trigger", "demo.chain", "--param", "novalue");

	/* hourly: [00:00, 03:00] holds 4 periods */
	EXPECT_RC(0, "dag", "backfill", "demo.chain", "--start",
	          "2024-01-01T00:00:00Z", "--end", "2024-01-01T03:00:00Z",
	          "--mode", "parallel");
	cr_expect(strstr(out,
	                 "backfill demo.chain (parallel): 4 runs "
	                 "created, 0 skipped") != NULL,
	          "%s", out);
	cr_expect(has_row(out, ROW("RUN", "LOGICAL_DATE")), "%s", out);
	cr_expect(strstr(out, "2024-01-01T03:00:00Z") != NULL, "%s", out);
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM dag_runs "
	                                "WHERE run_type = 'backfill'"),
	             4);
	EXPECT_RC(0, "dag", "backfill", "demo.chain", "--start",
	          "2024-01-01T00:00:00Z", "--end", "2024-01-01T04:00:00Z",
	          "--json");
	j = out_json();
	cr_expect_eq(json_integer_value(json_object_get(j, "created")), 1);
	cr_expect_eq(json_integer_value(json_object_get(j, "skipped")), 4);
	json_decref(j);
	EXPECT_RC(1, "dag", "backfill", "demo.chain", "--start",
	          "2024-01-02T00:00:00Z", "--end", "2024-01-01T00:00:00Z");
	cr_expect(strstr(err, "'end' is before 'start'") != NULL, "%s", err);
	EXPECT_RC(2, "dag", "backfill", "demo.chain", "--start",
	          "2024-01-01T00:00:00Z");
	EXPECT_RC(2, "dag", "backfill", "demo.chain", "--start", "a", "--end",
	          "b", "--mode", "fast");
}

/* ---- runs, instances, workers, events ---------------------------------- */

static char logpath[256];

/* One manual run of demo.chain: a SUCCESS, b RUNNING (attempt 1 logging
 * to logpath), c PENDING; returns b's id. */
static int64_t
make_run(void)
{
	submit_chain();
	snprintf(logpath, sizeof(logpath), "%s/b.log", dir);
	ax_api_fixture_sql(&fx,
	                   "INSERT INTO dag_runs (dag_id, "
	                   "dag_version_id, run_type, logical_date, "
	                   "interval_start, interval_end, started_at) "
	                   "SELECT id, active_version_id, 'manual', "
	                   "ax_ts(1704067200000000), ax_ts(0), ax_ts(0), "
	                   "ax_ts(1704067205000000) FROM dags");
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, reason) SELECT r.id, r.dag_id, t.task, "
	    "r.logical_date, t.state, t.reason FROM dag_runs r, (VALUES "
	    "('a', 'SUCCESS', NULL), ('b', 'RUNNING', NULL), "
	    "('c', 'PENDING', 'WAIT_DEPENDENCY')) AS t(task, state, "
	    "reason)");
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO attempts (run_id, instance_id, number, "
	    "state, due_at, log_path) SELECT gen_random_uuid(), "
	    "id, 1, 'RUNNING', now(), '%s' FROM task_instances "
	    "WHERE task = 'b'",
	    logpath);
	return ax_api_fixture_int(&fx,
	                          "SELECT id FROM task_instances WHERE "
	                          "task = 'b'");
}

Test(axctl_api, runs_and_instances)
{
	int64_t b   = make_run();
	int64_t a   = ax_api_fixture_int(&fx,
	                                 "SELECT id FROM task_instances "
	                                   "WHERE task = 'a'");
	int64_t c   = ax_api_fixture_int(&fx,
	                                 "SELECT id FROM task_instances "
	                                   "WHERE task = 'c'");
	int64_t run = ax_api_fixture_int(&fx, "SELECT id FROM dag_runs");
	char    bs[24], as[24], cs[24], rs[24];
	json_t *j, *n;

	snprintf(bs, sizeof(bs), "%lld", (long long) b);
	snprintf(as, sizeof(as), "%lld", (long long) a);
	snprintf(cs, sizeof(cs), "%lld", (long long) c);
	snprintf(rs, sizeof(rs), "%lld", (long long) run);

	EXPECT_RC(0, "run", "list");
	cr_expect(has_row(out,
	                  ROW("ID", "DAG", "TYPE", "LOGICAL_DATE", "STATE",
	                      "STARTED", "ENDED")),
	          "%s", out);
	cr_expect(
	    has_row(out,
	            ROW(rs, "demo.chain", "manual", "2024-01-01T00:00:00Z",
	                "QUEUED", "2024-01-01T00:00:05Z", "-")),
	    "%s", out);
	EXPECT_RC(0, "run", "list", "--dag", "demo.chain", "--state", "QUEUED",
	          "--limit", "5", "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "runs")), 1);
	json_decref(j);
	EXPECT_RC(0, "run", "list", "--state", "FAILED");
	cr_expect(!has_row(out, ROW(rs)), "%s", out);
	EXPECT_RC(1, "run", "list", "--state", "DONE");
	cr_expect(strstr(err, "invalid: state 'DONE'") != NULL, "%s", err);
	EXPECT_RC(0, "run", "show", rs);
	cr_expect(has_row(out, ROW("state:", "QUEUED")), "%s", out);
	cr_expect(strstr(out, "RUNNING=1") && strstr(out, "SUCCESS=1") &&
	              strstr(out, "PENDING=1"),
	          "%s", out);
	EXPECT_RC(0, "run", "show", rs, "--json");
	j = out_json();
	cr_expect_eq(json_integer_value(json_object_get(j, "id")), run);
	json_decref(j);
	EXPECT_RC(1, "run", "show", "999999");
	cr_expect(strstr(err, "not_found: no run 999999") != NULL, "%s", err);

	EXPECT_RC(0, "instance", "list", "--dag", "demo.chain");
	cr_expect(has_row(out,
	                  ROW("ID", "DAG", "RUN", "TASK", "SHARD", "STATE",
	                      "REASON", "TRY")),
	          "%s", out);
	cr_expect(has_row(out,
	                  ROW(cs, "demo.chain", rs, "c", "0", "PENDING",
	                      "WAIT_DEPENDENCY")),
	          "%s", out);
	EXPECT_RC(0, "instance", "list", "--run", rs, "--state", "RUNNING",
	          "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "instances")), 1);
	json_decref(j);
	EXPECT_RC(0, "instance", "show", bs);
	cr_expect(has_row(out, ROW("task:", "b")), "%s", out);
	cr_expect(has_row(out, ROW("ATTEMPT", "STATE", "WORKER")), "%s", out);
	cr_expect(has_row(out, ROW("1", "RUNNING", "-")), "%s", out);
	/* attempt times come from PostgreSQL JSON: shown in UTC as Z too */
	cr_expect(strstr(out, "+00:00") == NULL, "%s", out);
	EXPECT_RC(0, "instance", "show", bs, "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "attempts")), 1);
	json_decref(j);
	EXPECT_RC(1, "instance", "show", "999999");
	cr_expect(strstr(err, "not_found") != NULL, "%s", err);

	/* kill / clear / mark need an operator; then the notification */
	ax_api_fixture_drain(&fx);
	EXPECT_RC(0, "instance", "kill", bs);
	cr_expect(strstr(out, "kill of instance") && strstr(out, "RUNNING"),
	          "%s", out);
	n = ax_api_fixture_notify(&fx);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")), "kill");
	cr_expect_eq(json_integer_value(json_object_get(n, "instance_id")), b);
	json_decref(n);
	EXPECT_RC(1, "instance", "kill", as);
	cr_expect(strstr(err, "illegal_state") != NULL, "%s", err);
	EXPECT_RC(0, "instance", "clear", as, "--downstream");
	cr_expect(strstr(out, "and its downstream") != NULL, "%s", out);
	n = ax_api_fixture_notify(&fx);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")), "clear");
	cr_expect(json_is_true(json_object_get(n, "downstream")));
	json_decref(n);
	EXPECT_RC(0, "instance", "clear", as, "--json");
	j = out_json();
	cr_expect(json_is_false(
	    json_object_get(json_object_get(j, "requested"), "downstream")));
	json_decref(j);
	EXPECT_RC(0, "instance", "mark", bs, "success");
	cr_expect(strstr(out, "RUNNING -> SUCCESS") != NULL, "%s", out);
	EXPECT_RC(1, "instance", "mark", cs, "failed");
	cr_expect(strstr(err, "PENDING -> FAILED") != NULL, "%s", err);
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM "
	                                "task_instances WHERE state = "
	                                "'SUCCESS' AND reason = "
	                                "'MANUAL_MARK'"),
	             1);

	/* a viewer may read but not act */
	char tf[256];
	write_file("viewer.token", fx.viewer, tf, sizeof(tf));
	EXPECT_RC(0, "instance", "list", "--token-file", tf);
	EXPECT_RC(1, "instance", "kill", cs, "--token-file", tf);
	cr_expect(strstr(err, "axctl instance kill: forbidden: ") != NULL,
	          "%s", err);
}

Test(axctl_api, workers_and_events)
{
	int64_t b = make_run();
	char    bs[24];
	json_t *j;

	snprintf(bs, sizeof(bs), "%lld", (long long) b);
	ax_api_fixture_sql(&fx,
	                   "INSERT INTO workers (id, worker_group, "
	                   "slots, used_slots, hostname, pid, "
	                   "lease_expires_at, last_heartbeat_at) VALUES "
	                   "('w1', 'default', 4, 1, 'host1', 42, now(), "
	                   "'2024-01-01T00:00:09.5Z')");
	EXPECT_RC(0, "worker", "list");
	cr_expect(has_row(out,
	                  ROW("ID", "GROUP", "STATE", "SLOTS", "USED", "HOST",
	                      "PID", "HEARTBEAT")),
	          "%s", out);
	cr_expect(has_row(out,
	                  ROW("w1", "default", "ACTIVE", "4", "1", "host1",
	                      "42", "2024-01-01T00:00:09Z")),
	          "%s", out);
	EXPECT_RC(0, "worker", "list", "--json");
	j = out_json();
	cr_expect_str_eq(
	    json_string_value(json_object_get(
	        json_array_get(json_object_get(j, "workers"), 0), "id")),
	    "w1");
	json_decref(j);

	EXPECT_RC(0, "instance", "mark", bs, "failed");
	EXPECT_RC(0, "events", "--dag", "demo.chain");
	cr_expect(has_row(out,
	                  ROW("ID", "TIME", "TYPE", "DAG", "RUN", "INSTANCE",
	                      "REASON")),
	          "%s", out);
	cr_expect(strstr(out, "instance.marked") != NULL, "%s", out);
	cr_expect(strstr(out, "MANUAL_MARK") != NULL, "%s", out);
	EXPECT_RC(0, "events", "--instance", bs, "--type", "instance.marked",
	          "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "events")), 1, "%s",
	             out);
	json_decref(j);
	EXPECT_RC(0, "events", "--since", "2999-01-01T00:00:00Z", "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "events")), 0);
	json_decref(j);
	EXPECT_RC(1, "events", "--since", "soon");
	cr_expect(strstr(err, "invalid: 'since'") != NULL, "%s", err);
}

/* Inserts an event after a second, while `events --follow` runs. */
static void *
late_event(void *arg)
{
	ax_store *s2;
	usleep(1200000);
	if (ax_store_open(ax_test_pg_dsn(fx.pg), &s2) == AX_OK) {
		ax_store_exec(s2,
		              "INSERT INTO event_log (event_id, type, reason) "
		              "VALUES (gen_random_uuid(), 'test.late', "
		              "'LATE_ONE')",
		              0, NULL);
		ax_store_close(s2);
	}
	return NULL;
}

Test(axctl_api, events_follow)
{
	pthread_t th;
	int       rc;

	ax_api_fixture_sql(&fx,
	                   "INSERT INTO event_log (event_id, type, "
	                   "reason) VALUES (gen_random_uuid(), "
	                   "'test.early', 'EARLY_ONE')");
	cr_assert_eq(pthread_create(&th, NULL, late_event, NULL), 0);
	/* SIGINT after 3 s: the follow ends cleanly with status 0. One
	 * still running 10 s later is killed (status 137), so that a follow
	 * that missed its SIGINT fails here with its output instead of
	 * hanging until the suite's timeout (seen once under the sanitizers,
	 * four tests at a time). */
	rc = ax_cli_run(out, sizeof(out), err, sizeof(err), "/usr/bin/timeout",
	                "--preserve-status", "-k", "10", "-s", "INT", "3",
	                getenv("AXCTL"), "events", "--follow", NULL);
	pthread_join(th, NULL);
	cr_expect_eq(rc, 0, "stderr: %s", err);
	cr_expect(has_row(out, ROW("ID", "TIME", "TYPE")), "%s", out);
	cr_expect(strstr(out, "EARLY_ONE") != NULL, "%s", out);
	cr_expect(strstr(out, "LATE_ONE") != NULL, "polled later: %s", out);
	cr_expect(strstr(out, "EARLY_ONE") < strstr(out, "LATE_ONE"));
	/* --json: one object per line */
	rc = ax_cli_run(out, sizeof(out), err, sizeof(err), "/usr/bin/timeout",
	                "--preserve-status", "-k", "10", "-s", "INT", "2",
	                getenv("AXCTL"), "events", "--follow", "--json",
	                "--type", "test.late", NULL);
	cr_expect_eq(rc, 0, "stderr: %s", err);
	json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	cr_assert_not_null(j, "%s", out);
	cr_expect_str_eq(json_string_value(json_object_get(j, "reason")),
	                 "LATE_ONE");
	cr_expect(strchr(out, '\n') == out + strlen(out) - 1, "%s", out);
	json_decref(j);
}

static void
write_log(const char *text, const char *mode)
{
	FILE *f = fopen(logpath, mode);
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* Appends to the log once the follow below has read it (arg: an
 * inotify descriptor watching the log for IN_ACCESS, the server's first
 * read, which fixes where the tail starts), then ends the attempt. A
 * fixed delay instead made the test depend on how fast axctl started. */
static void *
append_then_end(void *arg)
{
	struct pollfd p = { .fd = *(int *) arg, .events = POLLIN };
	ax_store     *s2;
	(void) poll(&p, 1, 10000); /* after 10 s: append anyway, and fail */
	write_log("later\n", "a");
	usleep(500000);
	if (ax_store_open(ax_test_pg_dsn(fx.pg), &s2) == AX_OK) {
		ax_store_exec(s2,
		              "UPDATE attempts SET state = 'SUCCESS', "
		              "ended_at = now()",
		              0, NULL);
		ax_store_close(s2);
	}
	return NULL;
}

Test(axctl_api, instance_logs)
{
	int64_t   b = make_run();
	char      bs[24];
	pthread_t th;
	int       ino;

	snprintf(bs, sizeof(bs), "%lld", (long long) b);
	EXPECT_RC(1, "instance", "logs", bs);
	cr_expect(strstr(err, "not_found") != NULL, "%s", err);
	write_log("one\ntwo\nthree\n", "w");
	EXPECT_RC(0, "instance", "logs", bs);
	cr_expect_str_eq(out, "one\ntwo\nthree\n");
	EXPECT_RC(0, "instance", "logs", bs, "--tail", "2");
	cr_expect_str_eq(out, "two\nthree\n");
	EXPECT_RC(0, "instance", "logs", bs, "--offset", "4");
	cr_expect_str_eq(out, "two\nthree\n");
	EXPECT_RC(2, "instance", "logs", bs, "--tail", "-1");
	EXPECT_RC(2, "instance", "logs", bs, "--tail", "1", "--offset", "1");
	ino = inotify_init1(IN_CLOEXEC);
	cr_assert_geq(ino, 0);
	cr_assert_geq(inotify_add_watch(ino, logpath, IN_ACCESS), 0);
	cr_assert_eq(pthread_create(&th, NULL, append_then_end, &ino), 0);
	EXPECT_RC(0, "instance", "logs", bs, "--tail", "1", "-f");
	pthread_join(th, NULL);
	close(ino);
	cr_expect_str_eq(out, "three\nlater\n");
}

/* ---- tokens and failures ------------------------------------------------ */

Test(axctl_api, tokens)
{
	char tf[256], home_tok[256];

	submit_chain();
	setenv("AX_TOKEN", "axt_bogus", 1);
	EXPECT_RC(1, "dag", "list");
	cr_expect(strstr(err, "axctl dag list: unauthorized: ") != NULL, "%s",
	          err);
	cr_expect(strstr(err, "(token from $AX_TOKEN)") != NULL, "%s", err);
	cr_expect_str_eq(out, "");

	/* --token-file wins over AX_TOKEN */
	write_file("viewer.token", fx.viewer, tf, sizeof(tf));
	EXPECT_RC(0, "dag", "list", "--token-file", tf);
	EXPECT_RC(1, "dag", "pause", "demo.chain", "--token-file", tf);
	cr_expect(strstr(err, "forbidden: ") != NULL, "%s", err);
	EXPECT_RC(1, "dag", "list", "--token-file", "/nonexistent/tok");
	cr_expect(strstr(err, "cannot read token file /nonexistent/tok") !=
	              NULL,
	          "%s", err);

	/* no token at all: the 401 says how to give one */
	unsetenv("AX_TOKEN");
	EXPECT_RC(1, "dag", "list");
	cr_expect(strstr(err, "no token: set AX_TOKEN or use --token-file") !=
	              NULL,
	          "%s", err);
	/* $AX_HOME/admin.token (as `axctl standalone` writes it) */
	write_file("admin.token", fx.oper, home_tok, sizeof(home_tok));
	EXPECT_RC(0, "dag", "pause", "demo.chain");
	EXPECT_RC(1, "dag", "submit", home_tok);
	cr_expect(strstr(err, "forbidden") != NULL, "%s", err);
	/* --server wins over AX_SERVER */
	setenv("AX_SERVER", "http://127.0.0.1:1", 1);
	EXPECT_RC(0, "dag", "list", "--server", fx.url);
}

/* ---- without a server --------------------------------------------------- */

/* Every change prints its command id; `axctl command show` reads it,
 * --wait waits for axd (here: the test plays axd, writing the outcome),
 * --idempotency-key makes a repeat return the first command. */
Test(axctl_api, command_show_wait_and_idempotency_key)
{
	char    ids[24];
	json_t *j;
	int64_t id, id2;

	submit_chain();
	EXPECT_RC(0, "dag", "trigger", "demo.chain", "--date", "2024-06-01",
	          "--json");
	j  = out_json();
	id = json_integer_value(json_object_get(j, "command_id"));
	json_decref(j);
	cr_assert_gt(id, 0, "%s", out);
	snprintf(ids, sizeof(ids), "%lld", (long long) id);

	EXPECT_RC(0, "command", "show", ids);
	cr_expect(strstr(out, "pending") != NULL, "%s", out);
	cr_expect(strstr(out, "trigger") != NULL, "%s", out);
	/* no axd here: --wait gives up after --timeout, exit 1 */
	EXPECT_RC(1, "command", "show", ids, "--wait", "--timeout", "0.5");
	cr_expect(strstr(err, "still pending") != NULL, "%s", err);
	EXPECT_RC(1, "command", "show", "987654");
	cr_expect(strstr(err, "no command 987654") != NULL, "%s", err);
	EXPECT_RC(2, "command", "show", "abc");
	EXPECT_RC(2, "command", "show", ids, "--timeout", "-1");
	EXPECT_RC(2, "command", "list");

	/* applied: --wait returns at once with the result */
	ax_api_fixture_sql(&fx,
	                   "UPDATE control_command SET status = 'applied', "
	                   "applied_at = now(), result = '{\"run_id\": 77}' "
	                   "WHERE id = %lld",
	                   (long long) id);
	EXPECT_RC(0, "command", "show", ids, "--wait", "--json");
	j = out_json();
	cr_expect_str_eq(json_string_value(json_object_get(j, "status")),
	                 "applied");
	cr_expect_eq(json_integer_value(json_object_get(
	                 json_object_get(j, "result"), "run_id")),
	             77);
	json_decref(j);

	/* a change with --wait: rejected is exit 1 with the reason */
	ax_api_fixture_sql(
	    &fx,
	    "CREATE FUNCTION t_reject() RETURNS trigger "
	    "LANGUAGE plpgsql AS $$ BEGIN NEW.status := "
	    "'rejected'; NEW.applied_at := now(); NEW.reason := "
	    "'refused by the test'; RETURN NEW; END $$");
	ax_api_fixture_sql(&fx,
	                   "CREATE TRIGGER t_reject BEFORE INSERT ON "
	                   "control_command FOR EACH ROW EXECUTE "
	                   "FUNCTION t_reject()");
	EXPECT_RC(1, "dag", "pause", "demo.chain", "--wait");
	cr_expect(strstr(out, "rejected: refused by the test") != NULL, "%s",
	          out);
	ax_api_fixture_sql(&fx, "DROP TRIGGER t_reject ON control_command");

	/* --idempotency-key: the same command again, no second row */
	EXPECT_RC(0, "dag", "trigger", "demo.chain", "--date", "2024-06-02",
	          "--idempotency-key", "cli-k1", "--json");
	j  = out_json();
	id = json_integer_value(json_object_get(j, "command_id"));
	json_decref(j);
	EXPECT_RC(0, "dag", "trigger", "demo.chain", "--date", "2024-06-02",
	          "--idempotency-key", "cli-k1", "--json");
	j   = out_json();
	id2 = json_integer_value(json_object_get(j, "command_id"));
	json_decref(j);
	cr_expect_eq(id, id2, "a repeat is the first command");
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM control_command "
	                                "WHERE idempotency_key = 'cli-k1'"),
	             1);
	EXPECT_RC(1, "dag", "trigger", "demo.chain", "--date", "2024-06-03",
	          "--idempotency-key", "cli-k1");
	cr_expect(strstr(err, "idempotency_key_reused") != NULL, "%s", err);
	EXPECT_RC(2, "dag", "trigger", "demo.chain", "--idempotency-key",
	          "has space");
}

TestSuite(axctl_cli, .timeout = 60);

/* A local port nothing listens on. */
static int
closed_port(void)
{
	struct sockaddr_in a   = { .sin_family      = AF_INET,
		                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t          len = sizeof(a);
	int                fd  = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *) &a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

Test(axctl_cli, unreachable_server)
{
	char url[64], want[160];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", closed_port());
	snprintf(want, sizeof(want),
	         "cannot reach ax-api at %s: is it running?", url);
	setenv("AX_TOKEN", "axt_x", 1);
	setenv("AX_SERVER", url, 1);
	EXPECT_RC(1, "dag", "list");
	cr_expect(strstr(err, want) != NULL, "%s", err);
	EXPECT_RC(1, "run", "show", "1");
	cr_expect(strstr(err, want) != NULL, "%s", err);
	unsetenv("AX_SERVER");
	EXPECT_RC(1, "worker", "list", "--server", url);
	cr_expect(strstr(err, want) != NULL, "%s", err);
	EXPECT_RC(1, "events", "--follow", "--server", url);
	cr_expect(strstr(err, want) != NULL, "%s", err);
	EXPECT_RC(1, "instance", "logs", "3", "-f", "--server", url);
	cr_expect(strstr(err, want) != NULL, "%s", err);
	EXPECT_RC(1, "worker", "list", "--server", "ftp://x");
	cr_expect(strstr(err, "must start with http://") != NULL, "%s", err);
}

/*
 * A server that takes the connection and never answers: SIGINT must
 * still end `events --follow` at once, cleanly (status 0), not after the
 * request's 120 s timeout. The kernel completes the connection into the
 * listen backlog; nothing accepts it.
 */
Test(axctl_cli, follow_ends_on_sigint_while_the_server_is_silent)
{
	struct sockaddr_in a   = { .sin_family      = AF_INET,
		                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t          len = sizeof(a);
	int                fd  = socket(AF_INET, SOCK_STREAM, 0);
	char               url[64];
	struct timespec    t0, t1;

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *) &a, &len), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	setenv("AX_TOKEN", "axt_x", 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* SIGINT after 1 s; one still running 20 s later is killed */
	int rc = ax_cli_run(out, sizeof(out), err, sizeof(err),
	                    "/usr/bin/timeout", "--preserve-status", "-k",
	                    "20", "-s", "INT", "1", getenv("AXCTL"), "events",
	                    "--follow", "--server", url, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double) (t1.tv_sec - t0.tv_sec) +
	    (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
	close(fd);
	cr_expect_eq(rc, 0, "a follow interrupted ends cleanly: %s", err);
	cr_expect_lt(s, 8.0, "ended %.1f s after its start (SIGINT at 1 s)",
	             s);
}

typedef struct usage_case {
	char args[8][32];
	char msg[64]; /* in stderr */
} usage_case;

ParameterizedTestParameters(axctl_cli, usage_errors)
{
	static usage_case cases[] = {
		{ { "run" }, "usage: axctl run" },
		{ { "run", "frob" }, "unknown subcommand 'frob'" },
		{ { "run", "show" }, "missing argument" },
		{ { "run", "show", "abc" }, "ID must be an integer >= 1" },
		{ { "run", "show", "1", "2" }, "unexpected argument '2'" },
		{ { "run", "list", "--limit", "0" }, "--limit must be" },
		{ { "run", "list", "--bogus" }, "unknown option '--bogus'" },
		{ { "run", "list", "--dag" }, "--dag needs a value" },
		{ { "instance", "mark", "1", "done" }, "success or failed" },
		{ { "instance", "mark", "1" }, "missing argument" },
		{ { "instance", "logs", "1", "--tail", "x" },
		  "--tail must be" },
		{ { "instance", "kill", "0" }, "ID must be" },
		{ { "instance", "list", "--run", "x" }, "--run must be" },
		{ { "worker", "list", "extra" }, "unexpected argument" },
		{ { "worker" }, "usage: axctl worker" },
		{ { "events", "--instance", "-3" }, "--instance must be" },
		{ { "events", "--server" }, "--server needs a value" },
		{ { "dag", "trigger" }, "missing argument" },
		{ { "dag", "submit" }, "missing argument" },
		{ { "dag", "backfill", "x", "--end", "y" },
		  "--start and --end" },
		{ { "dag", "list", "x" }, "unexpected argument 'x'" },
		{ { "dag", "frob" }, "unknown command 'frob'" },
	};
	return cr_make_param_array(usage_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(usage_case *c, axctl_cli, usage_errors)
{
	const char *a[8];
	int         n = 0;

	for (; n < 8 && c->args[n][0]; n++)
		a[n] = c->args[n];
	for (int i = n; i < 8; i++)
		a[i] = NULL;
	setenv("AX_SERVER", "http://127.0.0.1:1", 1);
	int rc =
	    AX_CLI_AXCTL(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL);
	cr_expect_eq(rc, 2, "%s %s %s: exit %d\n%s", a[0], a[1] ? a[1] : "",
	             a[2] ? a[2] : "", rc, err);
	cr_expect(strstr(err, c->msg) != NULL, "want '%s' in: %s", c->msg,
	          err);
}

Test(axctl_cli, help_documents_exit_status)
{
	static const char *const groups[][2] = {
		{ "dag", "--help" },      { "run", "--help" },
		{ "instance", "--help" }, { "worker", "--help" },
		{ "events", "--help" },   { "command", "--help" },
	};
	for (size_t i = 0; i < 6; i++) {
		EXPECT_RC(0, groups[i][0], groups[i][1]);
		cr_expect(strstr(out, "Exit status: 0 success; 1 failure") !=
		              NULL,
		          "%s: %s", groups[i][0], out);
		cr_expect(strstr(out, "--token-file FILE") != NULL, "%s",
		          groups[i][0]);
	}
	/* the offline dag subcommands are still listed */
	EXPECT_RC(0, "dag", "--help");
	cr_expect(strstr(out, "axctl dag validate FILE") != NULL, "%s", out);
	EXPECT_RC(0, "instance", "logs", "--help");
	cr_expect(strstr(out, "--follow") != NULL, "%s", out);
}

Test(axctl_api, token_create_list_revoke_through_the_api)
{
	char    alice[AX_API_TOKEN_LEN], idtext[24];
	json_t *j;

	EXPECT_RC(0, "token", "create", "--name", "alice", "--role",
	          "operator", "--ttl", "30d", "--json");
	j = out_json();
	snprintf(alice, sizeof(alice), "%s",
	         json_string_value(json_object_get(j, "token")));
	snprintf(idtext, sizeof(idtext), "%" JSON_INTEGER_FORMAT,
	         json_integer_value(json_object_get(j, "id")));
	cr_expect_eq(strlen(alice), AX_API_TOKEN_LEN - 1, "%s", out);
	cr_expect_str_eq(json_string_value(json_object_get(j, "role")),
	                 "operator");
	cr_expect(json_is_string(json_object_get(j, "expires_at")), "%s", out);
	json_decref(j);
	/* made through the API: the event names the admin token "a" */
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM event_log WHERE "
	                                "type = 'token.created' AND "
	                                "payload->>'token_name' = 'a' AND "
	                                "payload->'target'->>'name' = "
	                                "'alice'"),
	             1);

	/* the table form prints the token alone on stdout */
	EXPECT_RC(0, "token", "create", "--name", "bob", "--role", "viewer");
	cr_expect(strncmp(out, "axt_", 4) == 0 && strlen(out) == 69, "%s",
	          out);
	cr_expect(strstr(err, "shown only now") != NULL, "%s", err);

	EXPECT_RC(0, "token", "list");
	cr_expect(has_row(out,
	                  ROW("ID", "NAME", "ROLE", "STATE", "CREATED", "LAST",
	                      "USED", "EXPIRES", "REVOKED")),
	          "%s", out);
	cr_expect(has_row(out, ROW(idtext, "alice", "operator", "live")), "%s",
	          out);
	cr_expect(strstr(out, alice + 4) == NULL, "the token is listed");
	EXPECT_RC(0, "token", "list", "--json");
	j = out_json();
	cr_expect_eq(json_array_size(json_object_get(j, "tokens")), 5, "%s",
	             out);
	json_decref(j);
	cr_expect(strstr(out, alice + 4) == NULL, "the token is listed");

	/* alice operates, but cannot manage tokens */
	setenv("AX_TOKEN", alice, 1);
	EXPECT_RC(0, "dag", "list");
	EXPECT_RC(1, "token", "list");
	cr_expect(strstr(err, "forbidden") != NULL, "%s", err);
	EXPECT_RC(1, "token", "create", "--name", "mallory", "--role",
	          "admin");
	cr_expect(strstr(err, "forbidden") != NULL, "%s", err);
	setenv("AX_TOKEN", fx.admin, 1);

	EXPECT_RC(0, "token", "revoke", idtext);
	cr_expect(strstr(out, "alice") != NULL && strstr(out, "revoked"), "%s",
	          out);
	setenv("AX_TOKEN", alice, 1);
	EXPECT_RC(1, "dag", "list");
	cr_expect(strstr(err, "revoked") != NULL, "%s", err);
	setenv("AX_TOKEN", fx.admin, 1);
	EXPECT_RC(1, "token", "revoke", idtext, "--json");
	cr_expect(strstr(err, "was revoked at") != NULL, "%s", err);
	EXPECT_RC(1, "token", "create", "--name", "bob", "--role", "viewer");
	cr_expect(strstr(err, "bob") != NULL && strstr(err, "revoke"), "%s",
	          err);

	/* usage errors */
	EXPECT_RC(2, "token", "create", "--role", "viewer");
	EXPECT_RC(2, "token", "create", "--name", "x", "--role", "viewer",
	          "--ttl", "1h", "--expires-at", "2999-01-01");
	EXPECT_RC(2, "token", "revoke");
	EXPECT_RC(2, "token", "revoke", "x1");
	EXPECT_RC(2, "token", "list", "--name", "x");
	EXPECT_RC(2, "token", "nope");
	EXPECT_RC(1, "token", "create", "--name", "x y", "--role", "viewer");
	cr_expect(strstr(err, "not allowed") != NULL, "%s", err);
}

Test(axctl_api, token_create_on_the_database_bootstraps)
{
	char    tok[AX_API_TOKEN_LEN];
	json_t *j;

	/* no admin token anywhere: --dsn works on the database itself */
	unsetenv("AX_TOKEN");
	EXPECT_RC(0, "token", "create", "--name", "root", "--role", "admin",
	          "--dsn", ax_test_pg_dsn(fx.pg), "--json");
	j = out_json();
	snprintf(tok, sizeof(tok), "%s",
	         json_string_value(json_object_get(j, "token")));
	cr_expect_str_eq(json_string_value(json_object_get(j, "state")),
	                 "live");
	json_decref(j);
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM event_log WHERE "
	                                "type = 'token.created' AND "
	                                "payload->>'via' = 'database' AND "
	                                "payload->'target'->>'name' = "
	                                "'root'"),
	             1);
	setenv("AX_TOKEN", tok, 1);
	EXPECT_RC(0, "token", "list", "--json");
	cr_expect(strstr(out, "\"root\"") != NULL, "%s", out);
	EXPECT_RC(0, "token", "list", "--dsn", ax_test_pg_dsn(fx.pg));
	cr_expect(has_row(out, ROW("4", "root", "admin", "live")), "%s", out);
	EXPECT_RC(2, "token", "list", "--dsn", ax_test_pg_dsn(fx.pg),
	          "--server", fx.url);
	EXPECT_RC(0, "token", "revoke", "4", "--dsn", ax_test_pg_dsn(fx.pg));
	EXPECT_RC(1, "token", "list");
	cr_expect(strstr(err, "revoked") != NULL, "%s", err);
	setenv("AX_TOKEN", fx.admin, 1);
}
