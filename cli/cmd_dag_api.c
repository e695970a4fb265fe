/*
 * cmd_dag_api.c - `axctl dag submit|list|show|pause|unpause|trigger|
 * backfill`: the DAG routes of ax-api, and the `dag` group dispatcher.
 *
 * Role: the offline subcommands (`validate`, `json`, `load`) stay in
 * cmd_dag.c and need no server; everything here goes over HTTP
 * (api_client.h). `submit` sends each FILE as its own request so the
 * server names FILE in its error positions, printed as
 * FILE:LINE:COL: error: MESSAGE like `axctl dag validate` does.
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#include "cmd_dag_api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_cmd.h"
#include "cmd_command.h"
#include "cmd_dag.h"
#include "table.h"

#define MAX_PARAMS 64

/* What the state-changing subcommands share: each request is a durable
 * command on the server (cmd_command.h). */
typedef struct change_opts {
	int         wait;       /* --wait: until applied or rejected */
	int64_t     timeout_us; /* --timeout */
	const char *idem_key;   /* --idempotency-key */
} change_opts;

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl dag submit FILE... [--wait]\n"
	    "       axctl dag list\n"
	    "       axctl dag show NAME\n"
	    "       axctl dag pause NAME | unpause NAME [CHANGE]\n"
	    "       axctl dag trigger NAME [--date ISO] [--param K=V]... "
	    "[CHANGE]\n"
	    "       axctl dag backfill NAME --start ISO --end ISO\n"
	    "                          [--mode serial|parallel] [CHANGE]\n"
	    "       (all with [--server URL] [--token-file FILE] [--json])\n"
	    "  CHANGE: [--wait] [--timeout SECONDS] [--idempotency-key K]\n"
	    "\n"
	    "Through a running ax-api:\n"
	    "  submit    store DAG / TaskTemplate YAML files (admin token);\n"
	    "            errors as FILE:LINE:COL: error: MESSAGE\n"
	    "  list      DAGs with their active version and schedule\n"
	    "  show      one DAG: active version, schedule, tasks, versions\n"
	    "  pause     stop scheduling new runs; unpause resumes\n"
	    "  trigger   ask for a manual run (logical date default now;\n"
	    "            --param K=V adds a string param, repeatable)\n"
	    "  backfill  create runs for the schedule's periods whose\n"
	    "            logical date is in [start, end] (at most 1000)\n"
	    "\n"
	    "Each change is a command the scheduler applies once, also when\n"
	    "it was down at the time; its id is printed (`axctl command show\n"
	    "ID`). --wait waits until it is applied (printing e.g. the run\n"
	    "of a trigger) or rejected (exit 1), at most --timeout seconds\n"
	    "(default 60). --idempotency-key K: a repeat with the same K\n"
	    "gets the first answer and changes nothing again.\n"
	    "\n" AX_API_OPTS_HELP "\n");
}

/* ---- submit ------------------------------------------------------------- */

