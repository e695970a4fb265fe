/*
 * test_api.c - ax-api over real HTTP (libcurl) against a real PostgreSQL
 * (tests/pg_harness.h): the server runs in-process on a free port. Each
 * route, each role (401 / 403), each class of bad input, DAG submission
 * with validation errors, the control notifications (LISTEN ax_control)
 * of pause / trigger / backfill / kill / clear, logs (tail, offset,
 * follow) and the Prometheus format of /metrics (promtool when
 * installed).
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_fixture.h"
#include "log.h"
#include "store.h"

#define MAX_BODY 65536

static ax_api_fixture fx;
static char           logpath[256];

/* The last answer. */
static char   *body;
static size_t  body_len;
static char    hdrs[4096];
static json_t *js;
static char    req_header[320]; /* one more request header ("": none) */

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	ax_api_fixture_start(&fx, MAX_BODY);
	snprintf(logpath, sizeof(logpath), "/tmp/ax-test-api-%d.log",
	         (int) getpid());
}

static void
teardown(void)
{
	unlink(logpath);
	ax_api_fixture_stop(&fx);
	free(body);
	json_decref(js);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 120);

static size_t
on_body(char *p, size_t sz, size_t n, void *u)
{
	char *nb = realloc(body, body_len + sz * n + 1);
	cr_assert_not_null(nb);
	body = nb;
	memcpy(body + body_len, p, sz * n);
	body_len += sz * n;
	body[body_len] = '\0';
	return sz * n;
}

static size_t
on_header(char *p, size_t sz, size_t n, void *u)
{
	size_t len = strlen(hdrs);
	if (len + sz * n < sizeof(hdrs)) {
		memcpy(hdrs + len, p, sz * n);
		hdrs[len + sz * n] = '\0';
	}
	return sz * n;
}

/*
 * Sends method path with token (NULL: none) and body (NULL: none; len
 * -1: strlen); chunked = 1 sends the body without a Content-Length.
 * Returns the status; the answer is in body / hdrs / js (parsed JSON).
 */
static long
req(const char *method, const char *path, const char *token, const char *data,
    long len, int chunked)
{
	CURL              *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char               url[1024], auth[128];
	long               code = 0;

	free(body);
	body     = NULL;
	body_len = 0;
	hdrs[0]  = '\0';
	json_decref(js);
	js = NULL;
	snprintf(url, sizeof(url), "%s%s", fx.url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
		         token);
		h = curl_slist_append(h, auth);
	}
	h = curl_slist_append(h, "Expect:");
	if (req_header[0] != '\0')
		h = curl_slist_append(h, req_header);
	if (chunked)
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
	if (data != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
		if (!chunked)
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE,
			                 len < 0 ? (long) strlen(data) : len);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	CURLcode rc = curl_easy_perform(c);
	cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path,
	             curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (body != NULL)
		js = json_loadb(body, body_len, 0, NULL);
	return code;
}

/* Asserts an error answer: status and code. */
static void
expect_error(long got, long status, const char *code, const char *what)
{
	cr_expect_eq(got, status, "%s: status %ld, want %ld: %s", what, got,
	             status, body ? body : "");
	cr_expect_not_null(js, "%s: body is not JSON: %s", what,
	                   body ? body : "");
	const char *e = json_string_value(json_object_get(js, "error"));
	cr_expect_str_eq(e ? e : "", code, "%s: %s", what, body ? body : "");
	cr_expect(json_is_string(json_object_get(js, "detail")), "%s", what);
}

static const char *chain =
    "kind: DAG\n"
    "name: demo.chain\n"
    "schedule: {cron: \"0 0 * * * ?\"}\n"
    "params: {day: d0}\n"
    "tasks:\n"
    "  - {name: a, type: bash, command: \"echo a\"}\n"
    "  - {name: b, type: bash, command: \"echo b\", depends_on: [a]}\n"
    "  - {name: c, type: bash, command: \"echo c\", depends_on: [b]}\n"
    "  - {name: d, type: bash, command: \"echo d\"}\n";

static void
submit_chain(void)
{
	json_t *n;

	cr_assert_eq(req("POST", "/api/v1/dags", fx.admin, chain, -1, 0), 201,
	             "%s", body);
	/* the notification is delivered asynchronously: wait for it, so a
	 * late arrival is not mistaken for the next request's */
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n, "no submit notification after a submit");
	cr_assert_str_eq(json_string_value(json_object_get(n, "op")),
	                 "submit");
	cr_assert_gt(json_integer_value(json_object_get(n, "command_id")), 0);
	json_decref(n);
	ax_api_fixture_drain(&fx);
}

Test(api, roles_and_tokens)
{
	cr_expect_eq(req("GET", "/healthz", NULL, NULL, 0, 0), 200);
	cr_expect_str_eq(json_string_value(json_object_get(js, "status")),
	                 "ok");
	cr_expect_eq(req("GET", "/api/v1/healthz", NULL, NULL, 0, 0), 200);
	expect_error(req("GET", "/api/v1/dags", NULL, NULL, 0, 0), 401,
	             "unauthorized", "no token");
	cr_expect(strcasestr(hdrs, "WWW-Authenticate: Bearer") != NULL);
	expect_error(req("GET", "/api/v1/dags", "axt_nope", NULL, 0, 0), 401,
	             "unauthorized", "malformed token");
	char forged[AX_API_TOKEN_LEN];
	memcpy(forged, fx.viewer, sizeof(forged));
	forged[10] = forged[10] == 'a' ? 'b' : 'a';
	expect_error(req("GET", "/api/v1/dags", forged, NULL, 0, 0), 401,
	             "unauthorized", "unknown token");
	cr_expect_eq(req("GET", "/api/v1/dags", fx.viewer, NULL, 0, 0), 200);
	cr_expect_eq(req("GET", "/metrics", fx.viewer, NULL, 0, 0), 200);
	expect_error(req("GET", "/metrics", NULL, NULL, 0, 0), 401,
	             "unauthorized", "metrics without token");
	/* viewer < operator < admin */
	expect_error(req("POST", "/api/v1/dags", fx.viewer, chain, -1, 0), 403,
	             "forbidden", "viewer submits");
	expect_error(req("POST", "/api/v1/dags", fx.oper, chain, -1, 0), 403,
	             "forbidden", "operator submits");
	cr_expect_eq(req("POST", "/api/v1/dags", fx.admin, chain, -1, 0), 201,
	             "%s", body);
	expect_error(req("POST", "/api/v1/dags/demo.chain/pause", fx.viewer,
	                 NULL, 0, 0),
	             403, "forbidden", "viewer pauses");
	cr_expect_eq(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.oper, NULL, 0, 0),
	    200, "%s", body);
	cr_expect_eq(req("POST", "/api/v1/dags/demo.chain/unpause", fx.admin,
	                 NULL, 0, 0),
	             200);
	ax_api_fixture_sql(
	    &fx, "UPDATE api_tokens SET revoked_at = now() WHERE name = 'v'");
	expect_error(req("GET", "/api/v1/dags", fx.viewer, NULL, 0, 0), 401,
	             "unauthorized", "revoked token");
}

