/*
 * api_http.c - request and response helpers shared by the ax-api route
 * handlers (see api_http.h).
 */
#include "api_http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag_validate.h"
#include "log.h"
#include "tz.h"

/* PostgreSQL type OIDs (pg_type.h is not a client header). */
enum {
	OID_BOOL        = 16,
	OID_INT8        = 20,
	OID_INT2        = 21,
	OID_INT4        = 23,
	OID_JSON        = 114,
	OID_TIMESTAMPTZ = 1184,
	OID_JSONB       = 3802,
};

static void
resp_reset(ax_api_resp *r)
{
	json_decref(r->json);
	r->json = NULL;
	free(r->text);
	r->text = NULL;
	if (r->raw != NULL)
		MHD_destroy_response(r->raw);
	r->raw = NULL;
}

void
ax_api_reply_json(ax_api_resp *r, unsigned status, json_t *j)
{
	resp_reset(r);
	if (j == NULL) {
		r->status = 500;
		r->json = json_pack("{s:s,s:s}", "error", "internal", "detail",
		                    "out of memory");
		return;
	}
	r->status = status;
	r->json   = j;
}

void
ax_api_reply_text(ax_api_resp *r, unsigned status, const char *content_type,
                  const char *text, size_t len)
{
	resp_reset(r);
	r->text = malloc(len + 1);
	if (r->text == NULL) {
		ax_api_reply_json(r, 500, NULL);
		return;
	}
	memcpy(r->text, text, len);
	r->text[len]    = '\0';
	r->text_len     = len;
	r->status       = status;
	r->content_type = content_type;
}

json_t *
ax_api_reply_error(ax_api_resp *r, unsigned status, const char *code,
                   const char *fmt, ...)
{
	char    detail[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	/* json_string refuses invalid UTF-8: echoing user input must not
	 * turn a 4xx into a 500. */
	json_t *d = json_string(detail);
	if (d == NULL)
		d = json_string("(detail not representable as UTF-8)");
	ax_api_reply_json(r, status,
	                  json_pack("{s:s,s:o}", "error", code, "detail", d));
	return r->json;
}

void
ax_api_reply_err(ax_api_resp *r, ax_err e)
{
	const char *d = ax_err_detail();

	switch (e) {
	case AX_ENOENT:
		ax_api_reply_error(r, 404, "not_found", "%s", d);
		break;
	case AX_EINVAL:
	case AX_EPARSE:
	case AX_ELIMIT:
		ax_api_reply_error(r, 400, "invalid", "%s", d);
		break;
	case AX_EEXIST:
		ax_api_reply_error(r, 409, "conflict", "%s", d);
		break;
	case AX_ESTATE:
		ax_api_reply_error(r, 409, "illegal_state", "%s", d);
		break;
	case AX_EDBCONN:
	case AX_EBUSY:
	case AX_ETIMEDOUT:
	case AX_ERETRY:
		ax_log_warn("api", "database unavailable: %s", d);
		ax_api_reply_error(r, 503, "unavailable",
		                   "the database is unavailable (%s); retry "
		                   "later",
		                   ax_errname(e));
		break;
	default:
		ax_log_error("api", "%s: %s", ax_errname(e), d);
		ax_api_reply_error(r, 500, "internal",
		                   "%s; see the ax-api log", ax_strerror(e));
		break;
	}
}

PGresult *
ax_api_query_row(ax_api_req *q, ax_api_resp *r, const char *sql, int nparams,
                 const char *const *params, const char *missing, ...)
{
	PGresult *res = NULL;
	ax_err    rv  = ax_store_query(q->st, sql, nparams, params, &res);
	char      detail[512];
	va_list   ap;

	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return NULL;
	}
	if (PQntuples(res) > 0)
		return res;
	PQclear(res);
	va_start(ap, missing);
	vsnprintf(detail, sizeof(detail), missing, ap);
	va_end(ap);
	ax_api_reply_error(r, 404, "not_found", "%s", detail);
	return NULL;
}

const char *
ax_api_query(const ax_api_req *q, const char *key)
{
	return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND,
	                                   key);
}

