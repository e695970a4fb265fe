/*
 * cmd_worker.c - `axctl worker list`: the workers ax-api knows
 * (GET /api/v1/workers). Exit status: 0 success, 1 failure, 2 usage.
 */
#include "cmd_worker.h"

#include <string.h>

#include "api_cmd.h"
#include "table.h"

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl worker list [--state S] [--group G]\n"
	        "                         [--server URL] [--token-file FILE] "
	        "[--json]\n"
	        "\n"
	        "  list  workers with their group, state, slots and last "
	        "heartbeat\n"
	        "\n" AX_API_OPTS_HELP);
}

static int
cmd_list(ax_api_cmd *cmd, const char *state, const char *group)
{
	static const char *const hdr[]  = { "ID",    "GROUP",    "STATE",
		                            "SLOTS", "USED",     "HOST",
		                            "PID",   "HEARTBEAT" };
	static const char *const keys[] = {
		"id",         "worker_group", "state", "slots",
		"used_slots", "hostname",     "pid",   "last_heartbeat_at"
	};
	ax_api_path p;
	json_t     *j, *o;
	ax_table   *t;
	size_t      i;

	ax_api_path_init(&p, "/api/v1/workers");
	ax_api_path_query(&p, "state", state);
	ax_api_path_query(&p, "group", group);
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &j) != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json) {
		ax_api_cmd_print_json(j);
		json_decref(j);
		return 0;
	}
	if ((t = ax_table_new(8, hdr)) != NULL) {
		json_array_foreach(json_object_get(j, "workers"), i, o)
		    ax_table_add_json(t, o, keys);
		ax_table_print(t, stdout);
	}
	ax_table_free(t);
	json_decref(j);
	return t ? 0 : 1;
}

int
ax_cmd_worker(int argc, char **argv)
{
	const char       *state = NULL, *group = NULL;
	const ax_api_flag flags[] = {
		{ .name = "--state", .value = &state },
		{ .name = "--group", .value = &group },
		{ 0 },
	};
	ax_api_cmd cmd = { .prog = "axctl worker list" };
	int        rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "list") != 0) {
		fprintf(stderr,
		        "axctl worker: unknown subcommand '%s'; expected "
		        "list\n",
		        argv[1]);
		return 2;
	}
	rc = ax_api_cmd_parse(&cmd, argc - 1, argv + 1, flags, 0, 0);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc == 0)
		rc = cmd_list(&cmd, state, group);
	ax_api_cmd_fini(&cmd);
	return rc;
}
