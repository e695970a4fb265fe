/*
 * test_flow.c - the flow actors after admission (instance generator,
 * renderer, hooks, result handler, event emitter) against a real
 * PostgreSQL (tests/integration/flow_harness.h), with capture actors
 * standing in for their neighbours (queue, time_detector,
 * dependency_detector, and whichever flow actor a test does not run).
 * The resource detector's tests are in test_admission.c.
 *
 * Covers: the generator's plan and admission under replay (one attempt,
 * same run_id); rendered output of a DAG in Asia/Shanghai and a render
 * error; the result handler's success path, SUCCESS with its STARTED in
 * one batch, retries with exponential backoff timings, FAILED after the
 * last try, TIMEOUT, UNKNOWN then a late SUCCESS reconciled once,
 * duplicate results; the emitter's writes and its behaviour during a
 * database outage; pre, exec and post hooks; the statements of the
 * instance's path planned when an actor opens its store.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_metrics.h"
#include "buf.h"
#include "clock.h"
#include "config.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "event_emitter.h"
#include "flow_util.h"
#include "hooks.h"
#include "instance_generator.h"
#include "log.h"
#include "migrate.h"
#include "pg_harness.h"
#include "pipeline.h"
#include "renderer.h"
#include "resource_detector.h"
#include "result_handler.h"
#include "store.h"
#include "store_attempts.h"
#include "tz.h"
#include "uuid.h"
#include "flow_harness.h"
#include "store_events.h"
#include "store_fixture.h"
#include "store_instances.h"

TestSuite(flow, .init = flow_setup, .fini = flow_teardown, .timeout = 120);

/* ---------------------------------------------------------------------- */
/* instance generator */

static void
send_admit_pool(const char *task, int shard, const char *pool)
{
	Ax__InstanceRef   ref = ref_of(task, shard);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__Admission     a   = AX__ADMISSION__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = "g1";
	if (pool != NULL)
		rd.pool = (char *) pool;
	rd.due_at_us    = logical_us;
	a.instance      = &ref;
	a.decision      = AX__ADMISSION_DECISION__ADMIT;
	a.ready         = &rd;
	a.decided_at_us = ax_clock_utc_us();
	c.body_case     = AX__COMMAND__BODY_ADMISSION;
	c.admission     = &a;
	send1(AX_A_INSTANCE_GENERATOR, &c);
}

static void
send_admit(const char *task, int shard)
{
	send_admit_pool(task, shard, NULL);
}

/* The instance generator renders each attempt and runs the pre hooks on
 * it in its own batch: what leaves for the queue is an AttemptRendered. */
/*
 * ax_flow_store_warm, as the result handler calls it from its init: its
 * store is open and the statements of the operations it runs (a result's
 * look-up and update, the instance moves, the events) are each prepared
 * and planned once before any result arrives, generic ones with their
 * generic plan; nothing is written, and no statement of another actor's
 * operations is prepared. Nothing without a DSN; a server that cannot be
 * reached leaves the store closed (opened at first use).
 */
Test(flow, warm_plans_the_statements_of_the_path_before_any_instance)
{
	static const ax_flow_prepare_fn ops[] = {
		ax_store_results_prepare,
		ax_store_move_instances_prepare,
		ax_store_events_prepare,
	};
	static const char *const planned[] = { "ax_sa.lock_att",
		                               "ax_sa.update_att",
		                               "ax_store.move_ti",
		                               "ax_sa.insert_ev" };
	static const char *const generic[] = { "ax_sa.lock_att",
		                               "ax_sa.insert_ev" };
	static const char *const others[]  = { "ax_sa.admit_lock",
		                               "ax_sa.record_dispatch",
		                               "runs_guard_lock",
		                               "ax_store.insert_ti" };
	ax_store                *s         = NULL;
	int64_t                  g = 0, c = 0;

	ax_flow_store_warm(&s, ax_test_pg_dsn(pg), "test", ops, 3);
	cr_assert_not_null(s, "the store was not opened");
	for (size_t i = 0; i < 4; i++) {
		cr_assert(ax_test_plans(s, planned[i], &g, &c), "%s: missing",
		          planned[i]);
		cr_expect_eq(g + c, 1, "%s: planned %lld times", planned[i],
		             (long long) (g + c));
		cr_expect(!ax_test_plans(s, others[i], &g, &c),
		          "%s prepared for the result handler", others[i]);
	}
	for (size_t i = 0; i < 2; i++) {
		(void) ax_test_plans(s, generic[i], &g, &c);
		cr_expect_eq(g, 1, "%s: no generic plan", generic[i]);
	}
	cr_assert_eq(ax_test_q_int(s, "SELECT count(*) FROM attempts"), 0,
	             "the warm-up wrote attempts");
	ax_store_close(s);
	s = NULL;
	ax_flow_store_warm(&s, "", "test", ops, 3);
	cr_assert_null(s);
	ax_flow_store_warm(&s, "host=/nonexistent-dir-for-ax-test dbname=x",
	                   "test", ops, 3);
	cr_assert_null(s, "a store was left for a server that is not there");
}

