/*
 * test_rule.c - Allow/Block rules (engine/rule.h): the error for each bad
 * rule, windows in a time zone (crossing midnight, days, dates, DST,
 * expiry), matching on each member, and the precedence of the decision.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "rule.h"
#include "utf8.h"

/* UTC microseconds of an ISO 8601 instant with an offset. */
static int64_t
at(const char *iso)
{
	int64_t us = 0;
	cr_assert_eq(ax_tz_parse_iso8601(iso, NULL, &us), AX_OK, "%s", iso);
	return us;
}

/* ---------------------------------------------------------------------- */
/* bad rules: each error names the member and the fix */

typedef struct bad_case {
	char json[200];
	char want[80]; /* a substring of the detail */
} bad_case;

static bad_case bads[] = {
	{ "[]", "must be a JSON object" },
	{ "{\"tier\":\"P3\"}", "action: required" },
	{ "{\"action\":\"deny\",\"tier\":\"P3\"}", "action: required" },
	{ "{\"action\":\"block\"}", "at least one of channel" },
	{ "{\"action\":\"block\",\"note\":\"x\"}", "\"dag\": \"*\"" },
	{ "{\"action\":\"block\",\"tiers\":\"P3\"}", "tiers: unknown member" },
	{ "{\"action\":\"block\",\"tier\":\"P4\"}", "tier: \"P4\" is not" },
	{ "{\"action\":\"block\",\"tier\":[]}", "tier: must be" },
	{ "{\"action\":\"block\",\"tier\":[\"P1\",7]}", "tier[1]" },
	{ "{\"action\":\"block\",\"channel\":\"Px2\"}", "use P0, Px, k8s" },
	{ "{\"action\":\"block\",\"channel\":\"\"}", "channel: must be" },
	{ "{\"action\":\"block\",\"dag\":3}", "dag: must be a non-empty" },
	{ "{\"action\":\"block\",\"priority_max\":101}",
	  "priority_max: must" },
	{ "{\"action\":\"block\",\"priority_min\":\"5\"}",
	  "priority_min: must" },
	{ "{\"action\":\"block\",\"priority_min\":60,\"priority_max\":50}",
	  "above priority_max" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":3}",
	  "window: must be an object" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"end\":\"23:"
	  "00\"}}",
	  "window.start: required" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"25:"
	  "00\",\"end\":\"23:00\"}}",
	  "window.start: \"25:00\" is not a time" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"8:"
	  "00\",\"end\":\"23:00\"}}",
	  "write HH:MM" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"20:00\"}}",
	  "start and end are equal" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"day\":[\"mon\"]}}",
	  "window.day: unknown member" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"days\":[\"monday\"]}}",
	  "window.days[0]" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"dates\":[\"2026-02-30\"]}}",
	  "window.dates[0]: \"2026-02-30\"" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"tz\":\"Asia/Shanghia\"}}",
	  "window.tz: unknown time zone" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"tz\":\"../etc/passwd\"}}",
	  "window.tz:" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"expires_at\":\"tomorrow\"}",
	  "expires_at: must be an ISO 8601" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"expires_at\":-5}",
	  "expires_at: must be" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"note\":7}", "note: must" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"tier\":\"P2\"}",
	  "not JSON" },
	{ "not json", "not JSON: 1:" },
	/* found by fuzz_rule: the parser's error quotes bytes that are not
	 * UTF-8, and the detail must still be answerable as JSON */
	{ "{\"action\":\"block\",\"dag\":\"[a-\",\"tagdow\":{\"start\":\"22:"
	  "00\",\"end\":\"02:00\",\"tz\":\"America/trNew_Y\304\213\372c\177",
	  "not JSON" },
	{ "{\"action\":\"block\",\"tier\":\"P3\",\"window\":{\"start\":\"20:"
	  "00\",\"end\":\"21:00\",\"tz\":\"Asia/\\u0001Shang\"}}",
	  "window.tz:" },
};

