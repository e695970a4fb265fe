/*
 * test_shaving_e2e.c - peak shaving and pushed water levels end to end
 * with the real axd, ax-worker and ax-api on a throwaway PostgreSQL:
 *  - a burst of P3 instances on a small worker group is shaved: some get
 *    instance.delayed BACKPRESSURE_DELAYED with the instant "until"
 *    which, the P0 instances triggered with them are never delayed, and
 *    every instance runs exactly once, long before the delays' instants
 *    (released as the backlog drains);
 *  - a water level pushed with PUT /api/v1/pools/{name}/pressure holds a
 *    P3 instance (BACKPRESSURE_DELAYED, held_by "pressure", until the
 *    expiry) while a P0 instance runs, and its expiry releases it with
 *    no further call; bad bodies get a 400 naming the member;
 *  - `axctl pool pressure` pushes, shows and withdraws a level, and
 *    refuses a bad level or a missing expiry;
 *  - a capacity calendar set with PUT /api/v1/pools/{name}/calendar
 *    gives a pool 1 slot while its window holds (the pool's tasks never
 *    overlap, held_by "calendar_slots"), and the pool's own slots outside
 *    it (they overlap); bad calendars get a 400 naming the member;
 *  - a capacity calendar named after a worker group (no pool) runs that
 *    group's tasks one at a time while its 1-slot window holds (the
 *    times the tasks record never overlap), and side by side when the
 *    window is elsewhere in the day.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_token.h"
#include "cli_run.h"
#include "clock.h"
#include "e2e_harness.h"

static ax_e2e *e;
static char    url[64], token[AX_API_TOKEN_LEN];
static char    out[65536], err[16384];
static char    marks[256]; /* the tasks' records ("": none) */

#define EXPECT_RC(rc, ...) AX_CLI_EXPECT_RC(ax_e2e_dump(e), rc, __VA_ARGS__)

static void
setup(void)
{
	ax_e2e_use_axctl();
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
	if (marks[0])
		ax_e2e_marks_free(marks);
	marks[0] = '\0';
}

TestSuite(shaving_e2e, .init = setup, .fini = teardown, .timeout = 150);

static void
start_stack(const char *yaml)
{
	e = ax_e2e_new(1, yaml);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_OPERATOR, "shaving-e2e", url,
	                       sizeof(url), token);
}

static void
trigger(const char *dag)
{
	ax_e2e_trigger(url, token, dag);
}

/* A DAG of n independent tasks of impact. */
static void
load_dag(const char *name, const char *impact, int n)
{
	char yaml[4096];
	int  off = snprintf(yaml, sizeof(yaml),
	                    "kind: DAG\nname: %s\nimpact: %s\ntasks:\n", name,
	                    impact);
	for (int i = 0; i < n; i++)
		off +=
		    snprintf(yaml + off, sizeof(yaml) - (size_t) off,
		             "  - {name: t%d, command: \"sleep 0.2\"}\n", i);
	ax_e2e_load(e, name, name, yaml);
}

#define DELAYED_OF(dag)                                                       \
	"SELECT count(*) FROM event_log v JOIN dags d ON d.id = v.dag_id "    \
	"WHERE d.name = '" dag "' AND v.type = 'instance.delayed' AND "       \
	"v.reason = 'BACKPRESSURE_DELAYED'"

