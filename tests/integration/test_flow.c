/*
 * test_flow.c - the flow actors (resource detector, instance generator,
 * renderer, hooks, result handler, event emitter) against a real
 * PostgreSQL, with capture actors standing in for their neighbours
 * (queue, time_detector, dependency_detector, and whichever flow actor a
 * test does not run).
 *
 * Covers: admission decisions with reasons (group capacity, cold-start
 * default, pools, paused DAG and its reason on the instance rows,
 * duplicates); tiers (the P0 reserve of a group and of a pool, tier
 * order, aging across tiers, the starvation gauge); the generator's plan and
 * admission under replay (one attempt, same run_id); rendered output of a DAG
 * in Asia/Shanghai and a render error; the result handler's success path,
 * SUCCESS with its STARTED in one batch, retries with exponential backoff
 * timings, FAILED after the last try, TIMEOUT, UNKNOWN then a late SUCCESS
 * reconciled once, duplicate results; the emitter's writes and its behaviour
 * during a database outage.
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

/* ---------------------------------------------------------------------- */
/* capture actors */

typedef struct cap_item {
	char     dest[64];
	uint32_t type;
	size_t   len;
	uint8_t *data;
} cap_item;

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static cap_item        caps[20000];
static size_t          ncaps;

static ax_err
cap_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	(void) state;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < n && ncaps < 20000; i++) {
		cap_item *c = &caps[ncaps++];
		snprintf(c->dest, sizeof(c->dest), "%s", ax_actor_name(self));
		c->type = items[i].type;
		c->len  = items[i].len;
		c->data = malloc(items[i].len + 1);
		memcpy(c->data, items[i].data, items[i].len);
	}
	pthread_mutex_unlock(&cap_mu);
	return AX_OK;
}

static const ax_actor_ops cap_ops = { .handle = cap_handle };

static void
add_capture(ax_actor_system *sys, const char *name)
{
	ax_actor_config c = { .name = name };
	cr_assert_eq(ax_actor_system_add(sys, &c, &cap_ops, NULL, NULL), AX_OK,
	             "%s", ax_err_detail());
}

/* The k-th (0-based) command of kind to dest, or NULL; free it. */
static Ax__Command *
cap_cmd(const char *dest, Ax__Command__BodyCase kind, size_t k)
{
	Ax__Command *out = NULL;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < ncaps && out == NULL; i++) {
		if (strcmp(caps[i].dest, dest) ||
		    caps[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *c =
		    ax__command__unpack(NULL, caps[i].len, caps[i].data);
		if (c != NULL && c->body_case == kind && k-- == 0)
			out = c;
		else if (c != NULL)
			ax__command__free_unpacked(c, NULL);
	}
	pthread_mutex_unlock(&cap_mu);
	return out;
}

static size_t
cap_count(const char *dest, Ax__Command__BodyCase kind)
{
	size_t n = 0;
	for (Ax__Command *c; (c = cap_cmd(dest, kind, n)) != NULL; n++)
		ax__command__free_unpacked(c, NULL);
	return n;
}

/* Events captured with this type (and reason when not NULL) whose
 * payload contains needle (when not NULL). */
static size_t
cap_events_with(const char *type, const char *reason, const char *needle)
{
	size_t n = 0;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < ncaps; i++) {
		if (caps[i].type != AX_ITEM_EVENT)
			continue;
		Ax__Event *e =
		    ax__event__unpack(NULL, caps[i].len, caps[i].data);
		if (e != NULL && strcmp(e->type, type) == 0 &&
		    (reason == NULL || strcmp(e->reason, reason) == 0) &&
		    (needle == NULL ||
		     strstr(e->payload_json, needle) != NULL))
			n++;
		if (e != NULL)
			ax__event__free_unpacked(e, NULL);
	}
	pthread_mutex_unlock(&cap_mu);
	return n;
}

static size_t
cap_events(const char *type, const char *reason)
{
	return cap_events_with(type, reason, NULL);
}

static int
wait_events(const char *type, const char *reason, size_t n)
{
	for (int i = 0; i < 500; i++) {
		if (cap_events(type, reason) >= n)
			return 1;
		ax_clock_sleep_us(10000);
	}
	return 0;
}

