/*
 * test_queue.c - the queue service (actors/queue/) with real
 * ax-worker processes (path in $AX_WORKER, fork+exec'd).
 *
 * The queue actor runs in this process with two capture actors named
 * result_handler and resource_detector; a client named instance_generator
 * sends
 * AttemptRendered and CancelInstance. Workers talk to the queue over an
 * ipc:// socket in a temp directory. The reconciliation tests give the
 * queue a throwaway PostgreSQL holding what a previous axd left (attempts
 * DISPATCHED or RUNNING on a worker, the workers' leases), and play the
 * workers themselves over the same socket (protocol peers, so what each
 * one reports is exact), as after a kill -9 of axd.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "actor.h"
#include "clock.h"
#include "config.h"
#include "pg_harness.h"
#include "pipeline.h"
#include "queue_service.h"
#include "store_fixture.h"
#include "worker.pb-c.h"

#define MAXREC  65536
#define MAXWORK 8

typedef struct rec {
	char    run_id[40];
	int     status;
	char    worker[64];
	char    reason[40];
	char    error[200];
	int64_t dispatched, started, ended;
	int64_t seen_mono;
} rec;

typedef struct cap {
	pthread_mutex_t mu;
	rec            *r;
	size_t          n;
	int             capacity_msgs;
	int32_t         last_total, last_free, last_p0;
	int64_t         last_cpu, last_mem, last_gpu, last_ssd;
} cap;

static cap              C;
static ax_actor_system *sys;
static ax_queue        *Q;
static ax_config       *cfg;
static ax_pipeline_ctx  pctx;
static ax_actor_client *pre;
static char             dir[256], addr[300];
static pid_t            wpid[MAXWORK];
static char             wname[MAXWORK][32];

/* The stand-in result_handler confirms what it received as committed, as the
 * result handler does in axd (0: it holds confirmations back). */
static _Atomic int confirm_on = 1;
/* Lease of the queue and heartbeat of the workers (tests that need the
 * worker's heartbeat out of the way raise both). */
static const char *q_lease = "1s", *w_heartbeat = "200ms",
                  *q_ack_timeout = "500ms", *q_dsn = "";
/* queue.dispatch_ahead and queue.prefetch_wait (NULL: the defaults) */
static const char *q_dispatch_ahead, *q_prefetch_wait;
/* worker.reserve_p0 of the workers started next */
static const char *w_reserve_p0 = "0";
/* worker.cpu_milli of the workers started next ("0": the machine's) */
static const char *w_cpu_milli = "0";
/* worker.resources of the workers started next ("": none) */
static const char *w_resources = "";

static ax_err
cap_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	uint64_t seq = 0;

	for (size_t i = 0; i < n; i++) {
		Ax__Command *cmd = ax_pipeline_unpack(self, &items[i]);
		if (cmd == NULL)
			continue;
		pthread_mutex_lock(&C.mu);
		if (cmd->body_case == AX__COMMAND__BODY_RESULT &&
		    C.n < MAXREC) {
			Ax__AttemptResult *r = cmd->result;
			rec               *x = &C.r[C.n++];
			snprintf(x->run_id, sizeof(x->run_id), "%s",
			         r->run_id);
			x->status = r->status;
			snprintf(x->worker, sizeof(x->worker), "%s",
			         r->worker_id);
			snprintf(x->reason, sizeof(x->reason), "%s",
			         r->reason);
			snprintf(x->error, sizeof(x->error), "%s", r->error);
			x->dispatched = r->dispatched_at_us;
			x->started    = r->started_at_us;
			x->ended      = r->ended_at_us;
			x->seen_mono  = ax_clock_mono_us();
			if (r->queue_seq > seq)
				seq = r->queue_seq;
		} else if (cmd->body_case ==
		           AX__COMMAND__BODY_WORKER_CAPACITY) {
			C.capacity_msgs++;
			C.last_total = cmd->worker_capacity->slots_total;
			C.last_free  = cmd->worker_capacity->slots_free;
			C.last_p0    = cmd->worker_capacity->reserved_p0;
			C.last_cpu   = cmd->worker_capacity->cpu_milli;
			C.last_mem   = cmd->worker_capacity->memory_bytes;
			C.last_gpu = C.last_ssd = 0;
			for (size_t k = 0;
			     k < cmd->worker_capacity->n_resources; k++) {
				Ax__WorkerCapacity__ResourcesEntry *e =
				    cmd->worker_capacity->resources[k];
				if (strcmp(e->key, "gpu") == 0)
					C.last_gpu = e->value;
				if (strcmp(e->key, "ssd") == 0)
					C.last_ssd = e->value;
			}
		}
		pthread_mutex_unlock(&C.mu);
		ax__command__free_unpacked(cmd, NULL);
	}
	if (seq > 0 && confirm_on) {
		Ax__Command          c  = AX__COMMAND__INIT;
		Ax__ResultsCommitted rc = AX__RESULTS_COMMITTED__INIT;
		rc.up_to_seq            = seq;
		c.body_case             = AX__COMMAND__BODY_RESULTS_COMMITTED;
		c.results_committed     = &rc;
		ax_pipeline_send(self, AX_A_QUEUE, &c);
	}
	return AX_OK;
}

static const ax_actor_ops cap_ops = { .handle = cap_handle };

static void
start_queue(const char *aging, const char *hand_back)
{
	ax_actor_config a = { 0 };
	pthread_mutex_init(&C.mu, NULL);
	C.r = calloc(MAXREC, sizeof(rec));
	snprintf(dir, sizeof(dir), "/tmp/ax-test-queue-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(addr, sizeof(addr), "ipc://%s/q.ipc", dir);
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "queue.address", addr), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "worker.lease", q_lease), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "worker.heartbeat", w_heartbeat),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "queue.ack_timeout", q_ack_timeout),
	             AX_OK);
	if (q_dispatch_ahead != NULL)
		cr_assert_eq(ax_config_set(cfg, "queue.dispatch_ahead",
		                           q_dispatch_ahead),
		             AX_OK);
	if (q_prefetch_wait != NULL)
		cr_assert_eq(
		    ax_config_set(cfg, "queue.prefetch_wait", q_prefetch_wait),
		    AX_OK);
	cr_assert_eq(ax_config_set(cfg, "scheduler.aging_interval", aging),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "queue.drain_hand_back", hand_back),
	             AX_OK);
	pctx.cfg = cfg;
	pctx.dsn = q_dsn;
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	a.name          = AX_A_RESULT_HANDLER;
	a.send_nonblock = 1; /* confirmations go upstream, to the queue */
	cr_assert_eq(ax_actor_system_add(sys, &a, &cap_ops, NULL, NULL),
	             AX_OK);
	a.send_nonblock = 0;
	a.name          = AX_A_RESOURCE_DETECTOR;
	cr_assert_eq(ax_actor_system_add(sys, &a, &cap_ops, NULL, NULL),
	             AX_OK);
	cr_assert_eq(ax_queue_add(sys, &pctx, &Q), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_actor_system_start(sys), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_actor_client_new(sys, AX_A_INSTANCE_GENERATOR, &pre),
	             AX_OK);
}

static void
stop_all(void)
{
	for (int i = 0; i < MAXWORK; i++)
		if (wpid[i] > 0) {
			kill(wpid[i], SIGKILL);
			waitpid(wpid[i], NULL, 0);
			wpid[i] = 0;
		}
	ax_actor_client_free(pre);
	ax_actor_system_free(sys);
	ax_config_free(cfg);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		(void) 0;
	free(C.r);
}

/* Starts ax-worker slot i as id with group and slots. */
static void
worker_start(int i, const char *id, const char *group, int slots)
{
	const char *bin = getenv("AX_WORKER");
	char        s[16], logs[300], out[300];
	pid_t       p;

	cr_assert_not_null(bin, "AX_WORKER is not set");
	snprintf(s, sizeof(s), "%d", slots);
	snprintf(logs, sizeof(logs), "%s/logs", dir);
	snprintf(out, sizeof(out), "%s/%s.out", dir, id);
	snprintf(wname[i], sizeof(wname[i]), "%s", id);
	p = fork();
	cr_assert(p >= 0);
	if (p == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("AX_WORKER_HEARTBEAT", w_heartbeat, 1);
		setenv("AX_WORKER_RESERVE_P0", w_reserve_p0, 1);
		setenv("AX_WORKER_CPU_MILLI", w_cpu_milli, 1);
		setenv("AX_WORKER_RESOURCES", w_resources, 1);
		setenv("AX_LOG_LEVEL", "info", 1);
		/* the tasks write marks into this test's private dir */
		setenv("AX_WORKER_RUN_AS", "root", 1);
		execl(bin, bin, "--server", addr, "--group", group, "--slots",
		      s, "--id", id, "--log-dir", logs, (char *) NULL);
		_exit(127);
	}
	wpid[i] = p;
}

/* Waits until the queue counts n live workers. */
static void
wait_workers(uint64_t n)
{
	ax_queue_stats st;
	int64_t        end = ax_clock_mono_us() + 10 * AX_USEC_PER_SEC;
	do {
		ax_queue_stats_get(Q, &st);
		if (st.workers == n)
			return;
		ax_clock_sleep_us(10000);
	} while (ax_clock_mono_us() < end);
	cr_assert_fail("%zu workers expected, %zu live", (size_t) n,
	               (size_t) st.workers);
}

typedef struct att {
	const char *run_id, *type, *command, *channel, *group, *routing, *key,
	    *pinned;
	int     priority;
	int64_t instance_id;
	int64_t due_in_us; /* due_at = now + due_in_us */
	int64_t due_at_us; /* or this instant (UTC us) when not 0 */
	int32_t cpu_milli; /* declared (the task's resources.cpu) */
} att;