Test(shaving_e2e, a_burst_of_p3_is_shaved_p0_never_and_all_run_once)
{
	start_stack("shaving:\n  enabled: true\n  backlog: 2\n"
	            "  max_delay_p3: 60s\nresources:\n  overcommit: 1\n");
	load_dag("e2e.shave.burst", "P3", 12);
	load_dag("e2e.shave.p0", "P0", 6);
	trigger("e2e.shave.burst");
	trigger("e2e.shave.p0");
	/* 30 s at least if delayed items waited for their instant: they
	 * are released as the backlog drains */
	ax_e2e_wait(e, 25, "all 18 instances to succeed",
	            "SELECT count(*) = 18 FROM task_instances WHERE state = "
	            "'SUCCESS'");
	int64_t shaved = ax_e2e_int(e, DELAYED_OF("e2e.shave.burst"));
	fprintf(stderr, "shaving_e2e: %lld of 12 P3 instances shaved\n",
	        (long long) shaved);
	cr_assert_gt(shaved, 0, "no P3 instance of the burst was shaved");
	cr_assert_eq(ax_e2e_int(e, DELAYED_OF("e2e.shave.p0")), 0,
	             "a P0 instance was delayed by shaving");
	/* each delay names its instant, within the largest delay (60 s) */
	cr_assert_eq(
	    ax_e2e_int(
	        e,
	        "SELECT count(*) FROM event_log WHERE type = "
	        "'instance.delayed' AND reason = "
	        "'BACKPRESSURE_DELAYED' AND NOT (payload->>'held_by' "
	        "= 'shaving' AND (payload->>'until')::timestamptz > "
	        "time - interval '2 s' AND (payload->>'until')::timestamptz "
	        "<= time + "
	        "interval '60.1 s' AND payload->>'tier' = 'P3')"),
	    0, "a shaving event without its instant or outside the bound");
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM attempts"), 18,
	             "every instance ran exactly once");
}

/* PUT body of the pressure route for pool "default"; the answer. */
static void
put_pressure(const char *body, ax_e2e_answer *a)
{
	ax_e2e_http(url, token, "PUT", "/api/v1/pools/default/pressure", body,
	            strlen(body), NULL, a);
}

static void
expect_400(const char *body, const char *names)
{
	ax_e2e_answer a;
	put_pressure(body, &a);
	cr_assert_eq(a.status, 400, "%s: %ld %s", body, a.status, a.body);
	cr_assert(strstr(a.body, names) != NULL,
	          "%s: the answer %s does not "
	          "name %s",
	          body, a.body, names);
	json_decref(a.js);
}

Test(shaving_e2e, pushed_pressure_holds_p3_runs_p0_and_expiry_releases)
{
	ax_e2e_answer a;

	start_stack(NULL);
	load_dag("e2e.press.low", "P3", 1);
	load_dag("e2e.press.p0", "P0", 1);

	expect_400("{\"level\":1.5,\"expires_in\":\"5m\"}", "level");
	expect_400("{\"expires_in\":\"5m\"}", "level");
	expect_400("{\"level\":0.5}", "expires_in or expires_at");
	expect_400("{\"level\":0.5,\"expires_in\":\"soon\"}", "expires_in");
	expect_400("{\"level\":0.5,\"expires_in\":\"5m\",\"colour\":1}",
	           "colour");
	expect_400("{\"level\":0.5,\"expires_at\":\"2001-01-01T00:00:00Z\"}",
	           "expires_at");
	ax_e2e_http(url, token, "GET", "/api/v1/pools/default/pressure", NULL,
	            0, NULL, &a);
	cr_assert_eq(a.status, 404, "%s", a.body);
	json_decref(a.js);

	put_pressure("{\"level\":0.95,\"expires_in\":\"5s\"}", &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	cr_assert(json_is_true(json_object_get(a.js, "in_force")), "%s",
	          a.body);
	json_decref(a.js);
	ax_e2e_http(url, token, "GET", "/api/v1/pools/default/pressure", NULL,
	            0, NULL, &a);
	cr_assert_eq(a.status, 200, "%s", a.body);
	cr_assert_float_eq(json_number_value(json_object_get(a.js, "level")),
	                   0.95, 1e-9, "%s", a.body);
	json_decref(a.js);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'pool.pressure_set' AND "
	                        "payload->>'token_name' = 'shaving-e2e'"),
	             1, "the push is an event naming the token");
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC); /* axd reads it (< 1 s) */

	trigger("e2e.press.low");
	trigger("e2e.press.p0");
	ax_e2e_wait(e, 20, "the P0 instance to run under the pressure",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.press.p0' AND "
	            "i.state = 'SUCCESS'");
	ax_e2e_wait(
	    e, 10, "the P3 instance to wait for the pressure",
	    DELAYED_OF(
	        "e2e.press.low") " AND v.payload->>'held_by' = 'pressure' AND "
	                         "v.payload->>'until' IS NOT NULL");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts a JOIN "
	                        "task_instances i ON i.id = "
	                        "a.instance_id JOIN dags d ON d.id = "
	                        "i.dag_id WHERE d.name = 'e2e.press.low'"),
	             0, "the P3 instance ran under the pressure");
	ax_e2e_wait(e, 20, "the expiry to release the P3 instance",
	            "SELECT count(*) FROM task_instances i JOIN dags d ON "
	            "d.id = i.dag_id WHERE d.name = 'e2e.press.low' AND "
	            "i.state = 'SUCCESS'");
}

