/*
 * test_render_e2e.c - trigger params never become shell code, end to end:
 * real PostgreSQL, axd, one ax-worker and ax-api; params sent as JSON to
 * POST /api/v1/dags/NAME/trigger (libcurl) and with the real `axctl dag
 * trigger --param`. For every payload class (double quotes and `;`,
 * backticks, $( ), single quotes, newlines, backslashes, $HOME) a DAG
 * whose commands are `echo "{{ params.region }}" > FILE` and
 * `echo {{ params.region }} > FILE` runs to SUCCESS, no marker file
 * appears, both files hold the payload literally, and the instance
 * details show the command exactly as it ran. Undeclared keys, wrong
 * types, pattern mismatches and NUL are refused with 422 / 400 before
 * any run exists, and a trigger command written around the API is
 * rejected by axd with the reason.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_token.h"
#include "cli_run.h"
#include "clock.h"
#include "e2e_harness.h"
#include "store.h"

static ax_e2e *e;
static char    out[262144], err[16384];
static char    url[64], token[AX_API_TOKEN_LEN];
static char    dir[512]; /* where the tasks write */

static void
setup(void)
{
	ax_e2e_use_axctl();
	unsetenv("AX_API_TLS_CERT");
	unsetenv("AX_API_TLS_KEY");
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
}

TestSuite(render_e2e, .init = setup, .fini = teardown, .timeout = 240);

#define AXCTL(...) AX_CLI_AXCTL(__VA_ARGS__, NULL)

#define EXPECT_RC(rc, ...) AX_CLI_EXPECT_RC(ax_e2e_dump(e), rc, __VA_ARGS__)

/* POSTs body (len bytes) to path; returns the status, answer in resp
 * (64 KiB). */
static long
post(const char *path, const char *body, size_t len, char *resp)
{
	static ax_e2e_answer a;

	ax_e2e_http(url, token, "POST", path, body, len, NULL, &a);
	memcpy(resp, a.body, a.len + 1);
	json_decref(a.js);
	return a.status;
}

static void
start_stack(void)
{
	e = ax_e2e_new(1, NULL);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_OPERATOR, "e2e-op", url,
	                       sizeof(url), token);
	setenv("AX_HOME", e->st.home, 1);
	snprintf(dir, sizeof(dir), "%.480s/render-out", e->st.home);
	cr_assert_eq(mkdir(dir, 0777), 0);
	chmod(dir, 0777); /* the task may run as another user */
}

#define DAG "e2e.render.quote"

/* The DAG: two tasks writing the param inside "..." and bare. */
static void
load_dag(void)
{
	char yaml[4096];
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\n"
	         "name: " DAG "\n"
	         "concurrency: {max_active_runs: 1}\n"
	         "params:\n"
	         "  region: eu\n"
	         "  shards: {default: 4, type: integer}\n"
	         "  code: {default: ab, pattern: '[a-z]+'}\n"
	         "tasks:\n"
	         "  - name: dq\n"
	         "    command: 'echo \"{{ params.region }}\" > %s/dq.out'\n"
	         "  - name: bare\n"
	         "    command: 'echo {{ params.region }} > %s/bare.out'\n",
	         dir, dir);
	ax_e2e_load(e, "quote", DAG, yaml);
}

/* Waits for run (id) to end; returns its state. */
static void
wait_success(int64_t run)
{
	ax_e2e_wait(e, 60, "the run to end",
	            "SELECT state IN ('SUCCESS', 'FAILED') FROM dag_runs "
	            "WHERE id = %lld",
	            (long long) run);
	char st[32];
	ax_e2e_text(e, st, sizeof(st),
	            "SELECT state FROM dag_runs WHERE "
	            "id = %lld",
	            (long long) run);
	if (strcmp(st, "SUCCESS") != 0)
		ax_e2e_dump(e);
	cr_assert_str_eq(st, "SUCCESS", "run %lld", (long long) run);
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s was not written", path);
	char  *buf = calloc(1, 65536);
	size_t n   = fread(buf, 1, 65535, f);
	buf[n]     = '\0';
	fclose(f);
	return buf;
}

/* Both files hold the payload, nothing else ran, and the instance
 * details show the command as the worker ran it. */
