/*
 * cmd_pool.c - `axctl pool pressure NAME [LEVEL --for DUR | --until T]
 * [--clear]`: push, show or withdraw the water level of a pool or worker
 * group (PUT / GET / DELETE /api/v1/pools/{name}/pressure; docs in
 * operations.md). Exit status: 0 success, 1 failure, 2 usage.
 */
#include "cmd_pool.h"

#include <stdlib.h>
#include <string.h>

#include "api_cmd.h"

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: axctl pool pressure NAME LEVEL (--for DUR | --until "
	        "T)\n"
	        "       axctl pool pressure NAME [--clear]\n"
	        "                         [--server URL] [--token-file FILE] "
	        "[--json]\n"
	        "\n"
	        "  LEVEL  share of capacity in use, 0..1 or a percentage "
	        "(0.93, 93%%)\n"
	        "  --for  expires after this duration (5m, 1h30m)\n"
	        "  --until  expires at this ISO 8601 instant\n"
	        "  without LEVEL: show the last push; --clear withdraws it\n"
	        "\n" AX_API_OPTS_HELP);
}

/* LEVEL as a fraction: "0.93" or "93%"; 0 ok, 2 after a usage error. */
static int
parse_level(const ax_api_cmd *cmd, const char *s, double *out)
{
	char  *end;
	double v = strtod(s, &end);

	if (end != s && strcmp(end, "%") == 0)
		v /= 100;
	else if (end == s || *end != '\0')
		v = -1;
	if (!(v >= 0 && v <= 1)) {
		fprintf(stderr,
		        "%s: LEVEL '%s' must be 0..1 or a percentage "
		        "(e.g. 0.93 or 93%%)\n",
		        cmd->prog, s);
		return 2;
	}
	*out = v;
	return 0;
}

static int
run(ax_api_cmd *cmd, const char *level, const char *dur, const char *until,
    int clear)
{
	ax_api_path p;
	json_t     *body = NULL, *j = NULL;
	double      lv;
	int         rc;
	ax_err      rv;

	if (level != NULL && (rc = parse_level(cmd, level, &lv)) != 0)
		return rc;
	if (level != NULL && (dur == NULL) == (until == NULL)) {
		fprintf(stderr,
		        "%s: give --for DUR or --until T with LEVEL (a level "
		        "always expires)\n",
		        cmd->prog);
		return 2;
	}
	if (level == NULL && (dur != NULL || until != NULL)) {
		fprintf(stderr, "%s: --for and --until need a LEVEL\n",
		        cmd->prog);
		return 2;
	}
	if (level != NULL && clear) {
		fprintf(stderr, "%s: --clear takes no LEVEL\n", cmd->prog);
		return 2;
	}
	ax_api_path_init(&p, "/api/v1/pools/");
	ax_api_path_seg(&p, cmd->pos[0]);
	ax_api_path_lit(&p, "/pressure");
	if (ax_api_cmd_connect(cmd) != 0)
		return 1;
	if (level != NULL) {
		body = json_pack("{s:f,s:s}", "level", lv,
		                 dur ? "expires_in" : "expires_at",
		                 dur ? dur : until);
		rv   = ax_api_client_json(cmd->client, "PUT",
		                          ax_api_path_str(&p), body, &j);
		json_decref(body);
	} else if (clear)
		rv = ax_api_client_json(cmd->client, "DELETE",
		                        ax_api_path_str(&p), NULL, &j);
	else
		rv = ax_api_client_get(cmd->client, ax_api_path_str(&p), &j);
	if (rv != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json)
		ax_api_cmd_print_json(j);
	else
		printf("pool %s: level %g until %s (%s)%s%s\n",
		       json_string_value(json_object_get(j, "name")),
		       json_number_value(json_object_get(j, "level")),
		       json_string_value(json_object_get(j, "expires_at")),
		       clear ? "withdrawn"
		           : json_is_true(json_object_get(j, "in_force"))
		           ? "in force"
		           : "expired",
		       clear ? "" : ", set by ",
		       clear
		           ? ""
		           : json_string_value(json_object_get(j, "set_by")));
	json_decref(j);
	return 0;
}

int
ax_cmd_pool(int argc, char **argv)
{
	const char       *dur = NULL, *until = NULL;
	int               clear   = 0;
	const ax_api_flag flags[] = {
		{ .name = "--for", .value = &dur },
		{ .name = "--until", .value = &until },
		{ .name = "--clear", .set = &clear },
		{ 0 },
	};
	static const char *const subs[] = { "pressure" };
	ax_api_cmd               cmd    = { .prog = "axctl pool pressure" };
	int                      rc;

	if (!ax_api_cmd_sub("axctl pool", subs, 1, argc, argv, usage, &rc))
		return rc;
	rc = ax_api_cmd_parse(&cmd, argc - 1, argv + 1, flags, 1, 2);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc == 0)
		rc = run(&cmd, cmd.npos > 1 ? cmd.pos[1] : NULL, dur, until,
		         clear);
	ax_api_cmd_fini(&cmd);
	return rc;
}