Test(shaving_e2e, axctl_pool_pressure_pushes_shows_and_clears)
{
	start_stack(NULL);
	EXPECT_RC(0, "pool", "pressure", "etl", "93%", "--for", "5m");
	cr_assert(strstr(out, "level 0.93") != NULL, "%s", out);
	cr_assert(strstr(out, "in force") != NULL, "%s", out);
	EXPECT_RC(0, "pool", "pressure", "etl", "--json");
	cr_assert(strstr(out, "\"set_by\": \"shaving-e2e\"") != NULL, "%s",
	          out);
	EXPECT_RC(2, "pool", "pressure", "etl", "1.5", "--for", "5m");
	cr_assert(strstr(err, "LEVEL") != NULL, "%s", err);
	EXPECT_RC(2, "pool", "pressure", "etl", "0.5");
	cr_assert(strstr(err, "--for") != NULL, "%s", err);
	EXPECT_RC(1, "pool", "pressure", "etl", "0.5", "--for", "soon");
	cr_assert(strstr(err, "expires_in") != NULL, "%s", err);
	EXPECT_RC(0, "pool", "pressure", "etl", "--clear");
	cr_assert(strstr(out, "withdrawn") != NULL, "%s", out);
	EXPECT_RC(1, "pool", "pressure", "etl");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'pool.pressure_cleared'"),
	             1);
}

/* "HH:MM" of now + off_s in UTC. */
static void
hhmm(int off_s, char *buf, size_t len)
{
	time_t    t = (time_t) (ax_clock_utc_us() / 1000000) + off_s;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%H:%M", &tm);
}

static void
put_calendar_of(const char *name, int from_s, int to_s, int slots)
{
	char          body[256], a0[8], b0[8], path[128];
	ax_e2e_answer a;

	hhmm(from_s, a0, sizeof(a0));
	hhmm(to_s, b0, sizeof(b0));
	snprintf(body, sizeof(body),
	         "{\"tz\": \"UTC\", \"windows\": [{\"start\": \"%s\", "
	         "\"end\": \"%s\", \"slots\": %d}]}",
	         a0, b0, slots);
	snprintf(path, sizeof(path), "/api/v1/pools/%s/calendar", name);
	ax_e2e_http(url, token, "PUT", path, body, strlen(body), NULL, &a);
	cr_assert_eq(a.status, 200, "%s: %ld %s", body, a.status, a.body);
	json_decref(a.js);
}

static void
put_calendar(int from_s, int to_s, int slots)
{
	put_calendar_of("gpu", from_s, to_s, slots);
}

/* Pairs of attempts of run that ran at the same time. */
static int64_t
overlaps(int64_t run)
{
	return ax_e2e_int(
	    e,
	    "SELECT count(*) FROM attempts a JOIN attempts b ON "
	    "a.run_id < b.run_id JOIN task_instances x ON x.id = "
	    "a.instance_id JOIN task_instances y ON y.id = "
	    "b.instance_id WHERE x.dag_run_id = %lld AND "
	    "y.dag_run_id = %lld AND a.started_at < b.ended_at "
	    "AND b.started_at < a.ended_at",
	    (long long) run, (long long) run);
}