static void
send_attempt(const att *t)
{
	Ax__Command         cmd = AX__COMMAND__INIT;
	Ax__AttemptRendered ar  = AX__ATTEMPT_RENDERED__INIT;
	Ax__InstanceRef     ir  = AX__INSTANCE_REF__INIT;
	uint8_t             buf[4096];
	ax_actor_item       it;

	cmd.body_case        = AX__COMMAND__BODY_ATTEMPT_RENDERED;
	cmd.attempt_rendered = &ar;
	cmd.trace_id         = "0123456789abcdef0123456789abcdef";
	ar.instance          = &ir;
	ir.dag               = "d";
	ir.task              = "t";
	ir.instance_id       = t->instance_id;
	ar.run_id            = (char *) t->run_id;
	ar.attempt           = 1;
	ar.task_type         = (char *) (t->type ? t->type : "noop");
	ar.command           = (char *) (t->command ? t->command : "");
	ar.channel           = (char *) (t->channel ? t->channel : "Px");
	ar.worker_group      = (char *) (t->group ? t->group : "g");
	ar.routing           = (char *) (t->routing ? t->routing : "");
	ar.routing_key       = (char *) (t->key ? t->key : "");
	ar.pinned_worker     = (char *) (t->pinned ? t->pinned : "");
	ar.priority          = t->priority;
	ar.cpu_milli         = t->cpu_milli;
	ar.due_at_us         = t->due_at_us != 0 ? t->due_at_us
	                                         : ax_clock_utc_us() + t->due_in_us;
	it.type              = AX_ITEM_COMMAND;
	it.len               = (uint32_t) ax__command__pack(&cmd, buf);
	it.data              = buf;
	cr_assert_eq(ax_actor_client_send(pre, AX_A_QUEUE, &it, 1, 0), AX_OK);
}

static void
send_cancel(const char *run_id)
{
	Ax__Command        cmd = AX__COMMAND__INIT;
	Ax__CancelInstance ci  = AX__CANCEL_INSTANCE__INIT;
	uint8_t            buf[512];
	ax_actor_item      it;
	cmd.body_case       = AX__COMMAND__BODY_CANCEL_INSTANCE;
	cmd.cancel_instance = &ci;
	ci.run_id           = (char *) run_id;
	ci.reason           = "MANUAL_CLEAR";
	it.type             = AX_ITEM_COMMAND;
	it.len              = (uint32_t) ax__command__pack(&cmd, buf);
	it.data             = buf;
	cr_assert_eq(ax_actor_client_send(pre, AX_A_QUEUE, &it, 1, 0), AX_OK);
}

/* Waits for a record (run_id, status); copies it to out. */
static int
wait_rec(const char *run_id, int status, int64_t timeout_ms, rec *out)
{
	int64_t end = ax_clock_mono_us() + timeout_ms * 1000;
	do {
		pthread_mutex_lock(&C.mu);
		for (size_t i = 0; i < C.n; i++)
			if (strcmp(C.r[i].run_id, run_id) == 0 &&
			    C.r[i].status == status) {
				if (out)
					*out = C.r[i];
				pthread_mutex_unlock(&C.mu);
				return 1;
			}
		pthread_mutex_unlock(&C.mu);
		ax_clock_sleep_us(2000);
	} while (ax_clock_mono_us() < end);
	return 0;
}

static size_t
count_rec(const char *run_id, int status)
{
	size_t k = 0;
	pthread_mutex_lock(&C.mu);
	for (size_t i = 0; i < C.n; i++)
		k += strcmp(C.r[i].run_id, run_id) == 0 &&
		    C.r[i].status == status;
	pthread_mutex_unlock(&C.mu);
	return k;
}

/* Index of run_id's STARTED among all STARTED records, or -1. */
static int
start_index(const char *run_id)
{
	int k = 0, found = -1;
	pthread_mutex_lock(&C.mu);
	for (size_t i = 0; i < C.n && found < 0; i++) {
		if (C.r[i].status != AX__ATTEMPT_STATUS__ATTEMPT_STARTED)
			continue;
		if (strcmp(C.r[i].run_id, run_id) == 0)
			found = k;
		k++;
	}
	pthread_mutex_unlock(&C.mu);
	return found;
}

#define SUCCESS AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS
#define STARTED AX__ATTEMPT_STATUS__ATTEMPT_STARTED
#define FAILED  AX__ATTEMPT_STATUS__ATTEMPT_FAILED
#define CANCEL  AX__ATTEMPT_STATUS__ATTEMPT_CANCELED
#define UNKNOWN AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN

TestSuite(queue, .timeout = 120);

Test(queue, bash_attempt_reports_started_and_success_with_timings)
{
	rec  s, r;
	char path[400], line[64] = { 0 };
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 2);
	wait_workers(1);
	send_attempt(&(att) { .run_id  = "r-bash",
	                      .type    = "bash",
	                      .command = "echo hello-$AX_RUN_ID" });
	cr_assert(wait_rec("r-bash", STARTED, 5000, &s));
	cr_assert(wait_rec("r-bash", SUCCESS, 5000, &r));
	cr_assert_str_eq(s.worker, "w1");
	cr_assert_gt(s.dispatched, 0);
	cr_assert_geq(s.started, s.dispatched);
	cr_assert_geq(r.ended, r.started);
	cr_assert_gt(r.started, 0);
	snprintf(path, sizeof(path), "%s/logs/d/t/r-bash.log", dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "log %s", path);
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_str_eq(line, "hello-r-bash\n");
	/* capacity of group g reached resource_detector */
	pthread_mutex_lock(&C.mu);
	cr_assert_gt(C.capacity_msgs, 0);
	cr_assert_eq(C.last_total, 2);
	cr_assert_eq(C.last_p0, 0);
	/* by default a worker offers the machine's CPUs and memory */
	cr_assert_eq(C.last_cpu, sysconf(_SC_NPROCESSORS_ONLN) * 1000);
	cr_assert_gt(C.last_mem, 0);
	pthread_mutex_unlock(&C.mu);
	/* an unknown task type fails with a clear error, a failing command
	 * reports its exit code */
	send_attempt(&(att) { .run_id = "r-sql", .type = "sql" });
	cr_assert(wait_rec("r-sql", FAILED, 5000, &r));
	cr_assert(strstr(r.error, "unknown task type 'sql'") != NULL, "%s",
	          r.error);
	send_attempt(&(att) { .run_id = "r-bad-channel", .channel = "P9" });
	cr_assert(wait_rec("r-bad-channel", FAILED, 5000, &r));
	cr_assert(strstr(r.error, "unknown channel 'P9'") != NULL);
	stop_all();
}

/* Waits up to 10 s for the last capacity report to say total slots of
 * which p0 are kept for P0. */
static int
wait_capacity(int32_t total, int32_t p0)
{
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&C.mu);
		int ok = C.last_total == total && C.last_p0 == p0;
		pthread_mutex_unlock(&C.mu);
		if (ok)
			return 1;
		ax_clock_sleep_us(10000);
	}
	return 0;
}

/*
 * A worker's P0 reserve (worker.reserve_p0), the cpu (worker.cpu_milli)
 * and the named resources (worker.resources) it offers travel in its
 * Register and reach the resource detector summed over the group's
 * workers; one that leaves takes its reserve and resources with it.
 */
Test(queue, p0_reserve_and_cpu_of_the_workers_reach_the_resource_detector)
{
	start_queue("30s", "false");
	w_reserve_p0 = "1";
	w_cpu_milli  = "1500";
	w_resources  = "gpu=2";
	worker_start(0, "w1", "g", 2);
	w_reserve_p0 = "2";
	w_cpu_milli  = "500";
	w_resources  = "gpu=1, ssd=4";
	worker_start(1, "w2", "g", 3);
	w_reserve_p0 = "0";
	w_cpu_milli  = "0";
	w_resources  = "";
	wait_workers(2);
	cr_assert(wait_capacity(5, 3),
	          "group g: %d slots, %d for P0; "
	          "want 5 and 3",
	          (int) C.last_total, (int) C.last_p0);
	pthread_mutex_lock(&C.mu);
	cr_assert_eq(C.last_cpu, 2000, "the cpu the workers offer, summed");
	cr_assert_eq(C.last_gpu, 3, "the gpus the workers offer, summed");
	cr_assert_eq(C.last_ssd, 4);
	pthread_mutex_unlock(&C.mu);
	kill(wpid[1], SIGKILL);
	waitpid(wpid[1], NULL, 0);
	wpid[1] = 0;
	cr_assert(wait_capacity(2, 1),
	          "after w2 died: %d slots, %d for P0; "
	          "want 2 and 1",
	          (int) C.last_total, (int) C.last_p0);
	pthread_mutex_lock(&C.mu);
	cr_assert_eq(C.last_gpu, 2, "w2's gpu is still offered");
	cr_assert_eq(C.last_ssd, 0, "w2's ssd is still offered");
	pthread_mutex_unlock(&C.mu);
	stop_all();
}

/*
 * Placement by resources inside a group: an attempt that declares 2
 * cores goes to the worker offering 4, never to the one offering 1; the
 * small one behind it is not held up by it (the worker of 1 core takes
 * it), and two 2-core attempts do not share the 1-core worker even
 * when it has free slots.
 */
