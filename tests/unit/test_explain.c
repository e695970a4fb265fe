/*
 * test_explain.c - engine/explain.c: the explanation assembled from the
 * facts of an instance or a run (no I/O: the facts are written here as
 * JSON, shaped as api-server/api_explain.c reads them), and its human
 * form. Each case asserts what an operator reads: what it waits for, the
 * text of each attempt, the timeline's gaps.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "explain.h"

#define T0 INT64_C(1764583200000000) /* 2025-12-01T10:00:00Z */

static json_t *
facts(const char *text)
{
	json_error_t e;
	json_t      *f = json_loads(text, 0, &e);
	cr_assert_not_null(f, "facts: %s at %d", e.text, e.line);
	return f;
}

static json_t *
build(const char *text)
{
	json_t *f = facts(text), *out = NULL;
	cr_assert_eq(ax_explain_build(f, &out), AX_OK, "%s", ax_err_detail());
	json_decref(f);
	return out;
}

static const char *
str_at(json_t *doc, const char *path)
{
	/* "waiting_for/0/text": object keys and array indices */
	char        buf[200];
	json_t     *v = doc;
	const char *p = path;
	while (v != NULL && *p) {
		size_t n = strcspn(p, "/");
		snprintf(buf, sizeof(buf), "%.*s", (int) n, p);
		v = json_is_array(v)
		    ? json_array_get(v, strtoul(buf, NULL, 10))
		    : json_object_get(v, buf);
		p += n + (p[n] == '/');
	}
	cr_assert(json_is_string(v), "%s is not a string", path);
	return json_string_value(v);
}

static json_int_t
int_at(json_t *doc, const char *k1, size_t i, const char *k2)
{
	json_t *v =
	    json_object_get(json_array_get(json_object_get(doc, k1), i), k2);
	cr_assert(json_is_integer(v), "%s/%zu/%s is not an integer", k1, i,
	          k2);
	return json_integer_value(v);
}

static char *
text_of(json_t *doc)
{
	ax_buf b;
	ax_buf_init(&b, 0);
	ax_explain_text(doc, &b);
	cr_assert_eq(b.err, AX_OK);
	return b.p; /* owned by the caller */
}

Test(explain, bad_facts_are_refused)
{
	json_t *out = NULL;
	json_t *f   = facts("{\"subject\":\"dag\"}");
	cr_assert_eq(ax_explain_build(f, &out), AX_EINVAL);
	cr_assert_null(out);
	cr_assert(strstr(ax_err_detail(), "subject") != NULL);
	json_decref(f);
	f = facts("{\"subject\":\"instance\"}");
	cr_assert_eq(ax_explain_build(f, &out), AX_EINVAL);
	cr_assert(strstr(ax_err_detail(), "instance row") != NULL);
	json_decref(f);
}

