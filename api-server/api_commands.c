/*
 * api_commands.c - control_command rows of ax-api requests, Idempotency-Key
 * replays, GET /api/v1/commands/{id}, and the check of trigger and
 * backfill params against the DAG's declarations (see api_commands.h).
 */
#include "api_commands.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_params.h"
#include "engine/control.h"
#include "sha256.h"
#include "store_commands.h"

#define IDEM_MAX 255

/* The Idempotency-Key header, or NULL. */
static const char *
idem_key(const ax_api_req *q)
{
	if (q->conn == NULL)
		return NULL;
	return MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND,
	                                   AX_API_IDEM_HEADER);
}

/* 1 when the key is 1..255 printable ASCII characters. */
static int
idem_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > IDEM_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (k[i] < 0x21 || k[i] > 0x7e)
			return 0;
	return 1;
}

static enum MHD_Result
hash_arg(void *cls, enum MHD_ValueKind kind, const char *key,
         const char *value)
{
	ax_sha256 *h = cls;

	(void) kind;
	ax_sha256_update(h, key, strlen(key));
	ax_sha256_update(h, "=", 1);
	if (value != NULL)
		ax_sha256_update(h, value, strlen(value));
	ax_sha256_update(h, "&", 1);
	return MHD_YES;
}

/* The hash of what makes two requests the same one. */
static void
request_hash(const ax_api_req *q, char hex[AX_SHA256_HEX_LEN])
{
	static const char digits[] = "0123456789abcdef";
	uint8_t           out[AX_SHA256_LEN];
	ax_sha256         h;

	ax_sha256_init(&h);
	ax_sha256_update(&h, q->method, strlen(q->method));
	ax_sha256_update(&h, "\n", 1);
	ax_sha256_update(&h, q->path, strlen(q->path));
	ax_sha256_update(&h, "\n", 1);
	if (q->conn != NULL)
		MHD_get_connection_values(q->conn, MHD_GET_ARGUMENT_KIND,
		                          hash_arg, &h);
	ax_sha256_update(&h, "\n", 1);
	ax_sha256_update(&h, q->body, q->body_len);
	ax_sha256_final(&h, out);
	for (size_t i = 0; i < AX_SHA256_LEN; i++) {
		hex[2 * i]     = digits[out[i] >> 4];
		hex[2 * i + 1] = digits[out[i] & 15];
	}
	hex[2 * AX_SHA256_LEN] = '\0';
}

int
ax_api_cmd_replay(ax_api_req *q, ax_api_resp *r)
{
	const char *key = idem_key(q);
	char        hex[AX_SHA256_HEX_LEN];
	PGresult   *res = NULL;
	ax_err      rv;

	if (key == NULL)
		return 0;
	if (!idem_ok(key)) {
		ax_api_reply_error(r, 400, "invalid",
		                   "header %s must be 1 to %d printable ASCII "
		                   "characters (e.g. a UUID)",
		                   AX_API_IDEM_HEADER, IDEM_MAX);
		return 1;
	}
	if ((rv = ax_store_commands_find_key(q->st, q->token_id, key, &res)) !=
	    AX_OK) {
		ax_api_reply_err(r, rv);
		return 1;
	}
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	request_hash(q, hex);
	const char *sha  = ax_store_cell(res, 0, AX_CMD_K_SHA);
	const char *resp = ax_store_cell(res, 0, AX_CMD_K_RESPONSE);
	if (sha == NULL || strcmp(sha, hex) != 0) {
		ax_api_reply_error(
		    r, 422, "idempotency_key_reused",
		    "%s '%s' was used for another request (command %" PRId64
		    "); send a new key for a new request",
		    AX_API_IDEM_HEADER, key,
		    ax_store_cell_i64(res, 0, AX_CMD_K_ID));
	} else if (resp == NULL) {
		ax_api_reply_error(r, 409, "conflict",
		                   "the request with %s '%s' has no answer "
		                   "recorded; send a new key",
		                   AX_API_IDEM_HEADER, key);
	} else {
		json_t *j = json_loads(resp, 0, NULL);
		ax_api_reply_json(
		    r,
		    (unsigned) ax_store_cell_i64(res, 0, AX_CMD_K_RESP_STATUS),
		    j);
	}
	PQclear(res);
	return 1;
}