Test(flow, generator_plan_and_replayed_admission)
{
	const Ax__Command__BodyCase AC = AX__COMMAND__BODY_ATTEMPT_RENDERED;
	cr_assert_eq(ax_instance_generator_add(sys, &ctx), AX_OK);
	add_capture(sys, AX_A_QUEUE);
	add_capture(sys, AX_A_RESOURCE_DETECTOR);
	add_capture(sys, AX_A_EVENT_EMITTER);
	flow_start();

	Ax__PlannedInstance pi[2], *pp[2];
	Ax__RunPlan         plan     = AX__RUN_PLAN__INIT;
	Ax__Command         c        = AX__COMMAND__INIT;
	const char *const   tasks[2] = { "a", "r" };
	for (int i = 0; i < 2; i++) {
		pi[i]      = (Ax__PlannedInstance) AX__PLANNED_INSTANCE__INIT;
		pi[i].task = (char *) tasks[i];
		pi[i].shard_total  = 1;
		pi[i].channel      = "Px";
		pi[i].worker_group = "g1";
		pi[i].max_tries    = i == 1 ? 3 : 1;
		pi[i].state        = "PENDING";
		pi[i].reason = i == 1 ? "WAIT_DEPENDENCY" : "WAIT_RESOURCE";
		pp[i]        = &pi[i];
	}
	plan.dag             = "flow.test";
	plan.dag_id          = dag_id;
	plan.dag_version_id  = version_id;
	plan.dag_run_id      = run_id;
	plan.logical_time_us = logical_us;
	plan.n_instances     = 2;
	plan.instances       = pp;
	c.body_case          = AX__COMMAND__BODY_RUN_PLAN;
	c.run_plan           = &plan;
	send1(AX_A_INSTANCE_GENERATOR, &c);
	send1(AX_A_INSTANCE_GENERATOR, &c); /* replayed plan */
	send_admit("a", 0);
	send_admit("a", 0); /* replayed admission */
	cr_assert(wait_count(AX_A_QUEUE, AC, 2));
	/* attempts go out before the plan's PENDING rows are written */
	for (int i = 0;
	     i < 100 && q64("SELECT count(*) FROM task_instances") < 2; i++)
		ax_clock_sleep_us(20000);
	cr_assert_eq(q64("SELECT count(*) FROM task_instances"), 2);
	cr_assert_eq(
	    q64("SELECT count(*) FROM task_instances WHERE task = 'r' "
	        "AND state = 'PENDING' AND reason = "
	        "'WAIT_DEPENDENCY' AND max_tries = 3"),
	    1);
	cr_assert_eq(
	    q64("SELECT count(*) FROM task_instances WHERE task = 'a' "
	        "AND state = 'READY' AND try_number = 1"),
	    1);
	cr_assert_eq(q64("SELECT count(*) FROM attempts WHERE admitted_at IS "
	                 "NOT NULL AND due_at = ax_ts("
	                 "0) + (SELECT "
	                 "logical_date - ax_ts(0) FROM dag_runs)"),
	             1, "one attempt, with due_at and admitted_at");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.admitted' AND payload->>'to' = 'READY' "
	                 "AND (payload->>'decided_at_us')::bigint > 0"),
	             1);
	Ax__Command *a1 = cap_cmd(AX_A_QUEUE, AC, 0);
	Ax__Command *a2 = cap_cmd(AX_A_QUEUE, AC, 1);
	cr_assert_str_eq(a1->attempt_rendered->run_id,
	                 a2->attempt_rendered->run_id,
	                 "the replay must dispatch the stored run_id");
	cr_assert_eq(a1->attempt_rendered->attempt, 1);
	cr_assert_neq(a1->attempt_rendered->instance->instance_id, 0);
	char sql[160];
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM attempts WHERE run_id::text = '%s'",
	         a1->attempt_rendered->run_id);
	cr_assert_eq(q64(sql), 1, "the stored run_id goes out");
	ax__command__free_unpacked(a1, NULL);
	ax__command__free_unpacked(a2, NULL);
	/* an admission of an instance already running: skipped, slot back */
	q64("UPDATE task_instances SET state = 'RUNNING' WHERE task = 'a' "
	    "RETURNING 1");
	send_admit("a", 0);
	cr_assert(wait_count(AX_A_RESOURCE_DETECTOR,
	                     AX__COMMAND__BODY_SLOT_RELEASED, 1));
	cr_assert_eq(cap_count(AX_A_QUEUE, AC), 2);
	cr_assert_eq(q64("SELECT count(*) FROM attempts"), 1);
}

