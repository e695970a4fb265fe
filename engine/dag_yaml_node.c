/*
 * dag_yaml_node.c - reading libyaml's tree for the DAG loader: positions,
 * mappings with merges, typed values (see dag_yaml_internal.h).
 *
 * Invariants: every value handed out is an arena copy of a whole scalar;
 * a getter reports its error itself (ERR, at the node) and returns -1.
 * Workload: the nodes of a DAG file, once each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "clock.h"
#include "dag_yaml_internal.h"
#include "suggest.h"

/* --- positions and node helpers ---------------------------------------- */

ax_pos
yl_mark_pos(const ld *l, yaml_mark_t m)
{
	ax_pos p = { l->file, (uint32_t) m.line + 1, (uint32_t) m.column + 1,
		     0 };
	return p;
}

/* Position of a node's value: after the quote, or the first content line
 * of a block scalar. */
ax_pos
yl_node_pos(const ld *l, const yaml_node_t *n)
{
	ax_pos p = yl_mark_pos(l, n->start_mark);
	if (n->type != YAML_SCALAR_NODE)
		return p;
	switch (n->data.scalar.style) {
	case YAML_SINGLE_QUOTED_SCALAR_STYLE:
	case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
		p.col++;
		break;
	case YAML_LITERAL_SCALAR_STYLE:
	case YAML_FOLDED_SCALAR_STYLE: {
		size_t i = n->start_mark.index;
		while (i < l->len && l->src[i] != '\n')
			i++;
		if (i >= l->len)
			break;
		i++;
		uint32_t ind = 0;
		while (i + ind < l->len && l->src[i + ind] == ' ')
			ind++;
		p.line++;
		p.col    = ind + 1;
		p.indent = ind + 1;
		break;
	}
	default:
		break;
	}
	return p;
}

yaml_node_t *
yl_node(const ld *l, int idx)
{
	return yaml_document_get_node(l->doc, idx);
}

const char *
yl_what(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	default:
		return "a scalar";
	}
}

const char *
yl_sval(const yaml_node_t *n)
{
	return (const char *) n->data.scalar.value;
}

int
yl_is_null(const yaml_node_t *n)
{
	if (n == NULL)
		return 1;
	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	const char *s = yl_sval(n);
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	    strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* An arena copy of scalar n, whole: yl_prescan() refused every scalar that
 * holds a NUL, so its length is its C string length. */
char *
yl_adup(const ld *l, const yaml_node_t *n)
{
	return ax_dagset_strndup(l->set, yl_sval(n), n->data.scalar.length);
}

/* --- mappings --------------------------------------------------------------
 */

static int
map_push(map *m, yaml_node_t *k, yaml_node_t *v)
{
	if (AX_GROW(m->p, m->cap, m->n + 1) != AX_OK)
		return -1;
	m->p[m->n].k   = k;
	m->p[m->n++].v = v;
	return 0;
}

static kvp *
map_find(const map *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->p[i].k->type == YAML_SCALAR_NODE &&
		    strcmp(yl_sval(m->p[i].k), key) == 0)
			return &m->p[i];
	return NULL;
}

static void merge_into(ld *l, map *m, yaml_node_t *src, int depth);

/*
 * Collects the pairs of mapping node n into m: explicit keys first (a
 * repeated key is an error), then keys from `<<` merges that are not
 * already there. Returns -1 when n is not a mapping (reported as
 * "expected a mapping" for `ctx`).
 */
int
yl_map_load(ld *l, yaml_node_t *n, const char *ctx, map *m)
{
	memset(m, 0, sizeof(*m));
	if (n == NULL || n->type != YAML_MAPPING_NODE) {
		if (n != NULL)
			ERR(l, yl_node_pos(l, n),
			    "%s must be a mapping, got %s", ctx, yl_what(n));
		return -1;
	}
	m->pos = yl_node_pos(l, n);
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yl_node(l, p->key), *v = yl_node(l, p->value);
		if (k == NULL || v == NULL)
			continue;
		if (k->type != YAML_SCALAR_NODE) {
			ERR(l, yl_node_pos(l, k),
			    "keys in %s must be strings, got %s", ctx,
			    yl_what(k));
			continue;
		}
		if (strcmp(yl_sval(k), "<<") == 0 &&
		    k->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
			continue;
		kvp *old = map_find(m, yl_sval(k));
		if (old != NULL) {
			ax_pos op = yl_node_pos(l, old->k);
			ERR(l, yl_node_pos(l, k),
			    "duplicate key '%s' in %s (first at line %u)",
			    yl_sval(k), ctx, op.line);
			continue;
		}
		if (map_push(m, k, v) != 0)
			return -1;
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yl_node(l, p->key), *v = yl_node(l, p->value);
		if (k != NULL && v != NULL && k->type == YAML_SCALAR_NODE &&
		    k->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		    strcmp(yl_sval(k), "<<") == 0)
			merge_into(l, m, v, 0);
	}
	return 0;
}

