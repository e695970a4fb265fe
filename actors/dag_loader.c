/*
 * dag_loader.c - the DAG loader actor (see dag_loader.h).
 *
 * One pass (load_dags) serves every trigger: all DAGs at start and on
 * resync, one DAG on dag_changed / paused / unpaused. A pass decodes each
 * active version, publishes it (a no-op for the version already current),
 * upserts the schedules rows of the pass in one statement and then tells
 * the time detector what to arm or disarm.
 */
#include "dag_loader.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_registry.h"
#include "dag_schedule.h"
#include "flow_util.h"
#include "store.h"
#include "store_sched.h"

#define LOAD_SLICE 5000 /* rows per batched schedules write */
#define COMP       "dag_loader"

typedef struct loader {
	const ax_pipeline_ctx *ctx;
	ax_actor              *self;
	ax_store              *store;
	ax_tz_cache           *tzc;
	ax_flow_map           *known;   /* DAG name -> (void *) 1: loaded */
	int                    started; /* initial load done */
} loader;

/* What one pass decided for one DAG. */
typedef struct pass_dag {
	char   *name;
	int64_t dag_id;
	int64_t version_id;
	int     paused;
	int     scheduled; /* has a schedules row (upserted) */
	char    expr[512];
	char   *tz;
	int     catchup;
	int64_t first_fire_us; /* for the schedules row when it has none */
} pass_dag;

static void
send_armed(loader *l, const pass_dag *p, const ax_store_sched_row *row)
{
	Ax__Command       cmd = AX__COMMAND__INIT;
	Ax__ScheduleArmed sa  = AX__SCHEDULE_ARMED__INIT;

	sa.schedule_id     = row->schedule_id;
	sa.dag             = p->name;
	sa.dag_version_id  = p->version_id;
	sa.cron            = (char *) p->expr;
	sa.timezone        = p->tz;
	sa.next_fire_us    = row->next_fire_us;
	sa.catchup         = p->catchup;
	cmd.issued_at_us   = ax_clock_utc_us();
	cmd.body_case      = AX__COMMAND__BODY_SCHEDULE_ARMED;
	cmd.schedule_armed = &sa;
	if (ax_pipeline_send(l->self, AX_A_TIME_DETECTOR, &cmd) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL,
		        &(ax_log_ids) { .dag = p->name },
		        "cannot arm the schedule: %s", ax_err_detail());
}

static void
send_disarmed(loader *l, const char *dag, const char *reason)
{
	Ax__Command          cmd = AX__COMMAND__INIT;
	Ax__ScheduleDisarmed sd  = AX__SCHEDULE_DISARMED__INIT;

	sd.dag                = (char *) dag;
	sd.reason             = (char *) reason;
	cmd.issued_at_us      = ax_clock_utc_us();
	cmd.body_case         = AX__COMMAND__BODY_SCHEDULE_DISARMED;
	cmd.schedule_disarmed = &sd;
	if (ax_pipeline_send(l->self, AX_A_TIME_DETECTOR, &cmd) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL, &(ax_log_ids) { .dag = dag },
		        "cannot disarm the schedule: %s", ax_err_detail());
}

/* An event about a DAG; no event emitter (tests) is not an error. */
static void
dag_event(loader *l, const char *type, const char *reason, const char *dag,
          int64_t version_id)
{
	char payload[64];
	snprintf(payload, sizeof(payload), "{\"dag_version_id\":%lld}",
	         (long long) version_id);
	ax_pipeline_event(l->self, type, reason, &(ax_log_ids) { .dag = dag },
	                  payload, 0);
}

/*
 * Decodes row r of the dags query and publishes it. Fills p. Returns 0,
 * or -1 when the stored definition cannot be used (logged; the DAG keeps
 * whatever version it had).
 */