/* ---------------------------------------------------------------------- */
/* renderer */

/* Creates instance + attempt 1 of task (READY) and returns its run_id. */
static void
admit_row(const char *task, int shard, char run_id_out[37], int64_t *iid)
{
	const ax_task  *t  = ax_dag_entry_task(entry, task);
	ax_store_ti_row ti = {
		.dag_run_id      = run_id,
		.dag_id          = dag_id,
		.task            = task,
		.logical_time_us = logical_us,
		.shard           = shard,
		.shard_total     = shard + 1,
		.worker_group    = "g1",
		.max_tries       = 1 + t->eff.retries.count,
		.state           = AX_TI_PENDING,
	};
	cr_assert_eq(ax_store_insert_instances(db, &ti, 1, NULL), AX_OK, "%s",
	             ax_err_detail());
	ax_store_admit_row ad = { .instance_id    = ti.instance_id,
		                  .due_at_us      = logical_us,
		                  .admitted_at_us = ax_clock_utc_us() };
	cr_assert_eq(ax_store_admit(db, &ad, 1), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ad.action, AX_ADMIT_NEW);
	memcpy(run_id_out, ad.run_id, 37);
	*iid = ti.instance_id;
}

/* The run_id of the current attempt of task's shard 0 ("" if none). */
static void
run_id_of(const char *task, char rid[37])
{
	char      sql[256];
	PGresult *r = NULL;
	snprintf(sql, sizeof(sql),
	         "SELECT a.run_id::text, ti.id FROM attempts a JOIN "
	         "task_instances ti ON ti.id = a.instance_id WHERE ti.task = "
	         "'%s' AND ti.shard = 0 ORDER BY a.number DESC LIMIT 1",
	         task);
	cr_assert_eq(ax_store_query(db, sql, 0, NULL, &r), AX_OK, "%s",
	             ax_err_detail());
	snprintf(rid, 37, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
}

static const char *
env_of(const Ax__AttemptRendered *r, const char *key)
{
	for (size_t i = 0; i < r->n_env; i++)
		if (strcmp(r->env[i]->key, key) == 0)
			return r->env[i]->value;
	return NULL;
}

/* Rendering runs inside the instance generator's batch: an admission
 * comes out as an AttemptRendered for the queue, a render error as a
 * FAILED result (RENDER_ERROR) for the result handler. */
Test(flow, renderer_output_and_render_error)
{
	char rid[37];

	cr_assert_eq(ax_instance_generator_add(sys, &ctx), AX_OK);
	add_capture(sys, AX_A_QUEUE);
	add_capture(sys, AX_A_RESOURCE_DETECTOR);
	add_capture(sys, AX_A_RESULT_HANDLER);
	add_capture(sys, AX_A_EVENT_EMITTER);
	flow_start();
	send_admit("a", 0);
	cr_assert(
	    wait_count(AX_A_QUEUE, AX__COMMAND__BODY_ATTEMPT_RENDERED, 1));
	run_id_of("a", rid);
	Ax__Command *c =
	    cap_cmd(AX_A_QUEUE, AX__COMMAND__BODY_ATTEMPT_RENDERED, 0);
	const Ax__AttemptRendered *r = c->attempt_rendered;
	/* 18:30Z is 02:30 the next day in Shanghai; interval end +1 day */
	cr_assert_str_eq(r->command,
	                 "echo 2026-03-02 eu 2026-03-03T02:30:00+08:00");
	cr_assert_str_eq(env_of(r, "OUT"), "/data/20260302");
	cr_assert_str_eq(env_of(r, "AX_RUN_ID"), rid);
	cr_assert_str_eq(r->run_id, rid);
	cr_assert_str_eq(env_of(r, "AX_TASK"), "a");
	cr_assert_str_eq(env_of(r, "AX_ATTEMPT"), "1");
	cr_assert_str_eq(env_of(r, "AX_LOGICAL_DATE"),
	                 "2026-03-02T02:30:00+08:00");
	cr_assert_str_eq(r->task_type, "bash");
	cr_assert_str_eq(r->routing, "round_robin");
	cr_assert_str_eq(r->log_path,
	                 "/tmp/ax-flow-home/logs/flow.test/a/"
	                 "20260301T183000Z/0/1.log");
	cr_assert_eq(r->kill_grace_us, 10 * AX_USEC_PER_SEC);
	ax__command__free_unpacked(c, NULL);

	/* render error: a template that names an unknown variable (the DAG
	 * was valid at submit time; here the loaded copy is broken on
	 * purpose to reach the run-time path) */
	ax_task *u     = (ax_task *) ax_dag_entry_task(entry, "u");
	u->eff.command = "echo {{ dss }}";
	send_admit("u", 0);
	cr_assert(
	    wait_count(AX_A_RESULT_HANDLER, AX__COMMAND__BODY_RESULT, 1));
	run_id_of("u", rid);
	c = cap_cmd(AX_A_RESULT_HANDLER, AX__COMMAND__BODY_RESULT, 0);
	cr_assert_eq(c->result->status, AX__ATTEMPT_STATUS__ATTEMPT_FAILED);
	cr_assert_str_eq(c->result->reason, "RENDER_ERROR");
	cr_assert(strstr(c->result->error, "task 'u': command: offset 8") !=
	              NULL,
	          "error was: %s", c->result->error);
	cr_assert(strstr(c->result->error, "dss") != NULL);
	cr_assert_str_eq(c->result->run_id, rid);
	ax__command__free_unpacked(c, NULL);
	cr_assert(wait_events("attempt.render_failed", "RENDER_ERROR", 1));
	cr_assert_eq(cap_count(AX_A_QUEUE, AX__COMMAND__BODY_ATTEMPT_RENDERED),
	             1, "a failed render must not be dispatched");
	/* an unknown DAG is never rendered into a command: no attempt, the
	 * slot goes back */
	send_admit("zz", 0);
	cr_assert(wait_count(AX_A_RESOURCE_DETECTOR,
	                     AX__COMMAND__BODY_SLOT_RELEASED, 1));
	cr_assert_eq(cap_count(AX_A_QUEUE, AX__COMMAND__BODY_ATTEMPT_RENDERED),
	             1);
	cr_assert_eq(cap_count(AX_A_RESULT_HANDLER, AX__COMMAND__BODY_RESULT),
	             1);
}

/* ---------------------------------------------------------------------- */
/* result handler */

static void
rh_compose(void)
{
	cr_assert_eq(ax_result_handler_add(sys, &ctx), AX_OK);
	add_capture(sys, AX_A_RESOURCE_DETECTOR);
	add_capture(sys, AX_A_DEPENDENCY_DETECTOR);
	add_capture(sys, AX_A_TIME_DETECTOR);
	add_capture(sys, AX_A_EVENT_EMITTER);
	flow_start();
}

static Ax__Command *
result(Ax__Command *c, Ax__AttemptResult *r, Ax__InstanceRef *ref,
       const char *rid, Ax__AttemptStatus s)
{
	*c                  = (Ax__Command) AX__COMMAND__INIT;
	*r                  = (Ax__AttemptResult) AX__ATTEMPT_RESULT__INIT;
	r->instance         = ref;
	r->run_id           = (char *) rid;
	r->status           = s;
	r->worker_id        = "w1";
	int64_t now         = ax_clock_utc_us();
	r->dispatched_at_us = now - 2000;
	r->started_at_us    = now - 1000;
	if (s != AX__ATTEMPT_STATUS__ATTEMPT_STARTED) {
		r->ended_at_us = now;
		/* as the post hook attaches it */
		r->report_json = "{\"worker\":\"w1\",\"log_path\":\"/l\"}";
	}
	c->body_case = AX__COMMAND__BODY_RESULT;
	c->result    = r;
	return c;
}

static void
send_result(const char *task, const char *rid, Ax__AttemptStatus s)
{
	Ax__Command       c;
	Ax__AttemptResult r;
	Ax__InstanceRef   ref = ref_of(task, 0);
	send1(AX_A_RESULT_HANDLER, result(&c, &r, &ref, rid, s));
}

static int64_t
qstate(int64_t iid, const char *state)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM task_instances WHERE id = %lld AND "
	         "state = '%s'",
	         (long long) iid, state);
	return q64(sql);
}

