/*
 * test_dependency_detector.c - the dependency detector against a real
 * PostgreSQL, with the real instance generator (so plan rows exist) and
 * capture actors standing in for the resource detector, the queue (which
 * cancels reach through the instance generator) and the
 * event emitter. The test plays the result handler: it moves instance
 * rows through the state machine with SQL and sends InstanceSucceeded /
 * InstanceFinished like the result handler does after its commit.
 *
 * Covers: diamond order, failure leaves the downstream waiting with
 * WAIT_DEPENDENCY and fails the run, clear with downstream (try budget
 * reset), mark SUCCESS releases the downstream, same_period cross-DAG
 * dependency, serial / discard / replace, restart rebuild (counters
 * rebuilt, nothing released twice, a preempted instance left to the
 * result handler's recovery), the events of runs dropped from
 * memory before their batch is written (their own trace id).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "dag.h"
#include "dag_registry.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "dependency_detector.h"
#include "instance_generator.h"
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
	/* every InstanceReady, also past CAP_MAX: count and the sum of
	 * task number (from "t<k>") * 1024 + shard */
	size_t  nready;
	int64_t ready_sum;
} capture;

static ax_err
cap_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	capture *c = state;
	(void) self;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n; i++) {
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *cmd = ax__command__unpack(
		    NULL, items[i].len, (const uint8_t *) items[i].data);
		if (cmd == NULL)
			continue;
		if (cmd->body_case == AX__COMMAND__BODY_INSTANCE_READY) {
			const Ax__InstanceRef *r =
			    cmd->instance_ready->instance;
			c->nready++;
			c->ready_sum +=
			    (r->task[0] == 't' ? atoll(r->task + 1) : 0) *
			        1024 +
			    r->shard_index;
		}
		if (c->n < CAP_MAX)
			c->cmds[c->n++] = cmd;
		else
			ax__command__free_unpacked(cmd, NULL);
	}
	pthread_mutex_unlock(&c->mu);
	return AX_OK;
}

static void
cap_nofree(void *state)
{
	(void) state;
}

static void
cap_clear(capture *c)
{
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n; i++)
		ax__command__free_unpacked(c->cmds[i], NULL);
	c->n         = 0;
	c->nready    = 0;
	c->ready_sum = 0;
	pthread_mutex_unlock(&c->mu);
}

static size_t
nready(capture *c)
{
	pthread_mutex_lock(&c->mu);
	size_t n = c->nready;
	pthread_mutex_unlock(&c->mu);
	return n;
}

/* InstanceReady received for (run, task). */
static int
readies(capture *c, int64_t run, const char *task)
{
	int k = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n; i++) {
		Ax__Command *m = c->cmds[i];
		if (m->body_case != AX__COMMAND__BODY_INSTANCE_READY)
			continue;
		Ax__InstanceRef *r = m->instance_ready->instance;
		if (r->dag_run_id == run && strcmp(r->task, task) == 0)
			k++;
	}
	pthread_mutex_unlock(&c->mu);
	return k;
}

/* CancelInstance received for run. */
static int
cancels(capture *c, int64_t run)
{
	int k = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n; i++) {
		Ax__Command *m = c->cmds[i];
		if (m->body_case == AX__COMMAND__BODY_CANCEL_INSTANCE &&
		    m->cancel_instance->instance->dag_run_id == run)
			k++;
	}
	pthread_mutex_unlock(&c->mu);
	return k;
}

/* --- fixture ------------------------------------------------------------
 */

static ax_test_pg      *pg;
static ax_store        *st;
static ax_config       *cfg;
static ax_pipeline_ctx  ctx;
static capture          ready_cap, hook_cap, ev_cap;
static ax_actor_system *sys;

static void
setup(void)
{
	ax_test_pipeline_db(&pg, &st, &cfg, &ctx);
	pthread_mutex_init(&ready_cap.mu, NULL);
	pthread_mutex_init(&hook_cap.mu, NULL);
	pthread_mutex_init(&ev_cap.mu, NULL);
}

static ax_dependency_detector_stats dstats;

static void
start_system(void)
{
	static const ax_actor_ops cap_ops = { .handle = cap_handle,
		                              .fini   = cap_nofree };
	ax_actor_config           c1      = { .name = AX_A_RESOURCE_DETECTOR };
	/* cancels pass through the instance generator to the queue */
	ax_actor_config c2 = { .name = AX_A_QUEUE };
	ax_actor_config c3 = { .name = AX_A_EVENT_EMITTER };

	/* a fresh registry per system, like a new axd process */
	cr_assert_eq(ax_dag_registry_new(&ctx.registry), AX_OK);
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	cr_assert_eq(ax_dependency_detector_add_ex(sys, &ctx, &dstats), AX_OK,
	             "%s", ax_err_detail());
	cr_assert_eq(ax_instance_generator_add(sys, &ctx), AX_OK, "%s",
	             ax_err_detail());
	/* timers only (no schedule is armed): TIMER_GATE of runs that are
	 * due later */
	cr_assert_eq(ax_time_detector_add(sys, &ctx), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_actor_system_add(sys, &c1, &cap_ops, &ready_cap, NULL),
	             AX_OK);
	cr_assert_eq(ax_actor_system_add(sys, &c2, &cap_ops, &hook_cap, NULL),
	             AX_OK);
	cr_assert_eq(ax_actor_system_add(sys, &c3, &cap_ops, &ev_cap, NULL),
	             AX_OK);
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
}

static void
stop_system(void)
{
	ax_actor_system_stop(sys, AX_USEC_PER_SEC, NULL);
	ax_actor_system_free(sys);
	sys = NULL;
	ax_dag_registry_free(ctx.registry);
	ctx.registry = NULL;
}