/* Reads a whole file (malloc'd, NUL-terminated). */
static char *
read_file(const char *path, size_t *len)
{
	FILE  *f   = fopen(path, "rb");
	char  *buf = NULL, *nb;
	size_t cap = 0, n = 0, got;

	if (f == NULL)
		return NULL;
	do {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			if ((nb = realloc(buf, cap)) == NULL) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	if (ferror(f)) {
		free(buf);
		fclose(f);
		errno = EIO;
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len   = n;
	return buf;
}

/* FILE:LINE:COL: error: MESSAGE for each entry of a 422's "errors". */
static size_t
print_diags(json_t *errs, const char *file)
{
	size_t  i;
	json_t *d;

	json_array_foreach(errs, i, d)
	{
		const char *f = json_string_value(json_object_get(d, "file"));
		const char *m =
		    json_string_value(json_object_get(d, "message"));
		fprintf(
		    stderr, "%s:%lld:%lld: error: %s\n", f && *f ? f : file,
		    (long long) json_integer_value(json_object_get(d, "line")),
		    (long long) json_integer_value(
		        json_object_get(d, "column")),
		    m ? m : "");
	}
	return json_array_size(errs);
}

static void
add_results(ax_table *t, json_t *arr, const char *kind)
{
	size_t  i;
	json_t *o;
	char    name[256], ver[32], id[32];

	json_array_foreach(arr, i, o)
	{
		const char *cells[5] = {
			kind,
			ax_table_text(json_object_get(o, "name"), name,
			              sizeof(name)),
			json_string_value(json_object_get(o, "outcome")),
			NULL,
			ax_table_text(json_object_get(o, "id"), id,
			              sizeof(id)),
		};
		snprintf(ver, sizeof(ver), "v%lld",
		         (long long) json_integer_value(
		             json_object_get(o, "version")));
		cells[3] = ver;
		ax_table_add(t, cells);
	}
}

/* Submits one file; 0 ok, 1 failed, -1 server unreachable (stop). The
 * answer's command id goes to *cid (0: none). */
static int
submit_one(ax_api_cmd *cmd, const char *file, ax_table *t, int64_t *cid)
{
	ax_api_reply rep = { 0 };
	ax_api_path  p;
	size_t       len  = 0;
	char        *yaml = read_file(file, &len);
	ax_err       rv;
	int          rc = 0;

	if (yaml == NULL) {
		fprintf(stderr, "%s: cannot read %s: %s\n", cmd->prog, file,
		        strerror(errno));
		return 1;
	}
	ax_api_path_init(&p, "/api/v1/dags");
	ax_api_path_query(&p, "file", file);
	rv = ax_api_client_call(cmd->client, "POST", ax_api_path_str(&p),
	                        "application/yaml", yaml, len, NULL, &rep);
	if (cmd->opts.json && rep.json != NULL)
		ax_api_cmd_print_json(rep.json);
	if (rv == AX_OK) {
		*cid = json_integer_value(
		    json_object_get(rep.json, "command_id"));
		add_results(t, json_object_get(rep.json, "templates"),
		            "template");
		add_results(t, json_object_get(rep.json, "dags"), "dag");
	} else if (rep.status == 422) {
		size_t n =
		    print_diags(json_object_get(rep.json, "errors"), file);
		fprintf(stderr, "%s: %zu error%s\n", file, n,
		        n == 1 ? "" : "s");
		rc = 1;
	} else {
		ax_api_cmd_fail(cmd);
		rc = rep.status == 0 ? -1 : 1;
	}
	ax_api_reply_fini(&rep);
	free(yaml);
	return rc;
}

static int
cmd_submit(ax_api_cmd *cmd, const change_opts *ch)
{
	static const char *const hdr[] = { "KIND", "NAME", "OUTCOME",
		                           "VERSION", "ID" };
	ax_table                *t     = ax_table_new(5, hdr);
	int64_t                  cids[AX_API_CMD_MAX_POS] = { 0 };
	int                      failed                   = 0;

	if (t == NULL)
		return 1;
	for (int i = 0; i < cmd->npos; i++) {
		int r = submit_one(cmd, cmd->pos[i], t, &cids[i]);
		if (r != 0)
			failed = 1;
		if (r < 0)
			break;
	}
	if (!cmd->opts.json && ax_table_rows(t) > 0)
		ax_table_print(t, stdout);
	ax_table_free(t);
	for (int i = 0; i < cmd->npos; i++) {
		json_t *a;
		if (cids[i] <= 0)
			continue;
		a = json_pack("{s:I}", "command_id", (json_int_t) cids[i]);
		if (!cmd->opts.json)
			printf("%s: ", cmd->pos[i]);
		if (ax_cmd_command_after(cmd, a, ch->wait, ch->timeout_us))
			failed = 1;
		if (cmd->opts.json && ch->wait)
			ax_api_cmd_print_json(json_object_get(a, "command"));
		json_decref(a);
	}
	return failed;
}

/* ---- list / show -------------------------------------------------------- */

/* "0 30 2 * * ? (Asia/Shanghai)", "every 5m", "at ...", "-". */
static const char *
schedule_text(json_t *s, char *buf, size_t len)
{
	const char *kind = json_string_value(json_object_get(s, "kind"));
	const char *tz   = json_string_value(json_object_get(s, "timezone"));
	char        v[200];

	if (kind == NULL || strcmp(kind, "none") == 0)
		return strcpy(buf, "-");
	ax_table_text(json_object_get(s, kind), v, sizeof(v));
	if (strcmp(kind, "cron") == 0)
		snprintf(buf, len, "%s%s%s%s", v, tz ? " (" : "", tz ? tz : "",
		         tz ? ")" : "");
	else
		snprintf(buf, len, "%s %s", kind, v);
	return buf;
}

static int
cmd_list(ax_api_cmd *cmd)
{
	static const char *const hdr[] = { "NAME",  "VERSION",  "PAUSED",
		                           "OWNER", "SCHEDULE", "UPDATED" };
	json_t                  *j, *d;
	ax_table                *t;
	size_t                   i;

	if (ax_api_client_get(cmd->client, "/api/v1/dags?limit=1000", &j) !=
	    AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json) {
		ax_api_cmd_print_json(j);
		json_decref(j);
		return 0;
	}
	if ((t = ax_table_new(6, hdr)) == NULL) {
		json_decref(j);
		return 1;
	}
	json_array_foreach(json_object_get(j, "dags"), i, d)
	{
		char                     c[6][256];
		const char              *cells[6];
		static const char *const keys[] = { "name", "version",
			                            "paused", "owner" };
		for (int k = 0; k < 4; k++)
			cells[k] = ax_table_text(json_object_get(d, keys[k]),
			                         c[k], sizeof(c[k]));
		cells[4] = schedule_text(json_object_get(d, "schedule"), c[4],
		                         sizeof(c[4]));
		cells[5] = ax_table_text(json_object_get(d, "updated_at"),
		                         c[5], sizeof(c[5]));
		ax_table_add(t, cells);
	}
	ax_table_print(t, stdout);
	ax_table_free(t);
	json_decref(j);
	return 0;
}

static void
print_tasks(json_t *tasks)
{
	static const char *const hdr[]  = { "TASK", "TYPE", "DEPENDS_ON" };
	static const char *const keys[] = { "name", "type", "depends_on" };
	ax_table                *t      = ax_table_new(3, hdr);
	size_t                   i;
	json_t                  *o;

	if (t == NULL)
		return;
	json_array_foreach(tasks, i, o) ax_table_add_json(t, o, keys);
	printf("\n");
	ax_table_print(t, stdout);
	ax_table_free(t);
}

static int
cmd_show(ax_api_cmd *cmd)
{
	static const char *const keys[] = {
		"name",       "id",           "paused",       "version",
		"version_id", "content_hash", "source",       "created_at",
		"updated_at", "next_fire_at", "last_fire_at", NULL
	};
	static const char *const vhdr[]  = { "VERSION", "ACTIVE", "HASH",
		                             "SOURCE", "CREATED" };
	static const char *const vkeys[] = { "version", "active",
		                             "content_hash", "source",
		                             "created_at" };
	ax_api_path              p;
	json_t                  *j, *v = NULL, *def, *o;
	char                     sched[256];
	size_t                   i;

	ax_api_path_init(&p, "/api/v1/dags/");
	ax_api_path_seg(&p, cmd->pos[0]);
	if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &j) != AX_OK)
		return ax_api_cmd_fail(cmd);
	if (cmd->opts.json) {
		ax_api_cmd_print_json(j);
		json_decref(j);
		return 0;
	}
	def = json_object_get(j, "definition");
	ax_table_print_kv(stdout, j, keys);
	printf("schedule:     %s\n",
	       schedule_text(json_object_get(def, "schedule"), sched,
	                     sizeof(sched)));
	print_tasks(json_object_get(def, "tasks"));
	ax_api_path_lit(&p, "/versions");
	if (ax_api_client_get(cmd->client, ax_api_path_str(&p), &v) == AX_OK) {
		ax_table *t = ax_table_new(5, vhdr);
		json_array_foreach(json_object_get(v, "versions"), i, o)
		    ax_table_add_json(t, o, vkeys);
		printf("\n");
		if (t != NULL)
			ax_table_print(t, stdout);
		ax_table_free(t);
	}
	json_decref(v);
	json_decref(j);
	return 0;
}

