/*
 * test_explain_e2e.c - GET /api/v1/{instances,runs}/{id}/explain and
 * `axctl explain` against the real axd, two ax-workers and ax-api on a
 * throwaway PostgreSQL. One stack, every case a DAG of its own:
 *  - an instance held by a Block rule: the rule's id and note;
 *  - an instance waiting on its upstream task: the task, its instance
 *    and its state (RUNNING);
 *  - a run waiting on an upstream DAG's period that has no run yet;
 *  - an instance waiting for a full pool: the pool, 1/1 and the
 *    instance holding it; one in a group without workers: no live
 *    worker;
 *  - a run held by the overlap policy: the run it waits behind;
 *  - a retry after exit 3: why attempt 2 started, how attempt 1 ended;
 *  - a worker killed with SIGKILL under a running attempt: attempt 1
 *    UNKNOWN after that worker's lease lapsed, attempt 2 a re-run;
 *  - bad ids: 400 and 404 as JSON naming the problem; axctl's human
 *    output and --json.
 * Worker leases are short (AX_WORKER_LEASE=2s) so the lost worker is
 * noticed within a few seconds.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_token.h"
#include "cli_run.h"
#include "clock.h"
#include "e2e_harness.h"

static ax_e2e *e;
static char    out[262144], err[16384];
static char    url[64], token[AX_API_TOKEN_LEN];

static void
setup(void)
{
	ax_e2e_use_axctl();
	setenv("AX_WORKER_HEARTBEAT", "500ms", 1);
	setenv("AX_WORKER_LEASE", "2s", 1);
	setenv("AX_QUEUE_LEASE_GRACE", "500ms", 1);
	setenv("AX_WORKER_KILL_GRACE", "1s", 1);
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(explain_e2e, .init = setup, .fini = teardown, .timeout = 180);

#define EXPECT_RC(rc, ...) AX_CLI_EXPECT_RC(ax_e2e_dump(e), rc, __VA_ARGS__)

static const char *dags_yaml =
    "kind: DAG\nname: ex.rule\ntasks:\n  - {name: t, command: \"true\"}\n"
    "---\n"
    "kind: DAG\nname: ex.chain\ntasks:\n"
    "  - {name: a, command: \"sleep 20\"}\n"
    "  - {name: b, command: \"true\", depends_on: [a]}\n"
    "---\n"
    "kind: DAG\nname: ex.down\n"
    "depends_on_dags:\n  - {dag: ex.up, mode: same_period}\n"
    "tasks:\n  - {name: t, command: \"true\"}\n"
    "---\n"
    "kind: DAG\nname: ex.up\ntasks:\n  - {name: t, command: \"true\"}\n"
    "---\n"
    "kind: DAG\nname: ex.pool\ntasks:\n"
    "  - {name: p1, command: \"sleep 20\", pool: one}\n"
    "  - {name: p2, command: \"true\", pool: one}\n"
    "---\n"
    "kind: DAG\nname: ex.nobody\ntasks:\n"
    "  - {name: t, command: \"true\", worker_group: nobody}\n"
    "---\n"
    "kind: DAG\nname: ex.serial\n"
    "concurrency: {max_active_runs: 1, policy: serial}\n"
    "tasks:\n  - {name: t, command: \"sleep 20\"}\n";

static json_t *
get(const char *fmt, long long id, long want)
{
	char          path[160];
	ax_e2e_answer a;

	snprintf(path, sizeof(path), fmt, id);
	ax_e2e_http(url, token, "GET", path, NULL, 0, NULL, &a);
	if (a.status != want)
		ax_e2e_dump(e);
	cr_assert_eq(a.status, want, "GET %s: %ld %s", path, a.status, a.body);
	cr_assert_not_null(a.js, "GET %s: not JSON: %s", path, a.body);
	return a.js;
}

static int64_t
trigger(const char *dag)
{
	ax_e2e_trigger(url, token, dag);
	return 0;
}

/* The instance id of dag.task (its only instance, newest run). */
static int64_t
iid(const char *dag, const char *task)
{
	return ax_e2e_int(e,
	                  "SELECT i.id FROM task_instances i JOIN dags d ON "
	                  "d.id = i.dag_id WHERE d.name = '%s' AND i.task = "
	                  "'%s' ORDER BY i.id DESC LIMIT 1",
	                  dag, task);
}

