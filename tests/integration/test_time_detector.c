/*
 * test_time_detector.c - the DAG loader and the time detector against a
 * real PostgreSQL, with capture actors standing in for the dependency
 * and resource detectors: a seconds-level schedule fires every second
 * with no gap and no repeat (dag_runs rows and Due commands), a restart
 * resumes from the persisted next fire, catchup on/off after downtime,
 * paused DAGs are disarmed by a control op, a manual trigger, a retry
 * timer fires InstanceReady at its instant, and the Due latency (fire
 * instant -> Due received) is printed.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "dag.h"
#include "dag_loader.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "migrate.h"
#include "pg_harness.h"
#include "store_fixture.h"
#include "pipeline.h"
#include "store.h"
#include "time_detector.h"

/* --- capture actors -------------------------------------------------------
 */

#define CAP_MAX 4096

typedef struct capture {
	pthread_mutex_t mu;
	size_t          n;
	Ax__Command    *cmds[CAP_MAX];
	int64_t         recv_utc[CAP_MAX];
} capture;

static ax_err
cap_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	capture *c   = state;
	int64_t  now = ax_clock_utc_us();
	(void) self;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n; i++) {
		if (items[i].type != AX_ITEM_COMMAND || c->n >= CAP_MAX)
			continue;
		Ax__Command *cmd = ax__command__unpack(
		    NULL, items[i].len, (const uint8_t *) items[i].data);
		if (cmd == NULL)
			continue;
		c->recv_utc[c->n] = now;
		c->cmds[c->n++]   = cmd;
	}
	pthread_mutex_unlock(&c->mu);
	return AX_OK;
}

static void
cap_nofree(void *state)
{
	(void) state;
}

static size_t
cap_count(capture *c)
{
	pthread_mutex_lock(&c->mu);
	size_t n = c->n;
	pthread_mutex_unlock(&c->mu);
	return n;
}

static void
cap_clear(capture *c)
{
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n; i++)
		ax__command__free_unpacked(c->cmds[i], NULL);
	c->n = 0;
	pthread_mutex_unlock(&c->mu);
}

/* --- fixture ------------------------------------------------------------
 */

static ax_test_pg            *pg;
static ax_store              *st;
static ax_config             *cfg;
static ax_pipeline_ctx        ctx;
static capture                due_cap, ready_cap;
static ax_actor_system       *sys;
static ax_time_detector_stats tstats;

static void
setup(void)
{
	ax_test_pipeline_db(&pg, &st, &cfg, &ctx);
	cr_assert_eq(ax_dag_registry_new(&ctx.registry), AX_OK);
	pthread_mutex_init(&due_cap.mu, NULL);
	pthread_mutex_init(&ready_cap.mu, NULL);
}

static void
start_system(void)
{
	static const ax_actor_ops cap_ops = { .handle = cap_handle,
		                              .fini   = cap_nofree };
	ax_actor_config           c1 = { .name = AX_A_DEPENDENCY_DETECTOR };
	ax_actor_config           c2 = { .name = AX_A_RESOURCE_DETECTOR };

	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_dag_loader_add(sys, &ctx), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_time_detector_add_ex(sys, &ctx, &tstats), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_actor_system_add(sys, &c1, &cap_ops, &due_cap, NULL),
	             AX_OK);
	cr_assert_eq(ax_actor_system_add(sys, &c2, &cap_ops, &ready_cap, NULL),
	             AX_OK);
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
}

static void
stop_system(void)
{
	ax_actor_system_stop(sys, AX_USEC_PER_SEC, NULL);
	ax_actor_system_free(sys);
	sys = NULL;
}