static void
teardown(void)
{
	if (sys != NULL)
		stop_system();
	cap_clear(&ready_cap);
	cap_clear(&hook_cap);
	cap_clear(&ev_cap);
	ax_config_free(cfg);
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

TestSuite(dependency_detector, .init = setup, .fini = teardown,
          .timeout = 120);

/* --- helpers --------------------------------------------------------------
 */

/* Stores a DAG from YAML; returns its dags.id. */
static int64_t
store_dag(const char *yaml)
{
	return ax_test_store_dag(st, yaml).id;
}

#define q_int(...) ax_test_q_int(st, __VA_ARGS__)

static void q_exec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
q_exec(const char *fmt, ...)
{
	char    sql[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	cr_assert_eq(ax_store_exec(st, sql, 0, NULL), AX_OK, "%s: %s", sql,
	             ax_err_detail());
}

/* Creates a dag_runs row of dag_id at logical second sec. */
static int64_t
make_run(int64_t dag_id, int64_t sec)
{
	return q_int("INSERT INTO dag_runs (dag_id, dag_version_id, "
	             "run_type, logical_date, interval_start, interval_end, "
	             "due_at) SELECT id, active_version_id, 'scheduled', "
	             "ax_ts(%lld), ax_ts(%lld), ax_ts(%lld), now() FROM dags "
	             "WHERE id = %lld RETURNING id",
	             (long long) sec * 1000000, (long long) sec * 1000000,
	             (long long) sec * 1000000, (long long) dag_id);
}

#define client_send(dest, cmd) ax_test_send(sys, dest, cmd)

/* Sends the Due of run (trace: its trace id, or NULL). */
static void
send_due_traced(const char *dag, int64_t run, int64_t due_us,
                const char *trace)
{
	Ax__Command cmd = AX__COMMAND__INIT;
	Ax__Due     due = AX__DUE__INIT;
	due.dag         = (char *) dag;
	due.dag_run_id  = run;
	due.dag_version_id =
	    q_int("SELECT dag_version_id FROM dag_runs WHERE id = %lld",
	          (long long) run);
	due.logical_time_us =
	    q_int("SELECT ax_us(logical_date) FROM dag_runs WHERE id = %lld",
	          (long long) run);
	/* the data interval, as the time detector sends it */
	due.interval_start_us =
	    q_int("SELECT ax_us(interval_start) FROM dag_runs WHERE id = %lld",
	          (long long) run);
	due.interval_end_us =
	    q_int("SELECT ax_us(interval_end) FROM dag_runs WHERE id = %lld",
	          (long long) run);
	due.due_at_us = due_us;
	cmd.body_case = AX__COMMAND__BODY_DUE;
	cmd.due       = &due;
	cmd.trace_id  = (char *) trace;
	client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
}

static void
send_due_at(const char *dag, int64_t run, int64_t due_us)
{
	send_due_traced(dag, run, due_us, NULL);
}

static void
send_due(const char *dag, int64_t run)
{
	send_due_at(dag, run, ax_clock_utc_us());
}

static void
send_control(const char *op, int64_t iid, int downstream, const char *state)
{
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__ControlOp c   = AX__CONTROL_OP__INIT;
	c.op              = (char *) op;
	c.instance_id     = iid;
	c.downstream      = downstream;
	c.state           = (char *) (state ? state : "");
	cmd.body_case     = AX__COMMAND__BODY_CONTROL;
	cmd.control       = &c;
	client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
}

/* Polls cond for up to 30 s (a loaded sanitizer build is slow). */
#define WAIT_FOR(cond)                                                        \
	do {                                                                  \
		for (int w_ = 0; w_ < 3000 && !(cond); w_++)                  \
			ax_clock_sleep_us(10000);                             \
		cr_assert(cond, "timed out waiting for %s", #cond);           \
	} while (0)

static int64_t
iid_of(int64_t run, const char *task)
{
	return q_int("SELECT id FROM task_instances WHERE dag_run_id = %lld "
	             "AND task = '%s'",
	             (long long) run, task);
}

static int
ti_state_is(int64_t run, const char *task, const char *state,
            const char *reason)
{
	return q_int("SELECT count(*) FROM task_instances WHERE dag_run_id = "
	             "%lld AND task = '%s' AND state = '%s' AND reason "
	             "IS NOT DISTINCT FROM %s%s%s",
	             (long long) run, task, state, reason ? "'" : "",
	             reason ? reason : "NULL", reason ? "'" : "") == 1;
}

static int
run_state_is(int64_t run, const char *state)
{
	return q_int("SELECT count(*) FROM dag_runs WHERE id = %lld AND "
	             "state = '%s'",
	             (long long) run, state) == 1;
}

/*
 * Plays the result handler: moves (run, task) PENDING -> READY ->
 * RUNNING -> final (try_number 1 more) and reports it.
 */
static void
finish_task(const char *dag, int64_t run, const char *task, const char *fin)
{
	int64_t iid = iid_of(run, task);
	q_exec("UPDATE task_instances SET state = 'READY', try_number = "
	       "try_number + 1 WHERE id = %lld",
	       (long long) iid);
	q_exec("UPDATE task_instances SET state = 'RUNNING' WHERE id = %lld",
	       (long long) iid);
	q_exec("UPDATE task_instances SET state = '%s' WHERE id = %lld", fin,
	       (long long) iid);

	Ax__Command     cmd = AX__COMMAND__INIT;
	Ax__InstanceRef ref = AX__INSTANCE_REF__INIT;
	ref.dag             = (char *) dag;
	ref.dag_run_id      = run;
	ref.task            = (char *) task;
	ref.instance_id     = iid;
	ref.shard_total     = 1;
	if (strcmp(fin, "SUCCESS") == 0) {
		Ax__InstanceSucceeded s = AX__INSTANCE_SUCCEEDED__INIT;
		s.instance              = &ref;
		cmd.body_case           = AX__COMMAND__BODY_INSTANCE_SUCCEEDED;
		cmd.instance_succeeded  = &s;
		client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
	} else {
		Ax__InstanceFinished f = AX__INSTANCE_FINISHED__INIT;
		f.instance             = &ref;
		f.state                = (char *) fin;
		cmd.body_case          = AX__COMMAND__BODY_INSTANCE_FINISHED;
		cmd.instance_finished  = &f;
		client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
	}
}

static const char *diamond =
    "kind: DAG\nname: dia\ntasks:\n"
    "  - {name: a, command: echo a}\n"
    "  - {name: b, command: echo b, depends_on: [a]}\n"
    "  - {name: c, command: echo c, depends_on: [a]}\n"
    "  - {name: d, command: echo d, depends_on: [b, c]}\n";

/* a second finish_task on a SUCCESS row would be an illegal move: the
 * duplicate in the test above goes through PENDING first */
static void
reset_ti(int64_t run, const char *task)
{
	q_exec("UPDATE task_instances SET state = 'PENDING' WHERE id = %lld",
	       (long long) iid_of(run, task));
}

/* --- tests ----------------------------------------------------------------
 */

Test(dependency_detector, diamond_order_and_run_success)
{
	int64_t dag = store_dag(diamond);
	int64_t run = make_run(dag, 1000);
	start_system();
	send_due("dia", run);

	WAIT_FOR(readies(&ready_cap, run, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) run) == 4);
	cr_assert(ti_state_is(run, "a", "PENDING", "WAIT_RESOURCE"));
	cr_assert(ti_state_is(run, "d", "PENDING", "WAIT_DEPENDENCY"));
	cr_assert(run_state_is(run, "RUNNING"));
	cr_assert_eq(readies(&ready_cap, run, "b"), 0);

	finish_task("dia", run, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "b") == 1 &&
	         readies(&ready_cap, run, "c") == 1);
	finish_task("dia", run, "b", "SUCCESS");
	ax_clock_sleep_us(200000);
	cr_assert_eq(readies(&ready_cap, run, "d"), 0, "d before c");
	finish_task("dia", run, "c", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "d") == 1);
	cr_assert(run_state_is(run, "RUNNING"));
	finish_task("dia", run, "d", "SUCCESS");
	WAIT_FOR(run_state_is(run, "SUCCESS"));
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	                   "AND ended_at IS NOT NULL AND started_at IS NOT "
	                   "NULL",
	                   (long long) run),
	             1);
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE type = "
	                   "'run.succeeded' AND dag_run_id = %lld",
	                   (long long) run),
	             1);
	/* the run is over: its DAG's graph is not kept in memory (a
	 * million DAGs firing once a month must not pin a million) */
	WAIT_FOR(dstats.versions == 0);
	/* a duplicate success changes nothing */
	reset_ti(run, "a");
	finish_task("dia", run, "a", "SUCCESS");
	ax_clock_sleep_us(200000);
	cr_assert_eq(readies(&ready_cap, run, "b"), 1);
}

