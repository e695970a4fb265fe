/*
 * test_api_ui.c - the web UI on ax-api's port (api-server/api_ui.h) and
 * the read models its pages use (api-server/api_views.h, the DAG list's
 * filters), over real HTTP against a real PostgreSQL. Every asset of the
 * compiled-in table is served with its bytes, type, ETag and CSP; a
 * client route gets index.html while /api/ keeps its JSON 404s; every
 * module a script imports is in the table, and no asset names another
 * origin (no CDN). The views are checked against rows the test writes.
 * The browser drives the same pages in tests/browser/.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "api_ui.h"
#include "log.h"

static ax_api_fixture fx;

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	ax_api_fixture_start(&fx, 0);
}

static void
teardown(void)
{
	ax_api_fixture_stop(&fx);
}

TestSuite(api_ui, .init = setup, .fini = teardown, .timeout = 60);

/* One answer with its headers. */
typedef struct ans {
	long   status;
	char  *body;
	size_t len;
	char   hdrs[4096];
} ans;

static size_t
on_body(char *p, size_t sz, size_t n, void *u)
{
	ans  *a  = u;
	char *nb = realloc(a->body, a->len + sz * n + 1);
	cr_assert_not_null(nb);
	a->body = nb;
	memcpy(a->body + a->len, p, sz * n);
	a->len += sz * n;
	a->body[a->len] = '\0';
	return sz * n;
}

static size_t
on_header(char *p, size_t sz, size_t n, void *u)
{
	ans   *a   = u;
	size_t len = strlen(a->hdrs);
	if (len + sz * n < sizeof(a->hdrs)) {
		memcpy(a->hdrs + len, p, sz * n);
		a->hdrs[len + sz * n] = '\0';
	}
	return sz * n;
}

/* method path with one extra header (NULL: none) into *a (freed first). */
static long
get(const char *method, const char *path, const char *header, ans *a)
{
	CURL              *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char               url[512];

	free(a->body);
	memset(a, 0, sizeof(*a));
	snprintf(url, sizeof(url), "%s%s", fx.url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (header != NULL)
		h = curl_slist_append(h, header);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK, "%s %s", method, path);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return a->status;
}

/* 1 when the headers hold "Name: value" (name case-insensitive). */
static int
has_header(const ans *a, const char *name, const char *value)
{
	char want[512];
	snprintf(want, sizeof(want), "\n%s: %s\r", name, value);
	return strcasestr(a->hdrs, want) != NULL;
}

static void
expect_json_404(const char *method, const char *path)
{
	ans a = { 0 };
	cr_expect_eq(get(method, path, NULL, &a), 404, "%s %s", method, path);
	cr_expect(has_header(&a, "Content-Type", "application/json"), "%s: %s",
	          path, a.hdrs);
	cr_expect(a.body && strstr(a.body, "\"not_found\""), "%s: %s", path,
	          a.body ? a.body : "");
	free(a.body);
}

/* Occurrences of needle in the asset's text. */
static int
count(const ax_ui_asset *u, const char *needle)
{
	int n = 0;
	for (const char *p = strstr((const char *) u->data, needle); p;
	     p             = strstr(p + 1, needle))
                n++;
	return n;
}