Test(api, bad_input_is_a_4xx_json_error)
{
	char *big = malloc(MAX_BODY + 100);
	submit_chain();

	expect_error(req("GET", "/api/v1/nope", fx.viewer, NULL, 0, 0), 404,
	             "not_found", "unknown route");
	/* GET / is the web UI's page (test_api_ui.c); other methods are
	 * no route */
	expect_error(req("POST", "/", NULL, NULL, 0, 0), 404, "not_found",
	             "root");
	expect_error(req("GET", "/api/v1", NULL, NULL, 0, 0), 404, "not_found",
	             "the API's root");
	expect_error(req("DELETE", "/api/v1/dags", fx.viewer, NULL, 0, 0), 405,
	             "method_not_allowed", "wrong method");
	cr_expect(strstr(hdrs, "Allow: ") != NULL, "%s", hdrs);
	expect_error(
	    req("GET", "/api/v1/dags/demo.chain/pause", fx.oper, NULL, 0, 0),
	    405, "method_not_allowed", "GET on a POST route");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"params\": ", -1, 0),
	             400, "bad_json", "truncated JSON");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "[1,2]", -1, 0),
	             400, "invalid", "JSON not an object");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"params\": 5}", -1, 0),
	             400, "invalid", "params not an object");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": true}", -1, 0),
	             400, "invalid", "logical_date a boolean");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": \"yesterday\"}", -1, 0),
	             400, "invalid", "logical_date not a date");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logcal_date\": 1}", -1, 0),
	             400, "invalid", "unknown field");
	expect_error(req("POST", "/api/v1/instances/1/clear", fx.oper,
	                 "{\"downstream\": \"yes\"}", -1, 0),
	             400, "invalid", "downstream a string");
	expect_error(req("POST", "/api/v1/instances/1/mark", fx.oper,
	                 "{\"state\": 7}", -1, 0),
	             400, "invalid", "mark state a number");
	expect_error(req("POST", "/api/v1/dags/demo.chain/backfill", fx.oper,
	                 "{\"start\": \"2024-01-01\", \"end\": "
	                 "\"2024-01-02\", \"mode\": \"fast\"}",
	                 -1, 0),
	             400, "invalid", "bad backfill mode");
	expect_error(
	    req("GET", "/api/v1/runs?limit=abc", fx.viewer, NULL, 0, 0), 400,
	    "invalid", "limit not a number");
	expect_error(
	    req("GET", "/api/v1/runs?limit=100000", fx.viewer, NULL, 0, 0),
	    400, "invalid", "limit too big");
	expect_error(
	    req("GET", "/api/v1/runs?state=DONE", fx.viewer, NULL, 0, 0), 400,
	    "invalid", "unknown run state");
	expect_error(
	    req("GET", "/api/v1/instances/abc", fx.viewer, NULL, 0, 0), 400,
	    "invalid", "id not a number");
	expect_error(req("GET", "/api/v1/instances/-3", fx.viewer, NULL, 0, 0),
	             400, "invalid", "negative id");
	/* huge bodies: announced, and chunked without a length */
	memset(big, 'x', MAX_BODY + 99);
	big[MAX_BODY + 99] = '\0';
	expect_error(req("POST", "/api/v1/dags", fx.admin, big, -1, 0), 413,
	             "payload_too_large", "huge body");
	expect_error(req("POST", "/api/v1/dags", fx.admin, big, -1, 1), 413,
	             "payload_too_large", "huge chunked body");
	free(big);
	/* bad UTF-8 in body, path and query */
	expect_error(req("POST", "/api/v1/dags", fx.admin,
	                 "kind: DAG\nname: \xff\xfe\n", -1, 0),
	             400, "bad_utf8", "bad UTF-8 body");
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"params\": {\"a\": \"\xc3\x28\"}}", -1, 0),
	             400, "bad_utf8", "bad UTF-8 in JSON");
	expect_error(req("GET", "/api/v1/dags/%C3%28", fx.viewer, NULL, 0, 0),
	             400, "bad_utf8", "bad UTF-8 path");
	expect_error(
	    req("GET", "/api/v1/runs?dag=%ED%A0%80", fx.viewer, NULL, 0, 0),
	    400, "bad_utf8", "surrogate in query");
	expect_error(req("POST", "/api/v1/dags", fx.admin, "a\0b", 3, 0), 400,
	             "bad_utf8", "NUL in body");
	/* the server is still fine */
	cr_expect_eq(req("GET", "/healthz", NULL, NULL, 0, 0), 200);
}

/* The checks of api_body.c on the real routes: instants a handler could
 * not format or store, JSON on routes that take none, and a detail that
 * echoes a partial character. */
