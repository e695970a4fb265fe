/*
 * api_http.h - what every ax-api route handler works with: the request
 * (path parameters, query, body, a database connection, the caller's
 * role), the response it fills, and the helpers that keep every answer
 * in one shape: JSON, errors as {"error": CODE, "detail": TEXT, ...}.
 *
 * Role: api_server.c builds an ax_api_req per request, runs the handler
 * the route table (api_routes.h) names, and sends the ax_api_resp.
 * Handlers live in api_dags.c, api_runs.c, api_commands.c and api_misc.c.
 *
 * Invariants: a handler runs on the MHD event-loop thread of its
 * connection (it blocks that thread's other connections while it runs:
 * no waiting in handlers) with a store borrowed from the server's pool
 * for the duration of the call (nobody else uses it meanwhile); it sets
 * exactly one response. Bad input is a
 * 4xx answer, never an assert. Instants in JSON are RFC 3339 UTC text
 * ("2024-05-01T02:30:00.000000Z"): every pooled connection runs with
 * TimeZone UTC and ax_api_rows_json() rewrites timestamptz values.
 */
#ifndef AX_API_HTTP_H
#define AX_API_HTTP_H

#include <jansson.h>
#include <libpq-fe.h>
#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "api_body.h"
#include "api_token.h"
#include "ax_err.h"
#include "store.h"

#define AX_API_MAX_PARAMS 4 /* {params} in one route pattern */

typedef struct ax_api_server ax_api_server;

typedef struct ax_api_req {
	struct MHD_Connection *conn;
	ax_api_server         *srv;
	const char            *method;
	const char            *path;
	const char *params[AX_API_MAX_PARAMS]; /* path {params}, decoded */
	const char *body;                      /* NUL-terminated; may be "" */
	size_t      body_len;
	ax_store   *st;   /* borrowed for the call */
	ax_api_role role; /* of the caller's token */
	int64_t     token_id;
	char token_name[AX_API_TOKEN_NAME_MAX + 1]; /* of the token ("": none;
	                                               the audit trail) */
} ax_api_req;

typedef struct ax_api_resp {
	unsigned             status;
	json_t              *json; /* owned; sent when set */
	char                *text; /* owned (malloc); else */
	size_t               text_len;
	const char          *content_type; /* static; of text */
	struct MHD_Response *raw;          /* owned; streaming handlers */
	const char          *allow;        /* static; Allow header (405) */
} ax_api_resp;

typedef void (*ax_api_handler)(ax_api_req *q, ax_api_resp *r);

/* What request body a route takes (api_routes.h). The server refuses
 * any other body with a 400 before the handler runs. */
typedef enum ax_api_body {
	AX_API_BODY_BY_METHOD = 0, /* GET, HEAD, DELETE: NONE; else JSON */
	AX_API_BODY_NONE,          /* no body at all */
	AX_API_BODY_JSON,          /* empty, or a JSON object */
	AX_API_BODY_JSON_EMPTY,    /* empty, or the JSON object {} */
	AX_API_BODY_TEXT,          /* any UTF-8 text (YAML) */
} ax_api_body;

/* Sets a JSON answer (takes the reference of j; NULL: out of memory). */
void ax_api_reply_json(ax_api_resp *r, unsigned status, json_t *j);

/* Sets a text answer (copies text). */
void ax_api_reply_text(ax_api_resp *r, unsigned status,
                       const char *content_type, const char *text, size_t len);

/*
 * Sets an error answer {"error": code, "detail": printf(...)}. Returns
 * the JSON object so a caller may add fields (e.g. "errors").
 */
