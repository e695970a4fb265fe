/*
 * queue_harness.c - the queue service in a test process, with real and
 * played workers (see queue_harness.h).
 */
#include "queue_harness.h"

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
#include "pipeline.h"
#include "queue_service.h"
#include "store_fixture.h"
#include "worker.pb-c.h"

cap              C;
ax_actor_system *sys;
ax_queue        *Q;
ax_config       *cfg;
ax_pipeline_ctx  pctx;
ax_actor_client *pre;
char             dir[256], addr[300];
pid_t            wpid[MAXWORK];
char             wname[MAXWORK][32];

/* The stand-in result_handler confirms what it received as committed, as the
 * result handler does in axd (0: it holds confirmations back). */
_Atomic int confirm_on = 1;
_Atomic int confirm_relaxed;
/* Lease of the queue and heartbeat of the workers (tests that need the
 * worker's heartbeat out of the way raise both). */
const char *q_lease = "1s", *w_heartbeat = "200ms", *q_ack_timeout = "500ms",
           *q_dsn = "";
/* queue.dispatch_ahead and queue.prefetch_wait (NULL: the defaults) */
const char *q_dispatch_ahead, *q_prefetch_wait;
/* worker.reserve_p0 of the workers started next */
const char *w_reserve_p0 = "0";
/* worker.cpu_milli of the workers started next ("0": the machine's) */
const char *w_cpu_milli = "0";
/* worker.resources of the workers started next ("": none) */
const char *w_resources = "";

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
		rc.relaxed              = confirm_relaxed;
		c.body_case             = AX__COMMAND__BODY_RESULTS_COMMITTED;
		c.results_committed     = &rc;
		ax_pipeline_send(self, AX_A_QUEUE, &c);
	}
	return AX_OK;
}

static const ax_actor_ops cap_ops = { .handle = cap_handle };

void
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

void
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
void
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
void
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

void
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

void
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
int
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

size_t
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
int
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

ax_test_pg *pg;
ax_store   *db;

/* A fresh migrated database for the queue (q_dsn). */
void
db_start(void)
{
	cr_assert_eq(ax_test_pg_start_migrated(&pg), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &db), AX_OK);
	q_dsn = ax_test_pg_dsn(pg);
}

void
db_stop(void)
{
	ax_store_close(db);
	ax_test_pg_stop(pg);
	db    = NULL;
	pg    = NULL;
	q_dsn = "";
}

void
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

void
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
Ax__QueueMessage *
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

void
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
size_t
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
void
peer_pull(peer *p, int ms)
{
	int64_t end = ax_clock_mono_us() + ms * 1000;
	while (ax_clock_mono_us() < end)
		(void) peer_pull1(p, p->slots > 0 ? p->slots : 8);
}

void
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

size_t
peer_got(const peer *p, const char *run_id)
{
	size_t k = 0;
	for (size_t i = 0; i < p->ngot; i++)
		k += strcmp(p->got[i], run_id) == 0;
	return k;
}
