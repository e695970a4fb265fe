/*
 * cmd_run.c - `axctl run list|show`: DAG runs through ax-api
 * (GET /api/v1/runs, /api/v1/runs/{id}).
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#include "cmd_run.h"

#include <inttypes.h>
#include <string.h>

#include "api_cmd.h"
#include "table.h"

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl run list [--dag D] [--state S] [--limit N]\n"
	        "       axctl run show ID\n"
	        "       (both with [--server URL] [--token-file FILE] "
	        "[--json])\n"
	        "\n"
	        "  list  DAG runs, newest first (state: QUEUED, RUNNING,\n"
	        "        SUCCESS, FAILED, CANCELED; limit 1..1000, default "
	        "100)\n"
	        "  show  one run with its task instance counts by state\n"
	        "\n" AX_API_OPTS_HELP);
}

static int
cmd_list(ax_api_cmd *cmd, const char *dag, const char *state,
         const char *limit)
{
	static const char *const hdr[]  = { "ID",           "DAG",   "TYPE",
		                            "LOGICAL_DATE", "STATE", "STARTED",
		                            "ENDED" };
	static const char *const keys[] = { "id",       "dag",
		                            "run_type", "logical_date",
		                            "state",    "started_at",
		                            "ended_at" };
	ax_api_path              p;
	json_t                  *j, *o;
	ax_table                *t;
	size_t                   i;
	int64_t                  n;

	if (limit != NULL && ax_api_cmd_id(cmd, "--limit", limit, &n) != 0)
		return 2;
	ax_api_path_init(&p, "/api/v1/runs");
	ax_api_path_query(&p, "dag", dag);
	ax_api_path_query(&p, "state", state);
	ax_api_path_query(&p, "limit", limit);
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &j) != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json) {
		ax_api_cmd_print_json(j);
		json_decref(j);
		return 0;
	}
	if ((t = ax_table_new(7, hdr)) != NULL) {
		json_array_foreach(json_object_get(j, "runs"), i, o)
		    ax_table_add_json(t, o, keys);
		ax_table_print(t, stdout);
	}
	ax_table_free(t);
	json_decref(j);
	return t ? 0 : 1;
}

static int
cmd_show(ax_api_cmd *cmd)
{
	static const char *const keys[] = { "id",
		                            "dag",
		                            "run_type",
		                            "state",
		                            "logical_date",
		                            "interval_start",
		                            "interval_end",
		                            "created_at",
		                            "started_at",
		                            "ended_at",
		                            "dag_version_id",
		                            "conf",
		                            NULL };
	ax_api_path              p;
	json_t                  *j, *v;
	const char              *k;
	int64_t                  id;

	if (ax_api_cmd_id(cmd, "ID", cmd->pos[0], &id) != 0)
		return 2;
	ax_api_path_init(&p, "/api/v1/runs/");
	ax_api_path_seg(&p, cmd->pos[0]);
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &j) != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json) {
		ax_api_cmd_print_json(j);
		json_decref(j);
		return 0;
	}
	ax_table_print_kv(stdout, j, keys);
	printf("instances:");
	json_object_foreach(json_object_get(j, "instances_by_state"), k, v)
	    printf(" %s=%lld", k, (long long) json_integer_value(v));
	printf("\n");
	json_decref(j);
	return 0;
}

int
ax_cmd_run(int argc, char **argv)
{
	const char       *dag = NULL, *state = NULL, *limit = NULL;
	const ax_api_flag list_flags[] = {
		{ .name = "--dag", .value = &dag },
		{ .name = "--state", .value = &state },
		{ .name = "--limit", .value = &limit },
		{ 0 },
	};
	ax_api_cmd cmd = { 0 };
	char       prog[64];
	int        rc, list;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	list = strcmp(argv[1], "list") == 0;
	if (!list && strcmp(argv[1], "show") != 0) {
		fprintf(stderr,
		        "axctl run: unknown subcommand '%s'; expected list or "
		        "show\n",
		        argv[1]);
		return 2;
	}
	snprintf(prog, sizeof(prog), "axctl run %s", argv[1]);
	cmd.prog = prog;
	rc       = ax_api_cmd_parse(&cmd, argc - 1, argv + 1,
                              list ? list_flags : NULL, list ? 0 : 1,
                              list ? 0 : 1);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc == 0)
		rc = list ? cmd_list(&cmd, dag, state, limit) : cmd_show(&cmd);
	ax_api_cmd_fini(&cmd);
	return rc;
}
