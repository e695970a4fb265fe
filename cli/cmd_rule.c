/*
 * cmd_rule.c - `axctl rule add|list|rm|test`: Allow/Block rules through a
 * running ax-api (/api/v1/rules, api-server/api_rules.h).
 *
 * Role: the operator's switch for whole links ("block P3 from 20:00 to
 * 23:00 Asia/Shanghai on the promotion day"). The flags build the rule's
 * JSON (engine/rule.h); the server validates it, so every error names the
 * member and the fix the same way the API does. axd applies a change
 * within a second. Exit status: 0 success, 1 failure, 2 usage error.
 */
#include "cmd_rule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_cmd.h"
#include "table.h"

#define MAX_LIST 32

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl rule add --block|--allow MATCH... [WHEN...] "
	    "[--note TEXT]\n"
	    "       axctl rule list\n"
	    "       axctl rule rm ID\n"
	    "       axctl rule test ID | axctl rule test --block|--allow "
	    "MATCH... [WHEN...]\n"
	    "       (all with [--server URL] [--token-file FILE] [--json])\n"
	    "\n"
	    "Allow and Block rules: a Block holds the matching instances at\n"
	    "admission (reason RULE_BLOCKED, or CHANNEL_BLOCKED for a block\n"
	    "on the channel alone, with the rule id) until the rule goes or\n"
	    "its window closes; axd applies a change within a second.\n"
	    "MATCH (every one given must match; at least one):\n"
	    "  --channel P0|Px|k8s|biz     the task's channel\n"
	    "  --tier P0..P3               the DAG's impact (repeatable)\n"
	    "  --priority-min N, --priority-max N   task priority 0..100\n"
	    "  --dag GLOB                  DAG name (*, ?, [...])\n"
	    "  --owner NAME, --tag TAG, --worker-group NAME\n"
	    "WHEN:\n"
	    "  --window HH:MM-HH:MM        local wall time (start > end\n"
	    "                              crosses midnight)\n"
	    "  --tz ZONE                   IANA zone of the window (UTC)\n"
	    "  --days mon,tue,...          days the window opens on\n"
	    "  --dates YYYY-MM-DD,...      dates the window opens on\n"
	    "  --expires-at ISO            the rule ends (with an offset)\n"
	    "Precedence: the most specific matching rule in force decides\n"
	    "(one point per MATCH flag, two for an exact --dag); at equal\n"
	    "specificity Block wins. An Allow only carves an exception out\n"
	    "of a Block.\n"
	    "  list  every rule, whether it is in force now\n"
	    "  rm    deletes a rule; what it held is released\n"
	    "  test  the pending instances the rule holds now (and the\n"
	    "        ready ones it matches, already admitted: not recalled);\n"
	    "        with flags instead of ID, for a rule not created yet\n"
	    "Writes need an operator token; list and test a viewer's.\n"
	    "\n" AX_API_OPTS_HELP);
}

typedef struct rule_args {
	ax_api_cmd  cmd;
	int         block, allow;
	const char *channel, *pmin, *pmax, *dag, *owner, *tag, *group;
	const char *window, *tz, *days, *dates, *expires_at, *note;
	const char *tiers[MAX_LIST];
	int         ntiers;
} rule_args;

/* A number as a JSON integer, anything else as a string (the server
 * names the member and what it wants). */
static json_t *
num_or_str(const char *s)
{
	char *end;
	long  v = strtol(s, &end, 10);
	return *s != '\0' && *end == '\0' ? json_integer(v) : json_string(s);
}

/* "a,b,c" as a JSON array of strings. */
static json_t *
list_of(const char *s)
{
	json_t     *a = json_array();
	const char *p = s;

	while (a != NULL) {
		size_t n = strcspn(p, ",");
		json_array_append_new(a, json_stringn(p, n));
		if (p[n] == '\0')
			break;
		p += n + 1;
	}
	return a;
}

