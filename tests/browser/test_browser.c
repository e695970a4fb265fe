/*
 * test_browser.c - the web UI in a real headless Chromium: this harness
 * starts a throwaway PostgreSQL, axd, one ax-worker and ax-api
 * (tests/e2e/e2e_harness.h), loads the DAGs the scenario needs, holds one
 * DAG with a Block rule, writes the scale data (10,000 DAGs; one DAG of
 * 100 runs x 200 tasks) straight into PostgreSQL, then runs
 * tests/browser/scenario.mjs under node, which drives Debian's chromium
 * through puppeteer-core (tests/browser/package.json). The scenario's
 * exit status is the test's; its output (steps, page timings, the
 * screenshots it wrote) is printed.
 *
 * Needs: chromium ($AX_CHROMIUM, default /usr/bin/chromium), node, and
 * tests/browser/node_modules (deploy/install-deps.sh runs `npm ci`
 * there); a missing one fails the test with what to run.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_harness.h"

static const char *demo_yaml =
    "kind: DAG\n"
    "name: ui.demo\n"
    "owner: web-team\n"
    "tasks:\n"
    "  - {name: extract, type: bash, command: \"echo hello-from-extract; "
    "sleep 0.3\"}\n"
    "  - {name: clean, type: bash, command: \"echo clean\", depends_on: "
    "[extract]}\n"
    "  - {name: enrich, type: bash, command: \"echo enrich\", depends_on: "
    "[extract]}\n"
    "  - {name: publish, type: bash, command: \"echo publish\", "
    "depends_on: [clean, enrich]}\n";

static const char *report_yaml =
    "kind: DAG\n"
    "name: ui.report\n"
    "owner: web-team\n"
    "depends_on_dags: [ui.demo]\n"
    "tasks:\n"
    "  - {name: report, type: bash, command: \"true\"}\n";

static const char *blocked_yaml =
    "kind: DAG\n"
    "name: ui.blocked\n"
    "owner: web-team\n"
    "tasks:\n"
    "  - {name: held, type: bash, command: \"true\"}\n";

/* 200 tasks in 10 layers of 20; each depends on its task of the layer
 * before. Never scheduled: the test writes its runs. */
static char *
big_yaml(void)
{
	size_t cap = 64 * 1024, n;
	char  *y   = malloc(cap);

	cr_assert_not_null(y);
	n = (size_t) snprintf(y, cap, "kind: DAG\nname: ui.big\ntasks:\n");
	for (int i = 0; i < 200; i++) {
		if (i < 20)
			n += (size_t) snprintf(y + n, cap - n,
			                       "  - {name: t%03d, type: bash, "
			                       "command: \"true\"}\n",
			                       i);
		else
			n +=
			    (size_t) snprintf(y + n, cap - n,
			                      "  - {name: t%03d, type: bash, "
			                      "command: \"true\", depends_on: "
			                      "[t%03d]}\n",
			                      i, i - 20);
		cr_assert_lt(n, cap);
	}
	return y;
}

static void
sql(ax_e2e *e, const char *q)
{
	PGresult *r = PQexec(e->db, q);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK ||
	              PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", q, PQerrorMessage(e->db));
	PQclear(r);
}

/* 10,000 DAGs (copies of ui.report's definition, unscheduled) and 100
 * finished runs x 200 instances of ui.big, mostly SUCCESS. Written after
 * axd started and without a NOTIFY: axd never looks at them. */
static void
scale_data(ax_e2e *e)
{
	sql(e, "BEGIN");
	sql(e,
	    "WITH src AS (SELECT v.definition, v.yaml FROM dags d JOIN "
	    "dag_versions v ON v.id = d.active_version_id WHERE d.name = "
	    "'ui.report'), nd AS (INSERT INTO dags (name) SELECT "
	    "format('ui.scale.%s', lpad(g::text, 5, '0')) FROM "
	    "generate_series(1, 10000) g RETURNING id, name) "
	    "INSERT INTO dag_versions (dag_id, version, content_hash, yaml, "
	    "definition, source) SELECT nd.id, 1, md5(nd.name) || "
	    "md5(nd.name), src.yaml, jsonb_set(jsonb_set(src.definition, "
	    "'{name}', to_jsonb(nd.name)), '{depends_on_dags}', '[]'), "
	    "'test' FROM nd, src");
	sql(e,
	    "UPDATE dags d SET active_version_id = v.id FROM dag_versions v "
	    "WHERE v.dag_id = d.id AND d.name LIKE 'ui.scale.%'");
	sql(e,
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state, started_at, "
	    "ended_at) SELECT d.id, d.active_version_id, 'backfill', t, t, "
	    "t + interval '1 hour', CASE WHEN g % 17 = 0 THEN 'FAILED' ELSE "
	    "'SUCCESS' END, t, t + interval '5 min' FROM dags d, "
	    "generate_series(1, 100) g, LATERAL (SELECT timestamptz "
	    "'2026-01-01 00:00Z' + (g || ' hours')::interval AS t) x WHERE "
	    "d.name = 'ui.big'");
	sql(e,
	    "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, try_number, started_at, ended_at) SELECT "
	    "r.id, r.dag_id, format('t%s', lpad(k::text, 3, '0')), "
	    "r.logical_date, CASE WHEN r.state = 'FAILED' AND k >= 180 THEN "
	    "'FAILED' WHEN (r.id + k) % 97 = 0 THEN 'SKIPPED' ELSE 'SUCCESS' "
	    "END, 1, r.started_at, r.ended_at FROM dag_runs r JOIN dags d ON "
	    "d.id = r.dag_id, generate_series(0, 199) k WHERE d.name = "
	    "'ui.big'");
	sql(e, "COMMIT");
	sql(e, "ANALYZE");
}