Test(explain, upstream_task)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583260000000,"
	    "\"instance\":{\"id\":12,\"dag\":\"etl\",\"task\":\"load\","
	    "\"run_id\":3,\"state\":\"PENDING\",\"reason\":\"WAIT_"
	    "DEPENDENCY\"},"
	    "\"upstream_tasks\":[{\"task\":\"extract\",\"instance_id\":11,"
	    "\"state\":\"RUNNING\"},{\"task\":\"ok\",\"instance_id\":10,"
	    "\"state\":\"SUCCESS\"},{\"task\":\"late\"}],"
	    "\"events\":[{\"id\":1,\"type\":\"run.created\","
	    "\"time_us\":1764583200000000},{\"id\":2,\"type\":\"run.planned\","
	    "\"time_us\":1764583200250000}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "upstream_task");
	cr_assert_str_eq(str_at(d, "waiting_for/0/task"), "extract");
	cr_assert_str_eq(str_at(d, "waiting_for/0/state"), "RUNNING");
	cr_assert_eq(int_at(d, "waiting_for", 0, "instance_id"), 11);
	cr_assert_str_eq(str_at(d, "waiting_for/0/text"),
	                 "upstream task extract is RUNNING (instance 11)");
	cr_assert_str_eq(str_at(d, "waiting_for/1/text"),
	                 "upstream task late has no instance yet");
	cr_assert_eq(json_array_size(json_object_get(d, "waiting_for")), 2);
	cr_assert_eq(int_at(d, "timeline", 1, "since_previous_us"), 250000);
	cr_assert_str_eq(str_at(d, "timeline/0/time"),
	                 "2025-12-01T10:00:00.000000Z");
	cr_assert(json_is_false(json_object_get(d, "running")));
	cr_assert_str_eq(str_at(d, "summary"),
	                 "PENDING WAIT_DEPENDENCY: upstream task extract is "
	                 "RUNNING (instance 11)");
	char *t = text_of(d);
	cr_assert(strstr(t, "instance 12  etl.load  run 3") != NULL, "%s", t);
	cr_assert(strstr(t, "waits on  upstream task extract is RUNNING") !=
	              NULL,
	          "%s", t);
	cr_assert(strstr(t, "250ms") != NULL, "%s", t);
	free(t);
	json_decref(d);
}

Test(explain, upstream_dag_no_run_yet)
{
	json_t *d = build(
	    "{\"subject\":\"run\",\"now_us\":1764583260000000,"
	    "\"run\":{\"id\":7,\"dag\":\"down\",\"state\":\"QUEUED\","
	    "\"reason\":\"WAIT_DEPENDENCY\",\"logical_us\":1764547200000000},"
	    "\"upstream_dags\":[{\"dag\":\"up\",\"mode\":\"same_period\","
	    "\"logical_us\":1764547200000000,\"run_id\":null,\"state\":null},"
	    "{\"dag\":\"up2\",\"mode\":\"latest_success\",\"run_id\":5,"
	    "\"state\":\"FAILED\"},{\"dag\":\"met\",\"mode\":\"same_period\","
	    "\"run_id\":4,\"state\":\"SUCCESS\"}]}");
	cr_assert_eq(json_array_size(json_object_get(d, "waiting_for")), 2);
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "upstream_dag");
	cr_assert(json_is_null(json_object_get(
	    json_array_get(json_object_get(d, "waiting_for"), 0), "run_id")));
	cr_assert_str_eq(
	    str_at(d, "waiting_for/0/text"),
	    "upstream DAG up, period 2025-12-01T00:00:00.000000Z: "
	    "no run yet");
	cr_assert_str_eq(str_at(d, "waiting_for/0/logical_time"),
	                 "2025-12-01T00:00:00.000000Z");
	cr_assert_str_eq(str_at(d, "waiting_for/1/text"),
	                 "upstream DAG up2 (its latest run): run 5 is FAILED");
	json_decref(d);
}

