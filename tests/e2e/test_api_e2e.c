/*
 * test_api_e2e.c - issue 5 item 5 end to end: real PostgreSQL, axd, one
 * ax-worker and the ax-api binary, driven by the real axctl binary as a
 * user drives it (dag submit / trigger / pause / unpause, run list,
 * instance list / show / logs / kill / clear, events), and ax-api over
 * TLS with a self-signed certificate checked with libcurl.
 *
 * At the end, the live /metrics: the scheduling latency histograms and
 * counters the pipeline published, and every metric the Grafana
 * dashboard (deploy/grafana/ax.json) names.
 *
 * Every wait polls axctl (or PostgreSQL for the task's pid file) with a
 * deadline, so a stuck pipeline fails the test with the daemons' logs
 * instead of hanging it. Budget: well under 90 s for both tests.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_token.h"
#include "cli_run.h"
#include "clock.h"
#include "e2e_harness.h"
#include "store.h"

static ax_e2e *e;
static char    out[262144], err[16384];
static char    api_url[64], api_token[AX_API_TOKEN_LEN]; /* start_stack */

static void
setup(void)
{
	/* Inherited by the daemons: a killed task is SIGKILLed after 1 s,
	 * heartbeats often enough that the kill reaches the worker fast. */
	setenv("AX_WORKER_HEARTBEAT", "500ms", 1);
	setenv("AX_WORKER_KILL_GRACE", "1s", 1);
	unsetenv("AX_API_TLS_CERT");
	unsetenv("AX_API_TLS_KEY");
	ax_e2e_use_axctl();
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(api_e2e, .init = setup, .fini = teardown, .timeout = 150);

#define AXCTL(...) AX_CLI_AXCTL(__VA_ARGS__, NULL)

/* Runs axctl and asserts its exit status; out / err hold the output. */
#define EXPECT_RC(rc, ...) AX_CLI_EXPECT_RC(ax_e2e_dump(e), rc, __VA_ARGS__)

/* stdout parsed as JSON (new reference; fails the test otherwise). */
static json_t *
out_json(void)
{
	json_error_t je;
	json_t      *j = json_loads(out, 0, &je);
	cr_assert_not_null(j, "stdout is not JSON (%s): %s", je.text, out);
	return j;
}

static const char *
jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s != NULL ? s : "";
}

/* The API's "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" as seconds since the epoch. */
static double
ts_seconds(const char *s)
{
	struct tm tm = { 0 };
	double    sec;

	cr_assert_eq(sscanf(s, "%d-%d-%dT%d:%d:%lf", &tm.tm_year, &tm.tm_mon,
	                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &sec),
	             6, "not a timestamp: '%s'", s);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (double) timegm(&tm) + sec;
}

/* Fails the test (with the logs) once deadline (monotonic us) passed. */
static void
check_deadline(int64_t deadline, const char *what)
{
	ax_proc *dead = ax_stack_check(&e->st);
	if (dead != NULL) {
		ax_e2e_dump(e);
		cr_assert_fail("waiting for %s: %s exited", what, dead->name);
	}
	if (ax_clock_mono_us() > deadline) {
		ax_e2e_dump(e);
		cr_assert_fail("%s did not happen in time; last output:\n%s",
		               what, out);
	}
	ax_clock_sleep_us(200 * AX_USEC_PER_MSEC);
}

/*
 * Polls `axctl run list --dag dag --json` until a run with an id above
 * after exists; returns its id. With state != NULL, waits until that run
 * is in state.
 */
static int64_t
wait_run(const char *dag, int64_t after, const char *state, double secs)
{
	int64_t deadline = ax_clock_mono_us() + (int64_t) (secs * 1e6);
	for (;;) {
		EXPECT_RC(0, "run", "list", "--dag", dag, "--json");
		json_t *j = out_json(), *r;
		size_t  i;
		int64_t id   = 0;
		int     done = 0;
		json_array_foreach(json_object_get(j, "runs"), i, r)
		{
			int64_t rid =
			    json_integer_value(json_object_get(r, "id"));
			if (rid <= after)
				continue;
			id = rid;
			done =
			    state == NULL || !strcmp(jstr(r, "state"), state);
			break; /* newest first: the run we wait for */
		}
		json_decref(j);
		if (done)
			return id;
		check_deadline(deadline, state ? state : "a new run");
	}
}