static int
wait_state(int64_t iid, const char *state)
{
	for (int i = 0; i < 300; i++) {
		if (qstate(iid, state) == 1)
			return 1;
		ax_clock_sleep_us(10000);
	}
	return 0;
}

Test(flow, result_success_and_started_with_success_in_one_batch)
{
	char    r1[37], r2[37];
	int64_t i1, i2;
	rh_compose();
	admit_row("a", 0, r1, &i1);
	admit_row("a", 1, r2, &i2);
	send_result("a", r1, AX__ATTEMPT_STATUS__ATTEMPT_STARTED);
	cr_assert(wait_state(i1, "RUNNING"));
	send_result("a", r1, AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS);
	cr_assert(wait_state(i1, "SUCCESS"));
	/* SUCCESS arriving before its STARTED, in one envelope */
	Ax__Command       c[2], *cp[2];
	Ax__AttemptResult r[2];
	Ax__InstanceRef   ref = ref_of("a", 1);
	cp[0]                 = result(&c[0], &r[0], &ref, r2,
	                               AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS);
	cp[1]                 = result(&c[1], &r[1], &ref, r2,
	                               AX__ATTEMPT_STATUS__ATTEMPT_STARTED);
	send_cmds(AX_A_RESULT_HANDLER, cp, 2);
	cr_assert(wait_state(i2, "SUCCESS"));
	cr_assert(wait_count(AX_A_DEPENDENCY_DETECTOR,
	                     AX__COMMAND__BODY_INSTANCE_SUCCEEDED, 2));
	cr_assert_eq(q64("SELECT count(*) FROM attempts WHERE state = "
	                 "'SUCCESS' AND worker_id = 'w1' AND dispatched_at IS "
	                 "NOT NULL AND started_at IS NOT NULL AND ended_at IS "
	                 "NOT NULL AND exit_status = 0"),
	             2);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.succeeded'"),
	             2);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.running'"),
	             2);
	/* the report is stored with the move it caused, not as a row */
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.succeeded' AND payload->>'to' = 'SUCCESS' "
	                 "AND payload->'report'->>'log_path' = '/l'"),
	             2);
	cr_assert_eq(
	    cap_count(AX_A_RESOURCE_DETECTOR, AX__COMMAND__BODY_SLOT_RELEASED),
	    2);
	/* duplicates are harmless */
	send_result("a", r1, AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS);
	send_result("a", r1, AX__ATTEMPT_STATUS__ATTEMPT_FAILED);
	ax_clock_sleep_us(300000);
	cr_assert_eq(qstate(i1, "SUCCESS"), 1);
	cr_assert_eq(cap_count(AX_A_DEPENDENCY_DETECTOR,
	                       AX__COMMAND__BODY_INSTANCE_SUCCEEDED),
	             2);
	cr_assert_eq(
	    cap_count(AX_A_RESOURCE_DETECTOR, AX__COMMAND__BODY_SLOT_RELEASED),
	    2);
	/* the repeated SUCCESS adds no row; the FAILED that contradicts it
	 * is kept as a report of its own */
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'attempt.reported'"),
	             1);
}