static void
teardown(void)
{
	if (sys != NULL)
		stop_system();
	cap_clear(&due_cap);
	cap_clear(&ready_cap);
	ax_dag_registry_free(ctx.registry);
	ax_config_free(cfg);
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

TestSuite(time_detector, .init = setup, .fini = teardown, .timeout = 120);

/* Stores a DAG from YAML; returns its dags.id. */
static int64_t
store_dag(const char *yaml)
{
	return ax_test_store_dag(st, yaml).id;
}

#define q_int(...) ax_test_q_int(st, __VA_ARGS__)

/* Sends one command from a client (as the control thread would). */
#define client_send(dest, cmd) ax_test_send(sys, dest, cmd)

/* Sleeps until just after the next whole second (UTC). */
static void
align_second(int64_t extra_us)
{
	int64_t now = ax_clock_utc_us();
	ax_clock_sleep_us(AX_USEC_PER_SEC - now % AX_USEC_PER_SEC + extra_us);
}

static const char *every_second = "kind: DAG\nname: sec\n"
                                  "schedule: {cron: \"* * * * * ?\"}\n"
                                  "tasks:\n  - {name: a, command: echo a}\n";

/* --- tests ----------------------------------------------------------------
 */

Test(time_detector, seconds_schedule_no_gap_no_repeat_and_latency)
{
	store_dag(every_second);
	align_second(300000);
	start_system();
	ax_clock_sleep_us(5 * AX_USEC_PER_SEC + 200000);
	stop_system();

	size_t n = cap_count(&due_cap);
	cr_assert(n >= 5 && n <= 6, "Due count %zu", n);
	int64_t lat[16], prev = 0;
	for (size_t i = 0; i < n; i++) {
		Ax__Command *c = due_cap.cmds[i];
		cr_assert_eq(c->body_case, AX__COMMAND__BODY_DUE);
		Ax__Due *d = c->due;
		cr_assert_str_eq(d->dag, "sec");
		cr_assert_gt(d->dag_run_id, 0);
		cr_assert_eq(d->due_at_us % AX_USEC_PER_SEC, 0);
		/* period [t-1s, t): logical date one second before due */
		cr_assert_eq(d->logical_time_us,
		             d->due_at_us - AX_USEC_PER_SEC);
		if (i > 0)
			cr_assert_eq(d->due_at_us - prev, AX_USEC_PER_SEC,
			             "gap or repeat at %zu", i);
		prev   = d->due_at_us;
		lat[i] = due_cap.recv_utc[i] - d->due_at_us;
		/* prepared ahead: Due leaves scheduler.prepare_ahead (500 ms)
		 * before the instant, so the chain's writes are done by then:
		 * never sooner (100 ms of slack), and at least half of it
		 * before (a loaded 2-core CI machine, three test binaries
		 * starting their stacks at once, delayed a Due by 155 ms) */
		cr_assert(lat[i] < -250 * AX_USEC_PER_MSEC &&
		              lat[i] > -600 * AX_USEC_PER_MSEC,
		          "Due %zu: %lld us after its instant", i,
		          (long long) lat[i]);
		cr_assert(!d->manual);
	}
	/* the rows match the Dues one to one */
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs"), (int64_t) n);
	cr_assert_eq(q_int("SELECT count(DISTINCT logical_date) FROM "
	                   "dag_runs"),
	             (int64_t) n);
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs WHERE due_at = "
	                   "interval_end AND run_type = 'scheduled'"),
	             (int64_t) n);
	/* next_fire_at persisted after the last fire */
	cr_assert_eq(q_int("SELECT ax_us(next_fire_at) FROM schedules"),
	             prev + AX_USEC_PER_SEC);
	int64_t max = INT64_MIN, sum = 0;
	for (size_t i = 0; i < n; i++) {
		sum += lat[i];
		if (lat[i] > max)
			max = lat[i];
	}
	printf("time_detector lead (fire instant -> Due received): "
	       "n=%zu mean=%.3f ms max=%.3f ms\n",
	       n, (double) sum / (double) n / 1000.0, (double) max / 1000.0);
	cr_assert_lt(max, -250 * AX_USEC_PER_MSEC, "Due late by %lld us",
	             (long long) max);
}

/* More distinct schedules than compiled ones kept: each is compiled
 * again when it fires, and none misses a second. */