static int
wait_count(const char *dest, Ax__Command__BodyCase kind, size_t n)
{
	for (int i = 0; i < 500; i++) {
		if (cap_count(dest, kind) >= n)
			return 1;
		ax_clock_sleep_us(10000);
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* fixture */

static const char *DAG_YAML =
    "kind: DAG\n"
    "name: flow.test\n"
    "schedule: {cron: \"0 30 2 * * ?\", timezone: Asia/Shanghai}\n"
    "params: {region: eu}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo {{ ds }} {{ params.region }} "
    "{{ data_interval_end }}\", env: {OUT: \"/data/{{ ds_nodash }}\"}}\n"
    "  - {name: r, type: bash, command: \"false\", retries: {count: 2, "
    "backoff: exponential, delay: 10s, max_delay: 15s}}\n"
    "  - {name: t, type: bash, command: \"sleep 9\", timeout: 5s}\n"
    "  - {name: u, type: bash, command: \"true\", retries: {count: 1, delay: "
    "2s}}\n";

static ax_test_pg      *pg;
static ax_store        *db;
static ax_config       *cfg;
static ax_dag_registry *reg;
static ax_dag_entry    *entry;
static ax_pipeline_ctx  ctx;
static ax_actor_system *sys;
static ax_actor_client *cli;
static int64_t          dag_id, version_id, run_id, logical_us;

static int64_t
q64(const char *sql)
{
	int64_t v = -1;
	cr_assert_eq(ax_store_query_int64(db, sql, 0, NULL, &v), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	return v;
}

static void
setup(void)
{
	ax_dagset          *set;
	ax_dag_store_result res;
	char                sql[512];

	ax_log_init(AX_LOG_ERROR, 2);
	ncaps = 0;
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_migrate_run(ax_test_pg_dsn(pg), NULL), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &db), AX_OK);
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(
	    ax_dag_yaml_load_buf(set, "flow.yaml", DAG_YAML, strlen(DAG_YAML)),
	    AX_OK);
	cr_assert_eq(ax_dagset_validate(set), AX_OK, "DAG invalid");
	cr_assert_eq(ax_dag_store_submit(db, set->dags[0], "test", &res),
	             AX_OK, "%s", ax_err_detail());
	dag_id     = res.id;
	version_id = res.version_id;
	cr_assert_eq(ax_dag_registry_publish(reg, dag_id, version_id, set,
	                                     set->dags[0]),
	             AX_OK, "%s", ax_err_detail());
	entry = ax_dag_registry_current(reg, "flow.test");
	cr_assert_not_null(entry);
	/* 2026-03-02 02:30 in Shanghai */
	cr_assert_eq(
	    ax_tz_parse_iso8601("2026-03-01T18:30:00Z", NULL, &logical_us),
	    AX_OK);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	         "logical_date, interval_start, interval_end) VALUES (%lld, "
	         "%lld, 'scheduled', ax_ts(%lld), ax_ts(%lld), ax_ts(%lld)) "
	         "RETURNING id",
	         (long long) dag_id, (long long) version_id,
	         (long long) logical_us, (long long) logical_us,
	         (long long) (logical_us + 86400LL * AX_USEC_PER_SEC));
	run_id       = q64(sql);
	ctx.cfg      = cfg;
	ctx.dsn      = ax_test_pg_dsn(pg);
	ctx.home     = "/tmp/ax-flow-home";
	ctx.registry = reg;
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
}

static void
start(void)
{
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_actor_client_new(sys, "test", &cli), AX_OK);
}

static void
teardown(void)
{
	ax_actor_client_free(cli);
	cli = NULL;
	ax_actor_system_free(sys);
	ax_dag_entry_release(entry);
	ax_dag_registry_free(reg);
	ax_config_free(cfg);
	ax_store_close(db);
	ax_test_pg_stop(pg);
	for (size_t i = 0; i < ncaps; i++)
		free(caps[i].data);
	ncaps = 0;
}

TestSuite(flow, .init = setup, .fini = teardown, .timeout = 120);

/* Sends cmds[0..n) to dest as one envelope. */
static void
send_cmds(const char *dest, Ax__Command **cmds, size_t n)
{
	ax_actor_item items[16];
	uint8_t      *bufs[16];
	cr_assert(n <= 16);
	for (size_t i = 0; i < n; i++) {
		size_t len = ax__command__get_packed_size(cmds[i]);
		bufs[i]    = malloc(len + 1);
		ax__command__pack(cmds[i], bufs[i]);
		items[i] = (ax_actor_item) { .type = AX_ITEM_COMMAND,
			                     .len  = (uint32_t) len,
			                     .data = bufs[i] };
	}
	cr_assert_eq(ax_actor_client_send(cli, dest, items, n, 0), AX_OK, "%s",
	             ax_err_detail());
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
}

static void
send1(const char *dest, Ax__Command *c)
{
	send_cmds(dest, &c, 1);
}

/* An InstanceRef of task in the test run (strings static). */
static Ax__InstanceRef
ref_of(const char *task, int shard)
{
	Ax__InstanceRef r = AX__INSTANCE_REF__INIT;
	r.dag             = "flow.test";
	r.dag_version_id  = version_id;
	r.dag_run_id      = run_id;
	r.task            = (char *) task;
	r.logical_time_us = logical_us;
	r.shard_index     = shard;
	r.shard_total     = 1;
	return r;
}

/* ---------------------------------------------------------------------- */
/* resource detector */

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
	start();
}

Test(flow, admission_cold_start_capacity_and_duplicates)
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
Test(flow, admission_retry_overtakes_its_slot_release)
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

Test(flow, admission_pools_and_paused_dag)
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
Test(flow, paused_dag_reason_is_stored_on_the_instance)
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

