/*
 * api_tokens.c - token routes of ax-api (see api_tokens.h).
 *
 * A created token is in its answer and nowhere else: nothing logs or
 * stores it (only its hash), and it is no control command, whose first
 * answer control_command would keep for Idempotency-Key replays. Token
 * changes are not control commands: axd has nothing to do for
 * them, since every request reads api_tokens afresh; the token.created
 * and token.revoked events carry who made the change instead.
 */
#include "api_tokens.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_token.h"

/* The caller of q as the token module records it. */
static void
caller_of(const ax_api_req *q, ax_api_caller *c)
{
	memset(c, 0, sizeof(*c));
	c->token_id = q->token_id;
	c->role     = q->role;
	snprintf(c->name, sizeof(c->name), "%s", q->token_name);
}

/*
 * A ttl as integer seconds or text "<n>s|m|h|d|w" into *secs; 1 when
 * fine, 0 after a 400 naming the field.
 */
static int
parse_ttl(json_t *v, ax_api_resp *r, int64_t *secs)
{
	char num[24];

	if (json_is_integer(v)) {
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
		         json_integer_value(v));
		if (json_integer_value(v) > 0 &&
		    ax_api_token_parse_ttl(num, secs) == AX_OK)
			return 1;
	} else if (json_is_string(v) &&
	           ax_api_token_parse_ttl(json_string_value(v), secs) ==
	               AX_OK) {
		return 1;
	}
	ax_api_reply_error(r, 400, "invalid",
	                   "'ttl' must be seconds or a number with a unit "
	                   "s, m, h, d or w (e.g. \"90d\"), from 1 s to 10 "
	                   "years");
	return 0;
}

void
ax_api_tokens_create(ax_api_req *q, ax_api_resp *r)
{
	static const char *const fields[] = { "name", "role", "expires_at",
		                              "ttl", NULL };
	char                     tok[AX_API_TOKEN_LEN];
	ax_api_caller            by;
	ax_api_token_new         n   = { 0 };
	json_t                  *b   = ax_api_body_object(q, r), *v, *row;
	PGresult                *res = NULL;
	int64_t                  id;
	ax_err                   rv;

	if (b == NULL || !ax_api_only_fields(b, fields, r))
		goto out;
	v = json_object_get(b, "name");
	if (!json_is_string(v)) {
		ax_api_reply_error(r, 400, "invalid",
		                   "'name' is required: a string naming who "
		                   "uses the token (e.g. \"ci-deploy\")");
		goto out;
	}
	n.name = json_string_value(v);
	if (ax_api_token_name_check(n.name) != AX_OK) {
		ax_api_reply_error(r, 400, "invalid", "'name': %s",
		                   ax_err_detail());
		goto out;
	}
	v = json_object_get(b, "role");
	if (!json_is_string(v) ||
	    ax_api_role_parse(json_string_value(v), &n.role) != AX_OK) {
		ax_api_reply_error(r, 400, "invalid",
		                   "'role' is required: viewer, operator or "
		                   "admin");
		goto out;
	}
	if ((v = json_object_get(b, "expires_at")) != NULL &&
	    !json_is_null(v) &&
	    !ax_api_parse_instant(v, "expires_at", r, &n.expires_us))
		goto out;
	if ((v = json_object_get(b, "ttl")) != NULL && !json_is_null(v) &&
	    !parse_ttl(v, r, &n.ttl_s))
		goto out;
	if (n.ttl_s > 0 && json_object_get(b, "expires_at") != NULL &&
	    !json_is_null(json_object_get(b, "expires_at"))) {
		ax_api_reply_error(r, 400, "invalid",
		                   "give either 'expires_at' or 'ttl', not "
		                   "both");
		goto out;
	}
	if (json_object_get(b, "expires_at") != NULL && n.expires_us <= 0 &&
	    !json_is_null(json_object_get(b, "expires_at"))) {
		ax_api_reply_error(r, 400, "invalid",
		                   "'expires_at' must be after 1970");
		goto out;
	}
	caller_of(q, &by);
	n.by = &by;
	if ((rv = ax_api_token_mint(q->st, &n, tok, &id)) != AX_OK ||
	    (rv = ax_api_token_get(q->st, id, &res)) != AX_OK) {
		ax_api_reply_err(r, rv);
		goto out;
	}
	row = PQntuples(res) == 1 ? ax_api_row_json(res, 0) : NULL;
	if (row == NULL || json_object_set_new(row, "token", json_string(tok)))
		ax_api_reply_err(r, ax_err_set(AX_ENOMEM, "token answer"));
	else
		ax_api_reply_json(r, 201, json_incref(row));
	json_decref(row);
out:
	memset(tok, 0, sizeof(tok));
	PQclear(res);
	json_decref(b);
}

void
ax_api_tokens_list(ax_api_req *q, ax_api_resp *r)
{
	PGresult *res = NULL;
	ax_err    rv;

	if ((rv = ax_api_token_list(q->st, &res)) != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	ax_api_reply_json(r, 200,
	                  json_pack("{s:o}", "tokens", ax_api_rows_json(res)));
	PQclear(res);
}

void
ax_api_tokens_revoke(ax_api_req *q, ax_api_resp *r)
{
	ax_api_caller by;
	PGresult     *res = NULL;
	int64_t       id;
	ax_err        rv;

	/* the server checked {id} (ax_api_check_path_params) and that no
	 * body came (DELETE) before calling this */
	if (!ax_api_parse_id(q->params[0], &id)) {
		ax_api_reply_error(r, 400, "invalid",
		                   "token id must be a positive integer (see "
		                   "GET /api/v1/tokens)");
		return;
	}
	caller_of(q, &by);
	if ((rv = ax_api_token_revoke(q->st, id, &by, &res)) != AX_OK) {
		ax_api_reply_err(r, rv);
		return;
	}
	ax_api_reply_json(r, 200, ax_api_row_json(res, 0));
	PQclear(res);
}
