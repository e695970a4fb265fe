/*
 * test_recovery.c - the recovery of preempted instances through the
 * result handler against a real PostgreSQL, with the event emitter
 * writing event_log and capture actors standing in for the resource
 * detector, the dependency detector and the time detector.
 *
 * Covers: victims of several tiers due at the same instant are let back
 * highest tier first, one per second at preemption.recovery_rate 1, each
 * release written as instance.recovery_released naming its tier and the
 * throttle; none is let back before its jittered instant; victims still
 * waiting when axd stops are read again by the next one and let back at
 * the instant stored at their preemption, in tier order.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "event_emitter.h"
#include "log.h"
#include "pg_harness.h"
#include "pipeline.h"
#include "result_handler.h"
#include "store.h"
#include "store_attempts.h"

#define SEC AX_USEC_PER_SEC

/* ---------------------------------------------------------------------- */
/* capture actors */

typedef struct cap_item {
	char     dest[64];
	size_t   len;
	uint8_t *data;
} cap_item;

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static cap_item        caps[4096];
static size_t          ncaps;

static ax_err
cap_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	(void) state;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < n && ncaps < 4096; i++) {
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		cap_item *c = &caps[ncaps++];
		snprintf(c->dest, sizeof(c->dest), "%s", ax_actor_name(self));
		c->len  = items[i].len;
		c->data = malloc(items[i].len + 1);
		memcpy(c->data, items[i].data, items[i].len);
	}
	pthread_mutex_unlock(&cap_mu);
	return AX_OK;
}

static const ax_actor_ops cap_ops = { .handle = cap_handle };

/* The InstanceReady commands the resource detector got, in arrival
 * order: up to max into out (free each). */
static size_t
readies(Ax__Command **out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&cap_mu);
	for (size_t i = 0; i < ncaps && n < max; i++) {
		if (strcmp(caps[i].dest, AX_A_RESOURCE_DETECTOR) != 0)
			continue;
		Ax__Command *c =
		    ax__command__unpack(NULL, caps[i].len, caps[i].data);
		if (c != NULL &&
		    c->body_case == AX__COMMAND__BODY_INSTANCE_READY)
			out[n++] = c;
		else if (c != NULL)
			ax__command__free_unpacked(c, NULL);
	}
	pthread_mutex_unlock(&cap_mu);
	return n;
}

static void
free_cmds(Ax__Command **c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ax__command__free_unpacked(c[i], NULL);
}

/* How many InstanceReady the resource detector got so far. */
static size_t
nready(void)
{
	Ax__Command *c[16];
	size_t       n = readies(c, 16);
	free_cmds(c, n);
	return n;
}

/* ---------------------------------------------------------------------- */
/* fixture */

/* Two DAGs of one preemptible task: a P3 one and a P1 one. */
static const char *const DAGS[2] = {
	"kind: DAG\nname: rec.low\nimpact: P3\nowner: ops\n"
	"tasks:\n  - {name: t, type: bash, command: \"sleep 60\", "
	"preemptible: true}\n",
	"kind: DAG\nname: rec.high\nimpact: P1\nowner: ops\n"
	"tasks:\n  - {name: t, type: bash, command: \"sleep 60\", "
	"preemptible: true}\n",
};

static ax_test_pg      *pg;
static ax_store        *db;
static ax_config       *cfg;
static ax_dag_registry *reg;
static ax_pipeline_ctx  ctx;
static ax_actor_system *sys;
static ax_actor_client *cli;
static int64_t          dag_ids[2], version_ids[2], run_ids[2];
static int64_t          logical_us;