Test(dependency_detector, failure_waits_then_clear_with_downstream)
{
	int64_t dag =
	    store_dag("kind: DAG\nname: fl\ntasks:\n"
	              "  - {name: a, command: echo a, retries: {count: 2}}\n"
	              "  - {name: b, command: echo b, depends_on: [a]}\n"
	              "  - {name: c, command: echo c, depends_on: [b]}\n");
	int64_t run = make_run(dag, 2000);
	start_system();
	send_due("fl", run);
	WAIT_FOR(readies(&ready_cap, run, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) run) == 3);
	/* b's row reason is overwritten to show the UPDATE happens */
	q_exec("UPDATE task_instances SET reason = NULL WHERE dag_run_id = "
	       "%lld AND task IN ('b', 'c')",
	       (long long) run);
	/* three tries used up */
	q_exec("UPDATE task_instances SET try_number = 2 WHERE id = %lld",
	       (long long) iid_of(run, "a"));
	finish_task("fl", run, "a", "FAILED");
	WAIT_FOR(run_state_is(run, "FAILED"));
	cr_assert(ti_state_is(run, "b", "PENDING", "WAIT_DEPENDENCY"));
	cr_assert(ti_state_is(run, "c", "PENDING", "WAIT_DEPENDENCY"));
	cr_assert_eq(readies(&ready_cap, run, "b"), 0);
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE type = "
	                   "'run.failed' AND dag_run_id = %lld",
	                   (long long) run),
	             1);

	/* clear a with its downstreams: back to PENDING, tries again */
	send_control("clear", iid_of(run, "a"), 1, NULL);
	WAIT_FOR(readies(&ready_cap, run, "a") == 2);
	cr_assert(ti_state_is(run, "a", "PENDING", "MANUAL_CLEAR"));
	cr_assert(ti_state_is(run, "c", "PENDING", "MANUAL_CLEAR"));
	cr_assert_eq(q_int("SELECT max_tries - try_number FROM "
	                   "task_instances WHERE id = %lld",
	                   (long long) iid_of(run, "a")),
	             3, "a cleared instance gets its 3 tries again");
	cr_assert(run_state_is(run, "RUNNING"));
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	                   "AND ended_at IS NULL",
	                   (long long) run),
	             1);
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE type = "
	                   "'instance.cleared' AND dag_run_id = %lld",
	                   (long long) run),
	             3);
	finish_task("fl", run, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "b") == 1);
	cr_assert_eq(readies(&ready_cap, run, "c"), 0);
}