/* ---- pause / trigger / backfill ----------------------------------------- */

/* POSTs body to /api/v1/dags/NAME/verb. */
static int
dag_post(ax_api_cmd *cmd, const char *verb, json_t *body, json_t **out)
{
	ax_api_path p;

	ax_api_path_init(&p, "/api/v1/dags/");
	ax_api_path_seg(&p, cmd->pos[0]);
	ax_api_path_lit(&p, "/");
	ax_api_path_lit(&p, verb);
	if (ax_api_client_post(cmd->client, ax_api_path_str(&p), body, out) !=
	    AX_OK)
		return ax_api_cmd_fail(cmd);
	return 0;
}

/* After the text of a change: its command (printed, waited for with
 * --wait), then the JSON with --json (with "command" after a wait). */
static int
dag_after(ax_api_cmd *cmd, const change_opts *ch, json_t *answer)
{
	int rc = ax_cmd_command_after(cmd, answer, ch->wait, ch->timeout_us);

	if (cmd->opts.json)
		ax_api_cmd_print_json(answer);
	return rc;
}

static int
cmd_pause(ax_api_cmd *cmd, int paused, const change_opts *ch)
{
	json_t *j  = NULL;
	int     rc = dag_post(cmd, paused ? "pause" : "unpause", NULL, &j);

	if (rc == 0 && !cmd->opts.json)
		printf("%s %s\n", paused ? "paused" : "unpaused", cmd->pos[0]);
	if (rc == 0)
		rc = dag_after(cmd, ch, j);
	json_decref(j);
	return rc;
}