static void
merge_into(ld *l, map *m, yaml_node_t *src, int depth)
{
	if (depth > 8)
		return;
	if (src->type == YAML_SEQUENCE_NODE) {
		for (yaml_node_item_t *i = src->data.sequence.items.start;
		     i < src->data.sequence.items.top; i++) {
			yaml_node_t *e = yl_node(l, *i);
			if (e != NULL)
				merge_into(l, m, e, depth + 1);
		}
		return;
	}
	if (src->type != YAML_MAPPING_NODE) {
		ERR(l, yl_node_pos(l, src),
		    "'<<' merges a mapping or a list of mappings, got %s",
		    yl_what(src));
		return;
	}
	for (yaml_node_pair_t *p = src->data.mapping.pairs.start;
	     p < src->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yl_node(l, p->key), *v = yl_node(l, p->value);
		if (k == NULL || v == NULL || k->type != YAML_SCALAR_NODE)
			continue;
		if (strcmp(yl_sval(k), "<<") == 0) {
			merge_into(l, m, v, depth + 1);
			continue;
		}
		if (map_find(m, yl_sval(k)) == NULL)
			map_push(m, k, v);
	}
}

void
yl_map_fini(map *m)
{
	free(m->p);
	m->p = NULL;
	m->n = 0;
}

/* Reports every key of m that is not in allowed, with a did-you-mean. */
void
yl_check_keys(ld *l, const map *m, const char *const *allowed, size_t n,
              const char *ctx)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *k  = yl_sval(m->p[i].k);
		int         ok = 0;
		for (size_t j = 0; j < n && !ok; j++)
			ok = strcmp(k, allowed[j]) == 0;
		if (ok)
			continue;
		const char *sug = ax_suggest(k, allowed, n);
		if (sug != NULL)
			ERR(l, yl_node_pos(l, m->p[i].k),
			    "unknown key '%s' in %s; did you mean '%s'?", k,
			    ctx, sug);
		else
			ERR(l, yl_node_pos(l, m->p[i].k),
			    "unknown key '%s' in %s", k, ctx);
	}
}

/* --- typed getters: 0 absent, 1 set, -1 reported error ------------------ */

yaml_node_t *
yl_get(const map *m, const char *key)
{
	kvp *p = map_find(m, key);
	return p && !yl_is_null(p->v) ? p->v : NULL;
}

int
yl_want_scalar(ld *l, yaml_node_t *v, const char *key, const char *type)
{
	if (v->type == YAML_SCALAR_NODE)
		return 0;
	ERR(l, yl_node_pos(l, v), "'%s' must be %s, got %s", key, type,
	    yl_what(v));
	return -1;
}

int
yl_get_str(ld *l, const map *m, const char *key, const char **out, ax_pos *pos)
{
	yaml_node_t *v = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (yl_want_scalar(l, v, key, "a string") != 0)
		return -1;
	*out = yl_adup(l, v);
	if (pos != NULL)
		*pos = yl_node_pos(l, v);
	return 1;
}

int
yl_parse_int(const char *s, long long *out)
{
	char *e;
	if (*s == '\0')
		return -1;
	errno       = 0;
	long long x = strtoll(s, &e, 10);
	if (*e != '\0' || errno != 0)
		return -1;
	*out = x;
	return 0;
}

int
yl_get_int(ld *l, const map *m, const char *key, long long min, long long max,
           int *out)
{
	long long    x;
	yaml_node_t *v = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (yl_want_scalar(l, v, key, "an integer") != 0)
		return -1;
	if (v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    yl_parse_int(yl_sval(v), &x) != 0) {
		ERR(l, yl_node_pos(l, v), "'%s' must be an integer, got '%s'",
		    key, yl_sval(v));
		return -1;
	}
	if (x < min || x > max) {
		ERR(l, yl_node_pos(l, v),
		    "'%s' is %lld; it must be between %lld "
		    "and %lld",
		    key, x, min, max);
		return -1;
	}
	*out = (int) x;
	return 1;
}

int
yl_get_bool(ld *l, const map *m, const char *key, int *out)
{
	yaml_node_t *v = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (yl_want_scalar(l, v, key, "true or false") != 0)
		return -1;
	const char *s = yl_sval(v);
	if (v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 ||
	     strcmp(s, "TRUE") == 0)) {
		*out = 1;
		return 1;
	}
	if (v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 ||
	     strcmp(s, "FALSE") == 0)) {
		*out = 0;
		return 1;
	}
	ERR(l, yl_node_pos(l, v), "'%s' must be true or false, got '%s'", key,
	    s);
	return -1;
}