Test(queue, attempts_go_to_a_worker_with_room_for_their_cpu)
{
	rec r;

	start_queue("30s", "false");
	w_cpu_milli = "1000";
	worker_start(0, "small", "g", 4);
	w_cpu_milli = "4000";
	worker_start(1, "big", "g", 4);
	w_cpu_milli = "0";
	wait_workers(2);
	/* keep each worker busy with one 1-core attempt first, so that
	 * neither is idle (an idle worker takes anything) */
	send_attempt(&(att) { .run_id    = "hold-s",
	                      .type      = "bash",
	                      .command   = "sleep 3",
	                      .routing   = "pinned",
	                      .pinned    = "small",
	                      .cpu_milli = 1000 });
	send_attempt(&(att) { .run_id    = "hold-b",
	                      .type      = "bash",
	                      .command   = "sleep 3",
	                      .routing   = "pinned",
	                      .pinned    = "big",
	                      .cpu_milli = 1000 });
	cr_assert(wait_rec("hold-s", STARTED, 5000, NULL));
	cr_assert(wait_rec("hold-b", STARTED, 5000, NULL));
	send_attempt(&(att) { .run_id    = "two-1",
	                      .type      = "bash",
	                      .command   = "sleep 0.3",
	                      .cpu_milli = 2000 });
	send_attempt(&(att) { .run_id = "tiny", .type = "noop" });
	send_attempt(&(att) { .run_id    = "two-2",
	                      .type      = "bash",
	                      .command   = "sleep 0.3",
	                      .cpu_milli = 2000 });
	cr_assert(wait_rec("two-1", SUCCESS, 10000, &r));
	cr_assert_str_eq(r.worker, "big", "a 2-core attempt ran on %s",
	                 r.worker);
	cr_assert(wait_rec("two-2", SUCCESS, 10000, &r));
	cr_assert_str_eq(r.worker, "big", "a 2-core attempt ran on %s",
	                 r.worker);
	/* the 3-core room of "big" holds one of them at a time beside its
	 * 1-core hold: they did not run at once */
	rec a, b;
	cr_assert(wait_rec("two-1", SUCCESS, 100, &a));
	cr_assert(wait_rec("two-2", SUCCESS, 100, &b));
	cr_assert(a.ended <= b.started || b.ended <= a.started,
	          "two 2-core attempts ran at once beside a 1-core one on "
	          "a 4-core worker");
	cr_assert(wait_rec("tiny", SUCCESS, 10000, NULL));
	stop_all();
}

Test(queue, priority_order_and_p0_first)
{
	char id[32];
	start_queue("1h", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	/* occupy the only slot, then queue behind it */
	send_attempt(&(att) {
	    .run_id = "busy", .type = "bash", .command = "sleep 0.5" });
	cr_assert(wait_rec("busy", STARTED, 5000, NULL));
	send_attempt(&(att) { .run_id = "p1", .priority = 1 });
	send_attempt(&(att) { .run_id = "p5", .priority = 5 });
	send_attempt(&(att) { .run_id = "p3", .priority = 3 });
	send_attempt(
	    &(att) { .run_id = "p0ch", .priority = -10, .channel = "P0" });
	for (int i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "%s",
		         (const char *[]) { "p0ch", "p5", "p3", "p1" }[i]);
		cr_assert(wait_rec(id, SUCCESS, 5000, NULL), "%s", id);
	}
	cr_assert_eq(start_index("p0ch"), 1);
	cr_assert_eq(start_index("p5"), 2);
	cr_assert_eq(start_index("p3"), 3);
	cr_assert_eq(start_index("p1"), 4);
	stop_all();
}

Test(queue, aging_serves_low_priority_under_steady_high_priority_load)
{
	char id[32];
	int  low;
	start_queue("100ms", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	send_attempt(&(att) { .run_id   = "h-0",
	                      .type     = "bash",
	                      .command  = "sleep 0.05",
	                      .priority = 3 });
	send_attempt(&(att) { .run_id = "low", .priority = 0 });
	/* high-priority work arrives faster than it is served (1 slot,
	 * 50 ms each, one every 20 ms) */
	for (int i = 1; i <= 80; i++) {
		snprintf(id, sizeof(id), "h-%d", i);
		send_attempt(&(att) { .run_id   = id,
		                      .type     = "bash",
		                      .command  = "sleep 0.05",
		                      .priority = 3 });
		ax_clock_sleep_us(20000);
	}
	cr_assert(wait_rec("low", SUCCESS, 10000, NULL));
	low = start_index("low");
	/* without aging it would come after all 81; with a 100 ms interval
	 * it overtakes high work queued more than 300 ms after it */
	cr_assert_lt(low, 30, "low started at position %d", low);
	cr_assert_gt(low, 0);
	stop_all();
}

Test(queue, channels_and_groups_keep_attempts_apart)
{
	rec r;
	start_queue("30s", "false");
	worker_start(0, "wa", "ga", 2);
	worker_start(1, "wb", "gb", 2);
	wait_workers(2);
	for (int i = 0; i < 6; i++) {
		char id[32];
		snprintf(id, sizeof(id), "a-%d", i);
		send_attempt(&(att) { .run_id  = id,
		                      .group   = "ga",
		                      .channel = i % 2 ? "biz:x" : "k8s" });
		snprintf(id, sizeof(id), "b-%d", i);
		send_attempt(&(att) { .run_id = id, .group = "gb" });
	}
	for (int i = 0; i < 6; i++) {
		char id[32];
		snprintf(id, sizeof(id), "a-%d", i);
		cr_assert(wait_rec(id, SUCCESS, 5000, &r));
		cr_assert_str_eq(r.worker, "wa");
		snprintf(id, sizeof(id), "b-%d", i);
		cr_assert(wait_rec(id, SUCCESS, 5000, &r));
		cr_assert_str_eq(r.worker, "wb");
	}
	/* a group nobody serves keeps its work queued */
	send_attempt(&(att) { .run_id = "nobody", .group = "gz" });
	cr_assert_not(wait_rec("nobody", STARTED, 500, NULL));
	stop_all();
}

Test(queue, routing_strategies)
{
	rec  r;
	char id[32], first[3][64] = { { 0 } };
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 4);
	worker_start(1, "w2", "g", 4);
	worker_start(2, "w3", "g", 4);
	wait_workers(3);
	ax_clock_sleep_us(300000); /* every worker waits with a Pull */

	/* round_robin: one at a time, while all wait: w1 w2 w3 w1 ... */
	char seq[6][64];
	for (int i = 0; i < 6; i++) {
		snprintf(id, sizeof(id), "rr-%d", i);
		send_attempt(
		    &(att) { .run_id = id, .routing = "round_robin" });
		cr_assert(wait_rec(id, SUCCESS, 5000, &r));
		snprintf(seq[i], sizeof(seq[i]), "%s", r.worker);
		ax_clock_sleep_us(100000);
	}
	for (int i = 0; i < 3; i++) {
		cr_assert_str_eq(seq[i], seq[i + 3]);
		cr_assert_str_neq(seq[i], seq[(i + 1) % 3]);
	}

	/* consistent_hash: the same key, the same worker */
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < 4; i++) {
			char key[16];
			snprintf(id, sizeof(id), "ch-%d-%d", k, i);
			snprintf(key, sizeof(key), "key-%d", k);
			send_attempt(&(att) { .run_id  = id,
			                      .routing = "consistent_hash",
			                      .key     = key });
			cr_assert(wait_rec(id, SUCCESS, 5000, &r));
			if (i == 0)
				snprintf(first[k], sizeof(first[k]), "%s",
				         r.worker);
			cr_assert_str_eq(r.worker, first[k], "key %d", k);
		}

	/* pinned: to w2; to an absent worker it waits until it comes */
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "pin-%d", i);
		send_attempt(&(att) {
		    .run_id = id, .routing = "pinned", .pinned = "w2" });
		cr_assert(wait_rec(id, SUCCESS, 5000, &r));
		cr_assert_str_eq(r.worker, "w2");
	}
	send_attempt(&(att) {
	    .run_id = "pin-late", .routing = "pinned", .pinned = "w9" });
	cr_assert_not(wait_rec("pin-late", STARTED, 500, NULL));
	worker_start(3, "w9", "g", 1);
	cr_assert(wait_rec("pin-late", SUCCESS, 5000, &r));
	cr_assert_str_eq(r.worker, "w9");
	wait_workers(4);
	ax_clock_sleep_us(300000);

	/* least_load: w1 busy with 3 of its 4 slots -> not w1 */
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "busy-%d", i);
		send_attempt(&(att) { .run_id  = id,
		                      .type    = "bash",
		                      .command = "sleep 3",
		                      .routing = "pinned",
		                      .pinned  = "w1" });
		cr_assert(wait_rec(id, STARTED, 5000, NULL));
	}
	ax_clock_sleep_us(300000);
	for (int i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "ll-%d", i);
		send_attempt(&(att) { .run_id = id, .routing = "least_load" });
		cr_assert(wait_rec(id, SUCCESS, 5000, &r));
		cr_assert_str_neq(r.worker, "w1");
		ax_clock_sleep_us(50000);
	}

	/* random: every attempt runs */
	for (int i = 0; i < 10; i++) {
		snprintf(id, sizeof(id), "rnd-%d", i);
		send_attempt(&(att) { .run_id = id, .routing = "random" });
	}
	for (int i = 0; i < 10; i++) {
		snprintf(id, sizeof(id), "rnd-%d", i);
		cr_assert(wait_rec(id, SUCCESS, 5000, NULL));
	}
	/* an unknown strategy fails clearly */
	send_attempt(&(att) { .run_id = "bad-route", .routing = "nearest" });
	cr_assert(wait_rec("bad-route", FAILED, 5000, &r));
	cr_assert(strstr(r.error, "unknown routing strategy 'nearest'"));
	stop_all();
}

Test(queue, kill_queued_and_running_attempts)
{
	rec  r;
	char pidfile[300], cmd[400];
	start_queue("30s", "false");
	/* queued: no worker serves group gz */
	send_attempt(&(att) { .run_id = "q-kill", .group = "gz" });
	ax_clock_sleep_us(100000);
	send_cancel("q-kill");
	cr_assert(wait_rec("q-kill", CANCEL, 2000, &r));
	cr_assert_str_eq(r.reason, "MANUAL_CLEAR");

	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
	snprintf(cmd, sizeof(cmd), "echo $$ > %s; exec sleep 30", pidfile);
	send_attempt(
	    &(att) { .run_id = "r-kill", .type = "bash", .command = cmd });
	cr_assert(wait_rec("r-kill", STARTED, 5000, NULL));
	send_cancel("r-kill");
	cr_assert(wait_rec("r-kill", CANCEL, 5000, &r));
	FILE *f   = fopen(pidfile, "r");
	int   pid = 0;
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	cr_assert(kill(pid, 0) != 0, "the task still runs");
	stop_all();
}

/* An attempt prepared ahead (due_at in the future) is held until its
 * instant, then dispatched at once; a held attempt can be canceled. */