Test(dependency_detector, mark_success_releases_downstream)
{
	int64_t dag = store_dag("kind: DAG\nname: mk\ntasks:\n"
	                        "  - {name: a, command: echo a}\n"
	                        "  - {name: b, command: echo b, "
	                        "depends_on: [a]}\n");
	int64_t run = make_run(dag, 3000);
	start_system();
	send_due("mk", run);
	WAIT_FOR(readies(&ready_cap, run, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) run) == 2);
	finish_task("mk", run, "a", "FAILED");
	WAIT_FOR(run_state_is(run, "FAILED"));
	/* the API: FAILED -> PENDING is the only legal way out; it marks
	 * through the state machine and notifies */
	int64_t a = iid_of(run, "a");
	q_exec("UPDATE task_instances SET state = 'PENDING' WHERE id = %lld",
	       (long long) a);
	q_exec("UPDATE task_instances SET state = 'READY' WHERE id = %lld",
	       (long long) a);
	q_exec("UPDATE task_instances SET state = 'RUNNING' WHERE id = %lld",
	       (long long) a);
	q_exec("UPDATE task_instances SET state = 'SUCCESS' WHERE id = %lld",
	       (long long) a);
	send_control("mark", a, 0, "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "b") == 1);
	cr_assert(run_state_is(run, "RUNNING"));
	cr_assert_eq(readies(&ready_cap, run, "a"), 1, "a not re-released");
	finish_task("mk", run, "b", "SUCCESS");
	WAIT_FOR(run_state_is(run, "SUCCESS"));
}

Test(dependency_detector, same_period_cross_dag)
{
	int64_t up         = store_dag("kind: DAG\nname: up\ntasks:\n"
	                                       "  - {name: a, command: echo a}\n");
	int64_t dn         = store_dag("kind: DAG\nname: dn\n"
	                                       "depends_on_dags: [{dag: up, mode: "
	                                       "same_period}]\ntasks:\n"
	                                       "  - {name: x, command: echo x}\n");
	int64_t r_dn       = make_run(dn, 4000);
	int64_t r_up_other = make_run(up, 3999);
	int64_t r_up       = make_run(up, 4000);
	start_system();
	send_due("dn", r_dn);
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld AND "
	               "reason = 'WAIT_DEPENDENCY'",
	               (long long) r_dn) == 1);
	cr_assert(run_state_is(r_dn, "QUEUED"));
	/* another period of the upstream does not release it */
	send_due("up", r_up_other);
	WAIT_FOR(readies(&ready_cap, r_up_other, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) r_up_other) == 1);
	finish_task("up", r_up_other, "a", "SUCCESS");
	WAIT_FOR(run_state_is(r_up_other, "SUCCESS"));
	ax_clock_sleep_us(200000);
	cr_assert_eq(readies(&ready_cap, r_dn, "x"), 0);

	send_due("up", r_up);
	WAIT_FOR(readies(&ready_cap, r_up, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) r_up) == 1);
	finish_task("up", r_up, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, r_dn, "x") == 1);
	cr_assert(run_state_is(r_dn, "RUNNING"));

	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) r_dn) == 1);
	finish_task("dn", r_dn, "x", "SUCCESS");
	WAIT_FOR(run_state_is(r_dn, "SUCCESS"));

	/* a run planned after its upstream succeeded starts at once */
	int64_t r_dn2 = make_run(dn, 3999);
	send_due("dn", r_dn2);
	WAIT_FOR(readies(&ready_cap, r_dn2, "x") == 1);
}

static const char *
policy_dag(char *buf, size_t len, const char *name, const char *policy)
{
	snprintf(buf, len,
	         "kind: DAG\nname: %s\nconcurrency: {max_active_runs: 1, "
	         "policy: %s}\ntasks:\n  - {name: a, command: echo a}\n",
	         name, policy);
	return buf;
}

Test(dependency_detector, serial_discard_replace)
{
	char    y[512];
	int64_t ser = store_dag(policy_dag(y, sizeof(y), "ser", "serial"));
	int64_t dis = store_dag(policy_dag(y, sizeof(y), "dis", "discard"));
	int64_t rep = store_dag(policy_dag(y, sizeof(y), "rep", "replace"));
	/* the runs come after the start-up rebuild, as the time detector's
	 * do: each is decided when its Due arrives, in the order sent (runs
	 * that exist at start are decided by the rebuild, all in one go:
	 * see due_replayed_after_the_rebuild_changes_nothing) */
	start_system();
	WAIT_FOR(dstats.startups == 1);
	int64_t s1 = make_run(ser, 10), s2 = make_run(ser, 20),
	        s3 = make_run(ser, 15);
	int64_t d1 = make_run(dis, 10), d2 = make_run(dis, 20);
	int64_t p1 = make_run(rep, 10), p2 = make_run(rep, 20);

	/* serial: s2 and s3 wait; they start in logical order */
	send_due("ser", s1);
	send_due("ser", s2);
	send_due("ser", s3);
	WAIT_FOR(readies(&ready_cap, s1, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id IN (%lld, "
	               "%lld) AND state = 'QUEUED' AND reason = "
	               "'CONCURRENCY_BLOCKED'",
	               (long long) s2, (long long) s3) == 2);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) s1) == 1);
	finish_task("ser", s1, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, s3, "a") == 1);
	cr_assert_eq(readies(&ready_cap, s2, "a"), 0);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) s3) == 1);
	finish_task("ser", s3, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, s2, "a") == 1);

	/* discard: d2 is dropped */
	send_due("dis", d1);
	send_due("dis", d2);
	WAIT_FOR(run_state_is(d2, "CANCELED"));
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	                   "AND reason = 'CONCURRENCY_BLOCKED'",
	                   (long long) d2),
	             1);
	cr_assert_eq(readies(&ready_cap, d2, "a"), 0);
	cr_assert(run_state_is(d1, "RUNNING"));

	/* replace: p1 is superseded, its running instance canceled */
	send_due("rep", p1);
	WAIT_FOR(readies(&ready_cap, p1, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) p1) == 1);
	int64_t a1 = iid_of(p1, "a");
	q_exec("UPDATE task_instances SET state = 'READY' WHERE id = %lld",
	       (long long) a1);
	send_due("rep", p2);
	WAIT_FOR(readies(&ready_cap, p2, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	               "AND state = 'CANCELED' AND reason = 'SUPERSEDED'",
	               (long long) p1) == 1);
	WAIT_FOR(cancels(&hook_cap, p1) == 1);
	cr_assert(run_state_is(p2, "RUNNING"));
}