Test(explain, pool_at_capacity_names_holders)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583260000000,"
	    "\"instance\":{\"id\":20,\"dag\":\"d\",\"task\":\"t\","
	    "\"state\":\"PENDING\",\"reason\":\"WAIT_RESOURCE\","
	    "\"worker_group\":\"default\",\"pool\":\"db\"},"
	    "\"workers\":{\"group\":\"default\",\"live\":1,\"total\":1},"
	    "\"holders\":[{\"instance_id\":18,\"dag\":\"a\",\"task\":\"x\","
	    "\"state\":\"RUNNING\"},{\"instance_id\":19,\"dag\":\"b\","
	    "\"task\":\"y\",\"state\":\"READY\"}],"
	    "\"events\":[{\"id\":5,\"type\":\"instance.delayed\","
	    "\"reason\":\"WAIT_RESOURCE\",\"time_us\":1764583200000000,"
	    "\"payload\":{\"tier\":\"P2\",\"held_by\":\"pool\",\"group\":"
	    "\"default\",\"group_used\":2,\"group_limit\":64,\"pool\":\"db\","
	    "\"pool_used\":2,\"pool_slots\":2}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "capacity");
	cr_assert_str_eq(str_at(d, "waiting_for/0/scope"), "pool");
	cr_assert_str_eq(str_at(d, "waiting_for/0/name"), "db");
	cr_assert_eq(int_at(d, "waiting_for", 0, "used"), 2);
	cr_assert_eq(int_at(d, "waiting_for", 0, "limit"), 2);
	json_t *h = json_object_get(
	    json_array_get(json_object_get(d, "waiting_for"), 0), "holders");
	cr_assert_eq(json_array_size(h), 2);
	cr_assert_eq(json_integer_value(
	                 json_object_get(json_array_get(h, 1), "instance_id")),
	             19);
	cr_assert_str_eq(
	    str_at(d, "waiting_for/0/text"),
	    "pool db is at capacity (2/2 slots), held by instance "
	    "18 (a.x RUNNING), instance 19 (b.y READY)");
	/* a live worker: no no_live_worker entry */
	cr_assert_eq(json_array_size(json_object_get(d, "waiting_for")), 1);
	json_decref(d);
}

