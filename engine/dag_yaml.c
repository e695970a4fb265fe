/*
 * dag_yaml.c - libyaml loader for DAG and TaskTemplate documents.
 *
 * Role: see dag_yaml.h. Two passes per file: a streaming pre-pass over
 * libyaml events enforces the limits (depth, documents, alias expansion)
 * and catches syntax errors (dag_yaml_scan.c); then each document is
 * loaded with libyaml's tree API and walked by schema, here: every
 * mapping is checked against the keys it may hold, every value against
 * its type (the readers of dag_yaml_node.c).
 * Invariants: positions are 1-based; every string stored is an arena copy
 * of a whole scalar (a scalar that decodes to a NUL refuses the file);
 * the walker only follows the schema, so it never recurses deeper than
 * the format itself (a few levels), whatever the document holds.
 * Workload: a folder of DAG files at start-up or one submission; files up
 * to max_file_bytes.
 */
#include "dag_yaml.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "clock.h"
#include "dag_params.h"
#include "dag_yaml_internal.h"
#include "group_spec.h"
#include "resources.h"
#include "suggest.h"

/*
 * The DAG's params: `name: default`, or a declaration
 * `name: {default: V, type: string|integer|number|boolean, pattern: ERE,
 * description: TEXT}`. Declarations fill d->param_decls (parallel to
 * d->params.v), allocated only when some param has a type or pattern.
 */
static int
get_params(ld *l, const map *m, ax_dag *d)
{
	static const char *const decl_keys[] = { "default", "type", "pattern",
		                                 "description" };
	map                      sub;
	yaml_node_t             *v   = yl_get(m, "params");
	ax_kvs                  *out = &d->params;
	int                      rv  = 1;

	if (v == NULL)
		return 0;
	if (yl_map_load(l, v, "params", &sub) != 0)
		return -1;
	out->v = ax_dagset_alloc(l->set, (sub.n + 1) * sizeof(ax_kv));
	if (out->v == NULL) {
		yl_map_fini(&sub);
		return -1;
	}
	for (size_t i = 0; i < sub.n; i++) {
		yaml_node_t *val = sub.p[i].v;
		ax_kv       *kv  = &out->v[out->n++];
		kv->key          = yl_adup(l, sub.p[i].k);
		kv->key_pos      = yl_node_pos(l, sub.p[i].k);
		kv->value        = "";
		kv->pos          = yl_node_pos(l, val);
		if (val->type == YAML_SCALAR_NODE) {
			if (!yl_is_null(val))
				kv->value = yl_adup(l, val);
			continue;
		}
		if (val->type != YAML_MAPPING_NODE) {
			ERR(l, yl_node_pos(l, val),
			    "params.%s must be a value or a mapping {default, "
			    "type, pattern}, got %s",
			    kv->key, yl_what(val));
			rv = -1;
			continue;
		}
		map  dm;
		char ctx[300];
		snprintf(ctx, sizeof(ctx), "params.%s", kv->key);
		if (yl_map_load(l, val, ctx, &dm) != 0) {
			rv = -1;
			continue;
		}
		if (d->param_decls == NULL &&
		    (d->param_decls = ax_dagset_alloc(
		         l->set, (sub.n + 1) * sizeof(ax_param_decl))) ==
		        NULL) {
			yl_map_fini(&dm);
			rv = -1;
			break;
		}
		ax_param_decl *pd = &d->param_decls[out->n - 1];
		const char    *t  = NULL;
		ax_pos         tp;
		pd->pos = yl_node_pos(l, val);
		yl_check_keys(l, &dm, decl_keys, N_OF(decl_keys), ctx);
		yaml_node_t *dv = yl_get(&dm, "default");
		if (dv != NULL &&
		    yl_want_scalar(l, dv, "default", "a value") == 0) {
			kv->value = yl_adup(l, dv);
			kv->pos   = yl_node_pos(l, dv);
		}
		if (yl_get_str(l, &dm, "type", &t, &tp) == 1 &&
		    ax_param_type_parse(t, &pd->type) != 0) {
			ERR(l, tp,
			    "unknown type '%s' of params.%s; expected one of: "
			    "string, integer, number, boolean",
			    t, kv->key);
			rv = -1;
		}
		yl_get_str(l, &dm, "pattern", &pd->pattern, &pd->pattern_pos);
		yl_map_fini(&dm);
	}
	yl_map_fini(&sub);
	return rv;
}

/* --- env and run_as ------------------------------------------------------ */

static int
valid_user(const char *s)
{
	size_t n = 0;
	while (isalnum((unsigned char) s[n]) || s[n] == '_' || s[n] == '.' ||
	       (s[n] == '-' && n > 0))
		n++;
	return n > 0 && n <= 64 && s[n] == '\0';
}

/*
 * One env value written as a mapping: {from_file: /abs/path} or
 * {from_env: NAME}, a value only the worker reads (secrets). 0, or -1
 * after an error at the value.
 */