static int64_t
q64(const char *sql)
{
	int64_t v = -1;
	cr_assert_eq(ax_store_query_int64(db, sql, 0, NULL, &v), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	return v;
}

static void
add_dag(int k)
{
	ax_dagset          *set;
	ax_dag_store_result res;
	char                sql[512];

	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(
	    ax_dag_yaml_load_buf(set, "rec.yaml", DAGS[k], strlen(DAGS[k])),
	    AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_dagset_validate(set), AX_OK, "DAG %d invalid", k);
	cr_assert_eq(ax_dag_store_submit(db, set->dags[0], "test", &res),
	             AX_OK, "%s", ax_err_detail());
	dag_ids[k]     = res.id;
	version_ids[k] = res.version_id;
	cr_assert_eq(ax_dag_registry_publish(reg, res.id, res.version_id, set,
	                                     set->dags[0]),
	             AX_OK, "%s", ax_err_detail());
	snprintf(sql, sizeof(sql),
	         "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	         "logical_date, interval_start, interval_end) VALUES (%lld, "
	         "%lld, 'scheduled', ax_ts(%lld), ax_ts(%lld), ax_ts(%lld)) "
	         "RETURNING id",
	         (long long) res.id, (long long) res.version_id,
	         (long long) logical_us, (long long) logical_us,
	         (long long) (logical_us + 86400LL * SEC));
	run_ids[k] = q64(sql);
}

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	ncaps      = 0;
	logical_us = 1772389800LL * SEC; /* 2026-03-01T18:30:00Z */
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &db), AX_OK);
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	cr_assert_eq(ax_dag_registry_new(&reg), AX_OK);
	add_dag(0);
	add_dag(1);
	ctx.cfg      = cfg;
	ctx.dsn      = ax_test_pg_dsn(pg);
	ctx.home     = "/tmp/ax-recovery-home";
	ctx.registry = reg;
}

/* A system of the result handler and the event emitter, the others
 * captured; started. */
static void
compose(void)
{
	static const char *const capture[] = { AX_A_RESOURCE_DETECTOR,
		                               AX_A_DEPENDENCY_DETECTOR,
		                               AX_A_TIME_DETECTOR,
		                               AX_A_QUEUE };
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_result_handler_add(sys, &ctx), AX_OK);
	cr_assert_eq(ax_event_emitter_add(sys, &ctx, NULL), AX_OK);
	for (size_t i = 0; i < sizeof(capture) / sizeof(capture[0]); i++) {
		ax_actor_config c = { .name = capture[i] };
		cr_assert_eq(
		    ax_actor_system_add(sys, &c, &cap_ops, NULL, NULL), AX_OK,
		    "%s", ax_err_detail());
	}
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_actor_client_new(sys, "test", &cli), AX_OK);
}

/* Stops the system as axd does when it stops (the throttle's state with
 * it); the captures are kept. */
static void
decompose(void)
{
	ax_actor_client_free(cli);
	cli = NULL;
	ax_actor_system_free(sys);
	sys = NULL;
}

static void
teardown(void)
{
	if (sys != NULL)
		decompose();
	ax_dag_registry_free(reg);
	ax_config_free(cfg);
	ax_store_close(db);
	ax_test_pg_stop(pg);
	for (size_t i = 0; i < ncaps; i++)
		free(caps[i].data);
	ncaps = 0;
}

TestSuite(recovery, .init = setup, .fini = teardown, .timeout = 120);

/* One running attempt of DAG k's task t, shard `shard`. */
typedef struct victim {
	int             k, shard;
	int64_t         iid;
	char            rid[37];
	Ax__InstanceRef ref;
} victim;

/* Creates v's instance and attempt 1 (READY, as admitted). */
static void
admit(victim *v)
{
	ax_store_ti_row ti = {
		.dag_run_id      = run_ids[v->k],
		.dag_id          = dag_ids[v->k],
		.task            = "t",
		.logical_time_us = logical_us,
		.shard           = v->shard,
		.shard_total     = 8,
		.worker_group    = "g1",
		.max_tries       = 1,
		.state           = AX_TI_PENDING,
	};
	cr_assert_eq(ax_store_insert_instances(db, &ti, 1, NULL), AX_OK, "%s",
	             ax_err_detail());
	ax_store_admit_row ad = { .instance_id    = ti.instance_id,
		                  .due_at_us      = logical_us,
		                  .admitted_at_us = ax_clock_utc_us() };
	cr_assert_eq(ax_store_admit(db, &ad, 1), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ad.action, AX_ADMIT_NEW);
	memcpy(v->rid, ad.run_id, 37);
	v->iid                 = ti.instance_id;
	v->ref                 = (Ax__InstanceRef) AX__INSTANCE_REF__INIT;
	v->ref.dag             = v->k == 0 ? "rec.low" : "rec.high";
	v->ref.dag_version_id  = version_ids[v->k];
	v->ref.dag_run_id      = run_ids[v->k];
	v->ref.task            = "t";
	v->ref.instance_id     = v->iid;
	v->ref.logical_time_us = logical_us;
	v->ref.shard_index     = v->shard;
	v->ref.shard_total     = 8;
}