Test(shaving_e2e, a_capacity_calendar_sets_a_pools_slots_by_time_of_day)
{
	char          yaml[1024];
	ax_e2e_answer a;
	int64_t       r1, r2;

	setenv("AX_WORKER_SLOTS", "4", 1);
	start_stack(NULL);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.cal\ntasks:\n"
	         "  - {name: a, pool: gpu, command: \"sleep 1.5\"}\n"
	         "  - {name: b, pool: gpu, command: \"sleep 1.5\"}\n"
	         "  - {name: c, pool: gpu, command: \"sleep 1.5\"}\n");
	ax_e2e_load(e, "cal", "e2e.cal", yaml);
	/* bad calendars: 400 naming the member */
	static const char *const bad[][2] = {
		{ "{\"windows\": [{\"start\": \"08:00\", \"end\": "
		  "\"20:00\", \"slots\": -2}]}",
		  "windows[0].slots" },
		{ "{\"windows\": []}", "calendar.windows" },
		{ "{\"tz\": \"Mars/Olympus\", \"windows\": [{\"start\": "
		  "\"08:00\", \"end\": \"20:00\", \"slots\": 1}]}",
		  "calendar.tz" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ax_e2e_http(url, token, "PUT", "/api/v1/pools/gpu/calendar",
		            bad[i][0], strlen(bad[i][0]), NULL, &a);
		cr_assert_eq(a.status, 400, "%s: %ld %s", bad[i][0], a.status,
		             a.body);
		cr_assert(strstr(a.body, bad[i][1]) != NULL, "%s: %s",
		          bad[i][0], a.body);
		json_decref(a.js);
	}
	/* a window around now: 1 slot */
	put_calendar(-3600, 3600, 1);
	ax_e2e_http(url, token, "GET", "/api/v1/pools/gpu/calendar", NULL, 0,
	            NULL, &a);
	cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
	cr_assert(strstr(a.body, "\"slots\": 1") ||
	              strstr(a.body, "\"slots\":1"),
	          "%s", a.body);
	json_decref(a.js);
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC); /* axd reads it */
	trigger("e2e.cal");
	ax_e2e_wait(e, 40, "the three tasks to succeed",
	            "SELECT count(*) = 3 FROM task_instances WHERE state = "
	            "'SUCCESS'");
	r1 = ax_e2e_int(e, "SELECT max(id) FROM dag_runs");
	if (overlaps(r1) != 0)
		ax_e2e_dump(e);
	cr_assert_eq(overlaps(r1), 0,
	             "two gpu tasks ran at once under 1 slot");
	cr_assert_gt(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'instance.delayed' AND "
	                        "payload->>'held_by' = 'calendar_slots' "
	                        "AND payload->>'calendar_slots' = '1'"),
	             0, "no instance was held by the calendar");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'pool.calendar_set' AND "
	                        "payload->>'token_name' = 'shaving-e2e'"),
	             1);
	/* the window elsewhere in the day: the pool's own slots */
	put_calendar(2 * 3600, 3 * 3600, 0);
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC);
	trigger("e2e.cal");
	ax_e2e_wait(e, 40, "the second run's tasks to succeed",
	            "SELECT count(*) = 6 FROM task_instances WHERE state = "
	            "'SUCCESS'");
	r2 = ax_e2e_int(e, "SELECT max(id) FROM dag_runs");
	cr_assert_neq(r1, r2);
	cr_assert_gt(overlaps(r2), 0,
	             "outside its window the calendar still held the pool");
	ax_e2e_http(url, token, "DELETE", "/api/v1/pools/gpu/calendar", NULL,
	            0, NULL, &a);
	cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
	json_decref(a.js);
	ax_e2e_http(url, token, "GET", "/api/v1/pools/gpu/calendar", NULL, 0,
	            NULL, &a);
	cr_assert_eq(a.status, 404, "%ld %s", a.status, a.body);
	json_decref(a.js);
}

