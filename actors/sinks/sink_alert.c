/*
 * sink_alert.c - events -> alerts for Alertmanager and a webhook (see
 * sink_alert.h).
 *
 * Invariants: `open` maps "<dag>\x1f<task>" to the JSON array of the
 * alert objects fired for that task and not yet resolved; only the
 * owner thread (the event emitter's) reads or changes it; it holds at
 * most AX_SINK_ALERT_OPEN tasks (a task over the bound still alerts, its
 * resolution is left to Alertmanager's resolve_timeout).
 *
 * The stuck check runs on a thread of its own with its own PostgreSQL
 * connection: every alerts.stuck_check it reads at most
 * AX_SINK_ALERT_STUCK_MAX instances in READY / RUNNING / UNKNOWN
 * unchanged for alerts.stuck_after (ax_store_stuck_instances: the
 * partial index of unfinished instances, never the history), fires
 * each new one once and resolves those a complete read no longer
 * finds. Only that thread touches `stuck`.
 *
 * Workload: alerts are rare (failures of last attempts, timeouts, missed
 * deadlines): every other event costs one strcmp chain in map_type.
 */
#include "sink_alert.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "dag.h"
#include "dag_registry.h"
#include "hmap.h"
#include "log.h"
#include "sink_pub.h"
#include "store.h"

#define ALERT_COMP "alerts"
#define AM_PATH    "/api/v2/alerts"

struct ax_sink_alert {
	ax_sink_http           *am, *wh; /* NULL: target off */
	char                   *link_url;
	struct ax_dag_registry *reg;
	ax_strmap              *open; /* see the invariants */
	int                     full; /* open reached its bound (logged) */
	_Atomic uint64_t        fired, resolved, checks;
	/* the stuck check (off when watch_on is 0) */
	char           *dsn;
	int64_t         stuck_after_us, stuck_check_us;
	int             watch_on;
	pthread_t       watch;
	pthread_mutex_t wmu;
	pthread_cond_t  wcv;
	int             wstop; /* under wmu */
	ax_strmap      *stuck; /* instance id -> stuck_ent; watch thread */
};

/* A stuck instance alerted, as long as the check still finds it. */
typedef struct stuck_ent {
	json_t  *a;   /* the alert fired (owned) */
	uint64_t gen; /* last check that found it */
} stuck_ent;

/* ---------------------------------------------------------------------- */
/* mapping (pure) */

static const char *
severity_of(int impact)
{
	static const char *const s[] = { "critical", "error", "warning",
		                         "info" };
	return impact >= 0 && impact < 4 ? s[impact] : "warning";
}

static const char *
impact_of(int impact)
{
	return impact >= 0 && impact < 4 ? ax_impact_name((ax_impact) impact)
	                                 : "P2";
}

static void
set_label(json_t *labels, const char *k, const char *v)
{
	if (v != NULL && v[0] != '\0')
		json_object_set_new(labels, k, json_string(v));
}

/* What one alert says; strings borrowed. */
typedef struct alert_in {
	const char *name, *reason, *summary, *dag, *task;
	const char *instance;    /* label `instance` (scheduler alerts) */
	const char *explain;     /* NULL: derived from the ids below */
	int64_t     instance_id; /* > 0: explain the instance */
	int64_t     run_id;      /* > 0: else explain the run */
	int64_t     time_us;     /* startsAt */
} alert_in;