/* Sends, in ONE envelope (one batch, one preemption instant), the
 * results that say each of v[0..n) was preempted after its start. */
static void
preempt_all(victim *v, size_t n)
{
	ax_actor_item items[8];
	uint8_t      *bufs[8];
	int64_t       now = ax_clock_utc_us();
	cr_assert(n <= 8);
	for (size_t i = 0; i < n; i++) {
		Ax__Command       c = AX__COMMAND__INIT;
		Ax__AttemptResult r = AX__ATTEMPT_RESULT__INIT;
		r.instance          = &v[i].ref;
		r.run_id            = v[i].rid;
		r.status            = AX__ATTEMPT_STATUS__ATTEMPT_CANCELED;
		r.reason            = "PREEMPTED";
		r.worker_id         = "w1";
		r.dispatched_at_us  = now - 3 * SEC;
		r.started_at_us     = now - 2 * SEC;
		r.ended_at_us       = now;
		c.body_case         = AX__COMMAND__BODY_RESULT;
		c.result            = &r;
		size_t len          = ax__command__get_packed_size(&c);
		bufs[i]             = malloc(len + 1);
		ax__command__pack(&c, bufs[i]);
		items[i] = (ax_actor_item) { .type = AX_ITEM_COMMAND,
			                     .len  = (uint32_t) len,
			                     .data = bufs[i] };
	}
	cr_assert_eq(
	    ax_actor_client_send(cli, AX_A_RESULT_HANDLER, items, n, 0), AX_OK,
	    "%s", ax_err_detail());
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
}

static int64_t
count_where(const char *cond)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", cond);
	return q64(sql);
}

/* Waits until the resource detector got n InstanceReady (or ~timeout). */
static size_t
wait_readies(size_t n, int64_t timeout_us)
{
	size_t got = nready();
	for (int64_t t = 0; got < n && t < timeout_us; t += 20000) {
		ax_clock_sleep_us(20000);
		got = nready();
	}
	return got;
}

/* The preemption instant stored with v's instance.retry_scheduled
 * event (fire_at_us). */
static int64_t
fire_at_of(const victim *v)
{
	char sql[256];
	snprintf(
	    sql, sizeof(sql),
	    "SELECT (payload->>'fire_at_us')::bigint FROM event_log WHERE "
	    "instance_id = %lld AND type = 'instance.retry_scheduled' AND "
	    "reason = 'PREEMPTED'",
	    (long long) v->iid);
	return q64(sql);
}

/*
 * Checks the releases of v[0..n) (v[n - 1] the only P1): the P1 first,
 * then the P3s in the order they were preempted; each no earlier than
 * the instant stored at its preemption; at least 1 s apart (rate 1);
 * and the instance.recovery_released rows say the same.
 */