/* `axctl instance list --run run --json` (new reference). */
static json_t *
instances(int64_t run)
{
	char rs[24];
	snprintf(rs, sizeof(rs), "%lld", (long long) run);
	EXPECT_RC(0, "instance", "list", "--run", rs, "--json");
	json_t *j = out_json();
	json_t *a = json_incref(json_object_get(j, "instances"));
	json_decref(j);
	cr_assert(json_is_array(a), "no instances array: %s", out);
	return a;
}

/* The instance of task in run (new reference to its list row). */
static json_t *
instance_of(int64_t run, const char *task)
{
	json_t *a = instances(run), *t, *found = NULL;
	size_t  i;
	json_array_foreach(a, i, t) if (!strcmp(jstr(t, "task"), task)) found =
	    json_incref(t);
	json_decref(a);
	cr_assert_not_null(found, "no instance of %s in run %lld", task,
	                   (long long) run);
	return found;
}

/* `axctl instance show id --json` (new reference). */
static json_t *
show(int64_t id)
{
	char is[24];
	snprintf(is, sizeof(is), "%lld", (long long) id);
	EXPECT_RC(0, "instance", "show", is, "--json");
	return out_json();
}

static int64_t
jid(json_t *o)
{
	return json_integer_value(json_object_get(o, "id"));
}

static void
write_file(const char *name, const char *text, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", e->st.home, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* A fresh stack with axd, one worker and ax-api, and an operator token
 * and the API URL in the environment axctl reads. */
static void
start_stack(void)
{
	e = ax_e2e_new(1, NULL);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_ADMIN, "e2e", api_url,
	                       sizeof(api_url), api_token);
	setenv("AX_HOME", e->st.home, 1);
}

static const char *diamond_yaml =
    "kind: DAG\n"
    "name: e2e.api.diamond\n"
    "tasks:\n"
    "  - {name: a, command: \"echo hello-from-a\"}\n"
    "  - {name: b, command: \"sleep 0.5\", depends_on: [a]}\n"
    "  - {name: c, command: \"sleep 0.5\", depends_on: [a]}\n"
    "  - {name: d, command: \"echo done-d\", depends_on: [b, c]}\n";

#define DIAMOND "e2e.api.diamond"

/* d's only attempt started after b's and c's ended (API timestamps). */
static void
check_order(int64_t run)
{
	double ends[2];
	for (int k = 0; k < 2; k++) {
		json_t *t = instance_of(run, k == 0 ? "b" : "c");
		json_t *s = show(jid(t));
		json_t *a = json_array_get(json_object_get(s, "attempts"), 0);
		ends[k]   = ts_seconds(jstr(a, "ended_at"));
		json_decref(s);
		json_decref(t);
	}
	json_t *t = instance_of(run, "d");
	json_t *s = show(jid(t));
	json_t *a = json_array_get(json_object_get(s, "attempts"), 0);
	double  d = ts_seconds(jstr(a, "started_at"));
	cr_assert_geq(d, ends[0], "d started %.3f s before b ended",
	              ends[0] - d);
	cr_assert_geq(d, ends[1], "d started %.3f s before c ended",
	              ends[1] - d);
	json_decref(s);
	json_decref(t);
}

/* Submit, trigger, wait, then list / show / logs / events of the run. */
static int64_t
diamond_runs(void)
{
	char    path[PATH_MAX + 64], rs[24], is[24];
	json_t *a, *t, *j;
	size_t  i;
	int64_t run;

	write_file("diamond.yaml", diamond_yaml, path, sizeof(path));
	EXPECT_RC(0, "dag", "submit", path);
	EXPECT_RC(0, "dag", "trigger", DIAMOND);
	run = wait_run(DIAMOND, 0, "SUCCESS", 30);

	a = instances(run);
	cr_assert_eq(json_array_size(a), 4, "%s", out);
	json_array_foreach(a, i, t) cr_assert_str_eq(
	    jstr(t, "state"), "SUCCESS", "instance %s", jstr(t, "task"));
	json_decref(a);
	check_order(run);

	t = instance_of(run, "a");
	snprintf(is, sizeof(is), "%lld", (long long) jid(t));
	json_decref(t);
	EXPECT_RC(0, "instance", "logs", is);
	cr_assert_not_null(strstr(out, "hello-from-a"), "logs: %s", out);

	snprintf(rs, sizeof(rs), "%lld", (long long) run);
	EXPECT_RC(0, "events", "--run", rs, "--json", "--limit", "1000");
	j           = out_json();
	int running = 0, succeeded = 0;
	json_array_foreach(json_object_get(j, "events"), i, t)
	{
		running += !strcmp(jstr(t, "type"), "instance.running");
		succeeded += !strcmp(jstr(t, "type"), "instance.succeeded");
	}
	json_decref(j);
	cr_assert_eq(running, 4, "one instance.running per task: %s", out);
	cr_assert_eq(succeeded, 4, "one instance.succeeded per task: %s", out);
	return run;
}

