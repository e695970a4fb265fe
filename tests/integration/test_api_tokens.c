/*
 * test_api_tokens.c - the token routes of ax-api over real HTTP against a
 * real PostgreSQL (tests/api_fixture.h): create, list and revoke as
 * admin; a revoked or expired token refused at the next request; viewer
 * and operator refused; the token never shown again; names unique among
 * live tokens; last_used_at written at most once a minute; every bad
 * body a 400 naming the field; token.created / token.revoked events
 * naming who acted; and the caller recorded on every control command.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "log.h"
#include "store.h"
#include "store_commands.h"

static ax_api_fixture     fx;
static ax_api_fixture_ans an;

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	ax_api_fixture_start(&fx, 0);
}

static void
teardown(void)
{
	ax_api_fixture_ans_fini(&an);
	ax_api_fixture_stop(&fx);
}

TestSuite(api_tokens, .init = setup, .fini = teardown, .timeout = 120);

static long
req(const char *method, const char *path, const char *token, const char *body)
{
	return ax_api_fixture_req(&fx, method, path, token, body, &an);
}

static const char *
str(const char *key)
{
	const char *v = json_string_value(json_object_get(an.json, key));
	return v ? v : "";
}

/* The first cell of the query as text into buf ("" for NULL). */
static void
qtext(char *buf, size_t len, const char *fmt, long long id)
{
	char      sql[512];
	PGresult *res = NULL;

	snprintf(sql, sizeof(sql), fmt, id);
	cr_assert_eq(ax_store_query(fx.st, sql, 0, NULL, &res), AX_OK,
	             "%s: %s", sql, ax_err_detail());
	cr_assert_eq(PQntuples(res), 1, "%s", sql);
	snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
}

/* Asserts the last answer: status and error code. */
static void
expect_error(long got, long status, const char *code, const char *what)
{
	cr_expect_eq(got, status, "%s: status %ld, want %ld: %s", what, got,
	             status, an.raw);
	cr_expect_str_eq(str("error"), code, "%s: %s", what, an.raw);
	cr_expect(json_is_string(json_object_get(an.json, "detail")), "%s: %s",
	          what, an.raw);
}

/* Creates a token as admin from body; copies it into tok, returns id. */
static int64_t
create(const char *body, char tok[AX_API_TOKEN_LEN])
{
	cr_assert_eq(req("POST", "/api/v1/tokens", fx.admin, body), 201,
	             "%s: %s", body, an.raw);
	cr_assert_eq(strlen(str("token")), AX_API_TOKEN_LEN - 1, "%s", an.raw);
	snprintf(tok, AX_API_TOKEN_LEN, "%s", str("token"));
	return json_integer_value(json_object_get(an.json, "id"));
}

Test(api_tokens, create_list_revoke_takes_effect_at_once)
{
	char    tok[AX_API_TOKEN_LEN], path[64], hash[80];
	int64_t id =
	    create("{\"name\": \"alice\", \"role\": \"operator\"}", tok);

	cr_expect_str_eq(str("name"), "alice");
	cr_expect_str_eq(str("role"), "operator");
	cr_expect_str_eq(str("state"), "live");
	cr_expect(json_is_null(json_object_get(an.json, "expires_at")));
	cr_expect(json_is_string(json_object_get(an.json, "created_at")));
	cr_expect_eq(req("GET", "/api/v1/dags", tok, NULL), 200, "%s", an.raw);

	/* the list: every token, never the token or its hash */
	cr_assert_eq(req("GET", "/api/v1/tokens", fx.admin, NULL), 200);
	json_t *list = json_object_get(an.json, "tokens");
	cr_assert_eq(json_array_size(list), 4, "%s", an.raw);
	cr_expect_null(strstr(an.raw, tok), "the token is listed: %s", an.raw);
	cr_expect_null(strstr(an.raw, tok + 4), "%s", an.raw);
	qtext(hash, sizeof(hash),
	      "SELECT hash FROM api_tokens WHERE id = %lld", (long long) id);
	cr_expect_null(strstr(an.raw, hash), "the hash is listed: %s", an.raw);
	json_t *alice = json_array_get(list, 3);
	cr_expect_str_eq(json_string_value(json_object_get(alice, "name")),
	                 "alice");
	cr_expect_null(json_object_get(alice, "token"));
	cr_expect_null(json_object_get(alice, "hash"));
	cr_expect(json_is_string(json_object_get(alice, "last_used_at")),
	          "last_used_at not set by the use: %s", an.raw);
	for (const char *const *k =
	         (const char *const[]) { "id", "name", "role", "created_at",
	                                 "last_used_at", "expires_at",
	                                 "revoked_at", "state", NULL };
	     *k; k++)
		cr_expect(json_object_get(alice, *k) != NULL, "no %s: %s", *k,
		          an.raw);

	snprintf(path, sizeof(path), "/api/v1/tokens/%lld", (long long) id);
	cr_assert_eq(req("DELETE", path, fx.admin, NULL), 200, "%s", an.raw);
	cr_expect_str_eq(str("state"), "revoked");
	cr_expect(json_is_string(json_object_get(an.json, "revoked_at")));
	/* the very next request with it is refused */
	expect_error(req("GET", "/api/v1/dags", tok, NULL), 401,
	             "unauthorized", "revoked token");
	expect_error(req("DELETE", path, fx.admin, NULL), 409, "illegal_state",
	             "revoked twice");
	expect_error(req("DELETE", "/api/v1/tokens/999", fx.admin, NULL), 404,
	             "not_found", "no such token");
	/* the name is free again once its token is revoked */
	create("{\"name\": \"alice\", \"role\": \"viewer\"}", tok);
	cr_expect_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
}