static int
publish_row(loader *l, PGresult *res, int r, pass_dag *p)
{
	json_error_t jerr;
	json_t      *j;
	ax_dagset   *set;
	ax_dag      *dag;
	ax_schedule *sch = NULL;

	p->dag_id     = strtoll(PQgetvalue(res, r, 0), NULL, 10);
	p->name       = strdup(PQgetvalue(res, r, 1));
	p->paused     = PQgetvalue(res, r, 2)[0] == 't';
	p->version_id = strtoll(PQgetvalue(res, r, 3), NULL, 10);
	if (p->name == NULL)
		return -1;
	ax_dag_registry_set_paused(l->ctx->registry, p->name, p->paused);
	if ((j = json_loads(PQgetvalue(res, r, 4), 0, &jerr)) == NULL ||
	    ax_dagset_new(NULL, &set) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, "BAD_DEFINITION",
		        &(ax_log_ids) { .dag = p->name },
		        "version %lld: definition is not JSON: %s",
		        (long long) p->version_id, jerr.text);
		json_decref(j);
		return -1;
	}
	ax_err rv = ax_dag_from_json(set, j, &dag);
	json_decref(j);
	if (rv != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, "BAD_DEFINITION",
		        &(ax_log_ids) { .dag = p->name }, "version %lld: %s",
		        (long long) p->version_id, ax_err_detail());
		ax_dagset_free(set);
		return -1;
	}
	/* the schedule, before the set goes to the registry */
	if (dag->schedule.kind != AX_SCHED_NONE &&
	    ax_dag_schedule_new(dag, l->tzc, &sch) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, "BAD_SCHEDULE",
		        &(ax_log_ids) { .dag = p->name }, "%s",
		        ax_err_detail());
	if (sch != NULL) {
		/* the first fire, used only when the schedules row has none:
		 * with catchup and a start, the end of the first period (the
		 * time detector then creates the missed periods, capped);
		 * otherwise the next fire after now */
		ax_period first;
		int64_t   nf = 0;
		p->scheduled = 1;
		ax_dag_schedule_expr(dag, p->expr, sizeof(p->expr));
		p->tz = strdup(dag->schedule.timezone ? dag->schedule.timezone
		                                      : "UTC");
		p->catchup = dag->catchup;
		if (dag->catchup && dag->start != NULL &&
		    ax_schedule_next_period(sch, INT64_MIN + 1, &first) ==
		        AX_OK)
			nf = first.end_us;
		else if (ax_schedule_next_fire(sch, ax_clock_utc_us(), &nf) !=
		         AX_OK)
			nf = 0;
		p->first_fire_us = nf;
		ax_schedule_free(sch);
	}
	rv = ax_dag_registry_publish(l->ctx->registry, p->dag_id,
	                             p->version_id, set, dag);
	if (rv != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL,
		        &(ax_log_ids) { .dag = p->name }, "publish: %s",
		        ax_err_detail());
		return -1;
	}
	return 0;
}

static void
pass_free(pass_dag *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].name);
		free(p[i].tz);
	}
	free(p);
}

/* Collects the names of `known` that are not in `seen`. */
typedef struct gone_ctx {
	ax_flow_map *seen;
	char       **names;
	size_t       n, cap;
} gone_ctx;

static void
collect_gone(void *arg, const char *key, void *val)
{
	gone_ctx *g = arg;
	(void) val;
	if (ax_flow_map_get(g->seen, key) != NULL)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		char **nn  = realloc(g->names, cap * sizeof(char *));
		if (nn == NULL)
			return;
		g->names = nn;
		g->cap   = cap;
	}
	if ((g->names[g->n] = strdup(key)) != NULL)
		g->n++;
}

/* A DAG that no longer exists: forget it and stop its schedule. */
static void
forget(loader *l, const char *name)
{
	if (ax_dag_registry_remove(l->ctx->registry, name) == AX_OK)
		ax_logf(AX_LOG_INFO, COMP, NULL, &(ax_log_ids) { .dag = name },
		        "DAG removed");
	send_disarmed(l, name, "DELETED");
	ax_flow_map_del(l->known, name);
}