/* The postable alert object of in for a DAG known as d; NULL on OOM. */
static json_t *
alert_object(const alert_in *in, const ax_alert_dag *d, const char *link_url)
{
	char        explain[96], link[512], when[40];
	const char *what  = in->instance_id > 0 ? "instance" : "run";
	int64_t     id    = in->instance_id > 0 ? in->instance_id : in->run_id;
	json_t     *label = json_object(), *ann = json_object();

	if (in->explain != NULL)
		snprintf(explain, sizeof(explain), "%s", in->explain);
	else
		snprintf(explain, sizeof(explain), "axctl explain %s %lld",
		         what, (long long) id);
	set_label(label, "alertname", in->name);
	set_label(label, "impact", impact_of(d->impact));
	set_label(label, "severity", severity_of(d->impact));
	set_label(label, "owner", d->owner);
	set_label(label, "dag", in->dag);
	set_label(label, "task", in->task);
	set_label(label, "reason", in->reason);
	set_label(label, "instance", in->instance);
	set_label(ann, "summary", in->summary);
	set_label(ann, "explain", explain);
	ax_sink_pub_time(in->time_us, when, sizeof(when));
	json_t *o = json_pack("{s:o,s:o,s:s}", "labels", label, "annotations",
	                      ann, "startsAt", when);
	if (link_url != NULL && link_url[0] != '\0' && o != NULL && id > 0) {
		snprintf(link, sizeof(link), "%s/api/v1/%ss/%lld/explain",
		         link_url, what, (long long) id);
		set_label(ann, "link", link);
		json_object_set_new(o, "generatorURL", json_string(link));
	}
	return o;
}

ax_alert_action
ax_sink_alert_map(const Ax__Event *e, const ax_alert_dag *d,
                  const char *link_url, json_t **out)
{
	const char *t = e->type;
	char        summary[768];
	alert_in    in = { .reason      = e->reason,
		           .summary     = summary,
		           .dag         = e->dag,
		           .task        = e->task,
		           .instance_id = e->instance_id,
		           .run_id      = e->dag_run_id,
		           .time_us     = e->time_us };

	if (out != NULL)
		*out = NULL;
	if (e->dag[0] == '\0')
		return AX_ALERT_NONE;
	if (strcmp(t, "instance.succeeded") == 0)
		return e->task[0] != '\0' ? AX_ALERT_RESOLVE : AX_ALERT_NONE;
	if (strcmp(t, "instance.failed") == 0) {
		/* an earlier attempt is retried: no one needs to act yet */
		if (d->max_tries > 0 && e->attempt < d->max_tries)
			return AX_ALERT_NONE;
		in.name = "AxTaskFailed";
		if (in.reason[0] == '\0')
			in.reason = "FAILED";
		snprintf(summary, sizeof(summary),
		         "%s.%s failed after its last attempt (%d): %s",
		         e->dag, e->task, (int) e->attempt, in.reason);
	} else if (strcmp(t, "instance.timeout") == 0) {
		in.name = "AxTaskTimeout";
		if (in.reason[0] == '\0')
			in.reason = "TIMEOUT_EXEC";
		snprintf(summary, sizeof(summary),
		         "%s.%s attempt %d timed out: %s", e->dag, e->task,
		         (int) e->attempt, in.reason);
	} else if (strcmp(t, "instance.deadline_missed") == 0 ||
	           strcmp(t, "run.deadline_missed") == 0) {
		in.name = "AxDeadlineMissed";
		if (in.reason[0] == '\0')
			in.reason = "DEADLINE_MISSED";
		snprintf(summary, sizeof(summary),
		         "%s%s%s (run %lld) missed its deadline", e->dag,
		         e->task[0] ? "." : "", e->task,
		         (long long) e->dag_run_id);
		if (t[0] == 'r')
			in.instance_id = 0;
	} else {
		return AX_ALERT_NONE;
	}
	if (out == NULL)
		return AX_ALERT_FIRE;
	*out = alert_object(&in, d, link_url);
	return *out != NULL ? AX_ALERT_FIRE : AX_ALERT_NONE;
}

