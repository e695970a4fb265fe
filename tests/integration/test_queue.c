/*
 * test_queue.c - the queue service (actors/queue_service.c) with real
 * ax-worker processes (path in $AX_WORKER, fork+exec'd).
 *
 * The queue actor runs in this process with two capture actors named
 * post_hook and resource_detector; a client named pre_hook sends
 * AttemptRendered and CancelInstance. Workers talk to the queue over an
 * ipc:// socket in a temp directory. No PostgreSQL.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actor.h"
#include "clock.h"
#include "config.h"
#include "pipeline.h"
#include "queue_service.h"

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
	int32_t         last_total, last_free;
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

/* The stand-in post_hook confirms what it received as committed, as the
 * result handler does in axd (0: it holds confirmations back). */
static _Atomic int confirm_on = 1;

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
	cr_assert_eq(ax_config_set(cfg, "worker.lease", "1s"), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "worker.heartbeat", "200ms"), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "queue.ack_timeout", "500ms"), AX_OK);
	cr_assert_eq(ax_config_set(cfg, "scheduler.aging_interval", aging),
	             AX_OK);
	cr_assert_eq(ax_config_set(cfg, "queue.drain_hand_back", hand_back),
	             AX_OK);
	pctx.cfg = cfg;
	pctx.dsn = "";
	cr_assert_eq(ax_actor_system_new(&sys), AX_OK);
	a.name          = AX_A_POST_HOOK;
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
	cr_assert_eq(ax_actor_client_new(sys, AX_A_PRE_HOOK, &pre), AX_OK);
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
		setenv("AX_WORKER_HEARTBEAT", "200ms", 1);
		setenv("AX_LOG_LEVEL", "info", 1);
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
	ar.due_at_us         = ax_clock_utc_us() + t->due_in_us;
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