/*
 * One pass over all DAGs (name NULL) or one DAG. Returns a store error
 * when PostgreSQL could not be read (the caller retries), else AX_OK.
 */
static ax_err
load_dags(loader *l, const char *name)
{
	PGresult           *res     = NULL;
	pass_dag           *p       = NULL;
	ax_store_sched_row *rows    = NULL;
	int64_t            *nosched = NULL;
	size_t              n, nrows = 0, nnos = 0, armed = 0;
	ax_err              rv;

	if ((rv = ax_store_sched_dags(l->store, name, &res)) != AX_OK)
		return rv;
	n       = (size_t) PQntuples(res);
	p       = calloc(n + 1, sizeof(*p));
	rows    = calloc(n + 1, sizeof(*rows));
	nosched = calloc(n + 1, sizeof(*nosched));
	if (p == NULL || rows == NULL || nosched == NULL) {
		PQclear(res);
		free(p);
		free(rows);
		free(nosched);
		return ax_err_set(AX_ENOMEM, "dag_loader: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		if (publish_row(l, res, (int) i, &p[i]) != 0) {
			p[i].scheduled = -1; /* unusable: leave as it was */
			continue;
		}
		ax_flow_map_put(l->known, p[i].name, (void *) 1);
		if (p[i].scheduled) {
			ax_store_sched_row *r = &rows[nrows++];
			r->dag_id             = p[i].dag_id;
			r->expression         = p[i].expr;
			r->tz                 = p[i].tz;
			r->catchup            = p[i].catchup;
			r->first_fire_us      = p[i].first_fire_us;
		} else {
			nosched[nnos++] = p[i].dag_id;
		}
	}
	PQclear(res);
	/* in slices: the store takes at most 10000 rows per call, and an
	 * installation may hold far more scheduled DAGs */
	rv = AX_OK;
	for (size_t off = 0; rv == AX_OK && off < nrows; off += LOAD_SLICE)
		rv = ax_store_sched_upsert(
		    l->store, rows + off,
		    nrows - off < LOAD_SLICE ? nrows - off : LOAD_SLICE);
	for (size_t off = 0; rv == AX_OK && off < nnos; off += LOAD_SLICE)
		rv = ax_store_sched_delete(
		    l->store, nosched + off,
		    nnos - off < LOAD_SLICE ? nnos - off : LOAD_SLICE);
	if (rv != AX_OK)
		goto out;
	for (size_t i = 0, k = 0; i < n; i++) {
		if (p[i].scheduled < 0)
			continue;
		if (!p[i].scheduled) {
			send_disarmed(l, p[i].name, "UNSCHEDULED");
		} else {
			const ax_store_sched_row *r = &rows[k++];
			if (p[i].paused || r->next_fire_us == 0) {
				send_disarmed(l, p[i].name,
				              p[i].paused ? "PAUSED"
				                          : "ENDED");
			} else {
				send_armed(l, &p[i], r);
				armed++;
			}
		}
		dag_event(l, "dag.loaded", p[i].paused ? "PAUSED" : NULL,
		          p[i].name, p[i].version_id);
	}
	/* DAGs gone since the last pass */
	if (name != NULL && n == 0) {
		forget(l, name);
	} else if (name == NULL) {
		ax_flow_map *seen = NULL;
		gone_ctx     g    = { 0 };
		if (ax_flow_map_new(&seen) == AX_OK) {
			for (size_t i = 0; i < n; i++)
				if (p[i].name != NULL)
					ax_flow_map_put(seen, p[i].name,
					                (void *) 1);
			g.seen = seen;
			ax_flow_map_each(l->known, collect_gone, &g);
			for (size_t i = 0; i < g.n; i++) {
				forget(l, g.names[i]);
				free(g.names[i]);
			}
			free(g.names);
			ax_flow_map_free(seen, NULL);
		}
	}
	ax_logf(AX_LOG_INFO, COMP, NULL,
	        name ? &(ax_log_ids) { .dag = name } : NULL,
	        "loaded %zu DAG(s), %zu schedule(s) armed", n, armed);
out:
	pass_free(p, n);
	free(rows);
	free(nosched);
	return rv;
}