/* Re-admits an instance (as the generator does for a retry). */
static void
readmit(int64_t iid, char rid[37], int expect_attempt)
{
	ax_store_admit_row ad = { .instance_id    = iid,
		                  .due_at_us      = ax_clock_utc_us(),
		                  .admitted_at_us = ax_clock_utc_us() };
	cr_assert_eq(ax_store_admit(db, &ad, 1), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ad.action, AX_ADMIT_NEW);
	cr_assert_eq(ad.attempt, expect_attempt);
	memcpy(rid, ad.run_id, 37);
}

Test(flow, result_retry_exponential_then_failed)
{
	char                        rid[37];
	int64_t                     iid;
	const Ax__Command__BodyCase TS = AX__COMMAND__BODY_TIMER_SET;
	/* task r: retries 2, exponential, delay 10s, max_delay 15s */
	const int64_t want[2] = { 10 * AX_USEC_PER_SEC, 15 * AX_USEC_PER_SEC };
	rh_compose();
	admit_row("r", 0, rid, &iid);
	for (int k = 0; k < 2; k++) {
		int64_t t0 = ax_clock_utc_us();
		send_result("r", rid, AX__ATTEMPT_STATUS__ATTEMPT_FAILED);
		cr_assert(wait_count(AX_A_TIME_DETECTOR, TS, (size_t) k + 1));
		cr_assert(wait_state(iid, "PENDING"));
		Ax__Command *c = cap_cmd(AX_A_TIME_DETECTOR, TS, (size_t) k);
		const Ax__TimerSet *ts = c->timer_set;
		cr_assert_eq(ts->kind, AX__TIMER_KIND__TIMER_RETRY);
		int64_t d = ts->fire_at_us - t0;
		cr_assert(d >= want[k] && d < want[k] + 2 * AX_USEC_PER_SEC,
		          "retry %d: delay %lld us, want %lld", k + 1,
		          (long long) d, (long long) want[k]);
		cr_assert_not_null(ts->ready);
		cr_assert_eq(ts->ready->instance->instance_id, iid);
		cr_assert_str_eq(ts->ready->worker_group, "g1");
		cr_assert_eq(ts->ready->due_at_us, ts->fire_at_us);
		cr_assert_str_eq(ts->notify, AX_A_RESOURCE_DETECTOR);
		ax__command__free_unpacked(c, NULL);
		cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE "
		                 "reason = 'RETRY_SCHEDULED'"),
		             1);
		readmit(iid, rid, k + 2);
	}
	send_result("r", rid, AX__ATTEMPT_STATUS__ATTEMPT_FAILED);
	cr_assert(wait_count(AX_A_DEPENDENCY_DETECTOR,
	                     AX__COMMAND__BODY_INSTANCE_FINISHED, 1));
	cr_assert_eq(qstate(iid, "FAILED"), 1);
	cr_assert_eq(cap_count(AX_A_TIME_DETECTOR, TS), 2, "no third retry");
	Ax__Command *c = cap_cmd(AX_A_DEPENDENCY_DETECTOR,
	                         AX__COMMAND__BODY_INSTANCE_FINISHED, 0);
	cr_assert_str_eq(c->instance_finished->state, "FAILED");
	ax__command__free_unpacked(c, NULL);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.retry_scheduled' AND reason = "
	                 "'RETRY_SCHEDULED'"),
	             2);
	cr_assert_eq(q64("SELECT count(*) FROM attempts WHERE state = "
	                 "'FAILED'"),
	             3);
	/* the throughput counters, published from memory: one instance
	 * finished FAILED, two retries; nothing else */
	cr_assert(wait_comp_stat(AX_A_RESULT_HANDLER, "finished.FAILED", 1));
	cr_assert(wait_comp_stat(AX_A_RESULT_HANDLER, "retries", 2));
	cr_assert_eq(q64("SELECT value FROM component_stats WHERE component "
	                 "= 'result_handler' AND key = 'finished.SUCCESS'"),
	             0);
}