Test(api, body_checks_on_every_route)
{
	submit_chain();
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": 9223372036854775807}", -1, 0),
	             400, "invalid", "logical_date past year 9999");
	cr_expect(strstr(body, "logical_date") != NULL, "%s", body);
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": -9223372036854775807}", -1, 0),
	             400, "invalid", "logical_date before year 1");
	expect_error(req("POST", "/api/v1/dags/demo.chain/backfill", fx.oper,
	                 "{\"start\": 0, \"end\": 9223372036854775807}", -1,
	                 0),
	             400, "invalid", "backfill end past year 9999");
	cr_expect(strstr(body, "'end'") != NULL, "%s", body);
	const char *none[] = { "/api/v1/dags/demo.chain/pause",
		               "/api/v1/dags/demo.chain/unpause",
		               "/api/v1/instances/1/kill" };
	for (size_t i = 0; i < 3; i++) {
		expect_error(req("POST", none[i], fx.oper, "{\"a\":", -1, 0),
		             400, "bad_json", none[i]);
		expect_error(
		    req("POST", none[i], fx.oper, "{\"force\": true}", -1, 0),
		    400, "invalid", none[i]);
	}
	cr_expect_eq(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.oper, "{}", -1, 0),
	    200, "%s", body);
	cr_expect_eq(req("POST", "/api/v1/dags/demo.chain/unpause", fx.oper,
	                 " ", -1, 0),
	             200, "%s", body);
	/* jansson's excerpt of the bad token is the first byte of "é" */
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "\xc3\xa9", -1, 0),
	             400, "bad_json", "a token that is not JSON");
	cr_expect(strstr(body, "not valid JSON") != NULL, "%s", body);
}

Test(api, dag_submit_list_show_versions)
{
	const char *bad = "kind: DAG\nname: demo.bad\ntasks:\n"
	                  "  - {name: a, type: bash, comand: \"echo\"}\n"
	                  "  - {name: b, type: bash, command: x, "
	                  "depends_on: [zz]}\n";
	json_t     *n;

	expect_error(
	    req("POST", "/api/v1/dags?file=bad.yaml", fx.admin, bad, -1, 0),
	    422, "invalid_dag", "invalid DAG");
	json_t *errs = json_object_get(js, "errors");
	cr_assert(json_array_size(errs) >= 2, "%s", body);
	json_t *e0 = json_array_get(errs, 0);
	cr_expect_str_eq(json_string_value(json_object_get(e0, "file")),
	                 "bad.yaml");
	cr_expect_eq(json_integer_value(json_object_get(e0, "line")), 4);
	cr_expect_gt(json_integer_value(json_object_get(e0, "column")), 0);
	cr_expect(strstr(body, "comand") != NULL, "%s", body);
	cr_expect(strstr(body, "zz") != NULL, "%s", body);
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT count(*) FROM dags"), 0);
	expect_error(req("POST", "/api/v1/dags", fx.admin, "", 0, 0), 400,
	             "invalid", "empty body");

	cr_assert_eq(req("POST", "/api/v1/dags", fx.admin, chain, -1, 0), 201);
	json_t *d0 = json_array_get(json_object_get(js, "dags"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(d0, "outcome")),
	                 "created");
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n, "no submit notification");
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "submit");
	cr_expect_str_eq(
	    json_string_value(json_array_get(json_object_get(n, "dags"), 0)),
	    "demo.chain");
	json_decref(n);
	cr_expect_eq(req("POST", "/api/v1/dags", fx.admin, chain, -1, 0), 200);
	d0 = json_array_get(json_object_get(js, "dags"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(d0, "outcome")),
	                 "unchanged");
	cr_expect_null(ax_api_fixture_notify(&fx),
	               "unchanged must not notify");

	char *v2 = malloc(strlen(chain) + 64);
	sprintf(v2, "%s  - {name: e, type: bash, command: \"echo e\"}\n",
	        chain);
	cr_expect_eq(req("POST", "/api/v1/dags", fx.admin, v2, -1, 0), 200);
	free(v2);
	json_decref(ax_api_fixture_notify(&fx)); /* the change's submit */
	ax_api_fixture_drain(&fx);

	cr_expect_eq(req("GET", "/api/v1/dags", fx.viewer, NULL, 0, 0), 200);
	json_t *l = json_object_get(js, "dags");
	cr_assert_eq(json_array_size(l), 1, "%s", body);
	cr_expect_eq(json_integer_value(
	                 json_object_get(json_array_get(l, 0), "version")),
	             2);
	cr_expect_eq(
	    req("GET", "/api/v1/dags/demo.chain", fx.viewer, NULL, 0, 0), 200);
	cr_expect_eq(json_array_size(json_object_get(
	                 json_object_get(js, "definition"), "tasks")),
	             5, "%s", body);
	cr_expect(json_is_string(json_object_get(js, "yaml")));
	cr_expect_eq(req("GET", "/api/v1/dags/demo.chain/versions", fx.viewer,
	                 NULL, 0, 0),
	             200);
	json_t *vs = json_object_get(js, "versions");
	cr_assert_eq(json_array_size(vs), 2);
	cr_expect(
	    json_is_true(json_object_get(json_array_get(vs, 0), "active")));
	cr_expect(
	    json_is_false(json_object_get(json_array_get(vs, 1), "active")));
	expect_error(req("GET", "/api/v1/dags/nope", fx.viewer, NULL, 0, 0),
	             404, "not_found", "unknown DAG");
	expect_error(
	    req("GET", "/api/v1/dags/nope/versions", fx.viewer, NULL, 0, 0),
	    404, "not_found", "versions of unknown DAG");
	expect_error(
	    req("POST", "/api/v1/dags/nope/pause", fx.oper, NULL, 0, 0), 404,
	    "not_found", "pause unknown DAG");
}

