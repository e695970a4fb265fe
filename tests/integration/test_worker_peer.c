/*
 * test_worker_peer.c - the real ax-worker binary against a queue played
 * by the test on an ipc:// REP socket: what a worker does with replies
 * and dispatches that are out of range. A refused dispatch is never run;
 * it comes back as a failed Result naming the field, and the worker
 * goes on with the good ones.
 */
#include <criterion/criterion.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "worker.pb-c.h"

#define R_GOOD    "01890000-0000-7000-8000-0000000000c1"
#define R_TIMEOUT "01890000-0000-7000-8000-0000000000c2"
#define R_PATH    "01890000-0000-7000-8000-0000000000c3"
#define R_ENV     "01890000-0000-7000-8000-0000000000c4"
#define R_HELD    "01890000-0000-7000-8000-0000000000c5"
#define R_KILL    "01890000-0000-7000-8000-0000000000c6"
#define R_FAR     "01890000-0000-7000-8000-0000000000c7"

static char       dir[64], addr[128];
static nng_socket rep;
static pid_t      worker = -1;
static int        reg_start_after; /* of the last Register answered */
static nng_pipe   last_pipe;       /* of the last request received */

/* The queue's socket on ipc:// (tcp: 0), then the worker dialing it. */
static void
setup_on(int tcp)
{
	const char  *bin = getenv("AX_WORKER");
	char         logs[128], out[128];
	nng_listener l;

	cr_assert_not_null(bin, "AX_WORKER is not set");
	snprintf(dir, sizeof(dir), "/tmp/ax-test-wpeer-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	if (tcp)
		snprintf(addr, sizeof(addr), "tcp://127.0.0.1:0");
	else
		snprintf(addr, sizeof(addr), "ipc://%s/q.ipc", dir);
	snprintf(logs, sizeof(logs), "%s/deep/logs", dir);
	snprintf(out, sizeof(out), "%s/worker.out", dir);
	cr_assert_eq(nng_rep0_open(&rep), 0);
	nng_socket_set_ms(rep, NNG_OPT_RECVTIMEO, 10000);
	cr_assert_eq(nng_listen(rep, addr, &l, 0), 0);
	if (tcp) { /* the port the kernel chose */
		int port = 0;
		cr_assert_eq(
		    nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port), 0);
		snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%d", port);
	}
	worker = fork();
	cr_assert(worker >= 0);
	if (worker == 0) {
		FILE *f = freopen(out, "a", stderr);
		(void) f;
		execl(bin, bin, "--server", addr, "--group", "g", "--slots",
		      "4", "--id", "wp", "--log-dir", logs, (char *) NULL);
		_exit(127);
	}
}

static void
setup(void)
{
	setup_on(0);
}

static void
setup_tcp(void)
{
	setup_on(1);
}

static void
teardown(void)
{
	if (worker > 0) {
		kill(worker, SIGKILL);
		waitpid(worker, NULL, 0);
	}
	nng_close(rep);
	if (strncmp(dir, "/tmp/ax-test-wpeer-", 19) == 0) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
}

TestSuite(worker_peer, .init = setup, .fini = teardown, .timeout = 60);
/* the queue reached over TCP: a worker that may be on another host */
TestSuite(worker_peer_tcp, .init = setup_tcp, .fini = teardown, .timeout = 60);

/* The next request of the worker (the caller frees it). */
static Ax__WorkerMessage *
next_request(void)
{
	nng_msg           *msg;
	Ax__WorkerMessage *m;

	cr_assert_eq(nng_recvmsg(rep, &msg, 0), 0, "the worker went quiet");
	last_pipe = nng_msg_get_pipe(msg);
	m         = ax__worker_message__unpack(NULL, nng_msg_len(msg),
	                                       nng_msg_body(msg));
	nng_msg_free(msg);
	cr_assert_not_null(m);
	return m;
}

static void
answer(Ax__QueueMessage *q)
{
	nng_msg *msg;

	cr_assert_eq(
	    nng_msg_alloc(&msg, ax__queue_message__get_packed_size(q)), 0);
	ax__queue_message__pack(q, nng_msg_body(msg));
	cr_assert_eq(nng_sendmsg(rep, msg, 0), 0);
}