Test(queue, prepared_attempt_waits_for_its_due_instant)
{
	rec     s;
	int64_t due;
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 2);
	wait_workers(1);
	/* the worker is parked on a long poll: nothing but the hold stops
	 * the dispatch */
	due = ax_clock_utc_us() + 400 * AX_USEC_PER_MSEC;
	send_attempt(&(att) { .run_id = "r-held", .due_in_us = 400000 });
	send_attempt(
	    &(att) { .run_id = "r-held-cancel", .due_in_us = 400000 });
	ax_clock_sleep_us(100000);
	cr_assert_eq(count_rec("r-held", STARTED), 0, "started early");
	send_cancel("r-held-cancel");
	cr_assert(wait_rec("r-held-cancel", CANCEL, 2000, NULL));
	cr_assert(wait_rec("r-held", STARTED, 3000, &s));
	cr_assert_geq(s.dispatched, due - 1000, "dispatched %lld us early",
	              (long long) (due - s.dispatched));
	cr_assert_lt(s.dispatched, due + 50 * AX_USEC_PER_MSEC,
	             "dispatched %lld us late",
	             (long long) (s.dispatched - due));
	cr_assert(wait_rec("r-held", SUCCESS, 3000, NULL));
	ax_clock_sleep_us(600000);
	cr_assert_eq(count_rec("r-held-cancel", STARTED), 0,
	             "a canceled held attempt ran");
	stop_all();
}

Test(queue, worker_killed_mid_task_goes_unknown_and_restart_reregisters)
{
	rec            r;
	ax_queue_stats st;
	char           pidfile[300], cmd[400];
	int            pid = 0;
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
	snprintf(cmd, sizeof(cmd), "echo $$ > %s; exec sleep 30", pidfile);
	send_attempt(
	    &(att) { .run_id = "r-lost", .type = "bash", .command = cmd });
	cr_assert(wait_rec("r-lost", STARTED, 5000, NULL));
	kill(wpid[0], SIGKILL);
	waitpid(wpid[0], NULL, 0);
	wpid[0] = 0;
	cr_assert(wait_rec("r-lost", UNKNOWN, 5000, &r));
	cr_assert_str_eq(r.reason, "TIMEOUT_HEARTBEAT");
	ax_queue_stats_get(Q, &st);
	cr_assert_eq(st.lease_losses, 1);
	cr_assert_eq(st.workers, 0);
	/* the orphaned task (its own process group) is the test's to end */
	FILE *f = fopen(pidfile, "r");
	if (f != NULL) {
		if (fscanf(f, "%d", &pid) == 1 && pid > 0)
			kill(-pid, SIGKILL);
		fclose(f);
	}
	/* the same worker id comes back and serves again */
	worker_start(1, "w1", "g", 1);
	wait_workers(1);
	send_attempt(&(att) { .run_id = "after" });
	cr_assert(wait_rec("after", SUCCESS, 5000, &r));
	cr_assert_str_eq(r.worker, "w1");
	ax_queue_stats_get(Q, &st);
	cr_assert_eq(st.registers, 2);
	stop_all();
}

Test(queue, result_resent_after_dropped_ack_is_forwarded_again)
{
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	ax_queue_fault_drop_acks(Q, 1);
	send_attempt(&(att) { .run_id = "dup" });
	cr_assert(wait_rec("dup", SUCCESS, 5000, NULL));
	/* the dropped ack made the worker send its report again */
	int64_t end = ax_clock_mono_us() + 3 * AX_USEC_PER_SEC;
	while (count_rec("dup", SUCCESS) + count_rec("dup", STARTED) < 3 &&
	       ax_clock_mono_us() < end)
		ax_clock_sleep_us(10000);
	cr_assert_geq(count_rec("dup", SUCCESS) + count_rec("dup", STARTED),
	              3);
	cr_assert_leq(count_rec("dup", SUCCESS), 2);
	/* and the worker goes on: the next attempt runs normally */
	send_attempt(&(att) { .run_id = "next" });
	cr_assert(wait_rec("next", SUCCESS, 5000, NULL));
	cr_assert_eq(count_rec("next", SUCCESS), 1);
	stop_all();
}

/* A worker's result is acknowledged only once it is committed: while the
 * result handler (here the stand-in) has not confirmed it, the worker
 * keeps sending it; once confirmed, it stops. */
Test(queue, result_acknowledged_only_after_commit)
{
	size_t k;
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	confirm_on = 0;
	send_attempt(&(att) { .run_id = "r-unconfirmed" });
	cr_assert(wait_rec("r-unconfirmed", SUCCESS, 5000, NULL));
	/* not acknowledged: sent again after the worker's retry interval */
	for (int i = 0; i < 100 && count_rec("r-unconfirmed", SUCCESS) < 2;
	     i++)
		ax_clock_sleep_us(100000);
	cr_assert_geq(count_rec("r-unconfirmed", SUCCESS), 2,
	              "an unconfirmed result was acknowledged");
	/* the next copy is confirmed, and then nothing comes again */
	confirm_on = 1;
	ax_clock_sleep_us(4 * AX_USEC_PER_SEC);
	k = count_rec("r-unconfirmed", SUCCESS);
	ax_clock_sleep_us(3 * AX_USEC_PER_SEC);
	cr_assert_eq(count_rec("r-unconfirmed", SUCCESS), k,
	             "still re-sent after its commit was confirmed");
	stop_all();
}

Test(queue, sigterm_drains_the_worker)
{
	int            status;
	ax_queue_stats st;
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 2);
	wait_workers(1);
	send_attempt(&(att) {
	    .run_id = "drain", .type = "bash", .command = "sleep 0.7" });
	cr_assert(wait_rec("drain", STARTED, 5000, NULL));
	kill(wpid[0], SIGTERM);
	ax_clock_sleep_us(200000);
	send_attempt(&(att) { .run_id = "not-here" });
	cr_assert(wait_rec("drain", SUCCESS, 5000, NULL));
	cr_assert_eq(waitpid(wpid[0], &status, 0), wpid[0]);
	wpid[0] = 0;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert_eq(count_rec("not-here", STARTED), 0);
	ax_queue_stats_get(Q, &st);
	cr_assert_eq(st.workers, 0);
	stop_all();
}

Test(queue, noop_throughput, .timeout = 180)
{
	const int N = 20000;
	char      id[32];
	int64_t   t0, t1;
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 256);
	worker_start(1, "w2", "g", 256);
	wait_workers(2);
	t0 = ax_clock_mono_us();
	for (int i = 0; i < N; i++) {
		snprintf(id, sizeof(id), "n-%d", i);
		send_attempt(&(att) { .run_id = id });
	}
	snprintf(id, sizeof(id), "n-%d", N - 1);
	int64_t end = t0 + 120 * AX_USEC_PER_SEC;
	size_t  ok  = 0;
	while (ax_clock_mono_us() < end) {
		ok = 0;
		pthread_mutex_lock(&C.mu);
		for (size_t i = 0; i < C.n; i++)
			ok += C.r[i].status == SUCCESS;
		pthread_mutex_unlock(&C.mu);
		if (ok >= (size_t) N)
			break;
		ax_clock_sleep_us(5000);
	}
	t1 = ax_clock_mono_us();
	cr_assert_geq(ok, (size_t) N);
	printf("queue+worker noop throughput: %d attempts in %.3f s = "
	       "%.0f attempts/s\n",
	       N, (double) (t1 - t0) / 1e6, N * 1e6 / (double) (t1 - t0));
	fflush(stdout);
	stop_all();
}

/* Lines of the marks file equal to run_id: how often its task ran. */
static int
marks_of(const char *path, const char *run_id)
{
	char  line[128];
	int   k = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		k += strcmp(line, run_id) == 0;
	}
	fclose(f);
	return k;
}

/*
 * While the result handler cannot commit (database down), the worker's
 * report that carries a Started waits for its ack, and the worker sends
 * nothing else on that channel: the Started of its next dispatch waits
 * behind it. That silence is the queue's own doing; the ack timeout must
 * not hand the dispatch to another worker, or it runs twice.
 */
Test(queue, held_report_does_not_make_an_acknowledged_dispatch_time_out)
{
	char           marks[300], cmd[400];
	ax_queue_stats st;
	int64_t        end;

	q_lease       = "60s";
	w_heartbeat   = "20s"; /* no heartbeat lists the runs meanwhile */
	q_ack_timeout = "1500ms";
	start_queue("30s", "false");
	snprintf(marks, sizeof(marks), "%s/marks", dir);
	snprintf(cmd, sizeof(cmd), "echo $AX_RUN_ID >> %s; sleep 3", marks);
	worker_start(0, "w1", "g", 3);
	wait_workers(1);
	confirm_on = 0; /* nothing commits */
	send_attempt(
	    &(att) { .run_id = "held-x", .type = "bash", .command = cmd });
	cr_assert(wait_rec("held-x", STARTED, 5000, NULL));
	/* w1's report with that Started is held: the next dispatch to w1
	 * cannot be reported started for a while */
	send_attempt(
	    &(att) { .run_id = "held-y", .type = "bash", .command = cmd });
	end = ax_clock_mono_us() + 5 * AX_USEC_PER_SEC;
	do {
		ax_queue_stats_get(Q, &st);
		ax_clock_sleep_us(5000);
	} while (st.dispatches < 2 && ax_clock_mono_us() < end);
	cr_assert_eq(st.dispatches, 2);
	/* a second worker that an ack timeout could hand held-y to */
	worker_start(1, "w2", "g", 3);
	wait_workers(2);
	ax_clock_sleep_us(3 * AX_USEC_PER_SEC);
	confirm_on = 1; /* the database is back */
	cr_assert(wait_rec("held-x", SUCCESS, 15000, NULL));
	cr_assert(wait_rec("held-y", SUCCESS, 15000, NULL));
	ax_clock_sleep_us(500000);
	ax_queue_stats_get(Q, &st);
	cr_expect_eq(st.resends, 0, "an acknowledged dispatch was re-queued");
	cr_expect_eq(marks_of(marks, "held-y"), 1, "held-y ran %d times",
	             marks_of(marks, "held-y"));
	cr_expect_eq(marks_of(marks, "held-x"), 1);
	stop_all();
	confirm_on    = 1;
	q_lease       = "1s";
	w_heartbeat   = "200ms";
	q_ack_timeout = "500ms";
}