static int
cmd_trigger(ax_api_cmd *cmd, const char *date, const char **params,
            int nparams, const change_opts *ch)
{
	json_t *b = json_object(), *pj = json_object(), *j = NULL;
	int     rc;

	for (int i = 0; i < nparams; i++) {
		const char *eq = strchr(params[i], '=');
		if (eq == NULL || eq == params[i]) {
			fprintf(stderr,
			        "%s: --param wants KEY=VALUE, got '%s'\n",
			        cmd->prog, params[i]);
			json_decref(b);
			json_decref(pj);
			return 2;
		}
		char key[256];
		snprintf(key, sizeof(key), "%.*s", (int) (eq - params[i]),
		         params[i]);
		json_object_set_new(pj, key, json_string(eq + 1));
	}
	if (date != NULL)
		json_object_set_new(b, "logical_date", json_string(date));
	json_object_set_new(b, "params", pj);
	rc = dag_post(cmd, "trigger", b, &j);
	if (rc == 0 && !cmd->opts.json) {
		char ld[64];
		printf("triggered %s: logical date %s (the scheduler creates "
		       "the run)\n",
		       cmd->pos[0],
		       ax_table_text(json_object_get(j, "logical_date"), ld,
		                     sizeof(ld)));
		if (json_is_true(json_object_get(j, "paused")))
			printf("note: %s is paused; the run waits until "
			       "`axctl dag unpause %s`\n",
			       cmd->pos[0], cmd->pos[0]);
	}
	if (rc == 0)
		rc = dag_after(cmd, ch, j);
	json_decref(b);
	json_decref(j);
	return rc;
}

static int
cmd_backfill(ax_api_cmd *cmd, const char *start, const char *end,
             const char *mode, const change_opts *ch)
{
	static const char *const hdr[]  = { "RUN", "LOGICAL_DATE" };
	static const char *const keys[] = { "id", "logical_date" };
	json_t                  *b, *j = NULL, *o;
	size_t                   i;
	int                      rc;

	if (start == NULL || end == NULL) {
		fprintf(stderr, "%s: --start and --end are required\n",
		        cmd->prog);
		return 2;
	}
	if (mode != NULL && strcmp(mode, "serial") != 0 &&
	    strcmp(mode, "parallel") != 0) {
		fprintf(stderr,
		        "%s: --mode must be serial or parallel, got '%s'\n",
		        cmd->prog, mode);
		return 2;
	}
	b  = json_pack("{s:s,s:s,s:s}", "start", start, "end", end, "mode",
                      mode ? mode : "serial");
	rc = dag_post(cmd, "backfill", b, &j);
	json_decref(b);
	if (rc == 0 && !cmd->opts.json) {
		ax_table *t = ax_table_new(2, hdr);
		printf("backfill %s (%s): %lld run%s created, %lld skipped "
		       "(already there)\n",
		       cmd->pos[0], mode ? mode : "serial",
		       (long long) json_integer_value(
		           json_object_get(j, "created")),
		       json_integer_value(json_object_get(j, "created")) == 1
		           ? ""
		           : "s",
		       (long long) json_integer_value(
		           json_object_get(j, "skipped")));
		json_array_foreach(json_object_get(j, "runs"), i, o)
		    ax_table_add_json(t, o, keys);
		if (t != NULL && ax_table_rows(t) > 0)
			ax_table_print(t, stdout);
		ax_table_free(t);
	}
	if (rc == 0)
		rc = dag_after(cmd, ch, j);
	json_decref(j);
	return rc;
}

/* ---- dispatch ----------------------------------------------------------- */

