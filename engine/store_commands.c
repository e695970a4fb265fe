/*
 * store_commands.c - SQL of the control_command table (see
 * store_commands.h).
 */
#include "store_commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

static const char *const kinds[] = { "submit", "trigger", "backfill",
	                             "pause",  "unpause", "kill",
	                             "clear",  "mark",    NULL };

const char *
ax_cmd_status_name(ax_cmd_status st)
{
	switch (st) {
	case AX_CMD_APPLIED:
		return "applied";
	case AX_CMD_REJECTED:
		return "rejected";
	default:
		return "pending";
	}
}

int
ax_cmd_kind_valid(const char *kind)
{
	for (size_t i = 0; kind != NULL && kinds[i] != NULL; i++)
		if (strcmp(kinds[i], kind) == 0)
			return 1;
	return 0;
}

ax_err
ax_store_commands_insert(ax_store *s, const ax_store_cmd_new *c, int64_t *id)
{
	static const char sql[] =
	    "INSERT INTO control_command (kind, body, token_id, actor, "
	    "idempotency_key, request_sha256, token_name, token_role) "
	    "VALUES ($1, $2::jsonb, nullif($3::bigint, 0), $4, $5, $6, "
	    "nullif($7, ''), $8) RETURNING id";
	char        tok[24];
	const char *p[8];
	const char *body = c->body_json ? c->body_json : "{}";
	ax_err      rv;

	*id = 0;
	if (!ax_cmd_kind_valid(c->kind))
		return ax_err_set(AX_EINVAL,
		                  "control command kind '%s' is not one of "
		                  "submit, trigger, backfill, pause, unpause, "
		                  "kill, clear, mark",
		                  c->kind ? c->kind : "(null)");
	while (*body == ' ' || *body == '\n' || *body == '\t')
		body++;
	if (*body != '{')
		return ax_err_set(
		    AX_EINVAL, "control command body must be a JSON object");
	snprintf(tok, sizeof(tok), "%" PRId64, c->token_id);
	p[0] = c->kind;
	p[1] = body;
	p[2] = tok;
	p[3] = c->actor;
	p[4] = c->idem_key;
	p[5] = c->request_sha256;
	p[6] = c->token_name;
	p[7] = c->token_role;
	if ((rv = ax_store_prepare_once(s, "ax_cmd_insert", sql, 8)) != AX_OK)
		return rv;
	PGresult *res = NULL;
	rv            = ax_store_write(s, "ax_cmd_insert", NULL, 8, p, &res);
	if (rv == AX_EEXIST)
		return ax_err_set(AX_EEXIST,
		                  "a command with Idempotency-Key '%s' exists "
		                  "already for this token",
		                  c->idem_key ? c->idem_key : "");
	if (rv != AX_OK)
		return rv;
	if (PQntuples(res) == 1)
		*id = ax_store_cell_i64(res, 0, 0);
	PQclear(res);
	return *id > 0 ? AX_OK
	               : ax_err_set(AX_EINTERNAL, "command insert: no id");
}

ax_err
ax_store_commands_set_response(ax_store *s, int64_t id, int status,
                               const char *response_json)
{
	char        ids[24], sts[16];
	const char *p[3] = { ids, sts, response_json };

	snprintf(ids, sizeof(ids), "%" PRId64, id);
	snprintf(sts, sizeof(sts), "%d", status);
	return ax_store_write(s, NULL,
	                      "UPDATE control_command SET response_status = "
	                      "$2::int, response = $3::jsonb WHERE id = "
	                      "$1::bigint",
	                      3, p, NULL);
}

ax_err
ax_store_commands_find_key(ax_store *s, int64_t token_id, const char *key,
                           PGresult **res)
{
	char        tok[24];
	const char *p[2] = { tok, key };

	snprintf(tok, sizeof(tok), "%" PRId64, token_id);
	return ax_store_query(
	    s,
	    "SELECT id, request_sha256, response_status, response::text "
	    "FROM control_command WHERE coalesce(token_id, 0) = $1::bigint "
	    "AND idempotency_key = $2",
	    2, p, res);
}

ax_err
ax_store_commands_get(ax_store *s, int64_t id, PGresult **res)
{
	char        ids[24];
	const char *p[1] = { ids };

	snprintf(ids, sizeof(ids), "%" PRId64, id);
	return ax_store_query(
	    s,
	    "SELECT id, kind, status, body, result, reason, actor, token_id, "
	    "token_name, token_role, idempotency_key, created_at, applied_at, "
	    "applied_epoch "
	    "FROM control_command WHERE id = $1::bigint",
	    1, p, res);
}