static void
answer_ack(uint64_t seq)
{
	Ax__QueueMessage q  = AX__QUEUE_MESSAGE__INIT;
	Ax__Ack          ak = AX__ACK__INIT;

	q.reply_to_seq = seq;
	q.body_case    = AX__QUEUE_MESSAGE__BODY_ACK;
	q.ack          = &ak;
	ak.acked_seq   = seq;
	answer(&q);
}

static Ax__Dispatch
dispatch(const char *run_id)
{
	Ax__Dispatch d = AX__DISPATCH__INIT;

	d.run_id          = (char *) run_id;
	d.dag             = "d";
	d.task            = "t";
	d.attempt         = 1;
	d.task_type       = "noop";
	d.command         = "";
	d.timeout_ms      = 60000;
	d.logical_time_us = 1714530600000000;
	d.slots           = 1;
	return d;
}

/* Answers the worker's next Register with session 7 and lease lease_ms;
 * acks whatever else comes first. Returns 0 when no Register came within
 * wait_s seconds. */
static int
answer_register(int32_t lease_ms, int wait_s)
{
	Ax__WorkerMessage *m;
	Ax__QueueMessage   q   = AX__QUEUE_MESSAGE__INIT;
	Ax__RegisterReply  rr  = AX__REGISTER_REPLY__INIT;
	int64_t            end = ax_clock_mono_us() + wait_s * AX_USEC_PER_SEC;

	for (;;) {
		m = next_request();
		if (m->body_case == AX__WORKER_MESSAGE__BODY_REGISTER)
			break;
		answer_ack(m->seq);
		ax__worker_message__free_unpacked(m, NULL);
		if (ax_clock_mono_us() > end)
			return 0;
	}
	reg_start_after          = m->register_->start_after;
	q.reply_to_seq           = m->seq;
	q.body_case              = AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY;
	q.register_reply         = &rr;
	rr.session               = 7;
	rr.heartbeat_interval_ms = 1000;
	rr.lease_ttl_ms          = lease_ms;
	answer(&q);
	ax__worker_message__free_unpacked(m, NULL);
	return 1;
}

/* A RegisterReply with a negative lease is not a registration: the
 * worker registers again (it used to run with no lease at all). */
Test(worker_peer, register_reply_out_of_range_is_not_taken)
{
	cr_assert(answer_register(-5, 10));
	cr_expect(answer_register(10000, 10),
	          "the worker took a RegisterReply with a negative lease "
	          "and never registered again");
}

