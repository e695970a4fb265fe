/*
 * test_actor.c - unit tests of the actor runtime (engine/actor.c):
 * per-sender order, batching under load, one envelope per destination,
 * backpressure (bounded inbox, AX_EAGAIN / blocking), shutdown with items
 * in flight (drained or counted), handler errors logged and survived,
 * deadlines, malformed envelopes and every configuration error.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actor.h"
#include "clock.h"
#include "commands.pb-c.h"
#include "log.h"

#define MAX_SENDERS 8

/* Item payload used by these tests. */
typedef struct payload {
	uint32_t sender; /* index of the original sender */
	uint32_t seq;    /* per-sender sequence, from 0 */
} payload;

/* State of a recording actor; the test owns it (no fini). */
typedef struct rec {
	_Atomic uint64_t n;            /* items handled */
	_Atomic int      order_errors; /* items out of per-sender order */
	_Atomic int      entered;      /* handler calls started */
	uint32_t         next[MAX_SENDERS];
	const char      *forward[2]; /* forward every item to these */
	int              fail_seq;   /* return AX_EINVAL on this seq (-1) */
	int              sleep_us;   /* per batch */
	int              tick_send;  /* tick sends one item to forward[0] */
	_Atomic int      ticks;
	int64_t          tick_at;   /* mono time of the last tick */
	int              gate_open; /* handler waits until open */
	pthread_mutex_t  mu;
	pthread_cond_t   cv;
} rec;

static void
rec_init(rec *r)
{
	memset(r, 0, sizeof(*r));
	r->fail_seq  = -1;
	r->gate_open = 1;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
}

static void
gate_set(rec *r, int open)
{
	pthread_mutex_lock(&r->mu);
	r->gate_open = open;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static ax_err
rec_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	rec   *r  = state;
	ax_err rv = AX_OK;

	atomic_fetch_add(&r->entered, 1);
	pthread_mutex_lock(&r->mu);
	while (!r->gate_open)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < n; i++) {
		payload p;
		cr_assert_eq(items[i].len, sizeof(p));
		memcpy(&p, items[i].data, sizeof(p));
		if (p.sender >= MAX_SENDERS || r->next[p.sender] != p.seq)
			atomic_fetch_add(&r->order_errors, 1);
		else
			r->next[p.sender]++;
		for (int d = 0; d < 2 && r->forward[d]; d++)
			cr_assert_eq(ax_actor_send(self, r->forward[d],
			                           AX_ITEM_USER, &p,
			                           sizeof(p)),
			             AX_OK, "%s", ax_err_detail());
		if ((int) p.seq == r->fail_seq)
			rv =
			    ax_err_set(AX_EINVAL, "seq %u is poisoned", p.seq);
		atomic_fetch_add(&r->n, 1);
	}
	if (r->sleep_us)
		ax_clock_sleep_us(r->sleep_us);
	return rv;
}

static ax_err
rec_tick(ax_actor *self, void *state, int64_t now)
{
	rec    *r  = state;
	payload p  = { 7, 0 };
	r->tick_at = now;
	atomic_fetch_add(&r->ticks, 1);
	if (r->tick_send)
		return ax_actor_send(self, r->forward[0], AX_ITEM_USER, &p,
		                     sizeof(p));
	return AX_OK;
}

static const ax_actor_ops rec_ops = {
	.handle = rec_handle,
	.tick   = rec_tick,
};

/* Waits up to ms for *v >= want. */
static int
wait_u64(_Atomic uint64_t *v, uint64_t want, int ms)
{
	for (int i = 0; i < ms && atomic_load(v) < want; i++)
		ax_clock_sleep_us(1000);
	return atomic_load(v) >= want;
}

static ax_actor_system *
new_sys(void)
{
	ax_actor_system *s = NULL;
	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	return s;
}

static ax_actor *
add(ax_actor_system *s, const char *name, rec *r, uint32_t depth,
    uint32_t max_batch)
{
	ax_actor       *a   = NULL;
	ax_actor_config cfg = { .name        = name,
		                .inbox_depth = depth,
		                .max_batch   = max_batch };
	cr_assert_eq(ax_actor_system_add(s, &cfg, &rec_ops, r, &a), AX_OK,
	             "%s", ax_err_detail());
	return a;
}