Test(api_tokens, names_are_unique_among_live_tokens)
{
	char tok[AX_API_TOKEN_LEN];

	create("{\"name\": \"ci\", \"role\": \"viewer\"}", tok);
	expect_error(req("POST", "/api/v1/tokens", fx.admin,
	                 "{\"name\": \"ci\", \"role\": \"admin\"}"),
	             409, "conflict", "duplicate name");
	cr_expect(strstr(str("detail"), "revoke") != NULL, "%s", an.raw);
	/* the fixture's own tokens hold their names too */
	expect_error(req("POST", "/api/v1/tokens", fx.admin,
	                 "{\"name\": \"a\", \"role\": \"viewer\"}"),
	             409, "conflict", "name of the admin token");
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM api_tokens "
	                                "WHERE name = 'ci'"),
	             1);
}

Test(api_tokens, only_admin_manages_tokens)
{
	const char *body = "{\"name\": \"x\", \"role\": \"admin\"}";

	expect_error(req("POST", "/api/v1/tokens", fx.oper, body), 403,
	             "forbidden", "operator creates");
	expect_error(req("POST", "/api/v1/tokens", fx.viewer, body), 403,
	             "forbidden", "viewer creates");
	expect_error(req("GET", "/api/v1/tokens", fx.oper, NULL), 403,
	             "forbidden", "operator lists");
	expect_error(req("GET", "/api/v1/tokens", fx.viewer, NULL), 403,
	             "forbidden", "viewer lists");
	expect_error(req("DELETE", "/api/v1/tokens/1", fx.oper, NULL), 403,
	             "forbidden", "operator revokes");
	expect_error(req("DELETE", "/api/v1/tokens/1", fx.viewer, NULL), 403,
	             "forbidden", "viewer revokes");
	expect_error(req("GET", "/api/v1/tokens", NULL, NULL), 401,
	             "unauthorized", "no token");
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM api_tokens "
	                                "WHERE revoked_at IS NULL"),
	             3, "a refused request changed tokens");
	/* the admin token still works: nothing was revoked */
	cr_expect_eq(req("GET", "/api/v1/tokens", fx.admin, NULL), 200);
}

Test(api_tokens, expired_token_is_refused_saying_expired)
{
	char    tok[AX_API_TOKEN_LEN];
	int64_t id =
	    create("{\"name\": \"temp\", \"role\": \"operator\", \"ttl\": "
	           "\"1h\"}",
	           tok);

	cr_expect(json_is_string(json_object_get(an.json, "expires_at")), "%s",
	          an.raw);
	cr_expect_eq(ax_api_fixture_int(
	                 &fx,
	                 "SELECT (expires_at - created_at BETWEEN '59 min' "
	                 "AND '61 min')::int FROM api_tokens WHERE id = %lld",
	                 (long long) id),
	             1);
	cr_expect_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
	ax_api_fixture_sql(&fx,
	                   "UPDATE api_tokens SET expires_at = now() - "
	                   "interval '1 s' WHERE id = %lld",
	                   (long long) id);
	expect_error(req("GET", "/api/v1/dags", tok, NULL), 401,
	             "token_expired", "expired token");
	cr_expect(strstr(str("detail"), "expired") != NULL, "%s", an.raw);
	cr_expect(strstr(str("detail"), "temp") != NULL, "%s", an.raw);
	cr_assert_eq(req("GET", "/api/v1/tokens", fx.admin, NULL), 200);
	cr_expect(strstr(an.raw, "\"expired\"") != NULL, "%s", an.raw);

	/* expiry by the clock, not by an edit: a 1 s ttl */
	create("{\"name\": \"short\", \"role\": \"viewer\", \"ttl\": 1}", tok);
	cr_expect_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
	ax_api_fixture_sql(&fx, "SELECT pg_sleep(1.2)");
	expect_error(req("GET", "/api/v1/dags", tok, NULL), 401,
	             "token_expired", "1 s ttl after 1.2 s");

	/* an expires_at instant in the future is taken */
	create("{\"name\": \"dated\", \"role\": \"viewer\", "
	       "\"expires_at\": \"2999-01-01T00:00:00Z\"}",
	       tok);
	cr_expect(strncmp(str("expires_at"), "2999-01-01T00:00:00", 19) == 0,
	          "%s", an.raw);
	cr_expect_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
}

