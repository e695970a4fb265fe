/*
 * api_dags.c - DAG routes of ax-api (see api_dags.h).
 *
 * Submission is the same three steps as `axctl dag load`: YAML ->
 * ax_dagset, validate, ax_dag_store_submit per DAG and template. A DAG
 * may use a template stored earlier: such templates are loaded from
 * their active stored version before validation (and not stored again).
 */
#include "api_dags.h"

#include "api_commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag.h"
#include "dag_store.h"
#include "dag_validate.h"
#include "dag_yaml.h"
#include "log.h"
#include "schedule.h"
#include "tz.h"

/* ---- submit ------------------------------------------------------------- */

/* Loads the stored active version of every template that a DAG in set
 * uses and set does not define. */
static ax_err
load_stored_templates(ax_store *st, ax_dagset *set)
{
	ax_err rv;

	for (size_t i = 0; i < set->n_dags; i++) {
		ax_dag *d = set->dags[i];
		for (size_t t = 0; t < d->n_tasks; t++) {
			const char *tn = d->tasks[t].template_name;
			PGresult   *res;
			char        file[300];
			if (tn == NULL || ax_dagset_find_template(set, tn))
				continue;
			const char *p[] = { tn };
			rv              = ax_store_query(
			                 st,
			                 "SELECT v.yaml FROM task_templates t JOIN "
			                              "task_template_versions v ON v.id = "
			                              "t.active_version_id WHERE t.name = $1",
			                 1, p, &res);
			if (rv != AX_OK)
				return rv;
			if (PQntuples(res) == 1) {
				snprintf(file, sizeof(file), "stored:%s", tn);
				const char *y = PQgetvalue(res, 0, 0);
				rv = ax_dag_yaml_load_buf(set, file, y,
				                          strlen(y));
			}
			PQclear(res);
			if (rv == AX_ENOMEM)
				return rv;
		}
	}
	return AX_OK;
}

static json_t *
diags_json(const ax_dagset *set)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < set->n_diags; i++) {
		const ax_diag *d = &set->diags[i];
		json_array_append_new(
		    a,
		    json_pack("{s:s,s:i,s:i,s:s}", "file",
		              d->pos.file ? d->pos.file : "", "line",
		              (int) d->pos.line, "column", (int) d->pos.col,
		              "message", d->msg ? d->msg : ""));
	}
	return a;
}

static json_t *
result_json(const char *name, const ax_dag_store_result *res)
{
	return json_pack("{s:s,s:I,s:i,s:I,s:s}", "name", name, "id",
	                 (json_int_t) res->id, "version", res->version,
	                 "version_id", (json_int_t) res->version_id, "outcome",
	                 ax_dag_store_outcome_name(res->outcome));
}

