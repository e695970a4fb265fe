/*
 * test_commands.c - durable control end to end: real PostgreSQL, axd, one
 * ax-worker and the ax-api binary, driven over HTTP (libcurl).
 *
 * The scenario an operator meets: axd is down (kill -9) while users go
 * on calling the API. Every trigger, kill, clear and mark answered then
 * must take effect once axd is back, exactly once: 40 triggers make 40
 * runs, a trigger repeated with one Idempotency-Key makes one, and every
 * command reads applied (a trigger with its run id). Before the commands
 * were recorded in PostgreSQL, all of them were a NOTIFY nobody heard:
 * the runs never appeared.
 *
 * The same across a failover: a standby axd takes over from a killed
 * active one while triggers arrive.
 *
 * Waits poll PostgreSQL with deadlines sized for a loaded 2-core machine
 * (the restart waits for the killed axd's lease to lapse: 3 s here).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_token.h"
#include "cli_run.h"
#include "clock.h"
#include "e2e_harness.h"
#include "store.h"

static ax_e2e *e;
static char    url[64], token[AX_API_TOKEN_LEN];
static char    out[65536], err[16384];

static void
setup(void)
{
	setenv("AX_WORKER_HEARTBEAT", "500ms", 1);
	setenv("AX_WORKER_KILL_GRACE", "1s", 1);
	unsetenv("AX_API_TLS_CERT");
	unsetenv("AX_API_TLS_KEY");
	ax_e2e_use_axctl();
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(commands, .init = setup, .fini = teardown, .timeout = 240);

/* --- HTTP ---------------------------------------------------------------
 */

typedef ax_e2e_answer answer;

/* Sends method path (body may be NULL, key the Idempotency-Key or NULL)
 * with the test's admin token; the answer in *a (json_decref a->js). */
static void
call(const char *method, const char *path, const char *body, const char *key,
     answer *a)
{
	ax_e2e_http(url, token, method, path, body,
	            body != NULL ? strlen(body) : 0, key, a);
}

/* POSTs and asserts the status; returns the answer's command_id (0 when
 * the answer has none). */
static int64_t
post(const char *path, const char *body, const char *key, long want)
{
	answer  a;
	int64_t id;

	call("POST", path, body, key, &a);
	if (a.status != want)
		ax_e2e_dump(e);
	cr_assert_eq(a.status, want, "POST %s: %ld, want %ld: %s", path,
	             a.status, want, a.body);
	id = json_integer_value(json_object_get(a.js, "command_id"));
	json_decref(a.js);
	return id;
}

/* --- the stack ----------------------------------------------------------
 */

static const char *one_yaml = "kind: DAG\n"
                              "name: e2e.cmd\n"
                              "concurrency: {max_active_runs: 64, "
                              "policy: parallel}\n"
                              "params: {k: v0}\n"
                              "tasks:\n"
                              "  - {name: t, command: \"echo ran\"}\n";

static const char *ops_yaml =
    "kind: DAG\n"
    "name: e2e.ops\n"
    "concurrency: {max_active_runs: 4, policy: parallel}\n"
    "tasks:\n"
    "  - {name: a, command: \"echo a\"}\n"
    "  - {name: s, command: \"sleep 120\"}\n";

static void
start_stack(void)
{
	e = ax_e2e_new(1, "scheduler:\n  lease_ttl: 3s\n");
	ax_e2e_load(e, "one", NULL, one_yaml);
	ax_e2e_load(e, "ops", NULL, ops_yaml);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_ADMIN, "e2e", url, sizeof(url),
	                       token);
}

/* The id of task's instance in the e2e.ops run at logical date day. */
static int64_t
ops_instance(const char *day, const char *task)
{
	return ax_e2e_int(e,
	                  "SELECT i.id FROM task_instances i JOIN dag_runs r "
	                  "ON r.id = i.dag_run_id JOIN dags d ON d.id = "
	                  "r.dag_id WHERE d.name = 'e2e.ops' AND "
	                  "r.logical_date = '%s' AND i.task = '%s'",
	                  day, task);
}

/* Prints the commands and runs (after the daemons' logs) when a wait
 * fails, so the failure says which command or run is stuck. */
