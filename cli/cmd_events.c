/*
 * cmd_events.c - `axctl events [--follow]`: the event log through ax-api
 * (GET /api/v1/events, oldest first).
 *
 * --follow polls the route once a second with cursor = the last id seen:
 * a client-side refresh, so a follower costs the server one indexed range
 * query per second and needs no server-side stream. SIGINT / SIGTERM end
 * a follow cleanly (exit status 0).
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#include "cmd_events.h"

#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "api_cmd.h"
#include "table.h"

#define FOLLOW_POLL_MS 1000

static volatile sig_atomic_t stop_follow;

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl events [--dag D] [--run R] [--instance I]\n"
	        "                    [--type T] [--since ISO] [--limit N]\n"
	        "                    [--follow] [--server URL]\n"
	        "                    [--token-file FILE] [--json]\n"
	        "\n"
	        "Events of the event log, oldest first (one page of --limit,\n"
	        "default 100). --follow keeps printing new events (polled\n"
	        "every second) until Ctrl-C; with --json it prints one JSON\n"
	        "object per line.\n"
	        "\n" AX_API_OPTS_HELP);
}

static const char *const hdr[]  = { "ID",  "TIME",     "TYPE",   "DAG",
	                            "RUN", "INSTANCE", "REASON", "BY" };
static const char *const keys[] = { "id",     "time",       "type",
	                            "dag",    "dag_run_id", "instance_id",
	                            "reason", "by" };

/* Sets e's "by" to the token that caused it (payload token_name, as
 * commands and token changes record it), for the BY column. */
static void
set_by(json_t *e)
{
	json_t     *pl = json_object_get(e, "payload");
	const char *name =
	    json_string_value(json_object_get(pl, "token_name"));

	if (name != NULL)
		json_object_set_new(e, "by", json_string(name));
}

/* One follow line: fixed widths, since rows arrive over time. */
static void
print_row(json_t *e)
{
	static const int w[] = { 8, 20, 24, 24, 6, 8, 16, 0 };
	char             buf[256];

	if (e != NULL)
		set_by(e);
	for (int c = 0; c < 8; c++) {
		const char *v = e == NULL
		    ? hdr[c]
		    : ax_table_text(json_object_get(e, keys[c]), buf,
		                    sizeof(buf));
		printf("%s%-*s", c ? "  " : "", w[c], v);
	}
	printf("\n");
}

static void
on_signal(int sig)
{
	(void) sig;
	stop_follow = 1;
}

static int
follow(ax_api_cmd *cmd, ax_api_path *base, int64_t after)
{
	struct sigaction sa = { .sa_handler = on_signal };
	char             cur[24];

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ax_api_client_set_abort(cmd->client, &stop_follow);
	if (!cmd->opts.json)
		print_row(NULL);
	while (!stop_follow) {
		ax_api_path p = *base;
		json_t     *j, *e;
		size_t      i;

		snprintf(cur, sizeof(cur), "%" PRId64, after);
		if (after > 0)
			ax_api_path_query(&p, "cursor", cur);
		if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &j) !=
		    AX_OK) {
			if (stop_follow)
				break;
			return ax_api_cmd_fail(cmd);
		}
		json_array_foreach(json_object_get(j, "events"), i, e)
		{
			if (cmd->opts.json) {
				json_dumpf(e, stdout, JSON_COMPACT);
				fputc('\n', stdout);
			} else {
				print_row(e);
			}
			after = json_integer_value(json_object_get(e, "id"));
		}
		fflush(stdout);
		int more = !json_is_null(json_object_get(j, "next_cursor"));
		json_decref(j);
		if (more)
			continue; /* a full page: the next one at once */
		struct timespec ts = { FOLLOW_POLL_MS / 1000,
			               (FOLLOW_POLL_MS % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	return 0;
}

int
ax_cmd_events(int argc, char **argv)
{
	static const char *const qk[]    = { "dag",  "run",   "instance",
		                             "type", "since", "limit" };
	const char              *q[6]    = { NULL };
	int                      fol     = 0, rc;
	const ax_api_flag        flags[] = {
		       { .name = "--dag", .value = &q[0] },
		       { .name = "--run", .value = &q[1] },
		       { .name = "--instance", .value = &q[2] },
		       { .name = "--type", .value = &q[3] },
		       { .name = "--since", .value = &q[4] },
		       { .name = "--limit", .value = &q[5] },
		       { .name = "--follow", .alias = "-f", .set = &fol },
		       { 0 },
	};
	ax_api_cmd  cmd = { .prog = "axctl events" };
	ax_api_path p;
	json_t     *j, *e;
	ax_table   *t;
	size_t      i;
	int64_t     n;

	rc = ax_api_cmd_parse(&cmd, argc, argv, flags, 0, 0);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc != 0)
		return rc;
	if ((q[1] && ax_api_cmd_id(&cmd, "--run", q[1], &n)) ||
	    (q[2] && ax_api_cmd_id(&cmd, "--instance", q[2], &n)) ||
	    (q[5] && ax_api_cmd_id(&cmd, "--limit", q[5], &n)))
		return 2;
	ax_api_path_init(&p, "/api/v1/events");
	for (int k = 0; k < 6; k++)
		ax_api_path_query(&p, qk[k], q[k]);
	if (ax_api_cmd_connect(&cmd) != 0)
		return 1;
	if (fol) {
		rc = follow(&cmd, &p, 0);
		ax_api_cmd_fini(&cmd);
		return rc;
	}
	if (ax_api_client_get(cmd.client, ax_api_path_str(&p), &j) != AX_OK) {
		rc = ax_api_cmd_fail(&cmd);
		ax_api_cmd_fini(&cmd);
		return rc;
	}
	if (cmd.opts.json) {
		ax_api_cmd_print_json(j);
	} else if ((t = ax_table_new(8, hdr)) != NULL) {
		json_array_foreach(json_object_get(j, "events"), i, e)
		{
			set_by(e);
			ax_table_add_json(t, e, keys);
		}
		ax_table_print(t, stdout);
		ax_table_free(t);
	}
	json_decref(j);
	ax_api_cmd_fini(&cmd);
	return 0;
}
