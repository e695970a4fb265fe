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
 * Workload: alerts are rare (failures of last attempts, timeouts, missed
 * deadlines): every other event costs one strcmp chain in map_type.
 */
#include "sink_alert.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "dag_registry.h"
#include "hmap.h"
#include "log.h"
#include "sink_pub.h"

#define ALERT_COMP "alerts"
#define AM_PATH    "/api/v2/alerts"

struct ax_sink_alert {
	ax_sink_http           *am, *wh; /* NULL: target off */
	char                   *link_url;
	struct ax_dag_registry *reg;
	ax_strmap              *open; /* see the invariants */
	int                     full; /* open reached its bound (logged) */
	_Atomic uint64_t        fired, resolved;
};

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

ax_alert_action
ax_sink_alert_map(const Ax__Event *e, const ax_alert_dag *d,
                  const char *link_url, json_t **out)
{
	const char *t = e->type, *name, *reason = e->reason;
	char        summary[768], explain[96], link[512], when[40];
	int         inst = e->instance_id > 0;

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
		name = "AxTaskFailed";
		if (reason[0] == '\0')
			reason = "FAILED";
		snprintf(summary, sizeof(summary),
		         "%s.%s failed after its last attempt (%d): %s",
		         e->dag, e->task, (int) e->attempt, reason);
	} else if (strcmp(t, "instance.timeout") == 0) {
		name = "AxTaskTimeout";
		if (reason[0] == '\0')
			reason = "TIMEOUT_EXEC";
		snprintf(summary, sizeof(summary),
		         "%s.%s attempt %d timed out: %s", e->dag, e->task,
		         (int) e->attempt, reason);
	} else if (strcmp(t, "instance.deadline_missed") == 0 ||
	           strcmp(t, "run.deadline_missed") == 0) {
		name = "AxDeadlineMissed";
		if (reason[0] == '\0')
			reason = "DEADLINE_MISSED";
		snprintf(summary, sizeof(summary),
		         "%s%s%s (run %lld) missed its deadline", e->dag,
		         e->task[0] ? "." : "", e->task,
		         (long long) e->dag_run_id);
		inst = inst && t[0] == 'i';
	} else {
		return AX_ALERT_NONE;
	}
	if (out == NULL)
		return AX_ALERT_FIRE;
	if (inst)
		snprintf(explain, sizeof(explain),
		         "axctl explain instance %lld",
		         (long long) e->instance_id);
	else
		snprintf(explain, sizeof(explain), "axctl explain run %lld",
		         (long long) e->dag_run_id);
	json_t *labels = json_object(), *ann = json_object();
	set_label(labels, "alertname", name);
	set_label(labels, "impact", impact_of(d->impact));
	set_label(labels, "severity", severity_of(d->impact));
	set_label(labels, "owner", d->owner);
	set_label(labels, "dag", e->dag);
	set_label(labels, "task", e->task);
	set_label(labels, "reason", reason);
	set_label(ann, "summary", summary);
	set_label(ann, "explain", explain);
	ax_sink_pub_time(e->time_us, when, sizeof(when));
	json_t *o = json_pack("{s:o,s:o,s:s}", "labels", labels, "annotations",
	                      ann, "startsAt", when);
	if (link_url != NULL && link_url[0] != '\0' && o != NULL) {
		snprintf(link, sizeof(link), "%s/api/v1/%s/%lld/explain",
		         link_url, inst ? "instances" : "runs",
		         (long long) (inst ? e->instance_id : e->dag_run_id));
		set_label(ann, "link", link);
		json_object_set_new(o, "generatorURL", json_string(link));
	}
	*out = o;
	return o != NULL ? AX_ALERT_FIRE : AX_ALERT_NONE;
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

/* What the registry knows of e's DAG and task. *ref (released by the
 * caller) keeps the strings alive. May read PostgreSQL on a miss. */
static void
dag_info(ax_sink_alert *sa, const Ax__Event *e, ax_alert_dag *d,
         ax_dag_entry **ref)
{
	ax_dag_entry *en = NULL;

	*d   = (ax_alert_dag) { .impact = -1 };
	*ref = NULL;
	if (sa->reg == NULL)
		return;
	if (e->dag_version_id > 0)
		en = ax_dag_registry_version(sa->reg, e->dag_version_id);
	if (en == NULL)
		en = ax_dag_registry_current(sa->reg, e->dag);
	if (en == NULL)
		return;
	d->owner  = en->dag->owner;
	d->impact = (int) en->dag->impact;
	const ax_task *t =
	    e->task[0] != '\0' ? ax_dag_entry_task(en, e->task) : NULL;
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
	dag_info(sa, e, &d, &ref);
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
	memset(&st, 0, sizeof(st));
	st.fired    = atomic_load(&sa->fired);
	st.resolved = atomic_load(&sa->resolved);
	st.am_on    = sa->am != NULL;
	st.wh_on    = sa->wh != NULL;
	ax_sink_http_free(sa->am, drain_us, &st.am);
	ax_sink_http_free(sa->wh, drain_us, &st.wh);
	if (final != NULL)
		*final = st;
	if (sa->open != NULL)
		ax_strmap_free(sa->open, free_open);
	free(sa->link_url);
	free(sa);
}
