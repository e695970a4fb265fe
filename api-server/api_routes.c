/*
 * api_routes.c - the route table of ax-api and its matcher (see
 * api_routes.h). The table is small (tens of rows) and matching is a
 * linear scan of pre-split patterns: a few hundred nanoseconds per
 * request, far below the database round trip every route makes.
 */
#include "api_routes.h"

#include <stdio.h>
#include <string.h>

#include "api_commands.h"
#include "api_dags.h"
#include "api_explain.h"
#include "api_misc.h"
#include "api_pools.h"
#include "api_rules.h"
#include "api_runs.h"
#include "api_tokens.h"
#include "api_views.h"

#define V AX_API_ROLE_VIEWER
#define O AX_API_ROLE_OPERATOR
#define A AX_API_ROLE_ADMIN

const ax_api_route ax_api_routes[] = {
	{ "GET", "/healthz", ax_api_healthz, AX_API_ROLE_NONE,
	  "liveness and database reachability" },
	{ "GET", "/metrics", ax_api_metrics_text, V, "Prometheus metrics" },
	{ "GET", "/api/v1/healthz", ax_api_healthz, AX_API_ROLE_NONE,
	  "liveness and database reachability" },
	{ "GET", "/api/v1/metrics", ax_api_metrics_text, V,
	  "Prometheus metrics" },
	{ "POST", "/api/v1/dags", ax_api_dags_submit, A,
	  "submit DAG / TaskTemplate YAML" },
	{ "GET", "/api/v1/dags", ax_api_dags_list, V, "list DAGs" },
	{ "GET", "/api/v1/dags/{name}", ax_api_dag_show, V,
	  "one DAG with its active version" },
	{ "GET", "/api/v1/dags/{name}/versions", ax_api_dag_versions, V,
	  "versions of a DAG" },
	{ "GET", "/api/v1/dags/{name}/grid", ax_api_dag_grid, V,
	  "the newest runs by tasks, each cell the instance's state" },
	{ "GET", "/api/v1/dags/{name}/graph", ax_api_dag_graph, V,
	  "tasks with their dependencies, upstream and downstream DAGs" },
	{ "POST", "/api/v1/dags/{name}/pause", ax_api_dag_pause, O,
	  "pause a DAG" },
	{ "POST", "/api/v1/dags/{name}/unpause", ax_api_dag_unpause, O,
	  "unpause a DAG" },
	{ "POST", "/api/v1/dags/{name}/trigger", ax_api_dag_trigger, O,
	  "trigger a manual run" },
	{ "POST", "/api/v1/dags/{name}/backfill", ax_api_dag_backfill, O,
	  "create backfill runs for a date range" },
	{ "GET", "/api/v1/runs", ax_api_runs_list, V, "list DAG runs" },
	{ "GET", "/api/v1/runs/{id}", ax_api_run_show, V, "one DAG run" },
	{ "GET", "/api/v1/runs/{id}/explain", ax_api_run_explain, V,
	  "why a run waits: what holds it, its timeline" },
	{ "GET", "/api/v1/instances", ax_api_instances_list, V,
	  "list task instances" },
	{ "GET", "/api/v1/instances/{id}", ax_api_instance_show, V,
	  "one task instance with its attempts" },
	{ "POST", "/api/v1/instances/{id}/kill", ax_api_instance_kill, O,
	  "kill a task instance" },
	{ "POST", "/api/v1/instances/{id}/clear", ax_api_instance_clear, O,
	  "clear a task instance (and downstream) to run again" },
	{ "POST", "/api/v1/instances/{id}/mark", ax_api_instance_mark, O,
	  "mark a task instance success or failed" },
	{ "GET", "/api/v1/instances/{id}/logs", ax_api_instance_logs, V,
	  "log of an attempt: tail, offset, follow" },
	{ "GET", "/api/v1/instances/{id}/explain", ax_api_instance_explain, V,
	  "why an instance waits: what holds it, timeline, attempts" },
	{ "GET", "/api/v1/instances/{id}/lineage", ax_api_instance_lineage, V,
	  "upstream and downstream instances in the same run" },
	{ "GET", "/api/v1/commands/{id}", ax_api_command_show, V,
	  "one control command: pending, applied (result) or rejected" },
	{ "GET", "/api/v1/workers", ax_api_workers_list, V, "list workers" },
	{ "GET", "/api/v1/queue", ax_api_queue_depth, V,
	  "unfinished instances per channel and worker group" },
	{ "GET", "/api/v1/me", ax_api_me, V,
	  "the caller's token name and role" },
	{ "GET", "/api/v1/events", ax_api_events_list, V, "query events" },
	{ "POST", "/api/v1/tokens", ax_api_tokens_create, A,
	  "create a bearer token (shown once in the answer)" },
	{ "GET", "/api/v1/tokens", ax_api_tokens_list, A,
	  "list tokens: names, roles, times, state" },
	{ "DELETE", "/api/v1/tokens/{id}", ax_api_tokens_revoke, A,
	  "revoke a token (refused from the next request on)" },
	{ "GET", "/api/v1/rules", ax_api_rules_list, V,
	  "list Allow/Block rules, each with in_force now" },
	{ "POST", "/api/v1/rules", ax_api_rules_create, O,
	  "create an Allow/Block rule (in force within a second)" },
	{ "DELETE", "/api/v1/rules/{id}", ax_api_rules_delete, O,
	  "delete a rule (what it held is released within a second)" },
	{ "GET", "/api/v1/rules/{id}/test", ax_api_rules_test, V,
	  "the pending and ready instances a rule holds now" },
	{ "POST", "/api/v1/rules/test", ax_api_rules_test_new, V,
	  "the instances a rule would hold now, before it is created" },
	{ "GET", "/api/v1/pools/{name}/pressure", ax_api_pressure_get, V,
	  "the water level last pushed for a pool or worker group" },
	{ "PUT", "/api/v1/pools/{name}/pressure", ax_api_pressure_put, O,
	  "push a water level with an expiry (in force within a second)" },
	{ "DELETE", "/api/v1/pools/{name}/pressure", ax_api_pressure_delete, O,
	  "withdraw a pushed water level" },
	{ "GET", "/api/v1/pools/{name}/calendar", ax_api_calendar_get, V,
	  "the capacity calendar of a pool or worker group" },
	{ "PUT", "/api/v1/pools/{name}/calendar", ax_api_calendar_put, O,
	  "set a capacity calendar (capacity by time of day)" },
	{ "DELETE", "/api/v1/pools/{name}/calendar", ax_api_calendar_delete, O,
	  "remove a capacity calendar" },
};

