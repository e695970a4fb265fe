/*
 * test_preempt_e2e.c - preemption end to end with the real axd and one
 * ax-worker of one slot on a throwaway PostgreSQL. The tasks record
 * their own start and SIGTERM in a file, and the test counts from it:
 *  - a P0 attempt that cannot be placed preempts the running preemptible
 *    P3 attempt: the P3 task gets SIGTERM once, one attempt.preempted
 *    event names victim and winner, the P0 runs, the P3 instance goes
 *    back to PENDING (PREEMPTED) without using up a try and succeeds on
 *    its next attempt, exactly once;
 *  - a P3 attempt that is not preemptible is never touched: the P0 waits
 *    for its end;
 *  - a capacity calendar with "preempt": true whose window in force gives
 *    a worker group 1 slot stops the running preemptible attempts beyond
 *    it (attempt.preempted naming the calendar and its slots, CANCELED
 *    PREEMPTED, back to PENDING), keeps the first started, and gives the
 *    work still queued no slot; without preempt nothing running stops;
 *    a task not preemptible is never stopped, even if it leaves the
 *    group above the calendar's slots.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_token.h"
#include "clock.h"
#include "e2e_harness.h"

static ax_e2e *e;
static char    marks[256];
static char    url[64], token[AX_API_TOKEN_LEN];

static void
setup(void)
{
	/* inherited by the daemons: one slot, kills seen within 200 ms */
	setenv("AX_WORKER_SLOTS", "1", 1);
	setenv("AX_WORKER_HEARTBEAT", "200ms", 1);
	setenv("AX_WORKER_KILL_GRACE", "1s", 1);
	e = NULL;
	ax_e2e_marks_new(marks, sizeof(marks), "ax-preempt");
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
	ax_e2e_marks_free(marks);
}

TestSuite(preempt_e2e, .init = setup, .fini = teardown, .timeout = 120);

static const char *config = "preemption:\n"
                            "  enabled: true\n"
                            "  requeue_delay: 1s\n"
                            "  requeue_jitter: 500ms\n";

/* Lines of marks/name equal to line (0 when the file is missing). */
static int
count_lines(const char *name, const char *line)
{
	char  path[PATH_MAX + 64], buf[256];
	int   n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", marks, name);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(buf, sizeof(buf), f) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		n += strcmp(buf, line) == 0;
	}
	fclose(f);
	return n;
}

/* Polls count_lines(name, line) >= want for up to limit_s seconds. */
static void
wait_lines(const char *name, const char *line, int want, int limit_s)
{
	int64_t end = ax_clock_mono_us() + limit_s * AX_USEC_PER_SEC;
	while (count_lines(name, line) < want) {
		if (ax_clock_mono_us() > end) {
			ax_e2e_dump(e);
			cr_assert_fail("%s: fewer than %d lines '%s'", name,
			               want, line);
		}
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
}

/*
 * A P3 DAG starting 1 s from now whose task records "start <attempt>"
 * and, on SIGTERM, "term <attempt>"; its first attempt runs 30 s, a
 * later one ends at once.
 */
static void
load_low(int preemptible)
{
	char at[32], yaml[2048];

	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.preempt.low\nimpact: P3\n"
	         "schedule: {at: \"%s\"}\n"
	         "tasks:\n"
	         "  - name: batch\n"
	         "    preemptible: %s\n"
	         "    command: |\n"
	         "      f=%s/low\n"
	         "      echo start $AX_ATTEMPT >> $f\n"
	         "      trap 'echo term $AX_ATTEMPT >> $f; exit 143' TERM\n"
	         "      if [ \"$AX_ATTEMPT\" = 1 ]; then sleep %d & wait; fi\n"
	         "      echo end $AX_ATTEMPT >> $f\n",
	         ax_e2e_at(1, at, sizeof(at)), preemptible ? "true" : "false",
	         marks, preemptible ? 30 : 4);
	ax_e2e_load(e, "low", "e2e.preempt.low", yaml);
}