Test(time_detector, schedules_beyond_the_compiled_cache_fire_on_time)
{
	static const char *const zones[] = {
		"UTC",        "Europe/London",    "America/New_York",
		"Asia/Tokyo", "Australia/Sydney", "Europe/Berlin"
	};
	char   y[256];
	size_t per[6] = { 0 };

	for (int i = 0; i < 6; i++) {
		snprintf(y, sizeof(y),
		         "kind: DAG\nname: z%d\nschedule: {cron: \"* * * * * "
		         "?\", timezone: %s}\ntasks:\n  - {name: a, command: "
		         "echo a}\n",
		         i, zones[i]);
		store_dag(y);
	}
	cr_assert_eq(ax_config_set(cfg, "scheduler.compiled_schedules", "2"),
	             AX_OK);
	align_second(300000);
	start_system();
	ax_clock_sleep_us(4 * AX_USEC_PER_SEC);
	stop_system();
	cr_assert_eq(tstats.specs, 6);
	cr_assert_leq(tstats.compiled, 2, "compiled specs beyond the bound");
	for (size_t i = 0; i < cap_count(&due_cap); i++) {
		Ax__Due *d = due_cap.cmds[i]->due;
		cr_assert(d->dag[0] == 'z');
		per[d->dag[1] - '0']++;
	}
	for (int i = 0; i < 6; i++)
		cr_assert_geq(per[i], 3, "%s: %zu Due in 4 s", zones[i],
		              per[i]);
	cr_assert_eq(q_int("SELECT count(*) - count(DISTINCT (dag_id, "
	                   "logical_date)) FROM dag_runs"),
	             0);
	cr_assert_eq(q_int("SELECT max(c) - min(c) FROM (SELECT count(*) c "
	                   "FROM dag_runs GROUP BY dag_id) x"),
	             0, "a schedule missed a second");
}

/* Stores n every-second DAGs named <prefix>0, <prefix>1, ... */
static void
store_second_dags(const char *prefix, int n, int catchup)
{
	char y[224];
	for (int i = 0; i < n; i++) {
		snprintf(y, sizeof(y),
		         "kind: DAG\nname: %s%d\nschedule: {cron: \"* * * * * "
		         "?\"}\ncatchup: %s\ntasks:\n  - {name: a, command: "
		         "echo a}\n",
		         prefix, i, catchup ? "true" : "false");
		store_dag(y);
	}
}

/* Every DAG has at least `min` runs, one per second: no gap, no repeat,
 * and a Due was sent for every run. */
static void
assert_each_runs_every_second(int64_t min)
{
	cr_assert_geq(q_int("SELECT min(c) FROM (SELECT count(*) c FROM "
	                    "dag_runs GROUP BY dag_id) x"),
	              min);
	cr_assert_eq(q_int("SELECT count(*) FROM (SELECT dag_id FROM dag_runs "
	                   "GROUP BY dag_id HAVING count(*) <> count(DISTINCT "
	                   "logical_date) OR count(*) <> extract(epoch FROM "
	                   "max(logical_date) - min(logical_date)) + 1) x"),
	             0, "a period was skipped or made twice");
	cr_assert_eq((int64_t) cap_count(&due_cap),
	             q_int("SELECT count(*) FROM dag_runs"),
	             "a run without its Due");
}

/* More schedules due at one instant than one pass fires: the rest fire
 * at the next passes, none lost and none twice (the pass limit keeps a
 * 100,000-DAG midnight within what the runtime buffers). */
Test(time_detector, more_due_than_one_pass_fires_all_of_them)
{
	store_second_dags("p", 7, 0);
	cr_assert_eq(ax_config_set(cfg, "scheduler.fires_per_tick", "2"),
	             AX_OK);
	align_second(300000);
	start_system();
	ax_clock_sleep_us(4 * AX_USEC_PER_SEC);
	stop_system();
	cr_assert_eq(q_int("SELECT count(DISTINCT dag_id) FROM dag_runs"), 7);
	assert_each_runs_every_second(3);
}

Test(time_detector, restart_resumes_without_repeat_catchup_off)
{
	store_dag(every_second);
	align_second(300000);
	start_system();
	ax_clock_sleep_us(2 * AX_USEC_PER_SEC);
	stop_system();
	int64_t last = q_int("SELECT ax_us(max(interval_end)) FROM dag_runs");
	int64_t runs = q_int("SELECT count(*) FROM dag_runs");
	/* down for 3 periods; catchup off: only the latest is created */
	ax_clock_sleep_us(3 * AX_USEC_PER_SEC);
	cap_clear(&due_cap);
	int64_t restart = ax_clock_utc_us();
	start_system();
	ax_clock_sleep_us(500000);
	/* only the latest missed period; the next one is prepared ahead
	 * (scheduler.prepare_ahead, 500 ms by default) */
	size_t missed = 0;
	for (size_t i = 0; i < cap_count(&due_cap); i++) {
		int64_t due = due_cap.cmds[i]->due->due_at_us;
		cr_assert(due > last + AX_USEC_PER_SEC);
		if (due <= restart)
			missed++;
		else
			cr_assert_leq(due, restart + 1100000,
			              "prepared %lld us ahead",
			              (long long) (due - restart));
	}
	cr_assert_eq(missed, 1, "after restart: %zu missed periods created",
	             missed);
	ax_clock_sleep_us(AX_USEC_PER_SEC);
	stop_system();
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs"),
	             runs + (int64_t) cap_count(&due_cap));
	cr_assert_eq(q_int("SELECT count(*) - count(DISTINCT logical_date) "
	                   "FROM dag_runs"),
	             0);
}