static void
check_releases(const victim *v, size_t n)
{
	Ax__Command *c[16];
	size_t       got = readies(c, 16);
	cr_assert_eq(got, n, "%zu InstanceReady, want %zu", got, n);
	for (size_t i = 0; i < n; i++) {
		const victim *want = i == 0 ? &v[n - 1] : &v[i - 1];
		int64_t iid = c[i]->instance_ready->instance->instance_id;
		cr_assert_eq(iid, want->iid,
		             "release %zu is instance %lld, want %lld (%s)", i,
		             (long long) iid, (long long) want->iid,
		             i == 0 ? "the P1 first" : "P3s in order");
		cr_assert_geq(c[i]->issued_at_us, fire_at_of(want),
		              "release %zu before its due instant", i);
		cr_assert_eq(c[i]->instance_ready->after_attempt, 1);
		cr_assert_eq(c[i]->instance_ready->due_at_us,
		             fire_at_of(want));
		if (i > 0)
			cr_assert_geq(
			    c[i]->issued_at_us - c[i - 1]->issued_at_us, SEC,
			    "releases %zu and %zu: %lld us", i - 1, i,
			    (long long) (c[i]->issued_at_us -
			                 c[i - 1]->issued_at_us));
	}
	free_cmds(c, got);
	/* the event_log says the same: one release each, P1 first, the
	 * tier and the throttle named, a second apart */
	for (int w = 0; w < 300; w++) {
		if (count_where("event_log WHERE type = "
		                "'instance.recovery_released'") == (int64_t) n)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(count_where("event_log WHERE type = "
	                         "'instance.recovery_released' AND reason = "
	                         "'PREEMPTED' AND payload->>'throttle' = "
	                         "'preemption.recovery_rate'"),
	             (int64_t) n);
	char sql[512];
	snprintf(
	    sql, sizeof(sql),
	    "SELECT instance_id FROM event_log WHERE type = "
	    "'instance.recovery_released' AND payload->>'tier' = 'P1' AND "
	    "time = (SELECT min(time) FROM event_log WHERE type = "
	    "'instance.recovery_released')");
	cr_assert_eq(q64(sql), v[n - 1].iid, "the P1's release row is first");
	cr_assert_eq(count_where("(SELECT time - lag(time) OVER (ORDER BY "
	                         "time) AS gap FROM event_log WHERE type = "
	                         "'instance.recovery_released') g WHERE gap < "
	                         "interval '999 ms'"),
	             0, "two releases less than a second apart");
}

/* Three P3 victims and one P1, preempted in one batch (the P1 last):
 * all due at the same instant. FIFO would let the P1 back last, 3 s
 * after the first P3. */
Test(recovery, due_together_highest_tier_first_one_per_second)
{
	victim v[4] = { { .k = 0, .shard = 0 },
		        { .k = 0, .shard = 1 },
		        { .k = 0, .shard = 2 },
		        { .k = 1, .shard = 0 } };
	cr_assert_eq(ax_config_set(cfg, "preemption.requeue_delay", "2s"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "preemption.requeue_jitter", "0s"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "preemption.recovery_rate", "1"),
	             AX_OK);
	compose();
	for (size_t i = 0; i < 4; i++)
		admit(&v[i]);
	preempt_all(v, 4);
	for (int w = 0; w < 300; w++) {
		if (count_where("task_instances WHERE state = 'PENDING' AND "
		                "reason = 'PREEMPTED'") == 4)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(count_where("event_log WHERE type = "
	                         "'instance.retry_scheduled' AND reason = "
	                         "'PREEMPTED'"),
	             4);
	/* one preemption instant: one due instant for all four */
	cr_assert_eq(count_where("(SELECT DISTINCT payload->>'fire_at_us' "
	                         "FROM event_log WHERE type = "
	                         "'instance.retry_scheduled') d"),
	             1);
	cr_assert_eq(nready(), 0, "none is ready before its delay");
	cr_assert_eq(wait_readies(4, 10 * SEC), 4);
	check_releases(v, 4);
	/* nothing more comes */
	ax_clock_sleep_us(SEC);
	cr_assert_eq(nready(), 4);
}

/* Victims still waiting when axd stops come back after the restart at
 * the instant stored at their preemption, through the throttle. */
Test(recovery, waiting_victims_survive_a_restart)
{
	victim v[3] = { { .k = 0, .shard = 0 },
		        { .k = 0, .shard = 1 },
		        { .k = 1, .shard = 0 } };
	cr_assert_eq(ax_config_set(cfg, "preemption.requeue_delay", "4s"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "preemption.requeue_jitter", "0s"),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "preemption.recovery_rate", "1"),
	             AX_OK);
	compose();
	for (size_t i = 0; i < 3; i++)
		admit(&v[i]);
	preempt_all(v, 3);
	for (int w = 0; w < 300; w++) {
		if (count_where("event_log WHERE type = "
		                "'instance.retry_scheduled'") == 3)
			break;
		ax_clock_sleep_us(10000);
	}
	cr_assert_eq(count_where("event_log WHERE type = "
	                         "'instance.retry_scheduled'"),
	             3);
	decompose();
	cr_assert_eq(nready(), 0);
	/* a new axd, well before the due instant */
	compose();
	cr_assert_eq(wait_readies(1, SEC), 0,
	             "let back before the instant stored at the preemption");
	cr_assert_eq(wait_readies(3, 12 * SEC), 3);
	check_releases(v, 3);
}