/* A P0 DAG starting 1 s from now whose task records "ran". */
static void
load_high(void)
{
	char at[32], yaml[1024];

	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.preempt.high\nimpact: P0\n"
	         "schedule: {at: \"%s\"}\n"
	         "tasks:\n"
	         "  - {name: core, command: \"echo ran >> %s/high\"}\n",
	         ax_e2e_at(1, at, sizeof(at)), marks);
	ax_e2e_load(e, "high", "e2e.preempt.high", yaml);
}

/*
 * A DAG name (impact tier) starting 1 s from now whose task records
 * "start <attempt>", on SIGTERM "term <attempt>", and "end <attempt>"
 * after sleeping sleep_s seconds, in marks/<name>. stubborn: its first
 * attempt records the SIGTERM and runs on until SIGKILL (a later one
 * ends at once).
 */
static void
load_task(const char *name, const char *tier, int preemptible, int sleep_s,
          int stubborn)
{
	char at[32], yaml[2048], dag[64], body[160];

	if (stubborn)
		snprintf(body, sizeof(body),
		         "      trap 'echo term $AX_ATTEMPT >> $f' TERM\n"
		         "      if [ \"$AX_ATTEMPT\" = 1 ]; then\n"
		         "        while :; do sleep 1; done\n"
		         "      fi\n");
	else
		snprintf(body, sizeof(body),
		         "      trap 'echo term $AX_ATTEMPT >> $f; exit 143' "
		         "TERM\n"
		         "      sleep %d & wait\n",
		         sleep_s);
	snprintf(dag, sizeof(dag), "e2e.preempt.%s", name);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: %s\nimpact: %s\n"
	         "schedule: {at: \"%s\"}\n"
	         "tasks:\n"
	         "  - name: t\n"
	         "    preemptible: %s\n"
	         "    command: |\n"
	         "      f=%s/%s\n"
	         "      echo start $AX_ATTEMPT >> $f\n"
	         "%s"
	         "      echo end $AX_ATTEMPT >> $f\n",
	         dag, tier, ax_e2e_at(1, at, sizeof(at)),
	         preemptible ? "true" : "false", marks, name, body);
	ax_e2e_load(e, name, dag, yaml);
}

/* Lines "term *" of all the files in marks (the SIGTERMs counted). */
static int
terms(const char *const *names, size_t n)
{
	int k = 0;
	for (size_t i = 0; i < n; i++)
		for (int a = 1; a <= 3; a++) {
			char line[32];
			snprintf(line, sizeof(line), "term %d", a);
			k += count_lines(names[i], line);
		}
	return k;
}

static int64_t
events_preempted(void)
{
	return ax_e2e_int(e,
	                  "SELECT count(*) FROM event_log WHERE type = "
	                  "'attempt.preempted'");
}

static void
start_stack(void)
{
	e = ax_e2e_new(1, config);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
}