static ax_err
loader_tick(ax_actor *self, void *state, int64_t now_mono_us)
{
	loader *l = state;
	ax_err  rv;

	if (l->started)
		return AX_OK;
	if ((rv = load_dags(l, NULL)) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "initial load failed, retrying in 1 s: %s",
		        ax_err_detail());
		ax_actor_set_deadline(self, now_mono_us + AX_USEC_PER_SEC);
		return AX_OK;
	}
	l->started = 1;
	return AX_OK;
}

static void
control(loader *l, const Ax__ControlOp *op)
{
	ax_err rv = AX_OK;

	if (strcmp(op->op, "resync") == 0) {
		rv = load_dags(l, NULL);
		if (rv == AX_OK)
			l->started = 1;
	} else if (strcmp(op->op, "dag_changed") == 0 ||
	           strcmp(op->op, "paused") == 0 ||
	           strcmp(op->op, "unpaused") == 0) {
		if (op->dag == NULL || op->dag[0] == '\0') {
			ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
			        "control op %s without a dag: dropped",
			        op->op);
			return;
		}
		rv = load_dags(l, op->dag);
	} else {
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "control op '%s' is not the loader's: dropped",
		        op->op);
		return;
	}
	if (rv != AX_OK) {
		/* the next resync or change reloads it; a full reload soon
		 * covers a lost change too */
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "control op %s failed, full reload in 1 s: %s", op->op,
		        ax_err_detail());
		l->started = 0;
		ax_actor_set_deadline(l->self,
		                      ax_clock_mono_us() + AX_USEC_PER_SEC);
	}
}

static ax_err
loader_handle(ax_actor *self, void *state, const ax_actor_item *items,
              size_t n)
{
	loader *l = state;

	for (size_t i = 0; i < n; i++) {
		if (items[i].type != AX_ITEM_COMMAND)
			continue;
		Ax__Command *cmd = ax_pipeline_unpack(self, &items[i]);
		if (cmd == NULL)
			continue;
		if (cmd->body_case == AX__COMMAND__BODY_CONTROL)
			control(l, cmd->control);
		else
			ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
			        "unexpected command %d from %s: dropped",
			        (int) cmd->body_case, items[i].from);
		ax__command__free_unpacked(cmd, NULL);
	}
	return AX_OK;
}

static void
loader_fini(void *state)
{
	loader *l = state;
	if (l == NULL)
		return;
	ax_store_close(l->store);
	ax_tz_cache_free(l->tzc);
	ax_flow_map_free(l->known, NULL);
	free(l);
}

ax_err
ax_dag_loader_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	static const ax_actor_ops ops = {
		.handle = loader_handle,
		.tick   = loader_tick,
		.fini   = loader_fini,
	};
	char    url[256];
	loader *l = calloc(1, sizeof(*l));
	ax_err  rv;

	if (l == NULL)
		return ax_err_set(AX_ENOMEM, "dag_loader: out of memory");
	l->ctx = ctx;
	if ((rv = ax_tz_cache_new(&l->tzc)) != AX_OK ||
	    (rv = ax_flow_map_new(&l->known)) != AX_OK ||
	    (rv = ax_store_open(ctx->dsn, &l->store)) != AX_OK) {
		loader_fini(l);
		return rv;
	}
	ax_actor_config cfg = {
		.name = AX_A_DAG_LOADER,
		.url  = ax_config_actor_addr(ctx->cfg, AX_A_DAG_LOADER, url,
		                             sizeof(url)),
	};
	if ((rv = ax_actor_system_add(sys, &cfg, &ops, l, &l->self)) != AX_OK)
		return rv;
	/* before start: the thread reads it when it starts (the initial
	 * load runs as the first tick) */
	ax_actor_set_deadline(l->self, ax_clock_mono_us());
	return AX_OK;
}