static void
set_str(json_t *o, const char *key, const char *v)
{
	if (v != NULL)
		json_object_set_new(o, key, json_string(v));
}

/* The rule the flags describe, or NULL after a usage error. */
static json_t *
rule_body(const rule_args *a)
{
	const char *prog = a->cmd.prog;
	json_t     *o;

	if (a->block == a->allow) {
		fprintf(stderr, "%s: give --block or --allow\n", prog);
		return NULL;
	}
	if ((a->tz || a->days || a->dates) && a->window == NULL) {
		fprintf(stderr,
		        "%s: --tz, --days and --dates need --window "
		        "HH:MM-HH:MM\n",
		        prog);
		return NULL;
	}
	if (a->window != NULL && strchr(a->window, '-') == NULL) {
		fprintf(stderr,
		        "%s: --window: write HH:MM-HH:MM (e.g. 20:00-23:00)\n",
		        prog);
		return NULL;
	}
	o = json_pack("{s:s}", "action", a->block ? "block" : "allow");
	if (o == NULL)
		return NULL;
	set_str(o, "channel", a->channel);
	if (a->ntiers == 1)
		set_str(o, "tier", a->tiers[0]);
	else if (a->ntiers > 1) {
		json_t *t = json_array();
		for (int i = 0; i < a->ntiers; i++)
			json_array_append_new(t, json_string(a->tiers[i]));
		json_object_set_new(o, "tier", t);
	}
	if (a->pmin != NULL)
		json_object_set_new(o, "priority_min", num_or_str(a->pmin));
	if (a->pmax != NULL)
		json_object_set_new(o, "priority_max", num_or_str(a->pmax));
	set_str(o, "dag", a->dag);
	set_str(o, "owner", a->owner);
	set_str(o, "tag", a->tag);
	set_str(o, "worker_group", a->group);
	set_str(o, "expires_at", a->expires_at);
	set_str(o, "note", a->note);
	if (a->window != NULL) {
		const char *dash = strchr(a->window, '-');
		json_t     *w =
		    json_pack("{s:s%,s:s}", "start", a->window,
		              (size_t) (dash - a->window), "end", dash + 1);
		set_str(w, "tz", a->tz);
		if (a->days != NULL)
			json_object_set_new(w, "days", list_of(a->days));
		if (a->dates != NULL)
			json_object_set_new(w, "dates", list_of(a->dates));
		json_object_set_new(o, "window", w);
	}
	return o;
}

/* The match and window of a rule's spec, in one line. */
static void
describe(json_t *spec, char *buf, size_t len)
{
	static const char *const keys[] = { "channel",      "tier",
		                            "priority_min", "priority_max",
		                            "dag",          "owner",
		                            "tag",          "worker_group" };
	size_t                   used   = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(spec, keys[i]);
		char   *t;
		if (v == NULL)
			continue;
		t = json_is_string(v)
		    ? strdup(json_string_value(v))
		    : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		used +=
		    (size_t) snprintf(buf + used, len - used, "%s%s=%s",
		                      used ? " " : "", keys[i], t ? t : "?");
		free(t);
		if (used >= len)
			return;
	}
}

static void
window_text(json_t *spec, char *buf, size_t len)
{
	json_t *w = json_object_get(spec, "window");
	char   *days, *dates;

	if (w == NULL) {
		snprintf(buf, len, "always");
		return;
	}
	days  = json_dumps(json_object_get(w, "days"), JSON_COMPACT);
	dates = json_dumps(json_object_get(w, "dates"), JSON_COMPACT);
	snprintf(buf, len, "%s-%s %s%s%s%s%s",
	         json_string_value(json_object_get(w, "start")),
	         json_string_value(json_object_get(w, "end")),
	         json_object_get(w, "tz")
	             ? json_string_value(json_object_get(w, "tz"))
	             : "UTC",
	         days ? " days=" : "", days ? days : "",
	         dates ? " dates=" : "", dates ? dates : "");
	free(days);
	free(dates);
}