Test(preempt_e2e, p0_preempts_a_running_preemptible_p3_once)
{
	char ev[600];

	start_stack();
	load_low(1);
	wait_lines("low", "start 1", 1, 30);
	load_high();
	ax_e2e_wait(e, 20, "the P0 instance to succeed",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.preempt.high' AND "
	            "i.state = 'SUCCESS'");
	/* the P3 task got SIGTERM, once, before the P0 ran */
	cr_assert_eq(count_lines("low", "term 1"), 1);
	cr_assert_eq(count_lines("high", "ran"), 1);
	/* one decision event naming the victim and the winner */
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'attempt.preempted' AND reason = "
	                        "'PREEMPTED'"),
	             1);
	ax_e2e_text(e, ev, sizeof(ev),
	            "SELECT payload::text FROM event_log WHERE type = "
	            "'attempt.preempted'");
	cr_assert(strstr(ev, "\"winner_dag\": \"e2e.preempt.high\"") ||
	              strstr(ev, "\"winner_dag\":\"e2e.preempt.high\""),
	          "%s", ev);
	cr_assert(strstr(ev, "\"victim_tier\": \"P3\"") ||
	              strstr(ev, "\"victim_tier\":\"P3\""),
	          "%s", ev);
	/* the victim comes back and succeeds, exactly once, with its
	 * preempted attempt CANCELED (PREEMPTED) and no try used up */
	wait_lines("low", "end 2", 1, 30);
	ax_e2e_wait(e, 20, "the P3 instance to succeed",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.preempt.low' AND "
	            "i.state = 'SUCCESS'");
	cr_assert_eq(
	    ax_e2e_int(e,
	               "SELECT count(*) FROM attempts a JOIN task_instances "
	               "i ON i.id = a.instance_id JOIN dags d ON d.id = "
	               "i.dag_id WHERE d.name = 'e2e.preempt.low' AND "
	               "a.state = 'CANCELED' AND a.reason = 'PREEMPTED'"),
	    1);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT i.max_tries FROM task_instances i "
	                        "JOIN dags d ON d.id = i.dag_id WHERE "
	                        "d.name = 'e2e.preempt.low'"),
	             2);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log v JOIN "
	                        "dags d ON d.id = v.dag_id WHERE d.name = "
	                        "'e2e.preempt.low' AND v.type = "
	                        "'instance.succeeded'"),
	             1);
	cr_assert_eq(count_lines("low", "start 1"), 1);
	cr_assert_eq(count_lines("low", "start 2"), 1);
	cr_assert_eq(count_lines("low", "end 1"), 0);
}

Test(preempt_e2e, a_task_not_preemptible_is_never_stopped)
{
	start_stack();
	load_low(0);
	wait_lines("low", "start 1", 1, 30);
	load_high();
	/* the P0 runs only once the P3 ended by itself (4 s) */
	wait_lines("high", "ran", 1, 30);
	cr_assert_eq(count_lines("low", "end 1"), 1);
	cr_assert_eq(count_lines("low", "term 1"), 0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'attempt.preempted'"),
	             0);
}

Test(preempt_e2e, at_most_two_preemptions_per_worker_per_minute)
{
	static const char *const low[] = { "low1", "low2", "low3" };
	int64_t                  end;

	setenv("AX_WORKER_SLOTS", "3", 1);
	start_stack();
	for (int i = 0; i < 3; i++)
		load_task(low[i], "P3", 1, 30, 0);
	for (int i = 0; i < 3; i++)
		wait_lines(low[i], "start 1", 1, 30);
	/* three P0 that run 10 s each: two victims, then the limit */
	load_task("high1", "P0", 0, 10, 0);
	load_task("high2", "P0", 0, 10, 0);
	load_task("high3", "P0", 0, 10, 0);
	ax_e2e_wait(e, 20, "two preemptions",
	            "SELECT count(*) >= 2 FROM event_log WHERE type = "
	            "'attempt.preempted'");
	/* the third P0 waits: no third preemption inside the minute */
	end = ax_clock_mono_us() + 4 * AX_USEC_PER_SEC;
	while (ax_clock_mono_us() < end) {
		cr_assert_leq(events_preempted(), 2);
		cr_assert_leq(terms(low, 3), 2);
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
	cr_assert_eq(terms(low, 3), 2);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances i "
	                        "JOIN dags d ON d.id = i.dag_id WHERE "
	                        "d.name LIKE 'e2e.preempt.high%%' AND "
	                        "i.state IN ('RUNNING', 'SUCCESS')"),
	             2);
}