static void
dump_state(void)
{
	PGresult *r = PQexec(
	    e->db,
	    "SELECT 'command ' || id || ' ' || kind || ' ' || status || "
	    "' ' || coalesce(result::text, '-') || ' ' || "
	    "coalesce(reason, '-') FROM control_command ORDER BY id");
	for (int i = 0;
	     PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++)
		fprintf(stderr, "%s\n", PQgetvalue(r, i, 0));
	PQclear(r);
	r = PQexec(e->db,
	           "SELECT 'run ' || id || ' ' || run_type || ' ' || "
	           "state FROM dag_runs ORDER BY id");
	for (int i = 0;
	     PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++)
		fprintf(stderr, "%s\n", PQgetvalue(r, i, 0));
	PQclear(r);
}

/* ax_e2e_wait with the commands and runs printed on failure. */
static void
wait_sql(double secs, const char *what, const char *sql)
{
	int64_t deadline = ax_clock_mono_us() + (int64_t) (secs * 1e6);

	while (ax_e2e_int(e, "%s", sql) <= 0) {
		if (ax_clock_mono_us() > deadline) {
			dump_state();
			ax_e2e_wait(e, 0.1, what, "%s", sql);
		}
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
}

#define N_TRIGGERS 40

Test(commands, applied_once_after_axd_was_down)
{
	int64_t ids[N_TRIGGERS], idem, kill, clear, mark;
	char    path[128];
	answer  a, b;

	start_stack();
	/* two runs of e2e.ops: a done, s running */
	post("/api/v1/dags/e2e.ops/trigger",
	     "{\"logical_date\": \"2024-01-01T00:00:00Z\"}", NULL, 202);
	post("/api/v1/dags/e2e.ops/trigger",
	     "{\"logical_date\": \"2024-01-02T00:00:00Z\"}", NULL, 202);
	ax_e2e_wait(e, 60, "both e2e.ops runs: a SUCCESS, s RUNNING",
	            "SELECT count(*) = 4 FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.ops' AND ((i.task = "
	            "'a' AND i.state = 'SUCCESS') OR (i.task = 's' AND "
	            "i.state = 'RUNNING'))");
	int64_t s1 = ops_instance("2024-01-01", "s");
	int64_t a1 = ops_instance("2024-01-01", "a");
	int64_t s2 = ops_instance("2024-01-02", "s");

	ax_e2e_kill_axd(e, SIGKILL);

	/* while no axd listens: the API answers, nothing happens yet */
	int64_t t0 = ax_clock_mono_us();
	for (int i = 0; i < N_TRIGGERS; i++)
		ids[i] = post("/api/v1/dags/e2e.cmd/trigger", NULL, NULL, 202);
	fprintf(stderr, "commands: %d triggers recorded in %.1f ms\n",
	        N_TRIGGERS, (double) (ax_clock_mono_us() - t0) / 1000.0);
	call("POST", "/api/v1/dags/e2e.cmd/trigger",
	     "{\"params\": {\"k\": \"v\"}}", "e2e-key-1", &a);
	cr_assert_eq(a.status, 202, "%s", a.body);
	for (int i = 0; i < 2; i++) {
		call("POST", "/api/v1/dags/e2e.cmd/trigger",
		     "{\"params\": {\"k\": \"v\"}}", "e2e-key-1", &b);
		cr_assert_eq(b.status, 202, "repeat: %s", b.body);
		cr_assert(json_equal(a.js, b.js),
		          "a repeat gets the first answer: %s vs %s", a.body,
		          b.body);
		json_decref(b.js);
	}
	idem = json_integer_value(json_object_get(a.js, "command_id"));
	json_decref(a.js);
	/* the same key for another request: 422 naming the header */
	call("POST", "/api/v1/dags/e2e.cmd/trigger",
	     "{\"params\": {\"k\": \"other\"}}", "e2e-key-1", &b);
	cr_assert_eq(b.status, 422, "%s", b.body);
	cr_assert_str_eq(json_string_value(json_object_get(b.js, "error")),
	                 "idempotency_key_reused");
	cr_assert_not_null(strstr(b.body, "Idempotency-Key"), "%s", b.body);
	json_decref(b.js);

	snprintf(path, sizeof(path), "/api/v1/instances/%lld/kill",
	         (long long) s1);
	kill = post(path, NULL, NULL, 202);
	snprintf(path, sizeof(path), "/api/v1/instances/%lld/clear",
	         (long long) a1);
	clear = post(path, NULL, NULL, 202);
	snprintf(path, sizeof(path), "/api/v1/instances/%lld/mark",
	         (long long) s2);
	mark = post(path, "{\"state\": \"success\"}", NULL, 200);
	ax_clock_sleep_us(500 * AX_USEC_PER_MSEC);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM dag_runs r JOIN dags "
	                        "d ON d.id = r.dag_id WHERE d.name = "
	                        "'e2e.cmd'"),
	             0, "no axd ran: no run yet");

	ax_e2e_start_axd(e);
	t0 = ax_clock_mono_us();

	/* every trigger made its run, the repeated key one */
	wait_sql(90, "41 runs of e2e.cmd, each with its task SUCCESS",
	         "SELECT (count(*) FILTER (WHERE i.state = 'SUCCESS') = 41)"
	         "::int FROM task_instances i JOIN dags d ON d.id = i.dag_id "
	         "WHERE d.name = 'e2e.cmd'");
	fprintf(stderr,
	        "commands: 41 runs done %.1f ms after axd took the lease\n",
	        (double) (ax_clock_mono_us() - t0) / 1000.0);
	ax_e2e_wait(e, 30, "no command pending",
	            "SELECT count(*) = 0 FROM control_command WHERE status = "
	            "'pending'");
	fprintf(stderr,
	        "commands: all applied %.1f ms after axd took the lease\n",
	        (double) (ax_clock_mono_us() - t0) / 1000.0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM dag_runs r JOIN dags "
	                        "d ON d.id = r.dag_id WHERE d.name = "
	                        "'e2e.cmd'"),
	             41);
	/* exactly once: one attempt per instance, one instance per run */
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM attempts a JOIN "
	               "task_instances i ON i.id = a.instance_id JOIN "
	               "dags d ON d.id = i.dag_id WHERE d.name = "
	               "'e2e.cmd'"),
	    41, "one attempt per trigger");
	for (int i = 0; i < N_TRIGGERS; i++) {
		cr_assert_gt(ids[i], 0, "trigger %d has a command id", i);
		cr_assert_eq(
		    ax_e2e_int(e,
		               "SELECT count(*) FROM control_command c JOIN "
		               "dag_runs r ON r.id = (c.result->>'run_id')::"
		               "bigint WHERE c.id = %lld AND c.status = "
		               "'applied' AND c.applied_epoch IS NOT NULL",
		               (long long) ids[i]),
		    1, "command %lld applied with its run id",
		    (long long) ids[i]);
	}
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(DISTINCT result->>'run_id') FROM "
	               "control_command WHERE kind = 'trigger' AND "
	               "body->>'dag' = 'e2e.cmd'"),
	    41, "41 distinct runs for 41 commands");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM control_command WHERE "
	                        "idempotency_key = 'e2e-key-1'"),
	             1);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM dag_runs WHERE id = "
	                        "(SELECT (result->>'run_id')::bigint FROM "
	                        "control_command WHERE id = %lld) AND "
	                        "conf->>'k' = 'v'",
	                        (long long) idem),
	             1, "the keyed trigger's run has its params");

	/* kill: the running s ended CANCELED; clear: a ran again; mark:
	 * applied (axd re-read the run) */
	ax_e2e_wait(
	    e, 60, "kill applied",
	    "SELECT status = 'applied' FROM control_command WHERE id = "
	    "%lld",
	    (long long) kill);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances WHERE id "
	                        "= %lld AND state = 'CANCELED'",
	                        (long long) s1),
	             1);
	ax_e2e_wait(
	    e, 60, "cleared a ran again",
	    "SELECT count(*) = 2 FROM attempts a JOIN task_instances i "
	    "ON i.id = a.instance_id WHERE i.id = %lld AND i.state = "
	    "'SUCCESS'",
	    (long long) a1);
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM control_command WHERE id "
	               "= %lld AND status = 'applied' AND "
	               "(result->>'cleared')::int = 1",
	               (long long) clear),
	    1);
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM control_command WHERE id "
	               "= %lld AND status = 'applied'",
	               (long long) mark),
	    1);

	/* GET /api/v1/commands/{id} */
	snprintf(path, sizeof(path), "/api/v1/commands/%lld",
	         (long long) ids[0]);
	call("GET", path, NULL, NULL, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	cr_assert_str_eq(json_string_value(json_object_get(a.js, "status")),
	                 "applied");
	cr_assert_str_eq(json_string_value(json_object_get(a.js, "kind")),
	                 "trigger");
	cr_assert_gt(json_integer_value(json_object_get(
	                 json_object_get(a.js, "result"), "run_id")),
	             0, "%s", a.body);
	cr_assert(json_is_string(json_object_get(a.js, "applied_at")));
	json_decref(a.js);
	call("GET", "/api/v1/commands/99999999", NULL, NULL, &a);
	cr_assert_eq(a.status, 404, "%s", a.body);
	json_decref(a.js);
	call("GET", "/api/v1/commands/abc", NULL, NULL, &a);
	cr_assert_eq(a.status, 400, "%s", a.body);
	json_decref(a.js);

	/* axctl: --wait prints the run the trigger made */
	int rc = AX_CLI_AXCTL("dag", "trigger", "e2e.cmd", "--wait", NULL);
	cr_assert_eq(rc, 0, "stdout: %s\nstderr: %s", out, err);
	cr_assert_not_null(strstr(out, "(trigger) applied: run_id="), "%s",
	                   out);
	char cid[24];
	snprintf(cid, sizeof(cid), "%lld", (long long) ids[0]);
	rc = AX_CLI_AXCTL("command", "show", cid, "--json", NULL);
	cr_assert_eq(rc, 0, "stdout: %s\nstderr: %s", out, err);
	cr_assert_not_null(strstr(out, "\"applied\""), "%s", out);
}

