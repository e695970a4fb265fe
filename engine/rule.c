/*
 * rule.c - Allow/Block rules: parsing, validation and the pure decision
 * (see rule.h for the format and the precedence).
 */
#include "rule.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const channels[] = { "P0", "Px", "k8s", "biz" };

/* ---------------------------------------------------------------------- */
/* parsing */

/* A non-empty string member (or absent: *out NULL). */
static ax_err
opt_str(json_t *o, const char *key, char **out, const char *example)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > 255 ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return ax_err_set(AX_EINVAL,
		                  "%s: must be a non-empty string of at most "
		                  "255 bytes (e.g. %s)",
		                  key, example);
	if ((*out = strdup(json_string_value(v))) == NULL)
		return ax_err_set(AX_ENOMEM, "rule: out of memory");
	return AX_OK;
}

static ax_err
parse_channel(json_t *o, ax_rule *r)
{
	char  *c;
	ax_err rv = opt_str(o, "channel", &c, "\"Px\"");

	if (rv != AX_OK)
		return rv;
	if (c == NULL)
		return AX_OK;
	for (size_t i = 0; i < sizeof(channels) / sizeof(channels[0]); i++) {
		if (strcasecmp(c, channels[i]) == 0) {
			strcpy(c, channels[i]); /* same length */
			r->channel = c;
			return AX_OK;
		}
	}
	ax_err_set(AX_EINVAL,
	           "channel: \"%s\" is not a channel; use P0, Px, k8s or biz",
	           c);
	free(c);
	return AX_EINVAL;
}

/* "P0".."P3" -> 0..3, else -1. */
static int
tier_of(json_t *v)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;

	if (s == NULL || (s[0] != 'P' && s[0] != 'p') || s[1] < '0' ||
	    s[1] > '3' || s[2] != '\0')
		return -1;
	return s[1] - '0';
}

static ax_err
parse_tier(json_t *o, ax_rule *r)
{
	json_t *v = json_object_get(o, "tier"), *e;
	size_t  i;

	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (json_is_string(v)) {
		int t = tier_of(v);
		if (t < 0)
			return ax_err_set(
			    AX_EINVAL,
			    "tier: \"%s\" is not a tier; use P0, "
			    "P1, P2 or P3 (the DAG's impact)",
			    json_string_value(v));
		r->tiers = (uint8_t) (1u << t);
		return AX_OK;
	}
	if (!json_is_array(v) || json_array_size(v) == 0)
		return ax_err_set(
		    AX_EINVAL,
		    "tier: must be \"P0\"..\"P3\" or a non-empty "
		    "array of them (e.g. [\"P2\", \"P3\"])");
	json_array_foreach(v, i, e)
	{
		int t = tier_of(e);
		if (t < 0)
			return ax_err_set(AX_EINVAL,
			                  "tier[%zu]: must be \"P0\", \"P1\", "
			                  "\"P2\" or \"P3\"",
			                  i);
		r->tiers |= (uint8_t) (1u << t);
	}
	return AX_OK;
}

static ax_err
parse_prio(json_t *o, const char *key, int *out)
{
	json_t *v = json_object_get(o, key);

	*out = -1;
	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 100)
		return ax_err_set(AX_EINVAL,
		                  "%s: must be an integer from 0 to 100 (a "
		                  "task priority)",
		                  key);
	*out = (int) json_integer_value(v);
	return AX_OK;
}

static ax_err
parse_window(json_t *o, ax_rule *r)
{
	json_t *w = json_object_get(o, "window");

	if (w == NULL || json_is_null(w))
		return AX_OK;
	r->has_window = 1;
	return ax_window_parse(w, "window", NULL, &r->win);
}

static ax_err
parse_expiry(json_t *o, ax_rule *r)
{
	json_t *v = json_object_get(o, "expires_at");

	if (v == NULL || json_is_null(v))
		return AX_OK;
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		r->expires_us = json_integer_value(v);
		return AX_OK;
	}
	if (json_is_string(v) &&
	    ax_tz_parse_iso8601(json_string_value(v), NULL, &r->expires_us) ==
	        AX_OK &&
	    r->expires_us > 0)
		return AX_OK;
	return ax_err_set(AX_EINVAL,
	                  "expires_at: must be an ISO 8601 instant with an "
	                  "offset (e.g. \"2026-11-12T00:00:00+08:00\") or UTC "
	                  "microseconds after 1970");
}