static ax_err
send1(ax_actor_client *c, const char *dest, uint32_t sender, uint32_t seq,
      int flags)
{
	payload       p  = { sender, seq };
	ax_actor_item it = { .type = AX_ITEM_USER,
		             .len  = sizeof(p),
		             .data = &p };
	return ax_actor_client_send(c, dest, &it, 1, flags);
}

TestSuite(actor, .timeout = 60);

/* ------------------------------------------------------------ ordering */

struct sender_arg {
	ax_actor_system *sys;
	uint32_t         idx;
	uint32_t         count;
	const char      *dest;
};

static void *
sender_main(void *arg)
{
	struct sender_arg *sa = arg;
	ax_actor_client   *c  = NULL;
	char               name[16];
	snprintf(name, sizeof(name), "client%u", sa->idx);
	cr_assert_eq(ax_actor_client_new(sa->sys, name, &c), AX_OK);
	for (uint32_t i = 0; i < sa->count; i++)
		cr_assert_eq(send1(c, sa->dest, sa->idx, i, 0), AX_OK, "%s",
		             ax_err_detail());
	ax_actor_client_free(c);
	return NULL;
}

Test(actor, per_sender_fifo_through_two_hops)
{
	ax_actor_system  *s = new_sys();
	rec               a, b;
	pthread_t         th[4];
	struct sender_arg sa[4];
	enum { PER = 3000 };

	rec_init(&a);
	rec_init(&b);
	a.forward[0] = "b";
	add(s, "a", &a, 16, 0);
	add(s, "b", &b, 16, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK, "%s", ax_err_detail());
	for (uint32_t i = 0; i < 4; i++) {
		sa[i] = (struct sender_arg) { s, i, PER, "a" };
		pthread_create(&th[i], NULL, sender_main, &sa[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_assert(wait_u64(&b.n, 4 * PER, 10000), "b got %llu",
	          (unsigned long long) atomic_load(&b.n));
	cr_assert_eq(atomic_load(&a.order_errors), 0);
	cr_assert_eq(atomic_load(&b.order_errors), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(b.next[i], PER);
	ax_actor_stop_report rep;
	ax_actor_system_stop(s, AX_USEC_PER_SEC, &rep);
	cr_assert_eq(rep.drained, 1);
	cr_assert_eq(rep.dropped, 0);
	ax_actor_system_free(s);
}

/* ------------------------------------------------------------ batching */

Test(actor, drains_batches_when_receiver_is_slower)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              r;
	ax_actor        *a;
	ax_actor_stats   st;
	enum { N = 2000 };

	rec_init(&r);
	r.sleep_us = 2000; /* 2 ms per batch: far slower than the sender */
	a          = add(s, "slow", &r, 64, 100);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(send1(c, "slow", 0, i, 0), AX_OK);
	cr_assert(wait_u64(&r.n, N, 20000));
	ax_actor_stats_get(a, &st);
	cr_assert_eq(st.items_in, N);
	cr_assert_eq(st.envelopes_in, N); /* one item per client envelope */
	cr_assert_gt(st.max_batch, 1, "never batched");
	cr_assert_leq(st.max_batch, 100, "max_batch not honoured");
	cr_assert_lt(st.batches, N / 4, "%llu handler calls for %d items",
	             (unsigned long long) st.batches, N);
	cr_assert_eq(atomic_load(&r.order_errors), 0);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

Test(actor, one_envelope_per_destination_per_drain)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              fan, x, y;
	ax_actor        *a;
	ax_actor_stats   st;
	enum { N = 500 };

	rec_init(&fan);
	rec_init(&x);
	rec_init(&y);
	fan.forward[0] = "x";
	fan.forward[1] = "y";
	fan.sleep_us   = 1000;
	a              = add(s, "fan", &fan, 64, 0);
	add(s, "x", &x, 64, 0);
	add(s, "y", &y, 64, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(send1(c, "fan", 0, i, 0), AX_OK);
	cr_assert(wait_u64(&x.n, N, 10000));
	cr_assert(wait_u64(&y.n, N, 10000));
	ax_actor_stats_get(a, &st);
	cr_assert_eq(st.items_out, 2 * N);
	cr_assert_eq(st.envelopes_out, 2 * st.batches,
	             "%llu envelopes for %llu batches",
	             (unsigned long long) st.envelopes_out,
	             (unsigned long long) st.batches);
	cr_assert_lt(st.batches, N, "no batching happened");
	cr_assert_eq(atomic_load(&x.order_errors), 0);
	cr_assert_eq(atomic_load(&y.order_errors), 0);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

/* -------------------------------------------------------- backpressure */

Test(actor, full_inbox_gives_eagain_and_bounds_memory)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              r;
	uint32_t         sent = 0;
	ax_err           rv   = AX_OK;

	rec_init(&r);
	r.gate_open = 0;
	add(s, "gated", &r, 4, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	/* Retry a little after EAGAIN so nng's async hand-off settles. */
	for (int again = 0; again < 20 && sent < 1000;) {
		rv = send1(c, "gated", 0, sent, AX_ACTOR_NONBLOCK);
		if (rv == AX_OK) {
			sent++;
			again = 0;
			continue;
		}
		cr_assert_eq(rv, AX_EAGAIN, "%s", ax_err_detail());
		again++;
		ax_clock_sleep_us(2000);
	}
	cr_assert_eq(rv, AX_EAGAIN);
	/* inbox 4 + sender buffer 4 + one in the handler + a few held in
	 * nng's pipes (5 measured): bounded, whatever the sender does. */
	cr_assert_leq(sent, 4 + AX_ACTOR_SENDBUF + 1 + 8,
	              "%u envelopes accepted by a full inbox", sent);
	cr_assert_geq(sent, 4);
	gate_set(&r, 1);
	cr_assert(wait_u64(&r.n, sent, 5000));
	/* Room again: sends succeed and order holds across the stall. */
	for (int i = 0; i < 10; i++)
		cr_assert_eq(send1(c, "gated", 0, sent++, 0), AX_OK);
	cr_assert(wait_u64(&r.n, sent, 5000));
	cr_assert_eq(atomic_load(&r.order_errors), 0);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

struct blocker {
	ax_actor_system *sys;
	_Atomic uint32_t done;
};

static void *
blocking_sender(void *arg)
{
	struct blocker  *b = arg;
	ax_actor_client *c = NULL;
	cr_assert_eq(ax_actor_client_new(b->sys, "blk", &c), AX_OK);
	for (uint32_t i = 0; i < 200; i++) {
		cr_assert_eq(send1(c, "gated", 0, i, 0), AX_OK);
		atomic_fetch_add(&b->done, 1);
	}
	ax_actor_client_free(c);
	return NULL;
}

Test(actor, full_inbox_blocks_a_blocking_sender)
{
	ax_actor_system *s = new_sys();
	rec              r;
	pthread_t        th;
	struct blocker   b = { s, 0 };

	rec_init(&r);
	r.gate_open = 0;
	add(s, "gated", &r, 4, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	pthread_create(&th, NULL, blocking_sender, &b);
	ax_clock_sleep_us(300000);
	cr_assert_lt(atomic_load(&b.done), 20, "sender not blocked: %u sent",
	             atomic_load(&b.done));
	gate_set(&r, 1);
	pthread_join(th, NULL);
	cr_assert(wait_u64(&r.n, 200, 5000));
	cr_assert_eq(atomic_load(&r.order_errors), 0);
	ax_actor_system_free(s);
}

Test(actor, nonblocking_actor_keeps_outbox_while_destination_is_full)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              fwd, sink;
	ax_actor        *a = NULL;
	ax_actor_stats   st;
	ax_actor_config  cfg = { .name = "fwd", .send_nonblock = 1 };
	enum { N = 300 };

	rec_init(&fwd);
	rec_init(&sink);
	fwd.forward[0] = "sink";
	sink.gate_open = 0;
	cr_assert_eq(ax_actor_system_add(s, &cfg, &rec_ops, &fwd, &a), AX_OK);
	add(s, "sink", &sink, 2, 1);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	/* the first items one handler call each, so fwd forwards more
	 * envelopes than sink's inbox holds whatever the machine's speed
	 * (a slow fwd would otherwise take everything in one batch) */
	for (uint32_t i = 0; i < N; i++) {
		cr_assert_eq(send1(c, "fwd", 0, i, 0), AX_OK);
		if (i < 10)
			cr_assert(wait_u64(&fwd.n, i + 1, 5000));
	}
	/* fwd handled everything although sink does not move. */
	cr_assert(wait_u64(&fwd.n, N, 5000), "forwarder blocked");
	ax_clock_sleep_us(20000);
	ax_actor_stats_get(a, &st);
	cr_assert_gt(st.eagain, 0);
	cr_assert_lt(st.items_out, N);
	gate_set(&sink, 1);
	cr_assert(wait_u64(&sink.n, N, 10000));
	cr_assert_eq(atomic_load(&sink.order_errors), 0);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

/* ------------------------------------------------------------ shutdown */

Test(actor, stop_drains_in_flight_items)
{
	ax_actor_system     *s = new_sys();
	ax_actor_client     *c = NULL;
	rec                  a, b;
	ax_actor_stop_report rep;
	enum { N = 400 };

	rec_init(&a);
	rec_init(&b);
	a.forward[0] = "b";
	b.sleep_us   = 500;
	add(s, "a", &a, 8, 4);
	add(s, "b", &b, 8, 4);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(send1(c, "a", 0, i, 0), AX_OK);
	cr_assert_lt(atomic_load(&b.n), N, "nothing left in flight");
	ax_actor_system_stop(s, 10 * AX_USEC_PER_SEC, &rep);
	cr_assert_eq(rep.drained, 1);
	cr_assert_eq(rep.dropped, 0);
	cr_assert_eq(atomic_load(&b.n), N);
	/* Stopped: clients are refused, a second stop is harmless. */
	cr_assert_eq(send1(c, "a", 0, N, 0), AX_ECLOSED);
	ax_actor_system_stop(s, 0, &rep);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

Test(actor, stop_after_timeout_counts_every_dropped_item)
{
	ax_actor_system     *s = new_sys();
	ax_actor_client     *c = NULL;
	rec                  a, b;
	ax_actor_stop_report rep;
	enum { N = 300 };

	rec_init(&a);
	rec_init(&b);
	a.forward[0] = "b";
	/* 20 ms per batch of at most 2 (a batch takes one envelope of a's
	 * forwards, up to a's inbox of items): what is in flight at the
	 * stop needs several batches, far more than the 30 ms timeout */
	b.sleep_us = 20000;
	add(s, "a", &a, 8, 0);
	add(s, "b", &b, 8, 2);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(send1(c, "a", 0, i, 0), AX_OK);
	ax_actor_system_stop(s, 30000, &rep);
	cr_assert_eq(rep.drained, 0);
	cr_assert_gt(rep.dropped, 0);
	/* Every item was either handled by b or counted as dropped. */
	cr_assert_eq(atomic_load(&b.n) + rep.dropped, N,
	             "handled %llu + dropped %llu != %d",
	             (unsigned long long) atomic_load(&b.n),
	             (unsigned long long) rep.dropped, N);
	cr_assert_eq(atomic_load(&b.order_errors), 0);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

Test(actor, free_without_start_or_stop_is_clean)
{
	ax_actor_system *s = new_sys();
	rec              r;
	rec_init(&r);
	add(s, "idle", &r, 0, 0);
	ax_actor_system_free(s);
	ax_actor_system_free(NULL);

	s = new_sys();
	add(s, "busy", &r, 0, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	ax_actor_system_free(s); /* stops implicitly */
}

/* ------------------------------------------------------ handler errors */

Test(actor, handler_error_is_logged_with_actor_name_and_actor_goes_on)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              r;
	ax_actor        *a;
	ax_actor_stats   st;
	char             path[] = "/tmp/ax_actor_logXXXXXX";
	int              fd     = mkstemp(path);
	char             buf[8192];
	ssize_t          len;

	cr_assert_geq(fd, 0);
	ax_log_init(AX_LOG_INFO, fd);
	rec_init(&r);
	r.fail_seq = 3;
	a          = add(s, "picky", &r, 0, 1);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	for (uint32_t i = 0; i < 10; i++)
		cr_assert_eq(send1(c, "picky", 0, i, 0), AX_OK);
	cr_assert(wait_u64(&r.n, 10, 5000), "actor died after the error");
	ax_actor_stats_get(a, &st);
	cr_assert_eq(st.errors, 1);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
	len = pread(fd, buf, sizeof(buf) - 1, 0);
	cr_assert_gt(len, 0);
	buf[len] = '\0';
	cr_assert(strstr(buf, "\"component\":\"picky\""), "%s", buf);
	cr_assert(strstr(buf, "AX_EINVAL"), "%s", buf);
	cr_assert(strstr(buf, "seq 3 is poisoned"), "%s", buf);
	close(fd);
	unlink(path);
}

/* ------------------------------------------------------------ deadlines */

static ax_err
arm_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	ax_actor_set_deadline(self, ax_clock_mono_us() + 30000);
	return rec_handle(self, state, items, n);
}

static const ax_actor_ops arm_ops = { .handle = arm_handle, .tick = rec_tick };

Test(actor, deadline_calls_tick_once_and_tick_can_send)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              t, sink;
	ax_actor_config  cfg = { .name = "timer" };
	int64_t          t0;

	rec_init(&t);
	rec_init(&sink);
	t.forward[0] = NULL;
	t.tick_send  = 1;
	cr_assert_eq(ax_actor_system_add(s, &cfg, &arm_ops, &t, NULL), AX_OK);
	add(s, "sink", &sink, 0, 0);
	t.forward[0] = "sink"; /* used only by tick */
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	t0 = ax_clock_mono_us();
	cr_assert_eq(send1(c, "timer", 0, 0, 0), AX_OK);
	/* The handler forwarded the item to sink, then tick sent one more. */
	cr_assert(wait_u64(&sink.n, 2, 2000));
	cr_assert_eq(atomic_load(&t.ticks), 1);
	cr_assert_geq(t.tick_at - t0, 30000, "tick too early");
	cr_assert_lt(t.tick_at - t0, 500000, "tick far too late");
	ax_clock_sleep_us(100000);
	cr_assert_eq(atomic_load(&t.ticks), 1, "deadline not cleared");
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

/* -------------------------------------------------------------- protobuf */

static _Atomic int pb_ok;

static ax_err
pb_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		Ax__Command *cmd =
		    ax__command__unpack(NULL, items[i].len, items[i].data);
		if (cmd == NULL)
			return ax_err_set(AX_EPROTO, "bad command");
		if (items[i].type == AX_ITEM_COMMAND &&
		    cmd->body_case == AX__COMMAND__BODY_DUE &&
		    strcmp(cmd->due->dag, "etl") == 0 &&
		    cmd->due->due_at_us == 42 &&
		    strcmp(items[i].from, "src") == 0)
			atomic_fetch_add(&pb_ok, 1);
		ax__command__free_unpacked(cmd, NULL);
	}
	return AX_OK;
}

static ax_err
src_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	Ax__Command cmd = AX__COMMAND__INIT;
	Ax__Due     due = AX__DUE__INIT;
	due.dag         = "etl";
	due.due_at_us   = 42;
	cmd.body_case   = AX__COMMAND__BODY_DUE;
	cmd.due         = &due;
	for (size_t i = 0; i < n; i++) {
		ax_err rv =
		    ax_actor_send_pb(self, "dst", AX_ITEM_COMMAND, &cmd.base);
		if (rv != AX_OK)
			return rv;
	}
	return AX_OK;
}

Test(actor, carries_packed_protobuf_commands)
{
	ax_actor_system          *s    = new_sys();
	ax_actor_client          *c    = NULL;
	ax_actor_config           src  = { .name = "src" };
	ax_actor_config           dst  = { .name = "dst" };
	static const ax_actor_ops sops = { .handle = src_handle };
	static const ax_actor_ops dops = { .handle = pb_handle };

	cr_assert_eq(ax_actor_system_add(s, &src, &sops, NULL, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_add(s, &dst, &dops, NULL, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	for (uint32_t i = 0; i < 50; i++)
		cr_assert_eq(send1(c, "src", 0, i, 0), AX_OK);
	for (int i = 0; i < 2000 && atomic_load(&pb_ok) < 50; i++)
		ax_clock_sleep_us(1000);
	cr_assert_eq(atomic_load(&pb_ok), 50);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

/* ------------------------------------------------------------ bad input */

Test(actor, malformed_envelopes_are_dropped_and_counted)
{
	ax_actor_system    *s = new_sys();
	ax_actor_client    *c = NULL;
	rec                 r;
	ax_actor           *a;
	ax_actor_stats      st;
	nng_socket          raw;
	static const char  *garbage[] = { "", "AXE1", "hello world",
		                          "AXE1\0\0\0\0\0\0\0\0\x05"
		                           "abc" };
	static const size_t glen[]    = { 0, 4, 11, 16 };

	rec_init(&r);
	a = add(s, "victim", &r, 0, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(nng_push0_open(&raw), 0);
	cr_assert_eq(nng_dial(raw, ax_actor_url(a), NULL, 0), 0);
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(nng_send(raw, (void *) garbage[i], glen[i], 0),
		             0);
	/* A truncated copy of a valid envelope, too. */
	uint8_t env[64] = { 'A', 'X', 'E', '1' };
	env[12]         = 1;
	env[13]         = 'z';
	env[17]         = 1;                        /* one item ... */
	cr_assert_eq(nng_send(raw, env, 22, 0), 0); /* ... truncated */
	for (int i = 0; i < 2000; i++) {
		ax_actor_stats_get(a, &st);
		if (st.bad_envelopes == 5)
			break;
		ax_clock_sleep_us(1000);
	}
	cr_assert_eq(st.bad_envelopes, 5);
	cr_assert_eq(atomic_load(&r.n), 0);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	cr_assert_eq(send1(c, "victim", 0, 0, 0), AX_OK);
	cr_assert(wait_u64(&r.n, 1, 2000), "actor stopped after garbage");
	nng_close(raw);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}

/* A raw envelope from sender "z" of count items of `payload` (sender 0,
 * seq from seq0); with items 0 only the header, claiming count. */
static size_t
raw_envelope(uint8_t *b, uint32_t count, uint32_t items, uint32_t seq0)
{
	size_t off = 0;

	memcpy(b, "AXE1", 4);
	memset(b + 4, 0, 8); /* system id: not ours */
	b[12] = 1;
	b[13] = 'z';
	off   = 14;
	for (int k = 3; k >= 0; k--)
		b[off++] = (uint8_t) (count >> (8 * k));
	for (uint32_t i = 0; i < items; i++) {
		payload p = { 0, seq0 + i };
		for (int k = 3; k >= 0; k--)
			b[off++] = (uint8_t) (AX_ITEM_USER >> (8 * k));
		for (int k = 3; k >= 0; k--)
			b[off++] = (uint8_t) (sizeof(p) >> (8 * k));
		memcpy(b + off, &p, sizeof(p));
		off += sizeof(p);
	}
	return off;
}

/* Envelopes whose header claims close to 2^32 items used to wrap the
 * 32-bit item sum of a batch, so the full envelopes queued with them
 * joined the same batch and were parsed past the end of the item array
 * (heap overflow, seen as a batch of 3072 items with room for 1024). */
Test(actor, absurd_item_counts_do_not_grow_a_batch)
{
	ax_actor_system *s = new_sys();
	ax_actor_client *c = NULL;
	rec              r;
	ax_actor        *a;
	ax_actor_stats   st;
	nng_socket       raw;
	size_t           len;
	uint8_t         *b = malloc(20 + 1024 * 16);

	rec_init(&r);
	r.gate_open = 0;
	a           = add(s, "victim", &r, 0, 0);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	cr_assert_eq(send1(c, "victim", 1, 0, 0), AX_OK);
	for (int i = 0; i < 2000 && atomic_load(&r.entered) == 0; i++)
		ax_clock_sleep_us(1000);
	cr_assert_eq(atomic_load(&r.entered), 1, "the handler holds");
	/* queued while the handler holds: full, absurd, full, absurd, full */
	cr_assert_eq(nng_push0_open(&raw), 0);
	cr_assert_eq(nng_dial(raw, ax_actor_url(a), NULL, 0), 0);
	for (uint32_t e = 0; e < 5; e++) {
		if (e % 2 == 0)
			len = raw_envelope(b, 1024, 1024, e / 2 * 1024);
		else
			len = raw_envelope(b, 0xfffffc00u, 0, 0);
		cr_assert_eq(nng_send(raw, b, len, 0), 0);
	}
	ax_clock_sleep_us(300 * 1000); /* all five in the inbox ring */
	gate_set(&r, 1);
	cr_assert(wait_u64(&r.n, 1 + 3 * 1024, 5000), "handled %llu",
	          (unsigned long long) atomic_load(&r.n));
	ax_actor_stats_get(a, &st);
	cr_expect_leq(st.max_batch, 1024, "a batch of %llu items",
	              (unsigned long long) st.max_batch);
	cr_expect_eq(st.bad_envelopes, 2);
	cr_expect_eq(atomic_load(&r.order_errors), 0);
	nng_close(raw);
	ax_actor_client_free(c);
	ax_actor_system_free(s);
	free(b);
}

struct cfg_case {
	char     name[80];
	char     url[64];
	int      has_url;
	unsigned want;
};

ParameterizedTestParameters(actor, add_rejects_bad_config)
{
	static struct cfg_case cases[] = {
		{ "", "", 0, AX_EINVAL },
		{ "has space", "", 0, AX_EINVAL },
		{ "slash/name", "", 0, AX_EINVAL },
		{ "x123456789x123456789x123456789x123456789x123456789x12345678"
		  "9"
		  "xxxxx",
		  "", 0, AX_EINVAL },
		{ "ok", "http://x", 1, AX_EINVAL },
		{ "ok", "ipc://", 1, AX_EINVAL },
		{ "dup", "", 0, AX_EEXIST },
		{ "route1", "", 0, AX_EEXIST },
		{ "fine-name_1.x", "ipc:///tmp/ax-fine.sock", 1, AX_OK },
	};
	return cr_make_param_array(struct cfg_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct cfg_case *c, actor, add_rejects_bad_config)
{
	ax_actor_system *s = new_sys();
	rec              r;
	ax_actor_config  cfg = { .name = c->name,
		                 .url  = c->has_url ? c->url : NULL };
	rec_init(&r);
	add(s, "dup", &r, 0, 0);
	cr_assert_eq(ax_actor_system_route(s, "route1", "tcp://127.0.0.1:1"),
	             AX_OK);
	ax_err rv = ax_actor_system_add(s, &cfg, &rec_ops, &r, NULL);
	cr_assert_eq(rv, (ax_err) c->want, "'%s': got %s (%s)", c->name,
	             ax_errname(rv), ax_err_detail());
	if (rv != AX_OK)
		cr_assert_gt(strlen(ax_err_detail()), 0);
	ax_actor_system_free(s);
}

Test(actor, send_and_start_errors)
{
	ax_actor_system *s  = new_sys();
	ax_actor_system *s2 = new_sys();
	ax_actor_client *c  = NULL;
	rec              r, r2;
	static uint8_t   big[AX_ACTOR_ENVELOPE_MAX_BYTES];
	ax_actor_item    it = { .type = 1, .len = sizeof(big), .data = big };

	rec_init(&r);
	rec_init(&r2);
	add(s, "one", &r, 0, 0);
	cr_assert_eq(ax_actor_client_new(s, "load", &c), AX_OK);
	cr_assert_eq(send1(c, "one", 0, 0, 0), AX_ESTATE);
	cr_assert_eq(ax_actor_client_new(s, "bad name", &c), AX_EINVAL);
	cr_assert_eq(ax_actor_system_route(s, "r", "udp://x"), AX_EINVAL);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_system_start(s), AX_ESTATE);
	cr_assert_eq(ax_actor_system_add(s, &(ax_actor_config) { .name = "x" },
	                                 &rec_ops, &r, NULL),
	             AX_ESTATE);
	cr_assert_eq(send1(c, "nobody", 0, 0, 0), AX_ENOENT);
	cr_assert(strstr(ax_err_detail(), "nobody"));
	cr_assert_eq(ax_actor_client_send(c, "one", &it, 1, 0), AX_ELIMIT);
	/* Same inproc address in a second system: refused, nothing runs. */
	add(s2, "one", &r2, 0, 0);
	cr_assert_eq(ax_actor_system_start(s2), AX_EEXIST);
	cr_assert(strstr(ax_err_detail(), "inproc://ax/one"), "%s",
	          ax_err_detail());
	ax_actor_system_free(s2);
	cr_assert_eq(send1(c, "one", 0, 0, 0), AX_OK);
	cr_assert(wait_u64(&r.n, 1, 2000));
	ax_actor_client_free(c);
	ax_actor_system_free(s);
}