/* Sends payload + command_id (only the op and the id when it is too
 * large: the row is the truth). */
static ax_err
notify(ax_store *st, json_t *payload, int64_t id)
{
	json_t *p = json_copy(payload);
	char   *text;
	ax_err  rv;

	if (p == NULL ||
	    json_object_set_new(p, "command_id", json_integer(id)))
		goto oom;
	text = json_dumps(p, JSON_COMPACT);
	if (text != NULL && strlen(text) > AX_CONTROL_PAYLOAD_MAX) {
		free(text);
		json_t *small =
		    json_pack("{s:O,s:I}", "op", json_object_get(p, "op"),
		              "command_id", (json_int_t) id);
		text = small ? json_dumps(small, JSON_COMPACT) : NULL;
		json_decref(small);
	}
	json_decref(p);
	if (text == NULL)
		return ax_err_set(AX_ENOMEM, "control payload");
	rv = ax_control_notify(st, text);
	free(text);
	return rv;
oom:
	json_decref(p);
	return ax_err_set(AX_ENOMEM, "control payload");
}

/* The statements of ax_api_cmd_commit before COMMIT. */
static ax_err
record(ax_api_req *q, const char *kind, json_t *body, json_t *payload,
       json_t *applied, unsigned status, json_t *answer)
{
	char             hex[AX_SHA256_HEX_LEN];
	char            *btext = json_dumps(body, JSON_COMPACT);
	char            *atext = NULL, *rtext = NULL;
	ax_store_cmd_new c = { .kind       = kind,
		               .body_json  = btext,
		               .token_id   = q->token_id,
		               .token_name = q->token_name,
		               .token_role = q->role != AX_API_ROLE_NONE
		                   ? ax_api_role_name(q->role)
		                   : NULL,
		               .actor      = "ax-api",
		               .idem_key   = idem_key(q) };
	int64_t          id;
	ax_err           rv;

	if (btext == NULL)
		return ax_err_set(AX_ENOMEM, "command body");
	request_hash(q, hex);
	c.request_sha256 = hex;
	if ((rv = ax_store_commands_insert(q->st, &c, &id)) != AX_OK)
		goto out;
	if (json_object_set_new(answer, "command_id", json_integer(id)) != 0 ||
	    (atext = json_dumps(answer, JSON_COMPACT)) == NULL) {
		rv = ax_err_set(AX_ENOMEM, "answer");
		goto out;
	}
	if ((rv = ax_store_commands_set_response(q->st, id, (int) status,
	                                         atext)) != AX_OK)
		goto out;
	if (payload != NULL) {
		rv = notify(q->st, payload, id);
	} else {
		/* nothing for axd to do: recorded as applied now */
		ax_store_cmd_done d = { .id = id, .status = AX_CMD_APPLIED };
		rtext = applied ? json_dumps(applied, JSON_COMPACT) : NULL;
		d.result_json = rtext;
		rv            = ax_store_commands_finish(q->st, &d, 1, NULL);
	}
out:
	free(btext);
	free(atext);
	free(rtext);
	return rv;
}

void
ax_api_cmd_commit(ax_api_req *q, ax_api_resp *r, const char *kind,
                  json_t *body, json_t *payload, json_t *applied,
                  unsigned status, json_t *answer)
{
	ax_err rv;

	if (answer == NULL || body == NULL) {
		ax_store_rollback(q->st);
		json_decref(answer);
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "answer"));
		return;
	}
	if (!ax_store_in_tx(q->st) && (rv = ax_store_begin(q->st)) != AX_OK)
		goto fail;
	rv = record(q, kind, body, payload, applied, status, answer);
	if (rv == AX_OK)
		rv = ax_store_commit(q->st);
	if (rv == AX_OK) {
		ax_api_reply_json(r, status, answer);
		return;
	}