/* Paused: a triggered run does not progress: its instances stay PENDING
 * with a reason, and the resource detector's decision for them is an
 * instance.blocked event with reason DAG_PAUSED. Unpaused, it finishes.
 * (The instance rows keep reason WAIT_RESOURCE: the block decision is
 * only an event, not written to task_instances.) */
static void
pause_holds_runs(int64_t first)
{
	char    rs[24];
	int64_t run, deadline;
	json_t *a, *t, *j;
	size_t  i;
	int     blocked = 0;

	EXPECT_RC(0, "dag", "pause", DIAMOND);
	EXPECT_RC(0, "dag", "trigger", DIAMOND);
	run = wait_run(DIAMOND, first, NULL, 15);
	snprintf(rs, sizeof(rs), "%lld", (long long) run);
	deadline = ax_clock_mono_us() + 15 * AX_USEC_PER_SEC;
	while (!blocked) {
		EXPECT_RC(0, "events", "--run", rs, "--type",
		          "instance.blocked", "--json");
		j = out_json();
		json_array_foreach(json_object_get(j, "events"), i, t)
		    blocked |= !strcmp(jstr(t, "reason"), "DAG_PAUSED");
		json_decref(j);
		if (!blocked)
			check_deadline(deadline,
			               "an instance.blocked event "
			               "with reason DAG_PAUSED");
	}
	ax_clock_sleep_us(2 * AX_USEC_PER_SEC);
	a = instances(run);
	cr_assert_eq(json_array_size(a), 4, "%s", out);
	json_array_foreach(a, i, t)
	{
		cr_assert_str_eq(jstr(t, "state"), "PENDING",
		                 "%s progressed while paused: %s",
		                 jstr(t, "task"), out);
		cr_assert_str_neq(jstr(t, "reason"), "",
		                  "%s waits without a reason",
		                  jstr(t, "task"));
	}
	json_decref(a);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts a JOIN "
	                        "task_instances t ON t.id = a.instance_id "
	                        "WHERE t.dag_run_id = %lld",
	                        (long long) run),
	             0, "no attempt of the paused run was made");
	EXPECT_RC(0, "dag", "unpause", DIAMOND);
	cr_assert_eq(wait_run(DIAMOND, first, "SUCCESS", 30), run);
}