Test(api_tokens, last_used_is_written_at_most_once_a_minute)
{
	char    tok[AX_API_TOKEN_LEN], t1[64], t2[64];
	int64_t id = create("{\"name\": \"busy\", \"role\": \"viewer\"}", tok);

	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM api_tokens "
	                                "WHERE id = %lld AND last_used_at IS "
	                                "NULL",
	                                (long long) id),
	             1, "never used yet");
	cr_assert_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
	qtext(t1, sizeof(t1),
	      "SELECT last_used_at FROM api_tokens WHERE id = %lld",
	      (long long) id);
	cr_assert_neq(t1[0], '\0', "last_used_at not written");
	int64_t upd0 = ax_api_fixture_int(
	    &fx, "SELECT xmin::text::bigint FROM api_tokens WHERE id = %lld",
	    (long long) id);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
	qtext(t2, sizeof(t2),
	      "SELECT last_used_at FROM api_tokens WHERE id = %lld",
	      (long long) id);
	cr_expect_str_eq(t1, t2, "rewritten within the minute");
	cr_expect_eq(
	    ax_api_fixture_int(
	        &fx,
	        "SELECT xmin::text::bigint FROM api_tokens WHERE id = %lld",
	        (long long) id),
	    upd0, "the row was written again by 20 requests");
	/* a minute later (moved back by hand) the next use writes it */
	ax_api_fixture_sql(&fx,
	                   "UPDATE api_tokens SET last_used_at = now() - "
	                   "interval '2 min' WHERE id = %lld",
	                   (long long) id);
	cr_assert_eq(req("GET", "/api/v1/dags", tok, NULL), 200);
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT (last_used_at > now() - "
	                                "interval '30 s')::int FROM "
	                                "api_tokens WHERE id = %lld",
	                                (long long) id),
	             1);
}