static int
env_source(ld *l, yaml_node_t *val, const char *name, ax_kv *kv)
{
	static const char *const keys[] = { "from_file", "from_env" };
	map                      sub;
	const char              *file = NULL, *var = NULL;
	ax_pos                   fp, vp;
	int                      rv = 0;

	if (yl_map_load(l, val, name, &sub) != 0)
		return -1;
	yl_check_keys(l, &sub, keys, N_OF(keys), "an env source");
	yl_get_str(l, &sub, "from_file", &file, &fp);
	yl_get_str(l, &sub, "from_env", &var, &vp);
	if ((file == NULL) == (var == NULL)) {
		ERR(l, sub.pos,
		    "env %s: write exactly one of {from_file: PATH} and "
		    "{from_env: NAME}",
		    name);
		rv = -1;
	} else if (file != NULL && file[0] != '/') {
		ERR(l, fp,
		    "env %s: from_file '%s' must be an absolute path (on the "
		    "worker, under its worker.secrets_dir)",
		    name, file);
		rv = -1;
	} else if (var != NULL && !valid_user(var)) {
		ERR(l, vp, "env %s: from_env '%s' is not a variable name",
		    name, var);
		rv = -1;
	} else {
		kv->value  = file != NULL ? file : var;
		kv->pos    = file != NULL ? fp : vp;
		kv->source = file != NULL ? AX_KV_FROM_FILE : AX_KV_FROM_ENV;
	}
	yl_map_fini(&sub);
	return rv;
}

/* env: names to scalar values or to {from_file} / {from_env} sources. */
static int
get_env(ld *l, const map *m, ax_kvs *out)
{
	map          sub;
	yaml_node_t *v = yl_get(m, "env");
	if (v == NULL)
		return 0;
	if (yl_map_load(l, v, "env", &sub) != 0)
		return -1;
	out->v = ax_dagset_alloc(l->set, (sub.n + 1) * sizeof(ax_kv));
	out->n = 0;
	int rv = out->v ? 1 : -1;
	for (size_t i = 0; out->v && i < sub.n; i++) {
		yaml_node_t *val = sub.p[i].v;
		ax_kv       *kv  = &out->v[out->n];
		memset(kv, 0, sizeof(*kv));
		kv->key     = yl_adup(l, sub.p[i].k);
		kv->key_pos = yl_node_pos(l, sub.p[i].k);
		if (val->type == YAML_MAPPING_NODE) {
			if (env_source(l, val, kv->key, kv) != 0) {
				rv = -1;
				continue;
			}
		} else if (val->type != YAML_SCALAR_NODE) {
			ERR(l, yl_node_pos(l, val),
			    "env.%s must be a string, a number, {from_file: "
			    "PATH} or {from_env: NAME}, got %s",
			    yl_sval(sub.p[i].k), yl_what(val));
			rv = -1;
			continue;
		} else {
			kv->value = yl_is_null(val) ? "" : yl_adup(l, val);
			kv->pos   = yl_node_pos(l, val);
		}
		out->n++;
	}
	yl_map_fini(&sub);
	return rv;
}

/* --- resources ----------------------------------------------------------- */

static int
parse_memory(const char *s, int64_t *out)
{
	static const struct {
		const char *sfx;
		int64_t     mul;
	} units[] = {
		{ "Ki", 1LL << 10 },
		{ "Mi", 1LL << 20 },
		{ "Gi", 1LL << 30 },
		{ "Ti", 1LL << 40 },
		{ "K", 1000LL },
		{ "M", 1000000LL },
		{ "G", 1000000000LL },
		{ "T", 1000000000000LL },
		{ "", 1 },
	};
	char     *e;
	long long x;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	x     = strtoll(s, &e, 10);
	if (errno != 0)
		return -1;
	for (size_t i = 0; i < N_OF(units); i++)
		if (strcmp(e, units[i].sfx) == 0) {
			if (x > (1LL << 40) * 4 / units[i].mul)
				return -1;
			*out = x * units[i].mul;
			return 0;
		}
	return -1;
}

static int
parse_cpu(const char *s, int *milli)
{
	char  *e;
	double x;

	if ((*s < '0' || *s > '9') && *s != '.')
		return -1;
	errno = 0;
	x     = strtod(s, &e);
	if (errno != 0)
		return -1;
	if (strcmp(e, "m") == 0)
		x /= 1000.0;
	else if (*e != '\0')
		return -1;
	if (x < 0.001 || x > 1024)
		return -1;
	*milli = (int) (x * 1000 + 0.5);
	return 0;
}

static const char *const resources_keys[] = { "cpu", "memory" };

/*
 * The named resources of a resources mapping (every key but cpu and
 * memory, e.g. gpu: 1) into s->res, as name -> whole amount. A key a
 * typo away from memory is refused (a named resource "memroy" would wait
 * for workers offering it); cpu is too short to tell (gpu is one letter
 * off).
 */