/* A P2 InstanceReady of task/shard in group g1 declaring cpu and mem. */
static void
send_res(const char *task, int shard, int cpu, int64_t mem)
{
	Ax__InstanceRef   ref = ref_of(task, shard);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = "g1";
	rd.slots              = 1;
	rd.impact             = "P2";
	rd.priority           = 50;
	rd.cpu_milli          = cpu;
	rd.memory_bytes       = mem;
	c.body_case           = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready      = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* Task and shard of the k-th admission, as "task/shard". */
static const char *
admitted_as(size_t k, char *buf, size_t len)
{
	Ax__Command *c =
	    cap_cmd(AX_A_INSTANCE_GENERATOR, AX__COMMAND__BODY_ADMISSION, k);
	cr_assert_not_null(c, "no admission %zu", k);
	snprintf(buf, len, "%s/%d", c->admission->instance->task,
	         (int) c->admission->instance->shard_index);
	ax__command__free_unpacked(c, NULL);
	return buf;
}

/*
 * A group of 2 worker slots keeping 1 for P0, and a pool of 2 slots
 * keeping 1: P3 instances get the unreserved slot only (the group's
 * overcommit does not reach into the reserve either), each waiting one
 * says WAIT_RESOURCE held by the reserve, and a P0 instance that comes
 * later is admitted at once.
 */
Test(flow, tiers_p0_reserve_is_not_taken_by_p3)
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
Test(flow, resources_admitted_only_where_they_fit)
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
Test(flow, resources_named_admitted_only_where_they_fit)
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
		size_t      vl = end ? (size_t) (end - eq - 1) : strlen(eq + 1);
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
	Ax__InstanceRef   ref = ref_of(task, shard);
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	Ax__Command       c   = AX__COMMAND__INIT;
	rd.instance           = &ref;
	rd.worker_group       = (char *) spec;
	rd.slots              = 1;
	rd.impact             = "P2";
	rd.priority           = 50;
	c.body_case           = AX__COMMAND__BODY_INSTANCE_READY;
	c.instance_ready      = &rd;
	send1(AX_A_RESOURCE_DETECTOR, &c);
}

/* The group the k-th admission names, and its task/shard. */
static const char *
admitted_to(size_t k, char *buf, size_t len)
{
	Ax__Command *c =
	    cap_cmd(AX_A_INSTANCE_GENERATOR, AX__COMMAND__BODY_ADMISSION, k);
	cr_assert_not_null(c, "no admission %zu", k);
	snprintf(buf, len, "%s/%d@%s", c->admission->instance->task,
	         (int) c->admission->instance->shard_index,
	         c->admission->ready->worker_group);
	ax__command__free_unpacked(c, NULL);
	return buf;
}

/*
 * A task listing two groups of equal cost goes to the emptier one (the
 * first listed on a tie), so two groups of 2 slots take 2 each; the
 * fifth waits, held by the slots; a release in ga admits it into ga.
 * Each Admission names the group chosen, not the list.
 */
Test(flow, groups_a_list_goes_to_the_emptier_group)
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
Test(flow, groups_a_costly_group_takes_work_when_the_others_fill)
{
	const Ax__Command__BodyCase ADM = AX__COMMAND__BODY_ADMISSION;
	char                        b[64];

	cr_assert_eq(ax_config_set(cfg, "resources.overcommit", "1"), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "resources.group_cost",
	                           "gb=300, gc=150"),
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
Test(flow, groups_a_label_selector_picks_labelled_groups)
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
Test(flow, tiers_pool_reserve_out_of_range_is_refused)
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
Test(flow, tiers_admitted_in_tier_order_under_contention)
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
Test(flow, tiers_aging_lets_a_low_tier_through_after_its_wait)
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
wait_comp_stat(const char *comp, const char *key, int64_t want)
{
	const char *p[2] = { comp, key };
	int64_t     got  = -1;
	for (int i = 0; i < 1000; i++) {
		got = -1;
		(void) ax_store_query_int64(
		    db,
		    "SELECT coalesce((SELECT value FROM component_stats WHERE "
		    "component = $1 AND key = $2), -1)",
		    2, p, &got);
		if (got == want)
			return 1;
		ax_clock_sleep_us(10000);
	}
	cr_log_error("%s = %lld, want %lld", key, (long long) got,
	             (long long) want);
	return 0;
}

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
Test(flow, tiers_starvation_gauge_counts_long_waits)
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
Test(flow, generator_plan_and_replayed_admission)
{
	const Ax__Command__BodyCase AC = AX__COMMAND__BODY_ATTEMPT_RENDERED;
	cr_assert_eq(ax_instance_generator_add(sys, &ctx), AX_OK);
	add_capture(sys, AX_A_QUEUE);
	add_capture(sys, AX_A_RESOURCE_DETECTOR);
	add_capture(sys, AX_A_EVENT_EMITTER);
	start();

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
	start();
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
	start();
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
	start();
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
	start();
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
