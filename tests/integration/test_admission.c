/*
 * test_admission.c - the resource detector against a real PostgreSQL
 * (tests/integration/flow_harness.h), with capture actors standing in
 * for the instance generator and the event emitter.
 *
 * Covers: admission decisions with reasons (group capacity, cold-start
 * default, pools, paused DAG and its reason on the instance rows,
 * duplicates, a retry overtaking its slot release); declared cpu, memory
 * and named resources; several worker groups (a list by water level,
 * cost weights, label selectors); tiers (the P0 reserve of a group and
 * of a pool, tier order, aging across tiers, the starvation gauge).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_metrics.h"
#include "buf.h"
#include "clock.h"
#include "flow_harness.h"
#include "resource_detector.h"

TestSuite(admission, .init = flow_setup, .fini = flow_teardown,
          .timeout = 120);

static void
send_ready(const char *task, int shard, const char *pool)
{
	Ax__InstanceRef   ref = ref_of(task, shard);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = "g1";
	rd.pool               = (char *) pool;
	rd.slots              = 1;
	c.body_case           = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready      = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

static void
send_released(const char *task, int shard)
{
	Ax__InstanceRef  ref = ref_of(task, shard);
	Ax__SlotReleased sr  = AX__SLOT_RELEASED__INIT;
	Ax__Command      c   = AX__COMMAND__INIT;
	sr.instance          = &ref;
	c.body_case          = AX__COMMAND__BODY_SLOT_RELEASED;
	c.slot_released      = &sr;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

static void
rd_compose(void)
{
	cr_assert_eq(ax_resource_detector_add(sys, &ctx), AX_OK);
	add_capture(sys, AX_A_INSTANCE_GENERATOR);
	add_capture(sys, AX_A_EVENT_EMITTER);
	flow_start();
}

Test(admission, admission_cold_start_capacity_and_duplicates)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	cr_assert_eq(ax_config_set(cfg, "resources.default_group_slots", "2"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "2"), AX_OK);
	rd_compose();
	send_ready("a", 0, "");
	send_ready("a", 1, "");
	send_ready("a", 2, "");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 1));
	/* cold start: the default of 2 slots, the third waits */
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 2);
	cr_assert_eq(cap_events("instance.delayed", "WAIT_RESOURCE"), 1);
	/* an admission's row comes from the instance generator, in the
	 * transaction of the move to READY: none from here */
	cr_assert_eq(cap_events("instance.admitted", NULL), 0);
	/* a duplicate of an admitted instance is ignored */
	send_ready("a", 0, "");
	send_released("a", 1);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3));
	Ax__Command *c = cap_cmd(AX_A_INSTANCE_GENERATOR, ADM, 2);
	cr_assert_eq(c->admission->decision, AX__ADMISSION_DECISION__ADMIT);
	cr_assert_eq(c->admission->instance->shard_index, 2);
	ax__command__free_unpacked(c, NULL);
	/* capacity report: 1 worker slot x overcommit 2 = 2 (both used) */
	Ax__WorkerCapacity wc = AX__WORKER_CAPACITY__INIT;
	Ax__Command        w  = AX__COMMAND__INIT;
	wc.worker_id          = "w1";
	wc.worker_group       = "g1";
	wc.slots_total        = 1;
	wc.alive              = 1;
	w.body_case           = AX__COMMAND__BODY_WORKER_CAPACITY;
	w.worker_capacity     = &wc;
	send1(AX_A_RESOURCE_DETECTOR, &w);
	send_ready("a", 3, "");
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 3,
	             "the duplicate or the over-capacity one was admitted");
	wc.slots_total = 2; /* 2 x 2 = 4: room for one more */
	send1(AX_A_RESOURCE_DETECTOR, &w);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4));
}

/*
 * A retry may overtake the SlotReleased of the attempt it follows (they
 * come from different actors): it must still be admitted, exactly once,
 * and the late release must not free a second slot.
 */