static void
assets_are_served_with_type_etag_and_csp(void)
{
	ans a = { 0 };

	cr_assert_gt(ax_ui_assets_count, 5);
	for (size_t i = 0; i < ax_ui_assets_count; i++) {
		const ax_ui_asset *u = &ax_ui_assets[i];
		char               inm[128];

		cr_assert_eq(get("GET", u->path, NULL, &a), 200, "%s",
		             u->path);
		cr_expect_eq(a.len, u->len, "%s", u->path);
		cr_expect(a.len == u->len && !memcmp(a.body, u->data, a.len),
		          "%s: other bytes", u->path);
		cr_expect(has_header(&a, "Content-Type", u->content_type),
		          "%s: %s", u->path, a.hdrs);
		cr_expect(has_header(&a, "ETag", u->etag), "%s", a.hdrs);
		cr_expect(has_header(&a, "Cache-Control", "no-cache"), "%s",
		          a.hdrs);
		cr_expect(has_header(&a, "Content-Security-Policy", AX_UI_CSP),
		          "%s", a.hdrs);
		cr_expect(strstr(AX_UI_CSP, "default-src 'self'") != NULL);
		cr_expect(has_header(&a, "X-Content-Type-Options", "nosniff"));
		/* no CDN, no other origin: everything comes from ax-api
		 * (the SVG namespace is a name, never fetched) */
		cr_expect_eq(count(u, "://"),
		             count(u, "http://www.w3.org/2000/svg"),
		             "%s names another origin", u->path);
		snprintf(inm, sizeof(inm), "If-None-Match: W/\"x\", %s",
		         u->etag);
		cr_expect_eq(get("GET", u->path, inm, &a), 304, "%s", u->path);
		cr_expect_eq(a.len, 0);
		cr_expect(has_header(&a, "ETag", u->etag));
		cr_expect_eq(
		    get("GET", u->path, "If-None-Match: \"other\"", &a), 200);
	}
	free(a.body);
}

static void
client_routes_get_the_page_and_the_api_keeps_its_404s(void)
{
	const ax_ui_asset *idx = ax_ui_asset_find("/");
	ans                a   = { 0 };

	cr_assert_not_null(idx);
	cr_assert(
	    strstr((const char *) idx->data,
	           "<script type=\"module\" src=\"/assets/js/app.js\">"));
	static const char *const routes[] = { "/dags", "/dags/demo.diamond",
		                              "/runs/7", "/instances/9",
		                              "/anything/else?x=1" };
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		cr_expect_eq(get("GET", routes[i], NULL, &a), 200, "%s",
		             routes[i]);
		cr_expect(a.len == idx->len &&
		              !memcmp(a.body, idx->data, idx->len),
		          "%s is not index.html", routes[i]);
		cr_expect(has_header(&a, "Content-Type",
		                     "text/html; charset=utf-8"));
	}
	cr_expect_eq(get("HEAD", "/dags", NULL, &a), 200);
	cr_expect_eq(a.len, 0);
	expect_json_404("GET", "/api");
	expect_json_404("GET", "/api/v1/nope");
	expect_json_404("GET", "/api/v2/dags");
	expect_json_404("GET", "/assets/nope.js");
	expect_json_404("POST", "/dags");
	expect_json_404("DELETE", "/");
	/* the API's own routes are unchanged */
	cr_expect_eq(get("GET", "/healthz", NULL, &a), 200);
	cr_expect_eq(get("GET", "/api/v1/dags", NULL, &a), 401);
	free(a.body);
}

/* One server for both (a cluster per test costs seconds on a loaded
 * machine). */
Test(api_ui, assets_and_client_routes)
{
	assets_are_served_with_type_etag_and_csp();
	client_routes_get_the_page_and_the_api_keeps_its_404s();
}

/* Every `from './x.js'` of every script is an asset of the table. */
Test(api_ui_table, every_imported_module_is_compiled_in)
{
	int imports = 0;

	for (size_t i = 0; i < ax_ui_assets_count; i++) {
		const char *t = (const char *) ax_ui_assets[i].data;
		if (strstr(ax_ui_assets[i].path, ".js") == NULL)
			continue;
		for (const char *p = strstr(t, "from './"); p != NULL;
		     p             = strstr(p + 1, "from './")) {
			char        path[256];
			const char *e = strchr(p + 8, '\'');
			cr_assert_not_null(e);
			snprintf(path, sizeof(path), "/assets/js/%.*s",
			         (int) (e - p - 8), p + 8);
			cr_expect_not_null(ax_ui_asset_find(path),
			                   "%s imports %s, not compiled in "
			                   "(api-server/meson.build)",
			                   ax_ui_assets[i].path, path);
			imports++;
		}
	}
	cr_expect_gt(imports, 5);
}

/* ---- the views ---------------------------------------------------------- */

