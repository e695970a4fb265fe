/*
 * explain.c - the explanation of an instance or a run from its rows (see
 * explain.h for the facts it reads and docs/explain.md for the document
 * it writes).
 *
 * Three parts, each a pure function of the facts:
 *  1. waiting_for: what holds the subject now, from its state and
 *     reason code and the rows behind that reason (the upstream task and
 *     its state, the upstream DAG's run of the period or "no run yet",
 *     the full pool or group and the instances holding it, the Block
 *     rule, the overlap policy and the run it waits behind, the backoff
 *     or delay instant, no live worker in the group). Empty when the
 *     subject runs or has ended.
 *  2. timeline: every event in order with its reason code, the time
 *     since the previous step and one sentence.
 *  3. attempts: for each attempt why it started (first attempt, retry
 *     after exit 3, retry after the previous one was lost, a clear) and
 *     how it ended (exit code, timeout, UNKNOWN after the worker's lease
 *     lapsed, a late SUCCESS reconciled).
 *
 * The workload: one call per API request, tens to a few thousand events;
 * each event is looked at a constant number of times.
 */
#include "explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

/* ---- reading the facts ---------------------------------------------- */

static const char *
jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t
jint(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (int64_t) json_integer_value(v) : 0;
}

static int
jhas(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return v != NULL && !json_is_null(v);
}