static int
has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

ax_err
ax_rule_parse(json_t *o, ax_rule *r)
{
	static const char *const keys[] = {
		"action",       "channel", "tier",       "priority_min",
		"priority_max", "dag",     "owner",      "tag",
		"worker_group", "window",  "expires_at", "note",
		"id",           NULL
	};
	json_t     *v;
	const char *k;
	ax_err      rv;

	memset(r, 0, sizeof(*r));
	r->prio_min = r->prio_max = -1;
	if (!json_is_object(o))
		return ax_err_set(
		    AX_EINVAL,
		    "a rule must be a JSON object (e.g. "
		    "{\"action\": \"block\", \"tier\": \"P3\"})");
	json_object_foreach(o, k, v)
	{
		size_t i = 0;
		while (keys[i] != NULL && strcmp(keys[i], k) != 0)
			i++;
		if (keys[i] == NULL)
			return ax_err_set(
			    AX_EINVAL,
			    "%s: unknown member; a rule has action, channel, "
			    "tier, priority_min, priority_max, dag, owner, "
			    "tag, worker_group, window, expires_at and note",
			    k);
	}
	v = json_object_get(o, "action");
	if (json_is_string(v) && !strcmp(json_string_value(v), "block"))
		r->action = AX_RULE_BLOCK;
	else if (json_is_string(v) && !strcmp(json_string_value(v), "allow"))
		r->action = AX_RULE_ALLOW;
	else
		return ax_err_set(AX_EINVAL,
		                  "action: required, \"block\" or \"allow\"");
	v = json_object_get(o, "id");
	if (json_is_integer(v))
		r->id = json_integer_value(v);
	if ((rv = parse_channel(o, r)) != AX_OK ||
	    (rv = parse_tier(o, r)) != AX_OK ||
	    (rv = parse_prio(o, "priority_min", &r->prio_min)) != AX_OK ||
	    (rv = parse_prio(o, "priority_max", &r->prio_max)) != AX_OK)
		return rv;
	if (r->prio_min >= 0 && r->prio_max >= 0 && r->prio_min > r->prio_max)
		return ax_err_set(AX_EINVAL,
		                  "priority_min: %d is above priority_max %d; "
		                  "no task would match",
		                  r->prio_min, r->prio_max);
	if ((rv = opt_str(o, "dag", &r->dag, "\"etl_*\"")) != AX_OK ||
	    (rv = opt_str(o, "owner", &r->owner, "\"team-data\"")) != AX_OK ||
	    (rv = opt_str(o, "tag", &r->tag, "\"promotion\"")) != AX_OK ||
	    (rv = opt_str(o, "worker_group", &r->worker_group, "\"gpu\"")) !=
	        AX_OK)
		return rv;
	r->dag_glob = r->dag != NULL && has_glob(r->dag);
	v           = json_object_get(o, "note");
	if (v != NULL && !json_is_null(v) &&
	    (!json_is_string(v) || json_string_length(v) > 1000))
		return ax_err_set(AX_EINVAL,
		                  "note: must be a string of at most 1000 "
		                  "bytes");
	if (ax_rule_specificity(r) == 0)
		return ax_err_set(
		    AX_EINVAL,
		    "a rule must name at least one of channel, "
		    "tier, priority_min, priority_max, dag, owner, "
		    "tag, worker_group (for every DAG write "
		    "\"dag\": \"*\")");
	if ((rv = parse_window(o, r)) != AX_OK ||
	    (rv = parse_expiry(o, r)) != AX_OK)
		return rv;
	return AX_OK;
}