static json_t *
api_get(const char *path, const char *token, long want)
{
	ax_api_fixture_ans a = { 0 };
	long st = ax_api_fixture_req(&fx, "GET", path, token, NULL, &a);
	cr_assert_eq(st, want, "GET %s: %ld %s", path, st, a.raw);
	json_t *j = json_incref(a.json);
	ax_api_fixture_ans_fini(&a);
	cr_assert_not_null(j, "GET %s: not JSON", path);
	return j;
}

static void
submit(const char *yaml)
{
	ax_api_fixture_ans a = { 0 };
	long st = ax_api_fixture_req(&fx, "POST", "/api/v1/dags", fx.admin,
	                             yaml, &a);
	cr_assert(st == 201 || st == 200, "%ld %s", st, a.raw);
	ax_api_fixture_ans_fini(&a);
}

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void
load_views_dags(void)
{
	submit("kind: DAG\nname: ui.alpha\nowner: Team-A\nschedule: {cron: "
	       "\"0 0 2 * * ?\"}\ntasks:\n  - {name: extract, type: bash, "
	       "command: \"true\"}\n  - {name: load, type: bash, command: "
	       "\"true\", depends_on: [extract]}\n");
	submit("kind: DAG\nname: ui.beta\nowner: team-b\nschedule: {cron: "
	       "\"0 0 3 * * ?\"}\ntasks:\n  - {name: x, type: bash, command: "
	       "\"true\"}\n");
	submit("kind: DAG\nname: ui.down\nowner: team-b\nschedule: {cron: "
	       "\"0 0 4 * * ?\"}\ndepends_on_dags: [ui.alpha]\ntasks:\n  - "
	       "{name: y, type: bash, command: \"true\"}\n");
	ax_api_fixture_sql(
	    &fx, "UPDATE dags SET paused = true WHERE name = 'ui.beta'");
	/* 12 daily runs of ui.alpha; both tasks in each; the newest is
	 * running its second task */
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state) SELECT d.id, "
	    "d.active_version_id, 'scheduled', t, t, t + interval '1 day', "
	    "CASE WHEN g = 12 THEN 'RUNNING' ELSE 'SUCCESS' END FROM dags d, "
	    "generate_series(1, 12) g, LATERAL (SELECT timestamptz "
	    "'2026-01-01 00:00Z' + (g || ' days')::interval AS t) x "
	    "WHERE d.name = 'ui.alpha'");
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, channel, try_number) SELECT r.id, r.dag_id, "
	    "k, r.logical_date, CASE WHEN r.state = 'RUNNING' AND k = 'load' "
	    "THEN 'READY' ELSE 'SUCCESS' END, 'Px', 1 FROM dag_runs r "
	    "JOIN dags d ON d.id = r.dag_id, unnest(ARRAY['load', 'extract']) "
	    "k WHERE d.name = 'ui.alpha'");
}

