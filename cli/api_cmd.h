/*
 * api_cmd.h - what the axctl API subcommands share: argument parsing
 * (common options of api_client.h plus per-subcommand flags and
 * positionals), connecting, and printing JSON.
 *
 * Role: cmd_dag_api.c, cmd_run.c, cmd_instance.c, cmd_worker.c and
 * cmd_events.c declare their flags as a table and call
 * ax_api_cmd_parse; every usage error is reported the same way (exit
 * status 2) and every server failure the same way (exit status 1).
 */
#ifndef AX_API_CMD_H
#define AX_API_CMD_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "api_client.h"

#define AX_API_CMD_MAX_POS 64

/* One flag of a subcommand. Exactly one of value, set, many is set. */
typedef struct ax_api_flag {
	const char  *name;  /* "--dag" */
	const char  *alias; /* "-f" or NULL */
	const char **value; /* takes a value (last one wins) */
	int         *set;   /* no value: set to 1 */
	const char **many;  /* repeatable value: up to cap entries */
	int         *nmany;
	int          cap;
} ax_api_flag;

/* A parsed subcommand; zero it before ax_api_cmd_parse. */
typedef struct ax_api_cmd {
	const char    *prog; /* "axctl run list", for messages */
	ax_api_opts    opts;
	const char    *pos[AX_API_CMD_MAX_POS];
	int            npos;
	ax_api_client *client; /* set by ax_api_cmd_connect */
} ax_api_cmd;

/*
 * Checks argv[1], the subcommand of tool (e.g. "axctl rule"), against
 * subs[0..n). Returns 1 when it is one of them. Otherwise sets *rc and
 * returns 0: with no subcommand, usage to stderr and *rc 2; for --help
 * or -h, usage to stdout and *rc 0; for any other word, an error naming
 * it and the known subcommands, and *rc 2.
 */
int ax_api_cmd_sub(const char *tool, const char *const *subs, size_t n,
                   int argc, char **argv, void (*usage)(FILE *), int *rc);

/*
 * Parses argv[1..argc) (argv[0] is the subcommand name) into cmd: the
 * common options, flags (terminated by a zeroed entry; NULL: none) and
 * between min_pos and max_pos positionals. Returns 0 when parsed, 2 after
 * printing a usage error to stderr, -1 when --help / -h was given (the
 * caller prints its usage to stdout and exits 0).
 */
int ax_api_cmd_parse(ax_api_cmd *cmd, int argc, char **argv,
                     const ax_api_flag *flags, int min_pos, int max_pos);

/* Creates cmd->client; 0 ok, 1 after printing the failure. */
int ax_api_cmd_connect(ax_api_cmd *cmd);

/* Frees what cmd holds. */
void ax_api_cmd_fini(ax_api_cmd *cmd);

/*
 * Parses text as a positive integer id (what) into *id; 0 ok, 2 after a
 * usage error naming what.
 */
int ax_api_cmd_id(const ax_api_cmd *cmd, const char *what, const char *text,
                  int64_t *id);

/* As ax_api_cmd_id for a count: an integer >= 0. */
int ax_api_cmd_count(const ax_api_cmd *cmd, const char *what, const char *text,
                     int64_t *n);

/* Prints j indented (2) with a final newline to stdout. */
void ax_api_cmd_print_json(json_t *j);

/* Prints the failure of the last call ("prog: detail") and returns 1. */
int ax_api_cmd_fail(const ax_api_cmd *cmd);

#endif /* AX_API_CMD_H */