static json_t *
wait0(json_t *doc)
{
	json_t *w = json_array_get(json_object_get(doc, "waiting_for"), 0);
	cr_assert_not_null(w, "nothing in waiting_for: %s",
	                   json_dumps(doc, JSON_COMPACT));
	return w;
}

static const char *
s_of(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	cr_assert_not_null(v, "%s missing in %s", k,
	                   json_dumps(o, JSON_COMPACT));
	return v;
}

static json_int_t
i_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	cr_assert(json_is_integer(v), "%s not an integer in %s", k,
	          json_dumps(o, JSON_COMPACT));
	return json_integer_value(v);
}

#define WAIT_REASON(dag, task, cond)                                          \
	ax_e2e_wait(e, 30, dag "." task " " cond,                             \
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "   \
	            "d.id = i.dag_id WHERE d.name = '" dag                    \
	            "' AND i.task = '" task "' AND " cond)

/* Kills every running instance through the API and waits for it. */
static void
kill_running(void)
{
	PGresult *r = PQexec(e->db,
	                     "SELECT id FROM task_instances WHERE "
	                     "state = 'RUNNING'");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int k = 0; k < PQntuples(r); k++) {
		char          path[96];
		ax_e2e_answer a;
		snprintf(path, sizeof(path), "/api/v1/instances/%s/kill",
		         PQgetvalue(r, k, 0));
		ax_e2e_http(url, token, "POST", path, "{}", 2, NULL, &a);
		cr_assert(a.status == 202 || a.status == 409, "%s: %ld %s",
		          path, a.status, a.body);
		json_decref(a.js);
	}
	PQclear(r);
	ax_e2e_wait(e, 20, "the killed instances to end",
	            "SELECT count(*) = 0 FROM attempts WHERE state IN "
	            "('RUNNING', 'DISPATCHED')");
}

