/*
 * api_pools.c - pool pressure routes of ax-api (see api_pools.h).
 *
 * The expiry is computed by PostgreSQL (now() + expires_in, or the
 * absolute expires_at): database time is the reference axd compares
 * with when it reads the rows.
 */
#include "api_pools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calendar.h"
#include "clock.h"
#include "engine/control.h"
#include "tz.h"

/* The longest expiry a push may ask for: a level is a measurement, and
 * one that outlives its source would hold work on stale data. */
#define PRESSURE_MAX_US (7 * 24 * 3600 * AX_USEC_PER_SEC)

#define PRESSURE_COLS                                                         \
	"r.name, to_jsonb(r.level) AS level, r.expires_at, r.expires_at > "   \
	"now() AS in_force, "                                                 \
	"r.set_by, r.updated_at"

/* The CTE "e" writing event type about row r ($1 token id, $2 token
 * name, $3 role), the answer's columns and the NOTIFY that wakes axd. */
#define PRESSURE_EVENT(type)                                                  \
	"e AS (INSERT INTO event_log (event_id, type, payload) SELECT "       \
	"gen_random_uuid(), '" type "', jsonb_build_object('pool', r.name, "  \
	"'level', r.level, 'expires_at', r.expires_at, 'token_id', "          \
	"nullif($1::bigint, 0), 'token_name', nullif($2::text, ''), "         \
	"'token_role', $3::text, 'via', 'api') FROM r) "                      \
	"SELECT " PRESSURE_COLS                                               \
	" FROM r, LATERAL (SELECT pg_notify('" AX_CONTROL_CHANNEL             \
	"', '{\"op\":\"pressure\"}')) n"

void
ax_api_pressure_get(ax_api_req *q, ax_api_resp *r)
{
	const char *p[1] = { q->params[0] };
	PGresult   *res  = ax_api_query_row(
	       q, r,
	       "SELECT " PRESSURE_COLS " FROM pool_pressure r WHERE r.name = $1",
	       1, p,
	       "no pressure pushed for pool %s (PUT "
	          "/api/v1/pools/%s/pressure pushes one)",
	       q->params[0], q->params[0]);
	ax_api_reply_row(r, res);
}

/*
 * Validates a push body b into *level and the expiry: *abs_us (an
 * absolute instant) or *in_us (from now), the other 0. Returns 1 when
 * fine, 0 after a 400 naming the member and what to write.
 */
static int
body_pressure(json_t *b, ax_api_resp *r, double *level, int64_t *abs_us,
              int64_t *in_us)
{
	static const char *const fields[] = { "level", "expires_in",
		                              "expires_at", NULL };
	json_t                  *v        = json_object_get(b, "level");
	json_t                  *in       = json_object_get(b, "expires_in");
	json_t                  *at       = json_object_get(b, "expires_at");

	*abs_us = *in_us = 0;
	if (!ax_api_only_fields(b, fields, r))
		return 0;
	if (!json_is_number(v) || json_number_value(v) < 0 ||
	    json_number_value(v) > 1) {
		ax_api_reply_error(r, 400, "invalid",
		                   "level: required, a number from 0 to 1 "
		                   "(the share of the pool's capacity in use, "
		                   "e.g. 0.93)");
		return 0;
	}
	*level = json_number_value(v);
	if ((in == NULL) == (at == NULL)) {
		ax_api_reply_error(
		    r, 400, "invalid",
		    "expires_in or expires_at: give exactly one "
		    "(e.g. \"expires_in\": \"5m\"); a level "
		    "always expires");
		return 0;
	}
	if (in != NULL) {
		if (!json_is_string(in) ||
		    ax_duration_parse(json_string_value(in), in_us) != AX_OK ||
		    *in_us <= 0 || *in_us > PRESSURE_MAX_US) {
			ax_api_reply_error(
			    r, 400, "invalid",
			    "expires_in: a duration from 1s to 7d "
			    "such as \"5m\" or \"1h30m\"");
			return 0;
		}
		return 1;
	}
	int64_t now = ax_clock_utc_us();
	if (!json_is_string(at) ||
	    ax_tz_parse_iso8601(json_string_value(at), NULL, abs_us) !=
	        AX_OK) {
		ax_api_reply_error(r, 400, "invalid",
		                   "expires_at: an ISO 8601 instant with an "
		                   "offset, e.g. \"2026-12-02T04:00:00Z\"");
		return 0;
	}
	if (*abs_us <= now || *abs_us > now + PRESSURE_MAX_US) {
		ax_api_reply_error(r, 400, "invalid",
		                   "expires_at: must be in the future and at "
		                   "most 7 days ahead (got %s)",
		                   json_string_value(at));
		return 0;
	}
	return 1;
}