Test(time_detector, catchup_on_creates_every_missed_period)
{
	store_dag("kind: DAG\nname: cu\n"
	          "schedule: {cron: \"* * * * * ?\"}\ncatchup: true\n"
	          "tasks:\n  - {name: a, command: echo a}\n");
	align_second(300000);
	start_system();
	ax_clock_sleep_us(1500000);
	stop_system();
	int64_t last = q_int("SELECT ax_us(max(interval_end)) FROM dag_runs");
	ax_clock_sleep_us(4 * AX_USEC_PER_SEC);
	cap_clear(&due_cap);
	start_system();
	ax_clock_sleep_us(300000);
	stop_system();
	/* every period since the last one, no gap */
	size_t n = cap_count(&due_cap);
	cr_assert_geq(n, 4, "catch-up created %zu", n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(due_cap.cmds[i]->due->due_at_us,
		             last + (int64_t) (i + 1) * AX_USEC_PER_SEC);
	cr_assert(due_cap.cmds[0]->due->catchup);
}

/* Catch-ups of several schedules make more runs than one pass takes:
 * the schedules past the limit catch up in the next passes, every
 * missed period exactly once. */
Test(time_detector, catchups_beyond_one_pass_create_every_period_once)
{
	store_second_dags("c", 4, 1);
	cr_assert_eq(ax_config_set(cfg, "scheduler.fires_per_tick", "2"),
	             AX_OK);
	align_second(300000);
	start_system();
	ax_clock_sleep_us(1500000);
	stop_system();
	ax_clock_sleep_us(4 * AX_USEC_PER_SEC); /* 4 missed periods each */
	start_system();
	ax_clock_sleep_us(1500000);
	stop_system();
	assert_each_runs_every_second(6);
}

Test(time_detector, pause_disarms_and_unpause_rearms)
{
	int64_t id = store_dag(every_second);
	char    sql[128];
	align_second(300000);
	start_system();
	ax_clock_sleep_us(1200000);
	snprintf(sql, sizeof(sql),
	         "UPDATE dags SET paused = true WHERE id = %lld",
	         (long long) id);
	cr_assert_eq(ax_store_exec(st, sql, 0, NULL), AX_OK);
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__ControlOp op  = AX__CONTROL_OP__INIT;
	op.op             = "paused";
	op.dag            = "sec";
	cmd.body_case     = AX__COMMAND__BODY_CONTROL;
	cmd.control       = &op;
	client_send(AX_A_DAG_LOADER, &cmd);
	ax_clock_sleep_us(200000);
	cr_assert(ax_dag_registry_paused(ctx.registry, "sec"));
	size_t n = cap_count(&due_cap);
	ax_clock_sleep_us(2 * AX_USEC_PER_SEC);
	cr_assert_eq(cap_count(&due_cap), n, "fired while paused");
	snprintf(sql, sizeof(sql),
	         "UPDATE dags SET paused = false WHERE id = %lld",
	         (long long) id);
	cr_assert_eq(ax_store_exec(st, sql, 0, NULL), AX_OK);
	op.op = "unpaused";
	client_send(AX_A_DAG_LOADER, &cmd);
	ax_clock_sleep_us(1500000);
	cr_assert_gt(cap_count(&due_cap), n, "not re-armed after unpause");
	stop_system();
}

Test(time_detector, manual_trigger_and_retry_timer)
{
	store_dag("kind: DAG\nname: man\nparams: {x: \"0\"}\n"
	          "tasks:\n  - {name: a, command: echo a}\n");
	start_system();
	ax_clock_sleep_us(300000); /* initial load */

	Ax__Command   cmd  = AX__COMMAND__INIT;
	Ax__ControlOp op   = AX__CONTROL_OP__INIT;
	op.op              = "trigger";
	op.dag             = "man";
	op.logical_date_us = 1767225600LL * AX_USEC_PER_SEC; /* 2026-01-01 */
	op.params_json     = "{\"x\":\"1\"}";
	cmd.body_case      = AX__COMMAND__BODY_CONTROL;
	cmd.control        = &op;
	client_send(AX_A_TIME_DETECTOR, &cmd);

	/* a retry timer 300 ms from now */
	Ax__Command       tc  = AX__COMMAND__INIT;
	Ax__TimerSet      ts  = AX__TIMER_SET__INIT;
	Ax__InstanceRef   ref = AX__INSTANCE_REF__INIT;
	Ax__InstanceReady rd  = AX__INSTANCE_READY__INIT;
	int64_t           at  = ax_clock_utc_us() + 1500000;
	ref.dag               = "man";
	ref.task              = "a";
	ref.instance_id       = 42;
	rd.instance           = &ref;
	rd.priority           = 7;
	ts.kind               = AX__TIMER_KIND__TIMER_RETRY;
	ts.key                = "42";
	ts.fire_at_us         = at;
	ts.instance           = &ref;
	ts.ready              = &rd;
	tc.body_case          = AX__COMMAND__BODY_TIMER_SET;
	tc.timer_set          = &ts;
	client_send(AX_A_TIME_DETECTOR, &tc);
	/* a second one, cancelled: never fires */
	ts.key = "43";
	client_send(AX_A_TIME_DETECTOR, &tc);
	Ax__Command     cc = AX__COMMAND__INIT;
	Ax__TimerCancel tx = AX__TIMER_CANCEL__INIT;
	tx.kind            = AX__TIMER_KIND__TIMER_RETRY;
	tx.key             = "43";
	cc.body_case       = AX__COMMAND__BODY_TIMER_CANCEL;
	cc.timer_cancel    = &tx;
	client_send(AX_A_TIME_DETECTOR, &cc);

	for (int w = 0; w < 1000 && cap_count(&due_cap) < 1; w++)
		ax_clock_sleep_us(10000);
	if (ax_clock_utc_us() < at)
		cr_assert_eq(cap_count(&ready_cap), 0, "retry fired early");
	cr_assert_eq(cap_count(&due_cap), 1);
	Ax__Due *d = due_cap.cmds[0]->due;
	cr_assert(d->manual);
	cr_assert_eq(d->logical_time_us, op.logical_date_us);
	{
		PGresult *res;
		cr_assert_eq(
		    ax_store_query(st,
		                   "SELECT run_type, conf::text, "
		                   "ax_us(logical_date) FROM dag_runs",
		                   0, NULL, &res),
		    AX_OK);
		cr_assert_eq(PQntuples(res), 1);
		cr_assert_str_eq(PQgetvalue(res, 0, 0), "manual");
		cr_assert_str_eq(PQgetvalue(res, 0, 1), "{\"x\": \"1\"}");
		PQclear(res);
	}
	for (int w = 0; w < 1000 && cap_count(&ready_cap) < 1; w++)
		ax_clock_sleep_us(10000);
	cr_assert_eq(cap_count(&ready_cap), 1);
	Ax__Command *r = ready_cap.cmds[0];
	cr_assert_eq(r->body_case, AX__COMMAND__BODY_INSTANCE_READY);
	cr_assert_eq(r->instance_ready->priority, 7);
	cr_assert_eq(r->instance_ready->instance->instance_id, 42);
	int64_t late = ready_cap.recv_utc[0] - at;
	/* on time; the slack is for a loaded (sanitizer) CI machine, the
	 * wheel's own lateness is measured by bench_timing_wheel */
	cr_assert(late >= 0 && late < 1000000, "retry lateness %lld us",
	          (long long) late);
	/* the same trigger again: the run exists, no second Due */
	client_send(AX_A_TIME_DETECTOR, &cmd);
	ax_clock_sleep_us(200000);
	cr_assert_eq(cap_count(&due_cap), 1);
	stop_system();
}
