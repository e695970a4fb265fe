/*
 * cmd_token.c - `axctl token create|list|revoke`: bearer tokens of ax-api.
 *
 * Role: by default each subcommand goes through a running ax-api (the
 * admin routes /api/v1/tokens, api_client.h), so the change is made and
 * audited by the server with the caller's token. With --home or --dsn it
 * works on the database directly instead (engine/api_token.h): the way
 * to make the first admin token, or to revoke one when no admin token is
 * left; the audit event then says "via": "database".
 *
 * A created token is printed once on stdout (with --json: in the JSON);
 * only its SHA-256 is stored, so it cannot be shown again.
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#include "cmd_token.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api_cmd.h"
#include "api_http.h"
#include "api_token.h"
#include "cmd_db.h"
#include "store.h"
#include "table.h"
#include "tz.h"

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl token create --name NAME --role "
	    "viewer|operator|admin\n"
	    "                          [--ttl 90d | --expires-at ISO]\n"
	    "       axctl token list\n"
	    "       axctl token revoke ID\n"
	    "       (all with [--server URL] [--token-file FILE] [--json],\n"
	    "        or with [--home DIR] [--dsn DSN] instead)\n"
	    "\n"
	    "Bearer tokens of ax-api, through a running ax-api with an\n"
	    "admin token:\n"
	    "  create  prints a new token on stdout. It is shown once: only\n"
	    "          its SHA-256 is stored. Send it as\n"
	    "          `Authorization: Bearer TOKEN`. NAME (letters, digits,\n"
	    "          . _ - @ :) is unique among live tokens and names the\n"
	    "          caller in the event log. --ttl: seconds or a number\n"
	    "          with s, m, h, d or w; --expires-at: an instant.\n"
	    "  list    id, name, role, state, creation, last use (to the\n"
	    "          minute), expiry, revocation; never the token\n"
	    "  revoke  refuses the token from the next request on\n"
	    "  viewer    read DAGs, runs, instances, logs, events, metrics\n"
	    "  operator  + pause, trigger, backfill, kill, clear, mark\n"
	    "  admin     + submit DAGs, manage tokens\n"
	    "\n"
	    "With --home DIR or --dsn DSN the command works on that database\n"
	    "directly, without ax-api: for the first admin token of an\n"
	    "installation, or to revoke a token when no admin token is left.\n"
	    "\n" AX_API_OPTS_HELP);
}

/* What the three subcommands were given. */
typedef struct token_args {
	ax_api_cmd  cmd;
	const char *home, *dsn, *name, *role, *ttl, *expires_at;
} token_args;

/* ---- on the database ----------------------------------------------------
 */

/* Opens the database of --home / --dsn; 0 ok, 1 after the message. */
static int
db_open(token_args *a, ax_db_where *w, ax_store **st)
{
	ax_err rv;

	if ((rv = ax_db_where_init(w, a->home, a->dsn)) != AX_OK ||
	    (rv = ax_db_where_up(w)) != AX_OK ||
	    (rv = ax_store_open(w->dsn, st)) != AX_OK ||
	    (rv = ax_store_exec(*st, "SET TimeZone = 'UTC'", 0, NULL)) !=
	        AX_OK) {
		fprintf(stderr, "%s: %s\n", a->cmd.prog, ax_err_detail());
		return 1;
	}
	return 0;
}

/* Runs the subcommand sub on the database; *out gets the JSON the API
 * would answer (rows shaped by ax_api_rows_json). */