Test(worker_peer, bad_dispatches_fail_by_name_and_good_ones_run)
{
	Ax__WorkerMessage      *m;
	Ax__DispatchBatch       b = AX__DISPATCH_BATCH__INIT;
	Ax__Dispatch            d[4], *dp[4];
	Ax__Dispatch__EnvEntry  e    = AX__DISPATCH__ENV_ENTRY__INIT;
	Ax__Dispatch__EnvEntry *ep   = &e;
	int                     sent = 0, good = 0, bad = 0;
	char                    path[256];
	struct stat             sb;
	int64_t                 end;

	cr_assert(answer_register(10000, 10));
	d[0]            = dispatch(R_TIMEOUT);
	d[0].timeout_ms = INT64_MAX; /* in microseconds: overflow */
	d[1]            = dispatch(R_PATH);
	d[1].dag        = "../../escaped"; /* the log path: dir/escaped */
	d[1].task_type  = "bash";
	d[1].command    = "true";
	d[2]            = dispatch(R_ENV);
	e.key           = "LD_PRELOAD=/tmp/x.so X";
	e.value         = "1";
	d[2].n_env      = 1;
	d[2].env        = &ep;
	d[3]            = dispatch(R_GOOD);
	for (int i = 0; i < 4; i++)
		dp[i] = &d[i];
	end = ax_clock_mono_us() + 20 * AX_USEC_PER_SEC;
	while ((good < 1 || bad < 3) && ax_clock_mono_us() < end) {
		m = next_request();
		if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL && !sent) {
			Ax__QueueMessage dq = AX__QUEUE_MESSAGE__INIT;
			dq.reply_to_seq     = m->seq;
			dq.body_case        = AX__QUEUE_MESSAGE__BODY_DISPATCH;
			dq.dispatch         = &b;
			b.n_dispatches      = 4;
			b.dispatches        = dp;
			answer(&dq);
			sent = 1;
		} else if (m->body_case == AX__WORKER_MESSAGE__BODY_REPORT) {
			Ax__Report *rp = m->report;
			for (size_t i = 0; i < rp->n_results; i++) {
				Ax__Result *r = rp->results[i];
				if (strcmp(r->run_id, R_GOOD) == 0) {
					cr_expect_eq(r->status, 1, "%s",
					             r->error);
					good++;
					continue;
				}
				cr_expect_eq(r->status, 2, "%s", r->run_id);
				cr_expect(strstr(r->error, "refused") != NULL,
				          "%s: %s", r->run_id, r->error);
				if (strcmp(r->run_id, R_TIMEOUT) == 0)
					cr_expect(
					    strstr(r->error,
					           "Dispatch.timeout_ms"),
					    "%s", r->error);
				if (strcmp(r->run_id, R_PATH) == 0)
					cr_expect(
					    strstr(r->error, "Dispatch.dag"),
					    "%s", r->error);
				if (strcmp(r->run_id, R_ENV) == 0)
					cr_expect(
					    strstr(r->error, "Dispatch.env"),
					    "%s", r->error);
				bad++;
			}
			answer_ack(m->seq);
		} else if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL) {
			Ax__QueueMessage dq = AX__QUEUE_MESSAGE__INIT;
			dq.reply_to_seq     = m->seq;
			dq.body_case        = AX__QUEUE_MESSAGE__BODY_DISPATCH;
			dq.dispatch =
			    &(Ax__DispatchBatch) AX__DISPATCH_BATCH__INIT;
			answer(&dq);
		} else {
			Ax__QueueMessage   hq = AX__QUEUE_MESSAGE__INIT;
			Ax__HeartbeatReply hr = AX__HEARTBEAT_REPLY__INIT;
			if (m->body_case !=
			    AX__WORKER_MESSAGE__BODY_HEARTBEAT) {
				answer_ack(m->seq);
			} else {
				hq.reply_to_seq = m->seq;
				hq.body_case =
				    AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY;
				hq.heartbeat_reply = &hr;
				hr.acked_seq       = m->seq;
				answer(&hq);
			}
		}
		ax__worker_message__free_unpacked(m, NULL);
	}
	cr_expect_eq(good, 1, "the good dispatch ran once");
	cr_expect_eq(bad, 3, "three refused dispatches reported");
	/* nothing was written outside the log directory */
	snprintf(path, sizeof(path), "%s/escaped", dir);
	cr_expect_neq(stat(path, &sb), 0, "%s exists", path);
	cr_expect_eq(kill(worker, 0), 0, "the worker is alive");
}

/* Answers m (not a Pull) as the queue would: a HeartbeatReply carrying
 * cancel (NULL: none), or an Ack. */
static void
answer_other(const Ax__WorkerMessage *m, char *cancel)
{
	Ax__QueueMessage   hq = AX__QUEUE_MESSAGE__INIT;
	Ax__HeartbeatReply hr = AX__HEARTBEAT_REPLY__INIT;

	if (m->body_case != AX__WORKER_MESSAGE__BODY_HEARTBEAT) {
		answer_ack(m->seq);
		return;
	}
	hq.reply_to_seq    = m->seq;
	hq.body_case       = AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY;
	hq.heartbeat_reply = &hr;
	hr.acked_seq       = m->seq;
	if (cancel != NULL) {
		hr.n_cancel_run_ids = 1;
		hr.cancel_run_ids   = &cancel;
	}
	answer(&hq);
}

/*
 * A dispatch sent ahead of its instant (Dispatch.start_after_us, which
 * the worker says it honours in Register.start_after) starts no sooner
 * than that long after it was sent. One held for longer counts as the
 * worker's (its heartbeat lists it) and, killed before its instant, ends
 * KILLED without ever starting. A delay past the protocol's bound is
 * refused by name.
 */