/* A command that cannot be applied is rejected with a reason. */
Test(commands, rejected_with_a_reason)
{
	int64_t id, run;
	char    path[128];
	answer  a;

	start_stack();
	/* the DAG is gone by the time axd applies the trigger */
	ax_e2e_kill_axd(e, SIGKILL);
	id          = post("/api/v1/dags/e2e.cmd/trigger",
	                   "{\"logical_date\": \"2024-05-01T00:00:00Z\"}", NULL, 202);
	PGresult *r = PQexec(e->db,
	                     "UPDATE dags SET active_version_id = NULL WHERE "
	                     "name = 'e2e.cmd'");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(e->db));
	PQclear(r);
	ax_e2e_start_axd(e);
	ax_e2e_wait(
	    e, 60, "the trigger rejected",
	    "SELECT status = 'rejected' FROM control_command WHERE id = "
	    "%lld",
	    (long long) id);
	snprintf(path, sizeof(path), "/api/v1/commands/%lld", (long long) id);
	call("GET", path, NULL, NULL, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	cr_assert_not_null(
	    strstr(json_string_value(json_object_get(a.js, "reason")),
	           "e2e.cmd"),
	    "the reason names the DAG: %s", a.body);
	json_decref(a.js);
	run = ax_e2e_int(e, "SELECT count(*) FROM dag_runs");
	cr_assert_eq(run, 0, "a rejected trigger makes no run");
}