fail:
	ax_store_rollback(q->st);
	json_decref(answer);
	/* a concurrent request with the same key committed first */
	if (rv == AX_EEXIST && idem_key(q) != NULL && ax_api_cmd_replay(q, r))
		return;
	ax_api_reply_err(r, rv);
}

void
ax_api_command_show(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res = NULL;
	char     *end;
	long long v;
	ax_err    rv;

	errno = 0;
	v     = strtoll(q->params[0], &end, 10);
	if (*q->params[0] == '\0' || *end != '\0' || errno != 0 || v <= 0) {
		ax_api_reply_error(
		    r, 400, "invalid",
		    "command id must be a positive integer, got "
		    "'%s'",
		    q->params[0]);
		return;
	}
	if ((rv = ax_store_commands_get(q->st, v, &res)) != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	if (PQntuples(res) == 0) {
		PQclear(res);
		ax_api_reply_error(r, 404, "not_found", "no command %lld", v);
		return;
	}
	ax_api_reply_json(r, 200, ax_api_row_json(res, 0));
	PQclear(res);
}

/* ---- params of trigger and backfill ------------------------------------ */

/* The names a DAG declares, as a JSON array. */
static json_t *
declared_names(const ax_dag *d)
{
	const char *names[256];
	size_t      n = ax_dag_param_names(d, names, 256);
	json_t     *a = json_array();
	for (size_t i = 0; a && i < n && i < 256; i++)
		json_array_append_new(a, json_string(names[i]));
	return a;
}

int
ax_api_cmd_check_params(ax_api_req *q, ax_api_resp *r, const char *dag,
                        const char *definition, const json_t *params)
{
	PGresult   *res = NULL;
	json_t     *j   = NULL;
	ax_dagset  *set = NULL;
	ax_dag     *d   = NULL;
	const char *bad = NULL;
	char        msg[768];
	int         ok = 0;
	ax_err      rv;

	if (params == NULL ||
	    (json_is_object(params) && json_object_size(params) == 0))
		return 1; /* nothing to check: no definition read */
	if (definition == NULL) {
		const char *p[] = { dag };
		rv              = ax_store_query(q->st,
		                                 "SELECT v.definition FROM dags d JOIN "
		                                              "dag_versions v ON v.id = "
		                                              "d.active_version_id WHERE d.name = $1",
		                                 1, p, &res);
		if (rv != AX_OK) {
			ax_api_reply_err(r, rv);
			return 0;
		}
		if (PQntuples(res) == 0) {
			ax_api_reply_error(r, 404, "not_found",
			                   "no DAG named '%s'", dag);
			goto out;
		}
		definition = PQgetvalue(res, 0, 0);
	}
	if ((j = json_loads(definition, 0, NULL)) == NULL ||
	    ax_dagset_new(NULL, &set) != AX_OK ||
	    ax_dag_from_json(set, j, &d) != AX_OK) {
		ax_api_reply_error(r, 500, "internal",
		                   "the definition of DAG '%s' cannot be read",
		                   dag);
		goto out;
	}
	if (ax_dag_params_check(d, params, msg, sizeof(msg), &bad) == AX_OK) {
		ok = 1;
		goto out;
	}
	json_t *e = ax_api_reply_error(r, 422, "invalid_params", "%s", msg);
	if (e != NULL) {
		json_object_set_new(e, "param",
		                    bad ? json_string(bad) : json_null());
		json_object_set_new(e, "declared", declared_names(d));
	}
out:
	ax_dagset_free(set);
	json_decref(j);
	PQclear(res);
	return ok;
}