Test(admission, admission_retry_overtakes_its_slot_release)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	Ax__InstanceRef             ref = ref_of("r", 0);
	Ax__InstanceReady           rd  = AX__INSTANCE_READY__INIT;
	Ax__SlotReleased            sr  = AX__SLOT_RELEASED__INIT;
	Ax__Command                 c   = AX__COMMAND__INIT;

	cr_assert_eq(ax_config_set(cfg, "resources.default_group_slots", "1"),
	             AX_OK);
	rd_compose();
	send_ready("r", 0, "");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 1));
	/* attempt 1 ended; its retry arrives before its release */
	rd.instance      = &ref;
	rd.worker_group  = "g1";
	rd.slots         = 1;
	rd.after_attempt = 1;
	c.body_case      = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2),
	          "the retry was taken for a duplicate");
	/* the late release of attempt 1 is stale: the one slot stays used */
	sr.instance     = &ref;
	sr.attempt      = 1;
	c.body_case     = AX__COMMAND__BODY_SLOT_RELEASED;
	c.slot_released = &sr;
	send1(AX_A_RESOURCE_DETECTOR, &c);
	send_ready("s", 0, "");
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 2,
	             "a stale release freed the retry's slot");
	/* the retry's own release frees it */
	sr.attempt = 2;
	send1(AX_A_RESOURCE_DETECTOR, &c);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3));
}

Test(admission, admission_pools_and_paused_dag)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	q64("INSERT INTO pools (name, slots) VALUES ('p1', 1) RETURNING 1");
	rd_compose();
	send_ready("a", 0, "p1");
	send_ready("a", 1, "p1");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 1));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 1));
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 1,
	             "pool p1 has one slot");
	cr_assert_eq(cap_events("instance.delayed", "WAIT_RESOURCE"), 1);
	/* paused DAG: BLOCK with DAG_PAUSED, admitted after unpause */
	ax_dag_registry_set_paused(reg, "flow.test", 1);
	send_ready("u", 0, "");
	cr_assert(wait_events("instance.blocked", "DAG_PAUSED", 2));
	cr_assert_eq(cap_events("instance.blocked", "DAG_PAUSED"), 2,
	             "the new one and the waiting one of the paused DAG");
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 1);
	ax_dag_registry_set_paused(reg, "flow.test", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2),
	          "not admitted after unpause");
	Ax__Command *c = cap_cmd(AX_A_INSTANCE_GENERATOR, ADM, 1);
	cr_assert_str_eq(c->admission->instance->task, "u");
	ax__command__free_unpacked(c, NULL);
	/* the pool slot frees: the second p1 instance goes */
	send_released("a", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3));
}

/* The pre hooks' AttemptHeld (DAG_PAUSED) of task's attempt 1, as the
 * instance generator sends it. */
static void
send_held(const char *task)
{
	Ax__InstanceRef   ref = ref_of(task, 0);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__AttemptHeld   h   = AX__ATTEMPT_HELD__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = "g1";
	h.ready               = &rd;
	h.run_id              = "4b0d6c1e-0000-4000-8000-000000000009";
	h.attempt             = 1;
	h.reason              = "DAG_PAUSED";
	c.body_case           = AX__COMMAND__BODY_ATTEMPT_HELD;
	c.attempt_held        = &h;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* A task_instances row of task in the test run (as a plan writes it). */
static void
ti_row(const char *task, const char *state, const char *reason)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	         "logical_time, state, reason) VALUES (%lld, %lld, '%s', "
	         "ax_ts(%lld), '%s', %s%s%s) RETURNING id",
	         (long long) run_id, (long long) dag_id, task,
	         (long long) logical_us, state, reason ? "'" : "",
	         reason ? reason : "NULL", reason ? "'" : "");
	q64(sql);
}

/* Waits up to 5 s for task's row to show reason (NULL: none). */
static int
wait_reason(const char *task, const char *reason)
{
	const char *p[1]    = { task };
	char        got[64] = "";
	for (int i = 0; i < 500; i++) {
		PGresult *r = NULL;
		cr_assert_eq(
		    ax_store_query(db,
		                   "SELECT coalesce(reason, '(none)') "
		                   "FROM task_instances WHERE task = $1",
		                   1, p, &r),
		    AX_OK, "%s", ax_err_detail());
		snprintf(got, sizeof(got), "%s",
		         PQntuples(r) ? PQgetvalue(r, 0, 0) : "(no row)");
		PQclear(r);
		if (strcmp(got, reason ? reason : "(none)") == 0)
			return 1;
		ax_clock_sleep_us(10000);
	}
	cr_log_error("%s: reason %s, want %s", task, got,
	             reason ? reason : "(none)");
	return 0;
}