ax_err
ax_rule_parse_text(const char *text, ax_rule *r)
{
	json_error_t e;
	json_t *o = json_loads(text ? text : "", JSON_REJECT_DUPLICATES, &e);
	ax_err  rv;

	if (o == NULL) {
		memset(r, 0, sizeof(*r));
		return ax_err_set(AX_EINVAL, "rule is not JSON: %d:%d: %s",
		                  e.line, e.column, e.text);
	}
	rv = ax_rule_parse(o, r);
	json_decref(o);
	return rv;
}

void
ax_rule_fini(ax_rule *r)
{
	if (r == NULL)
		return;
	free(r->channel);
	free(r->dag);
	free(r->owner);
	free(r->tag);
	free(r->worker_group);
	ax_window_fini(&r->win);
	memset(r, 0, sizeof(*r));
}

/* ---------------------------------------------------------------------- */
/* decisions */

int
ax_rule_applies(const ax_rule *r, int64_t now_us)
{
	if (r->expires_us > 0 && now_us >= r->expires_us)
		return 0;
	return !r->has_window || ax_window_contains(&r->win, now_us);
}

static int
eq_or_any(const char *want, const char *have)
{
	return want == NULL || (have != NULL && strcmp(want, have) == 0);
}

int
ax_rule_matches(const ax_rule *r, const ax_rule_target *t)
{
	const char *g = t->worker_group && t->worker_group[0] ? t->worker_group
	                                                      : "default";

	if (r->channel != NULL &&
	    (t->channel == NULL || strcasecmp(r->channel, t->channel) != 0))
		return 0;
	if (r->tiers != 0 &&
	    (t->impact < 0 || t->impact > 3 ||
	     !(r->tiers & (1u << t->impact))))
		return 0;
	if (r->prio_min >= 0 && t->priority < r->prio_min)
		return 0;
	if (r->prio_max >= 0 && t->priority > r->prio_max)
		return 0;
	if (r->dag != NULL &&
	    (t->dag == NULL || fnmatch(r->dag, t->dag, 0) != 0))
		return 0;
	if (!eq_or_any(r->owner, t->owner) || !eq_or_any(r->worker_group, g))
		return 0;
	if (r->tag != NULL) {
		size_t i = 0;
		while (i < t->n_tags && strcmp(t->tags[i], r->tag) != 0)
			i++;
		if (i == t->n_tags)
			return 0;
	}
	return 1;
}

int
ax_rule_specificity(const ax_rule *r)
{
	return (r->channel != NULL) + (r->tiers != 0) + (r->prio_min >= 0) +
	    (r->prio_max >= 0) + (r->dag != NULL ? (r->dag_glob ? 1 : 2) : 0) +
	    (r->owner != NULL) + (r->tag != NULL) + (r->worker_group != NULL);
}

int
ax_rule_needs_dag(const ax_rule *r)
{
	return r->tiers != 0 || r->owner != NULL || r->tag != NULL;
}

int
ax_rule_timed(const ax_rule *r)
{
	return r->has_window || r->expires_us > 0;
}

/* 1 when a decides over b (both match and apply). */
static int
outranks(const ax_rule *a, const ax_rule *b)
{
	int sa = ax_rule_specificity(a), sb = ax_rule_specificity(b);

	if (sa != sb)
		return sa > sb;
	if (a->action != b->action)
		return a->action == AX_RULE_BLOCK;
	return a->id < b->id;
}

const ax_rule *
ax_rules_decide(const ax_rule *rules, size_t n, const ax_rule_target *t,
                int64_t now_us, const char **reason)
{
	const ax_rule *best = NULL;

	for (size_t i = 0; i < n; i++) {
		const ax_rule *r = &rules[i];
		if (best != NULL && !outranks(r, best))
			continue;
		if (!ax_rule_matches(r, t) || !ax_rule_applies(r, now_us))
			continue;
		best = r;
	}
	if (best == NULL || best->action != AX_RULE_BLOCK)
		return NULL;
	if (reason != NULL)
		*reason = ax_rule_specificity(best) == 1 && best->channel
		    ? "CHANNEL_BLOCKED"
		    : "RULE_BLOCKED";
	return best;
}