static int
is_api_sub(const char *s)
{
	static const char *const subs[] = { "submit",   "list",    "show",
		                            "pause",    "unpause", "trigger",
		                            "backfill", NULL };
	for (const char *const *p = subs; *p; p++)
		if (strcmp(*p, s) == 0)
			return 1;
	return 0;
}

static int
run_sub(int argc, char **argv)
{
	const char *sub = argv[0], *date = NULL, *start = NULL, *end = NULL,
	           *mode = NULL, *timeout = NULL;
	change_opts ch = { 0 };
	const char *params[MAX_PARAMS];
	int         nparams = 0, rc, min = 1, max = 1;
	char        prog[64];
	ax_api_cmd  cmd = { 0 };

	const ax_api_flag trigger_flags[] = {
		{ .name = "--date", .value = &date },
		{ .name  = "--param",
		  .many  = params,
		  .nmany = &nparams,
		  .cap   = MAX_PARAMS },
		{ .name = "--wait", .set = &ch.wait },
		{ .name = "--timeout", .value = &timeout },
		{ .name = "--idempotency-key", .value = &ch.idem_key },
		{ 0 },
	};
	const ax_api_flag backfill_flags[] = {
		{ .name = "--start", .value = &start },
		{ .name = "--end", .value = &end },
		{ .name = "--mode", .value = &mode },
		{ .name = "--wait", .set = &ch.wait },
		{ .name = "--timeout", .value = &timeout },
		{ .name = "--idempotency-key", .value = &ch.idem_key },
		{ 0 },
	};
	const ax_api_flag pause_flags[] = {
		{ .name = "--wait", .set = &ch.wait },
		{ .name = "--timeout", .value = &timeout },
		{ .name = "--idempotency-key", .value = &ch.idem_key },
		{ 0 },
	};
	const ax_api_flag submit_flags[] = {
		{ .name = "--wait", .set = &ch.wait },
		{ .name = "--timeout", .value = &timeout },
		{ 0 },
	};
	const ax_api_flag *flags = NULL;

	snprintf(prog, sizeof(prog), "axctl dag %s", sub);
	cmd.prog = prog;
	if (strcmp(sub, "list") == 0)
		min = max = 0;
	else if (strcmp(sub, "submit") == 0) {
		max   = AX_API_CMD_MAX_POS;
		flags = submit_flags;
	} else if (strcmp(sub, "trigger") == 0)
		flags = trigger_flags;
	else if (strcmp(sub, "backfill") == 0)
		flags = backfill_flags;
	else if (strcmp(sub, "pause") == 0 || strcmp(sub, "unpause") == 0)
		flags = pause_flags;
	rc = ax_api_cmd_parse(&cmd, argc, argv, flags, min, max);
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc != 0 ||
	    (rc = ax_cmd_command_timeout(&cmd, timeout, &ch.timeout_us)) != 0)
		return rc;
	if ((rc = ax_api_cmd_connect(&cmd)) != 0)
		return rc;
	if (ch.idem_key != NULL &&
	    ax_api_client_set_idempotency_key(cmd.client, ch.idem_key) !=
	        AX_OK) {
		fprintf(stderr, "%s: --idempotency-key: %s\n", cmd.prog,
		        ax_err_detail());
		ax_api_cmd_fini(&cmd);
		return 2;
	}
	if (strcmp(sub, "submit") == 0)
		rc = cmd_submit(&cmd, &ch);
	else if (strcmp(sub, "list") == 0)
		rc = cmd_list(&cmd);
	else if (strcmp(sub, "show") == 0)
		rc = cmd_show(&cmd);
	else if (strcmp(sub, "pause") == 0 || strcmp(sub, "unpause") == 0)
		rc = cmd_pause(&cmd, sub[0] == 'p', &ch);
	else if (strcmp(sub, "trigger") == 0)
		rc = cmd_trigger(&cmd, date, params, nparams, &ch);
	else
		rc = cmd_backfill(&cmd, start, end, mode, &ch);
	ax_api_cmd_fini(&cmd);
	return rc;
}

int
ax_cmd_dag_api(int argc, char **argv)
{
	if (argc >= 2 && is_api_sub(argv[1]))
		return run_sub(argc - 1, argv + 1);
	if (argc < 2)
		usage(stderr);
	else if (strcmp(argv[1], "--help") == 0 ||
	         strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		printf("Offline (no server):\n");
	}
	return ax_cmd_dag(argc, argv);
}