Test(flow, result_timeout_and_unknown_then_late_success)
{
	char    rt[37], ru[37];
	int64_t it, iu;
	rh_compose();
	/* TIMEOUT, no retries: stays TIMEOUT, InstanceFinished */
	admit_row("t", 0, rt, &it);
	send_result("t", rt, AX__ATTEMPT_STATUS__ATTEMPT_STARTED);
	send_result("t", rt, AX__ATTEMPT_STATUS__ATTEMPT_TIMEOUT);
	cr_assert(wait_state(it, "TIMEOUT"));
	cr_assert(wait_count(AX_A_DEPENDENCY_DETECTOR,
	                     AX__COMMAND__BODY_INSTANCE_FINISHED, 1));
	cr_assert_eq(q64("SELECT count(*) FROM task_instances WHERE state = "
	                 "'TIMEOUT' AND reason = 'TIMEOUT_EXEC'"),
	             1);

	/* UNKNOWN (worker lost) with a try left: retry armed */
	admit_row("u", 0, ru, &iu);
	send_result("u", ru, AX__ATTEMPT_STATUS__ATTEMPT_STARTED);
	send_result("u", ru, AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN);
	cr_assert(wait_state(iu, "UNKNOWN"));
	cr_assert(
	    wait_count(AX_A_TIME_DETECTOR, AX__COMMAND__BODY_TIMER_SET, 1));
	cr_assert(wait_count(AX_A_RESOURCE_DETECTOR,
	                     AX__COMMAND__BODY_SLOT_RELEASED, 2));
	/* the late SUCCESS of the same attempt settles it once */
	send_result("u", ru, AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS);
	cr_assert(wait_state(iu, "SUCCESS"));
	cr_assert(
	    wait_count(AX_A_TIME_DETECTOR, AX__COMMAND__BODY_TIMER_CANCEL, 1));
	send_result("u", ru, AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS);
	send_result("u", ru, AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN);
	ax_clock_sleep_us(300000);
	cr_assert_eq(qstate(iu, "SUCCESS"), 1);
	cr_assert_eq(cap_count(AX_A_DEPENDENCY_DETECTOR,
	                       AX__COMMAND__BODY_INSTANCE_SUCCEEDED),
	             1, "exactly one success");
	cr_assert_eq(
	    cap_count(AX_A_RESOURCE_DETECTOR, AX__COMMAND__BODY_SLOT_RELEASED),
	    2, "the slot is released once per attempt");
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.succeeded'"),
	             1);
	/* the retry the generator would now get for it is skipped */
	ax_store_admit_row ad = { .instance_id = iu };
	cr_assert_eq(ax_store_admit(db, &ad, 1), AX_OK);
	cr_assert_eq(ad.action, AX_ADMIT_SKIP);

	/* a result for a run_id that is not the current attempt: attempt
	 * row only */
	char    ra[37];
	int64_t ia;
	admit_row("r", 0, ra, &ia);
	send_result("r", ra, AX__ATTEMPT_STATUS__ATTEMPT_FAILED);
	cr_assert(wait_state(ia, "PENDING"));
	char rb[37];
	readmit(ia, rb, 2);
	send_result("r", ra, AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS); /* late */
	ax_clock_sleep_us(300000);
	cr_assert_eq(qstate(ia, "READY"), 1, "late result moved the instance");
	/* ... but its report is kept, as an event of its own */
	char q[200];
	snprintf(q, sizeof(q),
	         "SELECT count(*) FROM event_log WHERE type = "
	         "'attempt.reported' AND run_id = '%s' AND "
	         "payload->>'log_path' = '/l'",
	         ra);
	cr_assert_eq(q64(q), 1);
}