Test(worker_peer, dispatch_sent_ahead_starts_at_its_instant_and_dies_unstarted)
{
	Ax__WorkerMessage *m;
	Ax__DispatchBatch  b = AX__DISPATCH_BATCH__INIT;
	Ax__Dispatch       d[3], *dp[3];
	int64_t sent_utc = 0, sent_mono = 0, end, started_utc = 0, seen = 0;
	int     sent = 0, held_done = 0, kill_done = 0, far_done = 0;
	int     listed = 0, kill_sent = 0;

	cr_assert(answer_register(10000, 10));
	cr_expect(reg_start_after, "Register.start_after is not set");
	d[0]                = dispatch(R_HELD);
	d[0].start_after_us = 400 * AX_USEC_PER_MSEC;
	d[1]                = dispatch(R_KILL);
	d[1].start_after_us = 30 * AX_USEC_PER_SEC;
	d[2]                = dispatch(R_FAR);
	d[2].start_after_us = 61 * AX_USEC_PER_SEC; /* bound: 60 s */
	for (int i = 0; i < 3; i++)
		dp[i] = &d[i];
	end = ax_clock_mono_us() + 20 * AX_USEC_PER_SEC;
	while ((!held_done || !kill_done || !far_done) &&
	       ax_clock_mono_us() < end) {
		m = next_request();
		if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL) {
			Ax__QueueMessage dq = AX__QUEUE_MESSAGE__INIT;
			dq.reply_to_seq     = m->seq;
			dq.body_case        = AX__QUEUE_MESSAGE__BODY_DISPATCH;
			dq.dispatch =
			    &(Ax__DispatchBatch) AX__DISPATCH_BATCH__INIT;
			if (!sent) {
				dq.dispatch    = &b;
				b.n_dispatches = 3;
				b.dispatches   = dp;
				sent_utc       = ax_clock_utc_us();
				sent_mono      = ax_clock_mono_us();
				sent           = 1;
			}
			answer(&dq);
		} else if (m->body_case == AX__WORKER_MESSAGE__BODY_REPORT) {
			Ax__Report *rp = m->report;
			for (size_t i = 0; i < rp->n_started; i++) {
				const char *id = rp->started[i]->run_id;
				cr_expect_str_neq(id, R_KILL,
				                  "a killed held dispatch "
				                  "started");
				if (strcmp(id, R_HELD) == 0) {
					started_utc =
					    rp->started[i]->started_at_us;
					seen = ax_clock_mono_us();
				}
			}
			for (size_t i = 0; i < rp->n_results; i++) {
				Ax__Result *r = rp->results[i];
				if (strcmp(r->run_id, R_HELD) == 0) {
					cr_expect_eq(r->status, 1, "%s",
					             r->error);
					held_done++;
				} else if (strcmp(r->run_id, R_KILL) == 0) {
					cr_expect_eq(r->status, 4, "%s",
					             r->error);
					cr_expect(strstr(r->error,
					                 "before it started"),
					          "%s", r->error);
					kill_done++;
				} else if (strcmp(r->run_id, R_FAR) == 0) {
					cr_expect_eq(r->status, 2, "%s",
					             r->error);
					cr_expect(
					    strstr(r->error,
					           "Dispatch.start_after_us"),
					    "%s", r->error);
					far_done++;
				}
			}
			answer_ack(m->seq);
		} else {
			char *cancel = NULL;
			if (m->body_case ==
			    AX__WORKER_MESSAGE__BODY_HEARTBEAT) {
				Ax__Heartbeat *hb = m->heartbeat;
				for (size_t i = 0; i < hb->n_running_run_ids;
				     i++)
					listed +=
					    strcmp(hb->running_run_ids[i],
					           R_KILL) == 0;
				/* once the other one ran and R_KILL was
				 * listed as the worker's */
				if (held_done && listed && !kill_sent) {
					cancel    = R_KILL;
					kill_sent = 1;
				}
			}
			answer_other(m, cancel);
		}
		ax__worker_message__free_unpacked(m, NULL);
	}
	cr_assert_eq(held_done, 1, "the held dispatch did not end once");
	cr_expect_geq(started_utc, sent_utc + 400 * AX_USEC_PER_MSEC,
	              "started %lld us after it was sent: before its "
	              "instant",
	              (long long) (started_utc - sent_utc));
	cr_expect_geq(seen - sent_mono, 400 * AX_USEC_PER_MSEC,
	              "Started came %lld us after the send",
	              (long long) (seen - sent_mono));
	cr_expect(listed > 0, "a heartbeat did not list the held dispatch");
	cr_expect_eq(kill_done, 1, "the held dispatch was not killed once");
	cr_expect_eq(far_done, 1, "start_after_us past 60 s not refused");
	cr_expect_eq(kill(worker, 0), 0, "the worker is alive");
}

/* A batch of n bash dispatches "sleep secs" named ids[i], each held
 * start_after_ms before its start. */