Test(explain, shaved_instance_names_its_instant_and_the_backlog)
{
	json_t *d =
	    build("{\"subject\":\"instance\",\"now_us\":1764583260000000,"
	          "\"instance\":{\"id\":20,\"dag\":\"d\",\"task\":\"t\","
	          "\"state\":\"PENDING\",\"reason\":\"WAIT_RESOURCE\","
	          "\"worker_group\":\"default\"},"
	          "\"workers\":{\"group\":\"default\",\"live\":1,\"total\":1},"
	          "\"events\":[{\"id\":5,\"type\":\"instance.delayed\","
	          "\"reason\":\"BACKPRESSURE_DELAYED\",\"time_us\":"
	          "1764583200000000,\"payload\":{\"tier\":\"P3\",\"held_by\":"
	          "\"shaving\",\"group\":\"default\",\"until\":"
	          "\"2025-12-01T10:01:00.000000Z\",\"backlog\":250,"
	          "\"backlog_threshold\":200,\"level_pct\":0}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "backpressure");
	cr_assert_str_eq(str_at(d, "waiting_for/0/until"),
	                 "2025-12-01T10:01:00.000000Z");
	cr_assert_str_eq(
	    str_at(d, "waiting_for/0/text"),
	    "delayed by peak shaving until 2025-12-01T10:01:00.000000Z: "
	    "worker group default had 250 waiting (threshold 200) and water "
	    "level 0%; released earlier as the backlog drains");
	char *t = text_of(d);
	cr_assert(strstr(t,
	                 "delayed (shaving) until "
	                 "2025-12-01T10:01:00.000000Z") != NULL,
	          "%s", t);
	free(t);
	json_decref(d);
}

Test(explain, pressure_hold_names_level_and_expiry)
{
	json_t *d =
	    build("{\"subject\":\"instance\",\"now_us\":1764583260000000,"
	          "\"instance\":{\"id\":20,\"dag\":\"d\",\"task\":\"t\","
	          "\"state\":\"PENDING\",\"reason\":\"WAIT_RESOURCE\","
	          "\"worker_group\":\"default\"},"
	          "\"workers\":{\"group\":\"default\",\"live\":1,\"total\":1},"
	          "\"events\":[{\"id\":5,\"type\":\"instance.delayed\","
	          "\"reason\":\"BACKPRESSURE_DELAYED\",\"time_us\":"
	          "1764583200000000,\"payload\":{\"tier\":\"P3\",\"held_by\":"
	          "\"pressure\",\"group\":\"default\",\"level_pct\":95,"
	          "\"until\":\"2025-12-01T10:05:00.000000Z\"}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "backpressure");
	cr_assert_str_eq(str_at(d, "waiting_for/0/text"),
	                 "held by the water level pushed for its pool or "
	                 "group (95%) until 2025-12-01T10:05:00.000000Z; P0 "
	                 "is still admitted");
	json_decref(d);
}

Test(explain, no_live_worker_in_group)
{
	json_t *d =
	    build("{\"subject\":\"instance\",\"now_us\":1764583260000000,"
	          "\"instance\":{\"id\":21,\"dag\":\"d\",\"task\":\"t\","
	          "\"state\":\"READY\",\"worker_group\":\"gpu\"},"
	          "\"workers\":{\"group\":\"gpu\",\"live\":0,\"total\":2},"
	          "\"attempts\":[{\"number\":1,\"state\":\"QUEUED\","
	          "\"due_us\":1764583200000000}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "dispatch");
	cr_assert_str_eq(str_at(d, "waiting_for/1/kind"), "no_live_worker");
	cr_assert_str_eq(str_at(d, "waiting_for/1/group"), "gpu");
	cr_assert_str_eq(str_at(d, "waiting_for/1/text"),
	                 "no live worker in group gpu (2 registered, none "
	                 "with a lease)");
	json_decref(d);
}

Test(explain, delay_instant)
{
	json_t *d =
	    build("{\"subject\":\"instance\",\"now_us\":1764583200000000,"
	          "\"instance\":{\"id\":22,\"dag\":\"d\",\"task\":\"t\","
	          "\"state\":\"READY\",\"worker_group\":\"g\"},"
	          "\"workers\":{\"group\":\"g\",\"live\":1,\"total\":1},"
	          "\"attempts\":[{\"number\":1,\"state\":\"QUEUED\","
	          "\"due_us\":1764583230000000}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "delay");
	cr_assert_str_eq(str_at(d, "waiting_for/0/until"),
	                 "2025-12-01T10:00:30.000000Z");
	cr_assert(strstr(str_at(d, "waiting_for/0/text"), "in 30.0s") != NULL);
	json_decref(d);
}

Test(explain, blocked_by_rule)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583260000000,"
	    "\"instance\":{\"id\":30,\"dag\":\"d\",\"task\":\"t\","
	    "\"state\":\"PENDING\",\"reason\":\"RULE_BLOCKED rule=4\"},"
	    "\"rules\":[{\"id\":4,\"action\":\"block\",\"note\":\"freeze\"}],"
	    "\"events\":[{\"id\":9,\"type\":\"instance.blocked\","
	    "\"reason\":\"RULE_BLOCKED\",\"time_us\":1764583200000000,"
	    "\"payload\":{\"rule_id\":4}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "rule");
	cr_assert_eq(int_at(d, "waiting_for", 0, "rule_id"), 4);
	cr_assert_str_eq(str_at(d, "waiting_for/0/name"), "freeze");
	cr_assert_str_eq(str_at(d, "waiting_for/0/text"),
	                 "held by block rule 4 \"freeze\"");
	cr_assert_str_eq(str_at(d, "timeline/0/text"), "blocked by rule 4");
	json_decref(d);
}

Test(explain, overlap_waits_behind_run)
{
	json_t *d = build(
	    "{\"subject\":\"run\",\"now_us\":1764583260000000,"
	    "\"run\":{\"id\":9,\"dag\":\"d\",\"state\":\"QUEUED\","
	    "\"reason\":\"CONCURRENCY_BLOCKED\"},"
	    "\"concurrency\":{\"max_active_runs\":1,\"policy\":\"serial\"},"
	    "\"active_runs\":[{\"id\":8,\"state\":\"RUNNING\"}],"
	    "\"events\":[{\"id\":3,\"type\":\"run.held\",\"reason\":"
	    "\"CONCURRENCY_BLOCKED\",\"time_us\":1764583200000000,"
	    "\"payload\":{\"policy\":\"serial\",\"max_active_runs\":1,"
	    "\"behind\":8}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "overlap");
	cr_assert_str_eq(str_at(d, "waiting_for/0/policy"), "serial");
	cr_assert_eq(int_at(d, "waiting_for", 0, "behind_run_id"), 8);
	cr_assert_str_eq(str_at(d, "waiting_for/0/behind_state"), "RUNNING");
	cr_assert_str_eq(str_at(d, "waiting_for/0/text"),
	                 "overlap policy serial (max_active_runs 1): waits "
	                 "behind run 8 (RUNNING)");
	json_decref(d);
}

Test(explain, retry_after_exit_3_and_backoff)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583202000000,"
	    "\"instance\":{\"id\":40,\"dag\":\"d\",\"task\":\"t\","
	    "\"state\":\"PENDING\",\"reason\":\"RETRY_SCHEDULED\"},"
	    "\"attempts\":[{\"number\":1,\"state\":\"FAILED\",\"worker_id\":"
	    "\"w1\",\"exit_status\":3,\"ended_us\":1764583201000000}],"
	    "\"events\":[{\"id\":1,\"type\":\"instance.failed\",\"attempt\":1,"
	    "\"time_us\":1764583201000000},{\"id\":2,\"type\":"
	    "\"instance.retry_scheduled\",\"reason\":\"RETRY_SCHEDULED\","
	    "\"attempt\":1,\"time_us\":1764583201000000,\"payload\":"
	    "{\"delay_us\":5000000,\"fire_at_us\":1764583206000000,"
	    "\"attempt\":1,\"max_tries\":3}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "backoff");
	cr_assert_str_eq(str_at(d, "waiting_for/0/until"),
	                 "2025-12-01T10:00:06.000000Z");
	cr_assert_eq(int_at(d, "waiting_for", 0, "next_attempt"), 2);
	cr_assert(strstr(str_at(d, "waiting_for/0/text"), "in 4.0s") != NULL,
	          "%s", str_at(d, "waiting_for/0/text"));
	cr_assert_str_eq(str_at(d, "attempts/0/how_ended"), "FAILED: exit 3");
	cr_assert_str_eq(str_at(d, "attempts/0/why_started"), "first attempt");
	json_decref(d);

	d = build("{\"subject\":\"instance\",\"now_us\":1764583300000000,"
	          "\"instance\":{\"id\":40,\"dag\":\"d\",\"task\":\"t\","
	          "\"state\":\"SUCCESS\"},"
	          "\"attempts\":[{\"number\":1,\"state\":\"FAILED\","
	          "\"exit_status\":3},{\"number\":2,\"state\":\"SUCCESS\","
	          "\"exit_status\":0,\"worker_id\":\"w1\"}]}");
	cr_assert_str_eq(str_at(d, "attempts/1/why_started"),
	                 "retry after exit 3");
	cr_assert_str_eq(str_at(d, "attempts/1/how_ended"),
	                 "SUCCESS (exit 0)");
	cr_assert_eq(json_array_size(json_object_get(d, "waiting_for")), 0);
	cr_assert_str_eq(str_at(d, "summary"),
	                 "SUCCESS after 2 attempts: last SUCCESS (exit 0)");
	char *t = text_of(d);
	cr_assert(strstr(t,
	                 "#2 SUCCESS  on w1: retry after exit 3; ended "
	                 "SUCCESS (exit 0)") != NULL,
	          "%s", t);
	free(t);
	json_decref(d);
}

Test(explain, lost_worker_then_rerun_and_late_success)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583300000000,"
	    "\"instance\":{\"id\":50,\"dag\":\"d\",\"task\":\"t\","
	    "\"state\":\"SUCCESS\"},"
	    "\"attempts\":[{\"number\":1,\"state\":\"UNKNOWN\",\"worker_id\":"
	    "\"w2\",\"reason\":\"TIMEOUT_HEARTBEAT\"},{\"number\":2,\"state\":"
	    "\"SUCCESS\",\"worker_id\":\"w1\",\"exit_status\":0}],"
	    "\"events\":[{\"id\":1,\"type\":\"instance.unknown\",\"attempt\":"
	    "1,"
	    "\"reason\":\"TIMEOUT_HEARTBEAT\",\"time_us\":1764583200000000}]"
	    "}");
	cr_assert_str_eq(str_at(d, "attempts/0/how_ended"),
	                 "UNKNOWN after worker w2's lease lapsed");
	cr_assert_str_eq(str_at(d, "attempts/1/why_started"),
	                 "re-run after attempt 1 was lost: UNKNOWN after "
	                 "worker w2's lease lapsed");
	json_decref(d);

	/* the lost attempt's worker came back with SUCCESS */
	d = build("{\"subject\":\"instance\",\"now_us\":1764583300000000,"
	          "\"instance\":{\"id\":51,\"dag\":\"d\",\"task\":\"t\","
	          "\"state\":\"SUCCESS\"},"
	          "\"attempts\":[{\"number\":1,\"state\":\"SUCCESS\","
	          "\"worker_id\":\"w2\",\"exit_status\":0}],"
	          "\"events\":[{\"id\":1,\"type\":\"instance.unknown\","
	          "\"attempt\":1,\"time_us\":1764583200000000},{\"id\":2,"
	          "\"type\":\"instance.succeeded\",\"attempt\":1,"
	          "\"time_us\":1764583203000000}]}");
	cr_assert_str_eq(str_at(d, "attempts/0/how_ended"),
	                 "late SUCCESS reconciled: worker w2 reported after "
	                 "the attempt was taken for lost");
	cr_assert_eq(int_at(d, "timeline", 1, "since_previous_us"), 3000000);
	json_decref(d);
}

Test(explain, paused_and_run_unfinished)
{
	json_t *d = build(
	    "{\"subject\":\"run\",\"now_us\":1764583300000000,"
	    "\"dag_paused\":true,\"run\":{\"id\":2,\"dag\":\"d\",\"state\":"
	    "\"RUNNING\"},\"unfinished\":[{\"instance_id\":5,\"task\":\"a\","
	    "\"state\":\"RUNNING\"},{\"instance_id\":6,\"task\":\"b\","
	    "\"state\":\"PENDING\",\"reason\":\"DAG_PAUSED\"}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "dag_paused");
	cr_assert_str_eq(str_at(d, "waiting_for/1/kind"), "instance");
	cr_assert_eq(int_at(d, "waiting_for", 1, "instance_id"), 6);
	cr_assert_eq(json_array_size(json_object_get(d, "waiting_for")), 2);
	json_decref(d);
}

/* A run's deadline: the instant, the rule, missed or met, in both forms. */
Test(explain, run_deadline_missed_and_met)
{
	json_t *d = build(
	    "{\"subject\":\"run\",\"now_us\":1764583300000000,"
	    "\"run\":{\"id\":2,\"dag\":\"d\",\"state\":\"RUNNING\"},"
	    "\"deadline\":{\"at_us\":1764576000000000,\"rule\":\"08:00 day "
	    "+1 Asia/Shanghai\",\"missed\":true}}");
	cr_assert_str_eq(str_at(d, "deadline/at"),
	                 "2025-12-01T08:00:00.000000Z");
	cr_assert_str_eq(str_at(d, "deadline/rule"),
	                 "08:00 day +1 Asia/Shanghai");
	cr_assert(json_is_true(
	    json_object_get(json_object_get(d, "deadline"), "missed")));
	char *t = text_of(d);
	cr_assert(strstr(t,
	                 "deadline  2025-12-01T08:00:00.000000Z (08:00 day +1 "
	                 "Asia/Shanghai) MISSED\n") != NULL,
	          "%s", t);
	free(t);
	json_decref(d);

	d = build("{\"subject\":\"run\",\"now_us\":1764583300000000,"
	          "\"run\":{\"id\":3,\"dag\":\"d\",\"state\":\"SUCCESS\"},"
	          "\"deadline\":{\"at_us\":1764576000000000,\"rule\":\"2h "
	          "after the interval\",\"missed\":false,"
	          "\"met_us\":1764570000000000}}");
	cr_assert_str_eq(str_at(d, "deadline/met_at"),
	                 "2025-12-01T06:20:00.000000Z");
	t = text_of(d);
	cr_assert(strstr(t, "(2h after the interval) met\n") != NULL, "%s", t);
	free(t);
	json_decref(d);

	/* no deadline declared: no member */
	d = build("{\"subject\":\"run\",\"now_us\":1764583300000000,"
	          "\"run\":{\"id\":4,\"dag\":\"d\",\"state\":\"RUNNING\"}}");
	cr_assert_null(json_object_get(d, "deadline"));
	json_decref(d);
}

Test(explain, preempted_names_the_winner_and_the_requeue)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583202000000,"
	    "\"instance\":{\"id\":41,\"dag\":\"batch\",\"task\":\"t\","
	    "\"state\":\"PENDING\",\"reason\":\"PREEMPTED\"},"
	    "\"attempts\":[{\"number\":1,\"state\":\"CANCELED\",\"reason\":"
	    "\"PREEMPTED\",\"worker_id\":\"w1\"}],"
	    "\"events\":[{\"id\":1,\"type\":\"attempt.preempted\",\"reason\":"
	    "\"PREEMPTED\",\"attempt\":1,\"time_us\":1764583200000000,"
	    "\"payload\":{\"victim\":\"r1\",\"victim_tier\":\"P3\","
	    "\"winner\":\"r9\",\"winner_tier\":\"P0\",\"winner_dag\":"
	    "\"core\",\"winner_task\":\"kpi\",\"worker\":\"w1\"}},"
	    "{\"id\":2,\"type\":\"instance.retry_scheduled\",\"reason\":"
	    "\"PREEMPTED\",\"attempt\":1,\"time_us\":1764583201000000,"
	    "\"payload\":{\"delay_us\":65000000,\"fire_at_us\":"
	    "1764583266000000,\"attempt\":1,\"preempted\":true}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "preempted");
	cr_assert_str_eq(str_at(d, "waiting_for/0/winner"), "r9");
	cr_assert(strstr(str_at(d, "waiting_for/0/text"),
	                 "preempted by core.kpi (P0)") != NULL,
	          "%s", str_at(d, "waiting_for/0/text"));
	cr_assert(
	    strstr(str_at(d, "timeline/0/text"),
	           "attempt 1 preempted by core.kpi (P0 over P3) on w1") !=
	        NULL,
	    "%s", str_at(d, "timeline/0/text"));
	cr_assert(strstr(str_at(d, "timeline/1/text"), "no try used") != NULL,
	          "%s", str_at(d, "timeline/1/text"));
	json_decref(d);
}

/* The same victim once its instant passed: held by the recovery
 * throttle, then let back by it (instance.recovery_released). */
Test(explain, preempted_held_then_released_by_the_throttle)
{
	const char *head =
	    "{\"subject\":\"instance\",\"now_us\":1764583270000000,"
	    "\"instance\":{\"id\":41,\"dag\":\"batch\",\"task\":\"t\","
	    "\"state\":\"PENDING\",\"reason\":\"PREEMPTED\"},"
	    "\"events\":[{\"id\":1,\"type\":\"attempt.preempted\",\"reason\":"
	    "\"PREEMPTED\",\"attempt\":1,\"time_us\":1764583200000000,"
	    "\"payload\":{\"winner\":\"r9\",\"winner_tier\":\"P0\","
	    "\"winner_dag\":\"core\",\"winner_task\":\"kpi\"}},"
	    "{\"id\":2,\"type\":\"instance.retry_scheduled\",\"reason\":"
	    "\"PREEMPTED\",\"attempt\":1,\"time_us\":1764583201000000,"
	    "\"payload\":{\"delay_us\":65000000,\"fire_at_us\":"
	    "1764583266000000,\"attempt\":1,\"preempted\":true}}";
	char buf[2048];

	snprintf(buf, sizeof(buf), "%s]}", head);
	json_t *d = build(buf);
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "preempted");
	cr_assert(json_is_true(json_object_get(
	    json_array_get(json_object_get(d, "waiting_for"), 0),
	    "throttled")));
	cr_assert(strstr(str_at(d, "waiting_for/0/text"),
	                 "due for 4.0s, held by the recovery throttle") !=
	              NULL,
	          "%s", str_at(d, "waiting_for/0/text"));
	json_decref(d);

	snprintf(buf, sizeof(buf),
	         "%s,{\"id\":3,\"type\":\"instance.recovery_released\","
	         "\"reason\":\"PREEMPTED\",\"attempt\":1,\"time_us\":"
	         "1764583269000000,\"payload\":{\"tier\":\"P3\",\"held_us\":"
	         "3000000,\"recovery_rate\":10}}]}",
	         head);
	d = build(buf);
	cr_assert(
	    strstr(str_at(d, "waiting_for/0/text"),
	           "let back by the recovery throttle after 3.0s held") !=
	        NULL,
	    "%s", str_at(d, "waiting_for/0/text"));
	cr_assert(strstr(str_at(d, "timeline/2/text"),
	                 "let back by the recovery throttle as P3 after 3.0s "
	                 "held (preemption.recovery_rate 10)") != NULL,
	          "%s", str_at(d, "timeline/2/text"));
	json_decref(d);
}