Test(api, pause_trigger_backfill_notify)
{
	json_t *n;
	submit_chain();

	cr_assert_eq(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.oper, NULL, 0, 0),
	    200);
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT paused::int FROM dags"),
	             1);
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "paused");
	cr_expect_str_eq(json_string_value(json_object_get(n, "dag")),
	                 "demo.chain");
	json_decref(n);
	cr_assert_eq(req("POST", "/api/v1/dags/demo.chain/unpause", fx.oper,
	                 NULL, 0, 0),
	             200);
	n = ax_api_fixture_notify(&fx);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "unpaused");
	json_decref(n);

	cr_assert_eq(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": \"2024-03-01T12:00:00Z\", "
	                 "\"params\": {\"day\": \"x\"}}",
	                 -1, 0),
	             202, "%s", body);
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "trigger");
	cr_expect_eq(json_integer_value(json_object_get(n, "logical_date_us")),
	             1709294400000000LL);
	cr_expect_str_eq(json_string_value(json_object_get(
	                     json_object_get(n, "params"), "day")),
	                 "x");
	json_decref(n);
	/* without a body: now, empty params */
	cr_assert_eq(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 NULL, 0, 0),
	             202);
	n = ax_api_fixture_notify(&fx);
	cr_expect(json_is_object(json_object_get(n, "params")));
	cr_expect_gt(json_integer_value(json_object_get(n, "logical_date_us")),
	             1709294400000000LL);
	json_decref(n);

	/* hourly schedule: [00:00, 03:00] holds 4 periods */
	cr_assert_eq(req("POST", "/api/v1/dags/demo.chain/backfill", fx.oper,
	                 "{\"start\": \"2024-01-01T00:00:00Z\", \"end\": "
	                 "\"2024-01-01T03:00:00Z\", \"mode\": \"parallel\"}",
	                 -1, 0),
	             201, "%s", body);
	cr_expect_eq(json_integer_value(json_object_get(js, "created")), 4);
	cr_expect_eq(ax_api_fixture_int(
	                 &fx,
	                 "SELECT count(*) FROM dag_runs WHERE run_type = "
	                 "'backfill' AND interval_end - interval_start = "
	                 "interval '1 hour'"),
	             4);
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")),
	                 "backfill");
	cr_expect_str_eq(json_string_value(json_object_get(n, "mode")),
	                 "parallel");
	cr_expect_eq(json_array_size(json_object_get(n, "run_ids")), 4);
	json_decref(n);
	/* again: nothing new, existing runs are skipped */
	cr_assert_eq(req("POST", "/api/v1/dags/demo.chain/backfill", fx.oper,
	                 "{\"start\": \"2024-01-01T00:00:00Z\", \"end\": "
	                 "\"2024-01-01T03:00:00Z\"}",
	                 -1, 0),
	             201);
	cr_expect_eq(json_integer_value(json_object_get(js, "skipped")), 4);
	cr_expect_null(ax_api_fixture_notify(&fx));
	/* a trigger at a date that has a run is a conflict */
	expect_error(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": \"2024-01-01T01:00:00Z\"}", -1,
	                 0),
	             409, "conflict", "trigger on an existing run");
	/* too many periods (seconds cron would be 86400) */
	expect_error(
	    req("POST", "/api/v1/dags/demo.chain/backfill", fx.oper,
	        "{\"start\": \"2020-01-01\", \"end\": \"2024-01-01\"}", -1, 0),
	    400, "invalid", "unbounded backfill");
	expect_error(
	    req("POST", "/api/v1/dags/demo.chain/backfill", fx.oper,
	        "{\"start\": \"2024-01-02\", \"end\": \"2024-01-01\"}", -1, 0),
	    400, "invalid", "end before start");

	cr_expect_eq(req("GET", "/api/v1/runs?dag=demo.chain&limit=3",
	                 fx.viewer, NULL, 0, 0),
	             200);
	cr_expect_eq(json_array_size(json_object_get(js, "runs")), 3);
	json_int_t cur =
	    json_integer_value(json_object_get(js, "next_cursor"));
	char path[128];
	snprintf(path, sizeof(path), "/api/v1/runs?limit=3&cursor=%lld",
	         (long long) cur);
	cr_expect_eq(req("GET", path, fx.viewer, NULL, 0, 0), 200);
	cr_expect_eq(json_array_size(json_object_get(js, "runs")), 1, "%s",
	             body);
	cr_expect_eq(
	    req("GET", "/api/v1/runs?state=QUEUED", fx.viewer, NULL, 0, 0),
	    200);
	cr_expect_eq(json_array_size(json_object_get(js, "runs")), 4);
}

/* One run of demo.chain: a SUCCESS, b RUNNING (attempt 1, log at
 * logpath), c PENDING, d SUCCESS; returns b's id. */
static int64_t
make_run(void)
{
	submit_chain();
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end) SELECT id, "
	    "active_version_id, 'manual', ax_ts(0), ax_ts(0), ax_ts(0) "
	    "FROM dags");
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO task_instances (dag_run_id, dag_id, task, "
	    "logical_time, state, reason) SELECT r.id, r.dag_id, t.task, "
	    "r.logical_date, t.state, t.reason FROM dag_runs r, (VALUES "
	    "('a', 'SUCCESS', NULL), ('b', 'RUNNING', NULL), "
	    "('c', 'PENDING', 'WAIT_DEPENDENCY'), ('d', 'SUCCESS', NULL)) "
	    "AS t(task, state, reason)");
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO attempts (run_id, instance_id, number, state, "
	    "due_at, log_path) SELECT gen_random_uuid(), id, 1, 'RUNNING', "
	    "now(), '%s' FROM task_instances WHERE task = 'b'",
	    logpath);
	return ax_api_fixture_int(
	    &fx, "SELECT id FROM task_instances WHERE task = 'b'");
}