/* A running `sleep 30` killed through the API ends, process and all. */
static void
kill_ends_task(void)
{
	char yaml[4 * PATH_MAX], path[PATH_MAX + 64], pidfile[PATH_MAX + 32];
	char is[24];
	int64_t run, id, deadline;
	int     pid = 0;
	json_t *t;

	snprintf(pidfile, sizeof(pidfile), "%s/slow.pid", e->st.home);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.api.slow\ntasks:\n"
	         "  - {name: s, command: \"echo $$ > %s.tmp && mv %s.tmp %s "
	         "&& exec sleep 30\"}\n",
	         pidfile, pidfile, pidfile);
	write_file("slow.yaml", yaml, path, sizeof(path));
	EXPECT_RC(0, "dag", "submit", path);
	EXPECT_RC(0, "dag", "trigger", "e2e.api.slow");
	run      = wait_run("e2e.api.slow", 0, NULL, 15);
	deadline = ax_clock_mono_us() + 20 * AX_USEC_PER_SEC;
	for (;;) { /* the run row comes before its plan's instance rows */
		json_t *a = instances(run);
		size_t  n = json_array_size(a);
		json_decref(a);
		if (n > 0)
			break;
		check_deadline(deadline, "the sleep task's instance");
	}
	for (;;) {
		t           = instance_of(run, "s");
		id          = jid(t);
		int running = !strcmp(jstr(t, "state"), "RUNNING");
		json_decref(t);
		FILE *f = fopen(pidfile, "r");
		if (f != NULL) {
			if (fscanf(f, "%d", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		if (running && pid > 0)
			break;
		check_deadline(deadline, "the sleep task to run");
	}
	cr_assert_eq(kill(pid, 0), 0, "the task's sleep %d runs", pid);
	snprintf(is, sizeof(is), "%lld", (long long) id);
	EXPECT_RC(0, "instance", "kill", is);
	deadline = ax_clock_mono_us() + 15 * AX_USEC_PER_SEC;
	for (;;) {
		json_t     *s  = show(id);
		const char *st = jstr(s, "state");
		int end = !strcmp(st, "CANCELED") || !strcmp(st, "FAILED");
		cr_assert_str_neq(st, "SUCCESS");
		json_decref(s);
		if (end)
			break;
		check_deadline(deadline, "the killed task to end");
	}
	/* The sleep is gone (a zombie not yet reaped counts as gone). */
	deadline = ax_clock_mono_us() + 5 * AX_USEC_PER_SEC;
	for (;;) {
		char  proc[64], line[512] = "";
		FILE *f;
		snprintf(proc, sizeof(proc), "/proc/%d/stat", pid);
		if ((f = fopen(proc, "r")) == NULL)
			break;
		if (fgets(line, sizeof(line), f) == NULL)
			line[0] = '\0';
		fclose(f);
		if (strstr(line, ") Z ") != NULL ||
		    strstr(line, "sleep") == NULL)
			break;
		check_deadline(deadline, "the killed sleep to exit");
	}
}

/* Attempts of task in run, from `instance show`. */
static size_t
attempts(int64_t run, const char *task, const char **state, json_t **keep)
{
	json_t *t = instance_of(run, task);
	json_t *s = show(jid(t));
	size_t  n = json_array_size(json_object_get(s, "attempts"));
	json_decref(t);
	*state = jstr(s, "state");
	json_decref(*keep);
	*keep = s; /* keeps *state alive */
	return n;
}

/* Clearing b with --downstream reruns b and d, not a or c. */
static void
clear_reruns_downstream(int64_t run)
{
	char        is[24];
	const char *sb, *sd, *st;
	json_t     *t = instance_of(run, "b"), *kb = NULL, *kd = NULL;
	json_t     *k = NULL;
	int64_t     deadline;

	snprintf(is, sizeof(is), "%lld", (long long) jid(t));
	json_decref(t);
	EXPECT_RC(0, "instance", "clear", is, "--downstream");
	deadline = ax_clock_mono_us() + 30 * AX_USEC_PER_SEC;
	for (;;) {
		size_t nb = attempts(run, "b", &sb, &kb);
		size_t nd = attempts(run, "d", &sd, &kd);
		if (nb == 2 && nd == 2 && !strcmp(sb, "SUCCESS") &&
		    !strcmp(sd, "SUCCESS"))
			break;
		check_deadline(deadline, "b and d to rerun and succeed");
	}
	cr_assert_eq(attempts(run, "a", &st, &k), 1, "a did not rerun");
	cr_assert_str_eq(st, "SUCCESS");
	cr_assert_eq(attempts(run, "c", &st, &k), 1, "c did not rerun");
	cr_assert_str_eq(st, "SUCCESS");
	json_decref(k);
	json_decref(kb);
	json_decref(kd);
	check_order(run); /* the first attempt of d, still after b and c */
	cr_assert_eq(wait_run(DIAMOND, run - 1, "SUCCESS", 15), run,
	             "the cleared run is SUCCESS again");
}

/* The value of the sample `series` (name{labels} as printed) in the
 * exposition text m, -1 when absent. */
static double
sample(const char *m, const char *series)
{
	size_t      n = strlen(series);
	const char *p = m;

	while ((p = strstr(p, series)) != NULL) {
		if ((p == m || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return -1;
}

/* Every metric name an expression of the Grafana dashboard names (ax_*
 * identifiers in "expr" strings anywhere in the JSON). */
static void
dashboard_metrics(json_t *j, char names[][96], size_t *n, size_t max)
{
	const char *k;
	json_t     *v;
	size_t      i;

	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		    dashboard_metrics(v, names, n, max);
		return;
	}
	if (!json_is_object(j))
		return;
	json_object_foreach(j, k, v)
	{
		if (strcmp(k, "expr") != 0 || !json_is_string(v)) {
			dashboard_metrics(v, names, n, max);
			continue;
		}
		const char *x = json_string_value(v);
		for (const char *p = x; (p = strstr(p, "ax_")) != NULL;) {
			size_t len  = strspn(p,
			                     "abcdefghijklmnopqrstuvwxyz"
			                      "0123456789_");
			int    word = p == x ||
			    !(isalnum((unsigned char) p[-1]) || p[-1] == '_');
			if (word && *n < max && len < 96) {
				memcpy(names[*n], p, len);
				names[(*n)++][len] = '\0';
			}
			p += len;
		}
	}
}

/*
 * After the runs above, the live /metrics of ax-api: the scheduling
 * latency histograms counted every start (decision, environment ready,
 * end to end, on channel Px), instances finished by state, slots of the
 * one worker; promtool accepts the text; and every metric an expression
 * of deploy/grafana/ax.json names is on it (name, or name with the
 * _bucket / _sum / _count of a histogram).
 */
static void
metrics_are_live(void)
{
	ax_e2e_answer a;
	const char   *dash     = getenv("AX_GRAFANA_JSON");
	int64_t       deadline = ax_clock_mono_us() + 15 * AX_USEC_PER_SEC;
	char(*names)[96]       = calloc(256, 96);
	size_t       nn        = 0;
	json_error_t je;

	cr_assert_not_null(names);
	for (;;) { /* published at most once a second */
		ax_e2e_http(api_url, api_token, "GET", "/metrics", NULL, 0,
		            NULL, &a);
		cr_assert_eq(a.status, 200, "%s", a.body);
		if (sample(a.body,
		           "ax_scheduling_end_to_end_seconds_count{"
		           "channel=\"Px\"}") >= 8 &&
		    sample(a.body,
		           "ax_instances_finished_total{state="
		           "\"SUCCESS\"}") >= 6 &&
		    sample(a.body,
		           "ax_event_sink_dropped_total{sink="
		           "\"event_log\",reason=\"buffer_full\"}") >= 0)
			break;
		check_deadline(deadline, "the scheduling metrics on /metrics");
	}
	cr_assert_lt(a.len, sizeof(a.body) - 1, "/metrics was truncated");
	cr_log_info(
	    "/metrics: %zu bytes; end to end Px count %g, SUCCESS %g", a.len,
	    sample(a.body,
	           "ax_scheduling_end_to_end_seconds_count{"
	           "channel=\"Px\"}"),
	    sample(a.body, "ax_instances_finished_total{state=\"SUCCESS\"}"));
	cr_expect_geq(sample(a.body,
	                     "ax_scheduling_decision_seconds_count{"
	                     "channel=\"Px\"}"),
	              8, "%s", a.body);
	cr_expect_geq(sample(a.body,
	                     "ax_scheduling_env_ready_seconds_count{"
	                     "channel=\"Px\"}"),
	              8, "%s", a.body);
	cr_expect_gt(sample(a.body,
	                    "ax_scheduling_env_ready_seconds_sum{"
	                    "channel=\"Px\"}"),
	             0, "%s", a.body);
	cr_expect_eq(sample(a.body,
	                    "ax_scheduling_decision_seconds_count{"
	                    "channel=\"P0\"}"),
	             0, "%s", a.body);
	cr_expect_geq(
	    sample(a.body, "ax_instances_finished_total{state=\"CANCELED\"}"),
	    1, "the killed task: %s", a.body);
	cr_expect_geq(sample(a.body,
	                     "ax_worker_slots{group=\"default\","
	                     "kind=\"free\"}"),
	              1, "%s", a.body);
	cr_expect_eq(sample(a.body, "ax_worker_heartbeat_losses_total"), 0,
	             "%s", a.body);
	if (access("/usr/bin/promtool", X_OK) == 0) {
		char path[PATH_MAX + 32], cmd[2 * PATH_MAX];
		snprintf(path, sizeof(path), "%s/metrics.txt", e->st.home);
		FILE *f = fopen(path, "w");
		cr_assert_not_null(f);
		fwrite(a.body, 1, a.len, f);
		fclose(f);
		snprintf(cmd, sizeof(cmd),
		         "promtool check metrics < '%s' 2>&1", path);
		cr_expect_eq(system(cmd), 0, "promtool check metrics failed");
	} else
		cr_log_warn("promtool not installed: format not checked");
	cr_assert_not_null(dash, "AX_GRAFANA_JSON is not set");
	json_t *j = json_load_file(dash, 0, &je);
	cr_assert_not_null(j, "%s:%d: %s", dash, je.line, je.text);
	dashboard_metrics(j, names, &nn, 256);
	json_decref(j);
	cr_assert_geq(nn, 12, "%s names too few metrics (%zu)", dash, nn);
	for (size_t i = 0; i < nn; i++) {
		char   base[96], t[160];
		size_t l = strlen(names[i]);
		snprintf(base, sizeof(base), "%s", names[i]);
		static const char *const sfx[] = { "_bucket", "_sum",
			                           "_count" };
		for (size_t k = 0; k < 3; k++) {
			size_t sl = strlen(sfx[k]);
			if (l > sl && strcmp(base + l - sl, sfx[k]) == 0)
				base[l - sl] = '\0';
		}
		snprintf(t, sizeof(t), "\n# TYPE %s ", base);
		cr_expect(strstr(a.body, t) != NULL,
		          "%s names %s, which /metrics does not serve", dash,
		          names[i]);
		snprintf(t, sizeof(t), "\n%s", names[i]);
		cr_expect(strstr(a.body, t) != NULL,
		          "%s names %s: no sample of it on /metrics", dash,
		          names[i]);
	}
	free(names);
}

Test(api_e2e, axctl_drives_the_pipeline)
{
	int64_t run;

	start_stack();
	run = diamond_runs();
	kill_ends_task();
	clear_reruns_downstream(run);
	pause_holds_runs(run);
	metrics_are_live();
}

/* ---- TLS ---------------------------------------------------------------- */

static size_t
discard(char *p, size_t size, size_t n, void *u)
{
	(void) p;
	(void) u;
	return size * n;
}

/* GET url; *status gets the HTTP code (0 without an answer). */
static CURLcode
get(const char *url, const char *cainfo, long *status)
{
	CURL    *h = curl_easy_init();
	CURLcode rc;

	cr_assert_not_null(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
	if (cainfo != NULL)
		curl_easy_setopt(h, CURLOPT_CAINFO, cainfo);
	rc      = curl_easy_perform(h);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	return rc;
}

Test(api_e2e, tls_with_a_self_signed_certificate)
{
	char     cert[PATH_MAX + 32], key[PATH_MAX + 32], cmd[3 * PATH_MAX];
	char     url[96];
	long     status;
	CURLcode rc;
	int      port;

	e = ax_e2e_new(0, NULL);
	snprintf(cert, sizeof(cert), "%s/tls.crt", e->st.home);
	snprintf(key, sizeof(key), "%s/tls.key", e->st.home);
	snprintf(
	    cmd, sizeof(cmd),
	    "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost "
	    "-addext subjectAltName=DNS:localhost -days 1 -keyout '%s' "
	    "-out '%s' 2>/dev/null",
	    key, cert);
	cr_assert_eq(system(cmd), 0, "openssl failed: %s", cmd);
	setenv("AX_API_TLS_CERT", cert, 1);
	setenv("AX_API_TLS_KEY", key, 1);
	port = ax_e2e_start_api(e);
	curl_global_init(CURL_GLOBAL_DEFAULT);

	snprintf(url, sizeof(url), "https://localhost:%d/healthz", port);
	rc = get(url, cert, &status);
	cr_assert_eq(rc, CURLE_OK, "%s: %s", url, curl_easy_strerror(rc));
	cr_assert_eq(status, 200, "%s answered %ld", url, status);

	/* The certificate is what makes it trusted: without it as the CA,
	 * the verification fails. */
	rc = get(url, "/dev/null", &status);
	cr_assert_neq(rc, CURLE_OK, "an unknown certificate was trusted");

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", port);
	rc = get(url, NULL, &status);
	cr_assert(rc != CURLE_OK || status != 200,
	          "plain http on the TLS port answered %ld", status);
	cr_assert(ax_proc_poll(&e->st.api), "ax-api died on plain http");

	curl_global_cleanup();
}