/* ------------------------------------------------ reconciliation tests */

static ax_test_pg *pg;
static ax_store   *db;

/* A fresh migrated database for the queue (q_dsn). */
static void
db_start(void)
{
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &db), AX_OK);
	q_dsn = ax_test_pg_dsn(pg);
}

static void
db_stop(void)
{
	ax_store_close(db);
	ax_test_pg_stop(pg);
	db    = NULL;
	pg    = NULL;
	q_dsn = "";
}

static void db_exec(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void
db_exec(const char *fmt, ...)
{
	char    sql[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	cr_assert_eq(ax_store_exec(db, sql, 0, NULL), AX_OK, "%s: %s", sql,
	             ax_err_detail());
}

/* An instance of task t in state ti with one attempt run_id in state st
 * on worker wid (NULL: none) ; returns the instance id. */
static int64_t
db_attempt(const char *t, const char *ti, const char *run_id, const char *st,
           const char *wid)
{
	int64_t iid = ax_test_q_int(
	    db,
	    "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, try_number, max_tries) SELECT r.id, "
	    "r.dag_id, '%s', r.logical_date, '%s', 1, 2 FROM dag_runs r "
	    "RETURNING id",
	    t, ti);
	db_exec("INSERT INTO attempts (run_id, instance_id, number, state, "
	        "worker_id, due_at, dispatched_at) VALUES ('%s', %lld, 1, "
	        "'%s', %s%s%s, now(), now())",
	        run_id, (long long) iid, st, wid ? "'" : "",
	        wid ? wid : "NULL", wid ? "'" : "");
	return iid;
}

/* The run the attempts belong to, and worker wa's row as the previous
 * axd left it: pid 4242 on host ha, lease lapsing in lease_s seconds. */
static void
db_scene(int lease_s)
{
	ax_dag_store_result d =
	    ax_test_store_dag(db,
	                      "kind: DAG\nname: rq\ntasks:\n"
	                      "  - {name: a1, command: 'true'}\n"
	                      "  - {name: a2, command: 'true'}\n"
	                      "  - {name: a3, command: 'true'}\n"
	                      "  - {name: a4, command: 'true'}\n"
	                      "  - {name: b1, command: 'true'}\n");
	db_exec("INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	        "logical_date, interval_start, interval_end) VALUES (%lld, "
	        "%lld, 'manual', ax_ts(0), ax_ts(0), ax_ts(0))",
	        (long long) d.id, (long long) d.version_id);
	db_exec("INSERT INTO workers (id, worker_group, slots, used_slots, "
	        "hostname, pid, state, registered_at, last_heartbeat_at, "
	        "lease_expires_at) VALUES ('wa', 'g', 8, 3, 'ha', 4242, "
	        "'ACTIVE', now(), now(), now() + interval '%d seconds')",
	        lease_s);
}

static char *
db_text(const char *fmt, const char *arg)
{
	char      sql[512];
	PGresult *r = NULL;
	char     *v;
	snprintf(sql, sizeof(sql), fmt, arg);
	cr_assert_eq(ax_store_query(db, sql, 0, NULL, &r), AX_OK, "%s",
	             ax_err_detail());
	v = strdup(PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return v;
}

/* A worker played by the test: one REQ socket, one request at a time. */
typedef struct peer {
	nng_socket  s;
	const char *id, *host;
	int32_t     pid;
	uint64_t    session, seq;
	char        got[64][40];   /* run_ids dispatched to it, in order */
	int64_t     got_mono[64];  /* when each came, mono us */
	int64_t     got_after[64]; /* its Dispatch.start_after_us */
	size_t      ngot;
	int         no_ack;      /* receives dispatches, never acknowledges */
	int         start_after; /* Register.start_after */
	int32_t     slots;    /* Register.slots and Pull.free_slots (0: 8) */
	int32_t     prefetch; /* Register.prefetch */
} peer;

static void
peer_open(peer *p, const char *id, const char *host, int32_t pid)
{
	memset(p, 0, sizeof(*p));
	p->id   = id;
	p->host = host;
	p->pid  = pid;
	cr_assert_eq(nng_req0_open(&p->s), 0);
	nng_socket_set_ms(p->s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(p->s, NNG_OPT_RECVTIMEO, 5000);
	cr_assert_eq(nng_dial(p->s, addr, NULL, 0), 0);
}

/* Sends m (worker id, session and seq filled in); returns the reply. */
static Ax__QueueMessage *
peer_call(peer *p, Ax__WorkerMessage *m)
{
	nng_msg          *msg;
	Ax__QueueMessage *r;
	m->worker_id = (char *) p->id;
	m->session   = p->session;
	m->seq       = ++p->seq;
	cr_assert_eq(
	    nng_msg_alloc(&msg, ax__worker_message__get_packed_size(m)), 0);
	ax__worker_message__pack(m, nng_msg_body(msg));
	cr_assert_eq(nng_sendmsg(p->s, msg, 0), 0);
	cr_assert_eq(nng_recvmsg(p->s, &msg, 0), 0, "no reply to %s", p->id);
	r = ax__queue_message__unpack(NULL, nng_msg_len(msg),
	                              nng_msg_body(msg));
	nng_msg_free(msg);
	cr_assert_not_null(r);
	return r;
}

static void
peer_register(peer *p, char **running, size_t n)
{
	Ax__WorkerMessage m   = AX__WORKER_MESSAGE__INIT;
	Ax__Register      reg = AX__REGISTER__INIT;
	Ax__QueueMessage *r;
	m.body_case           = AX__WORKER_MESSAGE__BODY_REGISTER;
	m.register_           = &reg;
	reg.worker_id         = (char *) p->id;
	reg.worker_group      = "g";
	reg.hostname          = (char *) p->host;
	reg.pid               = p->pid;
	reg.slots             = p->slots > 0 ? p->slots : 8;
	reg.prefetch          = p->prefetch;
	reg.n_running_run_ids = n;
	reg.running_run_ids   = running;
	reg.start_after       = p->start_after;
	p->session            = 0;
	r                     = peer_call(p, &m);
	cr_assert_eq(r->body_case, AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY);
	p->session = r->register_reply->session;
	ax__queue_message__free_unpacked(r, NULL);
}

/* One Pull of free slots (the queue holds it up to 100 ms), acknowledging
 * what comes (unless no_ack); returns the number of dispatches. */
static size_t
peer_pull1(peer *p, int32_t free_slots)
{
	Ax__WorkerMessage m  = AX__WORKER_MESSAGE__INIT;
	Ax__Pull          pl = AX__PULL__INIT;
	Ax__QueueMessage *r;
	size_t            n = 0;
	m.body_case         = AX__WORKER_MESSAGE__BODY_PULL;
	m.pull              = &pl;
	pl.free_slots       = free_slots;
	pl.wait_ms          = 100;
	r                   = peer_call(p, &m);
	{
		if (r->body_case == AX__QUEUE_MESSAGE__BODY_DISPATCH) {
			Ax__DispatchBatch *b = r->dispatch;
			char              *acks[64];
			for (size_t i = 0; i < b->n_dispatches && i < 64;
			     i++) {
				acks[i] = b->dispatches[i]->run_id;
				if (p->ngot == 64)
					continue;
				p->got_mono[p->ngot] = ax_clock_mono_us();
				p->got_after[p->ngot] =
				    b->dispatches[i]->start_after_us;
				snprintf(p->got[p->ngot++], 40, "%s", acks[i]);
			}
			if (b->n_dispatches > 0 && !p->no_ack) {
				Ax__WorkerMessage a = AX__WORKER_MESSAGE__INIT;
				Ax__Ack           ak = AX__ACK__INIT;
				a.body_case =
				    AX__WORKER_MESSAGE__BODY_ACK_ONLY;
				a.ack_only         = &ak;
				ak.n_acked_run_ids = b->n_dispatches;
				ak.acked_run_ids   = acks;
				ax__queue_message__free_unpacked(
				    peer_call(p, &a), NULL);
			}
			n = b->n_dispatches;
		}
		ax__queue_message__free_unpacked(r, NULL);
	}
	return n;
}

/* Pulls for about ms milliseconds, acknowledging what comes (unless
 * no_ack). */
static void
peer_pull(peer *p, int ms)
{
	int64_t end = ax_clock_mono_us() + ms * 1000;
	while (ax_clock_mono_us() < end)
		(void) peer_pull1(p, p->slots > 0 ? p->slots : 8);
}

static void
peer_heartbeat(peer *p, char **running, size_t n)
{
	Ax__WorkerMessage m  = AX__WORKER_MESSAGE__INIT;
	Ax__Heartbeat     hb = AX__HEARTBEAT__INIT;
	m.body_case          = AX__WORKER_MESSAGE__BODY_HEARTBEAT;
	m.heartbeat          = &hb;
	hb.n_running_run_ids = n;
	hb.running_run_ids   = running;
	hb.slots_total       = 8;
	ax__queue_message__free_unpacked(peer_call(p, &m), NULL);
}

static size_t
peer_got(const peer *p, const char *run_id)
{
	size_t k = 0;
	for (size_t i = 0; i < p->ngot; i++)
		k += strcmp(p->got[i], run_id) == 0;
	return k;
}

#define RA1 "01890000-0000-7000-8000-0000000000a1"
#define RA2 "01890000-0000-7000-8000-0000000000a2"
#define RA3 "01890000-0000-7000-8000-0000000000a3"
#define RA4 "01890000-0000-7000-8000-0000000000a4"
#define RB1 "01890000-0000-7000-8000-0000000000b1"

/* The previous axd left, on worker wa: a1 and a3 DISPATCHED (their
 * instances READY, so admission replays them), a2 and a4 RUNNING; b1 is
 * only QUEUED. The queue is rebuilt on that database. */
static void
rebuilt_queue(int lease_s)
{
	db_start();
	db_scene(lease_s);
	int64_t i1 = db_attempt("a1", "READY", RA1, "DISPATCHED", "wa");
	db_attempt("a2", "RUNNING", RA2, "RUNNING", "wa");
	int64_t i3 = db_attempt("a3", "READY", RA3, "DISPATCHED", "wa");
	db_attempt("a4", "RUNNING", RA4, "RUNNING", "wa");
	int64_t ib = db_attempt("b1", "READY", RB1, "QUEUED", NULL);
	start_queue("30s", "false");
	/* what the instance generator sends again after a start */
	send_attempt(&(att) { .run_id = RA1, .instance_id = i1 });
	send_attempt(&(att) { .run_id = RA3, .instance_id = i3 });
	send_attempt(&(att) { .run_id = RB1, .instance_id = ib });
}

/*
 * After a restart of axd, worker B registers first: it gets only what
 * nobody may hold (b1), none of worker A's in-doubt attempts. A comes
 * back listing a1 and a2: adopted, never sent again; a3, DISPATCHED and
 * not listed by the same process, is sent again exactly once, to A; a4,
 * RUNNING and not listed, is lost once A's heartbeats keep not listing
 * it.
 */
Test(queue, restart_waits_for_the_worker_that_holds_the_attempts)
{
	peer  a, b;
	char *running[] = { RA1, RA2 }, *all[] = { RA1, RA2, RA3 };
	char *st;

	q_lease = "10s";
	rebuilt_queue(10);
	peer_open(&b, "wb", "hb", 777);
	peer_register(&b, NULL, 0);
	peer_pull(&b, 1500);
	cr_expect_eq(peer_got(&b, RB1), 1, "b1 not dispatched to wb");
	cr_expect_eq(b.ngot, 1, "wb got %zu dispatches (%s...)", b.ngot,
	             b.got[0]);
	peer_open(&a, "wa", "ha", 4242);
	peer_register(&a, running, 2);
	/* a4: not in wa's running set, but its result may still come in a
	 * report; not lost yet */
	peer_heartbeat(&a, running, 2);
	ax_clock_sleep_us(200000);
	cr_expect_eq(count_rec(RA4, UNKNOWN), 0,
	             "a4 lost before a report could come");
	peer_pull(&a, 1200);
	peer_pull(&b, 300);
	cr_expect_eq(peer_got(&a, RA3), 1, "a3 sent %zu times to wa",
	             peer_got(&a, RA3));
	cr_expect_eq(a.ngot, 1, "wa got %zu dispatches", a.ngot);
	cr_expect_eq(b.ngot, 1, "wb got %zu dispatches", b.ngot);
	st = db_text("SELECT state || ' ' || coalesce(worker_id, '') FROM "
	             "attempts WHERE run_id = '%s'",
	             RA3);
	cr_expect_str_eq(st, "DISPATCHED wa");
	free(st);
	st = db_text("SELECT state || ' ' || coalesce(worker_id, '') FROM "
	             "attempts WHERE run_id = '%s'",
	             RB1);
	cr_expect_str_eq(st, "DISPATCHED wb");
	free(st);
	/* still not listed once a report had time to come: lost */
	ax_clock_sleep_us(500000);
	peer_heartbeat(&a, all, 3);
	cr_expect(wait_rec(RA4, UNKNOWN, 2000, NULL));
	for (int i = 0; i < 3; i++)
		cr_expect_eq(count_rec(all[i], UNKNOWN), 0, "%s lost", all[i]);
	nng_close(a.s);
	nng_close(b.s);
	stop_all();
	db_stop();
	q_lease = "1s";
}

/*
 * Worker A never comes back: its attempts stay with nobody until its
 * lease (on the database clock) plus queue.lease_grace has passed, by
 * when it has killed its tasks; then each is reported UNKNOWN once (the
 * result handler retries it under a new run_id). Nothing is sent to B.
 */
Test(queue, worker_that_never_returns_loses_its_attempts_after_lease_and_grace)
{
	peer    b;
	int64_t t0, first = 0;
	char   *ids[] = { RA1, RA2, RA3, RA4 };

	q_lease = "1s";
	rebuilt_queue(1); /* wa's lease lapses 1 s from now */
	t0 = ax_clock_mono_us();
	peer_open(&b, "wb", "hb", 777);
	peer_register(&b, NULL, 0);
	/* lease 1 s + one heartbeat interval (200 ms) + grace 2 s from the
	 * database's row, written just before t0 */
	while (ax_clock_mono_us() - t0 < 8 * AX_USEC_PER_SEC) {
		peer_pull(&b, 200);
		if (first == 0 && count_rec(RA1, UNKNOWN) > 0)
			first = ax_clock_mono_us() - t0;
	}
	cr_expect_gt(first, 0, "wa's attempts never went UNKNOWN");
	cr_expect_geq(first, 2500 * AX_USEC_PER_MSEC,
	              "UNKNOWN %lld ms after the start, before lease + grace",
	              (long long) (first / 1000));
	for (int i = 0; i < 4; i++)
		cr_expect_eq(count_rec(ids[i], UNKNOWN), 1, "%s: %zu UNKNOWN",
		             ids[i], count_rec(ids[i], UNKNOWN));
	cr_expect_eq(b.ngot, 1, "wb got %zu dispatches", b.ngot);
	cr_expect_eq(peer_got(&b, RB1), 1);
	nng_close(b.s);
	stop_all();
	db_stop();
}

#define RD1 "01890000-0000-7000-8000-0000000000d1"
#define RD2 "01890000-0000-7000-8000-0000000000d2"
#define RD3 "01890000-0000-7000-8000-0000000000d3"
#define RD4 "01890000-0000-7000-8000-0000000000d4"
#define RD5 "01890000-0000-7000-8000-0000000000d5"

/*
 * Attempts due at the same instant and routed to two parked workers
 * leave together: the dispatches to both workers are recorded in one
 * transaction (one commit before the replies, not one commit per worker
 * answered before it), and each worker gets its share (2 slots each).
 * Then the latency split the queue publishes: an attempt due 3 s ago
 * counts about 3 s of decision and a short environment ready.
 */
Test(queue, dispatches_due_together_to_two_workers_share_one_transaction)
{
	const char *ids[]   = { RD1, RD2, RD3, RD4 };
	const char *tasks[] = { "a1", "a2", "a3", "a4" };
	int64_t     iid[4], due;
	char        sql[512], *v;

	db_start();
	db_scene(30);
	for (int i = 0; i < 4; i++)
		iid[i] = db_attempt(tasks[i], "READY", ids[i], "QUEUED", NULL);
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 2);
	worker_start(1, "w2", "g", 2);
	wait_workers(2);
	/* both workers' Pulls are parked well before the instant */
	due = ax_clock_utc_us() + AX_USEC_PER_SEC;
	for (int i = 0; i < 4; i++)
		send_attempt(&(att) { .run_id      = ids[i],
		                      .instance_id = iid[i],
		                      .due_at_us   = due });
	for (int i = 0; i < 4; i++)
		cr_assert(wait_rec(ids[i], STARTED, 10000, NULL),
		          "%s did not start", ids[i]);
	snprintf(sql, sizeof(sql),
	         "SELECT count(DISTINCT worker_id) || ' workers, ' || "
	         "count(DISTINCT xmin::text) || ' transaction(s)' FROM "
	         "attempts WHERE run_id IN ('%s', '%s', '%s', '%s') AND "
	         "state = 'DISPATCHED'",
	         RD1, RD2, RD3, RD4);
	v = db_text("%s", sql);
	cr_expect_str_eq(v, "2 workers, 1 transaction(s)",
	                 "dispatches recorded: %s", v);
	free(v);
	/* The latency split the queue publishes (component_stats, for
	 * /metrics), per attempt at its first start: one more attempt, due
	 * 3 s ago, has a decision (dispatched - due) of about 3 s, while its
	 * environment (started - dispatched: a fork) is ready in far less,
	 * like the four due on time. */
	int64_t late = db_attempt("b1", "READY", RD5, "QUEUED", NULL);
	send_attempt(
	    &(att) { .run_id      = RD5,
	             .instance_id = late,
	             .due_at_us   = ax_clock_utc_us() - 3 * AX_USEC_PER_SEC });
	cr_assert(wait_rec(RD5, STARTED, 10000, NULL), "RD5 did not start");
	static const char *const sums[][2] = {
		{ "lat.decision.%.count", "5" },
		{ "lat.env_ready.%.count", "5" },
		{ "lat.e2e.%.count", "5" },
		{ "lat.decision.%.b11", "1" },
		{ "lat.e2e.%.b11", "1" },
	};
	for (int t = 0; t < 500; t++) { /* published once a second */
		v        = db_text("SELECT coalesce(sum(value), 0) FROM "
		                          "component_stats WHERE component = 'queue' AND "
		                          "key LIKE '%s'",
		                   sums[0][0]);
		int done = strcmp(v, "5") == 0;
		free(v);
		if (done)
			break;
		ax_clock_sleep_us(10000);
	}
	for (size_t k = 0; k < sizeof(sums) / sizeof(sums[0]); k++) {
		v = db_text("SELECT coalesce(sum(value), 0) FROM "
		            "component_stats WHERE component = 'queue' AND "
		            "key LIKE '%s'",
		            sums[k][0]);
		cr_expect_str_eq(v, sums[k][1], "%s", sums[k][0]);
		free(v);
	}
	/* every environment ready within 2.5 s: buckets 0..10 hold all */
	v = db_text("SELECT coalesce(sum(value), 0) FROM component_stats "
	            "WHERE component = 'queue' AND key ~ '%s'",
	            "^lat\\.env_ready\\.[^.]+\\.b([0-9]|10)$");
	cr_expect_str_eq(v, "5", "environment ready within 2.5 s");
	free(v);
	stop_all();
	db_stop();
}

/* ------------------------------------------ ownership of a dispatch */

#define RX "01890000-0000-7000-8000-0000000000c1"

/* The index of run_id's first dispatch to p, or -1. */
static int
peer_first(const peer *p, const char *run_id)
{
	for (size_t i = 0; i < p->ngot; i++)
		if (strcmp(p->got[i], run_id) == 0)
			return (int) i;
	return -1;
}

/* The knobs of the tests of attempts sent ahead of their instant: a long
 * lease and ack timeout, dispatch_ahead 1 s, and prefetch_wait (NULL:
 * the default); knobs_reset puts back the suite's. */
static void
knobs_ahead(const char *prefetch_wait)
{
	q_lease          = "10s";
	q_ack_timeout    = "2s";
	q_dispatch_ahead = "1s";
	q_prefetch_wait  = prefetch_wait;
}

static void
knobs_reset(void)
{
	q_lease          = "1s";
	q_ack_timeout    = "500ms";
	q_dispatch_ahead = NULL;
	q_prefetch_wait  = NULL;
}

#define RE1 "01890000-0000-7000-8000-0000000000e1"
#define RE2 "01890000-0000-7000-8000-0000000000e2"

/*
 * An attempt prepared ahead of its due instant is sent
 * queue.dispatch_ahead early to a worker that holds a dispatch for its
 * instant (Register.start_after), with the time left to wait
 * (Dispatch.start_after_us): the record and the reply are out of the
 * start's way. A worker that does not say so is sent it only once it is
 * due, never early.
 */
Test(queue, prepared_attempt_goes_ahead_only_to_a_worker_that_waits)
{
	peer    a, b;
	int64_t due_mono;
	int     k;

	knobs_ahead(NULL);
	start_queue("30s", "false");
	peer_open(&a, "wa", "ha", 101);
	a.start_after = 1;
	peer_register(&a, NULL, 0);
	due_mono = ax_clock_mono_us() + 1500 * AX_USEC_PER_MSEC;
	send_attempt(&(att) { .run_id      = RE1,
	                      .instance_id = 81,
	                      .due_in_us   = 1500 * AX_USEC_PER_MSEC });
	peer_pull(&a, 1300);
	k = peer_first(&a, RE1);
	cr_assert_geq(k, 0, "RE1 not sent ahead of its instant");
	cr_expect_lt(a.got_mono[k], due_mono - 300 * AX_USEC_PER_MSEC,
	             "RE1 sent %lld ms before its instant",
	             (long long) (due_mono - a.got_mono[k]) / 1000);
	cr_expect_gt(a.got_after[k], 0, "no start_after_us");
	/* it may start at its instant, not sooner */
	cr_expect_geq(a.got_mono[k] + a.got_after[k], due_mono - 2000,
	              "told to start %lld us before the instant",
	              (long long) (due_mono - a.got_mono[k] - a.got_after[k]));
	peer_heartbeat(&a, (char *[]) { RE1 }, 1);

	peer_open(&b, "wb", "hb", 102); /* b.start_after = 0 */
	peer_register(&b, NULL, 0);
	due_mono = ax_clock_mono_us() + 1500 * AX_USEC_PER_MSEC;
	send_attempt(&(att) { .run_id      = RE2,
	                      .instance_id = 82,
	                      .due_in_us   = 1500 * AX_USEC_PER_MSEC });
	peer_pull(&b, 2500);
	k = peer_first(&b, RE2);
	cr_assert_geq(k, 0, "RE2 never sent to the worker that cannot wait");
	cr_expect_geq(b.got_mono[k], due_mono - 2000,
	              "RE2 sent %lld us before its instant to a worker "
	              "that starts it at once",
	              (long long) (due_mono - b.got_mono[k]));
	cr_expect_lt(b.got_mono[k], due_mono + 500 * AX_USEC_PER_MSEC,
	             "RE2 sent %lld ms late",
	             (long long) (b.got_mono[k] - due_mono) / 1000);
	cr_expect_eq(b.got_after[k], 0);
	nng_close(a.s);
	nng_close(b.s);
	stop_all();
	knobs_reset();
}

#define RP1 "01890000-0000-7000-8000-0000000000f1"
#define RP2 "01890000-0000-7000-8000-0000000000f2"
#define RP3 "01890000-0000-7000-8000-0000000000f3"
#define RP4 "01890000-0000-7000-8000-0000000000f4"
#define RP5 "01890000-0000-7000-8000-0000000000f5"

/* A heartbeat of p listing running; returns the run_ids the queue asks
 * back (HeartbeatReply.withdraw_run_ids), joined by spaces, in w. */
static void
peer_heartbeat_withdraw(peer *p, char **running, size_t n, char *w, size_t len)
{
	Ax__WorkerMessage m  = AX__WORKER_MESSAGE__INIT;
	Ax__Heartbeat     hb = AX__HEARTBEAT__INIT;
	Ax__QueueMessage *r;
	m.body_case          = AX__WORKER_MESSAGE__BODY_HEARTBEAT;
	m.heartbeat          = &hb;
	hb.n_running_run_ids = n;
	hb.running_run_ids   = running;
	hb.slots_total       = p->slots;
	r                    = peer_call(p, &m);
	cr_assert_eq(r->body_case, AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY);
	w[0] = '\0';
	for (size_t i = 0; i < r->heartbeat_reply->n_withdraw_run_ids; i++)
		snprintf(w + strlen(w), len - strlen(w), "%s%s", i ? " " : "",
		         r->heartbeat_reply->withdraw_run_ids[i]);
	ax__queue_message__free_unpacked(r, NULL);
}

/* p reports started (their Started) and withdrawn (given back unstarted)
 * in one Report. */
static void
peer_report(peer *p, char *started, char *withdrawn)
{
	Ax__WorkerMessage m     = AX__WORKER_MESSAGE__INIT;
	Ax__Report        rep   = AX__REPORT__INIT;
	Ax__Started       st    = AX__STARTED__INIT;
	Ax__Started      *sp    = &st;
	m.body_case             = AX__WORKER_MESSAGE__BODY_REPORT;
	m.report                = &rep;
	st.run_id               = started;
	st.started_at_us        = ax_clock_utc_us();
	rep.n_started           = started != NULL;
	rep.started             = &sp;
	rep.n_withdrawn_run_ids = withdrawn != NULL;
	rep.withdrawn_run_ids   = &withdrawn;
	ax__queue_message__free_unpacked(peer_call(p, &m), NULL);
}

/*
 * Five attempts due at one instant, a worker of 2 slots that takes 2
 * more held for their instant (Register.prefetch): its Pull of 2 free
 * slots is answered with 4, each to start at the instant (the worker
 * starts the 2 beyond its slots as slots free); the fifth waits in the
 * queue. Nothing is asked back before queue.prefetch_wait after the
 * instant; then the 2 beyond its slots that have not started are asked
 * back. The worker gives one back and has started the other meanwhile:
 * the one given back, and the fifth, go to another worker; the started
 * one goes nowhere else.
 */
Test(
    queue,
    prefetch_sends_held_attempts_beyond_free_slots_and_takes_back_the_unstarted)
{
	const char *ids[] = { RP1, RP2, RP3, RP4, RP5 };
	peer        a, b;
	char        w[256], *held[4];
	int64_t     t0, due_mono, due_utc;
	size_t      n = 0;

	knobs_ahead("300ms");
	start_queue("30s", "false");
	peer_open(&a, "wa", "ha", 101);
	a.start_after = 1;
	a.slots       = 2;
	a.prefetch    = 2;
	peer_register(&a, NULL, 0);
	t0       = ax_clock_mono_us();
	due_mono = t0 + 1500 * AX_USEC_PER_MSEC;
	/* one instant for the five: sent one by one, each with "in 1.5 s",
	 * they were due up to milliseconds apart on a loaded machine, and
	 * the Pull was answered when the first of them were released */
	due_utc = ax_clock_utc_us() + (due_mono - ax_clock_mono_us());
	for (int i = 0; i < 5; i++)
		send_attempt(&(att) { .run_id      = ids[i],
		                      .instance_id = 90 + i,
		                      .due_at_us   = due_utc });
	while (n == 0 && ax_clock_mono_us() < due_mono)
		n = peer_pull1(&a, 2);
	cr_assert_eq(n, 4, "a Pull of 2 free slots got %zu dispatches", n);
	for (size_t i = 0; i < 4; i++) {
		cr_expect_gt(a.got_after[i], 0, "%s not held for its instant",
		             a.got[i]);
		held[i] = a.got[i];
	}
	/* before the instant + prefetch_wait: nothing asked back */
	peer_heartbeat_withdraw(&a, held, 4, w, sizeof(w));
	cr_expect_str_eq(w, "", "asked back before the instant");
	ax_clock_sleep_us(due_mono - ax_clock_mono_us() > 0
	                      ? due_mono - ax_clock_mono_us()
	                      : 0);
	peer_report(&a, held[0], NULL);
	peer_report(&a, held[1], NULL);
	peer_heartbeat_withdraw(&a, held, 4, w, sizeof(w));
	cr_expect_str_eq(w, "", "asked back within queue.prefetch_wait");
	ax_clock_sleep_us(400 * AX_USEC_PER_MSEC);
	peer_heartbeat_withdraw(&a, held, 4, w, sizeof(w));
	cr_expect(strstr(w, held[2]) != NULL && strstr(w, held[3]) != NULL &&
	              strstr(w, held[0]) == NULL && strstr(w, held[1]) == NULL,
	          "asked back: '%s', want the two beyond the slots", w);
	/* held[3] started meanwhile; held[2] is given back, twice (a
	 * re-sent Report) */
	peer_report(&a, held[3], held[2]);
	peer_report(&a, NULL, held[2]);
	peer_open(&b, "wb", "hb", 102);
	b.slots = 8;
	peer_register(&b, NULL, 0);
	peer_pull(&b, 600);
	cr_expect_eq(b.ngot, 2, "wb got %zu dispatches", b.ngot);
	cr_expect_eq(peer_got(&b, held[2]), 1, "the one given back");
	cr_expect_eq(peer_got(&b, held[3]), 0, "a started one sent again");
	int fifth = 0;
	for (int i = 0; i < 5; i++)
		fifth +=
		    peer_got(&a, ids[i]) == 0 && peer_got(&b, ids[i]) == 1;
	cr_expect_eq(fifth, 1, "the fifth did not go to wb");
	cr_expect_eq(a.ngot, 4, "wa got %zu dispatches", a.ngot);
	nng_close(a.s);
	nng_close(b.s);
	stop_all();
	knobs_reset();
}

/*
 * Worker A receives x and never acknowledges it (its Started lost), but
 * its session lives (heartbeats): the dispatch is sent again to A, and
 * only to A; B, pulling all along, never gets x; nothing goes UNKNOWN.
 */
Test(queue, unacknowledged_dispatch_goes_again_to_its_live_worker_only)
{
	peer           a, b;
	ax_queue_stats st;

	start_queue("30s", "false");
	peer_open(&a, "wa", "ha", 101);
	peer_register(&a, NULL, 0);
	a.no_ack = 1;
	send_attempt(&(att) { .run_id = RX, .instance_id = 71 });
	peer_pull(&a, 300);
	cr_assert_geq(peer_got(&a, RX), 1, "x not dispatched to wa");
	peer_open(&b, "wb", "hb", 102);
	peer_register(&b, NULL, 0);
	/* 2 s: four ack timeouts (500 ms); A only heartbeats */
	for (int i = 0; i < 10; i++) {
		peer_heartbeat(&a, NULL, 0);
		peer_pull(&b, 200);
	}
	cr_expect_eq(peer_got(&b, RX), 0, "x went to wb (%zu times)",
	             peer_got(&b, RX));
	peer_pull(&a, 600);
	cr_expect_geq(peer_got(&a, RX), 2, "x not sent to wa again");
	ax_queue_stats_get(Q, &st);
	cr_expect_gt(st.resends, 0);
	/* A acknowledges the copy: x is A's, never dispatched again */
	a.no_ack = 0;
	peer_pull(&a, 600);
	size_t got = peer_got(&a, RX);
	peer_pull(&a, 1200);
	peer_pull(&b, 300);
	cr_expect_eq(peer_got(&a, RX), got, "x sent again after its ack");
	cr_expect_eq(peer_got(&b, RX), 0);
	cr_expect_eq(count_rec(RX, UNKNOWN), 0, "x lost by a live worker");
	nng_close(a.s);
	nng_close(b.s);
	stop_all();
}

/*
 * Worker A receives x and dies before acknowledging it (it may have
 * started x): x stays A's until A's lease + grace lapses, then it is
 * reported UNKNOWN once (retried per policy under a new run_id) and
 * never dispatched again with its run_id, not to B, which pulls all
 * along.
 */
Test(queue, dispatch_to_a_worker_that_dies_unacknowledged_goes_unknown)
{
	peer    a, b;
	int64_t t0;
	rec     r = { 0 };

	start_queue("30s", "false");
	peer_open(&a, "wa", "ha", 101);
	peer_register(&a, NULL, 0);
	a.no_ack = 1;
	send_attempt(&(att) { .run_id = RX, .instance_id = 72 });
	peer_pull(&a, 300);
	cr_assert_geq(peer_got(&a, RX), 1, "x not dispatched to wa");
	nng_close(a.s); /* A is gone (kill -9): no ack, no heartbeat */
	t0 = ax_clock_mono_us();
	peer_open(&b, "wb", "hb", 102);
	peer_register(&b, NULL, 0);
	/* lease 1 s + grace 2 s, with a margin for a loaded machine */
	while (ax_clock_mono_us() - t0 < 6 * AX_USEC_PER_SEC)
		peer_pull(&b, 200);
	cr_expect(wait_rec(RX, UNKNOWN, 100, &r), "x never went UNKNOWN");
	cr_expect_str_eq(r.worker, "wa");
	cr_expect_eq(count_rec(RX, UNKNOWN), 1, "x: %zu UNKNOWN",
	             count_rec(RX, UNKNOWN));
	cr_expect_eq(peer_got(&b, RX), 0, "x went to wb (%zu times)",
	             peer_got(&b, RX));
	nng_close(b.s);
	stop_all();
}

/*
 * A statement PostgreSQL does not finish (here: the attempts table
 * locked by another session for 3.5 s while the queue records a
 * dispatch) fails after the queue's statement_timeout (half the 2 s
 * lease) instead of blocking the queue actor: dispatching pauses, and
 * the other workers' heartbeats are answered in time all along (a
 * worker fences itself when they are not), not after the lock.
 */
Test(queue, blocked_database_statement_does_not_stall_the_workers)
{
	peer     a, b;
	nng_msg *msg;
	int64_t  t0, worst = 0;

	q_lease = "2s";
	db_start();
	start_queue("30s", "false");
	peer_open(&a, "wa", "ha", 101);
	peer_open(&b, "wb", "hb", 102);
	peer_register(&a, NULL, 0);
	peer_register(&b, NULL, 0);
	peer_pull(&a, 300); /* the queue has read what is in flight */
	db_exec("BEGIN");
	db_exec("LOCK TABLE attempts IN ACCESS EXCLUSIVE MODE");
	{ /* a's Pull waits (parked) while the dispatch is recorded */
		Ax__WorkerMessage m  = AX__WORKER_MESSAGE__INIT;
		Ax__Pull          pl = AX__PULL__INIT;
		m.body_case          = AX__WORKER_MESSAGE__BODY_PULL;
		m.pull               = &pl;
		m.worker_id          = (char *) a.id;
		m.session            = a.session;
		m.seq                = ++a.seq;
		pl.free_slots        = 8;
		pl.wait_ms           = 4000;
		cr_assert_eq(
		    nng_msg_alloc(&msg,
		                  ax__worker_message__get_packed_size(&m)),
		    0);
		ax__worker_message__pack(&m, nng_msg_body(msg));
		cr_assert_eq(nng_sendmsg(a.s, msg, 0), 0);
	}
	ax_clock_sleep_us(100000);
	send_attempt(&(att) { .run_id = RX, .instance_id = 73 });
	t0 = ax_clock_mono_us();
	while (ax_clock_mono_us() - t0 < 3500 * AX_USEC_PER_MSEC) {
		int64_t t = ax_clock_mono_us();
		peer_heartbeat(&b, NULL, 0);
		t = ax_clock_mono_us() - t;
		if (t > worst)
			worst = t;
		ax_clock_sleep_us(100000);
	}
	db_exec("ROLLBACK");
	cr_expect_lt(worst, 2000 * AX_USEC_PER_MSEC,
	             "a heartbeat waited %lld ms for the blocked queue",
	             (long long) (worst / 1000));
	if (nng_recvmsg(a.s, &msg, 0) == 0)
		nng_msg_free(msg);
	nng_close(a.s);
	nng_close(b.s);
	stop_all();
	db_stop();
	q_lease = "1s";
}

/* Sends m as peer p and expects a BAD_REQUEST whose text names field. */
static void
expect_refused(peer *p, Ax__WorkerMessage *m, const char *field)
{
	Ax__QueueMessage *r = peer_call(p, m);

	cr_expect_eq(r->body_case, AX__QUEUE_MESSAGE__BODY_ERROR,
	             "%s: answered with body %d", field, (int) r->body_case);
	if (r->body_case == AX__QUEUE_MESSAGE__BODY_ERROR) {
		cr_expect_str_eq(r->error->code, "BAD_REQUEST", "%s", field);
		cr_expect(strstr(r->error->message, field) != NULL,
		          "'%s' in '%s'", field, r->error->message);
	}
	ax__queue_message__free_unpacked(r, NULL);
}

/*
 * A worker whose messages are out of range (a broken or hostile process
 * on the worker endpoint) is refused message by message, with the field
 * named, and the queue goes on serving it and the others.
 */
Test(queue, out_of_range_worker_messages_are_refused_by_name)
{
	peer              p;
	Ax__WorkerMessage m   = AX__WORKER_MESSAGE__INIT;
	Ax__Register      reg = AX__REGISTER__INIT;
	Ax__Pull          pl  = AX__PULL__INIT;
	Ax__Started       s   = AX__STARTED__INIT;
	Ax__Result        res = AX__RESULT__INIT;
	Ax__QueueMessage *r;
	char              long_id[400];

	start_queue("30s", "false");
	peer_open(&p, "wx", "hx", 4242);
	m.body_case   = AX__WORKER_MESSAGE__BODY_REGISTER;
	m.register_   = &reg;
	reg.worker_id = "wx";
	reg.slots     = -3;
	expect_refused(&p, &m, "Register.slots");
	memset(long_id, 'w', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	reg.worker_id                = long_id;
	reg.slots                    = 4;
	expect_refused(&p, &m, "Register.worker_id");
	reg.worker_id  = "wx";
	reg.reserve_p0 = 5; /* more than its slots */
	expect_refused(&p, &m, "Register.reserve_p0");
	reg.reserve_p0 = -1;
	expect_refused(&p, &m, "Register.reserve_p0");
	peer_register(&p, NULL, 0);
	m.body_case   = AX__WORKER_MESSAGE__BODY_PULL;
	m.pull        = &pl;
	pl.free_slots = INT32_MIN;
	expect_refused(&p, &m, "Pull.free_slots");
	m.body_case = AX__WORKER_MESSAGE__BODY_STARTED;
	m.started   = &s;
	s.run_id    = "";
	expect_refused(&p, &m, "Started.run_id");
	m.body_case = AX__WORKER_MESSAGE__BODY_RESULT;
	m.result    = &res;
	res.run_id  = "../../etc/passwd";
	res.status  = 1;
	expect_refused(&p, &m, "Result.run_id");
	/* the session is intact: a sane pull is answered (the body members
	 * share a union: set pull again) */
	m.body_case   = AX__WORKER_MESSAGE__BODY_PULL;
	m.pull        = &pl;
	pl.free_slots = 4;
	pl.wait_ms    = 0;
	r             = peer_call(&p, &m);
	cr_expect_neq(r->body_case, AX__QUEUE_MESSAGE__BODY_ERROR, "%s",
	              r->body_case == AX__QUEUE_MESSAGE__BODY_ERROR
	                  ? r->error->message
	                  : "");
	ax__queue_message__free_unpacked(r, NULL);
	nng_close(p.s);
	stop_all();
}