static int
db_run(token_args *a, const char *sub, json_t **out)
{
	ax_db_where      w                     = { 0 };
	ax_store        *st                    = NULL;
	PGresult        *res                   = NULL;
	ax_api_token_new n                     = { 0 };
	char             tok[AX_API_TOKEN_LEN] = "";
	int64_t          id                    = 0;
	ax_err           rv                    = AX_OK;
	int              rc;

	if (!strcmp(sub, "create")) {
		if (ax_api_role_parse(a->role, &n.role) != AX_OK ||
		    ax_api_token_name_check(a->name) != AX_OK ||
		    (a->ttl &&
		     ax_api_token_parse_ttl(a->ttl, &n.ttl_s) != AX_OK) ||
		    (a->expires_at &&
		     ax_tz_parse_iso8601(a->expires_at, ax_tz_utc(),
		                         &n.expires_us) != AX_OK)) {
			fprintf(stderr, "%s: %s\n", a->cmd.prog,
			        ax_err_detail());
			return 2;
		}
		n.name = a->name;
	} else if (!strcmp(sub, "revoke") &&
	           ax_api_cmd_id(&a->cmd, "ID", a->cmd.pos[0], &id) != 0) {
		return 2;
	}
	if ((rc = db_open(a, &w, &st)) != 0)
		goto out;
	if (!strcmp(sub, "create")) {
		rv = ax_api_token_mint(st, &n, tok, &id);
		if (rv == AX_OK)
			rv = ax_api_token_get(st, id, &res);
	} else if (!strcmp(sub, "list")) {
		rv = ax_api_token_list(st, &res);
	} else {
		rv = ax_api_token_revoke(st, id, NULL, &res);
	}
	if (rv != AX_OK) {
		fprintf(stderr, "%s: %s\n", a->cmd.prog, ax_err_detail());
		rc = 1;
		goto out;
	}
	if (!strcmp(sub, "list")) {
		*out = json_pack("{s:o}", "tokens", ax_api_rows_json(res));
	} else {
		*out = ax_api_row_json(res, 0);
		if (*tok != '\0' && *out != NULL)
			json_object_set_new(*out, "token", json_string(tok));
	}
	rc = *out != NULL ? 0 : 1;
out:
	memset(tok, 0, sizeof(tok));
	PQclear(res);
	ax_store_close(st);
	ax_db_where_fini(&w);
	return rc;
}

/* ---- through ax-api ------------------------------------------------------
 */

/* Runs the subcommand sub through ax-api; *out gets its answer. */
static int
api_run(token_args *a, const char *sub, json_t **out)
{
	ax_api_path p;
	json_t     *body = NULL;
	ax_err      rv;
	int64_t     id;

	if (!strcmp(sub, "revoke") &&
	    ax_api_cmd_id(&a->cmd, "ID", a->cmd.pos[0], &id) != 0)
		return 2;
	if (ax_api_cmd_connect(&a->cmd) != 0)
		return 1;
	if (!strcmp(sub, "create")) {
		body =
		    json_pack("{s:s,s:s}", "name", a->name, "role", a->role);
		if (body != NULL && a->ttl != NULL)
			json_object_set_new(body, "ttl", json_string(a->ttl));
		if (body != NULL && a->expires_at != NULL)
			json_object_set_new(body, "expires_at",
			                    json_string(a->expires_at));
		rv = ax_api_client_post(a->cmd.client, "/api/v1/tokens", body,
		                        out);
		json_decref(body);
	} else if (!strcmp(sub, "list")) {
		rv = ax_api_client_get(a->cmd.client, "/api/v1/tokens", out);
	} else {
		ax_api_reply rep = { 0 };
		ax_api_path_init(&p, "/api/v1/tokens/");
		ax_api_path_seg(&p, a->cmd.pos[0]);
		rv = ax_api_client_call(a->cmd.client, "DELETE",
		                        ax_api_path_str(&p), NULL, NULL, 0,
		                        NULL, &rep);
		if (rv == AX_OK)
			*out = json_incref(rep.json);
		ax_api_reply_fini(&rep);
	}
	return rv == AX_OK ? 0 : ax_api_cmd_fail(&a->cmd);
}

/* ---- output --------------------------------------------------------------
 */