static int
streq(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static int
prefix(const char *s, const char *p)
{
	return s != NULL && strncmp(s, p, strlen(p)) == 0;
}

/* A UTC instant as JSON (RFC 3339, microseconds), null for 0. */
static json_t *
ts_json(int64_t us)
{
	char b[40];
	if (us == 0)
		return json_null();
	return json_string(ax_clock_fmt_utc(us, b, sizeof(b)));
}

/* A short duration: "850us", "12ms", "4.2s", "3m20s", "2h5m". */
static char *
dur(int64_t us, char *b, size_t n)
{
	if (us <= 0)
		snprintf(b, n, "0s");
	else if (us < 1000)
		snprintf(b, n, "%" PRId64 "us", us);
	else if (us < 1000000)
		snprintf(b, n, "%" PRId64 "ms", us / 1000);
	else if (us < 60 * INT64_C(1000000))
		snprintf(b, n, "%" PRId64 ".%" PRId64 "s", us / 1000000,
		         us / 100000 % 10);
	else
		ax_duration_fmt(us / 1000000 * 1000000, b, n);
	return b;
}

static int
terminal(const char *st)
{
	static const char *const t[] = { "SUCCESS",  "FAILED",  "TIMEOUT",
		                         "CANCELED", "SKIPPED", NULL };
	for (const char *const *p = t; st != NULL && *p; p++)
		if (!strcmp(*p, st))
			return 1;
	return 0;
}

/* The last event of type (and attempt, when > 0), or NULL. */
static const json_t *
last_event(const json_t *evs, const char *type, int64_t attempt)
{
	size_t n = json_array_size(evs);
	while (n-- > 0) {
		const json_t *e = json_array_get(evs, n);
		if (streq(jstr(e, "type"), type) &&
		    (attempt <= 0 || jint(e, "attempt") == attempt))
			return e;
	}
	return NULL;
}

/* Adds {kind, text, ...members of extra} to arr; takes extra. */
static void add_wait(json_t *arr, const char *kind, json_t *extra,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
add_wait(json_t *arr, const char *kind, json_t *extra, const char *fmt, ...)
{
	char    text[600];
	va_list ap;
	json_t *w = extra != NULL ? extra : json_object();

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (w == NULL)
		return;
	json_object_set_new(w, "kind", json_string(kind));
	json_object_set_new(w, "text", json_string(text));
	json_array_append_new(arr, w);
}

/* ---- 1. what it waits for --------------------------------------------- */

static void
wait_paused(const json_t *f, json_t *w)
{
	const json_t *subj = json_object_get(f, "instance");
	if (subj == NULL)
		subj = json_object_get(f, "run");
	add_wait(w, "dag_paused",
	         json_pack("{s:s?}", "dag", jstr(subj, "dag")),
	         "DAG %s is paused: unpause it to go on",
	         jstr(subj, "dag") ? jstr(subj, "dag") : "?");
}

static void
wait_upstream_tasks(const json_t *f, json_t *w)
{
	const json_t *ups = json_object_get(f, "upstream_tasks");
	size_t        i;
	json_t       *u;

	json_array_foreach(ups, i, u)
	{
		const char *st   = jstr(u, "state");
		const char *task = jstr(u, "task");
		if (streq(st, "SUCCESS") || streq(st, "SKIPPED"))
			continue;
		json_t *x =
		    json_pack("{s:s?,s:o,s:s?}", "task", task, "instance_id",
		              jhas(u, "instance_id")
		                  ? json_integer(jint(u, "instance_id"))
		                  : json_null(),
		              "state", st);
		if (st == NULL)
			add_wait(w, "upstream_task", x,
			         "upstream task %s has no instance yet",
			         task ? task : "?");
		else
			add_wait(
			    w, "upstream_task", x,
			    "upstream task %s is %s%s%s%s (instance %" PRId64
			    ")",
			    task ? task : "?", st,
			    jstr(u, "reason") ? " (" : "",
			    jstr(u, "reason") ? jstr(u, "reason") : "",
			    jstr(u, "reason") ? ")" : "",
			    jint(u, "instance_id"));
	}
}

static void
wait_upstream_dags(const json_t *f, json_t *w)
{
	const json_t *ups = json_object_get(f, "upstream_dags");
	size_t        i;
	json_t       *u;
	char          lt[40];

	json_array_foreach(ups, i, u)
	{
		const char *st   = jstr(u, "state");
		const char *dag  = jstr(u, "dag");
		const char *mode = jstr(u, "mode");
		int         same = streq(mode, "same_period");
		if (streq(st, "SUCCESS"))
			continue;
		ax_clock_fmt_utc(jint(u, "logical_us"), lt, sizeof(lt));
		json_t *x = json_pack(
		    "{s:s?,s:s?,s:o,s:o,s:s?}", "dag", dag, "mode", mode,
		    "logical_time",
		    same ? ts_json(jint(u, "logical_us")) : json_null(),
		    "run_id",
		    jhas(u, "run_id") ? json_integer(jint(u, "run_id"))
		                      : json_null(),
		    "state", st);
		if (!jhas(u, "run_id"))
			add_wait(w, "upstream_dag", x,
			         "upstream DAG %s%s%s: no run yet",
			         dag ? dag : "?",
			         same ? ", period " : " (its latest run)",
			         same ? lt : "");
		else
			add_wait(w, "upstream_dag", x,
			         "upstream DAG %s%s%s: run %" PRId64 " is %s",
			         dag ? dag : "?",
			         same ? ", period " : " (its latest run)",
			         same ? lt : "", jint(u, "run_id"),
			         st ? st : "?");
	}
}

/* The state of active run id, from active_runs, or NULL. */
static const char *
active_state(const json_t *f, int64_t id)
{
	size_t  i;
	json_t *r;
	json_array_foreach(json_object_get(f, "active_runs"), i,
	                   r) if (jint(r, "id") == id) return jstr(r, "state");
	return NULL;
}

static void
wait_overlap(const json_t *f, json_t *w)
{
	const json_t *c = json_object_get(f, "concurrency");
	const json_t *held =
	    last_event(json_object_get(f, "events"), "run.held", 0);
	const json_t *pl     = json_object_get(held, "payload");
	const json_t *active = json_object_get(f, "active_runs");
	const char   *policy = jstr(pl, "policy");
	int64_t mar = jhas(pl, "max_active_runs") ? jint(pl, "max_active_runs")
	                                          : jint(c, "max_active_runs");
	int64_t behind = jint(pl, "behind");

	if (policy == NULL)
		policy = jstr(c, "policy");
	if (behind == 0 && json_array_size(active) > 0)
		behind = jint(json_array_get(active, 0), "id");
	const char *bst = behind ? active_state(f, behind) : NULL;
	json_t     *x   = json_pack(
	          "{s:s?,s:I,s:o,s:s?,s:I}", "policy", policy, "max_active_runs",
	          (json_int_t) mar, "behind_run_id",
            behind ? json_integer(behind) : json_null(), "behind_state", bst,
	          "active_runs", (json_int_t) json_array_size(active));
	if (behind != 0)
		add_wait(w, "overlap", x,
		         "overlap policy %s (max_active_runs %" PRId64
		         "): waits behind run %" PRId64 " (%s)",
		         policy ? policy : "?", mar, behind,
		         bst ? bst : "ended meanwhile");
	else
		add_wait(w, "overlap", x,
		         "overlap policy %s (max_active_runs %" PRId64
		         "): waits behind runs held before it",
		         policy ? policy : "?", mar);
}

static void
wait_rule(const json_t *f, json_t *w)
{
	const json_t *ev =
	    last_event(json_object_get(f, "events"), "instance.blocked", 0);
	int64_t       id   = jint(json_object_get(ev, "payload"), "rule_id");
	const json_t *rule = NULL;
	size_t        i;
	json_t       *r;

	json_array_foreach(json_object_get(f, "rules"), i,
	                   r) if (jint(r, "id") == id) rule = r;
	const char *note = jstr(rule, "note");
	json_t     *x    = json_pack(
	           "{s:o,s:s?,s:s?}", "rule_id", id ? json_integer(id) : json_null(),
	           "action", rule ? jstr(rule, "action") : NULL, "name", note);
	if (id == 0)
		add_wait(w, "rule", x, "held by a Block rule");
	else if (rule == NULL)
		add_wait(w, "rule", x,
		         "held by Block rule %" PRId64
		         " (deleted since; released within a second)",
		         id);
	else
		add_wait(w, "rule", x, "held by %s rule %" PRId64 "%s%s%s",
		         jstr(rule, "action") ? jstr(rule, "action") : "block",
		         id, note ? " \"" : "", note ? note : "",
		         note ? "\"" : "");
}

static void
wait_no_worker(const json_t *f, json_t *w)
{
	const json_t *wk = json_object_get(f, "workers");
	if (wk == NULL || jint(wk, "live") > 0)
		return;
	add_wait(w, "no_live_worker",
	         json_pack("{s:s?,s:I}", "group", jstr(wk, "group"), "total",
	                   (json_int_t) jint(wk, "total")),
	         "no live worker in group %s (%" PRId64
	         " registered, none with a lease)",
	         jstr(wk, "group") ? jstr(wk, "group") : "?",
	         jint(wk, "total"));
}

static json_t *
holders_json(const json_t *f)
{
	json_t *out = json_array();
	size_t  i;
	json_t *h;
	json_array_foreach(json_object_get(f, "holders"), i, h)
	    json_array_append_new(
	        out,
	        json_pack("{s:I,s:s?,s:s?,s:s?}", "instance_id",
	                  (json_int_t) jint(h, "instance_id"), "dag",
	                  jstr(h, "dag"), "task", jstr(h, "task"), "state",
	                  jstr(h, "state")));
	return out;
}

/* "i 12 (d.t RUNNING), ..." of the first few holders into b. */
static void
holders_text(const json_t *f, char *b, size_t n)
{
	size_t  i, off = 0;
	json_t *h;

	b[0] = '\0';
	json_array_foreach(json_object_get(f, "holders"), i, h)
	{
		if (off + 1 >= n)
			break;
		if (i == 4) {
			snprintf(
			    b + off, n - off, ", ... (%zu in all)",
			    json_array_size(json_object_get(f, "holders")));
			break;
		}
		int k = snprintf(b + off, n - off,
		                 "%sinstance %" PRId64 " (%s.%s %s)",
		                 i ? ", " : "", jint(h, "instance_id"),
		                 jstr(h, "dag") ? jstr(h, "dag") : "?",
		                 jstr(h, "task") ? jstr(h, "task") : "?",
		                 jstr(h, "state") ? jstr(h, "state") : "?");
		if (k < 0)
			break;
		off += (size_t) k;
		if (off >= n)
			off = n - 1;
	}
}

static void
wait_resource(const json_t *f, json_t *w)
{
	const json_t *ev =
	    last_event(json_object_get(f, "events"), "instance.delayed", 0);
	const json_t *pl = json_object_get(ev, "payload");
	const char   *by = jstr(pl, "held_by");
	const char   *pool =
            jstr(pl, "pool") && *jstr(pl, "pool") ? jstr(pl, "pool") : NULL;
	int64_t pu = jint(pl, "pool_used"), ps = jint(pl, "pool_slots");
	int64_t gu = jint(pl, "group_used"), gl = jint(pl, "group_limit");
	char    hold[400];

	holders_text(f, hold, sizeof(hold));
	if (streq(by, "backpressure")) {
		add_wait(w, "backpressure", NULL,
		         "admission paused: the instance generator lags "
		         "(backpressure)");
		return;
	}
	if (streq(by, "shaving")) {
		const char *u = jstr(pl, "until") ? jstr(pl, "until") : "?";
		add_wait(w, "backpressure",
		         json_pack("{s:s,s:s,s:s?,s:I,s:I}", "held_by", by,
		                   "until", u, "group", jstr(pl, "group"),
		                   "backlog", (json_int_t) jint(pl, "backlog"),
		                   "level_pct",
		                   (json_int_t) jint(pl, "level_pct")),
		         "delayed by peak shaving until %s: worker group %s "
		         "had %" PRId64 " waiting (threshold %" PRId64
		         ") and water level %" PRId64 "%%; released earlier "
		         "as the backlog drains",
		         u, jstr(pl, "group") ? jstr(pl, "group") : "?",
		         jint(pl, "backlog"), jint(pl, "backlog_threshold"),
		         jint(pl, "level_pct"));
		return;
	}
	if (streq(by, "pressure")) {
		const char *u = jstr(pl, "until") ? jstr(pl, "until") : "?";
		add_wait(
		    w, "backpressure",
		    json_pack("{s:s,s:s,s:I}", "held_by", by, "until", u,
		              "level_pct", (json_int_t) jint(pl, "level_pct")),
		    "held by the water level pushed for its pool or "
		    "group (%" PRId64 "%%) until %s; P0 is still admitted",
		    jint(pl, "level_pct"), u);
		return;
	}
	if (streq(by, "calendar_slots")) {
		const char *n = pool ? pool : jstr(pl, "group");
		add_wait(w, "capacity",
		         json_pack("{s:s,s:s?,s:I,s:I,s:s,s:o}", "scope",
		                   pool ? "pool" : "group", "name", n, "used",
		                   (json_int_t) (pool ? pu : gu), "limit",
		                   (json_int_t) jint(pl, "calendar_slots"),
		                   "held_by", by, "holders", holders_json(f)),
		         "the capacity calendar of %s %s gives %" PRId64
		         " slots now (%" PRId64 " used)%s%s",
		         pool ? "pool" : "worker group", n ? n : "?",
		         jint(pl, "calendar_slots"), pool ? pu : gu,
		         hold[0] ? ", held by " : "", hold);
		return;
	}
	if (pool != NULL && (ps == 0 || pu >= ps)) {
		add_wait(w, "capacity",
		         json_pack("{s:s,s:s,s:I,s:I,s:s?,s:o}", "scope",
		                   "pool", "name", pool, "used",
		                   (json_int_t) pu, "limit", (json_int_t) ps,
		                   "held_by", by, "holders", holders_json(f)),
		         "pool %s is at capacity (%" PRId64 "/%" PRId64
		         " slots)%s%s",
		         pool, pu, ps, hold[0] ? ", held by " : "", hold);
		return;
	}
	if (pl != NULL) {
		const char *g = jstr(pl, "group") ? jstr(pl, "group") : "?";
		add_wait(w, "capacity",
		         json_pack("{s:s,s:s,s:I,s:I,s:s?,s:o}", "scope",
		                   "group", "name", g, "used", (json_int_t) gu,
		                   "limit", (json_int_t) gl, "held_by", by,
		                   "holders", holders_json(f)),
		         "worker group %s: %" PRId64 "/%" PRId64
		         " slots used (%s)%s%s",
		         g, gu, gl, by ? by : "queue_order",
		         hold[0] ? ", held by " : "", hold);
		return;
	}
	add_wait(w, "capacity", NULL, "waits for a slot to be admitted");
}

static void
wait_backoff(const json_t *f, json_t *w, int64_t now)
{
	const json_t *ev = last_event(json_object_get(f, "events"),
	                              "instance.retry_scheduled", 0);
	const json_t *pl = json_object_get(ev, "payload");
	int64_t       at = jint(pl, "fire_at_us");
	char          t[40], d[32];

	if (ev == NULL) {
		add_wait(w, "backoff", NULL, "a retry is scheduled");
		return;
	}
	ax_clock_fmt_utc(at, t, sizeof(t));
	add_wait(
	    w, "backoff",
	    json_pack("{s:o,s:I,s:I,s:I}", "until", ts_json(at), "delay_us",
	              (json_int_t) jint(pl, "delay_us"), "next_attempt",
	              (json_int_t) jint(pl, "attempt") + 1, "max_tries",
	              (json_int_t) jint(pl, "max_tries")),
	    "retry backoff: attempt %" PRId64 " of %" PRId64 " at %s (%s %s)",
	    jint(pl, "attempt") + 1, jint(pl, "max_tries"), t,
	    at > now ? "in" : "due", dur(at > now ? at - now : 0, d, 32));
}

/* PENDING after a preemption: who took the slot, and when it is ready
 * again (the queue's attempt.preempted, the result handler's
 * instance.retry_scheduled); once due, the recovery throttle holds it
 * until its turn (highest tier first) and says when it let it back
 * (instance.recovery_released). */
static void
wait_preempted(const json_t *f, json_t *w, int64_t now)
{
	const json_t *evs = json_object_get(f, "events");
	const json_t *pe  = last_event(evs, "attempt.preempted", 0);
	const json_t *re  = last_event(evs, "instance.retry_scheduled", 0);
	const json_t *rl  = last_event(evs, "instance.recovery_released", 0);
	const json_t *pp  = json_object_get(pe, "payload"),
	             *rp  = json_object_get(re, "payload");
	int64_t at        = jint(rp, "fire_at_us");
	char    t[40], d[32], more[160];

	ax_clock_fmt_utc(at, t, sizeof(t));
	if (jstr(pp, "calendar") != NULL) { /* no winner: a window's slots */
		add_wait(w, "preempted",
		         json_pack("{s:s,s:s?,s:I,s:o}", "calendar",
		                   jstr(pp, "calendar"), "calendar_of",
		                   jstr(pp, "calendar_of"), "calendar_slots",
		                   (json_int_t) jint(pp, "calendar_slots"),
		                   "until", ts_json(at)),
		         "stopped by the capacity calendar of %s %s (%" PRId64
		         " slots in force); ready again at %s (%s %s)",
		         jstr(pp, "calendar_of") ? jstr(pp, "calendar_of")
		                                 : "group",
		         jstr(pp, "calendar"), jint(pp, "calendar_slots"), t,
		         at > now ? "in" : "due",
		         dur(at > now ? at - now : 0, d, 32));
		return;
	}
	if (rl != NULL && jint(rl, "id") > jint(re, "id"))
		snprintf(more, sizeof(more),
		         "; let back by the recovery throttle after %s held",
		         dur(jint(json_object_get(rl, "payload"), "held_us"),
		             d, sizeof(d)));
	else if (at <= now)
		snprintf(more, sizeof(more),
		         "; due for %s, held by the recovery throttle "
		         "(preemption.recovery_rate a second, highest tier "
		         "first)",
		         dur(now - at, d, sizeof(d)));
	else
		snprintf(more, sizeof(more), " (in %s)",
		         dur(at - now, d, sizeof(d)));
	add_wait(
	    w, "preempted",
	    json_pack("{s:s?,s:s?,s:s?,s:o,s:b}", "winner", jstr(pp, "winner"),
	              "winner_dag", jstr(pp, "winner_dag"), "winner_tier",
	              jstr(pp, "winner_tier"), "until", ts_json(at),
	              "throttled", at <= now && rl == NULL),
	    "preempted by %s.%s (%s); ready again at %s%s",
	    jstr(pp, "winner_dag") ? jstr(pp, "winner_dag") : "?",
	    jstr(pp, "winner_task") ? jstr(pp, "winner_task") : "?",
	    jstr(pp, "winner_tier") ? jstr(pp, "winner_tier") : "?", t, more);
}

static void
wait_instance(const json_t *f, json_t *w, int64_t now)
{
	const json_t *in     = json_object_get(f, "instance");
	const char   *st     = jstr(in, "state");
	const char   *reason = jstr(in, "reason");
	const json_t *atts   = json_object_get(f, "attempts");
	const json_t *cur    = json_array_get(
	       atts, json_array_size(atts) ? json_array_size(atts) - 1 : 0);

	if (streq(st, "RUNNING") || terminal(st))
		return;
	if (json_is_true(json_object_get(f, "dag_paused")) ||
	    streq(reason, "DAG_PAUSED"))
		wait_paused(f, w);
	if (streq(st, "UNKNOWN")) {
		add_wait(w, "lost_attempt", NULL,
		         "attempt %" PRId64 " was lost (%s): its worker may "
		         "still report; a retry or a late report settles it",
		         jint(cur, "number"),
		         jstr(cur, "reason") ? jstr(cur, "reason")
		                             : "UNKNOWN");
		if (last_event(json_object_get(f, "events"),
		               "instance.retry_scheduled",
		               jint(cur, "number")))
			wait_backoff(f, w, now);
		return;
	}
	if (streq(st, "READY")) {
		int64_t due = jint(cur, "due_us");
		char    t[40], d[32];
		if (due > now) {
			ax_clock_fmt_utc(due, t, sizeof(t));
			add_wait(w, "delay",
			         json_pack("{s:o}", "until", ts_json(due)),
			         "attempt %" PRId64 " is held until its due "
			         "instant %s (in %s)",
			         jint(cur, "number"), t,
			         dur(due - now, d, 32));
		} else
			add_wait(
			    w, "dispatch",
			    json_pack("{s:s?}", "attempt_state",
			              jstr(cur, "state")),
			    "admitted; attempt %" PRId64 " is %s, waiting "
			    "for a worker of group %s to take it",
			    jint(cur, "number"),
			    jstr(cur, "state") ? jstr(cur, "state") : "?",
			    jstr(in, "worker_group") ? jstr(in, "worker_group")
			                             : "?");
		wait_no_worker(f, w);
		return;
	}
	/* PENDING */
	/* the row says "RULE_BLOCKED rule=12" */
	if (prefix(reason, "RULE_BLOCKED") ||
	    prefix(reason, "CHANNEL_BLOCKED"))
		wait_rule(f, w);
	else if (streq(reason, "RETRY_SCHEDULED"))
		wait_backoff(f, w, now);
	else if (streq(reason, "PREEMPTED"))
		wait_preempted(f, w, now);
	else if (streq(reason, "WAIT_RESOURCE") ||
	         streq(reason, "BACKPRESSURE_DELAYED")) {
		wait_resource(f, w);
		wait_no_worker(f, w);
	}
	wait_upstream_tasks(f, w);
	if (json_array_size(w) == 0 && !streq(reason, "DAG_PAUSED")) {
		const json_t *run = json_object_get(f, "run");
		if (streq(jstr(run, "state"), "QUEUED"))
			add_wait(w, "run_queued",
			         json_pack("{s:I}", "run_id",
			                   (json_int_t) jint(run, "id")),
			         "its run %" PRId64 " has not started (%s): "
			         "explain the run",
			         jint(run, "id"),
			         jstr(run, "reason") ? jstr(run, "reason")
			                             : "?");
		else
			add_wait(w, "admission", NULL,
			         "waits for admission (%s)",
			         reason ? reason : "no reason recorded");
	}
}

static void
wait_run(const json_t *f, json_t *w)
{
	const json_t *run    = json_object_get(f, "run");
	const char   *st     = jstr(run, "state");
	const char   *reason = jstr(run, "reason");
	size_t        i;
	json_t       *u;

	if (terminal(st))
		return;
	if (json_is_true(json_object_get(f, "dag_paused")))
		wait_paused(f, w);
	if (streq(st, "QUEUED")) {
		if (streq(reason, "CONCURRENCY_BLOCKED"))
			wait_overlap(f, w);
		else
			wait_upstream_dags(f, w);
		if (json_array_size(w) == 0)
			add_wait(w, "start", NULL,
			         "queued (%s), about to start",
			         reason ? reason : "no reason recorded");
		return;
	}
	json_array_foreach(json_object_get(f, "unfinished"), i, u)
	{
		const char *s = jstr(u, "state");
		if (streq(s, "RUNNING"))
			continue;
		add_wait(w, "instance",
		         json_pack("{s:I,s:s?,s:s?,s:s?}", "instance_id",
		                   (json_int_t) jint(u, "instance_id"), "task",
		                   jstr(u, "task"), "state", s, "reason",
		                   jstr(u, "reason")),
		         "task %s is %s%s%s%s: explain instance %" PRId64,
		         jstr(u, "task") ? jstr(u, "task") : "?", s ? s : "?",
		         jstr(u, "reason") ? " (" : "",
		         jstr(u, "reason") ? jstr(u, "reason") : "",
		         jstr(u, "reason") ? ")" : "", jint(u, "instance_id"));
	}
}

/* ---- 2. the timeline ------------------------------------------------ */

/* One sentence for event e into b. */
static void
event_text(const json_t *f, const json_t *e, char *b, size_t n)
{
	const char   *t  = jstr(e, "type") ? jstr(e, "type") : "?";
	const char   *r  = jstr(e, "reason");
	const json_t *pl = json_object_get(e, "payload");
	const json_t *rp = json_object_get(pl, "report");
	int64_t       a  = jint(e, "attempt");
	char          d[32], at[40];

	if (!strcmp(t, "run.created"))
		snprintf(b, n, "run created");
	else if (!strcmp(t, "run.waiting")) {
		const json_t *u = json_object_get(pl, "upstream");
		snprintf(b, n, "run waits for %zu upstream DAG%s%s%s",
		         json_array_size(u),
		         json_array_size(u) == 1 ? "" : "s",
		         json_array_size(u) ? ", first " : "",
		         json_array_size(u)
		             ? (jstr(json_array_get(u, 0), "dag")
		                    ? jstr(json_array_get(u, 0), "dag")
		                    : "?")
		             : "");
	} else if (!strcmp(t, "run.held"))
		snprintf(b, n,
		         "run held by overlap policy %s behind run %" PRId64,
		         jstr(pl, "policy") ? jstr(pl, "policy") : "?",
		         jint(pl, "behind"));
	else if (!strcmp(t, "run.planned"))
		snprintf(b, n, "run started: instances planned");
	else if (!strcmp(t, "run.deadline_missed") ||
	         !strcmp(t, "instance.deadline_missed"))
		snprintf(b, n, "%s%s missed its deadline (%s) in state %s",
		         jstr(pl, "task") ? "task " : "run",
		         jstr(pl, "task") ? jstr(pl, "task") : "",
		         jstr(pl, "deadline") ? jstr(pl, "deadline") : "?",
		         jstr(pl, "state") ? jstr(pl, "state") : "?");
	else if (!strcmp(t, "instance.delayed") && jstr(pl, "until") != NULL)
		snprintf(b, n, "delayed (%s) until %s",
		         jstr(pl, "held_by") ? jstr(pl, "held_by") : "?",
		         jstr(pl, "until"));
	else if (!strcmp(t, "instance.delayed"))
		snprintf(
		    b, n,
		    "waits for a slot: %s (group %s %" PRId64 "/%" PRId64
		    "%s%s)",
		    jstr(pl, "held_by") ? jstr(pl, "held_by") : "?",
		    jstr(pl, "group") ? jstr(pl, "group") : "?",
		    jint(pl, "group_used"), jint(pl, "group_limit"),
		    jstr(pl, "pool") && *jstr(pl, "pool") ? ", pool " : "",
		    jstr(pl, "pool") && *jstr(pl, "pool") ? jstr(pl, "pool")
		                                          : "");
	else if (!strcmp(t, "instance.blocked") && jhas(pl, "rule_id"))
		snprintf(b, n, "blocked by rule %" PRId64,
		         jint(pl, "rule_id"));
	else if (!strcmp(t, "instance.blocked"))
		snprintf(b, n, "blocked (%s)", r ? r : "?");
	else if (!strcmp(t, "instance.admitted"))
		snprintf(b, n, "admitted: attempt %" PRId64 " created", a);
	else if (!strcmp(t, "instance.running")) {
		const char *w = jstr(rp, "worker");
		size_t      i;
		json_t     *x;
		json_array_foreach(json_object_get(f, "attempts"), i,
		                   x) if (w == NULL && jint(x, "number") == a)
		    w = jstr(x, "worker_id");
		snprintf(b, n, "attempt %" PRId64 " running%s%s", a,
		         w ? " on " : "", w ? w : "");
	} else if (!strcmp(t, "attempt.preempted") &&
	           jstr(pl, "calendar") != NULL) {
		snprintf(b, n,
		         "attempt %" PRId64 " stopped by the capacity "
		         "calendar of %s %s (%" PRId64 " slots, %s) on %s",
		         a,
		         jstr(pl, "calendar_of") ? jstr(pl, "calendar_of")
		                                 : "group",
		         jstr(pl, "calendar"), jint(pl, "calendar_slots"),
		         jstr(pl, "victim_tier") ? jstr(pl, "victim_tier")
		                                 : "?",
		         jstr(pl, "worker") ? jstr(pl, "worker") : "?");
	} else if (!strcmp(t, "attempt.preempted")) {
		snprintf(
		    b, n,
		    "attempt %" PRId64 " preempted by %s.%s (%s over %s) "
		    "on %s",
		    a, jstr(pl, "winner_dag") ? jstr(pl, "winner_dag") : "?",
		    jstr(pl, "winner_task") ? jstr(pl, "winner_task") : "?",
		    jstr(pl, "winner_tier") ? jstr(pl, "winner_tier") : "?",
		    jstr(pl, "victim_tier") ? jstr(pl, "victim_tier") : "?",
		    jstr(pl, "worker") ? jstr(pl, "worker") : "?");
	} else if (!strcmp(t, "instance.retry_scheduled") &&
	           json_is_true(json_object_get(pl, "preempted"))) {
		ax_clock_fmt_utc(jint(pl, "fire_at_us"), at, sizeof(at));
		snprintf(b, n,
		         "preempted: ready again at %s (after %s), no try "
		         "used",
		         at, dur(jint(pl, "delay_us"), d, sizeof(d)));
	} else if (!strcmp(t, "instance.recovery_released")) {
		snprintf(
		    b, n,
		    "let back by the recovery throttle as %s after %s held "
		    "(preemption.recovery_rate %" PRId64 ")",
		    jstr(pl, "tier") ? jstr(pl, "tier") : "?",
		    dur(jint(pl, "held_us"), d, sizeof(d)),
		    jint(pl, "recovery_rate"));
	} else if (!strcmp(t, "instance.retry_scheduled")) {
		ax_clock_fmt_utc(jint(pl, "fire_at_us"), at, sizeof(at));
		snprintf(b, n,
		         "retry %" PRId64 " of %" PRId64 " at %s (backoff %s)",
		         jint(pl, "attempt") + 1, jint(pl, "max_tries"), at,
		         dur(jint(pl, "delay_us"), d, sizeof(d)));
	} else if (!strcmp(t, "attempt.reported"))
		snprintf(b, n,
		         "report %s for attempt %" PRId64 " moved nothing",
		         jstr(rp, "status") ? jstr(rp, "status") : "?", a);
	else if (strchr(t, '.') != NULL && a > 0)
		snprintf(b, n, "%s (attempt %" PRId64 ")", strchr(t, '.') + 1,
		         a);
	else if (strchr(t, '.') != NULL)
		snprintf(b, n, "%s", strchr(t, '.') + 1);
	else
		snprintf(b, n, "%s", t);
	if (!strncmp(t, "instance.", 9) && a > 0 &&
	    (!strcmp(t, "instance.failed") ||
	     !strcmp(t, "instance.succeeded") ||
	     !strcmp(t, "instance.timeout") ||
	     !strcmp(t, "instance.unknown") ||
	     !strcmp(t, "instance.canceled"))) {
		snprintf(b, n, "attempt %" PRId64 " %s%s%s", a,
		         strchr(t, '.') + 1, r ? ": " : "", r ? r : "");
	}
}

static json_t *
timeline(const json_t *f)
{
	json_t *out  = json_array();
	int64_t prev = 0;
	size_t  i;
	json_t *e;
	char    text[600];

	json_array_foreach(json_object_get(f, "events"), i, e)
	{
		int64_t t = jint(e, "time_us");
		event_text(f, e, text, sizeof(text));
		json_array_append_new(
		    out,
		    json_pack("{s:I,s:o,s:s?,s:s?,s:o,s:o,s:I,s:s}",
		              "event_id", (json_int_t) jint(e, "id"), "time",
		              ts_json(t), "type", jstr(e, "type"), "reason",
		              jstr(e, "reason"), "attempt",
		              jint(e, "attempt")
		                  ? json_integer(jint(e, "attempt"))
		                  : json_null(),
		              "instance_id",
		              jhas(e, "instance_id")
		                  ? json_integer(jint(e, "instance_id"))
		                  : json_null(),
		              "since_previous_us",
		              (json_int_t) (i == 0 || t < prev ? 0 : t - prev),
		              "text", text));
		prev = t;
	}
	return out;
}

/* ---- 3. the attempts ------------------------------------------------ */

static int
lost_reason(const char *r)
{
	return streq(r, "TIMEOUT_HEARTBEAT") || streq(r, "WORKER_RESTARTED") ||
	    streq(r, "WORKER_LEFT") || streq(r, "WORKER_FENCED") ||
	    streq(r, "LEASE_EXPIRED");
}

/* How attempt a ended, into b; "" while it has not. */
static void
how_ended(const json_t *f, const json_t *a, char *b, size_t n)
{
	const char   *st   = jstr(a, "state");
	const char   *r    = jstr(a, "reason");
	const char   *w    = jstr(a, "worker_id") ? jstr(a, "worker_id") : "?";
	int64_t       no   = jint(a, "number");
	const json_t *evs  = json_object_get(f, "events");
	int           lost = last_event(evs, "instance.unknown", no) != NULL;

	b[0] = '\0';
	if (streq(st, "UNKNOWN") || (lost && !terminal(st))) {
		if (streq(r, "TIMEOUT_HEARTBEAT"))
			snprintf(b, n,
			         "UNKNOWN after worker %s's lease lapsed", w);
		else if (streq(r, "WORKER_RESTARTED"))
			snprintf(b, n,
			         "UNKNOWN: worker %s restarted without it", w);
		else
			snprintf(b, n, "UNKNOWN (%s) on worker %s",
			         r ? r : "lost", w);
		return;
	}
	if (!terminal(st))
		return;
	if (lost) {
		snprintf(b, n,
		         "late %s reconciled: worker %s reported after "
		         "the attempt was taken for lost",
		         st, w);
		return;
	}
	if (streq(st, "SUCCESS"))
		snprintf(b, n, "SUCCESS (exit 0)");
	else if (streq(st, "FAILED") && jhas(a, "exit_status") &&
	         !streq(r, "RENDER_ERROR"))
		snprintf(b, n, "FAILED: exit %" PRId64 "%s%s",
		         jint(a, "exit_status"), r ? ", " : "", r ? r : "");
	else if (streq(st, "TIMEOUT"))
		snprintf(b, n, "TIMEOUT (%s)", r ? r : "TIMEOUT_EXEC");
	else
		snprintf(b, n, "%s%s%s", st, r ? " (" : "", r ? r : "");
	if (r != NULL && !jhas(a, "exit_status") && !streq(st, "SUCCESS") &&
	    !streq(st, "TIMEOUT"))
		snprintf(b + strlen(b), n - strlen(b), ")");
}

/* Why attempt a started, into b. */
static void
why_started(const json_t *f, const json_t *prev, const json_t *a, char *b,
            size_t n)
{
	const json_t *evs = json_object_get(f, "events");
	const json_t *adm =
	    last_event(evs, "instance.admitted", jint(a, "number"));
	const json_t *clr    = last_event(evs, "instance.cleared", 0);
	int64_t       adm_id = jint(adm, "id");
	char          e[300];

	if (prev == NULL) {
		snprintf(b, n, "first attempt");
		return;
	}
	/* a clear between the previous attempt and this admission */
	if (clr != NULL && adm_id != 0 && jint(clr, "id") < adm_id &&
	    jint(clr, "time_us") >= jint(prev, "ended_us")) {
		snprintf(b, n, "run again after a clear");
		return;
	}
	how_ended(f, prev, e, sizeof(e));
	const char *pst = jstr(prev, "state");
	if (streq(pst, "FAILED") && jhas(prev, "exit_status"))
		snprintf(b, n, "retry after exit %" PRId64,
		         jint(prev, "exit_status"));
	else if (streq(pst, "UNKNOWN") || lost_reason(jstr(prev, "reason")))
		snprintf(b, n, "re-run after attempt %" PRId64 " was lost: %s",
		         jint(prev, "number"), e);
	else if (e[0])
		snprintf(b, n, "retry after attempt %" PRId64 " ended %s",
		         jint(prev, "number"), e);
	else
		snprintf(b, n, "after attempt %" PRId64, jint(prev, "number"));
}

static json_t *
attempts(const json_t *f)
{
	json_t       *out  = json_array();
	const json_t *prev = NULL;
	size_t        i;
	json_t       *a;
	char          why[400], how[400];

	json_array_foreach(json_object_get(f, "attempts"), i, a)
	{
		why_started(f, prev, a, why, sizeof(why));
		how_ended(f, a, how, sizeof(how));
		json_array_append_new(
		    out,
		    json_pack("{s:I,s:s?,s:s?,s:o,s:s?,s:o,s:o,s:o,s:s,s:o}",
		              "number", (json_int_t) jint(a, "number"),
		              "state", jstr(a, "state"), "worker_id",
		              jstr(a, "worker_id"), "exit_status",
		              jhas(a, "exit_status")
		                  ? json_integer(jint(a, "exit_status"))
		                  : json_null(),
		              "reason", jstr(a, "reason"), "admitted_at",
		              ts_json(jint(a, "admitted_us")), "started_at",
		              ts_json(jint(a, "started_us")), "ended_at",
		              ts_json(jint(a, "ended_us")), "why_started", why,
		              "how_ended",
		              how[0] ? json_string(how) : json_null()));
		prev = a;
	}
	return out;
}

/* ---- the document --------------------------------------------------- */

static void
summary(json_t *doc, const char *kind, const char *st, const char *reason,
        const json_t *waits, const json_t *atts)
{
	char          b[700];
	const json_t *w0 = json_array_get(waits, 0);

	if (streq(st, "RUNNING") && !strcmp(kind, "instance"))
		snprintf(b, sizeof(b), "running (attempt %zu)",
		         json_array_size(atts));
	else if (w0 != NULL)
		snprintf(b, sizeof(b), "%s%s%s: %s", st ? st : "?",
		         reason ? " " : "", reason ? reason : "",
		         jstr(w0, "text") ? jstr(w0, "text") : "");
	else if (terminal(st) && json_array_size(atts) > 0) {
		const json_t *l =
		    json_array_get(atts, json_array_size(atts) - 1);
		snprintf(b, sizeof(b), "%s after %zu attempt%s%s%s", st,
		         json_array_size(atts),
		         json_array_size(atts) == 1 ? "" : "s",
		         jstr(l, "how_ended") ? ": last " : "",
		         jstr(l, "how_ended") ? jstr(l, "how_ended") : "");
	} else
		snprintf(b, sizeof(b), "%s%s%s", st ? st : "?",
		         reason ? " " : "", reason ? reason : "");
	json_object_set_new(doc, "summary", json_string(b));
}

/* The deadline of the document from the fact {at_us, rule, missed,
 * met_us}: {at, rule, missed, met_at} (met_at null until it is met). */
static json_t *
deadline_doc(const json_t *dl)
{
	return json_pack("{s:o, s:s?, s:b, s:o}", "at",
	                 ts_json(jint(dl, "at_us")), "rule", jstr(dl, "rule"),
	                 "missed", json_is_true(json_object_get(dl, "missed")),
	                 "met_at", ts_json(jint(dl, "met_us")));
}

ax_err
ax_explain_build(const json_t *f, json_t **out)
{
	const char   *kind = jstr(f, "subject");
	const json_t *row;
	json_t       *doc, *waits;
	int64_t       now = jint(f, "now_us");

	*out = NULL;
	if (!json_is_object(f) || kind == NULL ||
	    (strcmp(kind, "instance") && strcmp(kind, "run")))
		return ax_err_set(AX_EINVAL,
		                  "explain: facts need a subject "
		                  "\"instance\" or \"run\"");
	row = json_object_get(f, kind);
	if (!json_is_object(row))
		return ax_err_set(AX_EINVAL, "explain: facts lack the %s row",
		                  kind);
	const json_t *run = json_object_get(f, "run");
	const char   *st  = jstr(row, "state");
	const char   *rs  = jstr(row, "reason");
	doc               = json_pack(
	                  "{s:s,s:I,s:s?,s:o,s:o,s:o,s:s?,s:o,s:b}", "kind", kind, "id",
	                  (json_int_t) jint(row, "id"), "dag", jstr(row, "dag"), "task",
            jstr(row, "task") ? json_string(jstr(row, "task")) : json_null(),
	                  "run_id",
            jhas(row, "run_id") ? json_integer(jint(row, "run_id"))
	                      : run           ? json_integer(jint(run, "id"))
	                                      : json_null(),
	                  "logical_time",
	                  ts_json(jint(row, "logical_us") ? jint(row, "logical_us")
	                                                  : jint(run, "logical_us")),
	                  "state", st, "reason", rs ? json_string(rs) : json_null(),
	                  "running", streq(st, "RUNNING") && !strcmp(kind, "instance"));
	waits = json_array();
	if (doc == NULL || waits == NULL) {
		json_decref(doc);
		json_decref(waits);
		return ax_err_set(AX_ENOMEM, "explain: out of memory");
	}
	if (!strcmp(kind, "instance")) {
		json_object_set_new(doc, "shard",
		                    json_integer(jint(row, "shard")));
		json_object_set_new(doc, "shard_total",
		                    json_integer(jint(row, "shard_total")
		                                     ? jint(row, "shard_total")
		                                     : 1));
		wait_instance(f, waits, now);
	} else
		wait_run(f, waits);
	json_t *atts = attempts(f);
	summary(doc, kind, st, rs, waits, atts);
	json_object_set_new(doc, "waiting_for", waits);
	json_object_set_new(doc, "attempts", atts);
	if (json_is_object(json_object_get(f, "deadline")))
		json_object_set_new(
		    doc, "deadline",
		    deadline_doc(json_object_get(f, "deadline")));
	json_object_set_new(doc, "timeline", timeline(f));
	json_object_set_new(doc, "timeline_truncated",
	                    json_boolean(json_is_true(
	                        json_object_get(f, "events_truncated"))));
	json_object_set_new(doc, "explained_at", ts_json(now));
	*out = doc;
	return AX_OK;
}

/* ---- the human form ------------------------------------------------- */

void
ax_explain_text(const json_t *x, ax_buf *b)
{
	const char *kind = jstr(x, "kind") ? jstr(x, "kind") : "?";
	size_t      i;
	json_t     *v;
	char        d[32];

	ax_buf_printf(b, "%s %" PRId64 "  %s%s%s", kind, jint(x, "id"),
	              jstr(x, "dag") ? jstr(x, "dag") : "?",
	              jstr(x, "task") ? "." : "",
	              jstr(x, "task") ? jstr(x, "task") : "");
	if (!strcmp(kind, "instance") && jhas(x, "run_id"))
		ax_buf_printf(b, "  run %" PRId64, jint(x, "run_id"));
	if (jstr(x, "logical_time"))
		ax_buf_printf(b, "  %s", jstr(x, "logical_time"));
	ax_buf_printf(b, "\nstate     %s%s%s%s\n",
	              jstr(x, "state") ? jstr(x, "state") : "?",
	              jstr(x, "reason") ? " (" : "",
	              jstr(x, "reason") ? jstr(x, "reason") : "",
	              jstr(x, "reason") ? ")" : "");
	json_array_foreach(json_object_get(x, "waiting_for"), i, v)
	    ax_buf_printf(b, "%s%s\n", i == 0 ? "waits on  " : "          ",
	                  jstr(v, "text") ? jstr(v, "text") : "?");
	if (json_array_size(json_object_get(x, "waiting_for")) == 0)
		ax_buf_printf(b, "summary   %s\n",
		              jstr(x, "summary") ? jstr(x, "summary") : "");
	v = json_object_get(x, "deadline");
	if (json_is_object(v) && jstr(v, "at"))
		ax_buf_printf(b, "deadline  %s%s%s%s\n", jstr(v, "at"),
		              jstr(v, "rule") ? " (" : "",
		              jstr(v, "rule") ? jstr(v, "rule") : "",
		              json_is_true(json_object_get(v, "missed"))
		                  ? ") MISSED"
		                  : jstr(v, "met_at") ? ") met"
		                  : jstr(v, "rule")   ? ")"
		                                      : "");
	if (json_array_size(json_object_get(x, "attempts")) > 0)
		ax_buf_puts(b, "attempts\n");
	json_array_foreach(json_object_get(x, "attempts"), i, v)
	{
		ax_buf_printf(
		    b, "  #%" PRId64 " %-8s %s%s: %s", jint(v, "number"),
		    jstr(v, "state") ? jstr(v, "state") : "?",
		    jstr(v, "worker_id") ? "on " : "",
		    jstr(v, "worker_id") ? jstr(v, "worker_id") : "",
		    jstr(v, "why_started") ? jstr(v, "why_started") : "");
		if (jstr(v, "how_ended"))
			ax_buf_printf(b, "; ended %s", jstr(v, "how_ended"));
		ax_buf_putc(b, '\n');
	}
	if (json_array_size(json_object_get(x, "timeline")) > 0)
		ax_buf_printf(
		    b, "timeline%s\n",
		    json_is_true(json_object_get(x, "timeline_truncated"))
		        ? " (older events left out)"
		        : "");
	json_array_foreach(json_object_get(x, "timeline"), i, v)
	{
		const char *t = jstr(v, "time") ? jstr(v, "time") : "?";
		/* "2026-12-01T10:00:00.123456Z" -> "10:00:00.123" */
		ax_buf_printf(
		    b, "  %.*s %8s  %-24s %-20s %s\n",
		    strlen(t) >= 23 ? 12 : (int) strlen(t),
		    strlen(t) >= 23 ? t + 11 : t,
		    i == 0 ? ""
		           : dur(jint(v, "since_previous_us"), d, sizeof(d)),
		    jstr(v, "type") ? jstr(v, "type") : "?",
		    jstr(v, "reason") ? jstr(v, "reason") : "",
		    jstr(v, "text") ? jstr(v, "text") : "");
	}
}