static void
waits(void)
{
	ax_e2e_answer a;
	json_t       *d, *w;
	int64_t       rule, id, run;
	const char   *rb = "{\"action\":\"block\",\"dag\":\"ex.rule\","
	                   "\"note\":\"freeze\"}";

	/* blocked by a rule */
	ax_e2e_http(url, token, "POST", "/api/v1/rules", rb, strlen(rb), NULL,
	            &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	rule = json_integer_value(json_object_get(a.js, "id"));
	json_decref(a.js);
	trigger("ex.rule");
	WAIT_REASON("ex.rule", "t", "i.reason LIKE 'RULE_BLOCKED%%'");
	ax_e2e_wait(e, 10, "the instance.blocked event",
	            "SELECT count(*) FROM event_log WHERE type = "
	            "'instance.blocked' AND reason = 'RULE_BLOCKED'");
	d = get("/api/v1/instances/%lld/explain", iid("ex.rule", "t"), 200);
	w = wait0(d);
	cr_assert_str_eq(s_of(w, "kind"), "rule");
	cr_assert_eq(i_of(w, "rule_id"), rule);
	cr_assert_str_eq(s_of(w, "name"), "freeze");
	cr_assert_str_eq(s_of(d, "state"), "PENDING");
	json_decref(d);
	char rids[24];
	snprintf(rids, sizeof(rids), "%lld", (long long) iid("ex.rule", "t"));
	EXPECT_RC(0, "explain", "instance", rids);
	cr_assert(strstr(out, "\"freeze\"") != NULL, "%s", out);
	fprintf(stderr, "explain_e2e: an instance held by a rule:\n%s", out);

	/* upstream task */
	trigger("ex.chain");
	WAIT_REASON("ex.chain", "a", "i.state = 'RUNNING'");
	WAIT_REASON("ex.chain", "b", "i.state = 'PENDING'");
	id = iid("ex.chain", "b");
	d  = get("/api/v1/instances/%lld/explain", id, 200);
	w  = wait0(d);
	cr_assert_str_eq(s_of(w, "kind"), "upstream_task");
	cr_assert_str_eq(s_of(w, "task"), "a");
	cr_assert_str_eq(s_of(w, "state"), "RUNNING");
	cr_assert_eq(i_of(w, "instance_id"), iid("ex.chain", "a"));
	json_decref(d);
	char ids[24];
	snprintf(ids, sizeof(ids), "%lld", (long long) id);
	EXPECT_RC(0, "explain", "instance", ids);
	cr_assert(strstr(out, "waits on  upstream task a is RUNNING") != NULL,
	          "%s", out);
	cr_assert(strstr(out, "timeline") != NULL, "%s", out);
	EXPECT_RC(0, "explain", "instance", ids, "--json");
	d = json_loads(out, 0, NULL);
	cr_assert_not_null(d, "%s", out);
	cr_assert_str_eq(s_of(wait0(d), "kind"), "upstream_task");
	json_decref(d);

	/* upstream DAG, same period, no run yet */
	trigger("ex.down");
	ax_e2e_wait(e, 30, "ex.down's run to wait",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = 'ex.down' AND r.state = 'QUEUED' "
	            "AND r.reason = 'WAIT_DEPENDENCY'");
	run = ax_e2e_int(e,
	                 "SELECT r.id FROM dag_runs r JOIN dags d ON d.id "
	                 "= r.dag_id WHERE d.name = 'ex.down'");
	d   = get("/api/v1/runs/%lld/explain", run, 200);
	w   = wait0(d);
	cr_assert_str_eq(s_of(w, "kind"), "upstream_dag");
	cr_assert_str_eq(s_of(w, "dag"), "ex.up");
	cr_assert_str_eq(s_of(w, "mode"), "same_period");
	cr_assert(json_is_null(json_object_get(w, "run_id")));
	cr_assert(strstr(s_of(w, "text"), "no run yet") != NULL);
	json_decref(d);

	/* a full pool, and a group without workers */
	trigger("ex.pool");
	trigger("ex.nobody");
	WAIT_REASON("ex.pool", "p1", "i.state = 'RUNNING'");
	WAIT_REASON("ex.pool", "p2", "i.reason = 'WAIT_RESOURCE'");
	WAIT_REASON("ex.nobody", "t", "i.reason = 'WAIT_RESOURCE'");
	/* (written before the rows had ids: the payload names the task) */
	ax_e2e_wait(e, 10, "the delayed events",
	            "SELECT count(*) >= 2 FROM event_log v JOIN dags d ON "
	            "d.id = v.dag_id WHERE v.type = 'instance.delayed' AND "
	            "((d.name = 'ex.pool' AND v.payload->>'task' = 'p2') OR "
	            "d.name = 'ex.nobody')");
	d = get("/api/v1/instances/%lld/explain", iid("ex.pool", "p2"), 200);
	w = wait0(d);
	cr_assert_str_eq(s_of(w, "kind"), "capacity");
	cr_assert_str_eq(s_of(w, "scope"), "pool");
	cr_assert_str_eq(s_of(w, "name"), "one");
	cr_assert_eq(i_of(w, "used"), 1);
	cr_assert_eq(i_of(w, "limit"), 1);
	json_t *h = json_array_get(json_object_get(w, "holders"), 0);
	cr_assert_not_null(h, "%s", json_dumps(w, JSON_COMPACT));
	cr_assert_eq(i_of(h, "instance_id"), iid("ex.pool", "p1"));
	json_decref(d);
	d = get("/api/v1/instances/%lld/explain", iid("ex.nobody", "t"), 200);
	size_t i;
	int    seen = 0;
	json_array_foreach(json_object_get(d, "waiting_for"), i,
	                   w) if (!strcmp(s_of(w, "kind"), "no_live_worker"))
	{
		seen = 1;
		cr_assert_str_eq(s_of(w, "group"), "nobody");
	}
	cr_assert(seen, "no no_live_worker: %s", json_dumps(d, JSON_COMPACT));
	json_decref(d);

	/* overlap: the second run waits behind the first */
	trigger("ex.serial");
	ax_e2e_wait(e, 30, "ex.serial's first run to run",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = 'ex.serial' AND r.state = "
	            "'RUNNING'");
	trigger("ex.serial");
	ax_e2e_wait(e, 30, "ex.serial's second run to be held",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = 'ex.serial' AND r.state = "
	            "'QUEUED' AND r.reason = 'CONCURRENCY_BLOCKED'");
	run = ax_e2e_int(e,
	                 "SELECT r.id FROM dag_runs r JOIN dags d ON d.id "
	                 "= r.dag_id WHERE d.name = 'ex.serial' AND "
	                 "r.state = 'QUEUED'");
	d   = get("/api/v1/runs/%lld/explain", run, 200);
	w   = wait0(d);
	cr_assert_str_eq(s_of(w, "kind"), "overlap");
	cr_assert_str_eq(s_of(w, "policy"), "serial");
	cr_assert_eq(i_of(w, "behind_run_id"),
	             ax_e2e_int(e,
	                        "SELECT r.id FROM dag_runs r JOIN dags d "
	                        "ON d.id = r.dag_id WHERE d.name = "
	                        "'ex.serial' AND r.state = 'RUNNING'"));
	cr_assert_str_eq(s_of(w, "behind_state"), "RUNNING");
	json_decref(d);

	/* the long tasks end here (a draining worker would wait for them):
	 * ex.serial paused first, so its held run does not start another */
	ax_e2e_http(url, token, "POST", "/api/v1/dags/ex.serial/pause", "{}",
	            2, NULL, &a);
	cr_assert(a.status >= 200 && a.status < 300, "%s", a.body);
	json_decref(a.js);
	ax_e2e_wait(e, 10, "ex.serial paused",
	            "SELECT count(*) FROM dags WHERE name = 'ex.serial' AND "
	            "paused");
	kill_running();
}

static void
bad_ids(void)
{
	json_t *d = get("/api/v1/instances/%lld/explain", 987654321, 404);
	char   *t = json_dumps(d, JSON_COMPACT);
	cr_assert(t != NULL && strstr(t, "no task instance 987654321") != NULL,
	          "%s", t);
	free(t);
	json_decref(d);
	d = get("/api/v1/runs/%lld/explain", 987654321, 404);
	t = json_dumps(d, JSON_COMPACT);
	cr_assert(t != NULL && strstr(t, "no run 987654321") != NULL, "%s", t);
	free(t);
	json_decref(d);
	ax_e2e_answer a;
	ax_e2e_http(url, token, "GET", "/api/v1/instances/abc/explain", NULL,
	            0, NULL, &a);
	cr_assert_eq(a.status, 400, "%s", a.body);
	cr_assert_not_null(a.js, "%s", a.body);
	cr_assert(strstr(a.body, "abc") != NULL, "%s", a.body);
	json_decref(a.js);
	ax_e2e_http(url, token, "GET", "/api/v1/runs/-1/explain", NULL, 0,
	            NULL, &a);
	cr_assert_eq(a.status, 400, "%s", a.body);
	json_decref(a.js);
	EXPECT_RC(1, "explain", "instance", "987654321");
	cr_assert(strstr(err, "no task instance 987654321") != NULL, "%s",
	          err);
	EXPECT_RC(2, "explain", "instance", "x");
	EXPECT_RC(2, "explain", "dag", "1");
}

/* attempt n of the explanation */
static json_t *
att(json_t *d, size_t n)
{
	json_t *a = json_array_get(json_object_get(d, "attempts"), n);
	cr_assert_not_null(a, "no attempt %zu: %s", n,
	                   json_dumps(d, JSON_COMPACT));
	return a;
}

static void
retry_and_lost(void)
{
	char yaml[3 * PATH_MAX + 512], mark[PATH_MAX + 16], wid[64], want[128];
	json_t *d;
	int64_t id;

	snprintf(mark, sizeof(mark), "%s/retry.mark", e->st.home);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: ex.retry\ntasks:\n"
	         "  - name: t\n"
	         "    command: \"test -f %s && exit 0; touch %s; exit 3\"\n"
	         "    retries: {count: 1, delay: 0s}\n"
	         "---\n"
	         "kind: DAG\nname: ex.lost\ntasks:\n"
	         "  - name: t\n"
	         "    command: \"[ $AX_ATTEMPT = 1 ] && sleep 20; true\"\n"
	         "    retries: {count: 2, delay: 0s}\n",
	         mark, mark);
	ax_e2e_load(e, "later", "ex.retry", yaml);
	ax_e2e_load(e, "later", "ex.lost", yaml);
	trigger("ex.retry");
	WAIT_REASON("ex.retry", "t", "i.state = 'SUCCESS'");
	d = get("/api/v1/instances/%lld/explain", iid("ex.retry", "t"), 200);
	cr_assert_str_eq(s_of(att(d, 0), "how_ended"), "FAILED: exit 3");
	cr_assert_str_eq(s_of(att(d, 1), "why_started"), "retry after exit 3");
	cr_assert_str_eq(s_of(att(d, 1), "how_ended"), "SUCCESS (exit 0)");
	cr_assert(json_array_size(json_object_get(d, "waiting_for")) == 0);
	json_decref(d);

	trigger("ex.lost");
	ax_e2e_wait(e, 30, "ex.lost to run",
	            "SELECT count(*) FROM attempts a JOIN task_instances i ON "
	            "i.id = a.instance_id JOIN dags d ON d.id = i.dag_id "
	            "WHERE d.name = 'ex.lost' AND a.state = 'RUNNING'");
	id = iid("ex.lost", "t");
	ax_e2e_text(e, wid, sizeof(wid),
	            "SELECT worker_id FROM attempts WHERE instance_id = %lld "
	            "AND state = 'RUNNING'",
	            (long long) id);
	cr_assert(strncmp(wid, "standalone-", 11) == 0, "worker id '%s'", wid);
	ax_e2e_kill_worker(e, atoi(wid + 11) - 1, SIGKILL);
	ax_e2e_wait(e, 60, "ex.lost to succeed on the other worker",
	            "SELECT state = 'SUCCESS' FROM task_instances WHERE id = "
	            "%lld",
	            (long long) id);
	d = get("/api/v1/instances/%lld/explain", id, 200);
	snprintf(want, sizeof(want), "UNKNOWN after worker %s's lease lapsed",
	         wid);
	cr_assert_str_eq(s_of(att(d, 0), "how_ended"), want);
	cr_assert(strncmp(s_of(att(d, 1), "why_started"),
	                  "re-run after attempt 1 was lost", 31) == 0,
	          "%s", s_of(att(d, 1), "why_started"));
	cr_assert_str_eq(s_of(att(d, 1), "how_ended"), "SUCCESS (exit 0)");
	json_decref(d);
	char ids[24];
	snprintf(ids, sizeof(ids), "%lld", (long long) id);
	EXPECT_RC(0, "explain", "instance", ids);
	fprintf(stderr, "explain_e2e: a re-run after a lost worker:\n%s", out);
}

Test(explain_e2e, waits_attempts_and_bad_ids)
{
	/* groups without workers have no capacity: ex.nobody waits */
	e = ax_e2e_new(2, "resources:\n  default_group_slots: 0\n");
	ax_e2e_load(e, "ex", NULL, dags_yaml);
	PGresult *r = PQexec(e->db,
	                     "INSERT INTO pools (name, slots) VALUES "
	                     "('one', 1)");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(e->db));
	PQclear(r);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_OPERATOR, "explain-e2e", url,
	                       sizeof(url), token);
	waits();
	bad_ids();
	retry_and_lost();
}