/*
 * The reason a paused DAG holds an instance is on its row (what `axctl
 * instance list` and the API show), not only in the instance.blocked
 * event: for a PENDING instance, for one whose row the plan writes later,
 * and for one held after admission (READY). Unpaused, each gets back the
 * reason it had.
 */
Test(admission, paused_dag_reason_is_stored_on_the_instance)
{
	ti_row("u", "PENDING", "WAIT_RESOURCE");
	ti_row("r", "READY", NULL);
	rd_compose();
	ax_dag_registry_set_paused(reg, "flow.test", 1);
	send_ready("u", 0, "");
	send_ready("a", 0, ""); /* its plan row is not written yet */
	send_held("r");         /* paused after its admission */
	cr_assert(wait_events("instance.blocked", "DAG_PAUSED", 3));
	cr_assert(wait_reason("u", "DAG_PAUSED"));
	cr_assert(wait_reason("r", "DAG_PAUSED"));
	/* the plan's row appears: shown at the next recheck (1 s) */
	ti_row("a", "PENDING", "WAIT_RESOURCE");
	cr_assert(wait_reason("a", "DAG_PAUSED"),
	          "not shown once the row exists");
	cr_assert_eq(
	    cap_count(AX_A_INSTANCE_GENERATOR, AX__COMMAND__BODY_ADMISSION),
	    0);

	ax_dag_registry_set_paused(reg, "flow.test", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR,
	                     AX__COMMAND__BODY_ADMISSION, 3));
	cr_assert(wait_reason("u", "WAIT_RESOURCE"));
	cr_assert(wait_reason("a", "WAIT_RESOURCE"));
	cr_assert(wait_reason("r", NULL), "a held READY row had no reason");
}

/* ---------------------------------------------------------------------- */
/* tiers: the P0 reserve, tier order, aging across tiers, starvation */

