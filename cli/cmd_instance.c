/*
 * cmd_instance.c - `axctl instance list|show|logs|kill|clear|mark`: task
 * instances through ax-api (/api/v1/instances...).
 *
 * `logs` writes the log bytes to stdout as they arrive; with -f the
 * server streams until the attempt ends, so the command ends with it.
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#include "cmd_instance.h"

#include <string.h>

#include "api_cmd.h"
#include "cmd_command.h"
#include "table.h"

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl instance list [--dag D] [--run R] [--state S]\n"
	    "                           [--task T] [--limit N]\n"
	    "       axctl instance show ID\n"
	    "       axctl instance logs ID [--tail N | --offset N] [-f]\n"
	    "       axctl instance kill ID\n"
	    "       axctl instance clear ID [--downstream]\n"
	    "       axctl instance mark ID success|failed\n"
	    "       (all with [--server URL] [--token-file FILE] [--json])\n"
	    "\n"
	    "  list   task instances, newest first, with state and reason\n"
	    "  show   one instance and its attempts\n"
	    "  logs   the latest attempt's log: the last N lines (--tail),\n"
	    "         from byte N (--offset); -f/--follow streams until the\n"
	    "         attempt ends (--json does not apply)\n"
	    "  kill   stop an unfinished instance (operator)\n"
	    "  clear  run a finished instance again, with --downstream its\n"
	    "         downstream too (operator)\n"
	    "  mark   set a state by hand, reason MANUAL_MARK (operator)\n"
	    "\n" AX_API_OPTS_HELP);
}

/* GET or POST /api/v1/instances/ID[/verb]; prints with --json. */
static int
call(ax_api_cmd *cmd, const char *verb, json_t *body, json_t **out)
{
	ax_api_path p;
	ax_err      rv;

	ax_api_path_init(&p, "/api/v1/instances/");
	ax_api_path_seg(&p, cmd->pos[0]);
	if (verb != NULL) {
		ax_api_path_lit(&p, "/");
		ax_api_path_lit(&p, verb);
	}
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (verb == NULL)
		rv = ax_api_client_get(cmd->client, ax_api_path_str(&p), out);
	else
		rv = ax_api_client_post(cmd->client, ax_api_path_str(&p), body,
		                        out);
	if (rv != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json)
		ax_api_cmd_print_json(*out);
	return 0;
}

static int
cmd_list(ax_api_cmd *cmd, const char *const *q)
{
	static const char *const hdr[]  = { "ID",     "DAG",   "RUN",
		                            "TASK",   "SHARD", "STATE",
		                            "REASON", "TRY",   "STARTED",
		                            "ENDED" };
	static const char *const keys[] = {
		"id",    "dag",    "dag_run_id", "task",       "shard",
		"state", "reason", "try_number", "started_at", "ended_at"
	};
	static const char *const qk[] = { "dag", "run", "state", "task",
		                          "limit" };
	ax_api_path              p;
	json_t                  *j, *o;
	ax_table                *t;
	size_t                   i;
	int64_t                  n;

	if (q[1] != NULL && ax_api_cmd_id(cmd, "--run", q[1], &n) != 0)
		return 2;
	if (q[4] != NULL && ax_api_cmd_id(cmd, "--limit", q[4], &n) != 0)
		return 2;
	ax_api_path_init(&p, "/api/v1/instances");
	for (int k = 0; k < 5; k++)
		ax_api_path_query(&p, qk[k], q[k]);
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &j) != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json) {
		ax_api_cmd_print_json(j);
		json_decref(j);
		return 0;
	}
	if ((t = ax_table_new(10, hdr)) != NULL) {
		json_array_foreach(json_object_get(j, "instances"), i, o)
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
	static const char *const keys[] = {
		"id",         "dag",          "dag_run_id",
		"task",       "logical_time", "shard",
		"state",      "reason",       "priority",
		"channel",    "worker_group", "pool",
		"try_number", "max_tries",    "created_at",
		"ready_at",   "started_at",   "ended_at",
		NULL
	};
	static const char *const hdr[]   = { "ATTEMPT", "STATE",   "WORKER",
		                             "DUE",     "STARTED", "ENDED",
		                             "EXIT",    "REASON",  "RUN_ID" };
	static const char *const akeys[] = {
		"number",   "state",       "worker_id", "due_at", "started_at",
		"ended_at", "exit_status", "reason",    "run_id"
	};
	json_t *j = NULL, *o;
	size_t  i;
	int     rc = call(cmd, NULL, NULL, &j);

	if (rc == 0 && !cmd->opts.json) {
		ax_table *t = ax_table_new(9, hdr);
		ax_table_print_kv(stdout, j, keys);
		json_array_foreach(json_object_get(j, "attempts"), i, o)
		    ax_table_add_json(t, o, akeys);
		if (t != NULL && ax_table_rows(t) > 0) {
			printf("\n");
			ax_table_print(t, stdout);
		}
		ax_table_free(t);
		/* the command as the worker ran it (values quoted) */
		json_array_foreach(json_object_get(j, "attempts"), i, o)
		{
			const char *c =
			    json_string_value(json_object_get(o, "command"));
			if (c != NULL)
				printf("\ncommand of attempt %lld:\n%s\n",
				       (long long) json_integer_value(
				           json_object_get(o, "number")),
				       c);
		}
	}
	json_decref(j);
	return rc;
}