/* 1 when the file at path contains text. */
static int
file_has(const char *path, const char *text)
{
	static char buf[1 << 20];
	FILE       *f = fopen(path, "r");
	size_t      n;

	if (f == NULL)
		return 0;
	n      = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, text) != NULL;
}

/* Triggers sent while the active axd dies and a standby takes over: each
 * makes one run, applied by whichever axd held the lease. */
Test(commands, applied_once_across_a_failover)
{
	char    log2[PATH_MAX + 32];
	int64_t ids[N_TRIGGERS], deadline, epoch0;

	start_stack();
	cr_assert_eq(ax_stack_start_standby(&e->st), AX_OK, "%s",
	             ax_err_detail());
	snprintf(log2, sizeof(log2), "%s/axd-standby.log", e->st.log_dir);
	deadline = ax_clock_mono_us() + 30 * AX_USEC_PER_SEC;
	while (!file_has(log2, "standby")) {
		cr_assert_lt(ax_clock_mono_us(), deadline,
		             "the second axd never stood by");
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	epoch0 = ax_e2e_int(e, "SELECT epoch FROM scheduler_lease");
	for (int i = 0; i < N_TRIGGERS; i++) {
		if (i == N_TRIGGERS / 4)
			ax_e2e_kill_axd(e, SIGKILL); /* the rest: in the gap */
		ids[i] = post("/api/v1/dags/e2e.cmd/trigger", NULL, NULL, 202);
	}
	wait_sql(90, "40 runs of e2e.cmd, each with its task SUCCESS",
	         "SELECT (count(*) FILTER (WHERE i.state = 'SUCCESS') = 40)"
	         "::int FROM task_instances i JOIN dags d ON d.id = i.dag_id "
	         "WHERE d.name = 'e2e.cmd'");
	wait_sql(30, "no command pending",
	         "SELECT (count(*) = 0)::int FROM control_command WHERE "
	         "status = 'pending'");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM dag_runs r JOIN dags "
	                        "d ON d.id = r.dag_id WHERE d.name = "
	                        "'e2e.cmd'"),
	             N_TRIGGERS);
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM attempts a JOIN "
	               "task_instances i ON i.id = a.instance_id JOIN "
	               "dags d ON d.id = i.dag_id WHERE d.name = "
	               "'e2e.cmd'"),
	    N_TRIGGERS, "one attempt per trigger");
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(DISTINCT result->>'run_id') FROM "
	               "control_command WHERE id BETWEEN %lld AND "
	               "%lld AND status = 'applied'",
	               (long long) ids[0], (long long) ids[N_TRIGGERS - 1]),
	    N_TRIGGERS, "every command applied with its own run");
	cr_assert_gt(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM control_command WHERE id "
	               "= %lld AND applied_epoch > %lld",
	               (long long) ids[N_TRIGGERS - 1], (long long) epoch0),
	    0, "the last ones were applied by the new leader");
}