static void
held_batch(Ax__DispatchBatch *b, Ax__Dispatch *d, Ax__Dispatch **dp,
           char **ids, size_t n, const char *cmd, int64_t start_after_ms)
{
	for (size_t i = 0; i < n; i++) {
		d[i]                = dispatch(ids[i]);
		d[i].task_type      = "bash";
		d[i].command        = (char *) cmd;
		d[i].start_after_us = start_after_ms * AX_USEC_PER_MSEC;
		dp[i]               = &d[i];
	}
	b->n_dispatches = n;
	b->dispatches   = dp;
}

/* Answers the Pull m with b (NULL: no dispatch). */
static void
answer_pull(const Ax__WorkerMessage *m, Ax__DispatchBatch *b)
{
	Ax__QueueMessage  dq    = AX__QUEUE_MESSAGE__INIT;
	Ax__DispatchBatch empty = AX__DISPATCH_BATCH__INIT;

	dq.reply_to_seq = m->seq;
	dq.body_case    = AX__QUEUE_MESSAGE__BODY_DISPATCH;
	dq.dispatch     = b != NULL ? b : &empty;
	answer(&dq);
}

static char *prefetch_ids[6] = {
	"01890000-0000-7000-8000-0000000000d1",
	"01890000-0000-7000-8000-0000000000d2",
	"01890000-0000-7000-8000-0000000000d3",
	"01890000-0000-7000-8000-0000000000d4",
	"01890000-0000-7000-8000-0000000000d5",
	"01890000-0000-7000-8000-0000000000d6",
};

static int
prefetch_index(const char *run_id)
{
	for (int i = 0; i < 6; i++)
		if (strcmp(run_id, prefetch_ids[i]) == 0)
			return i;
	return -1;
}

/*
 * The worker takes up to worker.prefetch (by default as many as its
 * slots: 4) dispatches held for an instant beyond its free slots. Sent 6
 * for the same instant, it starts 4 at the instant and the other 2 only
 * as those end: never more than its 4 slots at once, and each of the 6
 * once.
 */
Test(worker_peer, held_dispatches_beyond_the_slots_start_as_slots_free)
{
	Ax__WorkerMessage *m;
	Ax__DispatchBatch  b = AX__DISPATCH_BATCH__INIT;
	Ax__Dispatch       d[6], *dp[6];
	int64_t            started[6] = { 0 }, ended[6] = { 0 }, end;
	int                sent = 0, nstart = 0, nend = 0, reg_prefetch = 0;
	int                before_first_end = 0;

	m = next_request();
	while (m->body_case != AX__WORKER_MESSAGE__BODY_REGISTER) {
		answer_ack(m->seq);
		ax__worker_message__free_unpacked(m, NULL);
		m = next_request();
	}
	reg_prefetch = m->register_->prefetch;
	{
		Ax__QueueMessage  q  = AX__QUEUE_MESSAGE__INIT;
		Ax__RegisterReply rr = AX__REGISTER_REPLY__INIT;
		q.reply_to_seq       = m->seq;
		q.body_case          = AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY;
		q.register_reply     = &rr;
		rr.session           = 7;
		rr.heartbeat_interval_ms = 1000;
		rr.lease_ttl_ms          = 10000;
		answer(&q);
	}
	ax__worker_message__free_unpacked(m, NULL);
	cr_expect_eq(reg_prefetch, 4, "Register.prefetch %d, want the slots",
	             reg_prefetch);
	held_batch(&b, d, dp, prefetch_ids, 6, "sleep 0.6", 200);
	end = ax_clock_mono_us() + 20 * AX_USEC_PER_SEC;
	while (nend < 6 && ax_clock_mono_us() < end) {
		m = next_request();
		if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL) {
			if (!sent)
				cr_expect_eq(m->pull->free_slots, 4);
			answer_pull(m, sent ? NULL : &b);
			sent = 1;
		} else if (m->body_case == AX__WORKER_MESSAGE__BODY_REPORT) {
			Ax__Report *rp = m->report;
			for (size_t i = 0; i < rp->n_started; i++) {
				int k = prefetch_index(rp->started[i]->run_id);
				cr_assert_geq(k, 0);
				cr_expect_eq(started[k], 0, "%s started twice",
				             prefetch_ids[k]);
				started[k] = rp->started[i]->started_at_us;
				nstart++;
			}
			for (size_t i = 0; i < rp->n_results; i++) {
				int k = prefetch_index(rp->results[i]->run_id);
				cr_assert_geq(k, 0);
				cr_expect_eq(rp->results[i]->status, 1,
				             "%s: %s", prefetch_ids[k],
				             rp->results[i]->error);
				if (ended[k] == 0)
					nend++;
				ended[k] = rp->results[i]->ended_at_us;
			}
			answer_ack(m->seq);
		} else {
			answer_other(m, NULL);
		}
		ax__worker_message__free_unpacked(m, NULL);
	}
	cr_assert_eq(nend, 6, "%d of 6 ended", nend);
	cr_expect_eq(nstart, 6);
	int64_t first_end = INT64_MAX;
	for (int i = 0; i < 6; i++)
		if (ended[i] < first_end)
			first_end = ended[i];
	for (int i = 0; i < 6; i++)
		before_first_end += started[i] < first_end;
	cr_expect_eq(before_first_end, 4,
	             "%d started before the first one ended, want the 4 "
	             "slots",
	             before_first_end);
	/* at no instant more than 4 running: each start finds at most 3
	 * others started and not yet ended */
	for (int i = 0; i < 6; i++) {
		int busy = 0;
		for (int j = 0; j < 6; j++)
			busy += j != i && started[j] <= started[i] &&
			    ended[j] > started[i];
		cr_expect_leq(busy, 3, "%s started beside %d running",
		              prefetch_ids[i], busy);
	}
	cr_expect_eq(kill(worker, 0), 0, "the worker is alive");
}