json_t *
ax_sink_alert_stuck_json(const ax_store_stuck *x, const ax_alert_dag *d,
                         int64_t stuck_after_us, const char *link_url)
{
	char     reason[32], summary[768];
	alert_in in = { .name        = "AxInstanceStuck",
		        .reason      = reason,
		        .summary     = summary,
		        .dag         = x->dag,
		        .task        = x->task,
		        .instance_id = x->instance_id,
		        .run_id      = x->dag_run_id,
		        .time_us     = x->since_us + stuck_after_us };

	snprintf(reason, sizeof(reason), "STUCK_%s", x->state);
	snprintf(summary, sizeof(summary),
	         "%s.%s has been %s for more than %lld s (attempt %d)", x->dag,
	         x->task, x->state,
	         (long long) (stuck_after_us / AX_USEC_PER_SEC),
	         x->try_number);
	return alert_object(&in, d, link_url);
}

json_t *
ax_sink_alert_scheduler_json(const char *reason, const char *holder,
                             const char *summary, int64_t time_us)
{
	ax_alert_dag d  = { .impact = 0 }; /* no scheduling at all: P0 */
	alert_in     in = { .name     = "AxSchedulerNoLease",
		            .reason   = reason,
		            .summary  = summary,
		            .instance = holder,
		            .explain  = "axctl status; the axd log (reason "
		                            "LEASE_LOST / DB_UNAVAILABLE)",
		            .time_us  = time_us };
	return alert_object(&in, &d, NULL);
}

static int
http_url(const char *u)
{
	return strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0;
}