/*
 * The audit trail: each change made with operator token "alice" is, once
 * axd applied it, an event_log row naming alice and her role, on the DAG
 * (and the run of a trigger); the events route and `axctl events` show
 * it. "Who paused e2e.cmd, and when" has one answer.
 */
Test(commands, each_change_names_its_token_in_the_event_log)
{
	char    admin[AX_API_TOKEN_LEN], path[128];
	int64_t dag, pause, trig, run;
	answer  a;

	start_stack();
	call("POST", "/api/v1/tokens",
	     "{\"name\": \"alice\", \"role\": \"operator\"}", NULL, &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	memcpy(admin, token, sizeof(admin));
	snprintf(token, sizeof(token), "%s",
	         json_string_value(json_object_get(a.js, "token")));
	json_decref(a.js);

	pause = post("/api/v1/dags/e2e.cmd/pause", NULL, NULL, 200);
	post("/api/v1/dags/e2e.cmd/unpause", NULL, NULL, 200);
	trig = post("/api/v1/dags/e2e.cmd/trigger", NULL, NULL, 202);
	dag  = ax_e2e_int(e, "SELECT id FROM dags WHERE name = 'e2e.cmd'");
	wait_sql(60, "the three commands applied",
	         "SELECT (count(*) = 3)::int FROM event_log WHERE type = "
	         "'command.applied' AND payload->>'token_name' = 'alice'");
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM event_log WHERE type = "
	               "'command.applied' AND reason = 'PAUSE' AND dag_id = "
	               "%lld AND payload->>'token_name' = 'alice' AND "
	               "payload->>'token_role' = 'operator' AND "
	               "(payload->>'command_id')::bigint = %lld AND time >= "
	               "(payload->>'requested_at')::timestamptz",
	               (long long) dag, (long long) pause),
	    1, "the pause does not name alice and operator");
	run = ax_e2e_int(e,
	                 "SELECT (result->>'run_id')::bigint FROM "
	                 "control_command WHERE id = %lld",
	                 (long long) trig);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE type = "
	                        "'command.applied' AND reason = 'TRIGGER' AND "
	                        "dag_run_id = %lld AND payload->>'token_name' "
	                        "= 'alice'",
	                        (long long) run),
	             1, "the trigger's event is not on its run %lld",
	             (long long) run);

	/* the same through the API and axctl, as a viewer would ask */
	memcpy(token, admin, sizeof(token));
	call("GET", "/api/v1/events?dag=e2e.cmd&type=command.applied", NULL,
	     NULL, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	/* the three in the order of their rows (by id): the pause goes to
	 * the DAG loader and the trigger to the time detector, which apply
	 * them side by side, so the trigger's row may come first */
	json_t *evs = json_object_get(a.js, "events"), *pl = NULL;
	cr_assert_eq(json_array_size(evs), 3, "%s", a.body);
	for (size_t k = 0; k < json_array_size(evs); k++) {
		json_t *p = json_object_get(json_array_get(evs, k), "payload");
		const char *kind =
		    json_string_value(json_object_get(p, "kind"));
		if (kind != NULL && strcmp(kind, "pause") == 0)
			pl = p;
	}
	cr_assert_not_null(pl, "no pause among %s", a.body);
	cr_expect_str_eq(json_string_value(json_object_get(pl, "token_name")),
	                 "alice");
	cr_expect_str_eq(json_string_value(json_object_get(pl, "token_role")),
	                 "operator");
	json_decref(a.js);
	snprintf(path, sizeof(path), "/api/v1/commands/%lld",
	         (long long) pause);
	call("GET", path, NULL, NULL, &a);
	cr_expect_str_eq(
	    json_string_value(json_object_get(a.js, "token_name")), "alice",
	    "%s", a.body);
	json_decref(a.js);
	cr_assert_eq(AX_CLI_AXCTL("events", "--dag", "e2e.cmd", "--type",
	                          "command.applied", NULL),
	             0, "%s", err);
	cr_expect(strstr(out, "PAUSE") != NULL && strstr(out, "alice"), "%s",
	          out);
}