static void
parse_named(ld *l, const map *m, ax_task_spec *s)
{
	size_t n = 0;

	for (size_t i = 0; i < m->n; i++)
		n += strcmp(yl_sval(m->p[i].k), "cpu") != 0 &&
		    strcmp(yl_sval(m->p[i].k), "memory") != 0;
	if (n == 0)
		return;
	if (n > AX_RES_MAX) {
		ERR(l, yl_node_pos(l, m->p[0].k),
		    "resources names %zu named resources; at most %d are "
		    "allowed (merge some)",
		    n, AX_RES_MAX);
		return;
	}
	s->res.v = ax_dagset_alloc(l->set, n * sizeof(ax_kv));
	s->res.n = 0;
	for (size_t i = 0; s->res.v != NULL && i < m->n; i++) {
		yaml_node_t *k = m->p[i].k, *val = m->p[i].v;
		const char  *name = yl_sval(k), *sug;
		char        *end;
		long long    x;

		if (strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0)
			continue;
		if ((sug = ax_suggest(name, resources_keys + 1, 1)) != NULL) {
			ERR(l, yl_node_pos(l, k),
			    "unknown key '%s' in resources; did you mean "
			    "'%s'? (other names are named resources, e.g. "
			    "gpu: 1)",
			    name, sug);
			continue;
		}
		if (!ax_res_name_ok(name)) {
			ERR(l, yl_node_pos(l, k),
			    "'%s' is not a resource name: use letters, "
			    "digits, '_', '.', '-' (up to %d), e.g. gpu: 1",
			    name, AX_RES_NAME_MAX);
			continue;
		}
		if (yl_want_scalar(l, val, name, "a whole number") != 0)
			continue;
		errno = 0;
		x     = strtoll(yl_sval(val), &end, 10);
		if (errno != 0 || end == yl_sval(val) || *end != '\0' ||
		    x < 1 || x > AX_RES_AMOUNT_MAX) {
			ERR(l, yl_node_pos(l, val),
			    "resources.%s must be a whole number from 1 to "
			    "%d, "
			    "got '%s'",
			    name, AX_RES_AMOUNT_MAX, yl_sval(val));
			continue;
		}
		ax_kv *kv = &s->res.v[s->res.n++];
		memset(kv, 0, sizeof(*kv));
		kv->key     = yl_adup(l, k);
		kv->key_pos = yl_node_pos(l, k);
		kv->value   = yl_adup(l, val);
		kv->pos     = yl_node_pos(l, val);
	}
}

static void
parse_resources(ld *l, yaml_node_t *v, ax_task_spec *s)
{
	map m;
	if (yl_map_load(l, v, "resources", &m) != 0)
		return;
	parse_named(l, &m, s);
	yaml_node_t *c = yl_get(&m, "cpu"), *mem = yl_get(&m, "memory");
	if (c != NULL && yl_want_scalar(l, c, "cpu", "a number") == 0) {
		if (parse_cpu(yl_sval(c), &s->cpu_milli) != 0)
			ERR(l, yl_node_pos(l, c),
			    "'cpu' must be a number of cores between 0.001 "
			    "and "
			    "1024 (e.g. 0.5, 2, 500m), got '%s'",
			    yl_sval(c));
		else
			s->set |= AX_TF_CPU;
	}
	if (mem != NULL && yl_want_scalar(l, mem, "memory", "a size") == 0) {
		if (parse_memory(yl_sval(mem), &s->memory_bytes) != 0 ||
		    s->memory_bytes == 0)
			ERR(l, yl_node_pos(l, mem),
			    "'memory' must be a size up to 4Ti such as 512Mi, "
			    "2Gi or 1G, got '%s'",
			    yl_sval(mem));
		else
			s->set |= AX_TF_MEMORY;
	}
	yl_map_fini(&m);
}

/* --- task spec ------------------------------------------------------------
 */

static const char *const channel_names[] = { "px", "p0", "k8s", "biz" };
static const char *const backoff_names[] = { "fixed", "exponential" };
static const char *const routing_names[] = { "round_robin", "random",
	                                     "least_load", "consistent_hash",
	                                     "pinned" };
static const char *const retries_keys[]  = { "count", "backoff", "delay",
	                                     "max_delay" };
static const char *const routing_keys[]  = { "strategy", "key", "node" };

#define DAY_US  (86400LL * AX_USEC_PER_SEC)
#define HOUR_US (3600LL * AX_USEC_PER_SEC)

static void
parse_retries(ld *l, yaml_node_t *v, ax_task_spec *s)
{
	map m;
	int x;

	if (v->type == YAML_SCALAR_NODE) { /* retries: 3 */
		long long n;
		if (v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
		    yl_parse_int(yl_sval(v), &n) != 0) {
			ERR(l, yl_node_pos(l, v),
			    "'retries' must be a count or a mapping {count, "
			    "backoff, delay, max_delay}, got '%s'",
			    yl_sval(v));
			return;
		}
		if (n < 0 || n > 100) {
			ERR(l, yl_node_pos(l, v),
			    "'retries' is %lld; it must be "
			    "between 0 and 100",
			    n);
			return;
		}
		s->retries.count = (int) n;
		s->set |= AX_TF_RETRY_COUNT;
		return;
	}
	if (yl_map_load(l, v, "retries", &m) != 0)
		return;
	yl_check_keys(l, &m, retries_keys, N_OF(retries_keys), "retries");
	if (yl_get_int(l, &m, "count", 0, 100, &s->retries.count) == 1)
		s->set |= AX_TF_RETRY_COUNT;
	if (yl_get_enum(l, &m, "backoff", backoff_names, N_OF(backoff_names),
	                &x) == 1) {
		s->retries.backoff = (ax_backoff) x;
		s->set |= AX_TF_RETRY_BACKOFF;
	}
	if (yl_get_duration(l, &m, "delay", 0, DAY_US, &s->retries.delay_us) ==
	    1)
		s->set |= AX_TF_RETRY_DELAY;
	if (yl_get_duration(l, &m, "max_delay", AX_USEC_PER_SEC, 7 * DAY_US,
	                    &s->retries.max_delay_us) == 1)
		s->set |= AX_TF_RETRY_MAX;
	yl_map_fini(&m);
}

