/*
 * renderer.c - an attempt -> its AttemptRendered (see renderer.h); called
 * by the instance generator inside its batch, after the commit that
 * created the attempts.
 *
 * Invariants: a rendered attempt carries no template text; a failed
 * render is reported, never dispatched. Stateless apart from caches: the
 * data interval and conf of recent runs (bounded; cleared when full) and
 * the loaded time zones.
 *
 * Workload: one dag_runs query per batch for the runs not cached, then a
 * few short renders per attempt (microseconds each).
 */
#include "renderer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag_params.h"
#include "dag_registry.h"
#include "flow_util.h"
#include "hmap.h"
#include "render.h"
#include "store.h"
#include "tz.h"

#define RN_RUN_CACHE_MAX 4096
#define RN_PARAMS_MAX    256

typedef struct rn_run {
	int64_t start_us, end_us;
	json_t *conf; /* object (owned) or NULL */
} rn_run;

struct ax_renderer {
	const ax_pipeline_ctx *ctx;
	ax_tz_cache           *tzc;
	ax_strmap             *runs; /* "id" -> rn_run */
	int64_t                kill_grace_us;
	char                   log_root[1024];
	uint64_t               rendered, failed;
};

typedef struct ax_renderer rn_state;

/* Strings of one rendered attempt (freed after the send). */
struct ax_render_out {
	char                           *command;
	char                           *routing_key;
	char                           *params_v[RN_PARAMS_MAX];
	ax_render_param                 params[RN_PARAMS_MAX];
	size_t                          nparams;
	char                          **env_v; /* rendered values */
	Ax__AttemptRendered__EnvEntry  *env;
	Ax__AttemptRendered__EnvEntry **envp;
	size_t                          nenv;
	char                            ax_env[7][64];
	char                            log_path[2048];
	char                            err[512];
	/* env values only the worker reads: names of files and variables */
	Ax__AttemptRendered__EnvFromFileEntry *srcf, **srcfp;
	Ax__AttemptRendered__EnvFromEnvEntry  *srce, **srcep;
};

typedef struct ax_render_out rn_out;

static void
run_free(void *p)
{
	rn_run *r = p;
	if (r != NULL)
		json_decref(r->conf);
	free(r);
}

static void
out_free(rn_out *o)
{
	free(o->command);
	free(o->routing_key);
	for (size_t i = 0; i < o->nparams; i++)
		free(o->params_v[i]);
	for (size_t i = 0; o->env_v != NULL && i < o->nenv; i++)
		free(o->env_v[i]);
	free(o->env_v);
	free(o->env);
	free(o->envp);
	free(o->srcf);
	free(o->srcfp);
	free(o->srce);
	free(o->srcep);
}

/* ---------------------------------------------------------------------- */
/* runs */

ax_err
ax_renderer_load_runs(ax_renderer *st, ax_store *s, const int64_t *ids,
                      size_t n)
{
	char     *arr = NULL;
	size_t    len = 0;
	FILE     *f   = open_memstream(&arr, &len);
	int       any = 0;
	PGresult *r   = NULL;
	ax_err    rv  = AX_OK;

	if (f == NULL)
		return ax_err_set(AX_ENOMEM, "renderer: out of memory");
	if (ax_strmap_count(st->runs) > RN_RUN_CACHE_MAX) {
		ax_strmap_free(st->runs, run_free);
		if ((rv = ax_strmap_new(&st->runs)) != AX_OK) {
			fclose(f);
			free(arr);
			return rv;
		}
	}
	fputc('{', f);
	for (size_t i = 0; i < n; i++) {
		char id[24];
		snprintf(id, sizeof(id), "%lld", (long long) ids[i]);
		if (ids[i] == 0 || ax_strmap_get(st->runs, id) != NULL)
			continue;
		fprintf(f, "%s%s", any ? "," : "", id);
		any = 1;
	}
	fputc('}', f);
	fclose(f);
	if (!any || s == NULL) {
		free(arr);
		return AX_OK;
	}
	const char *p[1] = { arr };
	rv               = ax_store_query(s,
	                                  "SELECT id, ax_us(interval_start), "
	                                                "ax_us(interval_end), conf::text FROM dag_runs "
	                                                "WHERE id = ANY($1::bigint[])",
	                                  1, p, &r);
	free(arr);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++) {
		rn_run *run = calloc(1, sizeof(*run));
		if (run == NULL)
			break;
		run->start_us = strtoll(PQgetvalue(r, i, 1), NULL, 10);
		run->end_us   = strtoll(PQgetvalue(r, i, 2), NULL, 10);
		run->conf     = json_loads(PQgetvalue(r, i, 3), 0, NULL);
		if (run->conf != NULL && !json_is_object(run->conf)) {
			json_decref(run->conf);
			run->conf = NULL;
		}
		if (ax_strmap_put(st->runs, PQgetvalue(r, i, 0), run) != AX_OK)
			run_free(run);
	}
	PQclear(r);
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* rendering */