/* An InstanceReady of task/shard in group g1 with its tier and priority. */
static void
send_tier(const char *task, int shard, const char *pool, const char *impact,
          int priority)
{
	Ax__InstanceRef   ref = ref_of(task, shard);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = "g1";
	rd.pool               = (char *) pool;
	rd.slots              = 1;
	rd.impact             = (char *) impact;
	rd.priority           = priority;
	c.body_case           = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready      = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* The queue's aggregate report for group g1, with the cpu and memory
 * its workers offer. */
static void
send_group_offer(int total, int reserved_p0, int64_t cpu, int64_t mem)
{
	Ax__WorkerCapacity wc = AX__WORKER_CAPACITY__INIT;
	Ax__Command        c  = AX__COMMAND__INIT;
	wc.worker_group       = "g1";
	wc.slots_total        = total;
	wc.reserved_p0        = reserved_p0;
	wc.cpu_milli          = cpu;
	wc.memory_bytes       = mem;
	wc.alive              = total > 0;
	c.body_case           = AX__COMMAND__BODY_WORKER_CAPACITY;
	c.worker_capacity     = &wc;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

static void
send_group_capacity(int total, int reserved_p0)
{
	send_group_offer(total, reserved_p0, 0, 0);
}

/* A P2 InstanceReady of task/shard that may run in group (a group spec,
 * engine/group_spec.h) declaring cpu and mem. */
static void
send_p2(const char *task, int shard, const char *group, int cpu, int64_t mem)
{
	Ax__InstanceRef   ref = ref_of(task, shard);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = (char *) group;
	rd.slots              = 1;
	rd.impact             = "P2";
	rd.priority           = 50;
	rd.cpu_milli          = cpu;
	rd.memory_bytes       = mem;
	c.body_case           = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready      = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* The same in group g1. */
static void
send_res(const char *task, int shard, int cpu, int64_t mem)
{
	send_p2(task, shard, "g1", cpu, mem);
}

/* Task and shard of the k-th admission, as "task/shard", and with
 * group set "task/shard@group" (the group the Admission names). */
static const char *
admission_of(size_t k, char *buf, size_t len, int group)
{
	Ax__Command *c =
	    cap_cmd(AX_A_INSTANCE_GENERATOR, AX__COMMAND__BODY_ADMISSION, k);
	cr_assert_not_null(c, "no admission %zu", k);
	snprintf(buf, len, "%s/%d%s%s", c->admission->instance->task,
	         (int) c->admission->instance->shard_index, group ? "@" : "",
	         group ? c->admission->ready->worker_group : "");
	ax__command__free_unpacked(c, NULL);
	return buf;
}

static const char *
admitted_as(size_t k, char *buf, size_t len)
{
	return admission_of(k, buf, len, 0);
}

/*
 * A group of 2 worker slots keeping 1 for P0, and a pool of 2 slots
 * keeping 1: P3 instances get the unreserved slot only (the group's
 * overcommit does not reach into the reserve either), each waiting one
 * says WAIT_RESOURCE held by the reserve, and a P0 instance that comes
 * later is admitted at once.
 */
Test(admission, tiers_p0_reserve_is_not_taken_by_p3)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	q64("INSERT INTO pools (name, slots, reserve_p0) VALUES ('p2', 2, 1) "
	    "RETURNING 1");
	rd_compose();
	send_group_capacity(2, 1);
	send_tier("a", 0, "", "P3", 100);
	send_tier("a", 1, "", "P3", 100);
	send_tier("a", 2, "", "P3", 100);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 1));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 2));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 1,
	             "P3 took the slot reserved for P0");
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"held_by\":\"reserved_p0\""),
	             2, "the wait does not name the P0 reserve");
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"tier\":\"P3\""),
	             2);
	send_tier("u", 0, "", "P0", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2),
	          "P0 did not get its reserve");
	char b[64];
	cr_assert_str_eq(admitted_as(1, b, sizeof(b)), "u/0");

	/* the group grows without a reserve: both waiting P3 go; then the
	 * pool's reserve: one P3 of pool p2 goes, the other waits, P0 goes */
	send_group_capacity(10, 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4));
	send_tier("t", 0, "p2", "P3", 50);
	send_tier("t", 1, "p2", "P3", 50);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 5));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 3));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"held_by\":\"pool_reserved_p0\""),
	             1);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 5,
	             "P3 took the pool slot reserved for P0");
	send_tier("r", 0, "p2", "P0", 50);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 6));
	cr_assert_str_eq(admitted_as(5, b, sizeof(b)), "r/0");
}

/*
 * Declared resources: a group whose workers offer 2 cores and 4 GiB
 * admits two 1.5-core tasks one at a time (slots would allow both), and
 * memory the same way; the wait says "cpu" or "memory". A head that does
 * not fit holds its lane (what comes after it waits its turn: a large
 * task is never starved by small ones), and a release lets it through.
 */
Test(admission, resources_admitted_only_where_they_fit)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	const int64_t               GI  = 1LL << 30;
	char                        b[64];

	rd_compose();
	send_group_offer(8, 0, 2000, 4 * GI);
	send_res("a", 0, 1500, 0);
	send_res("a", 1, 1500, 0);
	send_res("a", 2, 0, 0);
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 2));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 1,
	             "admitted beyond the cpu the group offers");
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"held_by\":\"cpu\""),
	             1);
	send_released("a", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3));
	cr_assert_str_eq(admitted_as(1, b, sizeof(b)), "a/1");
	cr_assert_str_eq(admitted_as(2, b, sizeof(b)), "a/2");
	send_res("a", 3, 0, 3 * GI);
	send_res("a", 4, 0, 2 * GI);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 3));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 4,
	             "admitted beyond the memory the group offers");
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"held_by\":\"memory\""),
	             1);
	send_released("a", 3);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 5));
	cr_assert_str_eq(admitted_as(4, b, sizeof(b)), "a/4");
	/* larger than the whole group: goes once nothing declaring cpu is
	 * admitted (never stuck) */
	send_res("a", 5, 4000, 0);
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 4));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 5);
	send_released("a", 1);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 6));
	cr_assert_str_eq(admitted_as(5, b, sizeof(b)), "a/5");
}

/* The aggregate report for group g1 of total slots whose workers offer
 * amount of the named resource name. */