ParameterizedTestParameters(rule, bad)
{
	return cr_make_param_array(bad_case, bads,
	                           sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(bad_case *c, rule, bad)
{
	ax_rule r;
	ax_err  rv = ax_rule_parse_text(c->json, &r);

	cr_assert_neq(rv, AX_OK, "accepted %s", c->json);
	cr_assert(strstr(ax_err_detail(), c->want) != NULL,
	          "%s: detail \"%s\" does not say \"%s\"", c->json,
	          ax_err_detail(), c->want);
	cr_assert(ax_utf8_valid(ax_err_detail(), strlen(ax_err_detail())),
	          "%s: the detail is not UTF-8", c->json);
	cr_assert(strchr(ax_err_detail(), '\001') == NULL,
	          "%s: the detail holds a control character", c->json);
	ax_rule_fini(&r);
}

Test(rule, good_parse_normalises)
{
	ax_rule r;

	cr_assert_eq(ax_rule_parse_text(
	                 "{\"action\":\"allow\",\"channel\":\"px\",\"tier\":["
	                 "\"P2\",\"p3\"],\"dag\":\"etl_*\",\"priority_max\":"
	                 "40,\"window\":{\"tz\":\"Asia/Shanghai\",\"start\":"
	                 "\"20:00\",\"end\":\"23:00\",\"days\":[\"Sat\"]},"
	                 "\"expires_at\":\"2026-11-12T00:00:00+08:00\","
	                 "\"note\":\"promo\",\"id\":9}",
	                 &r),
	             AX_OK, "%s", ax_err_detail());
	cr_assert_eq(r.action, AX_RULE_ALLOW);
	cr_assert_str_eq(r.channel, "Px");
	cr_assert_eq(r.tiers, (1u << 2) | (1u << 3));
	cr_assert_eq(r.prio_max, 40);
	cr_assert_eq(r.prio_min, -1);
	cr_assert(r.dag_glob);
	cr_assert_eq(r.win.start, 20 * 3600);
	cr_assert_eq(r.win.end, 23 * 3600);
	cr_assert_eq(r.win.days, 1u << 6);
	cr_assert_eq(r.expires_us, at("2026-11-11T16:00:00Z"));
	cr_assert_eq(r.id, 9);
	cr_assert(ax_rule_needs_dag(&r));
	cr_assert(ax_rule_timed(&r));
	cr_assert_eq(ax_rule_specificity(&r), 4);
	ax_rule_fini(&r);
	ax_rule_fini(&r); /* safe twice */
}

/* ---------------------------------------------------------------------- */
/* windows and expiry */

typedef struct win_case {
	char what[64];
	char window[160]; /* the "window" member, or "" */
	char expires[40]; /* expires_at, or "" */
	char now[40];
	int  applies;
} win_case;

#define SH "\"tz\":\"Asia/Shanghai\","
#define NY "\"tz\":\"America/New_York\","

static win_case wins[] = {
	{ "no window", "", "", "2026-11-11T12:00:00Z", 1 },
	{ "before 20:00 Shanghai",
	  "{" SH "\"start\":\"20:00\",\"end\":\"23:00\"}", "",
	  "2026-11-11T19:59:59+08:00", 0 },
	{ "at 20:00 Shanghai", "{" SH "\"start\":\"20:00\",\"end\":\"23:00\"}",
	  "", "2026-11-11T20:00:00+08:00", 1 },
	{ "same instant in UTC",
	  "{" SH "\"start\":\"20:00\",\"end\":\"23:00\"}", "",
	  "2026-11-11T12:00:00Z", 1 },
	{ "end is exclusive", "{" SH "\"start\":\"20:00\",\"end\":\"23:00\"}",
	  "", "2026-11-11T23:00:00+08:00", 0 },
	{ "UTC by default", "{\"start\":\"20:00\",\"end\":\"23:00\"}", "",
	  "2026-11-11T20:30:00Z", 1 },
	{ "on the promotion date",
	  "{" SH "\"start\":\"20:00\",\"end\":\"23:00\",\"dates\":[\"2026-11-"
	  "11\"]}",
	  "", "2026-11-11T21:00:00+08:00", 1 },
	{ "not the day before",
	  "{" SH "\"start\":\"20:00\",\"end\":\"23:00\",\"dates\":[\"2026-11-"
	  "11\"]}",
	  "", "2026-11-10T21:00:00+08:00", 0 },
	{ "local date, not UTC date",
	  "{" SH "\"start\":\"00:00\",\"end\":\"02:00\",\"dates\":[\"2026-11-"
	  "11\"]}",
	  "", "2026-11-10T17:00:00Z", 1 }, /* 01:00 on the 11th local */
	{ "crossing midnight: evening",
	  "{\"start\":\"22:00\",\"end\":\"02:00\",\"days\":[\"fri\"]}", "",
	  "2026-11-13T23:30:00Z", 1 }, /* Friday */
	{ "crossing midnight: the night after",
	  "{\"start\":\"22:00\",\"end\":\"02:00\",\"days\":[\"fri\"]}", "",
	  "2026-11-14T01:59:00Z", 1 }, /* Saturday, opened Friday */
	{ "crossing midnight: closed at 02:00",
	  "{\"start\":\"22:00\",\"end\":\"02:00\",\"days\":[\"fri\"]}", "",
	  "2026-11-14T02:00:00Z", 0 },
	{ "crossing midnight: Saturday evening is not Friday's",
	  "{\"start\":\"22:00\",\"end\":\"02:00\",\"days\":[\"fri\"]}", "",
	  "2026-11-14T22:30:00Z", 0 },
	{ "crossing midnight: Friday small hours opened Thursday",
	  "{\"start\":\"22:00\",\"end\":\"02:00\",\"days\":[\"fri\"]}", "",
	  "2026-11-13T01:00:00Z", 0 },
	{ "days of week: Monday",
	  "{\"start\":\"09:00\",\"end\":\"10:00\","
	  "\"days\":[\"mon\",\"wed\"]}",
	  "", "2026-11-16T09:30:00Z", 1 },
	{ "days of week: Tuesday",
	  "{\"start\":\"09:00\",\"end\":\"10:00\","
	  "\"days\":[\"mon\",\"wed\"]}",
	  "", "2026-11-17T09:30:00Z", 0 },
	/* DST: New York springs forward 2026-03-08 02:00 -> 03:00 and falls
	 * back 2026-11-01 02:00 -> 01:00; the window follows wall time */
	{ "DST: 20:00 local in winter (UTC-5)",
	  "{" NY "\"start\":\"20:00\",\"end\":\"21:00\"}", "",
	  "2026-03-07T01:30:00Z", 1 },
	{ "DST: 20:00 local in summer (UTC-4)",
	  "{" NY "\"start\":\"20:00\",\"end\":\"21:00\"}", "",
	  "2026-03-09T00:30:00Z", 1 },
	{ "DST: an hour off in summer is outside",
	  "{" NY "\"start\":\"20:00\",\"end\":\"21:00\"}", "",
	  "2026-03-09T01:30:00Z", 0 },
	{ "DST: start in the spring gap opens after it",
	  "{" NY "\"start\":\"02:30\",\"end\":\"04:00\"}", "",
	  "2026-03-08T07:00:00Z", 1 }, /* 03:00 EDT, first instant after */
	{ "DST: just before the gap",
	  "{" NY "\"start\":\"02:30\",\"end\":\"04:00\"}", "",
	  "2026-03-08T06:59:59Z", 0 }, /* 01:59:59 EST */
	{ "DST: repeated hour, first time",
	  "{" NY "\"start\":\"01:00\",\"end\":\"02:00\"}", "",
	  "2026-11-01T05:30:00Z", 1 }, /* 01:30 EDT */
	{ "DST: repeated hour, second time",
	  "{" NY "\"start\":\"01:00\",\"end\":\"02:00\"}", "",
	  "2026-11-01T06:30:00Z", 1 }, /* 01:30 EST */
	{ "DST: after the repeated hour",
	  "{" NY "\"start\":\"01:00\",\"end\":\"02:00\"}", "",
	  "2026-11-01T07:00:00Z", 0 }, /* 02:00 EST */
	{ "expiry: before", "", "2026-11-12T00:00:00+08:00",
	  "2026-11-11T15:59:59Z", 1 },
	{ "expiry: at", "", "2026-11-12T00:00:00+08:00",
	  "2026-11-11T16:00:00Z", 0 },
	{ "expiry ends an open window",
	  "{\"start\":\"00:00\",\"end\":\"23:59\"}", "2026-11-11T12:00:00Z",
	  "2026-11-11T13:00:00Z", 0 },
};

ParameterizedTestParameters(rule, window)
{
	return cr_make_param_array(win_case, wins,
	                           sizeof(wins) / sizeof(wins[0]));
}

ParameterizedTest(win_case *c, rule, window)
{
	char    json[400];
	ax_rule r;

	snprintf(json, sizeof(json),
	         "{\"action\":\"block\",\"tier\":\"P3\"%s%s%s%s%s}",
	         c->window[0] ? ",\"window\":" : "", c->window,
	         c->expires[0] ? ",\"expires_at\":\"" : "", c->expires,
	         c->expires[0] ? "\"" : "");
	cr_assert_eq(ax_rule_parse_text(json, &r), AX_OK, "%s: %s", c->what,
	             ax_err_detail());
	cr_assert_eq(ax_rule_applies(&r, at(c->now)), c->applies, "%s: at %s",
	             c->what, c->now);
	ax_rule_fini(&r);
}

/* ---------------------------------------------------------------------- */
/* matching and precedence */

typedef struct decide_case {
	char what[64];
	char rules[4][200]; /* rule JSON with ids; "" ends */
	/* the target */
	char channel[8];
	int  impact, priority;
	char dag[32], owner[16], tags[16], group[16]; /* tags: one or "" */
	/* the answer */
	int  want_id; /* 0: admitted */
	char want_reason[20];
} decide_case;

#define B(x) "{\"action\":\"block\"," x "}"
#define A(x) "{\"action\":\"allow\"," x "}"

static decide_case decides[] = {
	{ "no rules", { "" }, "Px", 3, 50, "etl_a", "o", "", "", 0, "" },
	{ "block tier P3",
	  { B("\"id\":1,\"tier\":\"P3\"") },
	  "Px",
	  3,
	  50,
	  "etl_a",
	  "o",
	  "",
	  "",
	  1,
	  "RULE_BLOCKED" },
	{ "tier P3 does not hold P2",
	  { B("\"id\":1,\"tier\":\"P3\"") },
	  "Px",
	  2,
	  50,
	  "etl_a",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "unknown impact fails open",
	  { B("\"id\":1,\"tier\":\"P3\"") },
	  "Px",
	  -1,
	  50,
	  "etl_a",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "channel block",
	  { B("\"id\":2,\"channel\":\"k8s\"") },
	  "k8s",
	  1,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  2,
	  "CHANNEL_BLOCKED" },
	{ "channel any case",
	  { B("\"id\":2,\"channel\":\"K8S\"") },
	  "k8s",
	  1,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  2,
	  "CHANNEL_BLOCKED" },
	{ "channel and tier is a rule block",
	  { B("\"id\":2,\"channel\":\"Px\",\"tier\":\"P3\"") },
	  "Px",
	  3,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  2,
	  "RULE_BLOCKED" },
	{ "other channel",
	  { B("\"id\":2,\"channel\":\"P0\"") },
	  "Px",
	  0,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "dag glob",
	  { B("\"id\":3,\"dag\":\"etl_*\"") },
	  "Px",
	  2,
	  50,
	  "etl_orders",
	  "o",
	  "",
	  "",
	  3,
	  "RULE_BLOCKED" },
	{ "dag glob miss",
	  { B("\"id\":3,\"dag\":\"etl_*\"") },
	  "Px",
	  2,
	  50,
	  "report_x",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "owner",
	  { B("\"id\":4,\"owner\":\"ads\"") },
	  "Px",
	  2,
	  50,
	  "d",
	  "ads",
	  "",
	  "",
	  4,
	  "RULE_BLOCKED" },
	{ "owner unknown",
	  { B("\"id\":4,\"owner\":\"ads\"") },
	  "Px",
	  2,
	  50,
	  "d",
	  "",
	  "",
	  "",
	  0,
	  "" },
	{ "tag",
	  { B("\"id\":5,\"tag\":\"promo\"") },
	  "Px",
	  2,
	  50,
	  "d",
	  "o",
	  "promo",
	  "",
	  5,
	  "RULE_BLOCKED" },
	{ "tag miss",
	  { B("\"id\":5,\"tag\":\"promo\"") },
	  "Px",
	  2,
	  50,
	  "d",
	  "o",
	  "core",
	  "",
	  0,
	  "" },
	{ "worker group",
	  { B("\"id\":6,\"worker_group\":\"gpu\"") },
	  "Px",
	  2,
	  50,
	  "d",
	  "o",
	  "",
	  "gpu",
	  6,
	  "RULE_BLOCKED" },
	{ "empty group is default",
	  { B("\"id\":6,\"worker_group\":\"default\"") },
	  "Px",
	  2,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  6,
	  "RULE_BLOCKED" },
	{ "priority_max holds low priority",
	  { B("\"id\":7,\"priority_max\":30") },
	  "Px",
	  2,
	  30,
	  "d",
	  "o",
	  "",
	  "",
	  7,
	  "RULE_BLOCKED" },
	{ "priority_max spares higher",
	  { B("\"id\":7,\"priority_max\":30") },
	  "Px",
	  2,
	  31,
	  "d",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "priority_min",
	  { B("\"id\":7,\"priority_min\":80") },
	  "Px",
	  2,
	  79,
	  "d",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "every member must match",
	  { B("\"id\":8,\"tier\":\"P3\",\"dag\":\"etl_*\",\"owner\":"
	      "\"ads\"") },
	  "Px",
	  3,
	  50,
	  "etl_a",
	  "bi",
	  "",
	  "",
	  0,
	  "" },
	{ "a more specific allow overrides a block",
	  { B("\"id\":1,\"tier\":\"P3\""),
	    A("\"id\":2,\"tier\":\"P3\",\"dag\":\"etl_*\"") },
	  "Px",
	  3,
	  50,
	  "etl_a",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "the allow spares only what it matches",
	  { B("\"id\":1,\"tier\":\"P3\""),
	    A("\"id\":2,\"tier\":\"P3\",\"dag\":\"etl_*\"") },
	  "Px",
	  3,
	  50,
	  "report",
	  "o",
	  "",
	  "",
	  1,
	  "RULE_BLOCKED" },
	{ "a more specific block beats an allow",
	  { A("\"id\":1,\"tier\":\"P3\""),
	    B("\"id\":2,\"tier\":\"P3\",\"owner\":\"ads\"") },
	  "Px",
	  3,
	  50,
	  "d",
	  "ads",
	  "",
	  "",
	  2,
	  "RULE_BLOCKED" },
	{ "block wins a tie",
	  { A("\"id\":1,\"tier\":\"P3\""), B("\"id\":2,\"owner\":\"ads\"") },
	  "Px",
	  3,
	  50,
	  "d",
	  "ads",
	  "",
	  "",
	  2,
	  "RULE_BLOCKED" },
	{ "exact dag is more specific than a glob",
	  { B("\"id\":1,\"dag\":\"etl_*\""), A("\"id\":2,\"dag\":\"etl_a\"") },
	  "Px",
	  3,
	  50,
	  "etl_a",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "a glob allow does not beat an exact block",
	  { B("\"id\":1,\"dag\":\"etl_a\""), A("\"id\":2,\"dag\":\"etl_*\"") },
	  "Px",
	  3,
	  50,
	  "etl_a",
	  "o",
	  "",
	  "",
	  1,
	  "RULE_BLOCKED" },
	{ "lowest id among equal blocks",
	  { B("\"id\":9,\"owner\":\"ads\""), B("\"id\":4,\"tier\":\"P3\"") },
	  "Px",
	  3,
	  50,
	  "d",
	  "ads",
	  "",
	  "",
	  4,
	  "RULE_BLOCKED" },
	{ "allow alone holds nothing",
	  { A("\"id\":1,\"tier\":\"P3\"") },
	  "Px",
	  3,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  0,
	  "" },
	{ "a closed window does not decide",
	  { B("\"id\":1,\"tier\":\"P3\""),
	    A("\"id\":2,\"tier\":\"P3\",\"dag\":\"*\",\"window\":{\"start\":"
	      "\"00:00\",\"end\":\"00:01\"}") },
	  "Px",
	  3,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  1,
	  "RULE_BLOCKED" },
	{ "an expired block holds nothing",
	  { B("\"id\":1,\"tier\":\"P3\",\"expires_at\":1") },
	  "Px",
	  3,
	  50,
	  "d",
	  "o",
	  "",
	  "",
	  0,
	  "" },
};

ParameterizedTestParameters(rule, decide)
{
	return cr_make_param_array(decide_case, decides,
	                           sizeof(decides) / sizeof(decides[0]));
}

ParameterizedTest(decide_case *c, rule, decide)
{
	ax_rule        rules[4];
	size_t         n       = 0;
	const char    *tags[1] = { c->tags };
	const char    *reason  = "";
	ax_rule_target t       = {
		      .channel      = c->channel,
		      .impact       = c->impact,
		      .priority     = c->priority,
		      .dag          = c->dag,
		      .owner        = c->owner[0] ? c->owner : NULL,
		      .tags         = tags,
		      .n_tags       = c->tags[0] ? 1 : 0,
		      .worker_group = c->group,
	};

	while (n < 4 && c->rules[n][0] != '\0') {
		cr_assert_eq(ax_rule_parse_text(c->rules[n], &rules[n]), AX_OK,
		             "%s: %s", c->what, ax_err_detail());
		n++;
	}
	/* 12:00 UTC: the one-minute window at midnight is closed */
	const ax_rule *r =
	    ax_rules_decide(rules, n, &t, at("2026-11-11T12:00:00Z"), &reason);
	cr_assert_eq(r ? r->id : 0, c->want_id, "%s: held by %lld", c->what,
	             (long long) (r ? r->id : 0));
	if (c->want_id != 0)
		cr_assert_str_eq(reason, c->want_reason, "%s", c->what);
	/* the order of the rules never changes the decision */
	for (size_t i = 0; i < n / 2; i++) {
		ax_rule tmp      = rules[i];
		rules[i]         = rules[n - 1 - i];
		rules[n - 1 - i] = tmp;
	}
	r = ax_rules_decide(rules, n, &t, at("2026-11-11T12:00:00Z"), NULL);
	cr_assert_eq(r ? r->id : 0, c->want_id, "%s (reversed)", c->what);
	for (size_t i = 0; i < n; i++)
		ax_rule_fini(&rules[i]);
}