static void
print_list(json_t *j)
{
	static const char *const hdr[] = { "ID",    "ACTION", "IN FORCE",
		                           "MATCH", "WINDOW", "EXPIRES",
		                           "BY",    "CREATED" };
	ax_table                *t     = ax_table_new(8, hdr);
	json_t                  *e;
	size_t                   i;

	if (t == NULL)
		return;
	json_array_foreach(json_object_get(j, "rules"), i, e)
	{
		char        id[24], match[400], win[200], exp[64], cr[64];
		json_t     *spec = json_object_get(e, "spec");
		const char *row[8];
		snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT,
		         json_integer_value(json_object_get(e, "id")));
		describe(spec, match, sizeof(match));
		window_text(spec, win, sizeof(win));
		ax_table_text(json_object_get(e, "expires_at"), exp,
		              sizeof(exp));
		ax_table_text(json_object_get(e, "created_at"), cr,
		              sizeof(cr));
		row[0] = id;
		row[1] = json_string_value(json_object_get(e, "action"));
		row[2] = json_is_true(json_object_get(e, "in_force")) ? "yes"
		                                                      : "no";
		row[3] = match;
		row[4] = win;
		row[5] = exp;
		row[6] = json_string_value(json_object_get(e, "created_by"));
		row[7] = cr;
		ax_table_add(t, row);
	}
	ax_table_print(t, stdout);
	ax_table_free(t);
}

static void
print_instances(json_t *arr)
{
	static const char *const hdr[]  = { "ID", "DAG", "TASK", "STATE",
		                            "REASON" };
	static const char *const keys[] = { "id", "dag", "task", "state",
		                            "reason" };
	ax_table                *t      = ax_table_new(5, hdr);
	json_t                  *e;
	size_t                   i;

	if (t == NULL)
		return;
	json_array_foreach(arr, i, e) ax_table_add_json(t, e, keys);
	ax_table_print(t, stdout);
	ax_table_free(t);
}

static void
print_test(json_t *j)
{
	json_t *held = json_object_get(j, "instances");
	json_t *adm  = json_object_get(j, "admitted");

	printf("%s: %s; holds %zu pending instance(s)%s\n",
	       json_is_integer(json_object_get(j, "rule"))
	           ? "rule"
	           : "the rule (not created)",
	       json_is_true(json_object_get(j, "in_force"))
	           ? "in force now"
	           : "not in force now (window closed or expired)",
	       json_array_size(held),
	       json_is_true(json_object_get(j, "truncated"))
	           ? " among the first 10000 looked at"
	           : "");
	if (json_array_size(held) > 0)
		print_instances(held);
	if (json_array_size(adm) > 0) {
		printf("matches %zu ready instance(s) already admitted (not "
		       "recalled):\n",
		       json_array_size(adm));
		print_instances(adm);
	}
}

/* Runs sub through ax-api; *out gets the answer. */
static int
run(rule_args *a, const char *sub, json_t **out)
{
	ax_api_path  p;
	ax_api_reply rep = { 0 };
	json_t      *body;
	int64_t      id;
	ax_err       rv;

	if ((!strcmp(sub, "rm") || (!strcmp(sub, "test") && a->cmd.npos)) &&
	    ax_api_cmd_id(&a->cmd, "ID", a->cmd.pos[0], &id) != 0)
		return 2;
	if (!strcmp(sub, "add") || (!strcmp(sub, "test") && !a->cmd.npos)) {
		if ((body = rule_body(a)) == NULL)
			return 2;
		if (ax_api_cmd_connect(&a->cmd) != 0) {
			json_decref(body);
			return 1;
		}
		rv = ax_api_client_post(a->cmd.client,
		                        !strcmp(sub, "add")
		                            ? "/api/v1/rules"
		                            : "/api/v1/rules/test",
		                        body, out);
		json_decref(body);
		return rv == AX_OK ? 0 : ax_api_cmd_fail(&a->cmd);
	}
	if (ax_api_cmd_connect(&a->cmd) != 0)
		return 1;
	if (!strcmp(sub, "list")) {
		rv = ax_api_client_get(a->cmd.client, "/api/v1/rules", out);
		return rv == AX_OK ? 0 : ax_api_cmd_fail(&a->cmd);
	}
	ax_api_path_init(&p, "/api/v1/rules/");
	ax_api_path_seg(&p, a->cmd.pos[0]);
	if (!strcmp(sub, "test")) {
		ax_api_path_lit(&p, "/test");
		rv =
		    ax_api_client_get(a->cmd.client, ax_api_path_str(&p), out);
		return rv == AX_OK ? 0 : ax_api_cmd_fail(&a->cmd);
	}
	rv = ax_api_client_call(a->cmd.client, "DELETE", ax_api_path_str(&p),
	                        NULL, NULL, 0, NULL, &rep);
	if (rv == AX_OK)
		*out = json_incref(rep.json);
	ax_api_reply_fini(&rep);
	return rv == AX_OK ? 0 : ax_api_cmd_fail(&a->cmd);
}