Test(explain, preempted_by_a_calendar_names_it_and_its_slots)
{
	json_t *d = build(
	    "{\"subject\":\"instance\",\"now_us\":1764583202000000,"
	    "\"instance\":{\"id\":41,\"dag\":\"batch\",\"task\":\"t\","
	    "\"state\":\"PENDING\",\"reason\":\"PREEMPTED\"},"
	    "\"attempts\":[{\"number\":1,\"state\":\"CANCELED\",\"reason\":"
	    "\"PREEMPTED\",\"worker_id\":\"w1\"}],"
	    "\"events\":[{\"id\":1,\"type\":\"attempt.preempted\",\"reason\":"
	    "\"PREEMPTED\",\"attempt\":1,\"time_us\":1764583200000000,"
	    "\"payload\":{\"victim\":\"r1\",\"victim_tier\":\"P3\","
	    "\"calendar\":\"gpu\",\"calendar_of\":\"group\","
	    "\"calendar_slots\":1,\"held_slots\":7,\"worker\":\"w1\"}},"
	    "{\"id\":2,\"type\":\"instance.retry_scheduled\",\"reason\":"
	    "\"PREEMPTED\",\"attempt\":1,\"time_us\":1764583201000000,"
	    "\"payload\":{\"delay_us\":65000000,\"fire_at_us\":"
	    "1764583266000000,\"attempt\":1,\"preempted\":true}}]}");
	cr_assert_str_eq(str_at(d, "waiting_for/0/kind"), "preempted");
	cr_assert_str_eq(str_at(d, "waiting_for/0/calendar"), "gpu");
	cr_assert(strstr(str_at(d, "waiting_for/0/text"),
	                 "stopped by the capacity calendar of group gpu (1 "
	                 "slots in force)") != NULL,
	          "%s", str_at(d, "waiting_for/0/text"));
	cr_assert(strstr(str_at(d, "timeline/0/text"),
	                 "attempt 1 stopped by the capacity calendar of group "
	                 "gpu (1 slots, P3) on w1") != NULL,
	          "%s", str_at(d, "timeline/0/text"));
	json_decref(d);
}