static void
parse_routing(ld *l, yaml_node_t *v, ax_task_spec *s)
{
	map m;
	int x, rv;

	if (v->type == YAML_SCALAR_NODE) { /* routing: least_load */
		for (size_t i = 0; i < N_OF(routing_names); i++)
			if (strcasecmp(yl_sval(v), routing_names[i]) == 0) {
				s->routing.kind = (ax_routing_kind) i;
				s->set |= AX_TF_ROUTING;
				if (i == AX_ROUTE_CONSISTENT_HASH ||
				    i == AX_ROUTE_PINNED)
					ERR(l, yl_node_pos(l, v),
					    "routing '%s' needs a %s: write "
					    "routing: {strategy: %s, %s: ...}",
					    routing_names[i],
					    i == AX_ROUTE_PINNED ? "node"
					                         : "key",
					    routing_names[i],
					    i == AX_ROUTE_PINNED ? "node"
					                         : "key");
				return;
			}
		const char *sug =
		    ax_suggest(yl_sval(v), routing_names, N_OF(routing_names));
		ERR(l, yl_node_pos(l, v),
		    "unknown routing '%s'; expected one of: round_robin, "
		    "random, least_load, consistent_hash, pinned%s%s%s",
		    yl_sval(v), sug ? "; did you mean '" : "", sug ? sug : "",
		    sug ? "'?" : "");
		return;
	}
	if (yl_map_load(l, v, "routing", &m) != 0)
		return;
	yl_check_keys(l, &m, routing_keys, N_OF(routing_keys), "routing");
	rv = yl_get_enum(l, &m, "strategy", routing_names, N_OF(routing_names),
	                 &x);
	if (rv == 0)
		ERR(l, m.pos,
		    "routing needs a 'strategy' (round_robin, random, "
		    "least_load, consistent_hash, pinned)");
	if (rv == 1) {
		s->routing.kind = (ax_routing_kind) x;
		s->set |= AX_TF_ROUTING;
	}
	yl_get_str(l, &m, "key", &s->routing.key, NULL);
	yl_get_str(l, &m, "node", &s->routing.node, NULL);
	if (rv == 1 && x == AX_ROUTE_CONSISTENT_HASH && s->routing.key == NULL)
		ERR(l, m.pos, "routing 'consistent_hash' needs a 'key'");
	if (rv == 1 && x == AX_ROUTE_PINNED && s->routing.node == NULL)
		ERR(l, m.pos, "routing 'pinned' needs a 'node'");
	yl_map_fini(&m);
}

/*
 * worker_group: a name, a list of names (any of them) or {labels: {k: v}}
 * (any group whose workers carry them), stored as the text of
 * engine/group_spec.h ("a", "a,b", "k=v,k2=v2").
 */
