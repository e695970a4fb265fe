/*
 * cmd_explain.c - `axctl explain instance|run ID [--json]` (see
 * cmd_explain.h). The server assembles the explanation
 * (engine/explain.c); without --json this prints it with
 * ax_explain_text, the same code the unit tests read.
 * Exit status: 0 success, 1 failure (not found, server error), 2 usage.
 */
#include "cmd_explain.h"

#include <stdio.h>
#include <string.h>

#include "api_cmd.h"
#include "explain.h"

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl explain instance ID [--json]\n"
	        "       axctl explain run ID [--json]\n"
	        "       (with [--server URL] [--token-file FILE])\n"
	        "\n"
	        "  Why an instance or a run is not running: its state, what\n"
	        "  it waits for (upstream task or DAG, pool or group at\n"
	        "  capacity and its holders, a Block rule, the overlap\n"
	        "  policy, a backoff, no live worker), then every attempt\n"
	        "  (why it started, how it ended) and the timeline of\n"
	        "  decisions with the time between steps (viewer role).\n"
	        "\n" AX_API_OPTS_HELP);
}

int
ax_cmd_explain(int argc, char **argv)
{
	ax_api_cmd  cmd = { 0 };
	ax_api_path p;
	json_t     *out = NULL;
	int64_t     id;
	int         rc;
	char        prog[64];

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "instance") && strcmp(argv[1], "run")) {
		fprintf(stderr,
		        "axctl explain: unknown subject '%s'; expected "
		        "instance or run\n",
		        argv[1]);
		return 2;
	}
	snprintf(prog, sizeof(prog), "axctl explain %s", argv[1]);
	cmd.prog = prog;
	rc       = ax_api_cmd_parse(&cmd, argc - 1, argv + 1, NULL, 1, 1);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc == 0 && ax_api_cmd_id(&cmd, "ID", cmd.pos[0], &id))
		rc = 2;
	if (rc != 0)
		return rc;
	ax_api_path_init(&p,
	                 !strcmp(argv[1], "run") ? "/api/v1/runs/"
	                                         : "/api/v1/instances/");
	ax_api_path_seg(&p, cmd.pos[0]);
	ax_api_path_lit(&p, "/explain");
	if (ax_api_cmd_connect(&cmd) != 0) {
		ax_api_cmd_fini(&cmd);
		return 1;
	}
	if (ax_api_client_get(cmd.client, ax_api_path_str(&p), &out) !=
	    AX_OK) {
		rc = ax_api_cmd_fail(&cmd);
	} else if (cmd.opts.json) {
		ax_api_cmd_print_json(out);
	} else {
		ax_buf b;
		ax_buf_init(&b, 0);
		ax_explain_text(out, &b);
		if (b.err == AX_OK && b.p != NULL)
			fputs(b.p, stdout);
		rc = b.err == AX_OK ? 0 : 1;
		ax_buf_fini(&b);
	}
	json_decref(out);
	ax_api_cmd_fini(&cmd);
	return rc;
}