ax_err
ax_store_commands_pending(ax_store *s, int64_t after_id, int limit,
                          PGresult **res)
{
	static const char sql[] =
	    "SELECT id, kind, body::text FROM control_command "
	    "WHERE status = 'pending' AND id > $1::bigint "
	    "ORDER BY id LIMIT $2::int";
	char        after[24], lim[16];
	const char *p[2] = { after, lim };
	ax_err      rv;

	snprintf(after, sizeof(after), "%" PRId64, after_id);
	snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 1);
	if ((rv = ax_store_prepare_once(s, "ax_cmd_pending", sql, 2)) != AX_OK)
		return rv;
	return ax_store_query_prepared(s, "ax_cmd_pending", 2, p, res);
}

ax_err
ax_store_commands_finish(ax_store *s, ax_store_cmd_done *rows, size_t n,
                         size_t *nclaimed)
{
	static const char sql[] =
	    "WITH done AS (UPDATE control_command c SET status = u.st, "
	    "result = u.res::jsonb, reason = u.why, applied_at = now(), "
	    "applied_epoch = nullif($5::bigint, 0) "
	    "FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) "
	    "AS u(id, st, res, why) "
	    "WHERE c.id = u.id AND c.status = 'pending' RETURNING c.*), "
	    /* the audit trail: one event per settled command, naming the
	     * caller, in the transaction of the effect; the instance it
	     * names may be in history (a clear or kill of an old one) */
	    "ev AS (INSERT INTO event_log (event_id, type, dag_id, "
	    "dag_run_id, instance_id, reason, payload) "
	    "SELECT gen_random_uuid(), 'command.' || x.status, "
	    "coalesce(ti.dag_id, d.id), coalesce(CASE WHEN "
	    "x.result->>'run_id' "
	    "~ '^[0-9]{1,18}$' THEN (x.result->>'run_id')::bigint END, "
	    "ti.dag_run_id), ti.id, upper(x.kind), jsonb_build_object("
	    "'command_id', x.id, 'kind', x.kind, 'token_id', x.token_id, "
	    "'token_name', x.token_name, 'token_role', x.token_role, "
	    "'requested_at', to_char(x.created_at AT TIME ZONE 'UTC', "
	    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), 'body', x.body, "
	    "'result', x.result, 'reason', x.reason) "
	    "FROM done x "
	    "LEFT JOIN dags d ON d.name = coalesce(x.body->>'dag', "
	    "CASE WHEN jsonb_typeof(x.body->'dags') = 'array' AND "
	    "jsonb_array_length(x.body->'dags') = 1 THEN x.body->'dags'->>0 "
	    "END) "
	    "LEFT JOIN task_instances_all ti ON ti.id = CASE WHEN "
	    "x.body->>'instance_id' ~ '^[0-9]{1,18}$' THEN "
	    "(x.body->>'instance_id')::bigint END) "
	    "SELECT id FROM done";
	ax_sqlarr   a[4] = { 0 };
	const char *p[5];
	char        epoch[24];
	PGresult   *res = NULL;
	ax_err      rv;

	if (nclaimed != NULL)
		*nclaimed = 0;
	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "command finish");
	for (size_t i = 0; i < n; i++) {
		ax_store_cmd_done *r = &rows[i];
		r->claimed           = 0;
		if (r->status != AX_CMD_APPLIED &&
		    r->status != AX_CMD_REJECTED)
			rv = ax_err_set(AX_EINVAL,
			                "command %" PRId64 ": an outcome is "
			                "applied or rejected",
			                r->id);
		else if (r->status == AX_CMD_REJECTED &&
		         (r->reason == NULL || r->reason[0] == '\0'))
			rv = ax_err_set(AX_EINVAL,
			                "command %" PRId64
			                ": a rejection needs a reason",
			                r->id);
		else
			rv = AX_OK;
		if (rv != AX_OK) {
			ax_sqlarr_fini_all(a, 4);
			return rv;
		}
		ax_sqlarr_int(&a[0], r->id);
		ax_sqlarr_text(&a[1], ax_cmd_status_name(r->status));
		ax_sqlarr_text(&a[2], r->result_json);
		ax_sqlarr_text(&a[3], r->reason);
	}
	snprintf(epoch, sizeof(epoch), "%" PRId64, ax_store_fence(s));
	p[4] = epoch;
	if ((rv = ax_sqlarr_end_all(a, p, 4)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, "ax_cmd_finish", sql, 5)) == AX_OK)
		rv = ax_store_write(s, "ax_cmd_finish", NULL, 5, p, &res);
	ax_sqlarr_fini_all(a, 4);
	if (rv != AX_OK)
		return rv;
	for (int k = 0; k < PQntuples(res); k++) {
		int64_t id = ax_store_cell_i64(res, k, 0);
		for (size_t i = 0; i < n; i++)
			if (rows[i].id == id && !rows[i].claimed) {
				rows[i].claimed = 1;
				break;
			}
	}
	if (nclaimed != NULL)
		*nclaimed = (size_t) PQntuples(res);
	PQclear(res);
	return AX_OK;
}