/*
 * The queue asks back (HeartbeatReply.withdraw_run_ids) a dispatch held
 * beyond the slots that has not started, and one that runs: the first is
 * dropped and reported in Report.withdrawn_run_ids, never started; the
 * running one is not touched and ends as it would.
 */
Test(worker_peer, a_held_dispatch_asked_back_is_dropped_unstarted)
{
	Ax__WorkerMessage *m;
	Ax__DispatchBatch  b = AX__DISPATCH_BATCH__INIT;
	Ax__Dispatch       d[5], *dp[5];
	int64_t            end, sent_mono = 0;
	int                sent = 0, asked = 0, back = 0, nend = 0;
	int                started[5] = { 0 };

	cr_assert(answer_register(10000, 10));
	/* long enough for a heartbeat (worker.heartbeat: 2 s) */
	held_batch(&b, d, dp, prefetch_ids, 5, "sleep 3", 100);
	end = ax_clock_mono_us() + 20 * AX_USEC_PER_SEC;
	while (nend < 4 && ax_clock_mono_us() < end) {
		m = next_request();
		if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL) {
			if (!sent)
				sent_mono = ax_clock_mono_us();
			answer_pull(m, sent ? NULL : &b);
			sent = 1;
		} else if (m->body_case == AX__WORKER_MESSAGE__BODY_REPORT) {
			Ax__Report *rp = m->report;
			for (size_t i = 0; i < rp->n_started; i++)
				started[prefetch_index(
				    rp->started[i]->run_id)]++;
			for (size_t i = 0; i < rp->n_results; i++) {
				cr_expect_str_neq(rp->results[i]->run_id,
				                  prefetch_ids[4],
				                  "a dispatch given back ran");
				cr_expect_eq(rp->results[i]->status, 1);
				nend++;
			}
			for (size_t i = 0; i < rp->n_withdrawn_run_ids; i++) {
				cr_expect_str_eq(rp->withdrawn_run_ids[i],
				                 prefetch_ids[4]);
				back++;
			}
			answer_ack(m->seq);
		} else if (m->body_case ==
		               AX__WORKER_MESSAGE__BODY_HEARTBEAT &&
		           sent && !asked &&
		           ax_clock_mono_us() - sent_mono >
		               300 * AX_USEC_PER_MSEC) {
			/* the fifth waits for a slot; the first runs */
			Ax__QueueMessage   hq = AX__QUEUE_MESSAGE__INIT;
			Ax__HeartbeatReply hr = AX__HEARTBEAT_REPLY__INIT;
			char *ask[2]    = { prefetch_ids[4], prefetch_ids[0] };
			hq.reply_to_seq = m->seq;
			hq.body_case = AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY;
			hq.heartbeat_reply    = &hr;
			hr.acked_seq          = m->seq;
			hr.n_withdraw_run_ids = 2;
			hr.withdraw_run_ids   = ask;
			answer(&hq);
			asked = 1;
		} else {
			answer_other(m, NULL);
		}
		ax__worker_message__free_unpacked(m, NULL);
	}
	cr_assert(asked, "no heartbeat came to ask back on");
	cr_expect_eq(back, 1, "given back %d times", back);
	cr_expect_eq(nend, 4, "%d of the 4 started ended", nend);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(started[i], 1, "%s started %d times",
		             prefetch_ids[i], started[i]);
	cr_expect_eq(started[4], 0, "the dispatch given back started");
	cr_expect_eq(kill(worker, 0), 0, "the worker is alive");
}

