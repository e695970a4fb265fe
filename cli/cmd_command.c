/*
 * cmd_command.c - `axctl command show ID [--wait] [--timeout S]`: one
 * durable control command through ax-api (see cmd_command.h).
 * Exit status: 0 success (with --wait: applied), 1 failure, rejected or
 * timed out, 2 usage error.
 */
#include "cmd_command.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "table.h"

#define POLL_US (200 * AX_USEC_PER_MSEC)

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl command show ID [--wait] [--timeout SECONDS]\n"
	        "       (with [--server URL] [--token-file FILE] [--json])\n"
	        "\n"
	        "  show  a control command: pending (axd has not applied it\n"
	        "        yet), applied (with what it produced, e.g. the run\n"
	        "        of a trigger) or rejected (with the reason); every\n"
	        "        state-changing request (dag submit, trigger,\n"
	        "        backfill, pause, unpause, instance kill, clear,\n"
	        "        mark) prints its command id\n"
	        "  --wait     wait until it is applied or rejected (exit 1\n"
	        "             when rejected or after --timeout, default %d)\n"
	        "\n" AX_API_OPTS_HELP,
	        AX_CMD_COMMAND_WAIT_S);
}

int
ax_cmd_command_timeout(const ax_api_cmd *cmd, const char *text, int64_t *us)
{
	char  *end;
	double s;

	*us = (int64_t) AX_CMD_COMMAND_WAIT_S * AX_USEC_PER_SEC;
	if (text == NULL)
		return 0;
	s = strtod(text, &end);
	if (*text == '\0' || *end != '\0' || !(s > 0) || s > 86400) {
		fprintf(
		    stderr,
		    "%s: --timeout wants seconds in (0, 86400], got '%s'\n",
		    cmd->prog, text);
		return 2;
	}
	*us = (int64_t) (s * AX_USEC_PER_SEC);
	return 0;
}

/* GET /api/v1/commands/id; NULL after printing the failure. */
static json_t *
get_command(ax_api_cmd *cmd, int64_t id)
{
	char    path[64];
	json_t *j = NULL;

	snprintf(path, sizeof(path), "/api/v1/commands/%" PRId64, id);
	if (ax_api_client_get(cmd->client, path, &j) != AX_OK) {
		ax_api_cmd_fail(cmd);
		return NULL;
	}
	return j;
}

static const char *
status_of(json_t *c)
{
	const char *s = json_string_value(json_object_get(c, "status"));
	return s != NULL ? s : "?";
}

int
ax_cmd_command_wait(ax_api_cmd *cmd, int64_t id, int64_t timeout_us,
                    json_t **out)
{
	int64_t deadline = ax_clock_mono_us() + timeout_us;
	json_t *c;

	if (out != NULL)
		*out = NULL;
	for (;;) {
		if ((c = get_command(cmd, id)) == NULL)
			return 1;
		if (strcmp(status_of(c), "pending") != 0 ||
		    ax_clock_mono_us() >= deadline)
			break;
		json_decref(c);
		ax_clock_sleep_us(POLL_US);
	}
	int rc = strcmp(status_of(c), "applied") == 0 ? 0 : 1;
	if (strcmp(status_of(c), "pending") == 0)
		fprintf(stderr,
		        "%s: command %" PRId64 " still pending after %.0f s: "
		        "is axd running? (`axctl command show %" PRId64
		        " --wait` waits again)\n",
		        cmd->prog, id, (double) timeout_us / AX_USEC_PER_SEC,
		        id);
	if (out != NULL)
		*out = c;
	else
		json_decref(c);
	return rc;
}

/* "run_id=12 logical_date_us=..." of a result object, into buf. */
static const char *
result_text(json_t *r, char *buf, size_t len)
{
	const char *k;
	json_t     *v;
	size_t      n = 0;

	buf[0] = '\0';
	if (!json_is_object(r))
		return ax_table_text(r, buf, len);
	json_object_foreach(r, k, v)
	{
		char val[256];
		int  w = snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", k,
		                  ax_table_text(v, val, sizeof(val)));
		if (w < 0 || (size_t) w >= len - n)
			break;
		n += (size_t) w;
	}
	return buf;
}