static void
send_group_named(int total, const char *name, int64_t amount)
{
	Ax__WorkerCapacity                 wc = AX__WORKER_CAPACITY__INIT;
	Ax__WorkerCapacity__ResourcesEntry e =
	    AX__WORKER_CAPACITY__RESOURCES_ENTRY__INIT;
	Ax__WorkerCapacity__ResourcesEntry *ep = &e;
	Ax__Command                         c  = AX__COMMAND__INIT;
	e.key                                  = (char *) name;
	e.value                                = amount;
	wc.worker_group                        = "g1";
	wc.slots_total                         = total;
	wc.alive                               = total > 0;
	wc.n_resources                         = 1;
	wc.resources                           = &ep;
	c.body_case       = AX__COMMAND__BODY_WORKER_CAPACITY;
	c.worker_capacity = &wc;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* A P2 InstanceReady of task/shard in group g1 declaring amount of the
 * named resource name. */
static void
send_named(const char *task, int shard, const char *name, int64_t amount)
{
	Ax__InstanceRef                   ref = ref_of(task, shard);
	Ax__InstanceReady                 rd  = AX__INSTANCE_READY__INIT;
	Ax__InstanceReady__ResourcesEntry e =
	    AX__INSTANCE_READY__RESOURCES_ENTRY__INIT;
	Ax__InstanceReady__ResourcesEntry *ep = &e;
	Ax__Command                        c  = AX__COMMAND__INIT;
	e.key                                 = (char *) name;
	e.value                               = amount;
	rd.instance                           = &ref;
	rd.worker_group                       = "g1";
	rd.slots                              = 1;
	rd.impact                             = "P2";
	rd.priority                           = 50;
	rd.n_resources                        = 1;
	rd.resources                          = &ep;
	c.body_case      = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/*
 * Named resources: a group whose workers offer gpu: 2 admits two tasks
 * needing one gpu each and holds the third (slots would allow all
 * three), its wait saying "gpu"; a release lets the third through. A
 * task needing a resource no worker of the group offers (tpu) is blocked
 * with "WAIT_RESOURCE unoffered=tpu" instead of holding its lane: a task
 * behind it is admitted; once the group offers tpu it is admitted too.
 */
Test(admission, resources_named_admitted_only_where_they_fit)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	char                        b[64];

	rd_compose();
	send_group_named(8, "gpu", 2);
	send_named("g", 0, "gpu", 1);
	send_named("g", 1, "gpu", 1);
	send_named("g", 2, "gpu", 1);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 1));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 2,
	             "admitted beyond the gpus the group offers");
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"held_by\":\"gpu\""),
	             1, "the wait does not name the gpu");
	send_released("g", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3));
	cr_assert_str_eq(admitted_as(2, b, sizeof(b)), "g/2");

	send_named("t", 0, "tpu", 1);
	send_res("p", 0, 0, 0);
	cr_assert(wait_events("instance.blocked", "WAIT_RESOURCE", 1),
	          "the task needing an unoffered tpu was not blocked");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4),
	          "the task needing the tpu held its lane");
	cr_assert_str_eq(admitted_as(3, b, sizeof(b)), "p/0");
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 4,
	             "admitted where no worker offers the tpu");
	send_group_named(8, "tpu", 1);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 5),
	          "the tpu offered did not admit the task needing it");
	cr_assert_str_eq(admitted_as(4, b, sizeof(b)), "t/0");
}

/* ---------------------------------------------------------------------- */
/* several worker groups (engine/group_spec.h, actors/resource/groups.c) */

/* The queue's aggregate report for group of total slots whose workers
 * all carry labels ("k=v,k2=v2"; NULL: none). */
