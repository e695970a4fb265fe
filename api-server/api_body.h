/*
 * api_body.h - parsing and checking of ax-api JSON request bodies, apart
 * from the handlers: text in, a checked C struct or a refusal out.
 *
 * Role: the route handlers (api_dags.c, api_runs.c) call one
 * ax_api_body_<route>() before any database work and answer a refusal
 * with ax_api_reply_bad() (api_http.h). The functions do no I/O, hold no
 * state and use only jansson and tz.c, so tests/fuzz/fuzz_api_body.c
 * runs exactly this code on arbitrary bytes.
 *
 * Invariants: every refusal is a 4xx status, a static error code
 * ("bad_json", "invalid") and a detail that names the field and what is
 * wanted; nothing here asserts or aborts on input. A result's json
 * member owns the parsed body (release with json_decref()); the other
 * json_t members borrow from it. Instants are inside years 0001-9999
 * (AX_API_INSTANT_MIN..MAX), so they format and store without overflow.
 */
#ifndef AX_API_BODY_H
#define AX_API_BODY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z in microseconds */
#define AX_API_INSTANT_MIN (-62135596800LL * 1000000)
#define AX_API_INSTANT_MAX (253402300800LL * 1000000 - 1)

/* A refused body: what to answer. */
typedef struct ax_api_bad {
	unsigned    status; /* 400 */
	const char *code;   /* static: "bad_json" or "invalid" */
	char        detail[320];
} ax_api_bad;

/*
 * Parses body[0..len) as a JSON object; a body of only whitespace is {}.
 * Duplicate member names are refused. Returns a new reference, or NULL
 * with *bad set (bad_json with line and column, or not an object).
 */
json_t *ax_api_body_parse(const char *body, size_t len, ax_api_bad *bad);

/* 1 when the members of o are only names in allowed (NULL-terminated);
 * else 0 with *bad naming the first unknown member. */
int ax_api_body_fields(json_t *o, const char *const *allowed, ax_api_bad *bad);

/*
 * Reads an instant given as RFC 3339 / ISO 8601 text (a date alone is
 * midnight UTC, no offset means UTC) or as integer microseconds, within
 * AX_API_INSTANT_MIN..MAX. Returns 1, or 0 with *bad naming field.
 */
int ax_api_body_instant(json_t *v, const char *field, int64_t *us,
                        ax_api_bad *bad);

/* POST /api/v1/dags/{name}/trigger: {"logical_date"?, "params"?} */
typedef struct ax_api_trigger_body {
	json_t *json;             /* owned */
	json_t *params;           /* borrowed object, or NULL when absent */
	int     has_logical_date; /* else the handler takes now */
	int64_t logical_date_us;
} ax_api_trigger_body;

int ax_api_body_trigger(const char *body, size_t len, ax_api_trigger_body *out,
                        ax_api_bad *bad);

/* POST /api/v1/dags/{name}/backfill:
 * {"start", "end", "mode"?: "serial"|"parallel", "params"?} */
typedef struct ax_api_backfill_body {
	json_t     *json;        /* owned */
	json_t     *params;      /* borrowed object, or NULL when absent */
	json_t     *start, *end; /* borrowed, as sent (for the command row) */
	const char *mode;        /* static: "serial" or "parallel" */
	int64_t     start_us, end_us; /* start_us <= end_us */
} ax_api_backfill_body;

int ax_api_body_backfill(const char *body, size_t len,
                         ax_api_backfill_body *out, ax_api_bad *bad);

/* POST /api/v1/instances/{id}/clear: {"downstream"?: bool} */
typedef struct ax_api_clear_body {
	json_t *json; /* owned */
	int     downstream;
} ax_api_clear_body;

int ax_api_body_clear(const char *body, size_t len, ax_api_clear_body *out,
                      ax_api_bad *bad);

/* POST /api/v1/instances/{id}/mark: {"state": "success"|"failed"} (any
 * letter case) */
typedef struct ax_api_mark_body {
	json_t     *json;  /* owned */
	ax_ti_state state; /* AX_TI_SUCCESS or AX_TI_FAILED */
} ax_api_mark_body;

int ax_api_body_mark(const char *body, size_t len, ax_api_mark_body *out,
                     ax_api_bad *bad);

/*
 * Routes that take no fields (kill, pause, unpause): the body is empty,
 * whitespace or {}. Returns 1, or 0 with *bad (malformed JSON, not an
 * object, any member).
 */
int ax_api_body_none(const char *body, size_t len, ax_api_bad *bad);

#endif /* AX_API_BODY_H */