Test(api, instances_kill_clear_mark_lineage_events)
{
	int64_t b = make_run();
	int64_t a = ax_api_fixture_int(
	    &fx, "SELECT id FROM task_instances WHERE task = 'a'");
	int64_t c = ax_api_fixture_int(
	    &fx, "SELECT id FROM task_instances WHERE task = 'c'");
	char    p[128];
	json_t *n;

	cr_expect_eq(req("GET", "/api/v1/instances?dag=demo.chain", fx.viewer,
	                 NULL, 0, 0),
	             200);
	cr_expect_eq(json_array_size(json_object_get(js, "instances")), 4);
	cr_expect_eq(req("GET", "/api/v1/instances?state=PENDING", fx.viewer,
	                 NULL, 0, 0),
	             200);
	json_t *i0 = json_array_get(json_object_get(js, "instances"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(i0, "reason")),
	                 "WAIT_DEPENDENCY");
	expect_error(
	    req("GET", "/api/v1/instances?state=DONE", fx.viewer, NULL, 0, 0),
	    400, "invalid", "unknown instance state");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld", (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_str_eq(json_string_value(json_object_get(js, "state")),
	                 "RUNNING");
	json_t *att = json_object_get(js, "attempts");
	cr_assert_eq(json_array_size(att), 1, "%s", body);
	cr_expect_eq(json_integer_value(
	                 json_object_get(json_array_get(att, 0), "number")),
	             1);
	expect_error(
	    req("GET", "/api/v1/instances/999999", fx.viewer, NULL, 0, 0), 404,
	    "not_found", "unknown instance");
	long run = (long) ax_api_fixture_int(&fx, "SELECT id FROM dag_runs");
	snprintf(p, sizeof(p), "/api/v1/runs/%ld", run);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_eq(
	    json_integer_value(json_object_get(
	        json_object_get(js, "instances_by_state"), "SUCCESS")),
	    2, "%s", body);
	expect_error(req("GET", "/api/v1/runs/999999", fx.viewer, NULL, 0, 0),
	             404, "not_found", "unknown run");

	/* lineage of b: a upstream, c downstream, d unrelated */
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/lineage",
	         (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200, "%s", body);
	json_t *up = json_object_get(js, "upstream"),
	       *dn = json_object_get(js, "downstream");
	cr_assert_eq(json_array_size(up), 1, "%s", body);
	cr_assert_eq(json_array_size(dn), 1, "%s", body);
	cr_expect_str_eq(
	    json_string_value(json_object_get(json_array_get(up, 0), "task")),
	    "a");
	json_t *ui = json_object_get(json_array_get(up, 0), "instances");
	cr_expect_eq(
	    json_integer_value(json_object_get(json_array_get(ui, 0), "id")),
	    a);
	cr_expect_str_eq(
	    json_string_value(json_object_get(json_array_get(dn, 0), "task")),
	    "c");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/lineage",
	         (long long) a);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_eq(json_array_size(json_object_get(js, "downstream")), 2,
	             "a -> b -> c: %s", body);

	/* kill: RUNNING b yes, finished a no */
	ax_api_fixture_drain(&fx);
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/kill", (long long) b);
	expect_error(req("POST", p, fx.viewer, NULL, 0, 0), 403, "forbidden",
	             "viewer kills");
	cr_expect_eq(req("POST", p, fx.oper, NULL, 0, 0), 202, "%s", body);
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")), "kill");
	cr_expect_eq(json_integer_value(json_object_get(n, "instance_id")), b);
	json_decref(n);
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/kill", (long long) a);
	expect_error(req("POST", p, fx.oper, NULL, 0, 0), 409, "illegal_state",
	             "kill a finished instance");
	cr_expect_null(ax_api_fixture_notify(&fx));

	/* clear: finished a with downstream, running b refused */
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/clear", (long long) a);
	cr_expect_eq(req("POST", p, fx.oper, "{\"downstream\": true}", -1, 0),
	             202, "%s", body);
	n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_str_eq(json_string_value(json_object_get(n, "op")), "clear");
	cr_expect_eq(json_integer_value(json_object_get(n, "instance_id")), a);
	cr_expect(json_is_true(json_object_get(n, "downstream")));
	json_decref(n);
	cr_expect_eq(req("POST", p, fx.oper, NULL, 0, 0), 202);
	n = ax_api_fixture_notify(&fx);
	cr_expect(json_is_false(json_object_get(n, "downstream")));
	json_decref(n);
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/clear", (long long) b);
	expect_error(req("POST", p, fx.oper, NULL, 0, 0), 409, "illegal_state",
	             "clear a running instance");

	/* mark: RUNNING -> SUCCESS ok; PENDING -> FAILED is not a move */
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/mark", (long long) b);
	cr_expect_eq(
	    req("POST", p, fx.oper, "{\"state\": \"success\"}", -1, 0), 200,
	    "%s", body);
	cr_expect_eq(
	    ax_api_fixture_int(&fx,
	                       "SELECT count(*) FROM task_instances WHERE "
	                       "task = 'b' AND state = 'SUCCESS' AND reason = "
	                       "'MANUAL_MARK'"),
	    1);
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/mark", (long long) c);
	expect_error(req("POST", p, fx.oper, "{\"state\": \"failed\"}", -1, 0),
	             409, "illegal_state", "PENDING -> FAILED");
	cr_expect(strstr(body, "PENDING -> FAILED") != NULL, "%s", body);

	/* the mark is in the event log */
	snprintf(p, sizeof(p),
	         "/api/v1/events?instance=%lld&type=instance."
	         "marked",
	         (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	json_t *ev = json_object_get(js, "events");
	cr_assert_eq(json_array_size(ev), 1, "%s", body);
	cr_expect_str_eq(json_string_value(
	                     json_object_get(json_array_get(ev, 0), "reason")),
	                 "MANUAL_MARK");
	cr_expect_str_eq(
	    json_string_value(json_object_get(json_array_get(ev, 0), "dag")),
	    "demo.chain");
	cr_expect_eq(req("GET", "/api/v1/events?since=2999-01-01", fx.viewer,
	                 NULL, 0, 0),
	             200);
	cr_expect_eq(json_array_size(json_object_get(js, "events")), 0);
	expect_error(
	    req("GET", "/api/v1/events?since=soon", fx.viewer, NULL, 0, 0),
	    400, "invalid", "bad since");

	/* workers */
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO workers (id, worker_group, slots, used_slots, "
	    "lease_expires_at) VALUES ('w1', 'default', 4, 1, now())");
	cr_expect_eq(req("GET", "/api/v1/workers", fx.viewer, NULL, 0, 0),
	             200);
	json_t *w = json_array_get(json_object_get(js, "workers"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(w, "id")), "w1");
	cr_expect_eq(json_integer_value(json_object_get(w, "slots")), 4);
}

static void
write_log(const char *text, const char *mode)
{
	FILE *f = fopen(logpath, mode);
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void *
append_then_end(void *arg)
{
	ax_store *s2;
	usleep(400000);
	write_log("later\n", "a");
	usleep(400000);
	if (ax_store_open(ax_test_pg_dsn(fx.pg), &s2) == AX_OK) {
		ax_store_exec(
		    s2,
		    "UPDATE attempts SET state = 'SUCCESS', ended_at "
		    "= now()",
		    0, NULL);
		ax_store_close(s2);
	}
	return NULL;
}

Test(api, logs_tail_offset_follow)
{
	int64_t   b = make_run();
	char      p[160];
	pthread_t th;

	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs", (long long) b);
	expect_error(req("GET", p, fx.viewer, NULL, 0, 0), 404, "not_found",
	             "log file missing");
	write_log("one\ntwo\nthree\n", "w");
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_str_eq(body, "one\ntwo\nthree\n");
	cr_expect(strstr(hdrs, "X-AX-Log-Size: 14") != NULL, "%s", hdrs);
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?tail=2",
	         (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_str_eq(body, "two\nthree\n");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?tail=10",
	         (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_str_eq(body, "one\ntwo\nthree\n");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?offset=4",
	         (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_str_eq(body, "two\nthree\n");
	cr_expect(strstr(hdrs, "X-AX-Next-Offset: 14") != NULL, "%s", hdrs);
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?offset=4&limit=3",
	         (long long) b);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	cr_expect_str_eq(body, "two");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?attempt=2",
	         (long long) b);
	expect_error(req("GET", p, fx.viewer, NULL, 0, 0), 404, "not_found",
	             "no such attempt");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?tail=1&offset=1",
	         (long long) b);
	expect_error(req("GET", p, fx.viewer, NULL, 0, 0), 400, "invalid",
	             "tail and offset");
	int64_t a = ax_api_fixture_int(
	    &fx, "SELECT id FROM task_instances WHERE task = 'a'");
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs", (long long) a);
	expect_error(req("GET", p, fx.viewer, NULL, 0, 0), 404, "not_found",
	             "no attempt yet");

	/* follow: streams what is appended and ends with the attempt */
	snprintf(p, sizeof(p), "/api/v1/instances/%lld/logs?follow=1&tail=1",
	         (long long) b);
	pthread_create(&th, NULL, append_then_end, NULL);
	int64_t t0 = (int64_t) time(NULL);
	cr_expect_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200);
	pthread_join(th, NULL);
	cr_expect_str_eq(body, "three\nlater\n");
	cr_expect_lt((int64_t) time(NULL) - t0, 10, "follow did not end");
	cr_expect(strcasestr(hdrs, "Transfer-Encoding: chunked") != NULL, "%s",
	          hdrs);
}

typedef struct scrape_arg {
	ax_api_fixture_ans a;
	long               status;
	int                done;
} scrape_arg;

static void *
scrape(void *p)
{
	scrape_arg *s = p;
	s->status =
	    ax_api_fixture_req(&fx, "GET", "/metrics", fx.viewer, NULL, &s->a);
	__atomic_store_n(&s->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * A scrape reads no history table: while another session holds ACCESS
 * EXCLUSIVE locks on task_instances, dag_runs, attempts and event_log (so
 * any statement touching one of them would wait), GET /metrics still
 * answers at once. Whatever the size of the history, a scrape costs the
 * same few queries of component_stats and workers. (Part of
 * metrics_format: one cluster for both.)
 */
static void
scrape_reads_no_history_table(void)
{
	PGconn    *c = PQconnectdb(ax_test_pg_dsn(fx.pg));
	PGresult  *res;
	pthread_t  th;
	scrape_arg s = { 0 };

	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	res = PQexec(c,
	             "BEGIN; LOCK TABLE task_instances, dag_runs, "
	             "attempts, event_log IN ACCESS EXCLUSIVE MODE");
	cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s",
	             PQerrorMessage(c));
	PQclear(res);
	cr_assert_eq(pthread_create(&th, NULL, scrape, &s), 0);
	for (int i = 0; i < 500 && !__atomic_load_n(&s.done, __ATOMIC_SEQ_CST);
	     i++)
		usleep(10000);
	int done = __atomic_load_n(&s.done, __ATOMIC_SEQ_CST);
	PQclear(PQexec(c, "ROLLBACK")); /* lets a blocked scrape finish */
	pthread_join(th, NULL);
	PQfinish(c);
	cr_expect(done, "GET /metrics waited for a lock on a history table");
	cr_expect_eq(s.status, 200, "%s", s.a.raw ? s.a.raw : "");
	cr_expect(s.a.raw != NULL &&
	              strstr(s.a.raw,
	                     "# TYPE ax_instances_finished_total "
	                     "counter\n") != NULL,
	          "%s", s.a.raw ? s.a.raw : "");
	ax_api_fixture_ans_fini(&s.a);
}

Test(api, metrics_format)
{
	char  path[300], cmd[700];
	FILE *f;

	make_run();
	/* rows as axd's queue and result handler publish them */
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO component_stats (component, key, value) VALUES "
	    "('result_handler', 'finished.SUCCESS', 7), "
	    "('result_handler', 'retries', 3), "
	    "('queue', 'lease_losses', 1), "
	    "('queue', 'depth.Px.etl.eu', 5), "
	    "('queue', 'depth.P0.we\"ird\\', 1), "
	    "('queue', 'depth.zz.nope', 9), "
	    "('queue', 'slots_used.etl.eu', 6), "
	    "('queue', 'slots_free.etl.eu', 2), "
	    "('queue', 'lat.decision.Px.b0', 1), "
	    "('queue', 'lat.decision.Px.b9', 2), "
	    "('queue', 'lat.decision.Px.count', 3), "
	    "('queue', 'lat.decision.Px.sum_us', 1500000)");
	req("GET", "/api/v1/nope", fx.viewer, NULL, 0, 0);
	cr_assert_eq(req("GET", "/api/v1/metrics", fx.viewer, NULL, 0, 0),
	             200);
	cr_expect(strstr(hdrs, "text/plain; version=0.0.4") != NULL, "%s",
	          hdrs);
	cr_expect(strstr(body,
	                 "ax_api_requests_total{method=\"POST\","
	                 "route=\"/api/v1/dags\",code=\"201\"} 1\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_api_requests_total{method=\"any\","
	                 "route=\"unmatched\",code=\"404\"} 1\n") != NULL,
	          "%s", body);
	/* what axd's actors published (component_stats), not a count of
	 * task_instances: make_run's two SUCCESS rows are not counted */
	cr_expect(strstr(body,
	                 "ax_instances_finished_total{state=\"SUCCESS\"} "
	                 "7\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_instances_finished_total{state=\"TIMEOUT\"} "
	                 "0\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body, "ax_instance_retries_total 3\n") != NULL, "%s",
	          body);
	cr_expect(strstr(body, "ax_worker_heartbeat_losses_total 1\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_queue_depth{channel=\"Px\",group=\"etl.eu\"} "
	                 "5\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_queue_depth{channel=\"P0\",group=\"we\\\"ird"
	                 "\\\\\"} 1\n") != NULL,
	          "a group name is escaped as a label value: %s", body);
	cr_expect(strstr(body, "depth.zz") == NULL &&
	              strstr(body, "nope") == NULL,
	          "a row of an unknown channel is left out: %s", body);
	cr_expect(strstr(body,
	                 "ax_worker_slots{group=\"etl.eu\",kind=\"used\"} "
	                 "6\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_worker_slots{group=\"etl.eu\",kind=\"free\"} "
	                 "2\n") != NULL,
	          "%s", body);
	/* b0 (<= 1 ms) 1, b9 (<= 1 s) 2: cumulative from 1 s on */
	cr_expect(strstr(body,
	                 "ax_scheduling_decision_seconds_bucket{channel="
	                 "\"Px\",le=\"0.001\"} 1\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_scheduling_decision_seconds_bucket{channel="
	                 "\"Px\",le=\"1\"} 3\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_scheduling_decision_seconds_bucket{channel="
	                 "\"Px\",le=\"+Inf\"} 3\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_scheduling_decision_seconds_sum{channel=\"Px\"}"
	                 " 1.500000\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_scheduling_end_to_end_seconds_count{channel="
	                 "\"k8s\"} 0\n") != NULL,
	          "every channel is present: %s", body);
	cr_expect(strstr(body,
	                 "# TYPE ax_scheduling_env_ready_seconds "
	                 "histogram\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body,
	                 "ax_api_request_duration_seconds_bucket{"
	                 "method=\"POST\",route=\"/api/v1/dags\","
	                 "le=\"+Inf\"} 1\n") != NULL,
	          "%s", body);
	cr_expect(strstr(body, "# TYPE ax_queue_depth gauge\n") != NULL);
	scrape_reads_no_history_table();
	if (access("/usr/bin/promtool", X_OK) != 0) {
		cr_log_warn("promtool not installed: format not checked");
		return;
	}
	snprintf(path, sizeof(path), "/tmp/ax-test-metrics-%d.txt",
	         (int) getpid());
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fwrite(body, 1, body_len, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	int rc = system(cmd);
	unlink(path);
	cr_expect_eq(rc, 0, "promtool check metrics failed");
}

/* Every state-changing answer carries the id of its control_command row,
 * recorded with the request in one transaction; Idempotency-Key replays
 * the first answer; GET /api/v1/commands/{id} reads the row. */
Test(api, commands_recorded_idempotent_and_readable)
{
	json_t *first;
	char    p[128];
	int64_t id;

	submit_chain();
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM "
	                                "control_command WHERE kind = "
	                                "'submit' AND status = "
	                                "'pending'"),
	             1, "a submit that stored a DAG waits for axd");

	cr_assert_eq(req("POST", "/api/v1/dags/demo.chain/trigger", fx.oper,
	                 "{\"logical_date\": \"2024-04-01T00:00:00Z\"}", -1,
	                 0),
	             202, "%s", body);
	id = json_integer_value(json_object_get(js, "command_id"));
	cr_assert_gt(id, 0, "%s", body);
	json_t *n = ax_api_fixture_notify(&fx);
	cr_assert_not_null(n);
	cr_expect_eq(json_integer_value(json_object_get(n, "command_id")), id);
	json_decref(n);
	cr_expect_eq(
	    ax_api_fixture_int(&fx,
	                       "SELECT count(*) FROM control_command "
	                       "WHERE id = %lld AND kind = 'trigger' "
	                       "AND status = 'pending' AND "
	                       "(body->>'logical_date_us')::bigint = "
	                       "1711929600000000 AND body->>'dag' = "
	                       "'demo.chain' AND token_id IS NOT NULL",
	                       (long long) id),
	    1, "the row holds the resolved request and the token");

	/* GET: viewer and up; 404 / 400 */
	snprintf(p, sizeof(p), "/api/v1/commands/%lld", (long long) id);
	cr_assert_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200, "%s", body);
	cr_expect_str_eq(json_string_value(json_object_get(js, "status")),
	                 "pending");
	cr_expect_str_eq(json_string_value(json_object_get(js, "kind")),
	                 "trigger");
	cr_expect(json_is_null(json_object_get(js, "applied_at")));
	cr_expect(json_is_string(json_object_get(js, "created_at")));
	expect_error(req("GET", p, NULL, NULL, 0, 0), 401, "unauthorized",
	             "no token");
	expect_error(
	    req("GET", "/api/v1/commands/424242", fx.viewer, NULL, 0, 0), 404,
	    "not_found", "unknown command");
	expect_error(req("GET", "/api/v1/commands/x1", fx.viewer, NULL, 0, 0),
	             400, "invalid", "non-numeric command id");
	ax_api_fixture_sql(&fx,
	                   "UPDATE control_command SET status = 'applied', "
	                   "applied_at = now(), result = '{\"run_id\": 9}' "
	                   "WHERE id = %lld",
	                   (long long) id);
	cr_assert_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200, "%s", body);
	cr_expect_eq(json_integer_value(json_object_get(
	                 json_object_get(js, "result"), "run_id")),
	             9);

	/* Idempotency-Key: the first answer again, no second row or NOTIFY */
	ax_api_fixture_drain(&fx);
	snprintf(req_header, sizeof(req_header), "Idempotency-Key: key-a");
	cr_assert_eq(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.oper, NULL, 0, 0),
	    200, "%s", body);
	first = json_incref(js);
	cr_assert_gt(json_integer_value(json_object_get(first, "command_id")),
	             0);
	json_decref(ax_api_fixture_notify(&fx));
	ax_api_fixture_sql(&fx, "UPDATE dags SET paused = false");
	cr_assert_eq(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.oper, NULL, 0, 0),
	    200, "%s", body);
	cr_expect(json_equal(first, js), "repeat: %s", body);
	cr_expect_null(ax_api_fixture_notify(&fx),
	               "a repeat notifies nothing");
	cr_expect_eq(ax_api_fixture_int(&fx, "SELECT paused::int FROM dags"),
	             0, "a repeat has no second effect");
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM "
	                                "control_command WHERE "
	                                "idempotency_key = 'key-a'"),
	             1);
	/* the same key for another request */
	expect_error(req("POST", "/api/v1/dags/demo.chain/unpause", fx.oper,
	                 NULL, 0, 0),
	             422, "idempotency_key_reused", "key on another path");
	cr_expect_not_null(strstr(body, "Idempotency-Key"), "%s", body);
	/* another token has its own keys */
	cr_assert_eq(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.admin, NULL, 0, 0),
	    200, "%s", body);
	cr_expect_neq(
	    json_integer_value(json_object_get(js, "command_id")),
	    json_integer_value(json_object_get(first, "command_id")));
	/* a bad key */
	snprintf(req_header, sizeof(req_header), "Idempotency-Key: a b");
	expect_error(
	    req("POST", "/api/v1/dags/demo.chain/pause", fx.oper, NULL, 0, 0),
	    400, "invalid", "key with a space");
	req_header[0] = '\0';
	json_decref(first);

	/* a 4xx is not recorded */
	int64_t before =
	    ax_api_fixture_int(&fx, "SELECT count(*) FROM control_command");
	expect_error(
	    req("POST", "/api/v1/dags/nope/trigger", fx.oper, NULL, 0, 0), 404,
	    "not_found", "trigger of an unknown DAG");
	cr_expect_eq(
	    ax_api_fixture_int(&fx, "SELECT count(*) FROM control_command"),
	    before);
}