static void
send_group_labels(const char *group, int total, const char *labels)
{
	Ax__WorkerCapacity               wc = AX__WORKER_CAPACITY__INIT;
	Ax__Command                      c  = AX__COMMAND__INIT;
	Ax__WorkerCapacity__LabelsEntry  lv[4];
	Ax__WorkerCapacity__LabelsEntry *lp[4];
	char                             buf[4][2][32];
	size_t                           n = 0;
	for (const char *s = labels; s != NULL && *s != '\0' && n < 4; n++) {
		Ax__WorkerCapacity__LabelsEntry e =
		    AX__WORKER_CAPACITY__LABELS_ENTRY__INIT;
		const char *eq = strchr(s, '='), *end = strchr(s, ',');
		size_t vl = end ? (size_t) (end - eq - 1) : strlen(eq + 1);
		snprintf(buf[n][0], 32, "%.*s", (int) (eq - s), s);
		snprintf(buf[n][1], 32, "%.*s", (int) vl, eq + 1);
		e.key   = buf[n][0];
		e.value = buf[n][1];
		lv[n]   = e;
		lp[n]   = &lv[n];
		s       = end ? end + 1 : eq + 1 + vl;
	}
	wc.worker_group   = (char *) group;
	wc.slots_total    = total;
	wc.alive          = total > 0;
	wc.n_labels       = n;
	wc.labels         = lp;
	c.body_case       = AX__COMMAND__BODY_WORKER_CAPACITY;
	c.worker_capacity = &wc;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* A P2 InstanceReady of task/shard that may run in spec's groups. */
static void
send_spec(const char *task, int shard, const char *spec)
{
	send_p2(task, shard, spec, 0, 0);
}

/* The k-th admission as "task/shard@group". */
static const char *
admitted_to(size_t k, char *buf, size_t len)
{
	return admission_of(k, buf, len, 1);
}

/*
 * A task listing two groups of equal cost goes to the emptier one (the
 * first listed on a tie), so two groups of 2 slots take 2 each; the
 * fifth waits, held by the slots; a release in ga admits it into ga.
 * Each Admission names the group chosen, not the list.
 */
Test(admission, groups_a_list_goes_to_the_emptier_group)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	char                        b[64];

	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "1"), AX_OK);
	rd_compose();
	send_group_labels("ga", 2, NULL);
	send_group_labels("gb", 2, NULL);
	for (int i = 0; i < 5; i++)
		send_spec("a", i, "ga,gb");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4));
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 1));
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 4,
	             "admitted beyond the slots of both groups");
	cr_assert_str_eq(admitted_to(0, b, sizeof(b)), "a/0@ga");
	cr_assert_str_eq(admitted_to(1, b, sizeof(b)), "a/1@gb");
	cr_assert_str_eq(admitted_to(2, b, sizeof(b)), "a/2@ga");
	cr_assert_str_eq(admitted_to(3, b, sizeof(b)), "a/3@gb");
	cr_assert_eq(cap_events_with("instance.delayed", "WAIT_RESOURCE",
	                             "\"held_by\":\"group_slots\""),
	             1);
	send_released("a", 2);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 5));
	cr_assert_str_eq(admitted_to(4, b, sizeof(b)), "a/4@ga",
	                 "the slot freed in ga did not go to the waiting one");
}

/*
 * resources.group_cost: gb costs 300 (percent), so ga takes the work
 * until it is full, and only then gb (an overflow group); with gb at
 * 150, gb takes work once ga is more than half full.
 */
Test(admission, groups_a_costly_group_takes_work_when_the_others_fill)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	char                        b[64];

	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "1"), AX_OK);
	cr_assert_eq(
	    ax_config_set(cfg, "resources.group_cost", "gb=300, gc=150"),
	    AX_OK);
	rd_compose();
	send_group_labels("ga", 4, NULL);
	send_group_labels("gb", 4, NULL);
	send_group_labels("gc", 4, NULL);
	for (int i = 0; i < 6; i++)
		send_spec("a", i, "gb,ga");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 6));
	for (int i = 0; i < 4; i++)
		cr_assert(strstr(admitted_to((size_t) i, b, sizeof(b)),
		                 "@ga") != NULL,
		          "admission %d went to the costly group: %s", i, b);
	cr_assert_str_eq(admitted_to(4, b, sizeof(b)), "a/4@gb");
	cr_assert_str_eq(admitted_to(5, b, sizeof(b)), "a/5@gb");
	/* gc (cost 150) against gd (100), both empty */
	send_group_labels("gd", 4, NULL);
	for (int i = 0; i < 4; i++)
		send_spec("c", i, "gd,gc");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 10));
	/* each 1 of 4 slots is 25%: gd scores 100 x (125, 150, 175, 200),
	 * gc 150 x 125 = 18750 empty: gd takes 3, gc the 4th */
	cr_assert_str_eq(admitted_to(6, b, sizeof(b)), "c/0@gd");
	cr_assert_str_eq(admitted_to(7, b, sizeof(b)), "c/1@gd");
	cr_assert_str_eq(admitted_to(8, b, sizeof(b)), "c/2@gd");
	cr_assert_str_eq(admitted_to(9, b, sizeof(b)), "c/3@gc",
	                 "gd at 100%% scores 20000, more than gc's 18750");
}