Test(preempt_e2e, a_victim_is_preempted_again_only_two_tiers_up)
{
	static const char *const low[] = { "low" };

	start_stack();
	load_task("low", "P3", 1, 30, 0);
	wait_lines("low", "start 1", 1, 30);
	/* a P2 preempts it once */
	load_task("mid1", "P2", 0, 0, 0);
	wait_lines("low", "term 1", 1, 20);
	wait_lines("mid1", "end 1", 1, 20);
	wait_lines("low", "start 2", 1, 20);
	/* another P2 may not: the victim was preempted inside the window */
	load_task("mid2", "P2", 0, 0, 0);
	int64_t end = ax_clock_mono_us() + 4 * AX_USEC_PER_SEC;
	while (ax_clock_mono_us() < end) {
		cr_assert_eq(terms(low, 1), 1);
		cr_assert_eq(count_lines("mid2", "start 1"), 0);
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
	/* a P0, three tiers up, may */
	load_task("high", "P0", 0, 0, 0);
	wait_lines("low", "term 2", 1, 20);
	wait_lines("high", "end 1", 1, 20);
	cr_assert_eq(events_preempted(), 2);
}

/*
 * preemption.grace, not the task's kill grace, bounds how long a victim
 * that ignores SIGTERM keeps the slot: with the worker's kill grace at
 * 60 s and preemption.grace at 1 s, the P0 runs about 1 s after the
 * victim's SIGTERM (before, it waited the whole 60 s).
 */
Test(preempt_e2e, a_victim_that_ignores_sigterm_is_killed_after_the_grace)
{
	setenv("AX_WORKER_KILL_GRACE", "60s", 1);
	e = ax_e2e_new(1,
	               "preemption:\n"
	               "  enabled: true\n"
	               "  grace: 1s\n"
	               "  requeue_delay: 1s\n"
	               "  requeue_jitter: 500ms\n");
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	load_task("stubborn", "P3", 1, 0, 1);
	wait_lines("stubborn", "start 1", 1, 30);
	load_high();
	wait_lines("stubborn", "term 1", 1, 20);
	int64_t t0 = ax_clock_mono_us();
	wait_lines("high", "ran", 1, 15);
	int64_t waited = ax_clock_mono_us() - t0;
	cr_assert_lt(waited, 8 * AX_USEC_PER_SEC,
	             "the P0 waited %lld ms after the victim's SIGTERM",
	             (long long) (waited / AX_USEC_PER_MSEC));
	/* the victim ignored SIGTERM and never ended on its own */
	cr_assert_eq(count_lines("stubborn", "end 1"), 0);
	cr_assert_eq(events_preempted(), 1);
}

/* --------------------------------------------- capacity calendars */

/*
 * A DAG name of n tasks t0..t<n-1> (impact P3) in worker group gpu
 * starting 1 s from now; each records "start <attempt>", on SIGTERM
 * "term <attempt>", and "end <attempt>" in marks/<name>.t<i>; a first
 * attempt runs 60 s, a later one ends at once.
 */
static void
load_gpu(const char *name, int n, int preemptible)
{
	char at[32], yaml[8192], dag[64];
	int  off;

	snprintf(dag, sizeof(dag), "e2e.cal.%s", name);
	off = snprintf(yaml, sizeof(yaml),
	               "kind: DAG\nname: %s\nimpact: P3\n"
	               "schedule: {at: \"%s\"}\ntasks:\n",
	               dag, ax_e2e_at(1, at, sizeof(at)));
	for (int i = 0; i < n; i++)
		off += snprintf(
		    yaml + off, sizeof(yaml) - (size_t) off,
		    "  - name: t%d\n"
		    "    worker_group: gpu\n"
		    "    preemptible: %s\n"
		    "    command: |\n"
		    "      f=%s/%s.t%d\n"
		    "      echo start $AX_ATTEMPT >> $f\n"
		    "      trap 'echo term $AX_ATTEMPT >> $f; exit 143' TERM\n"
		    "      if [ \"$AX_ATTEMPT\" = 1 ]; then sleep 60 & wait; "
		    "fi\n"
		    "      echo end $AX_ATTEMPT >> $f\n",
		    i, preemptible ? "true" : "false", marks, name, i);
	ax_e2e_load(e, name, dag, yaml);
}

/* Lines equal to line over the files <name>.t0 .. t<n-1>. */
static int
lines_of(const char *name, int n, const char *line)
{
	char f[128];
	int  k = 0;
	for (int i = 0; i < n; i++) {
		snprintf(f, sizeof(f), "%s.t%d", name, i);
		k += count_lines(f, line);
	}
	return k;
}

/* Polls lines_of(name, n, line) >= want for up to limit_s seconds. */
static void
wait_lines_of(const char *name, int n, const char *line, int want, int limit_s)
{
	int64_t end = ax_clock_mono_us() + limit_s * AX_USEC_PER_SEC;
	while (lines_of(name, n, line) < want) {
		if (ax_clock_mono_us() > end) {
			ax_e2e_dump(e);
			cr_assert_fail("%s: %d of %d lines '%s'", name,
			               lines_of(name, n, line), want, line);
		}
		ax_clock_sleep_us(50 * AX_USEC_PER_MSEC);
	}
}

/* A worker of 4 slots in group gpu; no preemption.enabled: the
 * calendar's flag is the opt-in. Victims are ready again after
 * requeue_delay (plus up to 500 ms). */
static void
start_gpu_stack(const char *requeue_delay)
{
	char cfg[256];

	setenv("AX_WORKER_SLOTS", "4", 1);
	setenv("AX_WORKER_GROUP", "gpu", 1);
	snprintf(cfg, sizeof(cfg),
	         "preemption:\n"
	         "  requeue_delay: %s\n"
	         "  requeue_jitter: 500ms\n",
	         requeue_delay);
	e = ax_e2e_new(1, cfg);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_OPERATOR, "preempt-e2e", url,
	                       sizeof(url), token);
}