/* A run's deadline in its JSON, in the runs list, the grid and explain:
 * the instant from the DAG's rule and zone, and the recorded misses. */
Test(api, run_deadline_and_its_miss)
{
	static const char dl[] =
	    "kind: DAG\nname: demo.dl\n"
	    "schedule: {cron: \"0 0 * * *\", timezone: Asia/Shanghai}\n"
	    "deadline: {at: \"08:00\", day: 1}\n"
	    "tasks:\n"
	    "  - {name: a, type: bash, command: \"echo a\", deadline: {after: "
	    "2h}}\n";
	char p[128];

	cr_assert_eq(req("POST", "/api/v1/dags", fx.admin, dl, -1, 0), 201,
	             "%s", body);
	json_decref(ax_api_fixture_notify(&fx));
	/* the period 1 December (Shanghai): due 2 December 08:00 local */
	int64_t run = ax_api_fixture_int(
	    &fx,
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, state) SELECT id, "
	    "active_version_id, 'scheduled', '2026-12-01T00:00+08', "
	    "'2026-12-01T00:00+08', '2026-12-02T00:00+08', 'RUNNING' FROM "
	    "dags WHERE name = 'demo.dl' RETURNING id");
	snprintf(p, sizeof(p), "/api/v1/runs/%lld", (long long) run);
	cr_assert_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200, "%s", body);
	cr_expect_str_eq(json_string_value(json_object_get(js, "deadline")),
	                 "2026-12-02T00:00:00.000000Z", "%s", body);
	cr_expect_str_eq(
	    json_string_value(json_object_get(js, "deadline_rule")),
	    "08:00 day +1 Asia/Shanghai");
	cr_expect(json_is_false(json_object_get(js, "deadline_missed")), "%s",
	          body);
	cr_expect_null(json_object_get(js, "deadline_def"), "%s", body);

	/* the detector recorded the run's miss and task a's */
	ax_api_fixture_sql(
	    &fx,
	    "INSERT INTO event_log (event_id, type, time, dag_id, dag_run_id, "
	    "reason, payload) SELECT gen_random_uuid(), t, now(), dag_id, id, "
	    "'DEADLINE_MISSED', p::jsonb FROM dag_runs, (VALUES "
	    "('run.deadline_missed', '{}'), ('instance.deadline_missed', "
	    "'{\"task\": \"a\"}')) AS x(t, p) WHERE id = %lld",
	    (long long) run);
	cr_assert_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200, "%s", body);
	cr_expect(json_is_true(json_object_get(js, "deadline_missed")), "%s",
	          body);
	json_t *tasks = json_object_get(js, "task_deadlines_missed");
	cr_expect_eq(json_array_size(tasks), 1, "%s", body);
	cr_expect_str_eq(json_string_value(json_array_get(tasks, 0)), "a");

	cr_assert_eq(
	    req("GET", "/api/v1/runs?dag=demo.dl", fx.viewer, NULL, 0, 0),
	    200);
	json_t *r0 = json_array_get(json_object_get(js, "runs"), 0);
	cr_expect(json_is_true(json_object_get(r0, "deadline_missed")), "%s",
	          body);
	cr_expect_str_eq(json_string_value(json_object_get(r0, "deadline")),
	                 "2026-12-02T00:00:00.000000Z");

	cr_assert_eq(
	    req("GET", "/api/v1/dags/demo.dl/grid", fx.viewer, NULL, 0, 0),
	    200);
	r0 = json_array_get(json_object_get(js, "runs"), 0);
	cr_expect(json_is_true(json_object_get(r0, "deadline_missed")), "%s",
	          body);

	snprintf(p, sizeof(p), "/api/v1/runs/%lld/explain", (long long) run);
	cr_assert_eq(req("GET", p, fx.viewer, NULL, 0, 0), 200, "%s", body);
	json_t *d = json_object_get(js, "deadline");
	cr_expect_str_eq(json_string_value(json_object_get(d, "at")),
	                 "2026-12-02T00:00:00.000000Z", "%s", body);
	cr_expect(json_is_true(json_object_get(d, "missed")), "%s", body);
	cr_expect(strstr(body, "task a missed its deadline") != NULL, "%s",
	          body);
}
