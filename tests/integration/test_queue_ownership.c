/*
 * test_queue_ownership.c - who owns a dispatch: attempts sent ahead of
 * their instant, prefetch beyond free slots and what is asked back, an
 * unacknowledged dispatch, a worker that dies holding one, a blocked
 * database statement, malformed worker messages; with workers played by
 * the test (queue_harness.h).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "queue_harness.h"
#include "store_fixture.h"

TestSuite(queue, .timeout = 120);

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
