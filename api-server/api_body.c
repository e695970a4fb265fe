/*
 * api_body.c - parsing and checking of ax-api JSON request bodies (see
 * api_body.h). Pure functions: no I/O, no state; fuzzed by
 * tests/fuzz/fuzz_api_body.c.
 */
#include "api_body.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ax_err.h"
#include "tz.h"

__attribute__((format(printf, 3, 4))) static int
refuse(ax_api_bad *bad, const char *code, const char *fmt, ...)
{
	va_list ap;

	bad->status = 400;
	bad->code   = code;
	va_start(ap, fmt);
	vsnprintf(bad->detail, sizeof(bad->detail), fmt, ap);
	va_end(ap);
	/* the detail echoes input (a JSON error excerpt can stop inside a
	 * character, truncation can cut one): keep it valid UTF-8 so the
	 * answer can carry it */
	json_t *t = json_string(bad->detail);
	if (t == NULL)
		for (char *c = bad->detail; *c != '\0'; c++)
			if ((unsigned char) *c >= 0x80)
				*c = '?';
	json_decref(t);
	return 0;
}

json_t *
ax_api_body_parse(const char *body, size_t len, ax_api_bad *bad)
{
	json_error_t e;
	json_t      *j;
	size_t       i = 0;

	while (i < len &&
	       (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' ||
	        body[i] == '\t'))
		i++;
	if (i == len) {
		if ((j = json_object()) == NULL)
			refuse(bad, "invalid", "out of memory");
		return j;
	}
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (j == NULL) {
		refuse(bad, "bad_json",
		       "body is not valid JSON: %s at line %d, column %d",
		       e.text, e.line, e.column);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		refuse(bad, "invalid", "body must be a JSON object");
		return NULL;
	}
	return j;
}

int
ax_api_body_fields(json_t *o, const char *const *allowed, ax_api_bad *bad)
{
	const char *k;
	json_t     *v;

	json_object_foreach(o, k, v)
	{
		int ok = 0;
		for (const char *const *a = allowed; *a != NULL && !ok; a++)
			ok = strcmp(*a, k) == 0;
		if (!ok)
			return refuse(bad, "invalid",
			              "unknown field '%.200s' in the body", k);
	}
	return 1;
}

int
ax_api_body_instant(json_t *v, const char *field, int64_t *us, ax_api_bad *bad)
{
	int64_t t;

	if (json_is_integer(v)) {
		t = json_integer_value(v);
		if (t < AX_API_INSTANT_MIN || t > AX_API_INSTANT_MAX)
			return refuse(bad, "invalid",
			              "'%s': %" PRId64
			              " microseconds is outside years "
			              "0001-9999",
			              field, t);
		*us = t;
		return 1;
	}
	if (!json_is_string(v))
		return refuse(bad, "invalid",
		              "'%s' must be an RFC 3339 string or integer "
		              "microseconds",
		              field);
	if (ax_tz_parse_iso8601(json_string_value(v), ax_tz_utc(), &t) !=
	    AX_OK)
		return refuse(bad, "invalid", "'%s': %s", field,
		              ax_err_detail());
	if (t < AX_API_INSTANT_MIN || t > AX_API_INSTANT_MAX)
		return refuse(bad, "invalid",
		              "'%s' is outside years 0001-9999", field);
	*us = t;
	return 1;
}

/* Parses body as an object with only the members in allowed; NULL after
 * a refusal. */
