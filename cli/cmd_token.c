/*
 * cmd_token.c - `axctl token create`: writes a new token's hash to the
 * database (api_tokens) and prints the token on stdout, once: only its
 * SHA-256 is stored, so it cannot be shown again.
 * Exit status: 0 created, 1 failure, 2 usage.
 */
#include "cmd_token.h"

#include <stdio.h>
#include <string.h>

#include "api_token.h"
#include "cmd_db.h"
#include "store.h"

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl token create --role viewer|operator|admin\n"
	    "                          [--name NAME] [--home DIR] "
	    "[--dsn DSN]\n"
	    "\n"
	    "Creates an ax-api bearer token and prints it on stdout. It\n"
	    "is shown once: only its SHA-256 is stored. Send it as\n"
	    "`Authorization: Bearer TOKEN`.\n"
	    "  viewer    read DAGs, runs, instances, logs, events, metrics\n"
	    "  operator  + pause, trigger, backfill, kill, clear, mark\n"
	    "  admin     + submit DAGs\n"
	    "  --home, --dsn  the database, as for `axctl db`\n"
	    "\n"
	    "Exit status: 0 created, 1 failure, 2 usage error.\n");
}

int
ax_cmd_token(int argc, char **argv)
{
	const char *home = NULL, *dsn = NULL, *role = NULL, *name = NULL;
	char        tok[AX_API_TOKEN_LEN];
	ax_db_where w  = { 0 };
	ax_store   *st = NULL;
	ax_api_role r;
	ax_err      rv;
	int64_t     id;
	int         rc = 1;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "create") != 0) {
		fprintf(stderr, "axctl token: unknown subcommand '%s'\n",
		        argv[1]);
		usage(stderr);
		return 2;
	}
	for (int i = 2; i < argc;) {
		int k = ax_db_where_opt(argc, argv, &i, &home, &dsn);
		if (k < 0)
			return 2;
		if (k > 0)
			continue;
		if (i + 1 < argc && strcmp(argv[i], "--role") == 0) {
			role = argv[i + 1];
			i += 2;
		} else if (i + 1 < argc && strcmp(argv[i], "--name") == 0) {
			name = argv[i + 1];
			i += 2;
		} else {
			fprintf(stderr,
			        "axctl token create: unexpected '%s'\n",
			        argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (role == NULL) {
		fprintf(stderr, "axctl token create: --role is required\n");
		return 2;
	}
	if (ax_api_role_parse(role, &r) != AX_OK) {
		fprintf(stderr, "axctl token create: %s\n", ax_err_detail());
		return 2;
	}
	if ((rv = ax_db_where_init(&w, home, dsn)) != AX_OK ||
	    (rv = ax_db_where_up(&w)) != AX_OK ||
	    (rv = ax_store_open(w.dsn, &st)) != AX_OK ||
	    (rv = ax_api_token_create(st, r, name, tok, &id)) != AX_OK) {
		fprintf(stderr, "axctl token create: %s\n", ax_err_detail());
		goto out;
	}
	printf("%s\n", tok);
	fprintf(stderr, "token %lld (role %s) created; it is shown only now\n",
	        (long long) id, ax_api_role_name(r));
	rc = 0;
out:
	ax_store_close(st);
	ax_db_where_fini(&w);
	return rc;
}