static int
fail(rn_out *o, const char *fmt, const char *a, const char *b)
{
	snprintf(o->err, sizeof(o->err), fmt, a, b);
	return -1;
}

/* Renders tmpl (NULL: "") into *out; on error writes o->err. */
static int
render_field(rn_out *o, const char *task, const char *field, const char *tmpl,
             const ax_render_ctx *rc, char **out)
{
	ax_render_err e;

	if (ax_render(tmpl != NULL ? tmpl : "", rc, out, &e) == AX_OK)
		return 0;
	snprintf(o->err, sizeof(o->err), "task '%s': %s: offset %zu: %s", task,
	         field, e.offset, e.msg[0] ? e.msg : ax_err_detail());
	return -1;
}

/* Adds (or replaces) a rendered param; value is owned by o. */
static int
put_param(rn_out *o, const char *name, char *value)
{
	for (size_t i = 0; i < o->nparams; i++)
		if (strcmp(o->params[i].name, name) == 0) {
			free(o->params_v[i]);
			o->params_v[i]     = value;
			o->params[i].value = value;
			return 0;
		}
	if (o->nparams == RN_PARAMS_MAX) {
		free(value);
		snprintf(
		    o->err, sizeof(o->err),
		    "more than %d params; the renderer keeps at most that "
		    "many",
		    RN_PARAMS_MAX);
		return -1;
	}
	o->params_v[o->nparams]       = value;
	o->params[o->nparams].name    = name;
	o->params[o->nparams++].value = value;
	return 0;
}

static int
render_params(rn_out *o, const char *task, const ax_kvs *kvs,
              ax_render_ctx *rc)
{
	for (size_t i = 0; i < kvs->n; i++) {
		char *v;
		char  field[300];
		snprintf(field, sizeof(field), "params.%s", kvs->v[i].key);
		rc->params   = o->params;
		rc->n_params = o->nparams;
		if (render_field(o, task, field, kvs->v[i].value, rc, &v) !=
		        0 ||
		    put_param(o, kvs->v[i].key, v) != 0)
			return -1;
	}
	return 0;
}

/* Params of the run's conf (values as given: they are data, not
 * templates). A string with a NUL byte is refused: a C string would cut
 * it short, so the value run would not be the value given (the API
 * refuses such strings before they are stored). */
static int
conf_params(rn_out *o, const ax_dag *dag, const rn_run *run)
{
	const char *k;
	json_t     *v;
	char        why[400];

	if (run == NULL || run->conf == NULL)
		return 0;
	json_t *params = json_object_get(run->conf, "params");
	if (!json_is_object(params))
		params = run->conf;
	/* the API and axd checked them; checked here too, so params that
	 * reached dag_runs any other way never run undeclared or mistyped */
	if (ax_dag_params_check(dag, params, why, sizeof(why), NULL) != AX_OK)
		return fail(o, "%s%s", why, "");
	json_object_foreach(params, k, v)
	{
		if (json_is_string(v) &&
		    strlen(json_string_value(v)) != json_string_length(v))
			return fail(o,
			            "param '%s' of the run holds a NUL "
			            "byte%s",
			            k, "");
		char *s = json_is_string(v)
		    ? strdup(json_string_value(v))
		    : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		if (s == NULL || put_param(o, k, s) != 0)
			return -1;
	}
	return 0;
}