/* The human form: a table, the new token, or one line. */
static void
print_human(const char *sub, json_t *j)
{
	static const char *const hdr[]  = { "ID",      "NAME",    "ROLE",
		                            "STATE",   "CREATED", "LAST USED",
		                            "EXPIRES", "REVOKED" };
	static const char *const keys[] = { "id",         "name",
		                            "role",       "state",
		                            "created_at", "last_used_at",
		                            "expires_at", "revoked_at" };
	ax_table                *t;
	json_t                  *e;
	size_t                   i;
	char                     exp[64];

	if (!strcmp(sub, "list")) {
		if ((t = ax_table_new(8, hdr)) == NULL)
			return;
		json_array_foreach(json_object_get(j, "tokens"), i, e)
		    ax_table_add_json(t, e, keys);
		ax_table_print(t, stdout);
		ax_table_free(t);
		return;
	}
	ax_table_text(json_object_get(j, "expires_at"), exp, sizeof(exp));
	if (!strcmp(sub, "create")) {
		printf("%s\n", json_string_value(json_object_get(j, "token")));
		fprintf(stderr,
		        "token %" JSON_INTEGER_FORMAT " '%s' (role %s, "
		        "expires %s) created; it is shown only now\n",
		        json_integer_value(json_object_get(j, "id")),
		        json_string_value(json_object_get(j, "name")),
		        json_string_value(json_object_get(j, "role")),
		        strcmp(exp, "-") ? exp : "never");
		return;
	}
	printf("token %" JSON_INTEGER_FORMAT " '%s' revoked\n",
	       json_integer_value(json_object_get(j, "id")),
	       json_string_value(json_object_get(j, "name")));
}

int
ax_cmd_token(int argc, char **argv)
{
	static const char *const subs[] = { "create", "list", "revoke" };
	token_args               a      = { 0 };
	const char              *sub    = argc > 1 ? argv[1] : "";
	char                     prog[32];
	const ax_api_flag        flags[] = {
		       { .name = "--home", .value = &a.home },
		       { .name = "--dsn", .value = &a.dsn },
		       { .name = "--name", .value = &a.name },
		       { .name = "--role", .value = &a.role },
		       { .name = "--ttl", .value = &a.ttl },
		       { .name = "--expires-at", .value = &a.expires_at },
		       { 0 },
	};
	json_t *out = NULL;
	int     rc;

	if (!ax_api_cmd_sub("axctl token", subs,
	                    sizeof(subs) / sizeof(subs[0]), argc, argv, usage,
	                    &rc))
		return rc;
	snprintf(prog, sizeof(prog), "axctl token %s", sub);
	a.cmd.prog = prog;
	rc         = ax_api_cmd_parse(&a.cmd, argc - 1, argv + 1, flags,
	                              !strcmp(sub, "revoke"), !strcmp(sub, "revoke"));
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc != 0)
		return rc;
	if (strcmp(sub, "create") != 0 &&
	    (a.name || a.role || a.ttl || a.expires_at)) {
		fprintf(stderr,
		        "%s: --name, --role, --ttl and --expires-at are for "
		        "create\n",
		        prog);
		return 2;
	}
	if (!strcmp(sub, "create") && (a.name == NULL || a.role == NULL)) {
		fprintf(stderr, "%s: --name and --role are required\n", prog);
		return 2;
	}
	if (a.ttl != NULL && a.expires_at != NULL) {
		fprintf(stderr, "%s: give --ttl or --expires-at, not both\n",
		        prog);
		return 2;
	}
	if ((a.home || a.dsn) &&
	    (a.cmd.opts.server || a.cmd.opts.token_file)) {
		fprintf(stderr,
		        "%s: --home/--dsn work on the database directly; "
		        "--server/--token-file go through ax-api: pick one\n",
		        prog);
		return 2;
	}
	rc =
	    (a.home || a.dsn) ? db_run(&a, sub, &out) : api_run(&a, sub, &out);
	if (rc == 0 && a.cmd.opts.json)
		ax_api_cmd_print_json(out);
	else if (rc == 0)
		print_human(sub, out);
	json_decref(out);
	ax_api_cmd_fini(&a.cmd);
	return rc;
}