/*
 * A queue that stops answering without closing the connection (its host
 * frozen or cut off, a NAT that dropped the flow: nothing reports the
 * loss to the worker): before the worker's lease lapses it connects
 * again, and the lease renewed on the new connection fences nothing.
 * Nothing that comes on the silent one is answered, as nothing would be.
 */
Test(worker_peer, silent_queue_is_left_for_a_new_connection)
{
	Ax__WorkerMessage *m;
	nng_pipe           first;
	int64_t            end;
	int                again = 0;
	char               path[128], log[8192] = "";
	FILE              *f;
	size_t             n;

	cr_assert(answer_register(3000, 10));
	first = last_pipe;
	/* the lease (3 s) and a few seconds of slack */
	end = ax_clock_mono_us() + 6 * AX_USEC_PER_SEC;
	while (again < 3 && ax_clock_mono_us() < end) {
		m = next_request();
		if (nng_pipe_id(last_pipe) == nng_pipe_id(first)) {
			ax__worker_message__free_unpacked(m, NULL);
			continue; /* the silent connection */
		}
		again++;
		if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL) {
			Ax__QueueMessage dq = AX__QUEUE_MESSAGE__INIT;
			dq.reply_to_seq     = m->seq;
			dq.body_case        = AX__QUEUE_MESSAGE__BODY_DISPATCH;
			dq.dispatch =
			    &(Ax__DispatchBatch) AX__DISPATCH_BATCH__INIT;
			answer(&dq);
		} else {
			answer_other(m, NULL);
		}
		ax__worker_message__free_unpacked(m, NULL);
	}
	cr_assert(again > 0,
	          "the worker kept asking on the silent connection and did "
	          "not connect again within 6 s");
	/* its lease would have lapsed by now on the old connection */
	ax_clock_sleep_us(1000 * AX_USEC_PER_MSEC);
	snprintf(path, sizeof(path), "%s/worker.out", dir);
	if ((f = fopen(path, "r")) != NULL) {
		n      = fread(log, 1, sizeof(log) - 1, f);
		log[n] = '\0';
		fclose(f);
	}
	cr_expect(strstr(log, "connecting to") != NULL, "%s", log);
	cr_expect(strstr(log, "lease lapsed") == NULL,
	          "the new connection came too late: the worker fenced: %s",
	          log);
	cr_expect_eq(kill(worker, 0), 0, "the worker is alive");
}

/*
 * worker.start_spin is a busy wait before each held start: a value past
 * 100 ms (a worker spinning for seconds) is refused at start, by name,
 * and the worker does not run.
 */
Test(worker_peer, a_start_spin_past_100ms_is_refused_by_name)
{
	const char *bin = getenv("AX_WORKER");
	char        out[128], text[2048] = "";
	int         status = 0;
	pid_t       p;
	FILE       *f;
	size_t      n;

	snprintf(out, sizeof(out), "%s/spin.out", dir);
	p = fork();
	cr_assert(p >= 0);
	if (p == 0) {
		FILE *e = freopen(out, "w", stderr);
		(void) e;
		setenv("AX_WORKER_START_SPIN", "1s", 1);
		execl(bin, bin, "--server", addr, "--group", "g", "--slots",
		      "4", "--id", "wp-spin", (char *) NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && waitpid(p, &status, WNOHANG) == 0; i++)
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	if (waitpid(p, &status, WNOHANG) == 0) {
		kill(p, SIGKILL);
		waitpid(p, &status, 0);
		cr_assert_fail("a worker with a 1 s start_spin kept running");
	}
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0, "status %d",
	          status);
	cr_assert_not_null(f = fopen(out, "r"));
	n       = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	cr_expect(strstr(text, "worker.start_spin") != NULL &&
	              strstr(text, "100ms") != NULL,
	          "%s", text);
}