static int
render_env(rn_out *o, const ax_task *t, const Ax__AttemptCreated *ac,
           const ax_render_ctx *rc, const char *logical)
{
	const ax_kvs            *kv          = &t->eff.env;
	size_t                   max         = kv->n + 7;
	static const char *const ax_names[7] = {
		"AX_RUN_ID",       "AX_DAG",     "AX_TASK",
		"AX_LOGICAL_DATE", "AX_ATTEMPT", "AX_SHARD_INDEX",
		"AX_SHARD_TOTAL",
	};

	o->env_v = calloc(max, sizeof(*o->env_v));
	o->env   = calloc(max, sizeof(*o->env));
	o->envp  = calloc(max, sizeof(*o->envp));
	if (o->env_v == NULL || o->env == NULL || o->envp == NULL)
		return fail(o, "out of memory%s%s", "", "");
	for (size_t i = 0; i < kv->n; i++) {
		char field[300];
		if (kv->v[i].source != AX_KV_VALUE)
			continue; /* render_sources: the worker reads it */
		snprintf(field, sizeof(field), "env.%s", kv->v[i].key);
		if (render_field(o, t->name, field, kv->v[i].value, rc,
		                 &o->env_v[o->nenv]) != 0)
			return -1;
		Ax__AttemptRendered__EnvEntry e =
		    AX__ATTEMPT_RENDERED__ENV_ENTRY__INIT;
		e.key            = (char *) kv->v[i].key;
		e.value          = o->env_v[o->nenv];
		o->env[o->nenv]  = e;
		o->envp[o->nenv] = &o->env[o->nenv];
		o->nenv++;
	}
	snprintf(o->ax_env[0], 64, "%s", ac->run_id);
	snprintf(o->ax_env[1], 64, "%.63s", ac->instance->dag);
	snprintf(o->ax_env[2], 64, "%.63s", ac->instance->task);
	snprintf(o->ax_env[3], 64, "%s", logical);
	snprintf(o->ax_env[4], 64, "%d", ac->attempt);
	snprintf(o->ax_env[5], 64, "%d", ac->instance->shard_index);
	snprintf(o->ax_env[6], 64, "%d",
	         ac->instance->shard_total > 0 ? ac->instance->shard_total
	                                       : 1);
	for (int i = 0; i < 7; i++) {
		Ax__AttemptRendered__EnvEntry e =
		    AX__ATTEMPT_RENDERED__ENV_ENTRY__INIT;
		e.key = (char *) ax_names[i];
		/* the long names are not truncated: point at the message */
		e.value          = i == 1 ? ac->instance->dag
		             : i == 2     ? ac->instance->task
		                          : o->ax_env[i];
		o->env[o->nenv]  = e;
		o->envp[o->nenv] = &o->env[o->nenv];
		o->nenv++;
	}
	return 0;
}

/*
 * The task's run_as and its env {from_file} / {from_env} entries into r:
 * only the names travel; the worker reads the values when it starts the
 * attempt, so no secret passes through the scheduler.
 */
static int
render_sources(rn_out *o, const ax_task *t, Ax__AttemptRendered *r)
{
	const ax_kvs *kv = &t->eff.env;
	size_t        nf = 0, ne = 0;

	r->run_as = (char *) (t->eff.run_as != NULL ? t->eff.run_as : "");
	o->srcf   = calloc(kv->n + 1, sizeof(*o->srcf));
	o->srcfp  = calloc(kv->n + 1, sizeof(*o->srcfp));
	o->srce   = calloc(kv->n + 1, sizeof(*o->srce));
	o->srcep  = calloc(kv->n + 1, sizeof(*o->srcep));
	if (o->srcf == NULL || o->srcfp == NULL || o->srce == NULL ||
	    o->srcep == NULL)
		return fail(o, "out of memory%s%s", "", "");
	for (size_t i = 0; i < kv->n; i++) {
		const ax_kv *e = &kv->v[i];
		if (e->source == AX_KV_FROM_FILE) {
			ax__attempt_rendered__env_from_file_entry__init(
			    &o->srcf[nf]);
			o->srcf[nf].key   = (char *) e->key;
			o->srcf[nf].value = (char *) e->value;
			o->srcfp[nf]      = &o->srcf[nf];
			nf++;
		} else if (e->source == AX_KV_FROM_ENV) {
			ax__attempt_rendered__env_from_env_entry__init(
			    &o->srce[ne]);
			o->srce[ne].key   = (char *) e->key;
			o->srce[ne].value = (char *) e->value;
			o->srcep[ne]      = &o->srce[ne];
			ne++;
		}
	}
	r->n_env_from_file = nf;
	r->env_from_file   = o->srcfp;
	r->n_env_from_env  = ne;
	r->env_from_env    = o->srcep;
	return 0;
}