static void
need_file(const char *path, const char *fix)
{
	cr_assert_eq(access(path, X_OK), 0, "%s is missing (%s): %s", path,
	             strerror(errno), fix);
}

Test(browser, operator_and_viewer_scenario, .timeout = 240)
{
	char        url[64], admin[AX_API_TOKEN_LEN], viewer[256], body[512];
	char        dir[PATH_MAX], mods[PATH_MAX + 32], shots[PATH_MAX];
	char        chromium[PATH_MAX], blocked[32], cmd[PATH_MAX * 2];
	const char *src = getenv("AX_BROWSER_DIR"), *c = getenv("AX_CHROMIUM");
	ax_e2e_answer a;
	ax_e2e       *e;

	cr_assert_not_null(src,
	                   "AX_BROWSER_DIR is not set (tests/meson.build)");
	snprintf(dir, sizeof(dir), "%s", src);
	snprintf(chromium, sizeof(chromium), "%s",
	         c ? c : "/usr/bin/chromium");
	snprintf(mods, sizeof(mods), "%s/node_modules/puppeteer-core", dir);
	need_file(chromium, "run deploy/install-deps.sh (Debian's chromium)");
	cr_assert_eq(access(mods, R_OK), 0,
	             "%s is missing: run deploy/install-deps.sh (npm ci in "
	             "tests/browser)",
	             mods);
	snprintf(shots, sizeof(shots), "%s",
	         getenv("AX_SHOTS") ? getenv("AX_SHOTS") : "browser-shots");
	mkdir(shots, 0755);

	e         = ax_e2e_new(1, NULL);
	char *big = big_yaml();
	ax_e2e_load(e, "demo", "ui.demo", demo_yaml);
	ax_e2e_load(e, "report", "ui.report", report_yaml);
	ax_e2e_load(e, "blocked", "ui.blocked", blocked_yaml);
	ax_e2e_load(e, "big", "ui.big", big);
	free(big);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);
	ax_e2e_start_api_token(e, AX_API_ROLE_ADMIN, "browser-admin", url,
	                       sizeof(url), admin);

	const char *vt = "{\"name\":\"browser-viewer\",\"role\":\"viewer\"}";
	ax_e2e_http(url, admin, "POST", "/api/v1/tokens", vt, strlen(vt), NULL,
	            &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	snprintf(viewer, sizeof(viewer), "%s",
	         json_string_value(json_object_get(a.js, "token")));
	json_decref(a.js);

	/* ui.blocked held by a Block rule, then triggered */
	const char *rule = "{\"action\":\"block\",\"dag\":\"ui.blocked\","
	                   "\"note\":\"browser test hold\"}";
	ax_e2e_http(url, admin, "POST", "/api/v1/rules", rule, strlen(rule),
	            NULL, &a);
	cr_assert_eq(a.status, 201, "%s", a.body);
	json_decref(a.js);
	ax_e2e_http(url, admin, "POST", "/api/v1/dags/ui.blocked/trigger",
	            "{}", 2, NULL, &a);
	cr_assert(a.status >= 200 && a.status < 300, "%s", a.body);
	json_decref(a.js);
	ax_e2e_wait(
	    e, 30, "the blocked instance's row",
	    "SELECT count(*) FROM task_instances i JOIN dags d ON d.id "
	    "= i.dag_id WHERE d.name = 'ui.blocked' AND i.reason LIKE "
	    "'RULE_BLOCKED%%'");
	ax_e2e_text(e, blocked, sizeof(blocked),
	            "SELECT i.id FROM task_instances i JOIN dags d ON d.id = "
	            "i.dag_id WHERE d.name = 'ui.blocked'");
	fprintf(stderr, "events of the blocked DAG: %s\n",
	        ax_e2e_text(e, body, sizeof(body),
	                    "SELECT string_agg(format('%%s/%%s/%%s/%%s', "
	                    "v.type, v.reason, v.instance_id, v.dag_run_id), "
	                    "' ') FROM event_log v JOIN dags d ON d.id = "
	                    "v.dag_id WHERE d.name = 'ui.blocked'"));
	scale_data(e);

	snprintf(body, sizeof(body), "%s", url);
	setenv("AX_URL", body, 1);
	setenv("AX_ADMIN_TOKEN", admin, 1);
	setenv("AX_VIEWER_TOKEN", viewer, 1);
	setenv("AX_BLOCKED_INSTANCE", blocked, 1);
	setenv("AX_CHROMIUM", chromium, 1);
	setenv("AX_SHOTS", shots, 1);
	snprintf(cmd, sizeof(cmd), "node '%s/scenario.mjs' 2>&1", dir);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char line[4096];
	while (fgets(line, sizeof(line), p) != NULL)
		fputs(line, stderr);
	int st = pclose(p);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	          "the browser scenario failed (status %d; its output above)",
	          st);
	ax_e2e_free(e);
}