#define CLOCK_HELD 3
static char *clock_ids[CLOCK_HELD] = {
	"01890000-0000-7000-8000-0000000000e1",
	"01890000-0000-7000-8000-0000000000e2",
	"01890000-0000-7000-8000-0000000000e3",
};

/*
 * Sends 3 noop dispatches held start_after_us = 1 s, whose due instants
 * (due_at_us, UTC) are: [0] 300 ms after the send, [1] 30 s before it
 * (a stepped clock or a bad value), [2] none. Each one's start is put in
 * at[i], in microseconds after the send (UTC).
 */
static void
held_on_the_clock(int64_t at[CLOCK_HELD])
{
	Ax__WorkerMessage *m;
	Ax__DispatchBatch  b = AX__DISPATCH_BATCH__INIT;
	Ax__Dispatch       d[CLOCK_HELD], *dp[CLOCK_HELD];
	int64_t            sent = 0, end;
	int                done = 0;

	cr_assert(answer_register(10000, 10));
	for (int i = 0; i < CLOCK_HELD; i++) {
		d[i]                = dispatch(clock_ids[i]);
		d[i].start_after_us = AX_USEC_PER_SEC;
		dp[i]               = &d[i];
		at[i]               = -1;
	}
	b.n_dispatches = CLOCK_HELD;
	b.dispatches   = dp;
	end            = ax_clock_mono_us() + 15 * AX_USEC_PER_SEC;
	while (done < CLOCK_HELD && ax_clock_mono_us() < end) {
		m = next_request();
		if (m->body_case == AX__WORKER_MESSAGE__BODY_PULL) {
			if (sent == 0) {
				sent           = ax_clock_utc_us();
				d[0].due_at_us = sent + 300 * AX_USEC_PER_MSEC;
				d[1].due_at_us = sent - 30 * AX_USEC_PER_SEC;
				answer_pull(m, &b);
			} else {
				answer_pull(m, NULL);
			}
		} else if (m->body_case == AX__WORKER_MESSAGE__BODY_REPORT) {
			Ax__Report *rp = m->report;
			for (size_t i = 0; i < rp->n_started; i++)
				for (int k = 0; k < CLOCK_HELD; k++)
					if (strcmp(rp->started[i]->run_id,
					           clock_ids[k]) == 0 &&
					    at[k] < 0) {
						at[k] = rp->started[i]
						            ->started_at_us -
						    sent;
						done++;
					}
			answer_ack(m->seq);
		} else {
			answer_other(m, NULL);
		}
		ax__worker_message__free_unpacked(m, NULL);
	}
	for (int i = 0; i < CLOCK_HELD; i++)
		cr_assert_geq(at[i], 0, "held dispatch %d did not start", i);
}

/*
 * A queue on the worker's host (ipc://) reads the worker's clocks: a
 * held dispatch starts at its due instant, not start_after_us after the
 * reply arrived (which is later by the reply's transit; here due_at_us
 * is made 0.7 s earlier than the count to show which one the worker
 * took). A due instant more than a second before the count is not
 * believed, and one not sent leaves the count.
 */
Test(worker_peer, on_the_queue_host_a_held_start_comes_at_its_due_instant)
{
	int64_t at[CLOCK_HELD];

	held_on_the_clock(at);
	cr_expect(at[0] >= 300 * AX_USEC_PER_MSEC &&
	              at[0] < 900 * AX_USEC_PER_MSEC,
	          "started %lld us after the send; due at 300 ms",
	          (long long) at[0]);
	cr_expect_geq(at[1], AX_USEC_PER_SEC,
	              "a due instant 30 s back started it after %lld us",
	              (long long) at[1]);
	cr_expect_geq(at[2], AX_USEC_PER_SEC,
	              "without a due instant it started after %lld us",
	              (long long) at[2]);
}

/* A queue reached over TCP may be on another host, whose clock is not
 * ours: every held dispatch starts start_after_us after the reply. */
Test(worker_peer_tcp, over_tcp_a_held_start_counts_from_the_reply)
{
	int64_t at[CLOCK_HELD];

	held_on_the_clock(at);
	for (int i = 0; i < CLOCK_HELD; i++)
		cr_expect_geq(at[i], AX_USEC_PER_SEC,
		              "held dispatch %d started %lld us after the "
		              "send, before its 1 s",
		              i, (long long) at[i]);
}