/* Lines of file dir/name (0 when it does not exist). */
static int
count_lines(const char *dir, const char *name)
{
	char  path[300], line[128];
	int   n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		n++;
	fclose(f);
	return n;
}

/*
 * A finished run whose rows moved to the month-partitioned history
 * (migration 0022) is still an operator's to clear and mark: the API
 * shows it, and a clear brings the run's rows back to the pipeline's
 * tables and runs its tasks again exactly once (counted from what the
 * tasks write).
 */
Test(commands, clear_and_mark_reach_a_run_in_history)
{
	char    yaml[1024], marks[256], path[128];
	answer  a;
	int64_t ia, ib, run;

	ax_e2e_marks_new(marks, sizeof(marks), "ax-hist");
	e = ax_e2e_new(1, "scheduler:\n  lease_ttl: 3s\n");
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.hist\n"
	         "tasks:\n"
	         "  - {name: a, command: \"echo $AX_RUN_ID >> %s/a\"}\n"
	         "  - {name: b, command: \"echo $AX_RUN_ID >> %s/b; exit 3\","
	         " depends_on: [a]}\n",
	         marks, marks);
	ax_e2e_load(e, "hist", NULL, yaml);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_ADMIN, "e2e", url, sizeof(url),
	                       token);
	post("/api/v1/dags/e2e.hist/trigger",
	     "{\"logical_date\": \"2025-01-10T00:00:00Z\"}", NULL, 202);
	wait_sql(60, "the run to fail at b",
	         "SELECT count(*) FROM dag_runs WHERE state = 'FAILED'");
	run = ax_e2e_int(e, "SELECT id FROM dag_runs");
	ia  = ax_e2e_int(e, "SELECT id FROM task_instances WHERE task = 'a'");
	ib  = ax_e2e_int(e, "SELECT id FROM task_instances WHERE task = 'b'");
	/* the move axd makes a day after the run ended, made now */
	wait_sql(10, "no attempt left open",
	         "SELECT count(*) = 0 FROM attempts WHERE state IN ('QUEUED', "
	         "'DISPATCHED', 'RUNNING', 'UNKNOWN')");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT ax_history_move(now(), "
	                        "'-infinity', 10)"),
	             1);
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM task_instances"), 0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM "
	                        "task_instances_history_p202501"),
	             2);

	/* the API reads it from history */
	snprintf(path, sizeof(path), "/api/v1/instances/%lld", (long long) ib);
	call("GET", path, NULL, NULL, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	cr_assert_not_null(strstr(a.body, "FAILED"), "%s", a.body);
	json_decref(a.js);

	/* a mark moves only RUNNING or UNKNOWN instances: refused, named */
	snprintf(path, sizeof(path), "/api/v1/instances/%lld/mark",
	         (long long) ib);
	call("POST", path, "{\"state\": \"success\"}", NULL, &a);
	cr_assert_eq(a.status, 409, "%s", a.body);
	cr_assert_not_null(strstr(a.body, "FAILED -> SUCCESS"), "%s", a.body);
	json_decref(a.js);

	/* clear a with its downstream: both run once more */
	snprintf(path, sizeof(path), "/api/v1/instances/%lld/clear",
	         (long long) ia);
	post(path, "{\"downstream\": true}", NULL, 202);
	wait_sql(60, "a to run again",
	         "SELECT count(*) FROM task_instances WHERE task = 'a' AND "
	         "state = 'SUCCESS' AND try_number = 2");
	wait_sql(60, "b to fail again",
	         "SELECT count(*) FROM task_instances WHERE task = 'b' AND "
	         "state = 'FAILED' AND try_number = 2");
	wait_sql(30, "the run to fail again",
	         "SELECT count(*) FROM dag_runs WHERE state = 'FAILED'");
	cr_assert_eq(count_lines(marks, "a"), 2, "a ran twice in all");
	cr_assert_eq(count_lines(marks, "b"), 2, "b ran twice in all");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances WHERE "
	                        "dag_run_id = %lld",
	                        (long long) run),
	             2, "the cleared run is hot again");
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM task_instances_all"),
	             2, "no instance twice");
	ax_e2e_marks_free(marks);
}