int
ax_cmd_rule(int argc, char **argv)
{
	static const char *const subs[] = { "add", "list", "rm", "test" };
	rule_args                a      = { 0 };
	const char              *sub    = argc > 1 ? argv[1] : "";
	char                     prog[32];
	const ax_api_flag        flags[] = {
		       { .name = "--block", .set = &a.block },
		       { .name = "--allow", .set = &a.allow },
		       { .name = "--channel", .value = &a.channel },
		       { .name  = "--tier",
		         .many  = a.tiers,
		         .nmany = &a.ntiers,
		         .cap   = MAX_LIST },
		       { .name = "--priority-min", .value = &a.pmin },
		       { .name = "--priority-max", .value = &a.pmax },
		       { .name = "--dag", .value = &a.dag },
		       { .name = "--owner", .value = &a.owner },
		       { .name = "--tag", .value = &a.tag },
		       { .name = "--worker-group", .value = &a.group },
		       { .name = "--window", .value = &a.window },
		       { .name = "--tz", .value = &a.tz },
		       { .name = "--days", .value = &a.days },
		       { .name = "--dates", .value = &a.dates },
		       { .name = "--expires-at", .value = &a.expires_at },
		       { .name = "--note", .value = &a.note },
		       { 0 },
	};
	json_t *out = NULL;
	int     rc, with_id;

	if (!ax_api_cmd_sub("axctl rule", subs, sizeof(subs) / sizeof(subs[0]),
	                    argc, argv, usage, &rc))
		return rc;
	snprintf(prog, sizeof(prog), "axctl rule %s", sub);
	a.cmd.prog = prog;
	with_id    = !strcmp(sub, "rm");
	rc = ax_api_cmd_parse(&a.cmd, argc - 1, argv + 1, flags, with_id,
	                      with_id || !strcmp(sub, "test"));
	if (rc < 0) {
		usage(stdout);
		return 0;
	}
	if (rc != 0)
		return rc;
	if ((!strcmp(sub, "list") || !strcmp(sub, "rm") ||
	     (!strcmp(sub, "test") && a.cmd.npos)) &&
	    (a.block || a.allow)) {
		fprintf(stderr, "%s: takes no rule flags\n", prog);
		ax_api_cmd_fini(&a.cmd);
		return 2;
	}
	if ((rc = run(&a, sub, &out)) == 0) {
		if (a.cmd.opts.json)
			ax_api_cmd_print_json(out);
		else if (!strcmp(sub, "list"))
			print_list(out);
		else if (!strcmp(sub, "test"))
			print_test(out);
		else
			printf("rule %" JSON_INTEGER_FORMAT " %s\n",
			       json_integer_value(json_object_get(out, "id")),
			       !strcmp(sub, "add") ? "created" : "deleted");
	}
	json_decref(out);
	ax_api_cmd_fini(&a.cmd);
	return rc;
}
