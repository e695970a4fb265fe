/*
 * rule.h - Allow and Block rules: their JSON form, its validation, and the
 * pure decision whether a rule set holds one instance now.
 *
 * Role: operators open or close whole links before a big promotion
 * ("block P3 between 20:00 and 23:00 Asia/Shanghai on 2026-11-11").
 * ax-api validates a rule with ax_rule_parse before it stores it in the
 * rules table (the JSON is kept as it was given, normalised); the
 * resource detector parses the same JSON when it loads the table and asks
 * ax_rules_decide at admission; `axctl rule test` asks the API, which
 * asks the same function. One parser and one decision for all of them.
 *
 * A rule: {"action": "block"|"allow", match members, "window", "expires_at",
 * "note"}. Match members (all given ones must match; at least one):
 *   channel       "P0", "Px", "k8s" or "biz" (the task's channel)
 *   tier          "P0".."P3" or an array of them (the DAG's impact)
 *   priority_min  task priority >= n (0..100)
 *   priority_max  task priority <= n (0..100)
 *   dag           glob on the DAG name (fnmatch: *, ?, [...])
 *   owner         the DAG's owner, exactly
 *   tag           one of the DAG's tags, exactly
 *   worker_group  the task's worker group, exactly
 * window (optional): {"tz": IANA zone (default "UTC"), "start": "HH:MM",
 * "end": "HH:MM", "days": ["mon".."sun"], "dates": ["YYYY-MM-DD"]}: the
 * rule applies from start (inclusive) to end (exclusive) of local wall
 * time; start > end crosses midnight (the window belongs to the day it
 * opens on: days and dates name that day). Wall time is compared, so a
 * window follows DST: 20:00 is 20:00 local on both sides of a change; a
 * window boundary inside a spring-forward gap takes effect at the first
 * instant after the gap; in a fall-back overlap the repeated hour is
 * inside the window both times. expires_at (optional, UTC microseconds
 * here; the API accepts ISO 8601): the rule applies only before it.
 *
 * Precedence (ax_rules_decide): among the rules that apply now and match
 * the instance, the most specific decides (specificity: the number of
 * match members the rule names; an exact dag name counts two, a glob
 * one). At equal specificity Block wins over Allow (closing a link is
 * the safe side), and among equals the lowest id is named. An Allow only
 * carves an exception out of a Block: without a matching Block nothing
 * is held. A Block whose only match member is channel holds with reason
 * CHANNEL_BLOCKED, any other Block with RULE_BLOCKED.
 *
 * An instance whose DAG attributes are unknown (impact -1, owner NULL)
 * matches no rule naming tier, owner or tag: the decision fails open,
 * as admission must not stall on a missing cache entry.
 *
 * Invariants: a parsed rule is immutable; ax_rules_decide and
 * ax_rule_applies are pure (no I/O, no clock: the caller passes now) and
 * thread-safe on shared rules.
 *
 * Workload: a handful of rules, evaluated at every admission and once a
 * second for every held instance; each evaluation is a few string
 * compares per rule plus one time-zone conversion per windowed rule.
 */
#ifndef AX_RULE_H
#define AX_RULE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "tz.h"
#include "window.h"

typedef enum ax_rule_action {
	AX_RULE_BLOCK = 0,
	AX_RULE_ALLOW = 1,
} ax_rule_action;

/* One parsed rule; owns every pointer in it (ax_rule_fini). */
typedef struct ax_rule {
	int64_t        id; /* rules.id; 0 before it is stored */
	ax_rule_action action;
	char          *channel;      /* "P0", "Px", "k8s", "biz"; NULL: any */
	uint8_t        tiers;        /* bit n: impact Pn; 0: any */
	int            prio_min;     /* -1: none */
	int            prio_max;     /* -1: none */
	char          *dag;          /* glob; NULL: any */
	int            dag_glob;     /* dag has glob characters */
	char          *owner;        /* NULL: any */
	char          *tag;          /* NULL: any */
	char          *worker_group; /* NULL: any */
	int            has_window;
	ax_window      win;        /* when has_window (engine/window.h) */
	int64_t        expires_us; /* UTC us; 0: never */
} ax_rule;

/* What a rule is matched against: one instance. Strings borrowed. */
typedef struct ax_rule_target {
	const char        *channel;  /* "P0", "Px", "k8s", "biz" (any case) */
	int                impact;   /* 0..3 (P0..P3); -1: unknown */
	int                priority; /* the task's static priority */
	const char        *dag;
	const char        *owner; /* NULL: unknown */
	const char *const *tags;
	size_t             n_tags;
	const char        *worker_group; /* "" or NULL: "default" */
} ax_rule_target;

/*
 * Parses and validates rule object o (borrowed) into *out (zeroed first;
 * ax_rule_fini it also on failure). AX_EINVAL with a detail naming the
 * member and the fix (e.g. "window.start: \"25:00\" is not a time of day;
 * write HH:MM from 00:00 to 23:59"); AX_ENOENT for an unknown time zone
 * (with a did-you-mean); AX_ENOMEM. expires_at must be an integer of UTC
 * microseconds here (callers convert ISO text first). Unknown members are
 * refused, so a typo never widens a rule.
 */
ax_err ax_rule_parse(json_t *o, ax_rule *out);

/* The same from JSON text (as stored in rules.spec). */
ax_err ax_rule_parse_text(const char *json, ax_rule *out);

/* Frees what ax_rule_parse allocated; safe on zeroed memory. */
void ax_rule_fini(ax_rule *r);

/* 1 when r is in force at now_us: before its expiry and inside its
 * window (if it has one). */
int ax_rule_applies(const ax_rule *r, int64_t now_us);

/* 1 when every match member of r matches t (time not considered). */
int ax_rule_matches(const ax_rule *r, const ax_rule_target *t);

/* The specificity of r (see the precedence above). */
int ax_rule_specificity(const ax_rule *r);

/* 1 when r names a DAG attribute (tier, owner, tag): the caller must
 * fill impact, owner and tags of the targets. */
int ax_rule_needs_dag(const ax_rule *r);

/* 1 when r's verdict can change with time alone (window or expiry). */
int ax_rule_timed(const ax_rule *r);

/*
 * The Block rule holding t at now_us, or NULL when t may run (no
 * matching Block, or a more specific matching Allow). *reason (may be
 * NULL) gets "RULE_BLOCKED" or "CHANNEL_BLOCKED" when a rule holds.
 * rules[0..n) borrowed; pure.
 */
const ax_rule *ax_rules_decide(const ax_rule *rules, size_t n,
                               const ax_rule_target *t, int64_t now_us,
                               const char **reason);

#endif /* AX_RULE_H */