void
ax_api_dags_submit(ax_api_req *q, ax_api_resp *r)
{
	const char         *file = ax_api_query(q, "file");
	ax_dagset          *set  = NULL;
	json_t             *dags = json_array(), *tpls = json_array();
	json_t             *changed = json_array(), *body = NULL;
	json_t             *payload = NULL;
	ax_dag_store_result res;
	ax_err              rv;
	int                 created = 0;

	if (ax_api_cmd_replay(q, r))
		goto out;
	if (file == NULL || *file == '\0')
		file = "api";
	if (q->body_len == 0) {
		ax_api_reply_error(
		    r, 400, "invalid",
		    "empty body: send the DAG YAML as the body");
		goto out;
	}
	if ((rv = ax_dagset_new(NULL, &set)) != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	rv = ax_dag_yaml_load_buf(set, file, q->body, q->body_len);
	if (rv == AX_ENOMEM ||
	    (rv = load_stored_templates(q->st, set)) != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	ax_dagset_validate(set);
	if (set->n_diags > 0) {
		json_t *e = ax_api_reply_error(
		    r, 422, "invalid_dag", "%zu error%s in the YAML",
		    ax_dagset_error_count(set, NULL),
		    ax_dagset_error_count(set, NULL) == 1 ? "" : "s");
		json_object_set_new(e, "errors", diags_json(set));
		goto out;
	}
	if (set->n_dags == 0 && set->n_templates == 0) {
		ax_api_reply_error(r, 400, "invalid",
		                   "no DAG or TaskTemplate document in the "
		                   "body");
		goto out;
	}
	for (size_t i = 0; i < set->n_templates; i++) {
		ax_task_template *t = set->templates[i];
		if (t->pos.file == NULL || strcmp(t->pos.file, file) != 0)
			continue; /* loaded from the database */
		if ((rv = ax_dag_store_submit_template(q->st, t, "api",
		                                       &res)) != AX_OK) {
			ax_api_reply_err(r, rv);
			goto out;
		}
		created |= res.outcome == AX_DAG_CREATED;
		json_array_append_new(tpls, result_json(t->name, &res));
	}
	for (size_t i = 0; i < set->n_dags; i++) {
		ax_dag *d = set->dags[i];
		if ((rv = ax_dag_store_submit(q->st, d, "api", &res)) !=
		    AX_OK) {
			ax_api_reply_err(r, rv);
			goto out;
		}
		created |= res.outcome == AX_DAG_CREATED;
		json_array_append_new(dags, result_json(d->name, &res));
		if (res.outcome != AX_DAG_UNCHANGED)
			json_array_append_new(changed, json_string(d->name));
	}
	/* dag_store commits each submission in its own transaction; the
	 * command records what was stored and wakes axd to load the
	 * changed DAGs (none changed: nothing to apply) */
	body = json_pack("{s:s,s:O,s:O}", "file", file, "dags", dags,
	                 "templates", tpls);
	if (json_array_size(changed) > 0)
		payload =
		    json_pack("{s:s,s:O}", "op", "submit", "dags", changed);
	ax_api_cmd_commit(
	    q, r, "submit", body, payload, NULL, created ? 201 : 200,
	    json_pack("{s:O,s:O}", "dags", dags, "templates", tpls));
out:
	json_decref(body);
	json_decref(payload);
	json_decref(changed);
	json_decref(dags);
	json_decref(tpls);
	ax_dagset_free(set);
}

/* ---- read --------------------------------------------------------------- */

/*
 * GET /api/v1/dags: one page of DAGs in name order (cursor: the last
 * name of the previous page), filtered by q (a case-insensitive
 * substring of the name or the owner) and paused, with the total that
 * matches the filter, each DAG's next fire time and its `recent` newest
 * runs (id, state, logical date; 0 leaves them out). The recent runs are
 * one index range of dag_runs' (dag_id, logical_date) per row of the
 * page, never a scan: 10,000 DAGs cost what one page costs.
 */
void
ax_api_dags_list(ax_api_req *q, ax_api_resp *r)
{
	int64_t     limit, recent;
	int         paused = 0;
	char        lim[24], rec[24];
	PGresult   *res, *cnt;
	ax_err      rv;
	const char *cursor = ax_api_query(q, "cursor");
	const char *text   = ax_api_query(q, "q");

	if (!ax_api_query_int(q, r, "limit", 100, 1, 1000, &limit) ||
	    !ax_api_query_int(q, r, "recent", 10, 0, 25, &recent) ||
	    (ax_api_query(q, "paused") != NULL &&
	     !ax_api_query_bool(q, r, "paused", 0, &paused)))
		return;
	if (text != NULL && *text == '\0')
		text = NULL;
	snprintf(lim, sizeof(lim), "%" PRId64, limit);
	snprintf(rec, sizeof(rec), "%" PRId64, recent);
	const char *p[] = { cursor, lim, text,
		            ax_api_query(q, "paused") == NULL ? NULL
		                : paused                      ? "true"
		                                              : "false",
		            rec };
#define DAG_FILTER                                                            \
	"($3::text IS NULL OR strpos(lower(d.name), lower($3)) > 0 OR "       \
	"strpos(lower(coalesce(v.definition->>'owner', '')), lower($3)) > "   \
	"0) AND ($4::boolean IS NULL OR d.paused = $4) "
	rv = ax_store_query(
	    q->st,
	    "SELECT d.id, d.name, d.paused, v.version, v.content_hash, "
	    "v.definition->>'owner' AS owner, "
	    "v.definition->'schedule' AS schedule, "
	    "v.definition->'tags' AS tags, d.created_at, d.updated_at, "
	    "s.next_fire_at, CASE WHEN $5::int > 0 THEN (SELECT "
	    "coalesce(jsonb_agg(jsonb_build_object('id', x.id, 'state', "
	    "x.state, 'logical_date', to_char(x.logical_date AT TIME ZONE "
	    "'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')) ORDER BY "
	    "x.logical_date DESC), '[]') FROM (SELECT id, state, logical_date "
	    "FROM dag_runs WHERE dag_id = d.id ORDER BY logical_date DESC "
	    "LIMIT $5::int) x) END AS recent_runs "
	    "FROM dags d LEFT JOIN dag_versions v "
	    "ON v.id = d.active_version_id "
	    "LEFT JOIN schedules s ON s.dag_id = d.id "
	    "WHERE ($1::text IS NULL OR d.name > $1) AND " DAG_FILTER
	    "ORDER BY d.name LIMIT $2::int",
	    5, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
#undef DAG_FILTER
	rv = ax_store_query(
	    q->st,
	    "SELECT count(*) FROM dags d LEFT JOIN dag_versions v "
	    "ON v.id = d.active_version_id WHERE ($1::text IS NULL OR "
	    "strpos(lower(d.name), lower($1)) > 0 OR "
	    "strpos(lower(coalesce(v.definition->>'owner', '')), lower($1)) > "
	    "0) AND ($2::boolean IS NULL OR d.paused = $2)",
	    2, p + 2, &cnt);
	if (rv != AX_OK) {
		PQclear(res);
		ax_api_reply_err(r, rv);
		return;
	}
	int     n    = PQntuples(res);
	json_t *next = (n == limit) ? json_string(PQgetvalue(res, n - 1, 1))
	                            : json_null();
	json_t *rows = ax_api_rows_json(res);
	if (recent == 0)
		for (size_t i = 0; i < json_array_size(rows); i++)
			json_object_del(json_array_get(rows, i),
			                "recent_runs");
	ax_api_reply_json(
	    r, 200,
	    json_pack("{s:o,s:o,s:I}", "dags", rows, "next_cursor", next,
	              "total",
	              (json_int_t) strtoll(PQgetvalue(cnt, 0, 0), NULL, 10)));
	PQclear(res);
	PQclear(cnt);
}

void
ax_api_dag_show(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res;

	const char *p[] = { q->params[0] };
	res             = ax_api_query_row(
	                q, r,
	                "SELECT d.id, d.name, d.paused, v.version, v.id AS version_id, "
	                            "v.content_hash, v.source, v.definition, v.yaml, "
	                            "d.created_at, d.updated_at, v.created_at AS version_created_at, "
	                            "s.next_fire_at, s.last_fire_at "
	                            "FROM dags d LEFT JOIN dag_versions v "
	                            "ON v.id = d.active_version_id "
	                            "LEFT JOIN schedules s ON s.dag_id = d.id "
	                            "WHERE d.name = $1",
	                1, p, "no DAG named '%s'", q->params[0]);
	if (res == NULL)
		return;
	ax_api_reply_json(r, 200, ax_api_row_json(res, 0));
	PQclear(res);
}

/* Looks the DAG named by the path up: *id, *paused; 0 after a 404. */
static int
find_dag(ax_api_req *q, ax_api_resp *r, int64_t *id, int *paused)
{
	PGresult *res;

	const char *p[] = { q->params[0] };
	res =
	    ax_api_query_row(q, r,
	                     "SELECT id, paused, active_version_id FROM dags "
	                     "WHERE name = $1",
	                     1, p, "no DAG named '%s'", q->params[0]);
	if (res == NULL)
		return 0;
	*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (paused != NULL)
		*paused = PQgetvalue(res, 0, 1)[0] == 't';
	PQclear(res);
	return 1;
}

void
ax_api_dag_versions(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res;
	int64_t   id;
	char      ids[24];
	ax_err    rv;

	if (!find_dag(q, r, &id, NULL))
		return;
	snprintf(ids, sizeof(ids), "%" PRId64, id);
	const char *p[] = { ids };
	rv              = ax_store_query(
	                 q->st,
	                 "SELECT v.id, v.version, v.content_hash, v.source, v.created_at, "
	                              "(v.id = d.active_version_id) AS active "
	                              "FROM dag_versions v JOIN dags d ON d.id = v.dag_id "
	                              "WHERE v.dag_id = $1 ORDER BY v.version DESC",
	                 1, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	ax_api_reply_json(r, 200,
	                  json_pack("{s:s,s:o}", "dag", q->params[0],
	                            "versions", ax_api_rows_json(res)));
	PQclear(res);
}

/* ---- pause / unpause ---------------------------------------------------- */

static void
set_paused(ax_api_req *q, ax_api_resp *r, int paused)
{
	ax_err     rv;
	int64_t    id;
	json_t    *n, *b;
	ax_api_bad bad;

	const char *p[] = { q->params[0], paused ? "true" : "false" };
	if (!ax_api_body_none(q->body, q->body_len, &bad)) {
		ax_api_reply_bad(r, &bad);
		return;
	}
	if (ax_api_cmd_replay(q, r))
		return;
	if ((rv = ax_store_begin(q->st)) != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	rv = ax_store_query_int64(q->st,
	                          "UPDATE dags SET paused = $2::boolean, "
	                          "updated_at = now() WHERE name = $1 "
	                          "RETURNING id",
	                          2, p, &id);
	if (rv == AX_ENOENT) {
		ax_store_rollback(q->st);
		ax_api_reply_error(r, 404, "not_found", "no DAG named '%s'",
		                   q->params[0]);
		return;
	}
	if (rv != AX_OK) {
		ax_store_rollback(q->st);
		ax_api_reply_err(r, rv);
		return;
	}
	n = json_pack("{s:s,s:s}", "op", paused ? "paused" : "unpaused", "dag",
	              q->params[0]);
	b = json_pack("{s:s}", "dag", q->params[0]);
	ax_api_cmd_commit(q, r, paused ? "pause" : "unpause", b, n, NULL, 200,
	                  json_pack("{s:s,s:I,s:b}", "dag", q->params[0], "id",
	                            (json_int_t) id, "paused", paused));
	json_decref(n);
	json_decref(b);
}

void
ax_api_dag_pause(ax_api_req *q, ax_api_resp *r)
{
	set_paused(q, r, 1);
}

void
ax_api_dag_unpause(ax_api_req *q, ax_api_resp *r)
{
	set_paused(q, r, 0);
}

/* ---- trigger ------------------------------------------------------------ */

void
ax_api_dag_trigger(ax_api_req *q, ax_api_resp *r)
{
	ax_api_trigger_body t;
	ax_api_bad          bad;
	json_t             *params, *n;
	json_t             *cb;
	int64_t             id, ld, existing;
	int                 paused;
	char                ids[24], lds[24], buf[48];
	ax_err              rv;

	if (!ax_api_body_trigger(q->body, q->body_len, &t, &bad)) {
		ax_api_reply_bad(r, &bad);
		return;
	}
	if (ax_api_cmd_replay(q, r))
		goto out;
	params = t.params;
	ld     = t.has_logical_date ? t.logical_date_us : ax_clock_utc_us();
	if (!find_dag(q, r, &id, &paused) ||
	    !ax_api_cmd_check_params(q, r, q->params[0], NULL, params))
		goto out;
	snprintf(ids, sizeof(ids), "%" PRId64, id);
	snprintf(lds, sizeof(lds), "%" PRId64, ld);
	const char *p[] = { ids, lds };
	rv              = ax_store_query_int64(q->st,
	                                       "SELECT id FROM dag_runs WHERE dag_id = $1 "
	                                                    "AND logical_date = ax_ts($2::bigint)",
	                                       2, p, &existing);
	if (rv == AX_OK) {
		ax_api_reply_error(r, 409, "conflict",
		                   "run %" PRId64 " already has this logical "
		                   "date; clear its instances to run it again",
		                   existing);
		goto out;
	}
	if (rv != AX_ENOENT) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	/* the command fixes the logical date: applied twice, it would
	 * find its own run and create none */
	cb = json_pack("{s:s,s:I,s:o}", "dag", q->params[0], "logical_date_us",
	               (json_int_t) ld, "params",
	               params ? json_incref(params) : json_object());
	n  = cb ? json_copy(cb) : NULL;
	if (n != NULL)
		json_object_set_new(n, "op", json_string("trigger"));
	ax_tz_format(ax_tz_utc(), ld, buf, sizeof(buf));
	if (strlen(buf) > 6 && !strcmp(buf + strlen(buf) - 6, "+00:00"))
		strcpy(buf + strlen(buf) - 6, "Z");
	ax_api_cmd_commit(q, r, "trigger", cb, n, NULL, 202,
	                  json_pack("{s:s,s:s,s:I,s:b}", "dag", q->params[0],
	                            "logical_date", buf, "logical_date_us",
	                            (json_int_t) ld, "paused", paused));
	json_decref(n);
	json_decref(cb);
out:
	json_decref(t.json);
}

/* ---- backfill ----------------------------------------------------------- */

/* Builds the schedule of a stored definition; 0 after an answer. */
static int
schedule_of(json_t *def, ax_api_resp *r, ax_tz **tz, ax_schedule **out)
{
	json_t       *sc   = json_object_get(def, "schedule");
	const char   *kind = json_string_value(json_object_get(sc, "kind"));
	const char   *tzn = json_string_value(json_object_get(sc, "timezone"));
	const char   *st  = json_string_value(json_object_get(def, "start"));
	const char   *en  = json_string_value(json_object_get(def, "end"));
	ax_sched_spec spec = { 0 };
	ax_err        rv;

	*tz = NULL;
	if (kind == NULL || strcmp(kind, "none") == 0) {
		ax_api_reply_error(r, 400, "invalid",
		                   "the DAG has no schedule, so no periods to "
		                   "backfill; use trigger");
		return 0;
	}
	if ((rv = ax_tz_load(tzn ? tzn : "UTC", tz)) != AX_OK)
		goto bad;
	spec.tz       = *tz;
	spec.start_us = AX_SCHED_NO_START;
	spec.end_us   = AX_SCHED_NO_END;
	if (st != NULL && (rv = ax_tz_parse_iso8601(st, *tz, &spec.start_us)))
		goto bad;
	if (en != NULL && (rv = ax_tz_parse_iso8601(en, *tz, &spec.end_us)))
		goto bad;
	if (strcmp(kind, "cron") == 0) {
		spec.kind = AX_SCHED_CRON;
		spec.cron = json_string_value(json_object_get(sc, "cron"));
	} else if (strcmp(kind, "every") == 0) {
		spec.kind = AX_SCHED_EVERY;
		rv        = ax_duration_parse(
		           json_string_value(json_object_get(sc, "every")),
		           &spec.every_us);
		if (rv != AX_OK)
			goto bad;
	} else {
		spec.kind = AX_SCHED_AT;
		rv        = ax_tz_parse_iso8601(
		           json_string_value(json_object_get(sc, "at")), *tz,
		           &spec.at_us);
		if (rv != AX_OK)
			goto bad;
	}
	if ((rv = ax_schedule_new(&spec, out, NULL)) == AX_OK)
		return 1;
bad:
	ax_tz_free(*tz);
	*tz = NULL;
	ax_api_reply_err(r, rv);
	return 0;
}

/* Collects the periods whose logical date is in [from, to]. */
static int
collect_periods(ax_schedule *s, int64_t from, int64_t to, ax_period *out,
                size_t *n, ax_api_resp *r)
{
	ax_period chunk[128];
	int64_t   after = from == INT64_MIN ? from : from - 1;
	size_t    got;
	int       more = 1;
	ax_err    rv;

	*n = 0;
	while (more) {
		rv = ax_schedule_periods(s, after, INT64_MAX, chunk, 128, &got,
		                         &more);
		if (rv != AX_OK) {
			ax_api_reply_err(r, rv);
			return 0;
		}
		if (got == 0)
			break;
		for (size_t i = 0; i < got; i++) {
			if (chunk[i].logical_us > to)
				return 1;
			if (chunk[i].logical_us < from)
				continue;
			if (*n == AX_API_BACKFILL_MAX) {
				ax_api_reply_error(
				    r, 400, "invalid",
				    "the range holds more than %d periods; "
				    "split it into smaller backfills",
				    AX_API_BACKFILL_MAX);
				return 0;
			}
			out[(*n)++] = chunk[i];
		}
		after = chunk[got - 1].end_us;
	}
	return 1;
}

/* Appends "{a,b,c}" of one field of periods to buf. */
static char *
array_text(const ax_period *p, size_t n, int which)
{
	char *buf = malloc(n * 22 + 3), *w = buf;
	if (buf == NULL)
		return NULL;
	*w++ = '{';
	for (size_t i = 0; i < n; i++) {
		int64_t v = which == 0 ? p[i].logical_us
		    : which == 1       ? p[i].start_us
		                       : p[i].end_us;
		w += sprintf(w, "%s%" PRId64, i ? "," : "", v);
	}
	*w++ = '}';
	*w   = '\0';
	return buf;
}

/* Inserts the runs in a transaction it leaves open on success (the
 * command row joins it); *ids receives their ids. */
static ax_err
insert_runs(ax_api_req *q, const char *dag_id, const char *ver_id,
            const ax_period *p, size_t n, json_t *conf, PGresult **res,
            json_t *ids)
{
	char  *a[3] = { array_text(p, n, 0), array_text(p, n, 1),
		        array_text(p, n, 2) };
	char  *cj   = json_dumps(conf, JSON_COMPACT);
	ax_err rv   = AX_ENOMEM;

	*res = NULL;
	if (!a[0] || !a[1] || !a[2] || !cj) {
		ax_err_set(AX_ENOMEM, "backfill arrays");
		goto out;
	}
	const char *params[] = { dag_id, ver_id, a[0], a[1], a[2], cj };
	if ((rv = ax_store_begin(q->st)) != AX_OK)
		goto out;
	rv = ax_store_query(
	    q->st,
	    "INSERT INTO dag_runs (dag_id, dag_version_id, run_type, "
	    "logical_date, interval_start, interval_end, conf) "
	    "SELECT $1::bigint, $2::bigint, 'backfill', ax_ts(l), ax_ts(s), "
	    "ax_ts(e), $6::jsonb FROM unnest($3::bigint[], $4::bigint[], "
	    "$5::bigint[]) AS t(l, s, e) "
	    "ON CONFLICT (dag_id, logical_date) DO NOTHING "
	    "RETURNING id, logical_date",
	    6, params, res);
	for (int i = 0; rv == AX_OK && i < PQntuples(*res); i++)
		json_array_append_new(
		    ids,
		    json_integer(strtoll(PQgetvalue(*res, i, 0), NULL, 10)));
	if (rv != AX_OK) {
		ax_store_rollback(q->st);
		PQclear(*res);
		*res = NULL;
	}
out:
	free(a[0]);
	free(a[1]);
	free(a[2]);
	free(cj);
	return rv;
}

void
ax_api_dag_backfill(ax_api_req *q, ax_api_resp *r)
{
	ax_api_backfill_body b;
	ax_api_bad           bad;
	json_t              *def = NULL, *conf = NULL;
	json_t              *params, *cb = NULL, *nt = NULL, *applied = NULL;
	json_t              *ids = json_array();
	const char          *mode;
	int64_t              from, to;
	ax_tz               *tz    = NULL;
	ax_schedule         *sched = NULL;
	ax_period           *per   = NULL;
	size_t               n     = 0;
	PGresult            *res = NULL, *ins = NULL;
	ax_err               rv;

	if (!ax_api_body_backfill(q->body, q->body_len, &b, &bad)) {
		ax_api_reply_bad(r, &bad);
		json_decref(ids);
		return;
	}
	if (ax_api_cmd_replay(q, r))
		goto out;
	mode            = b.mode;
	params          = b.params;
	from            = b.start_us;
	to              = b.end_us;
	const char *p[] = { q->params[0] };
	rv =
	    ax_store_query(q->st,
	                   "SELECT d.id, v.id, v.definition FROM dags d "
	                   "JOIN dag_versions v ON v.id = d.active_version_id "
	                   "WHERE d.name = $1",
	                   1, p, &res);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	if (PQntuples(res) == 0) {
		ax_api_reply_error(r, 404, "not_found", "no DAG named '%s'",
		                   q->params[0]);
		goto out;
	}
	if (!ax_api_cmd_check_params(q, r, q->params[0], PQgetvalue(res, 0, 2),
	                             params))
		goto out;
	def = json_loads(PQgetvalue(res, 0, 2), 0, NULL);
	if (!schedule_of(def, r, &tz, &sched))
		goto out;
	per = malloc(sizeof(*per) * AX_API_BACKFILL_MAX);
	if (per == NULL) {
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "periods"));
		goto out;
	}
	if (!collect_periods(sched, from, to, per, &n, r))
		goto out;
	if (n == 0) {
		ax_api_reply_error(r, 400, "invalid",
		                   "no period of the schedule has its logical "
		                   "date in [start, end]");
		goto out;
	}
	conf = json_pack("{s:s,s:o}", "backfill_mode", mode, "params",
	                 params ? json_incref(params) : json_object());
	rv = insert_runs(q, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), per,
	                 n, conf, &ins, ids);
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	cb = json_pack("{s:s,s:s,s:O,s:O,s:O}", "dag", q->params[0], "mode",
	               mode, "start", b.start, "end", b.end, "run_ids", ids);
	if (json_array_size(ids) > 0)
		nt = json_pack("{s:s,s:s,s:s,s:O}", "op", "backfill", "dag",
		               q->params[0], "mode", mode, "run_ids", ids);
	else /* every period had a run: nothing for axd to do */
		applied = json_pack("{s:[]}", "run_ids");
	ax_api_cmd_commit(q, r, "backfill", cb, nt, applied, 201,
	                  json_pack("{s:s,s:s,s:i,s:i,s:o}", "dag",
	                            q->params[0], "mode", mode, "created",
	                            PQntuples(ins), "skipped",
	                            (int) n - PQntuples(ins), "runs",
	                            ax_api_rows_json(ins)));
out:
	json_decref(cb);
	json_decref(nt);
	json_decref(applied);
	json_decref(ids);
	PQclear(ins);
	PQclear(res);
	free(per);
	ax_schedule_free(sched);
	ax_tz_free(tz);
	json_decref(conf);
	json_decref(def);
	json_decref(b.json);
}