static void
check_run(int64_t run, const char *payload, const char *how)
{
	char path[PATH_MAX + 32], want[4096];

	wait_success(run);
	snprintf(path, sizeof(path), "%s/pwn", dir);
	cr_assert_neq(access(path, F_OK), 0,
	              "%s: payload '%s' ran a command (%s exists)", how,
	              payload, path);
	snprintf(want, sizeof(want), "%s\n", payload);
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "%s/%s.out", dir,
		         k ? "bare" : "dq");
		char *got = slurp(path);
		cr_assert_str_eq(got, want, "%s: %s.out for '%s'", how,
		                 k ? "bare" : "dq", payload);
		free(got);
		unlink(path);
	}
	/* the command in the instance details is the one that ran */
	char is[24], cmd[8192];
	ax_e2e_text(e, is, sizeof(is),
	            "SELECT id FROM task_instances WHERE dag_run_id = %lld "
	            "AND task = 'dq'",
	            (long long) run);
	EXPECT_RC(0, "instance", "show", is, "--json");
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	json_t     *a     = json_array_get(json_object_get(j, "attempts"), 0);
	const char *shown = json_string_value(json_object_get(a, "command"));
	cr_assert_not_null(shown, "no command in: %s", out);
	snprintf(cmd, sizeof(cmd), "echo \"");
	for (const char *p = payload; *p; p++) {
		size_t n = strlen(cmd);
		if (strchr("\"\\$`", *p) != NULL)
			cmd[n++] = '\\';
		cmd[n++] = *p;
		cmd[n]   = '\0';
	}
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd),
	         "\" > %s/dq.out", dir);
	cr_assert_str_eq(shown, cmd, "%s", how);
	/* run the shown command again: it writes the payload, no more */
	char again[PATH_MAX + 16];
	snprintf(again, sizeof(again), "%s/dq.out", dir);
	cr_assert_eq(ax_cli_run(out, sizeof(out), err, sizeof(err),
	                        "/bin/bash", "-c", shown, NULL),
	             0, "%s", err);
	char *got = slurp(again);
	cr_assert_str_eq(got, want);
	free(got);
	unlink(again);
	json_decref(j);
	EXPECT_RC(0, "instance", "show", is);
	cr_assert_not_null(strstr(out, "command of attempt 1:"), "%s", out);
}

static int64_t
last_run(void)
{
	return ax_e2e_int(e,
	                  "SELECT coalesce(max(r.id), 0) FROM dag_runs r "
	                  "JOIN dags d ON d.id = r.dag_id WHERE "
	                  "d.name = '" DAG "'");
}

/* The new run after a trigger accepted with 202. */
static int64_t
wait_new_run(int64_t before)
{
	ax_e2e_wait(e, 30, "the triggered run",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = '" DAG "' AND r.id > %lld",
	            (long long) before);
	return last_run();
}

static const char *payload_fmt[] = {
	"x\"; touch %s/pwn; echo \"",
	"`touch %s/pwn`",
	"$(touch %s/pwn)",
	"'; touch %s/pwn; echo '",
	"a\ntouch %s/pwn\nb",
	"\\\\ \\\" \\ %s \\n",
	"$HOME ${HOME} %s",
};