/* Enum value, matched without regard to case; names[i] maps to i. */
int
yl_get_enum(ld *l, const map *m, const char *key, const char *const *names,
            size_t n, int *out)
{
	char         list[256] = "";
	yaml_node_t *v         = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (yl_want_scalar(l, v, key, "a string") != 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(yl_sval(v), names[i]) == 0) {
			*out = (int) i;
			return 1;
		}
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(list);
		snprintf(list + k, sizeof(list) - k, "%s%s", i ? ", " : "",
		         names[i]);
	}
	const char *sug = ax_suggest(yl_sval(v), names, n);
	ERR(l, yl_node_pos(l, v), "unknown %s '%s'; expected one of: %s%s%s%s",
	    key, yl_sval(v), list, sug ? "; did you mean '" : "",
	    sug ? sug : "", sug ? "'?" : "");
	return -1;
}

int
yl_get_duration(ld *l, const map *m, const char *key, int64_t min_us,
                int64_t max_us, int64_t *out)
{
	int64_t      us;
	char         a[32], b[32];
	yaml_node_t *v = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (yl_want_scalar(l, v, key, "a duration such as 30s, 5m or 2h") != 0)
		return -1;
	const char *s = yl_sval(v);
	if (s[0] == '-') {
		ERR(l, yl_node_pos(l, v),
		    "'%s' is negative (%s); durations are "
		    "positive, e.g. 30s, 5m, 2h",
		    key, s);
		return -1;
	}
	if (ax_duration_parse(s, &us) != AX_OK) {
		ERR(l, yl_node_pos(l, v),
		    "'%s': %s; write e.g. 30s, 5m, 2h, 1h30m", key,
		    ax_err_detail());
		return -1;
	}
	if (us < min_us || us > max_us) {
		ERR(l, yl_node_pos(l, v),
		    "'%s' is %s; it must be between %s and %s", key, s,
		    ax_duration_fmt(min_us, a, sizeof(a)),
		    ax_duration_fmt(max_us, b, sizeof(b)));
		return -1;
	}
	*out = us;
	return 1;
}

/* A list of scalars (tags, depends_on). */
int
yl_get_str_list(ld *l, const map *m, const char *key, const char ***out,
                ax_pos **pos, size_t *n)
{
	yaml_node_t *v = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (v->type != YAML_SEQUENCE_NODE) {
		ERR(l, yl_node_pos(l, v), "'%s' must be a list, got %s", key,
		    yl_what(v));
		return -1;
	}
	size_t cnt = (size_t) (v->data.sequence.items.top -
	                       v->data.sequence.items.start);
	*out       = ax_dagset_alloc(l->set, (cnt + 1) * sizeof(char *));
	if (pos != NULL)
		*pos = ax_dagset_alloc(l->set, (cnt + 1) * sizeof(ax_pos));
	if (*out == NULL || (pos != NULL && *pos == NULL))
		return -1;
	*n     = 0;
	int rv = 1;
	for (yaml_node_item_t *i = v->data.sequence.items.start;
	     i < v->data.sequence.items.top; i++) {
		yaml_node_t *e = yl_node(l, *i);
		if (e == NULL)
			continue;
		if (e->type != YAML_SCALAR_NODE || yl_is_null(e)) {
			ERR(l, yl_node_pos(l, e),
			    "items of '%s' must be strings, got %s", key,
			    yl_is_null(e) ? "null" : yl_what(e));
			rv = -1;
			continue;
		}
		if (pos != NULL)
			(*pos)[*n] = yl_node_pos(l, e);
		(*out)[(*n)++] = yl_adup(l, e);
	}
	return rv;
}

/* A mapping of names to scalar values (params, env). */
int
yl_get_kvs(ld *l, const map *m, const char *key, ax_kvs *out)
{
	map          sub;
	yaml_node_t *v = yl_get(m, key);
	if (v == NULL)
		return 0;
	if (yl_map_load(l, v, key, &sub) != 0)
		return -1;
	out->v = ax_dagset_alloc(l->set, (sub.n + 1) * sizeof(ax_kv));
	out->n = 0;
	int rv = out->v ? 1 : -1;
	for (size_t i = 0; out->v && i < sub.n; i++) {
		yaml_node_t *val = sub.p[i].v;
		if (val->type != YAML_SCALAR_NODE) {
			ERR(l, yl_node_pos(l, val),
			    "%s.%s must be a string or number, got %s", key,
			    yl_sval(sub.p[i].k), yl_what(val));
			rv = -1;
			continue;
		}
		ax_kv *kv   = &out->v[out->n++];
		kv->key     = yl_adup(l, sub.p[i].k);
		kv->key_pos = yl_node_pos(l, sub.p[i].k);
		kv->value   = yl_is_null(val) ? "" : yl_adup(l, val);
		kv->pos     = yl_node_pos(l, val);
	}
	yl_map_fini(&sub);
	return rv;
}