json_t *ax_api_reply_error(ax_api_resp *r, unsigned status, const char *code,
                           const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Sets the answer for a failed call that returned e, with the calling
 * thread's ax_err_detail(): AX_ENOENT 404 not_found, AX_EINVAL /
 * AX_EPARSE 400 invalid, AX_EEXIST 409 conflict, AX_ESTATE 409
 * illegal_state, AX_EDBCONN / AX_EBUSY 503 unavailable, AX_ETIMEDOUT 503,
 * else 500 internal (the detail is logged, not sent).
 */
void ax_api_reply_err(ax_api_resp *r, ax_err e);

/*
 * Runs sql (nparams text params) on the request's connection and returns
 * the result when it has a row (the caller PQclear()s it); otherwise
 * NULL after setting the answer: the error of the call, or 404 not_found
 * with the detail printf(missing, ...).
 */
PGresult *ax_api_query_row(ax_api_req *q, ax_api_resp *r, const char *sql,
                           int nparams, const char *const *params,
                           const char *missing, ...)
    __attribute__((format(printf, 6, 7)));

/*
 * The parameters $1..$3 that audit rows take about who acts: p[0] the
 * token id (written into ids), p[1] its name, p[2] its role (NULL when
 * none). Borrowed from q and ids.
 */
void ax_api_actor_params(const ax_api_req *q, char ids[24], const char **p);

/*
 * Answers 200 with row 0 of res and clears it; does nothing when res is
 * NULL (ax_api_query_row answered already).
 */
void ax_api_reply_row(ax_api_resp *r, PGresult *res);

/* The query argument key (decoded) or NULL. */
const char *ax_api_query(const ax_api_req *q, const char *key);

/*
 * Reads integer query argument key into *out: def when absent. Returns 1
 * when fine; 0 after setting a 400 (not an integer, out of [min, max]).
 */
int ax_api_query_int(const ax_api_req *q, ax_api_resp *r, const char *key,
                     int64_t def, int64_t min, int64_t max, int64_t *out);

/*
 * Reads boolean query argument key (true/false/1/0/yes/no; present
 * without a value = true). Returns 1 when fine, 0 after a 400.
 */
int ax_api_query_bool(const ax_api_req *q, ax_api_resp *r, const char *key,
                      int def, int *out);

/* Sets the answer to a refused body (see api_body.h). */
void ax_api_reply_bad(ax_api_resp *r, const ax_api_bad *bad);

/*
 * Parses the body as a JSON object (an empty body is {}). Returns a new
 * reference, or NULL after setting 400 bad_json (with line and column)
 * or 400 invalid (not an object).
 */
json_t *ax_api_body_object(const ax_api_req *q, ax_api_resp *r);

/*
 * Checks that the members of the body object o are only the names in
 * allowed (NULL-terminated). Returns 1 when fine, 0 after a 400 that
 * names the unknown member.
 */
int ax_api_only_fields(json_t *o, const char *const *allowed, ax_api_resp *r);

/*
 * 1 when s is an id: 1 to 18 ASCII digits, no sign, no space, not zero
 * (stored in *out when out is not NULL); else 0.
 */
int ax_api_parse_id(const char *s, int64_t *out);

/*
 * Checks the {params} of a route pattern against their rule: {id} an id
 * (ax_api_parse_id), {name} a DAG name (ax_dag_name_valid); other
 * params only need to be UTF-8 without NUL (checked by the server).
 * Returns 1 when fine, 0 after a 400 naming the param and its rule.
 */
int ax_api_check_path_params(const char *pattern, const char *const *params,
                             ax_api_resp *r);

/*
 * Checks the request body against what the route takes (kind; BY_METHOD
 * is resolved with q->method). Returns 1 when fine, 0 after a 400:
 * `invalid` for a body on a route that takes none or members where none
 * are taken, `bad_json` (line and column) for malformed JSON.
 */
int ax_api_check_body(const ax_api_req *q, ax_api_body kind, ax_api_resp *r);

/*
 * The rows of res as a JSON array of objects keyed by column name:
 * integers, booleans, json/jsonb as JSON, timestamptz as RFC 3339 UTC
 * text, NULL as null, everything else as strings. NULL on out of memory.
 */
json_t *ax_api_rows_json(const PGresult *res);

/* Row i of res as one object (see ax_api_rows_json). */
json_t *ax_api_row_json(const PGresult *res, int i);

/*
 * Parses an instant given as RFC 3339 / ISO 8601 text (a date alone is
 * midnight UTC; no offset means UTC) or as integer microseconds into
 * *us. Returns 1 when fine, 0 after a 400 naming field.
 */
int ax_api_parse_instant(json_t *v, const char *field, ax_api_resp *r,
                         int64_t *us);

#endif /* AX_API_HTTP_H */