Test(api_tokens, bad_bodies_are_400_naming_the_field)
{
	static const struct {
		const char *body, *status, *word;
	} cases[] = {
		{ "", "400", "name" },
		{ "{\"role\": \"viewer\"}", "400", "name" },
		{ "{\"name\": 5, \"role\": \"viewer\"}", "400", "name" },
		{ "{\"name\": \"\", \"role\": \"viewer\"}", "400", "name" },
		{ "{\"name\": \"a b\", \"role\": \"viewer\"}", "400",
		  "byte 2" },
		{ "{\"name\": \"x\\n\", \"role\": \"viewer\"}", "400",
		  "0x0a" },
		{ "{\"name\": \"x\\u0000y\", \"role\": \"viewer\"}", "400",
		  "" },
		{ "{\"name\": \"x\"}", "400", "role" },
		{ "{\"name\": \"x\", \"role\": \"root\"}", "400", "role" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"owner\": 1}",
		  "400", "owner" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": 0}", "400",
		  "ttl" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": -5}",
		  "400", "ttl" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": \"5y\"}",
		  "400", "ttl" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": \"d\"}",
		  "400", "ttl" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": "
		  "\"99999999999d\"}",
		  "400", "ttl" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": "
		  "\"4000d\"}",
		  "400", "ttl" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"ttl\": 60, "
		  "\"expires_at\": \"2999-01-01\"}",
		  "400", "both" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"expires_at\": "
		  "\"2001-01-01\"}",
		  "400", "future" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"expires_at\": "
		  "\"tomorrow\"}",
		  "400", "expires_at" },
		{ "{\"name\": \"x\", \"role\": \"viewer\", \"expires_at\": "
		  "true}",
		  "400", "expires_at" },
		{ "{\"name\": \"x\", \"role\"", "400", "" },
		{ "[1]", "400", "" },
	};
	char longname[300];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long st =
		    req("POST", "/api/v1/tokens", fx.admin, cases[i].body);
		cr_expect_eq(st, atol(cases[i].status), "%s: %ld %s",
		             cases[i].body, st, an.raw);
		cr_expect(json_is_string(json_object_get(an.json, "error")),
		          "%s: %s", cases[i].body, an.raw);
		cr_expect(strstr(str("detail"), cases[i].word) != NULL,
		          "%s: detail lacks '%s': %s", cases[i].body,
		          cases[i].word, an.raw);
	}
	memset(longname, 'n', 251);
	longname[251] = '\0';
	char body[400];
	snprintf(body, sizeof(body),
	         "{\"name\": \"%s\", \"role\": \"viewer\"}", longname);
	expect_error(req("POST", "/api/v1/tokens", fx.admin, body), 400,
	             "invalid", "251-byte name");
	for (const char *const *p =
	         (const char *const[]) {
	             "/api/v1/tokens/0", "/api/v1/tokens/x",
	             "/api/v1/tokens/1x", "/api/v1/tokens/%201",
	             "/api/v1/tokens/-1", "/api/v1/tokens/1%20",
	             "/api/v1/tokens/1%00",
	             "/api/v1/tokens/"
	             "99999999999999999999",
	             NULL };
	     *p; p++)
		expect_error(req("DELETE", *p, fx.admin, NULL), 400, "invalid",
		             *p);
	expect_error(req("DELETE", "/api/v1/tokens/2", fx.admin, "{}"), 400,
	             "invalid", "a body on DELETE");
	cr_expect_eq(ax_api_fixture_int(&fx,
	                                "SELECT count(*) FROM api_tokens "
	                                "WHERE revoked_at IS NOT NULL"),
	             0, "a refused request revoked a token");
	cr_expect_eq(
	    ax_api_fixture_int(&fx, "SELECT count(*) FROM api_tokens"), 3,
	    "a refused request created or revoked a token");
}

Test(api_tokens, token_changes_are_events_naming_who)
{
	char    tok[AX_API_TOKEN_LEN], path[64];
	int64_t id = create("{\"name\": \"bob\", \"role\": \"admin\"}", tok);

	snprintf(path, sizeof(path), "/api/v1/tokens/%lld", (long long) id);
	/* bob revokes himself: the event names bob, the next use fails */
	cr_assert_eq(req("DELETE", path, tok, NULL), 200, "%s", an.raw);
	expect_error(req("GET", "/api/v1/tokens", tok, NULL), 401,
	             "unauthorized", "self-revoked");
	cr_assert_eq(
	    req("GET", "/api/v1/events?type=token.created", fx.admin, NULL),
	    200);
	json_t *ev = json_object_get(an.json, "events");
	/* the fixture's three tokens were made on the database directly */
	cr_assert_eq(json_array_size(ev), 4, "%s", an.raw);
	json_t *pl = json_object_get(json_array_get(ev, 3), "payload");
	cr_expect_str_eq(json_string_value(json_object_get(pl, "token_name")),
	                 "a");
	cr_expect_str_eq(json_string_value(json_object_get(pl, "token_role")),
	                 "admin");
	cr_expect_str_eq(json_string_value(json_object_get(pl, "via")), "api");
	cr_expect_str_eq(json_string_value(json_object_get(
	                     json_object_get(pl, "target"), "name")),
	                 "bob");
	cr_expect_null(strstr(an.raw, tok + 4), "the token is in an event");
	pl = json_object_get(json_array_get(ev, 0), "payload");
	cr_expect_str_eq(json_string_value(json_object_get(pl, "via")),
	                 "database", "%s", an.raw);
	cr_expect(json_is_null(json_object_get(pl, "token_name")));

	cr_assert_eq(
	    req("GET", "/api/v1/events?type=token.revoked", fx.admin, NULL),
	    200);
	ev = json_object_get(an.json, "events");
	cr_assert_eq(json_array_size(ev), 1, "%s", an.raw);
	pl = json_object_get(json_array_get(ev, 0), "payload");
	cr_expect_str_eq(json_string_value(json_object_get(pl, "token_name")),
	                 "bob");
	cr_expect_eq(json_integer_value(json_object_get(pl, "token_id")), id);
	cr_expect_eq(json_integer_value(
	                 json_object_get(json_object_get(pl, "target"), "id")),
	             id);
}