static json_t *
object_of(const char *body, size_t len, const char *const *allowed,
          ax_api_bad *bad)
{
	json_t *j = ax_api_body_parse(body, len, bad);

	if (j != NULL && !ax_api_body_fields(j, allowed, bad)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* Member "params": absent (NULL) or an object; 0 after a refusal. */
static int
params_of(json_t *j, json_t **out, ax_api_bad *bad)
{
	json_t *p = json_object_get(j, "params");

	if (p != NULL && !json_is_object(p))
		return refuse(bad, "invalid",
		              "'params' must be a JSON object");
	*out = p;
	return 1;
}

int
ax_api_body_trigger(const char *body, size_t len, ax_api_trigger_body *out,
                    ax_api_bad *bad)
{
	static const char *const fields[] = { "logical_date", "params", NULL };
	json_t                  *j = object_of(body, len, fields, bad), *ld;

	memset(out, 0, sizeof(*out));
	if (j == NULL)
		return 0;
	if (!params_of(j, &out->params, bad))
		goto fail;
	if ((ld = json_object_get(j, "logical_date")) != NULL) {
		if (!ax_api_body_instant(ld, "logical_date",
		                         &out->logical_date_us, bad))
			goto fail;
		out->has_logical_date = 1;
	}
	out->json = j;
	return 1;
fail:
	json_decref(j);
	memset(out, 0, sizeof(*out));
	return 0;
}

int
ax_api_body_backfill(const char *body, size_t len, ax_api_backfill_body *out,
                     ax_api_bad *bad)
{
	static const char *const fields[] = { "start", "end", "mode", "params",
		                              NULL };
	json_t                  *j = object_of(body, len, fields, bad), *m;

	memset(out, 0, sizeof(*out));
	if (j == NULL)
		return 0;
	out->mode = "serial";
	if ((m = json_object_get(j, "mode")) != NULL) {
		const char *s = json_string_value(m);
		if (s != NULL && strcmp(s, "serial") == 0)
			out->mode = "serial";
		else if (s != NULL && strcmp(s, "parallel") == 0)
			out->mode = "parallel";
		else {
			refuse(bad, "invalid",
			       "'mode' must be \"serial\" or \"parallel\"");
			goto fail;
		}
	}
	if (!params_of(j, &out->params, bad))
		goto fail;
	out->start = json_object_get(j, "start");
	out->end   = json_object_get(j, "end");
	if (out->start == NULL || out->end == NULL) {
		refuse(bad, "invalid", "'start' and 'end' are required");
		goto fail;
	}
	if (!ax_api_body_instant(out->start, "start", &out->start_us, bad) ||
	    !ax_api_body_instant(out->end, "end", &out->end_us, bad))
		goto fail;
	if (out->end_us < out->start_us) {
		refuse(bad, "invalid", "'end' is before 'start'");
		goto fail;
	}
	out->json = j;
	return 1;
fail:
	json_decref(j);
	memset(out, 0, sizeof(*out));
	return 0;
}

int
ax_api_body_clear(const char *body, size_t len, ax_api_clear_body *out,
                  ax_api_bad *bad)
{
	static const char *const fields[] = { "downstream", NULL };
	json_t                  *j = object_of(body, len, fields, bad), *ds;

	memset(out, 0, sizeof(*out));
	if (j == NULL)
		return 0;
	ds = json_object_get(j, "downstream");
	if (ds != NULL && !json_is_boolean(ds)) {
		json_decref(j);
		return refuse(bad, "invalid",
		              "'downstream' must be true or false");
	}
	out->downstream = ds != NULL && json_is_true(ds);
	out->json       = j;
	return 1;
}

int
ax_api_body_mark(const char *body, size_t len, ax_api_mark_body *out,
                 ax_api_bad *bad)
{
	static const char *const fields[] = { "state", NULL };
	json_t                  *j        = object_of(body, len, fields, bad);
	const char              *want;

	memset(out, 0, sizeof(*out));
	if (j == NULL)
		return 0;
	want = json_string_value(json_object_get(j, "state"));
	if (want != NULL && strcasecmp(want, "success") == 0)
		out->state = AX_TI_SUCCESS;
	else if (want != NULL && strcasecmp(want, "failed") == 0)
		out->state = AX_TI_FAILED;
	else {
		json_decref(j);
		return refuse(bad, "invalid",
		              "'state' must be \"success\" or \"failed\"");
	}
	out->json = j;
	return 1;
}

int
ax_api_body_none(const char *body, size_t len, ax_api_bad *bad)
{
	json_t *j = ax_api_body_parse(body, len, bad);

	if (j == NULL)
		return 0;
	if (json_object_size(j) > 0) {
		json_decref(j);
		return refuse(bad, "invalid",
		              "this route takes no body (send none, or {})");
	}
	json_decref(j);
	return 1;
}
