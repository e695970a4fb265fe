/*
 * test_queue.c - the queue service (actors/queue/) with real ax-worker
 * processes: dispatch and results with their timings, capacity and
 * resources, priorities, aging, channels and groups, routing, kills,
 * prepared attempts, a worker killed mid-task, acknowledgements of
 * results, drain, throughput (queue_harness.h). The reconciliation after
 * a restart of axd is test_queue_recovery.c; who owns a dispatch,
 * test_queue_ownership.c.
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

/* A queue with one worker runs run_id; its result is not acknowledged,
 * so the worker sends it again after its retry interval (why: the
 * assertion's message). */
static void
result_is_sent_again(const char *run_id, const char *why)
{
	start_queue("30s", "false");
	worker_start(0, "w1", "g", 1);
	wait_workers(1);
	send_attempt(&(att) { .run_id = run_id });
	cr_assert(wait_rec(run_id, SUCCESS, 5000, NULL));
	for (int i = 0; i < 100 && count_rec(run_id, SUCCESS) < 2; i++)
		ax_clock_sleep_us(100000);
	cr_assert_geq(count_rec(run_id, SUCCESS), 2, "%s", why);
}

/* A worker's result is acknowledged only once it is committed: while the
 * result handler (here the stand-in) has not confirmed it, the worker
 * keeps sending it; once confirmed, it stops. */
Test(queue, result_acknowledged_only_after_commit)
{
	size_t k;
	confirm_on = 0;
	result_is_sent_again("r-unconfirmed",
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

/* A result committed relaxed (the result handler's commits do not wait
 * for the WAL flush) is acknowledged only once a durable commit of the
 * queue's own follows it: here the queue has no database to commit in,
 * so the worker keeps sending it. test_queue_recovery.c has the other
 * half (with a database, the queue's flush acknowledges it). */
Test(queue, relaxed_result_waits_for_a_durable_commit)
{
	confirm_relaxed = 1;
	result_is_sent_again("r-relaxed",
	                     "a result committed relaxed was acknowledged "
	                     "before any durable commit");
	confirm_relaxed = 0;
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