/*
 * The start-up rebuild decides the runs it reads; a Due for one of them
 * that arrives later (the time detector sent it just before the rebuild
 * read the run) is a replay, even when the run has ended since. Here the
 * rebuild supersedes r1 by r2 (policy replace). Without the guard, r1's
 * replayed Due made it a new run that superseded r2: r1 went back from
 * CANCELED to RUNNING and r2 was canceled (seen as the dag_runs row of
 * r1 flipping CANCELED -> RUNNING -> CANCELED under load).
 */
Test(dependency_detector, due_replayed_after_the_rebuild_changes_nothing)
{
	char    y[512];
	int64_t rep = store_dag(policy_dag(y, sizeof(y), "rep", "replace"));
	int64_t ser = store_dag(policy_dag(y, sizeof(y), "ser", "serial"));
	int64_t r1 = make_run(rep, 10), r2 = make_run(rep, 20);
	start_system();
	WAIT_FOR(dstats.startups == 1);
	WAIT_FOR(run_state_is(r2, "RUNNING"));
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	               "AND state = 'CANCELED' AND reason = 'SUPERSEDED'",
	               (long long) r1) == 1);
	send_due("rep", r1);
	send_due("rep", r2);
	/* a Due after them, handled after them: then they were handled */
	int64_t m = make_run(ser, 10);
	send_due("ser", m);
	WAIT_FOR(readies(&ready_cap, m, "a") == 1);
	cr_assert(run_state_is(r2, "RUNNING"));
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	                   "AND state = 'CANCELED' AND reason = "
	                   "'SUPERSEDED'",
	                   (long long) r1),
	             1);
	cr_assert_eq(dstats.superseded, 1, "superseded %llu times",
	             (unsigned long long) dstats.superseded);
	cr_assert_eq(readies(&ready_cap, r2, "a"), 1);
}

/* Rows of event_log of type for run with trace_id trace. */
static int64_t
events_traced(const char *type, int64_t run, const char *trace)
{
	return q_int("SELECT count(*) FROM event_log WHERE type = '%s' AND "
	             "dag_run_id = %lld AND trace_id = '%s'",
	             type, (long long) run, trace);
}

/*
 * A run that finishes (or is discarded, or superseded) is dropped from
 * memory in the handler call that queues its event, before flush()
 * writes the batch, and a held run may start in its place in the same
 * call. The event must not read the dropped run: each run ends in its
 * terminal state, and its event is in event_log with the run's own trace
 * id. (When the event read the freed run, AddressSanitizer stopped the
 * test at the first finish; without it, the garbage trace failed the
 * batch, so the run stayed RUNNING and the event was not written.)
 */
Test(dependency_detector, events_of_dropped_runs_keep_their_trace)
{
	char        y[512];
	const char *t1 = "0af7651916cd43dd8448eb211c80319c",
	           *t2 = "1bf7651916cd43dd8448eb211c80319d",
	           *t3 = "2cf7651916cd43dd8448eb211c80319e",
	           *t4 = "3df7651916cd43dd8448eb211c80319f",
	           *t5 = "4ef7651916cd43dd8448eb211c8031a0",
	           *t6 = "5ff7651916cd43dd8448eb211c8031a1";
	int64_t ser    = store_dag(policy_dag(y, sizeof(y), "tser", "serial"));
	int64_t dis  = store_dag(policy_dag(y, sizeof(y), "tdis", "discard"));
	int64_t rep  = store_dag(policy_dag(y, sizeof(y), "trep", "replace"));
	int64_t warm = store_dag(policy_dag(y, sizeof(y), "twarm", "serial"));
	int64_t s1, s2, d1, d2, p1, p2, now = ax_clock_utc_us();

	/* the runs found at start are recovered without a trace: the traced
	 * rows are made once the start-up rebuild (which plans this one) is
	 * over */
	make_run(warm, 10);
	start_system();
	WAIT_FOR(dstats.planned == 1);
	s1 = make_run(ser, 10);
	s2 = make_run(ser, 20);
	d1 = make_run(dis, 10);
	d2 = make_run(dis, 20);
	p1 = make_run(rep, 10);
	p2 = make_run(rep, 20);

	/* serial: s1 ends and s2 starts in the same handler call */
	send_due_traced("tser", s1, now, t1);
	send_due_traced("tser", s2, now, t2);
	WAIT_FOR(readies(&ready_cap, s1, "a") == 1);
	WAIT_FOR(run_state_is(s2, "QUEUED"));
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) s1) == 1);
	finish_task("tser", s1, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, s2, "a") == 1);
	WAIT_FOR(run_state_is(s1, "SUCCESS"));
	WAIT_FOR(events_traced("run.succeeded", s1, t1) == 1);
	cr_assert(run_state_is(s2, "RUNNING"));
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) s2) == 1);
	finish_task("tser", s2, "a", "FAILED");
	WAIT_FOR(run_state_is(s2, "FAILED"));
	WAIT_FOR(events_traced("run.failed", s2, t2) == 1);

	/* discard: d2 is dropped as it arrives */
	send_due_traced("tdis", d1, now, t3);
	WAIT_FOR(readies(&ready_cap, d1, "a") == 1);
	send_due_traced("tdis", d2, now, t4);
	WAIT_FOR(run_state_is(d2, "CANCELED"));
	WAIT_FOR(events_traced("run.discarded", d2, t4) == 1);

	/* replace: p1 is dropped when p2 takes its place */
	send_due_traced("trep", p1, now, t5);
	WAIT_FOR(readies(&ready_cap, p1, "a") == 1);
	send_due_traced("trep", p2, now, t6);
	WAIT_FOR(readies(&ready_cap, p2, "a") == 1);
	WAIT_FOR(run_state_is(p1, "CANCELED"));
	WAIT_FOR(events_traced("run.superseded", p1, t5) == 1);
	cr_assert(run_state_is(p2, "RUNNING"));
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE dag_run_id "
	                   "IN (%lld, %lld, %lld, %lld, %lld, %lld) AND "
	                   "trace_id !~ '^[0-9a-f]{32}$'",
	                   (long long) s1, (long long) s2, (long long) d1,
	                   (long long) d2, (long long) p1, (long long) p2),
	             0, "an event with a trace id that is not its run's");
}