static int
cmd_logs(ax_api_cmd *cmd, const char *tail, const char *offset, int follow)
{
	ax_api_path  p;
	ax_api_reply rep = { 0 };
	int64_t      n;
	ax_err       rv;

	if (tail != NULL && offset != NULL) {
		fprintf(stderr, "%s: give --tail or --offset, not both\n",
		        cmd->prog);
		return 2;
	}
	if ((tail && ax_api_cmd_count(cmd, "--tail", tail, &n) != 0) ||
	    (offset && ax_api_cmd_count(cmd, "--offset", offset, &n) != 0))
		return 2;
	ax_api_path_init(&p, "/api/v1/instances/");
	ax_api_path_seg(&p, cmd->pos[0]);
	ax_api_path_lit(&p, "/logs");
	ax_api_path_query(&p, "tail", tail);
	ax_api_path_query(&p, "offset", offset);
	ax_api_path_query(&p, "follow", follow ? "true" : NULL);
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	rv = ax_api_client_call(cmd->client, "GET", ax_api_path_str(&p), NULL,
	                        NULL, 0, stdout, &rep);
	ax_api_reply_fini(&rep);
	fflush(stdout);
	return rv == AX_OK ? 0 : ax_api_cmd_fail(cmd);
}

static int
cmd_kill(ax_api_cmd *cmd)
{
	json_t *j  = NULL;
	int     rc = call(cmd, "kill", NULL, &j);
	char    st[64];

	if (rc == 0 && !cmd->opts.json)
		printf("kill of instance %s requested (it was %s)\n",
		       cmd->pos[0],
		       ax_table_text(json_object_get(j, "state"), st,
		                     sizeof(st)));
	if (rc == 0) /* the command id */
		rc = ax_cmd_command_after(cmd, j, 0, 0);
	json_decref(j);
	return rc;
}

static int
cmd_clear(ax_api_cmd *cmd, int downstream)
{
	json_t *b = json_pack("{s:b}", "downstream", downstream), *j = NULL;
	int     rc = call(cmd, "clear", b, &j);

	if (rc == 0 && !cmd->opts.json)
		printf("clear of instance %s%s requested\n", cmd->pos[0],
		       downstream ? " and its downstream" : "");
	if (rc == 0) /* the command id */
		rc = ax_cmd_command_after(cmd, j, 0, 0);
	json_decref(b);
	json_decref(j);
	return rc;
}

static int
cmd_mark(ax_api_cmd *cmd)
{
	const char *state = cmd->pos[1];
	json_t     *b, *j = NULL;
	char        from[64], to[64];
	int         rc;

	if (strcmp(state, "success") != 0 && strcmp(state, "failed") != 0) {
		fprintf(stderr,
		        "%s: the state must be success or failed, got '%s'\n",
		        cmd->prog, state);
		return 2;
	}
	b  = json_pack("{s:s}", "state", state);
	rc = call(cmd, "mark", b, &j);
	if (rc == 0 && !cmd->opts.json)
		printf("instance %s: %s -> %s (MANUAL_MARK)\n", cmd->pos[0],
		       ax_table_text(json_object_get(j, "from"), from,
		                     sizeof(from)),
		       ax_table_text(json_object_get(j, "state"), to,
		                     sizeof(to)));
	if (rc == 0) /* the command id */
		rc = ax_cmd_command_after(cmd, j, 0, 0);
	json_decref(b);
	json_decref(j);
	return rc;
}

int
ax_cmd_instance(int argc, char **argv)
{
	static const char *const subs[] = { "list",  "show", "logs", "kill",
		                            "clear", "mark", NULL };
	const char              *q[5]   = { NULL };
	const char              *tail = NULL, *offset = NULL;
	int                      follow = 0, downstream = 0, rc, s = -1;
	const ax_api_flag        list_flags[] = {
		       { .name = "--dag", .value = &q[0] },
		       { .name = "--run", .value = &q[1] },
		       { .name = "--state", .value = &q[2] },
		       { .name = "--task", .value = &q[3] },
		       { .name = "--limit", .value = &q[4] },
		       { 0 },
	};
	const ax_api_flag logs_flags[] = {
		{ .name = "--tail", .value = &tail },
		{ .name = "--offset", .value = &offset },
		{ .name = "--follow", .alias = "-f", .set = &follow },
		{ 0 },
	};
	const ax_api_flag clear_flags[] = {
		{ .name = "--downstream", .set = &downstream },
		{ 0 },
	};
	const ax_api_flag *flags[] = { list_flags, NULL,        logs_flags,
		                       NULL,       clear_flags, NULL };
	ax_api_cmd         cmd     = { 0 };
	char               prog[64];

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (int i = 0; subs[i]; i++)
		if (strcmp(argv[1], subs[i]) == 0)
			s = i;
	if (s < 0) {
		fprintf(stderr,
		        "axctl instance: unknown subcommand '%s'; expected "
		        "list, show, logs, kill, clear or mark\n",
		        argv[1]);
		return 2;
	}
	snprintf(prog, sizeof(prog), "axctl instance %s", subs[s]);
	cmd.prog = prog;
	rc       = ax_api_cmd_parse(&cmd, argc - 1, argv + 1, flags[s],
                              s == 0       ? 0
	                                : s == 5 ? 2
	                                         : 1,
                              s == 0       ? 0
	                                : s == 5 ? 2
	                                         : 1);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	int64_t id;
	if (rc == 0 && s > 0 && ax_api_cmd_id(&cmd, "ID", cmd.pos[0], &id))
		rc = 2;
	if (rc != 0)
		return rc;
	switch (s) {
	case 0:
		rc = cmd_list(&cmd, q);
		break;
	case 1:
		rc = cmd_show(&cmd);
		break;
	case 2:
		rc = cmd_logs(&cmd, tail, offset, follow);
		break;
	case 3:
		rc = cmd_kill(&cmd);
		break;
	case 4:
		rc = cmd_clear(&cmd, downstream);
		break;
	default:
		rc = cmd_mark(&cmd);
		break;
	}
	ax_api_cmd_fini(&cmd);
	return rc;
}