int
ax_api_query_int(const ax_api_req *q, ax_api_resp *r, const char *key,
                 int64_t def, int64_t min, int64_t max, int64_t *out)
{
	const char *v = ax_api_query(q, key);
	char       *end;
	long long   n;

	if (v == NULL) {
		*out = def;
		return 1;
	}
	errno = 0;
	n     = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0) {
		ax_api_reply_error(r, 400, "invalid",
		                   "query argument '%s' must be an integer, "
		                   "got '%s'",
		                   key, v);
		return 0;
	}
	if (n < min || n > max) {
		ax_api_reply_error(r, 400, "invalid",
		                   "query argument '%s' must be in "
		                   "[%" PRId64 ", %" PRId64 "], got %lld",
		                   key, min, max, n);
		return 0;
	}
	*out = n;
	return 1;
}

int
ax_api_query_bool(const ax_api_req *q, ax_api_resp *r, const char *key,
                  int def, int *out)
{
	const char *v = ax_api_query(q, key);

	if (v == NULL) {
		/* `?follow` without a value is present with a NULL value;
		 * MHD_lookup_connection_value cannot tell it from absent, so
		 * look the key up among the arguments. */
		*out = def;
		return 1;
	}
	if (!strcmp(v, "") || !strcmp(v, "1") || !strcmp(v, "true") ||
	    !strcmp(v, "yes")) {
		*out = 1;
		return 1;
	}
	if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")) {
		*out = 0;
		return 1;
	}
	ax_api_reply_error(r, 400, "invalid",
	                   "query argument '%s' must be true or false, got "
	                   "'%s'",
	                   key, v);
	return 0;
}

void
ax_api_reply_bad(ax_api_resp *r, const ax_api_bad *bad)
{
	ax_api_reply_error(r, bad->status, bad->code, "%s", bad->detail);
}

json_t *
ax_api_body_object(const ax_api_req *q, ax_api_resp *r)
{
	ax_api_bad bad;
	json_t    *j = ax_api_body_parse(q->body, q->body_len, &bad);

	if (j == NULL)
		ax_api_reply_bad(r, &bad);
	return j;
}

void
ax_api_actor_params(const ax_api_req *q, char ids[24], const char **p)
{
	snprintf(ids, 24, "%" PRId64, q->token_id);
	p[0] = ids;
	p[1] = q->token_name;
	p[2] = q->role != AX_API_ROLE_NONE ? ax_api_role_name(q->role) : NULL;
}

void
ax_api_reply_row(ax_api_resp *r, PGresult *res)
{
	if (res == NULL)
		return;
	ax_api_reply_json(r, 200, ax_api_row_json(res, 0));
	PQclear(res);
}

int
ax_api_only_fields(json_t *o, const char *const *allowed, ax_api_resp *r)
{
	ax_api_bad bad;

	if (ax_api_body_fields(o, allowed, &bad))
		return 1;
	ax_api_reply_bad(r, &bad);
	return 0;
}

int
ax_api_parse_id(const char *s, int64_t *out)
{
	int64_t v = 0;
	size_t  n = 0;

	for (; s[n] != '\0'; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 18)
			return 0;
		v = v * 10 + (s[n] - '0');
	}
	if (n == 0 || v == 0)
		return 0;
	if (out != NULL)
		*out = v;
	return 1;
}

/* "id" of pattern segment "{id}" into name (len bytes). */
static void
param_name(const char *seg, char *name, size_t len)
{
	size_t n = strcspn(seg + 1, "}/");
	if (n >= len)
		n = len - 1;
	memcpy(name, seg + 1, n);
	name[n] = '\0';
}

int
ax_api_check_path_params(const char *pattern, const char *const *params,
                         ax_api_resp *r)
{
	const char *p = pattern;
	int         k = 0;
	char        name[32];

	while ((p = strchr(p, '{')) != NULL && k < AX_API_MAX_PARAMS) {
		const char *v = params[k++];
		param_name(p, name, sizeof(name));
		p++;
		if (v == NULL)
			continue;
		if (strcmp(name, "id") == 0 && !ax_api_parse_id(v, NULL)) {
			ax_api_reply_error(r, 400, "invalid",
			                   "the id in the path must be a "
			                   "positive integer of digits only "
			                   "(no sign, space or NUL), got '%s'",
			                   v);
			return 0;
		}
		if (strcmp(name, "name") == 0 && !ax_dag_name_valid(v)) {
			ax_api_reply_error(
			    r, 400, "invalid",
			    "'%s' is not a DAG name: use words of letters, "
			    "digits, '_' and '-' separated by single dots, "
			    "at most 200 bytes, not starting with '-'",
			    v);
			return 0;
		}
	}
	return 1;
}