/*
 * Runs prepared ahead of their due instant (scheduler.prepare_ahead):
 * discard and replace judge the overlap at the instant. A run due later
 * is held, starts if the active run ends first, and is discarded at its
 * instant (not before) if not.
 */
Test(dependency_detector, overlap_of_a_prepared_run_is_judged_when_due)
{
	char    y[512];
	int64_t dag = store_dag(policy_dag(y, sizeof(y), "dis2", "discard"));
	int64_t r1, r2, r3, due;
	/* each run row is created just before its Due: a QUEUED row found
	 * when the detector starts (at its first message) is recovered and
	 * judged at once, as a run that is already due */
	start_system();
	r1 = make_run(dag, 10);

	send_due("dis2", r1);
	WAIT_FOR(readies(&ready_cap, r1, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) r1) == 1);
	/* r2 due in 1 s: held, then started when r1 ends first */
	r2 = make_run(dag, 20);
	send_due_at("dis2", r2, ax_clock_utc_us() + AX_USEC_PER_SEC);
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld AND "
	               "state = 'QUEUED' AND reason = 'CONCURRENCY_BLOCKED'",
	               (long long) r2) == 1);
	finish_task("dis2", r1, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, r2, "a") == 1);
	cr_assert(run_state_is(r2, "RUNNING"));
	/* r3 due in 600 ms while r2 runs: discarded at its instant */
	due = ax_clock_utc_us() + 600 * AX_USEC_PER_MSEC;
	r3  = make_run(dag, 30);
	send_due_at("dis2", r3, due);
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld AND "
	               "reason = 'CONCURRENCY_BLOCKED'",
	               (long long) r3) == 1);
	cr_assert(run_state_is(r3, "QUEUED"), "r3 discarded before due");
	WAIT_FOR(run_state_is(r3, "CANCELED"));
	/* judged at the instant (the timer may fire a fraction of a
	 * millisecond early: the wheel runs on the monotonic clock) */
	cr_assert_geq(ax_clock_utc_us(), due - 2 * AX_USEC_PER_MSEC,
	              "discarded before its instant");
	cr_assert_eq(readies(&ready_cap, r3, "a"), 0);
	cr_assert(run_state_is(r2, "RUNNING"));
}

/* A parallel backfill runs up to max_active_runs at once; the others wait
 * (CONCURRENCY_BLOCKED) and start as runs finish. */
Test(dependency_detector, parallel_backfill_is_bounded_by_max_active_runs)
{
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__ControlOp c   = AX__CONTROL_OP__INIT;
	int64_t       dag = store_dag(
	          "kind: DAG\nname: bf\nconcurrency: {max_active_runs: 2, "
	                "policy: discard}\ntasks:\n  - {name: a, command: echo a}\n");
	int64_t r[4];
	int     started = 0;

	start_system();
	send_due("bf", make_run(dag, 1)); /* starts the detector */
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances") == 1);
	finish_task("bf", q_int("SELECT id FROM dag_runs"), "a", "SUCCESS");
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE state = "
	               "'SUCCESS'") == 1);
	for (int i = 0; i < 4; i++)
		r[i] = make_run(dag, 100 + i);
	c.op          = "backfill";
	c.mode        = "parallel";
	c.run_ids     = r;
	c.n_run_ids   = 4;
	cmd.body_case = AX__COMMAND__BODY_CONTROL;
	cmd.control   = &c;
	client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
	WAIT_FOR(q_int("SELECT count(*) FROM dag_runs WHERE id >= %lld AND "
	               "state = 'QUEUED' AND reason = 'CONCURRENCY_BLOCKED'",
	               (long long) r[0]) == 2);
	/* the two started runs' instances reach the next stage after their
	 * runs' rows are written: wait for them, then count */
	WAIT_FOR(readies(&ready_cap, r[0], "a") +
	             readies(&ready_cap, r[1], "a") +
	             readies(&ready_cap, r[2], "a") +
	             readies(&ready_cap, r[3], "a") >=
	         2);
	for (int i = 0; i < 4; i++)
		started += readies(&ready_cap, r[i], "a");
	cr_assert_eq(started, 2, "%d backfill runs started at once", started);
	cr_assert(readies(&ready_cap, r[0], "a") == 1 &&
	              readies(&ready_cap, r[1], "a") == 1,
	          "the oldest logical dates go first");
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) r[0]) == 1);
	finish_task("bf", r[0], "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, r[2], "a") == 1);
	cr_assert_eq(readies(&ready_cap, r[3], "a"), 0);
	cr_assert(run_state_is(r[3], "QUEUED"), "no backfill run discarded");
}

/* A run of more instances than the runtime buffers for one destination
 * (65,536): every one is released, exactly once. */