/* PUT the calendar of gpu: 1 slot from an hour ago to an hour from now
 * (UTC), with "preempt": true when preempt. */
static void
put_gpu_calendar(int preempt)
{
	char          body[256], a0[8], b0[8];
	time_t        t = (time_t) (ax_clock_utc_us() / 1000000);
	struct tm     tm;
	ax_e2e_answer a;

	t -= 3600;
	gmtime_r(&t, &tm);
	strftime(a0, sizeof(a0), "%H:%M", &tm);
	t += 7200;
	gmtime_r(&t, &tm);
	strftime(b0, sizeof(b0), "%H:%M", &tm);
	snprintf(body, sizeof(body),
	         "{\"tz\": \"UTC\",%s \"windows\": [{\"start\": \"%s\", "
	         "\"end\": \"%s\", \"slots\": 1}]}",
	         preempt ? " \"preempt\": true," : "", a0, b0);
	ax_e2e_http(url, token, "PUT", "/api/v1/pools/gpu/calendar", body,
	            strlen(body), NULL, &a);
	cr_assert_eq(a.status, 200, "%s: %ld %s", body, a.status, a.body);
	json_decref(a.js);
}

#define CAL_EVENTS                                                            \
	"SELECT count(*) FROM event_log WHERE type = 'attempt.preempted' "    \
	"AND reason = 'PREEMPTED' AND payload->>'calendar' = 'gpu' AND "      \
	"payload->>'calendar_slots' = '1'"

/* For 4 s: the counts stay as they are (the stop is not repeated, the
 * work still queued gets no slot). */
static void
hold_steady(const char *name, int n, int starts, int terms_)
{
	int64_t end = ax_clock_mono_us() + 4 * AX_USEC_PER_SEC;
	while (ax_clock_mono_us() < end) {
		int s1 = lines_of(name, n, "start 1"),
		    t1 = lines_of(name, n, "term 1"),
		    s2 = lines_of(name, n, "start 2");
		if (s1 != starts || t1 != terms_ || s2 != 0) {
			ax_e2e_dump(e);
			cr_assert_fail("start 1: %d (want %d), term 1: %d "
			               "(want %d), start 2: %d (want 0)",
			               s1, starts, t1, terms_, s2);
		}
		ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
	}
}