/* Log file name part for a logical date: 20260101T000000Z. */
static void
logical_name(int64_t us, char *buf, size_t len)
{
	char iso[64];
	ax_clock_fmt_utc(us, iso, sizeof(iso));
	size_t k = 0;
	for (const char *p = iso; *p != '\0' && *p != '.' && k + 2 < len; p++)
		if (*p != '-' && *p != ':' && *p != 'Z')
			buf[k++] = *p;
	buf[k++] = 'Z';
	buf[k]   = '\0';
}

/* Path-safe copy of a name ('/' and leading dots replaced). */
static void
safe_name(const char *s, char *buf, size_t len)
{
	size_t k = 0;
	for (; *s != '\0' && k + 1 < len; s++, k++)
		buf[k] = *s == '/' || (k == 0 && *s == '.') ? '_' : *s;
	buf[k] = '\0';
}

/*
 * Renders one attempt into r (strings owned by o). Returns 0, or -1 with
 * o->err set.
 */
static int
render_one(rn_state *st, const Ax__AttemptCreated *ac, const ax_dag *dag,
           const ax_task *t, const rn_run *run, Ax__AttemptRendered *r,
           rn_out *o)
{
	const Ax__InstanceRef *ref = ac->instance;
	const ax_tz           *tz  = ax_tz_utc();
	const char            *zn  = dag->schedule.timezone;
	ax_render_ctx          rc;
	char                   logical[64];

	if (zn != NULL && zn[0] != '\0' &&
	    ax_tz_cache_get(st->tzc, zn, &tz) != AX_OK)
		return fail(o,
		            "time zone '%s' of the DAG cannot be loaded: %s",
		            zn, ax_err_detail());
	memset(&rc, 0, sizeof(rc));
	rc.logical_date_us = ref->logical_time_us;
	rc.interval_start_us =
	    run != NULL ? run->start_us : ref->logical_time_us;
	rc.interval_end_us = run != NULL ? run->end_us : ref->logical_time_us;
	rc.utc_offset_s =
	    ax_tz_offset(tz, ref->logical_time_us / AX_USEC_PER_SEC);
	rc.run_id      = ac->run_id;
	rc.dag_name    = ref->dag;
	rc.task_name   = ref->task;
	rc.shard_index = ref->shard_index;
	rc.shard_total = ref->shard_total > 0 ? ref->shard_total : 1;
	if (render_params(o, t->name, &dag->params, &rc) != 0 ||
	    render_params(o, t->name, &t->eff.params, &rc) != 0 ||
	    conf_params(o, dag, run) != 0)
		return -1;
	rc.params        = o->params;
	rc.n_params      = o->nparams;
	const char *type = t->eff.type != NULL ? t->eff.type : "bash";
	/* only the command of a bash task is read by a shell: its values
	 * are quoted; env values and routing keys stay plain text */
	rc.shell = strcmp(type, "bash") == 0;
	if ((t->eff.command == NULL || t->eff.command[0] == '\0') &&
	    strcmp(type, "noop") != 0)
		return fail(o, "task '%s' of type '%s' has no command",
		            t->name, type);
	if (render_field(o, t->name, "command", t->eff.command, &rc,
	                 &o->command) != 0)
		return -1;
	rc.shell = 0;
	if (t->eff.routing.kind == AX_ROUTE_CONSISTENT_HASH &&
	    render_field(o, t->name, "routing.key",
	                 t->eff.routing.key != NULL ? t->eff.routing.key
	                                            : "{{ dag.name }}",
	                 &rc, &o->routing_key) != 0)
		return -1;
	ax_tz_format(tz, ref->logical_time_us, logical, sizeof(logical));
	if (render_env(o, t, ac, &rc, logical) != 0)
		return -1;
	char d[256], tk[256], ln[32];
	safe_name(ref->dag, d, sizeof(d));
	safe_name(ref->task, tk, sizeof(tk));
	logical_name(ref->logical_time_us, ln, sizeof(ln));
	snprintf(o->log_path, sizeof(o->log_path), "%s/%s/%s/%s/%d/%d.log",
	         st->log_root, d, tk, ln, ref->shard_index, ac->attempt);

	const Ax__InstanceReady *rd = ac->ready;
	r->instance                 = ac->instance;
	r->run_id                   = ac->run_id;
	r->attempt                  = ac->attempt;
	r->task_type                = (char *) type;
	r->command                  = o->command;
	r->n_env                    = o->nenv;
	r->env                      = o->envp;
	if (render_sources(o, t, r) != 0)
		return -1;
	r->timeout_us    = t->eff.timeout_us;
	r->kill_grace_us = st->kill_grace_us;
	r->log_path      = o->log_path;
	r->priority      = rd != NULL ? rd->priority : t->eff.priority;
	r->channel       = rd != NULL && rd->channel[0]
	          ? rd->channel
	          : (char *) ax_flow_db_channel(ax_channel_name(t->eff.channel));
	r->worker_group  = rd != NULL && rd->worker_group[0]
	     ? rd->worker_group
	     : (char *) t->eff.worker_group;
	r->routing       = (char *) ax_routing_name(t->eff.routing.kind);
	if (o->routing_key != NULL)
		r->routing_key = o->routing_key;
	if (t->eff.routing.kind == AX_ROUTE_PINNED && t->eff.routing.node)
		r->pinned_worker = (char *) t->eff.routing.node;
	r->slots          = rd != NULL && rd->slots > 0 ? rd->slots : 1;
	r->due_at_us      = rd != NULL ? rd->due_at_us : 0;
	r->admitted_at_us = ac->admitted_at_us;
	r->memory_bytes   = t->eff.memory_bytes;
	r->cpu_milli      = t->eff.cpu_milli;
	r->pool           = rd != NULL && rd->pool[0] ? rd->pool
	              : t->eff.pool != NULL           ? (char *) t->eff.pool
	                                              : "";
	r->max_tries =
	    1 + (t->eff.retries.count > 0 ? t->eff.retries.count : 0);
	r->impact      = (char *) ax_impact_name(dag->impact);
	r->preemptible = t->eff.preemptible != 0;
	return 0;
}