/* One line: "command N (kind) applied: run_id=..." */
static void
print_outcome(json_t *c)
{
	char        res[512];
	const char *st = status_of(c);

	printf("command %" PRId64 " (%s) %s",
	       (int64_t) json_integer_value(json_object_get(c, "id")),
	       json_string_value(json_object_get(c, "kind"))
	           ? json_string_value(json_object_get(c, "kind"))
	           : "?",
	       st);
	if (strcmp(st, "applied") == 0 &&
	    !json_is_null(json_object_get(c, "result")) &&
	    json_object_get(c, "result") != NULL)
		printf(": %s",
		       result_text(json_object_get(c, "result"), res,
		                   sizeof(res)));
	else if (strcmp(st, "rejected") == 0)
		printf(": %s",
		       json_string_value(json_object_get(c, "reason"))
		           ? json_string_value(json_object_get(c, "reason"))
		           : "");
	printf("\n");
}

int
ax_cmd_command_after(ax_api_cmd *cmd, json_t *answer, int wait,
                     int64_t timeout_us)
{
	int64_t id = json_integer_value(json_object_get(answer, "command_id"));
	json_t *c  = NULL;
	int     rc;

	if (id <= 0) {
		fprintf(stderr,
		        "%s: the answer has no command_id (an older "
		        "ax-api?)\n",
		        cmd->prog);
		return wait ? 1 : 0;
	}
	if (!cmd->opts.json)
		printf("command %" PRId64 "%s\n", id,
		       wait ? "" : " (`axctl command show ID` follows it)");
	if (!wait)
		return 0;
	rc = ax_cmd_command_wait(cmd, id, timeout_us, &c);
	if (c == NULL)
		return 1;
	if (cmd->opts.json)
		json_object_set_new(answer, "command", c);
	else {
		print_outcome(c);
		json_decref(c);
	}
	return rc;
}

static int
cmd_show(ax_api_cmd *cmd, int wait, int64_t timeout_us)
{
	static const char *const keys[] = { "id",
		                            "kind",
		                            "status",
		                            "result",
		                            "reason",
		                            "body",
		                            "actor",
		                            "token_id",
		                            "token_name",
		                            "token_role",
		                            "created_at",
		                            "applied_at",
		                            "applied_epoch",
		                            NULL };
	json_t                  *c      = NULL;
	int64_t                  id;
	int                      rc = 0;

	if (ax_api_cmd_id(cmd, "ID", cmd->pos[0], &id) != 0)
		return 2;
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (wait)
		rc = ax_cmd_command_wait(cmd, id, timeout_us, &c);
	else if ((c = get_command(cmd, id)) == NULL)
		rc = 1;
	if (c == NULL)
		return 1;
	if (cmd->opts.json)
		ax_api_cmd_print_json(c);
	else
		ax_table_print_kv(stdout, c, keys);
	json_decref(c);
	return rc;
}

int
ax_cmd_command(int argc, char **argv)
{
	const char       *timeout = NULL;
	int               wait    = 0;
	const ax_api_flag flags[] = {
		{ .name = "--wait", .set = &wait },
		{ .name = "--timeout", .value = &timeout },
		{ 0 },
	};
	ax_api_cmd cmd = { .prog = "axctl command show" };
	int64_t    timeout_us;
	int        rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "show") != 0) {
		fprintf(stderr,
		        "axctl command: unknown subcommand '%s'; expected "
		        "show\n",
		        argv[1]);
		return 2;
	}
	rc = ax_api_cmd_parse(&cmd, argc - 1, argv + 1, flags, 1, 1);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc != 0 ||
	    (rc = ax_cmd_command_timeout(&cmd, timeout, &timeout_us)) != 0)
		return rc;
	rc = cmd_show(&cmd, wait, timeout_us);
	ax_api_cmd_fini(&cmd);
	return rc;
}