void
ax_api_pressure_put(ax_api_req *q, ax_api_resp *r)
{
	char        ids[24], lv[40], ab[24], in[24];
	const char *p[7];
	json_t     *b = ax_api_body_object(q, r);
	double      level;
	int64_t     abs_us, in_us;
	PGresult   *res;

	if (b == NULL)
		return;
	if (!body_pressure(b, r, &level, &abs_us, &in_us)) {
		json_decref(b);
		return;
	}
	json_decref(b);
	ax_api_actor_params(q, ids, p);
	snprintf(lv, sizeof(lv), "%.17g", level);
	snprintf(ab, sizeof(ab), "%" PRId64, abs_us);
	snprintf(in, sizeof(in), "%" PRId64, in_us);
	p[3] = q->params[0];
	p[4] = lv;
	p[5] = ab;
	p[6] = in;
	res  = ax_api_query_row(
	     q, r,
	     "WITH r AS (INSERT INTO pool_pressure (name, level, expires_at, "
	      "set_by, token_id) VALUES ($4, $5::float8, CASE WHEN "
	      "$6::bigint > 0 THEN ax_ts($6::bigint) ELSE now() + "
	      "$7::bigint * interval '1 microsecond' END, coalesce($2, ''), "
	      "nullif($1::bigint, 0)) ON CONFLICT (name) DO UPDATE SET level "
	      "= EXCLUDED.level, expires_at = EXCLUDED.expires_at, set_by = "
	      "EXCLUDED.set_by, token_id = EXCLUDED.token_id, updated_at = "
	      "now() RETURNING *), " PRESSURE_EVENT("pool.pressure_set"),
	     7, p, "pool %s: the push was not stored", q->params[0]);
	ax_api_reply_row(r, res);
}

void
ax_api_pressure_delete(ax_api_req *q, ax_api_resp *r)
{
	char        ids[24];
	const char *p[4];
	PGresult   *res;

	ax_api_actor_params(q, ids, p);
	p[3] = q->params[0];
	res  = ax_api_query_row(
	     q, r,
	     "WITH r AS (DELETE FROM pool_pressure WHERE name = $4 RETURNING "
	      "*), " PRESSURE_EVENT("pool.pressure_cleared"),
	     4, p, "no pressure pushed for pool %s", q->params[0]);
	ax_api_reply_row(r, res);
}

/* ------------------------------------------------------------------ */
/* capacity calendars (capacity_calendars, engine/calendar.h) */

#define CALENDAR_COLS "r.name, r.spec, r.set_by, r.updated_at"

/* As PRESSURE_EVENT, for the calendar row r. */
#define CALENDAR_EVENT(type)                                                  \
	"e AS (INSERT INTO event_log (event_id, type, payload) SELECT "       \
	"gen_random_uuid(), '" type "', jsonb_build_object('pool', r.name, "  \
	"'calendar', r.spec, 'token_id', nullif($1::bigint, 0), "             \
	"'token_name', nullif($2::text, ''), 'token_role', $3::text, 'via', " \
	"'api') FROM r) "                                                     \
	"SELECT " CALENDAR_COLS                                               \
	" FROM r, LATERAL (SELECT pg_notify('" AX_CONTROL_CHANNEL             \
	"', '{\"op\":\"calendar\"}')) n"

void
ax_api_calendar_get(ax_api_req *q, ax_api_resp *r)
{
	const char *p[1] = { q->params[0] };
	PGresult   *res  = ax_api_query_row(
	       q, r,
	       "SELECT " CALENDAR_COLS
	       " FROM capacity_calendars r WHERE r.name = $1",
	       1, p,
	       "no calendar for pool %s (PUT /api/v1/pools/%s/calendar sets "
	          "one)",
	       q->params[0], q->params[0]);
	ax_api_reply_row(r, res);
}

void
ax_api_calendar_put(ax_api_req *q, ax_api_resp *r)
{
	char        ids[24];
	const char *p[5];
	json_t     *b = ax_api_body_object(q, r);
	char       *text;
	ax_calendar cal;
	PGresult   *res;

	if (b == NULL)
		return;
	text = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	if (text == NULL) {
		ax_api_reply_error(r, 500, "internal", "out of memory");
		return;
	}
	/* the parser axd uses: what is stored is what axd can apply */
	if (ax_calendar_parse_text(text, &cal) != AX_OK) {
		ax_api_reply_error(r, 400, "invalid", "%s", ax_err_detail());
		ax_calendar_fini(&cal);
		free(text);
		return;
	}
	ax_calendar_fini(&cal);
	ax_api_actor_params(q, ids, p);
	p[3] = q->params[0];
	p[4] = text;
	res  = ax_api_query_row(
	     q, r,
	     "WITH r AS (INSERT INTO capacity_calendars (name, spec, set_by, "
	      "token_id) VALUES ($4, $5::jsonb, coalesce($2, ''), "
	      "nullif($1::bigint, 0)) ON CONFLICT (name) DO UPDATE SET spec = "
	      "EXCLUDED.spec, set_by = EXCLUDED.set_by, token_id = "
	      "EXCLUDED.token_id, updated_at = now() RETURNING "
	      "*), " CALENDAR_EVENT("pool.calendar_set"),
	     5, p, "pool %s: the calendar was not stored", q->params[0]);
	free(text);
	ax_api_reply_row(r, res);
}

void
ax_api_calendar_delete(ax_api_req *q, ax_api_resp *r)
{
	char        ids[24];
	const char *p[4];
	PGresult   *res;

	ax_api_actor_params(q, ids, p);
	p[3] = q->params[0];
	res  = ax_api_query_row(
	     q, r,
	     "WITH r AS (DELETE FROM capacity_calendars WHERE name = $4 "
	      "RETURNING *), " CALENDAR_EVENT("pool.calendar_cleared"),
	     4, p, "no calendar for pool %s", q->params[0]);
	ax_api_reply_row(r, res);
}
