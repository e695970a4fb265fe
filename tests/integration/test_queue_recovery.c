/*
 * test_queue_recovery.c - the queue rebuilt after a kill -9 of axd: a
 * throwaway PostgreSQL holds what the previous axd left (attempts
 * DISPATCHED or RUNNING on a worker, the workers' leases), and the test
 * plays the workers over the queue's socket (protocol peers, so what each
 * one reports is exact) (queue_harness.h).
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

/* A result committed relaxed is acknowledged once it is on disk: with no
 * dispatch record to follow it, the queue flushes the WAL itself (a
 * durable commit of its own, axq_results_flush) within milliseconds, so
 * the worker sends its report once. Without the flush the worker would
 * send it again after its retry interval (2 s): test_queue.c,
 * relaxed_result_waits_for_a_durable_commit. */
Test(queue, relaxed_result_is_acknowledged_after_the_queue_flushes)
{
	int64_t iid;

	db_start();
	db_scene(30);
	iid             = db_attempt("a1", "READY", RD1, "QUEUED", NULL);
	confirm_relaxed = 1;
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	send_attempt(&(att) { .run_id = RD1, .instance_id = iid });
	cr_assert(wait_rec(RD1, SUCCESS, 10000, NULL), "RD1 did not run");
	ax_clock_sleep_us(3 * AX_USEC_PER_SEC);
	cr_expect_eq(count_rec(RD1, STARTED), 1,
	             "its start was sent again: not acknowledged");
	cr_expect_eq(count_rec(RD1, SUCCESS), 1,
	             "its result was sent again: not acknowledged");
	confirm_relaxed = 0;
	stop_all();
	db_stop();
}