const size_t ax_api_routes_count =
    sizeof(ax_api_routes) / sizeof(ax_api_routes[0]);

/* The routes whose body is not the default of their method. */
static const struct {
	const char *method, *pattern;
	ax_api_body body;
} route_bodies[] = {
	{ "POST", "/api/v1/dags", AX_API_BODY_TEXT },
	{ "POST", "/api/v1/dags/{name}/pause", AX_API_BODY_JSON_EMPTY },
	{ "POST", "/api/v1/dags/{name}/unpause", AX_API_BODY_JSON_EMPTY },
	{ "POST", "/api/v1/instances/{id}/kill", AX_API_BODY_JSON_EMPTY },
};

ax_api_body
ax_api_route_body(const ax_api_route *r)
{
	for (size_t i = 0; i < sizeof(route_bodies) / sizeof(route_bodies[0]);
	     i++)
		if (!strcmp(route_bodies[i].method, r->method) &&
		    !strcmp(route_bodies[i].pattern, r->pattern))
			return route_bodies[i].body;
	return AX_API_BODY_BY_METHOD;
}

/*
 * Matches path against pattern; on success writes the params into
 * buf/params and returns the number of literal segments (a score: more
 * literals win), else -1.
 */
static int
match_one(const char *pattern, const char *path, char *buf, size_t cap,
          const char **params)
{
	const char *p = pattern, *s = path;
	size_t      used = 0;
	int         np = 0, lit = 0;

	while (*p == '/' && *s == '/') {
		const char *pe = strchr(p + 1, '/');
		const char *se = strchr(s + 1, '/');
		size_t      pl = pe ? (size_t) (pe - p - 1) : strlen(p + 1);
		size_t      sl = se ? (size_t) (se - s - 1) : strlen(s + 1);
		if (p[1] == '{') {
			if (sl == 0 || np >= AX_API_MAX_PARAMS ||
			    used + sl + 1 > cap)
				return -1;
			memcpy(buf + used, s + 1, sl);
			buf[used + sl] = '\0';
			params[np++]   = buf + used;
			used += sl + 1;
		} else {
			if (pl != sl || memcmp(p + 1, s + 1, pl) != 0)
				return -1;
			lit++;
		}
		p += pl + 1;
		s += sl + 1;
	}
	return (*p == '\0' && *s == '\0') ? lit : -1;
}

int
ax_api_route_match(const char *method, const char *path, ax_api_match *m)
{
	int         best = -1, best_score = -1;
	const char *tmp[AX_API_MAX_PARAMS];
	char        tbuf[sizeof(m->buf)];

	memset(m, 0, sizeof(*m));
	m->route = -1;
	for (size_t i = 0; i < ax_api_routes_count; i++) {
		const ax_api_route *r = &ax_api_routes[i];
		memset(tmp, 0, sizeof(tmp));
		int score =
		    match_one(r->pattern, path, tbuf, sizeof(tbuf), tmp);
		if (score < 0)
			continue;
		m->path_found = 1;
		if (strstr(m->allow, r->method) == NULL) {
			size_t      n   = strlen(m->allow);
			const char *sep = n ? ", " : "";
			if (snprintf(m->allow + n, sizeof(m->allow) - n,
			             "%s%s", sep, r->method) >=
			    (int) (sizeof(m->allow) - n))
				m->allow[sizeof(m->allow) - 1] = '\0';
		}
		if (strcmp(r->method, method) != 0 || score <= best_score)
			continue;
		best       = (int) i;
		best_score = score;
		memcpy(m->buf, tbuf, sizeof(tbuf));
		for (int k = 0; k < AX_API_MAX_PARAMS; k++)
			m->params[k] =
			    tmp[k] ? m->buf + (tmp[k] - tbuf) : NULL;
	}
	m->route = best;
	return best;
}