static void
parse_group(ld *l, yaml_node_t *v, ax_task_spec *s)
{
	ax_group_spec g;
	char          buf[AX_GSPEC_MAX * (2 * AX_LABEL_MAX + 2) + 1];
	size_t        off = 0;
	map           m;

	buf[0] = '\0';
	if (v->type == YAML_SCALAR_NODE && !yl_is_null(v)) {
		if (ax_group_spec_parse(yl_sval(v), &g) != AX_OK) {
			ERR(l, yl_node_pos(l, v), "%s", ax_err_detail());
			return;
		}
		s->worker_group = yl_adup(l, v);
		s->set |= AX_TF_GROUP;
		return;
	}
	if (v->type == YAML_SEQUENCE_NODE) {
		size_t cnt = (size_t) (v->data.sequence.items.top -
		                       v->data.sequence.items.start);
		if (cnt == 0 || cnt > AX_GSPEC_MAX) {
			ERR(l, yl_node_pos(l, v),
			    "'worker_group' lists %zu groups; list 1 to %d",
			    cnt, AX_GSPEC_MAX);
			return;
		}
		for (yaml_node_item_t *i = v->data.sequence.items.start;
		     i < v->data.sequence.items.top; i++) {
			yaml_node_t *e = yl_node(l, *i);
			if (e == NULL)
				return;
			if (e->type != YAML_SCALAR_NODE || yl_is_null(e) ||
			    !ax_group_name_ok(yl_sval(e))) {
				ERR(l, yl_node_pos(l, e),
				    "items of 'worker_group' must be group "
				    "names (letters, digits, '_', '.', '-', "
				    "':', up to %d), got %s",
				    AX_GROUP_NAME_MAX,
				    e->type == YAML_SCALAR_NODE &&
				            !yl_is_null(e)
				        ? yl_sval(e)
				        : yl_what(e));
				return;
			}
			off += (size_t) snprintf(buf + off, sizeof(buf) - off,
			                         "%s%s", off > 0 ? "," : "",
			                         yl_sval(e));
		}
	} else if (v->type == YAML_MAPPING_NODE) {
		yaml_node_t *lv;
		map          lm;
		int          unknown = 0;
		if (yl_map_load(l, v, "worker_group", &m) != 0)
			return;
		for (size_t i = 0; i < m.n; i++)
			if (strcmp(yl_sval(m.p[i].k), "labels") != 0) {
				ERR(l, yl_node_pos(l, m.p[i].k),
				    "unknown key '%s' in worker_group; write "
				    "{labels: {key: value}} to select groups "
				    "by their workers' labels",
				    yl_sval(m.p[i].k));
				unknown++;
			}
		lv = yl_get(&m, "labels");
		if (lv == NULL) {
			if (unknown > 0) {
				yl_map_fini(&m);
				return;
			}
			ERR(l, m.pos,
			    "worker_group: write {labels: {key: value}} to "
			    "select groups by their workers' labels");
			yl_map_fini(&m);
			return;
		}
		if (yl_map_load(l, lv, "worker_group labels", &lm) != 0) {
			yl_map_fini(&m);
			return;
		}
		for (size_t i = 0; i < lm.n && i < AX_GSPEC_MAX; i++) {
			yaml_node_t *e = lm.p[i].v;
			if (e->type != YAML_SCALAR_NODE || yl_is_null(e)) {
				ERR(l, yl_node_pos(l, e),
				    "label '%s' of worker_group must have a "
				    "plain value, got %s",
				    yl_sval(lm.p[i].k), yl_what(e));
				continue;
			}
			off +=
			    (size_t) snprintf(buf + off, sizeof(buf) - off,
			                      "%s%s=%s", off > 0 ? "," : "",
			                      yl_sval(lm.p[i].k), yl_sval(e));
		}
		if (lm.n == 0 || lm.n > AX_GSPEC_MAX)
			ERR(l, yl_node_pos(l, lv),
			    "worker_group labels: give 1 to %d labels, got "
			    "%zu",
			    AX_GSPEC_MAX, lm.n);
		yl_map_fini(&lm);
		yl_map_fini(&m);
	} else {
		ERR(l, yl_node_pos(l, v),
		    "'worker_group' must be a group name, a list of them or "
		    "{labels: {key: value}}, got %s",
		    yl_is_null(v) ? "null" : yl_what(v));
		return;
	}
	if (off == 0 || off >= sizeof(buf))
		return; /* reported above */
	if (ax_group_spec_parse(buf, &g) != AX_OK) {
		ERR(l, yl_node_pos(l, v), "%s", ax_err_detail());
		return;
	}
	char *t = ax_dagset_alloc(l->set, off + 1);
	if (t == NULL)
		return;
	memcpy(t, buf, off + 1);
	s->worker_group = t;
	s->set |= AX_TF_GROUP;
}

/* Parses the spec keys of m (the caller checked which keys m may hold). */
static void
parse_spec(ld *l, const map *m, ax_task_spec *s)
{
	yaml_node_t *v;
	int          x;

	if (yl_get_str(l, m, "type", &s->type, NULL) == 1)
		s->set |= AX_TF_TYPE;
	if (yl_get_str(l, m, "command", &s->command, &s->command_pos) == 1)
		s->set |= AX_TF_COMMAND;
	if (yl_get_int(l, m, "priority", 0, 100, &s->priority) == 1)
		s->set |= AX_TF_PRIORITY;
	if (yl_get_enum(l, m, "channel", channel_names, N_OF(channel_names),
	                &x) == 1) {
		s->channel = (ax_channel) x;
		s->set |= AX_TF_CHANNEL;
	}
	if ((v = yl_get(m, "worker_group")) != NULL)
		parse_group(l, v, s);
	if (yl_get_str(l, m, "pool", &s->pool, NULL) == 1)
		s->set |= AX_TF_POOL;
	if ((v = yl_get(m, "retries")) != NULL)
		parse_retries(l, v, s);
	if (yl_get_duration(l, m, "timeout", AX_USEC_PER_SEC, 7 * DAY_US,
	                    &s->timeout_us) == 1)
		s->set |= AX_TF_TIMEOUT;
	if ((v = yl_get(m, "resources")) != NULL)
		parse_resources(l, v, s);
	if (yl_get_int(l, m, "shards", 1, 1024, &s->shards) == 1)
		s->set |= AX_TF_SHARDS;
	if ((v = yl_get(m, "routing")) != NULL)
		parse_routing(l, v, s);
	yl_get_kvs(l, m, "params", &s->params);
	get_env(l, m, &s->env);
	if (yl_get_str(l, m, "run_as", &s->run_as, &s->run_as_pos) == 1) {
		if (!valid_user(s->run_as))
			ERR(l, s->run_as_pos,
			    "run_as '%s' is not a user name; use letters, "
			    "digits, '_', '.' and '-' (not first), up to 64",
			    s->run_as);
		s->set |= AX_TF_RUN_AS;
	}
	if (yl_get_bool(l, m, "preemptible", &s->preemptible) == 1)
		s->set |= AX_TF_PREEMPTIBLE;
}

#define SPEC_KEYS                                                             \
	"type", "command", "priority", "channel", "worker_group", "pool",     \
	    "retries", "timeout", "resources", "shards", "routing", "params", \
	    "env", "run_as", "preemptible"

static const char *const task_keys[]     = { "name", "template", "depends_on",
	                                     "deadline", SPEC_KEYS };
static const char *const template_keys[] = { "kind", "name", "description",
	                                     SPEC_KEYS };