int
ax_renderer_render(ax_renderer *st, const Ax__AttemptCreated *ac,
                   const ax_dag *dag, const ax_task *t, Ax__AttemptRendered *r,
                   ax_render_out **out, const char **err)
{
	char    id[24];
	rn_out *o = calloc(1, sizeof(*o));

	*out = o;
	*err = "renderer: out of memory";
	if (o == NULL) {
		st->failed++;
		return -1;
	}
	*err = o->err;
	snprintf(id, sizeof(id), "%lld", (long long) ac->instance->dag_run_id);
	if (dag == NULL || t == NULL)
		snprintf(o->err, sizeof(o->err),
		         "task '%s' of DAG '%s' version %lld is not loaded",
		         ac->instance->task, ac->instance->dag,
		         (long long) ac->instance->dag_version_id);
	else if (render_one(st, ac, dag, t, ax_strmap_get(st->runs, id), r,
	                    o) == 0 &&
	         o->err[0] == '\0') {
		st->rendered++;
		return 0;
	}
	if (o->err[0] == '\0')
		snprintf(o->err, sizeof(o->err), "task '%s': render failed",
		         ac->instance->task);
	st->failed++;
	return -1;
}

void
ax_render_out_free(ax_render_out *o)
{
	if (o == NULL)
		return;
	out_free(o);
	free(o);
}

void
ax_renderer_counts(const ax_renderer *st, uint64_t *rendered, uint64_t *failed)
{
	*rendered = st != NULL ? st->rendered : 0;
	*failed   = st != NULL ? st->failed : 0;
}

void
ax_renderer_free(ax_renderer *st)
{
	if (st == NULL)
		return;
	ax_strmap_free(st->runs, run_free);
	ax_tz_cache_free(st->tzc);
	free(st);
}

ax_err
ax_renderer_new(const ax_pipeline_ctx *ctx, ax_renderer **out)
{
	rn_state *st = calloc(1, sizeof(*st));

	*out = NULL;
	if (st == NULL)
		return ax_err_set(AX_ENOMEM, "renderer: out of memory");
	st->ctx = ctx;
	st->kill_grace_us =
	    ax_config_duration_us(ctx->cfg, "worker.kill_grace");
	const char *ld = ax_config_str(ctx->cfg, "worker.log_dir");
	if (ld[0] != '\0')
		snprintf(st->log_root, sizeof(st->log_root), "%s", ld);
	else
		snprintf(st->log_root, sizeof(st->log_root), "%s/logs",
		         ctx->home != NULL ? ctx->home : ".");
	if (ax_tz_cache_new(&st->tzc) != AX_OK ||
	    ax_strmap_new(&st->runs) != AX_OK) {
		ax_renderer_free(st);
		return ax_err_set(AX_ENOMEM, "renderer: out of memory");
	}
	*out = st;
	return AX_OK;
}