static void
dag_list_searches_filters_and_summarises_recent_runs(void)
{
	json_t *j, *d;

	j = api_get("/api/v1/dags", fx.viewer, 200);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 3);
	d = json_array_get(json_object_get(j, "dags"), 0);
	cr_assert_str_eq(str(d, "name"), "ui.alpha");
	json_t *rr = json_object_get(d, "recent_runs");
	cr_assert_eq(json_array_size(rr), 10, "default: the 10 newest");
	cr_expect_str_eq(str(json_array_get(rr, 0), "state"), "RUNNING");
	cr_expect_str_eq(str(json_array_get(rr, 0), "logical_date"),
	                 "2026-01-13T00:00:00.000000Z");
	cr_expect_str_eq(str(json_array_get(rr, 9), "logical_date"),
	                 "2026-01-04T00:00:00.000000Z");
	cr_expect_not_null(
	    str(d, "next_fire_at")
	        ? str(d, "next_fire_at")
	        : (json_is_null(json_object_get(d, "next_fire_at")) ? "null"
	                                                            : NULL),
	    "next_fire_at is a member");
	cr_expect_eq(
	    json_array_size(json_object_get(
	        json_array_get(json_object_get(j, "dags"), 1), "recent_runs")),
	    0, "ui.beta has no run");
	json_decref(j);

	/* q: a substring of the name or the owner, any case */
	j = api_get("/api/v1/dags?q=ALPH", fx.viewer, 200);
	cr_expect_eq(json_array_size(json_object_get(j, "dags")), 1);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 1);
	json_decref(j);
	j = api_get("/api/v1/dags?q=team-b", fx.viewer, 200);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 2);
	json_decref(j);
	j = api_get("/api/v1/dags?q=%25", fx.viewer, 200);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 0,
	             "%% is a character, not a pattern");
	json_decref(j);
	j = api_get("/api/v1/dags?paused=true", fx.viewer, 200);
	cr_expect_eq(json_array_size(json_object_get(j, "dags")), 1);
	cr_expect_str_eq(
	    str(json_array_get(json_object_get(j, "dags"), 0), "name"),
	    "ui.beta");
	json_decref(j);
	j = api_get("/api/v1/dags?paused=false&q=team-b", fx.viewer, 200);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 1);
	json_decref(j);
	/* paging: total stays the filter's, the cursor moves on */
	j = api_get("/api/v1/dags?limit=2&recent=0", fx.viewer, 200);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 3);
	cr_expect_str_eq(str(j, "next_cursor"), "ui.beta");
	cr_expect_null(
	    json_object_get(json_array_get(json_object_get(j, "dags"), 0),
	                    "recent_runs"),
	    "recent=0 leaves the runs out");
	json_decref(j);
	j = api_get("/api/v1/dags?limit=2&cursor=ui.beta", fx.viewer, 200);
	cr_expect_eq(json_array_size(json_object_get(j, "dags")), 1);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 3);
	json_decref(j);
	/* bad input names the parameter */
	j = api_get("/api/v1/dags?paused=maybe", fx.viewer, 400);
	cr_expect(strstr(str(j, "detail"), "paused") != NULL, "%s",
	          str(j, "detail"));
	json_decref(j);
	j = api_get("/api/v1/dags?recent=26", fx.viewer, 400);
	cr_expect(strstr(str(j, "detail"), "recent") != NULL, "%s",
	          str(j, "detail"));
	json_decref(j);
}