static const char *const defaults_keys[] = {
	"type",    "priority", "channel",   "worker_group", "pool",
	"retries", "timeout",  "resources", "shards",       "routing",
	"params",  "env",      "run_as",    "preemptible"
};
static const char *const dag_keys[]         = { "kind",        "name",
	                                        "owner",       "impact",
	                                        "description", "tags",
	                                        "schedule",    "start",
	                                        "end",         "catchup",
	                                        "concurrency", "defaults",
	                                        "params",      "depends_on_dags",
	                                        "tasks",       "deadline" };
static const char *const schedule_keys[]    = { "cron", "timezone", "every",
	                                        "at" };
static const char *const concurrency_keys[] = { "max_active_runs", "policy" };
static const char *const dagdep_keys[]      = { "dag", "mode" };
static const char *const deadline_keys[]    = { "after", "at", "day" };
static const char *const impact_names[]     = { "P0", "P1", "P2", "P3" };
static const char *const overlap_names[] = { "serial", "parallel", "discard",
	                                     "replace" };
static const char *const mode_names[]    = { "same_period", "latest_success" };
static const char *const kind_names[]    = { "DAG", "TaskTemplate" };

/* --- documents ------------------------------------------------------------
 */

/* `deadline: {after: 2h}` or `deadline: {at: "08:00", day: 1}` as
 * written; dag_validate.c checks the combination and the time. */
static void
parse_deadline(ld *l, const map *parent, ax_deadline_decl *dl)
{
	yaml_node_t *v = yl_get(parent, "deadline");
	map          m;

	if (v == NULL)
		return;
	dl->set = 1;
	dl->pos = yl_node_pos(l, v);
	if (v->type == YAML_SCALAR_NODE) {
		ERR(l, dl->pos,
		    "'deadline' must be a mapping, e.g. {after: 2h} or "
		    "{at: \"08:00\", day: 1}, got '%s'",
		    yl_sval(v));
		dl->set = 0; /* reported: nothing more to say about it */
		return;
	}
	if (yl_map_load(l, v, "deadline", &m) != 0) {
		dl->set = 0;
		return;
	}
	yl_check_keys(l, &m, deadline_keys, N_OF(deadline_keys), "deadline");
	if (yl_get(&m, "after") != NULL) {
		dl->after_pos = yl_node_pos(l, yl_get(&m, "after"));
		dl->has_after =
		    yl_get_duration(l, &m, "after", AX_DEADLINE_AFTER_MIN,
		                    AX_DEADLINE_AFTER_MAX, &dl->after_us) == 1;
	}
	yl_get_str(l, &m, "at", &dl->at, &dl->at_pos);
	if (yl_get(&m, "day") != NULL) {
		dl->day_pos = yl_node_pos(l, yl_get(&m, "day"));
		dl->has_day = yl_get_int(l, &m, "day", 0, AX_DEADLINE_DAY_MAX,
		                         &dl->day) == 1;
	}
	yl_map_fini(&m);
}

static void
parse_task(ld *l, yaml_node_t *n, ax_task *t)
{
	map m;

	ax_task_spec_defaults(&t->spec);
	t->pos = yl_node_pos(l, n);
	if (yl_map_load(l, n, "a task", &m) != 0)
		return;
	yl_check_keys(l, &m, task_keys, N_OF(task_keys), "task");
	if (yl_get_str(l, &m, "name", &t->name, &t->name_pos) == 0)
		ERR(l, t->pos, "task has no 'name'");
	yl_get_str(l, &m, "template", &t->template_name, &t->template_pos);
	yl_get_str_list(l, &m, "depends_on", &t->depends_on, &t->depends_pos,
	                &t->n_depends);
	parse_deadline(l, &m, &t->deadline);
	parse_spec(l, &m, &t->spec);
	yl_map_fini(&m);
}

static void
parse_schedule(ld *l, yaml_node_t *v, ax_dag *d)
{
	map               m;
	ax_schedule_spec *s     = &d->schedule;
	int               kinds = 0;

	if (yl_map_load(l, v, "schedule", &m) != 0)
		return;
	yl_check_keys(l, &m, schedule_keys, N_OF(schedule_keys), "schedule");
	if (yl_get_str(l, &m, "cron", &s->cron, &s->cron_pos) == 1) {
		s->kind = AX_SCHED_CRON;
		kinds++;
	}
	yl_get_str(l, &m, "timezone", &s->timezone, &s->tz_pos);
	if (yl_get(&m, "every") != NULL) {
		s->every_pos = yl_node_pos(l, yl_get(&m, "every"));
		if (yl_get_duration(l, &m, "every", AX_USEC_PER_SEC,
		                    366 * DAY_US, &s->every_us) == 1)
			s->kind = AX_SCHED_EVERY;
		kinds++;
	}
	if (yl_get_str(l, &m, "at", &s->at, &s->at_pos) == 1) {
		s->kind = AX_SCHED_AT;
		kinds++;
	}
	if (kinds > 1)
		ERR(l, m.pos,
		    "schedule has more than one of 'cron', 'every' and "
		    "'at'; keep one");
	yl_map_fini(&m);
}