Test(preempt_e2e, a_calendar_that_preempts_stops_the_work_beyond_its_slots)
{
	/* the victims come back long after the window ends: what starts
	 * then is the work the gate held */
	start_gpu_stack("15s");
	/* 6 tasks on 4 slots: 4 run, 2 wait in the queue */
	load_gpu("batch", 6, 1);
	wait_lines_of("batch", 6, "start 1", 4, 30);
	put_gpu_calendar(1);
	/* 3 of the 4 running get SIGTERM; the 2 queued never start */
	wait_lines_of("batch", 6, "term 1", 3, 15);
	hold_steady("batch", 6, 4, 3);
	cr_assert_eq(lines_of("batch", 6, "end 1"), 0);
	/* the rows: 3 victims CANCELED PREEMPTED, back to PENDING; one
	 * attempt runs, the first started of the four */
	ax_e2e_wait(e, 10, "3 attempts CANCELED PREEMPTED",
	            "SELECT count(*) = 3 FROM attempts WHERE state = "
	            "'CANCELED' AND reason = 'PREEMPTED'");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances "
	                        "WHERE state = 'RUNNING'"),
	             1);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts WHERE "
	                        "state = 'RUNNING'"),
	             1);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts r WHERE "
	                        "r.state = 'RUNNING' AND r.started_at = "
	                        "(SELECT min(started_at) FROM attempts)"),
	             1, "the survivor is not the first started");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'instance.preempted'"),
	             3);
	/* one decision event per victim, naming the calendar and slots */
	cr_assert_eq(ax_e2e_int(e, CAL_EVENTS), 3);
	cr_assert_eq(ax_e2e_int(e,
	                        CAL_EVENTS " AND payload->>'victim_dag' "
	                                   "= 'e2e.cal.batch' AND "
	                                   "payload->>'group' = 'gpu'"),
	             3);
	/* the window ends (the calendar is removed): the 2 queued start at
	 * once (not at their worker's next poll), later the victims come
	 * back */
	ax_e2e_answer a;
	int64_t       t0 = ax_clock_mono_us();
	ax_e2e_http(url, token, "DELETE", "/api/v1/pools/gpu/calendar", NULL,
	            0, NULL, &a);
	cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
	json_decref(a.js);
	wait_lines_of("batch", 6, "start 1", 6, 15);
	cr_assert_lt(
	    ax_clock_mono_us() - t0, 3 * AX_USEC_PER_SEC,
	    "the queued work started %lld ms after the window",
	    (long long) ((ax_clock_mono_us() - t0) / AX_USEC_PER_MSEC));
	wait_lines_of("batch", 6, "end 2", 3, 30);
}

Test(preempt_e2e, a_calendar_without_preempt_stops_nothing_running)
{
	start_gpu_stack("1s");
	load_gpu("batch", 4, 1);
	wait_lines_of("batch", 4, "start 1", 4, 30);
	put_gpu_calendar(0);
	hold_steady("batch", 4, 4, 0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'attempt.preempted'"),
	             0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts WHERE "
	                        "state = 'RUNNING'"),
	             4);
}

Test(preempt_e2e, a_calendar_that_preempts_never_stops_a_task_not_preemptible)
{
	start_gpu_stack("1s");
	load_gpu("pinned", 2, 0);
	load_gpu("batch", 2, 1);
	wait_lines_of("pinned", 2, "start 1", 2, 30);
	wait_lines_of("batch", 2, "start 1", 2, 30);
	put_gpu_calendar(1);
	/* both preemptible ones stop; the two others run on, above the
	 * calendar's 1 slot */
	wait_lines_of("batch", 2, "term 1", 2, 15);
	hold_steady("pinned", 2, 2, 0);
	cr_assert_eq(lines_of("batch", 2, "term 1"), 2);
	cr_assert_eq(ax_e2e_int(e, CAL_EVENTS), 2);
	cr_assert_eq(ax_e2e_int(e,
	                        CAL_EVENTS " AND payload->>'victim_dag' "
	                                   "<> 'e2e.cal.batch'"),
	             0);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts a JOIN "
	                        "task_instances i ON i.id = "
	                        "a.instance_id JOIN dags d ON d.id = "
	                        "i.dag_id WHERE d.name = 'e2e.cal.pinned' "
	                        "AND a.state = 'RUNNING'"),
	             2);
}
