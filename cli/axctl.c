/*
 * axctl.c - the AX command-line tool: dispatches `axctl GROUP ...` to the
 * group's handler in cli/cmd_<group>.c.
 *
 * Exit status for every subcommand: 0 success, 1 failure (the message on
 * stderr says what failed and what to do), 2 usage error.
 */
#include <stdio.h>
#include <string.h>

#include "ax_config.h"
#include "axctl.h"
#include "cmd_dag.h"
#include "cmd_dag_api.h"
#include "cmd_events.h"
#include "cmd_explain.h"
#include "cmd_instance.h"
#include "cmd_run.h"
#include "cmd_pool.h"
#include "cmd_worker.h"
#include "cmd_cron.h"
#include "cmd_command.h"
#include "cmd_db.h"
#include "cmd_drill.h"
#include "cmd_rule.h"
#include "cmd_token.h"
#include "cmd_bench.h"
#include "cmd_standalone.h"

static const ax_cmd commands[] = {
	{ "bench", ax_cmd_bench, "measure scheduling latency and throughput" },
	{ "cron", ax_cmd_cron, "cron expressions: next fire times" },
	{ "dag", ax_cmd_dag_api,
	  "DAGs: submit, list, show, trigger, backfill...; validate, load" },
	{ "run", ax_cmd_run, "DAG runs: list, show" },
	{ "instance", ax_cmd_instance,
	  "task instances: list, show, logs, kill, clear, mark" },
	{ "worker", ax_cmd_worker, "workers: list" },
	{ "events", ax_cmd_events, "the event log: query, --follow" },
	{ "explain", ax_cmd_explain,
	  "why an instance or run is not running: waits, attempts, timeline" },
	{ "command", ax_cmd_command,
	  "control commands: show (pending, applied, rejected), --wait" },
	{ "db", ax_cmd_db, "database: up, down, status, migrate, psql" },
	{ "drill", ax_cmd_drill,
	  "fault drills: kill, stop and restart parts of AX mid-run" },
	{ "token", ax_cmd_token, "API tokens: create, list, revoke" },
	{ "rule", ax_cmd_rule,
	  "Allow/Block rules: add, list, rm, test (what a rule holds)" },
	{ "pool", ax_cmd_pool,
	  "pool pressure: push, show or withdraw a pool's water level" },
	{ "standalone", ax_cmd_standalone,
	  "run PostgreSQL, axd, workers and the API on this machine" },
	{ NULL, NULL, NULL },
};

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl [--help] [--version] COMMAND [ARGS...]\n\n"
	        "Commands:\n");
	for (const ax_cmd *c = commands; c->name != NULL; c++)
		fprintf(f, "  %-12s %s\n", c->name, c->summary);
	fprintf(f,
	        "\nRun `axctl COMMAND --help` for a command's options.\n"
	        "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("axctl %s\n", AX_VERSION);
		return 0;
	}
	for (const ax_cmd *c = commands; c->name != NULL; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	fprintf(
	    stderr,
	    "axctl: unknown command '%s'; run `axctl --help` for the list\n",
	    argv[1]);
	return 2;
}