static void
parse_dag_deps(ld *l, yaml_node_t *v, ax_dag *d)
{
	if (v->type != YAML_SEQUENCE_NODE) {
		ERR(l, yl_node_pos(l, v),
		    "'depends_on_dags' must be a list, got %s", yl_what(v));
		return;
	}
	size_t cnt = (size_t) (v->data.sequence.items.top -
	                       v->data.sequence.items.start);
	d->deps    = ax_dagset_alloc(l->set, (cnt + 1) * sizeof(ax_dag_dep));
	if (d->deps == NULL)
		return;
	for (yaml_node_item_t *i = v->data.sequence.items.start;
	     i < v->data.sequence.items.top; i++) {
		yaml_node_t *e = yl_node(l, *i);
		ax_dag_dep  *dd;
		map          m;
		int          x;
		if (e == NULL)
			continue;
		if (e->type == YAML_SCALAR_NODE && !yl_is_null(e)) {
			dd      = &d->deps[d->n_deps++];
			dd->dag = yl_adup(l, e);
			dd->pos = yl_node_pos(l, e);
			continue;
		}
		if (yl_map_load(l, e, "an item of depends_on_dags", &m) != 0)
			continue;
		yl_check_keys(l, &m, dagdep_keys, N_OF(dagdep_keys),
		              "depends_on_dags");
		dd      = &d->deps[d->n_deps];
		dd->pos = m.pos;
		if (yl_get_str(l, &m, "dag", &dd->dag, &dd->pos) == 1) {
			d->n_deps++;
			if (yl_get_enum(l, &m, "mode", mode_names,
			                N_OF(mode_names), &x) == 1)
				dd->mode = (ax_dep_mode) x;
		} else {
			ERR(l, m.pos,
			    "an item of depends_on_dags needs 'dag'");
		}
		yl_map_fini(&m);
	}
}

static void
parse_tasks(ld *l, yaml_node_t *v, ax_dag *d)
{
	if (v->type != YAML_SEQUENCE_NODE) {
		ERR(l, yl_node_pos(l, v), "'tasks' must be a list, got %s",
		    yl_what(v));
		return;
	}
	size_t cnt = (size_t) (v->data.sequence.items.top -
	                       v->data.sequence.items.start);
	if (cnt > l->set->limits.max_tasks) {
		ERR(l, yl_node_pos(l, v),
		    "DAG has %zu tasks, more than the limit of %zu; split it "
		    "into several DAGs",
		    cnt, l->set->limits.max_tasks);
		d->valid = 0;
		return;
	}
	d->tasks = ax_dagset_alloc(l->set, (cnt + 1) * sizeof(ax_task));
	if (d->tasks == NULL)
		return;
	for (yaml_node_item_t *i = v->data.sequence.items.start;
	     i < v->data.sequence.items.top; i++) {
		yaml_node_t *e = yl_node(l, *i);
		if (e != NULL)
			parse_task(l, e, &d->tasks[d->n_tasks++]);
	}
}

static void
parse_dag(ld *l, const map *m, ax_dag *d)
{
	yaml_node_t *v;
	int          x;

	yl_check_keys(l, m, dag_keys, N_OF(dag_keys), "DAG");
	if (yl_get_str(l, m, "name", &d->name, &d->name_pos) == 0)
		ERR(l, d->pos, "DAG has no 'name'");
	yl_get_str(l, m, "owner", &d->owner, NULL);
	if (yl_get_enum(l, m, "impact", impact_names, N_OF(impact_names),
	                &x) == 1)
		d->impact = (ax_impact) x;
	else
		d->impact = AX_IMPACT_P2;
	yl_get_str(l, m, "description", &d->description, NULL);
	yl_get_str_list(l, m, "tags", &d->tags, NULL, &d->n_tags);
	if ((v = yl_get(m, "schedule")) != NULL)
		parse_schedule(l, v, d);
	yl_get_str(l, m, "start", &d->start, &d->start_pos);
	yl_get_str(l, m, "end", &d->end, &d->end_pos);
	yl_get_bool(l, m, "catchup", &d->catchup);
	if ((v = yl_get(m, "concurrency")) != NULL) {
		map c;
		if (yl_map_load(l, v, "concurrency", &c) == 0) {
			yl_check_keys(l, &c, concurrency_keys,
			              N_OF(concurrency_keys), "concurrency");
			yl_get_int(l, &c, "max_active_runs", 1, 1000,
			           &d->max_active_runs);
			if (yl_get_enum(l, &c, "policy", overlap_names,
			                N_OF(overlap_names), &x) == 1)
				d->policy = (ax_overlap) x;
			yl_map_fini(&c);
		}
	}
	if ((v = yl_get(m, "defaults")) != NULL) {
		map dm;
		if (yl_map_load(l, v, "defaults", &dm) == 0) {
			yl_check_keys(l, &dm, defaults_keys,
			              N_OF(defaults_keys), "defaults");
			parse_spec(l, &dm, &d->defaults);
			yl_map_fini(&dm);
		}
	}
	get_params(l, m, d);
	if ((v = yl_get(m, "depends_on_dags")) != NULL)
		parse_dag_deps(l, v, d);
	parse_deadline(l, m, &d->deadline);
	if ((v = yl_get(m, "tasks")) != NULL)
		parse_tasks(l, v, d);
	else
		ERR(l, d->pos, "DAG has no 'tasks'");
}