/*
 * A label selector admits only into a group whose workers all carry
 * the labels; one nothing matches is blocked (WAIT_RESOURCE
 * unoffered=worker_group) without holding others, and admitted once a
 * matching group reports.
 */
Test(admission, groups_a_label_selector_picks_labelled_groups)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	char                        b[64];

	rd_compose();
	send_group_labels("ga", 4, "gpu=a100,zone=east");
	send_group_labels("gb", 4, "gpu=h100,zone=east");
	send_spec("h", 0, "gpu=h100");
	send_spec("e", 0, "zone=east,gpu=a100");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2));
	cr_assert_str_eq(admitted_to(0, b, sizeof(b)), "h/0@gb");
	cr_assert_str_eq(admitted_to(1, b, sizeof(b)), "e/0@ga");
	send_spec("v", 0, "gpu=v100");
	send_spec("h", 1, "gpu=h100");
	cr_assert(wait_events("instance.blocked", "WAIT_RESOURCE", 1),
	          "the selector nothing matches was not blocked");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3),
	          "the blocked one held the others");
	cr_assert_str_eq(admitted_to(2, b, sizeof(b)), "h/1@gb");
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 3);
	/* labels change: gb's workers lose h100 */
	send_group_labels("gb", 4, "zone=east");
	send_group_labels("gc", 2, "gpu=v100");
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4),
	          "a group matching the selector did not admit it");
	cr_assert_str_eq(admitted_to(3, b, sizeof(b)), "v/0@gc");
	send_spec("h", 2, "gpu=h100");
	ax_clock_sleep_us(300000);
	cr_assert_eq(cap_count(AX_A_INSTANCE_GENERATOR, ADM), 4,
	             "admitted into a group whose workers lost the label");
}

/* A reserve out of range in the pools table: refused by PostgreSQL
 * with the constraint's name saying what to do. */
Test(admission, tiers_pool_reserve_out_of_range_is_refused)
{
	PGresult *r  = NULL;
	ax_err    rv = ax_store_query(db,
	                              "INSERT INTO pools (name, slots, "
	                                 "reserve_p0) VALUES ('p3', 2, 3)",
	                              0, NULL, &r);
	PQclear(r);
	cr_assert_neq(rv, AX_OK);
	cr_assert(strstr(ax_err_detail(), "reserve_p0 must be 0..slots") !=
	              NULL,
	          "%s", ax_err_detail());
}

/*
 * One slot, five instances waiting: admitted in tier order (P0, then P1
 * by priority, P2, P3), not by priority alone (P3 of priority 100 came
 * first and has the highest priority).
 */
Test(admission, tiers_admitted_in_tier_order_under_contention)
{
	const Ax__Command__BodyCase ADM    = AX__COMMAND__BODY_ADMISSION;
	static const char *const    want[] = { "t/4", "t/5", "t/3", "t/2",
		                               "t/1" };
	char                        b[64];

	cr_assert_eq(ax_config_set(cfg, "resources.default_group_slots", "1"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "1"), AX_OK);
	rd_compose();
	send_tier("t", 0, "", "P2", 50); /* takes the one slot */
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 1));
	send_tier("t", 1, "", "P3", 100);
	send_tier("t", 2, "", "P2", 50);
	send_tier("t", 3, "", "P1", 0);
	send_tier("t", 4, "", "P0", 0);
	send_tier("t", 5, "", "P1", 90);
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 5));
	for (int i = 0; i < 5; i++) {
		send_released("t", i == 0 ? 0 : want[i - 1][2] - '0');
		cr_assert(
		    wait_count(AX_A_INSTANCE_GENERATOR, ADM, (size_t) i + 2));
		cr_assert_str_eq(admitted_as((size_t) i + 1, b, sizeof(b)),
		                 want[i], "admission %d", i + 1);
	}
}