Test(dependency_detector, a_run_of_70000_instances_releases_them_all)
{
	enum { TASKS = 70, SHARDS = 1000 };
	char  *yaml = malloc(64 + TASKS * 64);
	size_t len  = (size_t) sprintf(yaml, "kind: DAG\nname: big\ntasks:\n");
	for (int t = 0; t < TASKS; t++)
		len += (size_t) sprintf(yaml + len,
		                        "  - {name: t%d, command: 'true', "
		                        "shards: %d}\n",
		                        t, SHARDS);
	int64_t dag = store_dag(yaml);
	free(yaml);
	int64_t run = make_run(dag, 1000);
	start_system();
	send_due("big", run);
	for (int w = 0; w < 6000 && nready(&ready_cap) < TASKS * SHARDS; w++)
		ax_clock_sleep_us(10000);
	ax_clock_sleep_us(200000); /* nothing more may come */
	int64_t want = 0;
	for (int t = 0; t < TASKS; t++)
		for (int j = 0; j < SHARDS; j++)
			want += (int64_t) t * 1024 + j;
	pthread_mutex_lock(&ready_cap.mu);
	size_t  got = ready_cap.nready;
	int64_t sum = ready_cap.ready_sum;
	pthread_mutex_unlock(&ready_cap.mu);
	cr_assert_eq(got, (size_t) TASKS * SHARDS, "%zu of %d released", got,
	             TASKS * SHARDS);
	cr_assert_eq(sum, want, "some instance released twice, another never");
}

Test(dependency_detector, restart_rebuilds_counters)
{
	int64_t dag    = store_dag(diamond);
	int64_t run    = make_run(dag, 5000);
	int64_t queued = make_run(dag, 5001); /* never planned */
	start_system();
	send_due("dia", run);
	WAIT_FOR(readies(&ready_cap, run, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) run) == 4);
	finish_task("dia", run, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "b") == 1);
	/* b is running when axd stops */
	int64_t b = iid_of(run, "b");
	q_exec("UPDATE task_instances SET state = 'READY' WHERE id = %lld",
	       (long long) b);
	q_exec("UPDATE task_instances SET state = 'RUNNING' WHERE id = %lld",
	       (long long) b);
	stop_system();
	cap_clear(&ready_cap);

	start_system();
	/* c (PENDING, upstream met) is re-sent; a (SUCCESS), b (RUNNING)
	 * and d (b, c unmet) are not; the never-planned run waits for the
	 * active one (max_active_runs 1) */
	WAIT_FOR(readies(&ready_cap, run, "c") == 1);
	ax_clock_sleep_us(300000);
	cr_assert_eq(readies(&ready_cap, run, "a"), 0);
	cr_assert_eq(readies(&ready_cap, run, "b"), 0);
	cr_assert_eq(readies(&ready_cap, run, "d"), 0);
	cr_assert_eq(readies(&ready_cap, queued, "a"), 0);
	cr_assert_eq(q_int("SELECT count(*) FROM dag_runs WHERE id = %lld "
	                   "AND reason = 'CONCURRENCY_BLOCKED'",
	                   (long long) queued),
	             1);

	/* b finishes (its row is RUNNING: report only) */
	q_exec("UPDATE task_instances SET state = 'SUCCESS' WHERE id = %lld",
	       (long long) b);
	{
		Ax__Command           cmd = AX__COMMAND__INIT;
		Ax__InstanceRef       ref = AX__INSTANCE_REF__INIT;
		Ax__InstanceSucceeded s   = AX__INSTANCE_SUCCEEDED__INIT;
		ref.dag                   = "dia";
		ref.dag_run_id            = run;
		ref.task                  = "b";
		ref.instance_id           = b;
		s.instance                = &ref;
		cmd.body_case          = AX__COMMAND__BODY_INSTANCE_SUCCEEDED;
		cmd.instance_succeeded = &s;
		client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
	}
	ax_clock_sleep_us(200000);
	cr_assert_eq(readies(&ready_cap, run, "d"), 0);
	finish_task("dia", run, "c", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "d") == 1);
	finish_task("dia", run, "d", "SUCCESS");
	WAIT_FOR(run_state_is(run, "SUCCESS"));
	/* the held run starts when the active one finished */
	WAIT_FOR(readies(&ready_cap, queued, "a") == 1);
	cr_assert_eq(readies(&ready_cap, run, "d"), 1, "d released once");
}

/* A preempted instance waiting for its recovery (PENDING, reason
 * PREEMPTED) is the result handler's to let back after a restart (its
 * throttle, at the instant stored at the preemption): the rebuild does
 * not send it, while the plain PENDING one beside it is sent again. */
Test(dependency_detector, restart_leaves_a_preempted_instance_to_recovery)
{
	int64_t dag = store_dag(diamond);
	int64_t run = make_run(dag, 5000);
	start_system();
	send_due("dia", run);
	WAIT_FOR(readies(&ready_cap, run, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) run) == 4);
	finish_task("dia", run, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, run, "b") == 1);
	WAIT_FOR(readies(&ready_cap, run, "c") == 1);
	q_exec("UPDATE task_instances SET reason = 'PREEMPTED' WHERE id = "
	       "%lld",
	       (long long) iid_of(run, "b"));
	stop_system();
	cap_clear(&ready_cap);

	start_system();
	WAIT_FOR(readies(&ready_cap, run, "c") == 1);
	ax_clock_sleep_us(300000);
	cr_assert_eq(readies(&ready_cap, run, "b"), 0,
	             "the preempted instance was sent ready by the rebuild");
	cr_assert_eq(readies(&ready_cap, run, "a"), 0);
}

/* --- deadlines ------------------------------------------------------------
 */

/* A run of dag_id at logical second sec whose interval ends end_s seconds
 * from now (negative: in the past). */