int
ax_api_check_body(const ax_api_req *q, ax_api_body kind, ax_api_resp *r)
{
	json_t *j;

	if (kind == AX_API_BODY_BY_METHOD)
		kind =
		    (!strcmp(q->method, "GET") || !strcmp(q->method, "HEAD") ||
		     !strcmp(q->method, "DELETE"))
		    ? AX_API_BODY_NONE
		    : AX_API_BODY_JSON;
	switch (kind) {
	case AX_API_BODY_NONE:
		if (q->body_len == 0)
			return 1;
		ax_api_reply_error(r, 400, "invalid",
		                   "%s %s takes no request body (got %zu "
		                   "bytes); send none",
		                   q->method, q->path, q->body_len);
		return 0;
	case AX_API_BODY_JSON:
	case AX_API_BODY_JSON_EMPTY:
		if ((j = ax_api_body_object(q, r)) == NULL)
			return 0;
		if (kind == AX_API_BODY_JSON_EMPTY &&
		    json_object_size(j) > 0) {
			const char *k =
			    json_object_iter_key(json_object_iter(j));
			ax_api_reply_error(r, 400, "invalid",
			                   "%s %s takes no fields: unknown "
			                   "field '%s' in the body (send no "
			                   "body, or {})",
			                   q->method, q->path, k);
			json_decref(j);
			return 0;
		}
		json_decref(j);
		return 1;
	default:
		return 1;
	}
}

/* PostgreSQL's "2024-05-01 10:30:00.5+08" -> "2024-05-01T02:30:00.500000Z" */
static json_t *
ts_json(const char *v)
{
	char    buf[48];
	int64_t us;

	if (ax_tz_parse_iso8601(v, NULL, &us) != AX_OK)
		return json_string(v); /* infinity, BC dates */
	ax_tz_format(ax_tz_utc(), us, buf, sizeof(buf));
	size_t n = strlen(buf);
	if (n > 6 && strcmp(buf + n - 6, "+00:00") == 0)
		strcpy(buf + n - 6, "Z");
	return json_string(buf);
}

json_t *
ax_api_row_json(const PGresult *res, int i)
{
	json_t *o  = json_object();
	int     nf = PQnfields(res);

	if (o == NULL)
		return NULL;
	for (int f = 0; f < nf; f++) {
		const char *v = PQgetvalue(res, i, f);
		json_t     *j;
		if (PQgetisnull(res, i, f)) {
			j = json_null();
		} else {
			switch (PQftype(res, f)) {
			case OID_INT2:
			case OID_INT4:
			case OID_INT8:
				j = json_integer(strtoll(v, NULL, 10));
				break;
			case OID_BOOL:
				j = json_boolean(v[0] == 't');
				break;
			case OID_JSON:
			case OID_JSONB:
				j = json_loads(v, JSON_DECODE_ANY, NULL);
				break;
			case OID_TIMESTAMPTZ:
				j = ts_json(v);
				break;
			default:
				j = json_string(v);
				if (j == NULL) /* not UTF-8 */
					j = json_string("(invalid UTF-8)");
				break;
			}
		}
		if (j == NULL || json_object_set_new(o, PQfname(res, f), j)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *
ax_api_rows_json(const PGresult *res)
{
	json_t *a = json_array();
	int     n = PQntuples(res);

	for (int i = 0; a != NULL && i < n; i++) {
		json_t *o = ax_api_row_json(res, i);
		if (o == NULL || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int
ax_api_parse_instant(json_t *v, const char *field, ax_api_resp *r, int64_t *us)
{
	ax_api_bad bad;

	if (ax_api_body_instant(v, field, us, &bad))
		return 1;
	ax_api_reply_bad(r, &bad);
	return 0;
}