static void
grid_graph_queue_and_me(void)
{
	json_t *j, *runs, *cells, *tasks;

	j     = api_get("/api/v1/dags/ui.alpha/grid?runs=5", fx.viewer, 200);
	tasks = json_object_get(j, "tasks");
	runs  = json_object_get(j, "runs");
	cells = json_object_get(j, "cells");
	cr_assert_eq(json_array_size(tasks), 2);
	cr_expect_str_eq(json_string_value(json_array_get(tasks, 0)),
	                 "extract", "definition order");
	cr_assert_eq(json_array_size(runs), 5);
	cr_expect_str_eq(str(json_array_get(runs, 0), "logical_date"),
	                 "2026-01-09T00:00:00.000000Z", "oldest first");
	cr_expect_str_eq(str(json_array_get(runs, 4), "state"), "RUNNING");
	cr_assert_eq(json_array_size(cells), 10);
	int ready = 0;
	for (size_t i = 0; i < json_array_size(cells); i++) {
		json_t     *c  = json_array_get(cells, i);
		int64_t     ri = json_integer_value(json_array_get(c, 0));
		int64_t     ti = json_integer_value(json_array_get(c, 1));
		const char *st = json_string_value(json_array_get(c, 3));
		cr_assert(ri >= 0 && ri < 5 && ti >= 0 && ti < 2);
		int64_t id = json_integer_value(json_array_get(c, 2));
		cr_expect_eq(
		    ax_api_fixture_int(
		        &fx,
		        "SELECT count(*) FROM task_instances i "
		        "WHERE i.id = %lld AND i.task = '%s' AND "
		        "i.dag_run_id = %lld AND i.state = '%s'",
		        (long long) id,
		        json_string_value(json_array_get(tasks, ti)),
		        (long long) json_integer_value(
		            json_object_get(json_array_get(runs, ri), "id")),
		        st),
		    1, "cell %zu is not its instance", i);
		ready += !strcmp(st, "READY");
	}
	cr_expect_eq(ready, 1);
	cr_expect_str_eq(str(j, "next_before"), "2026-01-09T00:00:00.000000Z");
	json_decref(j);
	j = api_get(
	    "/api/v1/dags/ui.alpha/grid?runs=5&before=2026-01-09T00:00:00Z",
	    fx.viewer, 200);
	runs = json_object_get(j, "runs");
	cr_expect_eq(json_array_size(runs), 5);
	cr_expect_str_eq(str(json_array_get(runs, 4), "logical_date"),
	                 "2026-01-08T00:00:00.000000Z");
	json_decref(j);
	j = api_get("/api/v1/dags/ui.alpha/grid?runs=100", fx.viewer, 200);
	cr_expect_eq(json_array_size(json_object_get(j, "runs")), 12);
	cr_expect(json_is_null(json_object_get(j, "next_before")));
	json_decref(j);
	json_decref(
	    api_get("/api/v1/dags/ui.alpha/grid?runs=0", fx.viewer, 400));
	json_decref(
	    api_get("/api/v1/dags/ui.alpha/grid?before=soon", fx.viewer, 400));
	json_decref(api_get("/api/v1/dags/ui.nope/grid", fx.viewer, 404));

	/* graph: tasks and edges; upstream and downstream DAGs */
	j = api_get("/api/v1/dags/ui.alpha/graph", fx.viewer, 200);
	cr_expect_eq(json_array_size(json_object_get(j, "tasks")), 2);
	json_t *load = json_array_get(json_object_get(j, "tasks"), 1);
	cr_expect_str_eq(str(load, "name"), "load");
	cr_expect_str_eq(json_string_value(json_array_get(
	                     json_object_get(load, "depends_on"), 0)),
	                 "extract");
	cr_expect_eq(json_array_size(json_object_get(j, "upstream_dags")), 0);
	cr_assert_eq(json_array_size(json_object_get(j, "downstream_dags")),
	             1);
	cr_expect_str_eq(
	    str(json_array_get(json_object_get(j, "downstream_dags"), 0),
	        "dag"),
	    "ui.down");
	json_decref(j);
	j = api_get("/api/v1/dags/ui.down/graph", fx.viewer, 200);
	cr_assert_eq(json_array_size(json_object_get(j, "upstream_dags")), 1);
	cr_expect_str_eq(
	    str(json_array_get(json_object_get(j, "upstream_dags"), 0), "dag"),
	    "ui.alpha");
	cr_expect_eq(json_array_size(json_object_get(j, "downstream_dags")),
	             0);
	json_decref(j);
	json_decref(api_get("/api/v1/dags/ui.nope/graph", fx.viewer, 404));

	/* queue: the one READY instance, per channel and group */
	j          = api_get("/api/v1/queue", fx.viewer, 200);
	json_t *dp = json_object_get(j, "depth");
	cr_assert_eq(json_array_size(dp), 1, "%s",
	             json_dumps(j, JSON_COMPACT));
	cr_expect_str_eq(str(json_array_get(dp, 0), "channel"), "Px");
	cr_expect_eq(json_integer_value(
	                 json_object_get(json_array_get(dp, 0), "ready")),
	             1);
	cr_expect_eq(json_integer_value(
	                 json_object_get(json_array_get(dp, 0), "pending")),
	             0);
	json_decref(j);

	/* me: each token's own role; none: 401 */
	j = api_get("/api/v1/me", fx.viewer, 200);
	cr_expect_str_eq(str(j, "role"), "viewer");
	cr_expect_str_eq(str(j, "name"), "v");
	json_decref(j);
	j = api_get("/api/v1/me", fx.oper, 200);
	cr_expect_str_eq(str(j, "role"), "operator");
	json_decref(j);
	j = api_get("/api/v1/me", fx.admin, 200);
	cr_expect_str_eq(str(j, "role"), "admin");
	json_decref(j);
	json_decref(api_get("/api/v1/me", NULL, 401));
}

Test(api_ui, views)
{
	load_views_dags();
	dag_list_searches_filters_and_summarises_recent_runs();
	grid_graph_queue_and_me();
}