Test(render_e2e, trigger_params_are_data)
{
	char payload[1024], resp[65536];

	start_stack();
	load_dag();
	for (size_t i = 0; i < sizeof(payload_fmt) / sizeof(*payload_fmt);
	     i++) {
		snprintf(payload, sizeof(payload), payload_fmt[i], dir);
		/* through the API, as JSON */
		json_t *b =
		    json_pack("{s:{s:s}}", "params", "region", payload);
		char   *bt     = json_dumps(b, JSON_COMPACT);
		int64_t before = last_run();
		long    st =
		    post("/api/v1/dags/" DAG "/trigger", bt, strlen(bt), resp);
		cr_assert_eq(st, 202, "trigger: %ld %s", st, resp);
		free(bt);
		json_decref(b);
		check_run(wait_new_run(before), payload, "API");
		/* through axctl dag trigger --param */
		char kv[1100];
		snprintf(kv, sizeof(kv), "region=%s", payload);
		before = last_run();
		EXPECT_RC(0, "dag", "trigger", DAG, "--param", kv);
		check_run(wait_new_run(before), payload, "axctl");
	}

	/* refused before any run exists */
	int64_t before = last_run();
	struct {
		const char *body;
		long        status;
		const char *key, *detail;
	} bad[] = {
		{ "{\"params\":{\"regoin\":\"x\"}}", 422, "regoin",
		  "declared: code, region, shards" },
		{ "{\"params\":{\"shards\":\"4; id\"}}", 422, "shards",
		  "an integer" },
		{ "{\"params\":{\"shards\":2.5}}", 422, "shards",
		  "an integer" },
		{ "{\"params\":{\"code\":\"ab; id\"}}", 422, "code",
		  "pattern '[a-z]+'" },
		{ "{\"params\":{\"region\":{\"a\":1}}}", 422, "region",
		  "string, number or boolean" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		long st = post("/api/v1/dags/" DAG "/trigger", bad[i].body,
		               strlen(bad[i].body), resp);
		cr_assert_eq(st, bad[i].status, "%s: %ld %s", bad[i].body, st,
		             resp);
		json_t *j = json_loads(resp, 0, NULL);
		cr_assert_not_null(j, "not JSON: %s", resp);
		cr_assert_str_eq(
		    json_string_value(json_object_get(j, "error")),
		    "invalid_params");
		cr_assert_str_eq(
		    json_string_value(json_object_get(j, "param")),
		    bad[i].key);
		cr_assert_not_null(
		    strstr(json_string_value(json_object_get(j, "detail")),
		           bad[i].detail),
		    "%s", resp);
		json_decref(j);
		/* backfill takes the same check */
		char bb[512];
		snprintf(bb, sizeof(bb),
		         "{\"start\":\"2026-01-01T00:00:00Z\",\"end\":"
		         "\"2026-01-02T00:00:00Z\",%s",
		         bad[i].body + 1);
		st = post("/api/v1/dags/" DAG "/backfill", bb, strlen(bb),
		          resp);
		cr_assert(st == 422 || st == 400, "backfill %s: %ld %s", bb,
		          st, resp);
	}
	/* NUL: JSON can write it, no shell word can hold it */
	const char nul[] = "{\"params\":{\"region\":\"a\\u0000; id\"}}";
	long       st =
	    post("/api/v1/dags/" DAG "/trigger", nul, sizeof(nul) - 1, resp);
	cr_assert(st == 400 || st == 422, "NUL: %ld %s", st, resp);
	json_t *nj = json_loads(resp, 0, NULL);
	cr_assert_not_null(nj, "not JSON: %s", resp);
	json_decref(nj);
	/* axctl prints the API's refusal and exits 1 */
	cr_assert_eq(AXCTL("dag", "trigger", DAG, "--param", "regoin=x"), 1);
	cr_assert_not_null(strstr(err, "unknown param 'regoin'"), "%s", err);
	cr_assert_not_null(strstr(err, "declared: code, region, shards"), "%s",
	                   err);
	cr_assert_eq(AXCTL("dag", "trigger", DAG, "--param", "shards=x"), 1);
	cr_assert_not_null(strstr(err, "an integer"), "%s", err);
	cr_assert_eq(last_run(), before, "a refused trigger created a run");

	/* a trigger command written around the API: axd rejects it */
	int64_t id = ax_e2e_int(
	    e,
	    "INSERT INTO control_command (kind, body) VALUES ('trigger', "
	    "'{\"dag\": \"" DAG "\", \"logical_date_us\": "
	    "1767225600000000, \"params\": {\"evil\": \"$(id)\"}}') "
	    "RETURNING id");
	cr_assert_gt(id, 0);
	ax_e2e_int(e,
	           "SELECT 1 FROM pg_notify('ax_control', '{\"op\": "
	           "\"trigger\", \"dag\": \"" DAG "\", \"logical_date_us\": "
	           "1767225600000000, \"params\": {\"evil\": \"$(id)\"}, "
	           "\"command_id\": %lld}')",
	           (long long) id);
	ax_e2e_wait(e, 30, "axd to reject the command",
	            "SELECT status = 'rejected' FROM control_command WHERE "
	            "id = %lld",
	            (long long) id);
	char reason[512];
	ax_e2e_text(e, reason, sizeof(reason),
	            "SELECT reason FROM control_command WHERE id = %lld",
	            (long long) id);
	cr_assert_not_null(strstr(reason, "unknown param 'evil'"), "%s",
	                   reason);
	cr_assert_eq(last_run(), before, "a rejected command created a run");
}