static int64_t
make_run_ending(int64_t dag_id, int64_t sec, int64_t end_s)
{
	return q_int("INSERT INTO dag_runs (dag_id, dag_version_id, "
	             "run_type, logical_date, interval_start, interval_end, "
	             "due_at) SELECT id, active_version_id, 'scheduled', "
	             "ax_ts(%lld), now() + interval '%lld seconds' - "
	             "interval '1 hour', now() + interval '%lld seconds', "
	             "now() FROM dags WHERE id = %lld RETURNING id",
	             (long long) sec * 1000000, (long long) end_s,
	             (long long) end_s, (long long) dag_id);
}

/* event_log rows of type for run (task: payload.task, NULL: none). */
static int64_t
misses(int64_t run, const char *type, const char *task)
{
	return q_int("SELECT count(*) FROM event_log WHERE dag_run_id = %lld "
	             "AND type = '%s' AND reason = 'DEADLINE_MISSED' AND "
	             "coalesce(payload->>'task', '') = '%s'",
	             (long long) run, type, task ? task : "");
}

static const char *deadline_dag =
    "kind: DAG\nname: dl\nowner: ops\nimpact: P1\n"
    "deadline: {after: 1m}\n"
    "concurrency: {max_active_runs: 5, policy: parallel}\n"
    "tasks:\n"
    "  - {name: a, command: echo a, deadline: {after: 1m}}\n"
    "  - {name: b, command: echo b, depends_on: [a]}\n";

/*
 * A run still waiting at its deadline yields one run.deadline_missed (and
 * one instance.deadline_missed for its task's own deadline); a run that
 * succeeded in time yields none; after a restart the timers are armed
 * again from PostgreSQL: the recorded miss is not written twice, and a
 * deadline that passed while axd was down fires at start, once.
 */
Test(dependency_detector, deadline_missed_once_across_a_restart)
{
	int64_t dag = store_dag(deadline_dag);
	/* deadlines: interval end + 1m, i.e. 5 s and 9 s from now */
	int64_t ok   = make_run_ending(dag, 7000, -55);
	int64_t late = make_run_ending(dag, 7001, -55);
	int64_t down = make_run_ending(dag, 7002, -51);
	int64_t down_at =
	    q_int("SELECT ax_us(interval_end) + 60000000 FROM dag_runs "
	          "WHERE id = %lld",
	          (long long) down);
	start_system();
	send_due("dl", ok);
	send_due("dl", late);
	send_due("dl", down);
	WAIT_FOR(readies(&ready_cap, ok, "a") == 1);
	WAIT_FOR(q_int("SELECT count(*) FROM task_instances WHERE "
	               "dag_run_id = %lld",
	               (long long) ok) == 2);
	finish_task("dl", ok, "a", "SUCCESS");
	WAIT_FOR(readies(&ready_cap, ok, "b") == 1);
	finish_task("dl", ok, "b", "SUCCESS");
	WAIT_FOR(run_state_is(ok, "SUCCESS"));

	/* late is still waiting at its deadline */
	WAIT_FOR(misses(late, "run.deadline_missed", NULL) == 1);
	WAIT_FOR(misses(late, "instance.deadline_missed", "a") == 1);
	cr_assert_eq(misses(ok, "run.deadline_missed", NULL), 0);
	cr_assert_eq(misses(ok, "instance.deadline_missed", "a"), 0);
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE dag_run_id "
	                   "= %lld AND type = 'run.deadline_missed' AND "
	                   "payload->>'state' = 'RUNNING' AND "
	                   "payload->>'deadline' = '1m after the interval' "
	                   "AND payload->>'impact' = 'P1' AND "
	                   "payload->>'owner' = 'ops' AND "
	                   "(payload->>'deadline_at_us')::bigint = "
	                   "(SELECT ax_us(interval_end) + 60000000 FROM "
	                   "dag_runs WHERE id = %lld)",
	                   (long long) late, (long long) late),
	             1, "payload");
	cr_assert_eq(q_int("SELECT count(*) FROM event_log WHERE dag_run_id "
	                   "= %lld AND type = 'instance.deadline_missed' AND "
	                   "payload->>'state' = 'PENDING'",
	                   (long long) late),
	             1, "task payload");

	/* axd stops before down's deadline and starts after it */
	stop_system();
	cr_assert_eq(misses(down, "run.deadline_missed", NULL), 0);
	WAIT_FOR(ax_clock_utc_us() > down_at + 200000);
	start_system();
	WAIT_FOR(misses(down, "run.deadline_missed", NULL) == 1);
	WAIT_FOR(misses(down, "instance.deadline_missed", "a") == 1);
	/* late's timers fired again first (earlier deadlines): no copy */
	ax_clock_sleep_us(300000);
	cr_assert_eq(misses(late, "run.deadline_missed", NULL), 1);
	cr_assert_eq(misses(late, "instance.deadline_missed", "a"), 1);
	cr_assert_eq(misses(down, "run.deadline_missed", NULL), 1);
	cr_assert_eq(misses(ok, "run.deadline_missed", NULL), 0);

	/* a backfill run re-does an old period: its deadline, long past,
	 * is not armed */
	int64_t       bf  = make_run_ending(dag, 7003, -7200);
	Ax__Command   cmd = AX__COMMAND__INIT;
	Ax__ControlOp c   = AX__CONTROL_OP__INIT;
	q_exec("UPDATE dag_runs SET run_type = 'backfill' WHERE id = %lld",
	       (long long) bf);
	c.op          = "backfill";
	c.mode        = "parallel";
	c.run_ids     = &bf;
	c.n_run_ids   = 1;
	cmd.body_case = AX__COMMAND__BODY_CONTROL;
	cmd.control   = &c;
	client_send(AX_A_DEPENDENCY_DETECTOR, &cmd);
	WAIT_FOR(readies(&ready_cap, bf, "a") == 1);
	ax_clock_sleep_us(500000);
	cr_assert_eq(misses(bf, "run.deadline_missed", NULL), 0);
	cr_assert_eq(misses(bf, "instance.deadline_missed", "a"), 0);
}