/* ---------------------------------------------------------------------- */
/* event emitter */

static void
send_event(const char *type, int persisted)
{
	Ax__Event     e = AX__EVENT__INIT;
	char          id[AX_UUID_LEN];
	ax_actor_item it;
	uint8_t       buf[512];
	e.id           = ax_uuid_v4(id);
	e.type         = (char *) type;
	e.time_us      = ax_clock_utc_us();
	e.dag          = "flow.test";
	e.task         = "a";
	e.reason       = "WAIT_RESOURCE";
	e.payload_json = "{\"k\":1}";
	e.persisted    = persisted;
	size_t len     = ax__event__pack(&e, buf);
	it             = (ax_actor_item) { .type = AX_ITEM_EVENT,
		                           .len  = (uint32_t) len,
		                           .data = buf };
	cr_assert_eq(ax_actor_client_send(cli, AX_A_EVENT_EMITTER, &it, 1, 0),
	             AX_OK);
}

Test(flow, emitter_writes_and_survives_outage)
{
	ax_event_emitter      *em;
	ax_event_emitter_stats s;
	cr_assert_eq(ax_config_set(cfg, "events.buffer", "5"), AX_OK);
	cr_assert_eq(ax_event_emitter_add(sys, &ctx, &em), AX_OK);
	flow_start();
	send_event("instance.delayed", 0);
	send_event("instance.ready", 1); /* already persisted: log only */
	for (int i = 0; i < 200; i++) {
		ax_event_emitter_stats_get(em, &s);
		if (s.stored == 1)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(s.stored, 1);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.delayed' AND reason = 'WAIT_RESOURCE' AND "
	                 "dag_id IS NOT NULL AND payload->>'task' = 'a' AND "
	                 "(payload->>'k')::int = 1"),
	             1);
	/* outage: 8 events into a buffer of 5 -> 3 dropped, none blocks */
	cr_assert_eq(ax_pg_embed_down(ax_test_pg_embed(pg)), AX_OK, "%s",
	             ax_err_detail());
	int64_t t0 = ax_clock_mono_us();
	for (int i = 0; i < 8; i++)
		send_event("instance.delayed", 0);
	cr_assert(ax_clock_mono_us() - t0 < AX_USEC_PER_SEC,
	          "sending blocked during the outage");
	for (int i = 0; i < 300; i++) {
		ax_event_emitter_stats_get(em, &s);
		if (s.events == 10)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(s.events, 10);
	cr_assert_eq(s.dropped, 3, "dropped %llu",
	             (unsigned long long) s.dropped);
	cr_assert_eq(ax_pg_embed_up(ax_test_pg_embed(pg)), AX_OK, "%s",
	             ax_err_detail());
	for (int i = 0; i < 1000; i++) {
		ax_event_emitter_stats_get(em, &s);
		if (s.stored == 6)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(s.stored, 6, "stored %llu",
	             (unsigned long long) s.stored);
	cr_assert_eq(q64("SELECT count(*) FROM event_log"), 6);
}

/* ---------------------------------------------------------------------- */
/* hooks */

/* The id of task's shard-0 instance (0 if none). */
static int64_t
instance_id_of(const char *task)
{
	char sql[160];
	snprintf(
	    sql, sizeof(sql),
	    "SELECT coalesce(max(id), 0) FROM task_instances WHERE task = "
	    "'%s' AND shard = 0",
	    task);
	return q64(sql);
}

/* The pre hooks run inside the instance generator's batch: pass -> the
 * queue; DAG paused -> held, back to the resource detector; canceled ->
 * never dispatched, CANCELED to the result handler. The post hooks run
 * inside the result handler's: the report of a worker's result is stored
 * with the move it causes. */
Test(flow, hooks_pass_hold_drop_and_post)
{
	cr_assert_eq(ax_instance_generator_add(sys, &ctx), AX_OK);
	add_capture(sys, AX_A_QUEUE);
	add_capture(sys, AX_A_RESOURCE_DETECTOR);
	add_capture(sys, AX_A_RESULT_HANDLER);
	add_capture(sys, AX_A_EVENT_EMITTER);
	flow_start();
	send_admit_pool("a", 0, "p1");
	cr_assert(
	    wait_count(AX_A_QUEUE, AX__COMMAND__BODY_ATTEMPT_RENDERED, 1));
	/* paused after admission: held, back to the resource detector (a
	 * replayed admission renders the same attempt again) */
	ax_dag_registry_set_paused(reg, "flow.test", 1);
	send_admit_pool("a", 0, "p1");
	cr_assert(wait_count(AX_A_RESOURCE_DETECTOR,
	                     AX__COMMAND__BODY_ATTEMPT_HELD, 1));
	Ax__Command *c =
	    cap_cmd(AX_A_RESOURCE_DETECTOR, AX__COMMAND__BODY_ATTEMPT_HELD, 0);
	cr_assert_str_eq(c->attempt_held->reason, "DAG_PAUSED");
	cr_assert_str_eq(c->attempt_held->ready->pool, "p1");
	ax__command__free_unpacked(c, NULL);
	cr_assert(wait_events("attempt.held", "DAG_PAUSED", 1));
	ax_dag_registry_set_paused(reg, "flow.test", 0);
	/* canceled: not dispatched, reported CANCELED; cancel forwarded */
	Ax__InstanceRef    ref = ref_of("a", 0);
	Ax__CancelInstance ci  = AX__CANCEL_INSTANCE__INIT;
	Ax__Command        k   = AX__COMMAND__INIT;
	ref.instance_id        = instance_id_of("a");
	cr_assert_neq(ref.instance_id, 0);
	ci.instance       = &ref;
	ci.reason         = "MANUAL_CLEAR";
	k.body_case       = AX__COMMAND__BODY_CANCEL_INSTANCE;
	k.cancel_instance = &ci;
	send1(AX_A_INSTANCE_GENERATOR, &k);
	send_admit_pool("a", 0, "p1");
	cr_assert(
	    wait_count(AX_A_RESULT_HANDLER, AX__COMMAND__BODY_RESULT, 1));
	c = cap_cmd(AX_A_RESULT_HANDLER, AX__COMMAND__BODY_RESULT, 0);
	cr_assert_eq(c->result->status, AX__ATTEMPT_STATUS__ATTEMPT_CANCELED);
	ax__command__free_unpacked(c, NULL);
	cr_assert(wait_events("attempt.dropped", "CANCELED", 1));
	cr_assert_eq(cap_count(AX_A_QUEUE, AX__COMMAND__BODY_ATTEMPT_RENDERED),
	             1);
	cr_assert(
	    wait_count(AX_A_QUEUE, AX__COMMAND__BODY_CANCEL_INSTANCE, 1));
	cr_assert_eq(cap_count(AX_A_QUEUE, AX__COMMAND__BODY_CANCEL_INSTANCE),
	             1);
}

/* The post hooks' report of a worker's result (status, worker, log
 * location) is built by the result handler and stored with the move the
 * result causes; no event row of its own. */
Test(flow, post_hooks_report_in_the_result_handler)
{
	char              rid[37];
	int64_t           iid;
	Ax__Command       rc;
	Ax__AttemptResult rr;
	Ax__InstanceRef   ref = ref_of("a", 0);

	rh_compose();
	admit_row("a", 0, rid, &iid);
	result(&rc, &rr, &ref, rid, AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS);
	rr.report_json = ""; /* as the queue forwards it */
	rr.queue_seq   = 1;
	rr.log_path    = "/logs/a/1.log";
	send1(AX_A_RESULT_HANDLER, &rc);
	cr_assert(wait_state(iid, "SUCCESS"));
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'instance.succeeded' AND payload->'report'->>"
	                 "'log_path' = '/logs/a/1.log' AND "
	                 "payload->'report'->>'status' = 'SUCCESS' AND "
	                 "payload->'report'->>'worker' = 'w1'"),
	             1);
	cr_assert_eq(cap_events("attempt.reported", NULL), 0);
	cr_assert_eq(q64("SELECT count(*) FROM event_log WHERE type = "
	                 "'attempt.reported'"),
	             0);
}