/*
 * Aging crosses tiers: with an aging interval of 2 ms, a P3 instance of
 * priority 50 that waited 1.5 s goes before a fresh P0 of priority 90
 * (343 steps = 686 ms); a fresh P3 does not.
 */
Test(admission, tiers_aging_lets_a_low_tier_through_after_its_wait)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	char                        b[64];

	cr_assert_eq(ax_config_set(cfg, "resources.default_group_slots", "1"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "1"), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "scheduler.aging_interval", "2ms"),
	             AX_OK);
	rd_compose();
	send_tier("t", 0, "", "P2", 50); /* takes the one slot */
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 1));
	send_tier("t", 1, "", "P3", 50);
	ax_clock_sleep_us(1500000);
	send_tier("t", 2, "", "P0", 90);
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 2));
	send_released("t", 0);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2));
	cr_assert_str_eq(admitted_as(1, b, sizeof(b)), "t/1",
	                 "the P3 that waited 1.5 s was starved by a fresh P0");
	/* fresh against fresh: the tier wins */
	send_tier("t", 3, "", "P3", 90);
	send_tier("t", 4, "", "P0", 10);
	cr_assert(wait_events("instance.delayed", "WAIT_RESOURCE", 4));
	send_released("t", 1);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 3));
	cr_assert_str_eq(admitted_as(2, b, sizeof(b)), "t/2");
	send_released("t", 2);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 4));
	cr_assert_str_eq(admitted_as(3, b, sizeof(b)), "t/4",
	                 "a fresh P3 went before a fresh P0");
}

/* Waits up to 10 s for the component_stats row (comp, key) to hold
 * want; wait_stat: the resource detector's. */

static int
wait_stat(const char *key, int64_t want)
{
	return wait_comp_stat("resource_detector", key, want);
}

/*
 * The starvation gauge: instances waiting for admission longer than
 * scheduler.starvation_after, per tier, published from memory; an
 * admission takes its instance off the count.
 */
Test(admission, tiers_starvation_gauge_counts_long_waits)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;

	cr_assert_eq(ax_config_set(cfg, "resources.default_group_slots", "1"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "1"), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "scheduler.starvation_after", "1s"),
	             AX_OK);
	rd_compose();
	send_tier("t", 0, "", "P2", 50);
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 1));
	send_tier("t", 1, "", "P3", 50);
	send_tier("t", 2, "", "P3", 50);
	send_tier("t", 3, "", "P3", 50);
	send_tier("t", 4, "", "P1", 50);
	cr_assert(wait_stat("waiting", 4));
	cr_assert(wait_stat("starving.P3", 3));
	cr_assert(wait_stat("starving.P1", 1));
	cr_assert(wait_stat("starving.P0", 0));
	/* what GET /metrics shows */
	ax_buf m;
	ax_buf_init(&m, 0);
	cr_assert_eq(ax_api_metrics_render_starving(db, &m), AX_OK, "%s",
	             ax_err_detail());
	cr_assert(strstr(ax_buf_str(&m),
	                 "# TYPE ax_instances_starving gauge\n"
	                 "ax_instances_starving{tier=\"P0\"} 0\n"
	                 "ax_instances_starving{tier=\"P1\"} 1\n"
	                 "ax_instances_starving{tier=\"P2\"} 0\n"
	                 "ax_instances_starving{tier=\"P3\"} 3\n") != NULL,
	          "%s", ax_buf_str(&m));
	cr_assert(strstr(ax_buf_str(&m), "ax_instances_waiting_admission 4\n"),
	          "%s", ax_buf_str(&m));
	ax_buf_fini(&m);
	send_released("t", 0); /* the P1 goes */
	cr_assert(wait_count(AX_A_INSTANCE_GENERATOR, ADM, 2));
	cr_assert(wait_stat("starving.P1", 0));
	cr_assert(wait_stat("starving.P3", 3));
	cr_assert(wait_stat("waiting", 3));
	/* a new one waits, but not yet long enough to count */
	send_tier("t", 5, "", "P3", 50);
	cr_assert(wait_stat("waiting", 4));
	cr_assert(wait_stat("starving.P3", 3));
	cr_assert(wait_stat("starving.P3", 4));
}