static void
parse_template(ld *l, const map *m, ax_task_template *t)
{
	yl_check_keys(l, m, template_keys, N_OF(template_keys),
	              "TaskTemplate");
	if (yl_get_str(l, m, "name", &t->name, &t->name_pos) == 0)
		ERR(l, t->pos, "TaskTemplate has no 'name'");
	yl_get_str(l, m, "description", &t->description, NULL);
	parse_spec(l, m, &t->spec);
}

static const char *
slice(ld *l, const yaml_document_t *doc)
{
	size_t a = doc->start_mark.index, b = doc->end_mark.index;
	if (a > l->len || b > l->len || b < a)
		return "";
	return ax_dagset_strndup(l->set, l->src + a, b - a);
}

/* Walks one loaded document. */
static void
parse_document(ld *l)
{
	yaml_node_t *root = yaml_document_get_root_node(l->doc);
	map          m;
	int          kind;
	size_t       before = l->set->n_diags + l->set->n_dropped;

	if (root == NULL || yl_is_null(root))
		return; /* empty document, e.g. a trailing --- */
	if (yl_map_load(l, root, "the document", &m) != 0)
		return;
	yaml_node_t *k = yl_get(&m, "kind");
	if (k == NULL) {
		ERR(l, m.pos,
		    "document has no 'kind'; write 'kind: DAG' or "
		    "'kind: TaskTemplate'");
		yl_map_fini(&m);
		return;
	}
	if (yl_get_enum(l, &m, "kind", kind_names, N_OF(kind_names), &kind) !=
	    1) {
		yl_map_fini(&m);
		return;
	}
	if (kind == 0) {
		ax_dag *d = ax_dagset_add_dag(l->set);
		if (d != NULL) {
			d->pos  = m.pos;
			d->yaml = slice(l, l->doc);
			parse_dag(l, &m, d);
			if (l->set->n_diags + l->set->n_dropped != before)
				d->valid = 0;
		}
	} else {
		ax_task_template *t = ax_dagset_add_template(l->set);
		if (t != NULL) {
			t->pos  = m.pos;
			t->yaml = slice(l, l->doc);
			parse_template(l, &m, t);
			if (l->set->n_diags + l->set->n_dropped != before)
				t->valid = 0;
		}
	}
	yl_map_fini(&m);
}

/* --- entry points ----------------------------------------------------------
 */

ax_err
ax_dag_yaml_load_buf(ax_dagset *set, const char *file, const char *buf,
                     size_t len)
{
	ld            l = { set, NULL, buf, len, NULL };
	yaml_parser_t p;
	ax_err        rv;
	size_t        before = set->n_diags + set->n_dropped;

	l.file = ax_dagset_strdup(set, file ? file : "<input>");
	if (l.file == NULL)
		return ax_err_set(AX_ENOMEM, "loading %s", file);
	ax_pos top = { l.file, 1, 1, 0 };
	if (len > set->limits.max_file_bytes) {
		ERR(&l, top, "file is %zu bytes, larger than the limit of %zu",
		    len, set->limits.max_file_bytes);
		return AX_ELIMIT;
	}
	if (memchr(buf, '\0', len) != NULL) {
		ERR(&l, top,
		    "file holds a NUL byte; DAG files are UTF-8 text");
		return AX_EPARSE;
	}
	if ((rv = yl_prescan(&l)) != AX_OK)
		return rv;
	if (!yaml_parser_initialize(&p))
		return ax_err_set(AX_ENOMEM, "libyaml");
	yaml_parser_set_input_string(&p, (const unsigned char *) buf, len);
	for (;;) {
		yaml_document_t doc;
		if (!yaml_parser_load(&p, &doc)) {
			rv = yl_syntax_error(&l, &p);
			break;
		}
		if (yaml_document_get_root_node(&doc) == NULL) {
			yaml_document_delete(&doc);
			break; /* end of stream */
		}
		l.doc = &doc;
		parse_document(&l);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&p);
	if (rv != AX_OK)
		return rv;
	return set->n_diags + set->n_dropped != before ? AX_EPARSE : AX_OK;
}

ax_err
ax_dag_yaml_load_file(ax_dagset *set, const char *path)
{
	ax_pos top = { ax_dagset_strdup(set, path), 1, 1, 0 };
	FILE  *f   = fopen(path, "rb");
	size_t cap = set->limits.max_file_bytes + 1, n;
	char  *buf;
	ax_err rv;

	if (f == NULL) {
		ax_dagset_error(set, top, "cannot read: %s", strerror(errno));
		return ax_err_set(AX_EIO, "%s: %s", path, strerror(errno));
	}
	buf = malloc(cap);
	if (buf == NULL) {
		fclose(f);
		return ax_err_set(AX_ENOMEM, "reading %s", path);
	}
	n = fread(buf, 1, cap, f);
	if (ferror(f)) {
		ax_dagset_error(set, top, "cannot read: %s", strerror(errno));
		fclose(f);
		free(buf);
		return ax_err_set(AX_EIO, "%s: read error", path);
	}
	fclose(f);
	if (n == cap) {
		ax_dagset_error(set, top,
		                "file is larger than the limit of %zu bytes",
		                set->limits.max_file_bytes);
		free(buf);
		return AX_ELIMIT;
	}
	rv = ax_dag_yaml_load_buf(set, path, buf, n);
	free(buf);
	return rv;
}