ax_err
ax_sink_alert_check(const ax_sink_alert_config *cfg)
{
	const char *am = cfg->alertmanager_url, *wh = cfg->webhook_url;
	int         am_on = am != NULL && am[0] != '\0';
	int         wh_on = wh != NULL && wh[0] != '\0';

	if (am_on && !http_url(am))
		return ax_err_set(
		    AX_EINVAL,
		    "alerts.alertmanager_url \"%s\" is not an "
		    "http:// or https:// URL; write Alertmanager's "
		    "base URL, e.g. http://127.0.0.1:9093",
		    am);
	if (wh_on && !http_url(wh))
		return ax_err_set(
		    AX_EINVAL,
		    "alerts.webhook_url \"%s\" is not an http:// "
		    "or https:// URL; write the receiver's full URL, "
		    "e.g. https://hooks.example.com/ax",
		    wh);
	if (cfg->link_url != NULL && cfg->link_url[0] != '\0' &&
	    !http_url(cfg->link_url))
		return ax_err_set(
		    AX_EINVAL,
		    "alerts.link_url \"%s\" is not an http:// or "
		    "https:// URL; write ax-api's base URL, e.g. "
		    "https://ax.example.com",
		    cfg->link_url);
	if ((am_on || wh_on) && cfg->capacity == 0)
		return ax_err_set(AX_EINVAL,
		                  "alerts.buffer must be at least 1 (alerts "
		                  "kept per target while it is unreachable)");
	if (!am_on && !wh_on)
		return ax_err_set(AX_ENOENT, "alerts: no target configured");
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* bodies */

/* Alertmanager: the array of postable alerts; takes alerts. */
static char *
am_body(json_t *alerts)
{
	char *s = json_dumps(alerts, JSON_COMPACT);
	json_decref(alerts);
	return s;
}

/* The webhook: {"version":"1","status":..,"alerts":[{status,...}]}. */
static char *
wh_body(const json_t *alerts, const char *status)
{
	json_t *arr = json_array();
	size_t  i;
	json_t *a;

	json_array_foreach(alerts, i, a)
	{
		json_t *c = json_deep_copy(a);
		json_object_set_new(c, "status", json_string(status));
		json_array_append_new(arr, c);
	}
	json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "version", "1", "source",
	                      "ax", "status", status, "alerts", arr);
	char   *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* Pushes alerts (borrowed) to every target; returns 1 when at least one
 * target queued them. */
static int
push(ax_sink_alert *sa, json_t *alerts, const char *status)
{
	int q = 0;
	if (sa->wh != NULL) {
		char *b = wh_body(alerts, status);
		if (b != NULL)
			q |= ax_sink_http_push(sa->wh, b);
	}
	if (sa->am != NULL) {
		char *b = am_body(json_incref(alerts));
		if (b != NULL)
			q |= ax_sink_http_push(sa->am, b);
	}
	return q;
}

/* ---------------------------------------------------------------------- */
/* owner side */

/* What the registry knows of DAG dag (version_id if still loaded, else
 * its current version) and its task (may be ""). *ref (released by the
 * caller) keeps the strings alive. May read PostgreSQL on a miss. Any
 * thread (the registry is shared). */
static void
dag_info(ax_sink_alert *sa, const char *dag, int64_t version_id,
         const char *task, ax_alert_dag *d, ax_dag_entry **ref)
{
	ax_dag_entry *en = NULL;

	*d   = (ax_alert_dag) { .impact = -1 };
	*ref = NULL;
	if (sa->reg == NULL)
		return;
	if (version_id > 0)
		en = ax_dag_registry_version(sa->reg, version_id);
	if (en == NULL)
		en = ax_dag_registry_current(sa->reg, dag);
	if (en == NULL)
		return;
	d->owner  = en->dag->owner;
	d->impact = (int) en->dag->impact;
	const ax_task *t =
	    task[0] != '\0' ? ax_dag_entry_task(en, task) : NULL;
	if (t != NULL)
		d->max_tries = t->eff.retries.count + 1;
	*ref = en;
}

static void
open_key(const Ax__Event *e, char *k, size_t n)
{
	snprintf(k, n, "%s\x1f%s", e->dag, e->task);
}

/* Remembers a fired task alert (taken) for its resolution. */
static void
remember(ax_sink_alert *sa, const Ax__Event *e, json_t *a)
{
	char    k[1024];
	json_t *arr;

	open_key(e, k, sizeof(k));
	if ((arr = ax_strmap_get(sa->open, k)) != NULL) {
		json_array_append_new(arr, a);
		return;
	}
	if (ax_strmap_count(sa->open) >= AX_SINK_ALERT_OPEN) {
		if (!sa->full)
			ax_logf(AX_LOG_WARN, ALERT_COMP, NULL, NULL,
			        "%d tasks with firing alerts: later ones are "
			        "resolved by Alertmanager's resolve_timeout",
			        AX_SINK_ALERT_OPEN);
		sa->full = 1;
		json_decref(a);
		return;
	}
	arr = json_array();
	json_array_append_new(arr, a);
	if (ax_strmap_put(sa->open, k, arr) != AX_OK)
		json_decref(arr);
}

/* Sends the resolutions of what fired for e's task; 1 when queued. */
static int
resolve(ax_sink_alert *sa, const Ax__Event *e)
{
	char    k[1024], when[40];
	json_t *arr, *a;
	size_t  i;
	int     q;

	open_key(e, k, sizeof(k));
	if ((arr = ax_strmap_del(sa->open, k)) == NULL)
		return 0;
	ax_sink_pub_time(e->time_us, when, sizeof(when));
	json_array_foreach(arr, i, a)
	    json_object_set_new(a, "endsAt", json_string(when));
	atomic_fetch_add(&sa->resolved, json_array_size(arr));
	q = push(sa, arr, "resolved");
	json_decref(arr);
	return q;
}

int
ax_sink_alert_submit(ax_sink_alert *sa, const Ax__Event *e)
{
	ax_alert_dag    d = { .impact = -1 };
	ax_dag_entry   *ref;
	json_t         *a = NULL, *arr;
	ax_alert_action act;
	int             q;

	/* cheap test first: most events are no alert */
	act = ax_sink_alert_map(e, &d, NULL, NULL);
	if (act == AX_ALERT_NONE)
		return 0;
	if (act == AX_ALERT_RESOLVE)
		return resolve(sa, e);
	dag_info(sa, e->dag, e->dag_version_id, e->task, &d, &ref);
	act = ax_sink_alert_map(e, &d, sa->link_url, &a);
	ax_dag_entry_release(ref);
	if (act != AX_ALERT_FIRE)
		return 0;
	atomic_fetch_add(&sa->fired, 1);
	arr = json_array();
	json_array_append(arr, a);
	q = push(sa, arr, "firing");
	json_decref(arr);
	if (e->task[0] != '\0' && strcmp(e->type, "run.deadline_missed") != 0)
		remember(sa, e, a);
	else
		json_decref(a);
	return q;
}

/* ---------------------------------------------------------------------- */
/* the stuck check (its own thread) */

/* Fires the alert of a stuck instance not alerted yet; marks those
 * already alerted as still stuck (gen). Watch thread. */
static void
stuck_fire(ax_sink_alert *sa, const ax_store_stuck *x, uint64_t gen)
{
	char          k[24];
	ax_alert_dag  d;
	ax_dag_entry *ref;
	stuck_ent    *en;

	snprintf(k, sizeof(k), "%lld", (long long) x->instance_id);
	if ((en = ax_strmap_get(sa->stuck, k)) != NULL) {
		en->gen = gen;
		return;
	}
	dag_info(sa, x->dag, x->dag_version_id, x->task, &d, &ref);
	json_t *a =
	    ax_sink_alert_stuck_json(x, &d, sa->stuck_after_us, sa->link_url);
	ax_dag_entry_release(ref);
	if (a == NULL || (en = calloc(1, sizeof(*en))) == NULL) {
		json_decref(a);
		return;
	}
	en->a   = a;
	en->gen = gen;
	if (ax_strmap_put(sa->stuck, k, en) != AX_OK) {
		json_decref(a);
		free(en);
		return;
	}
	json_t *arr = json_array();
	json_array_append(arr, a);
	atomic_fetch_add(&sa->fired, 1);
	(void) push(sa, arr, "firing");
	json_decref(arr);
}

typedef struct stale_list {
	char   **keys;
	size_t   n, cap;
	uint64_t gen;
} stale_list;

static void
collect_stale(void *arg, const char *k, void *v)
{
	stale_list *l  = arg;
	stuck_ent  *en = v;
	if (en->gen == l->gen || l->n == l->cap)
		return;
	if ((l->keys[l->n] = strdup(k)) != NULL)
		l->n++;
}

/* Resolves the stuck alerts the last complete check did not find (the
 * instance moved on). Watch thread. */
static void
stuck_resolve_stale(ax_sink_alert *sa, uint64_t gen)
{
	char       when[40];
	stale_list l = { .gen = gen, .cap = ax_strmap_count(sa->stuck) };

	if (l.cap == 0 || (l.keys = calloc(l.cap, sizeof(char *))) == NULL)
		return;
	ax_strmap_each(sa->stuck, collect_stale, &l);
	ax_sink_pub_time(ax_clock_utc_us(), when, sizeof(when));
	for (size_t i = 0; i < l.n; i++) {
		stuck_ent *en = ax_strmap_del(sa->stuck, l.keys[i]);
		free(l.keys[i]);
		if (en == NULL)
			continue;
		json_object_set_new(en->a, "endsAt", json_string(when));
		json_t *arr = json_array();
		json_array_append_new(arr, en->a);
		atomic_fetch_add(&sa->resolved, 1);
		(void) push(sa, arr, "resolved");
		json_decref(arr);
		free(en);
	}
	free(l.keys);
}

/* The watch thread: one bounded read every stuck_check until stopped;
 * a failed read closes the connection and is tried again next period. */
static void *
watch(void *arg)
{
	ax_sink_alert  *sa   = arg;
	ax_store       *st   = NULL;
	ax_store_stuck *rows = calloc(AX_SINK_ALERT_STUCK_MAX, sizeof(*rows));
	uint64_t        gen  = 0;
	int             warned = 0;
	size_t          n      = 0;

	while (rows != NULL &&
	       !ax_clock_cond_sleep(&sa->wcv, &sa->wmu, &sa->wstop,
	                            sa->stuck_check_us)) {
		ax_err rv = st != NULL ? AX_OK : ax_store_open(sa->dsn, &st);
		if (rv == AX_OK)
			rv = ax_store_stuck_instances(
			    st, sa->stuck_after_us, rows,
			    AX_SINK_ALERT_STUCK_MAX, &n);
		if (rv != AX_OK) {
			if (!warned++)
				ax_logf(
				    AX_LOG_WARN, ALERT_COMP, NULL, NULL,
				    "stuck check failed, trying again every "
				    "check: %s",
				    ax_err_detail());
			ax_store_close(st);
			st = NULL;
			continue;
		}
		warned = 0;
		atomic_fetch_add(&sa->checks, 1);
		gen++;
		for (size_t i = 0; i < n; i++)
			stuck_fire(sa, &rows[i], gen);
		/* a read cut at the bound may have missed some that are
		 * still stuck: resolve only after a complete one */
		if (n < AX_SINK_ALERT_STUCK_MAX)
			stuck_resolve_stale(sa, gen);
	}
	ax_store_close(st);
	free(rows);
	return NULL;
}

static void
free_stuck(void *v)
{
	stuck_ent *en = v;
	json_decref(en->a);
	free(en);
}

/* Starts the watch thread when cfg asks for a stuck check. */
static ax_err
watch_start(ax_sink_alert *sa, const ax_sink_alert_config *cfg)
{
	if (cfg->dsn == NULL || cfg->dsn[0] == '\0' ||
	    cfg->stuck_after_us <= 0)
		return AX_OK;
	if ((sa->dsn = strdup(cfg->dsn)) == NULL ||
	    ax_strmap_new(&sa->stuck) != AX_OK)
		return ax_err_set(AX_ENOMEM, "alerts: out of memory");
	sa->stuck_after_us = cfg->stuck_after_us;
	sa->stuck_check_us = cfg->stuck_check_us > 0 ? cfg->stuck_check_us
	                                             : 60 * AX_USEC_PER_SEC;
	pthread_mutex_init(&sa->wmu, NULL);
	ax_clock_cond_init(&sa->wcv);
	if (pthread_create(&sa->watch, NULL, watch, sa) != 0) {
		pthread_cond_destroy(&sa->wcv);
		pthread_mutex_destroy(&sa->wmu);
		return ax_err_set(
		    AX_EIO, "alerts: cannot start the stuck check thread");
	}
	sa->watch_on = 1;
	return AX_OK;
}

static void
watch_stop(ax_sink_alert *sa)
{
	if (!sa->watch_on)
		return;
	pthread_mutex_lock(&sa->wmu);
	sa->wstop = 1;
	pthread_cond_broadcast(&sa->wcv);
	pthread_mutex_unlock(&sa->wmu);
	pthread_join(sa->watch, NULL);
	pthread_cond_destroy(&sa->wcv);
	pthread_mutex_destroy(&sa->wmu);
	sa->watch_on = 0;
}

/* ---------------------------------------------------------------------- */
/* scheduler alerts */

int
ax_sink_alert_scheduler(ax_sink_alert *sa, const char *reason,
                        const char *holder, const char *summary, int resolved)
{
	char    when[40];
	int64_t now = ax_clock_utc_us();
	json_t *a = ax_sink_alert_scheduler_json(reason, holder, summary, now);
	int     q;

	if (sa == NULL || a == NULL) {
		json_decref(a);
		return 0;
	}
	if (resolved) {
		ax_sink_pub_time(now, when, sizeof(when));
		json_object_set_new(a, "endsAt", json_string(when));
		atomic_fetch_add(&sa->resolved, 1);
	} else {
		atomic_fetch_add(&sa->fired, 1);
	}
	json_t *arr = json_array();
	json_array_append_new(arr, a);
	q = push(sa, arr, resolved ? "resolved" : "firing");
	json_decref(arr);
	return q;
}

static ax_err
start_target(ax_sink_http **out, const ax_sink_alert_config *cfg,
             const char *url, const char *name)
{
	ax_sink_http_config hc = {
		.name         = name,
		.url          = url,
		.capacity     = cfg->capacity,
		.max_attempts = cfg->max_attempts,
		.backoff0_us  = cfg->backoff0_us,
		.timeout_us   = cfg->timeout_us,
		.overflow     = AX_SINK_HTTP_DROP_OLDEST,
	};
	return ax_sink_http_new(&hc, out);
}

ax_err
ax_sink_alert_new(const ax_sink_alert_config *cfg, ax_sink_alert **out)
{
	ax_sink_alert *sa;
	ax_err         rv;
	char           url[1024];

	*out = NULL;
	if ((rv = ax_sink_alert_check(cfg)) != AX_OK)
		return rv;
	if ((sa = calloc(1, sizeof(*sa))) == NULL ||
	    (sa->link_url = strdup(cfg->link_url ? cfg->link_url : "")) ==
	        NULL ||
	    ax_strmap_new(&sa->open) != AX_OK) {
		ax_sink_alert_free(sa, 0, NULL);
		return ax_err_set(AX_ENOMEM, "alerts: out of memory");
	}
	sa->reg = cfg->registry;
	if (cfg->alertmanager_url != NULL && cfg->alertmanager_url[0]) {
		size_t n = strlen(cfg->alertmanager_url);
		while (n > 0 && cfg->alertmanager_url[n - 1] == '/')
			n--;
		snprintf(url, sizeof(url), "%.*s%s", (int) n,
		         cfg->alertmanager_url, AM_PATH);
		rv = start_target(&sa->am, cfg, url, "alertmanager");
	}
	if (rv == AX_OK && cfg->webhook_url != NULL && cfg->webhook_url[0])
		rv = start_target(&sa->wh, cfg, cfg->webhook_url, "webhook");
	if (rv == AX_OK)
		rv = watch_start(sa, cfg);
	if (rv != AX_OK) {
		ax_sink_alert_free(sa, 0, NULL);
		return rv;
	}
	*out = sa;
	return AX_OK;
}

void
ax_sink_alert_stats_get(ax_sink_alert *sa, ax_sink_alert_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->fired    = atomic_load(&sa->fired);
	out->resolved = atomic_load(&sa->resolved);
	out->checks   = atomic_load(&sa->checks);
	out->am_on    = sa->am != NULL;
	out->wh_on    = sa->wh != NULL;
	if (sa->am != NULL)
		ax_sink_http_stats_get(sa->am, &out->am);
	if (sa->wh != NULL)
		ax_sink_http_stats_get(sa->wh, &out->wh);
}

static void
free_open(void *v)
{
	json_decref(v);
}

void
ax_sink_alert_free(ax_sink_alert *sa, int64_t drain_us,
                   ax_sink_alert_stats *final)
{
	ax_sink_alert_stats st;

	if (sa == NULL)
		return;
	watch_stop(sa); /* it pushes: stopped before the targets */
	memset(&st, 0, sizeof(st));
	st.fired    = atomic_load(&sa->fired);
	st.resolved = atomic_load(&sa->resolved);
	st.checks   = atomic_load(&sa->checks);
	st.am_on    = sa->am != NULL;
	st.wh_on    = sa->wh != NULL;
	ax_sink_http_free(sa->am, drain_us, &st.am);
	ax_sink_http_free(sa->wh, drain_us, &st.wh);
	if (final != NULL)
		*final = st;
	if (sa->open != NULL)
		ax_strmap_free(sa->open, free_open);
	if (sa->stuck != NULL)
		ax_strmap_free(sa->stuck, free_stuck);
	free(sa->dsn);
	free(sa->link_url);
	free(sa);
}