/* The spans "start_ns end_ns" the tasks appended to path, into s[0..max)
 * (two per span); returns how many spans. */
static int
spans_read(const char *path, long long (*s)[2], int max)
{
	FILE *f = fopen(path, "r");
	int   n = 0;

	if (f == NULL)
		return 0;
	while (n < max && fscanf(f, "%lld %lld", &s[n][0], &s[n][1]) == 2)
		n++;
	fclose(f);
	return n;
}

/* Pairs of the n spans that overlap in time. */
static int
spans_overlapping(long long (*s)[2], int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			k += s[i][0] < s[j][1] && s[j][0] < s[i][1];
	return k;
}

/* Triggers e2e.calg and waits for its three tasks' spans in path. */
static int
calg_round(const char *path, long long (*s)[2], int want_done)
{
	int n;

	(void) unlink(path);
	trigger("e2e.calg");
	ax_e2e_wait(e, 40, "the group's three tasks to succeed",
	            "SELECT count(*) = %d FROM task_instances WHERE state = "
	            "'SUCCESS'",
	            want_done);
	n = spans_read(path, s, 8);
	cr_assert_eq(n, 3, "%s: %d spans", path, n);
	for (int i = 0; i < n; i++)
		cr_assert_lt(s[i][0], s[i][1], "%s: span %d", path, i);
	return n;
}

Test(shaving_e2e, a_capacity_calendar_limits_a_worker_group_by_time_of_day)
{
	char      yaml[2048], path[PATH_MAX];
	long long s[8][2];
	int       n;

	/* a worker of 4 slots in group gpuq; the tasks name no pool */
	setenv("AX_WORKER_SLOTS", "4", 1);
	setenv("AX_WORKER_GROUP", "gpuq", 1);
	ax_e2e_marks_new(marks, sizeof(marks), "ax-calg");
	snprintf(path, sizeof(path), "%s/spans", marks);
	start_stack(NULL);
	int off = snprintf(yaml, sizeof(yaml),
	                   "kind: DAG\nname: e2e.calg\ntasks:\n");
	for (int i = 0; i < 3; i++)
		off += snprintf(yaml + off, sizeof(yaml) - (size_t) off,
		                "  - name: t%d\n"
		                "    worker_group: gpuq\n"
		                "    command: |\n"
		                "      s=$(date +%%s%%N)\n"
		                "      sleep 1.5\n"
		                "      echo \"$s $(date +%%s%%N)\" >> %s\n",
		                i, path);
	ax_e2e_load(e, "calg", "e2e.calg", yaml);
	/* a window around now: 1 slot for the group */
	put_calendar_of("gpuq", -3600, 3600, 1);
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC); /* axd reads it */
	n = calg_round(path, s, 3);
	if (spans_overlapping(s, n) != 0)
		ax_e2e_dump(e);
	cr_assert_eq(spans_overlapping(s, n), 0,
	             "two tasks of group gpuq ran at once under 1 slot");
	cr_assert_gt(ax_e2e_int(e,
	                        "SELECT count(*) FROM event_log WHERE "
	                        "type = 'instance.delayed' AND "
	                        "payload->>'held_by' = 'calendar_slots' "
	                        "AND payload->>'calendar_slots' = '1'"),
	             0, "no instance was held by the group's calendar");
	/* the window elsewhere in the day: the workers' own 4 slots */
	put_calendar_of("gpuq", 2 * 3600, 3 * 3600, 1);
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC);
	n = calg_round(path, s, 6);
	cr_assert_gt(spans_overlapping(s, n), 0,
	             "outside its window the calendar still held the group");
}
