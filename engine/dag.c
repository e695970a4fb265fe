/*
 * dag.c - the DAG model: arena, diagnostics, lookups, topological order,
 * canonical JSON and content hash.
 *
 * Role: the data structure every DAG consumer shares (see dag.h).
 * Invariants: everything of a set is allocated from its arena; a DAG's
 * JSON form depends only on its effective content (never on positions),
 * so its hash identifies a version.
 * Workload: sets of tens to thousands of DAGs loaded at start-up and on
 * submission; nothing here is on a per-attempt path.
 */
#include "dag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "dag_params.h"

/* --- arena --------------------------------------------------------------- */

/* Blocks grow from ARENA_FIRST to ARENA_BLOCK: a one-task DAG (most of
 * the million armed schedules a big installation holds) then costs a
 * couple of kilobytes instead of a 64 KB block's touched pages. */
#define ARENA_FIRST (2 * 1024)
#define ARENA_BLOCK (64 * 1024)

typedef struct ablock {
	struct ablock *next;
	size_t         used, cap;
	max_align_t    data[]; /* cap bytes */
} ablock;

struct ax_arena {
	ablock *head;
	size_t  next_cap; /* size of the next regular block */
};

static void *
arena_alloc(ax_arena *a, size_t size)
{
	size_t  align = sizeof(max_align_t);
	ablock *b     = a->head;

	size = (size + align - 1) / align * align;
	if (size == 0)
		size = align;
	if (b == NULL || b->cap - b->used < size) {
		size_t  regular = a->next_cap ? a->next_cap : ARENA_FIRST;
		size_t  cap     = size > regular / 4 ? size : regular;
		int     big     = cap != regular;
		ablock *nb      = malloc(sizeof(ablock) + cap);
		if (nb == NULL)
			return NULL;
		nb->cap  = cap;
		nb->used = 0;
		if (!big && regular < ARENA_BLOCK)
			a->next_cap = regular * 2;
		if (b != NULL && big) {
			/* a big block goes behind the head, which keeps its
			 * free space for the small allocations that follow */
			nb->next = b->next;
			b->next  = nb;
		} else {
			nb->next = b;
			a->head  = nb;
		}
		b = nb;
	}
	void *p = (char *) b->data + b->used;
	b->used += size;
	memset(p, 0, size);
	return p;
}

static void
arena_free(ax_arena *a)
{
	ablock *b = a ? a->head : NULL;
	while (b != NULL) {
		ablock *n = b->next;
		free(b);
		b = n;
	}
	free(a);
}

/* --- names of enums ------------------------------------------------------ */

const char *
ax_impact_name(ax_impact v)
{
	static const char *const n[] = { "P0", "P1", "P2", "P3" };
	return (unsigned) v < 4 ? n[v] : "?";
}

const char *
ax_channel_name(ax_channel v)
{
	static const char *const n[] = { "px", "p0", "k8s", "biz" };
	return (unsigned) v < 4 ? n[v] : "?";
}

const char *
ax_overlap_name(ax_overlap v)
{
	static const char *const n[] = { "serial", "parallel", "discard",
		                         "replace" };
	return (unsigned) v < 4 ? n[v] : "?";
}

const char *
ax_dep_mode_name(ax_dep_mode v)
{
	static const char *const n[] = { "same_period", "latest_success" };
	return (unsigned) v < 2 ? n[v] : "?";
}

const char *
ax_backoff_name(ax_backoff v)
{
	static const char *const n[] = { "fixed", "exponential" };
	return (unsigned) v < 2 ? n[v] : "?";
}

const char *
ax_routing_name(ax_routing_kind v)
{
	static const char *const n[] = { "round_robin", "random", "least_load",
		                         "consistent_hash", "pinned" };
	return (unsigned) v < 5 ? n[v] : "?";
}

const char *
ax_sched_kind_name(ax_sched_kind v)
{
	static const char *const n[] = { "none", "cron", "every", "at" };
	return (unsigned) v < 4 ? n[v] : "?";
}

/* --- positions ----------------------------------------------------------- */

ax_pos
ax_pos_at(ax_pos p, const char *value, size_t off)
{
	size_t last_nl = 0;
	int    seen_nl = 0;

	if (p.line == 0 || value == NULL)
		return p;
	for (size_t i = 0; i < off && value[i] != '\0'; i++)
		if (value[i] == '\n') {
			p.line++;
			last_nl = i + 1;
			seen_nl = 1;
		}
	if (p.indent > 0) {
		/* block scalar: p points at the first content line */
		p.col = p.indent + (uint32_t) (off - last_nl);
		return p;
	}
	if (seen_nl)
		p.col = 1 + (uint32_t) (off - last_nl);
	else
		p.col += (uint32_t) off;
	return p;
}

/* --- the set ------------------------------------------------------------- */

ax_dag_limits
ax_dag_limits_default(void)
{
	ax_dag_limits l = {
		.max_file_bytes  = 1024 * 1024,
		.max_tasks       = 5000,
		.max_depth       = 32,
		.max_alias_nodes = 10000,
		.max_documents   = 1000,
		.max_diags       = 1000,
	};
	return l;
}

ax_err
ax_dagset_new(const ax_dag_limits *limits, ax_dagset **out)
{
	ax_arena *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return ax_err_set(AX_ENOMEM, "allocating a DAG set");
	ax_dagset *s = arena_alloc(a, sizeof(*s));
	if (s == NULL) {
		arena_free(a);
		return ax_err_set(AX_ENOMEM, "allocating a DAG set");
	}
	s->arena  = a;
	s->limits = limits ? *limits : ax_dag_limits_default();
	*out      = s;
	return AX_OK;
}

void
ax_dagset_free(ax_dagset *set)
{
	if (set == NULL)
		return;
	free(set->diags);
	free(set->dags);
	free(set->templates);
	arena_free(set->arena); /* set itself lives in the arena */
}

void *
ax_dagset_alloc(ax_dagset *set, size_t size)
{
	return arena_alloc(set->arena, size);
}

char *
ax_dagset_strndup(ax_dagset *set, const char *s, size_t n)
{
	char *p = arena_alloc(set->arena, n + 1);
	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *
ax_dagset_strdup(ax_dagset *set, const char *s)
{
	return s ? ax_dagset_strndup(set, s, strlen(s)) : NULL;
}

ax_dag *
ax_dagset_add_dag(ax_dagset *set)
{
	if (AX_GROW(set->dags, set->cap_dags, set->n_dags + 1) != AX_OK)
		return NULL;
	ax_dag *d = ax_dagset_alloc(set, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->max_active_runs = 1;
	d->valid           = 1;
	ax_task_spec_defaults(&d->defaults);
	set->dags[set->n_dags++] = d;
	return d;
}

ax_task_template *
ax_dagset_add_template(ax_dagset *set)
{
	if (AX_GROW(set->templates, set->cap_templates,
	            set->n_templates + 1) != AX_OK)
		return NULL;
	ax_task_template *t = ax_dagset_alloc(set, sizeof(*t));
	if (t == NULL)
		return NULL;
	ax_task_spec_defaults(&t->spec);
	t->valid                           = 1;
	set->templates[set->n_templates++] = t;
	return t;
}

void
ax_dagset_error(ax_dagset *set, ax_pos pos, const char *fmt, ...)
{
	char    msg[512];
	va_list ap;

	if (set->n_diags >= set->limits.max_diags) {
		set->n_dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (AX_GROW(set->diags, set->cap_diags, set->n_diags + 1) != AX_OK) {
		set->n_dropped++;
		return;
	}
	ax_diag *d = &set->diags[set->n_diags];
	d->pos     = pos;
	d->msg     = ax_dagset_strdup(set, msg);
	if (d->msg == NULL) {
		set->n_dropped++;
		return;
	}
	set->n_diags++;
}

static int
diag_cmp(const void *a, const void *b)
{
	const ax_diag *x = a, *y = b;
	int            c = strcmp(x->pos.file ? x->pos.file : "",
                       y->pos.file ? y->pos.file : "");
	if (c != 0)
		return c;
	if (x->pos.line != y->pos.line)
		return x->pos.line < y->pos.line ? -1 : 1;
	if (x->pos.col != y->pos.col)
		return x->pos.col < y->pos.col ? -1 : 1;
	c = strcmp(x->msg, y->msg);
	if (c != 0)
		return c;
	/* stable: keep the order in which they were reported */
	return x < y ? -1 : x > y;
}

void
ax_dagset_sort_diags(ax_dagset *set)
{
	size_t w = 0;

	if (set->n_diags == 0)
		return;
	qsort(set->diags, set->n_diags, sizeof(ax_diag), diag_cmp);
	for (size_t i = 0; i < set->n_diags; i++) {
		const ax_diag *d = &set->diags[i];
		if (w > 0) {
			const ax_diag *p = &set->diags[w - 1];
			if (p->pos.line == d->pos.line &&
			    p->pos.col == d->pos.col &&
			    strcmp(p->pos.file ? p->pos.file : "",
			           d->pos.file ? d->pos.file : "") == 0 &&
			    strcmp(p->msg, d->msg) == 0)
				continue;
		}
		set->diags[w++] = *d;
	}
	set->n_diags = w;
}

size_t
ax_dagset_error_count(const ax_dagset *set, const char *file)
{
	size_t n = 0;
	if (file == NULL)
		return set->n_diags + set->n_dropped;
	for (size_t i = 0; i < set->n_diags; i++)
		if (set->diags[i].pos.file != NULL &&
		    strcmp(set->diags[i].pos.file, file) == 0)
			n++;
	return n;
}

void
ax_dagset_print_diags(const ax_dagset *set, FILE *f)
{
	for (size_t i = 0; i < set->n_diags; i++) {
		const ax_diag *d = &set->diags[i];
		fprintf(f, "%s:%u:%u: error: %s\n",
		        d->pos.file ? d->pos.file : "<input>", d->pos.line,
		        d->pos.col, d->msg);
	}
	if (set->n_dropped > 0)
		fprintf(f, "error: %zu more errors not shown\n",
		        set->n_dropped);
}

ax_dag *
ax_dagset_find_dag(const ax_dagset *set, const char *name)
{
	for (size_t i = 0; i < set->n_dags; i++)
		if (set->dags[i]->name &&
		    strcmp(set->dags[i]->name, name) == 0)
			return set->dags[i];
	return NULL;
}

ax_task_template *
ax_dagset_find_template(const ax_dagset *set, const char *name)
{
	for (size_t i = 0; i < set->n_templates; i++)
		if (set->templates[i]->name &&
		    strcmp(set->templates[i]->name, name) == 0)
			return set->templates[i];
	return NULL;
}

long
ax_dag_task_index(const ax_dag *dag, const char *name)
{
	for (size_t i = 0; i < dag->n_tasks; i++)
		if (dag->tasks[i].name &&
		    strcmp(dag->tasks[i].name, name) == 0)
			return (long) i;
	return -1;
}

void
ax_task_spec_defaults(ax_task_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->type                 = "bash";
	spec->priority             = 50;
	spec->channel              = AX_CHANNEL_PX;
	spec->worker_group         = "default";
	spec->retries.backoff      = AX_BACKOFF_FIXED;
	spec->retries.delay_us     = 60 * AX_USEC_PER_SEC;
	spec->retries.max_delay_us = 3600 * AX_USEC_PER_SEC;
	spec->shards               = 1;
	spec->routing.kind         = AX_ROUTE_ROUND_ROBIN;
}

/* --- topological order ----------------------------------------------------
 */

ax_err
ax_dag_toposort(ax_dagset *set, ax_dag *dag)
{
	size_t  n = dag->n_tasks, head = 0, tail = 0;
	size_t *indeg, *order;

	dag->topo = NULL;
	indeg     = calloc(n + 1, sizeof(size_t));
	if (indeg == NULL)
		return ax_err_set(AX_ENOMEM, "topological sort");
	order = ax_dagset_alloc(set, (n + 1) * sizeof(size_t));
	if (order == NULL) {
		free(indeg);
		return ax_err_set(AX_ENOMEM, "topological sort");
	}
	for (size_t i = 0; i < n; i++)
		indeg[i] = dag->tasks[i].n_depends;
	/* Kahn's algorithm; scanning in document order keeps ties stable.
	 * O(n^2) in the worst case, fine for max_tasks. */
	for (size_t i = 0; i < n; i++)
		if (indeg[i] == 0)
			order[tail++] = i;
	while (head < tail) {
		size_t u = order[head++];
		for (size_t v = 0; v < n; v++)
			for (size_t k = 0; k < dag->tasks[v].n_depends; k++)
				if (dag->tasks[v].deps[k] == u &&
				    --indeg[v] == 0)
					order[tail++] = v;
	}
	free(indeg);
	if (tail != n)
		return ax_err_set(AX_EINVAL, "DAG '%s' has a cycle",
		                  dag->name ? dag->name : "?");
	dag->topo = order;
	return AX_OK;
}

/* --- JSON --------------------------------------------------------------- */

/* Text values as strings; env sources as {"from_file": PATH} or
 * {"from_env": NAME} (the name of the source, never a secret). */
static json_t *
kvs_json(const ax_kvs *k)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < k->n; i++) {
		const ax_kv *kv = &k->v[i];
		json_object_set_new(
		    o, kv->key,
		    kv->source == AX_KV_VALUE
		        ? json_string(kv->value)
		        : json_pack("{s:s}",
		                    kv->source == AX_KV_FROM_FILE ? "from_file"
		                                                  : "from_env",
		                    kv->value));
	}
	return o;
}

static json_t *
dur_json(int64_t us)
{
	char buf[64];
	ax_duration_fmt(us, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *
str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* {name: {type, pattern}} of the params that declare either. */
static json_t *
decls_json(const ax_dag *d)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < d->params.n; i++) {
		const ax_param_decl *pd = &d->param_decls[i];
		if (pd->type == AX_PT_TEXT && pd->pattern == NULL)
			continue;
		json_object_set_new(o, d->params.v[i].key,
		                    json_pack("{s:s, s:o}", "type",
		                              ax_param_type_name(pd->type),
		                              "pattern",
		                              str_or_null(pd->pattern)));
	}
	return o;
}

static json_t *
spec_json(const ax_task_spec *s)
{
	json_t *o = json_object();
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "type", json_string(s->type));
	json_object_set_new(o, "command", str_or_null(s->command));
	json_object_set_new(o, "priority", json_integer(s->priority));
	json_object_set_new(o, "channel",
	                    json_string(ax_channel_name(s->channel)));
	json_object_set_new(o, "worker_group", str_or_null(s->worker_group));
	json_object_set_new(o, "pool", str_or_null(s->pool));
	json_object_set_new(
	    o, "retries",
	    json_pack("{s:i, s:s, s:o, s:o}", "count", s->retries.count,
	              "backoff", ax_backoff_name(s->retries.backoff), "delay",
	              dur_json(s->retries.delay_us), "max_delay",
	              dur_json(s->retries.max_delay_us)));
	json_object_set_new(o, "timeout",
	                    s->timeout_us ? dur_json(s->timeout_us)
	                                  : json_null());
	json_t *res = json_pack("{s:i, s:I}", "cpu_milli", s->cpu_milli,
	                        "memory_bytes", (json_int_t) s->memory_bytes);
	/* only when written: the DAGs without named resources keep their
	 * hashes */
	if (res != NULL && s->res.n > 0)
		json_object_set_new(res, "named", kvs_json(&s->res));
	json_object_set_new(o, "resources", res);
	json_object_set_new(o, "shards", json_integer(s->shards));
	json_object_set_new(o, "routing",
	                    json_pack("{s:s, s:o, s:o}", "strategy",
	                              ax_routing_name(s->routing.kind), "key",
	                              str_or_null(s->routing.key), "node",
	                              str_or_null(s->routing.node)));
	json_object_set_new(o, "params", kvs_json(&s->params));
	json_object_set_new(o, "env", kvs_json(&s->env));
	/* only when written: the DAGs without it keep their hashes */
	if (s->run_as != NULL)
		json_object_set_new(o, "run_as", json_string(s->run_as));
	if (s->preemptible)
		json_object_set_new(o, "preemptible", json_true());
	return o;
}

json_t *
ax_dag_to_json(const ax_dag *d)
{
	json_t *o = json_object(), *tags = json_array(), *deps = json_array(),
	       *tasks = json_array(), *sched = json_object();
	if (!o || !tags || !deps || !tasks || !sched) {
		json_decref(o);
		json_decref(tags);
		json_decref(deps);
		json_decref(tasks);
		json_decref(sched);
		return NULL;
	}
	json_object_set_new(o, "kind", json_string("DAG"));
	json_object_set_new(o, "name", str_or_null(d->name));
	json_object_set_new(o, "owner", str_or_null(d->owner));
	json_object_set_new(o, "impact",
	                    json_string(ax_impact_name(d->impact)));
	json_object_set_new(o, "description", str_or_null(d->description));
	for (size_t i = 0; i < d->n_tags; i++)
		json_array_append_new(tags, json_string(d->tags[i]));
	json_object_set_new(o, "tags", tags);
	json_object_set_new(sched, "kind",
	                    json_string(ax_sched_kind_name(d->schedule.kind)));
	json_object_set_new(sched, "cron", str_or_null(d->schedule.cron));
	json_object_set_new(sched, "timezone",
	                    str_or_null(d->schedule.timezone));
	json_object_set_new(sched, "every",
	                    d->schedule.kind == AX_SCHED_EVERY
	                        ? dur_json(d->schedule.every_us)
	                        : json_null());
	json_object_set_new(sched, "at", str_or_null(d->schedule.at));
	json_object_set_new(o, "schedule", sched);
	json_object_set_new(o, "start", str_or_null(d->start));
	json_object_set_new(o, "end", str_or_null(d->end));
	json_object_set_new(o, "catchup", json_boolean(d->catchup));
	json_object_set_new(o, "concurrency",
	                    json_pack("{s:i, s:s}", "max_active_runs",
	                              d->max_active_runs, "policy",
	                              ax_overlap_name(d->policy)));
	json_object_set_new(o, "params", kvs_json(&d->params));
	if (d->deadline.spec.kind != AX_DEADLINE_NONE)
		json_object_set_new(o, "deadline",
		                    ax_deadline_to_json(&d->deadline.spec));
	if (d->param_decls != NULL) /* absent when none: hashes stay */
		json_object_set_new(o, "param_types", decls_json(d));
	for (size_t i = 0; i < d->n_deps; i++)
		json_array_append_new(
		    deps,
		    json_pack("{s:s, s:s}", "dag", d->deps[i].dag, "mode",
		              ax_dep_mode_name(d->deps[i].mode)));
	json_object_set_new(o, "depends_on_dags", deps);
	for (size_t i = 0; i < d->n_tasks; i++) {
		const ax_task *t  = &d->tasks[i];
		json_t        *tj = spec_json(&t->eff), *dj = json_array();
		if (tj == NULL || dj == NULL) {
			json_decref(tj);
			json_decref(dj);
			json_decref(o);
			json_decref(tasks);
			return NULL;
		}
		json_object_set_new(tj, "name", json_string(t->name));
		json_object_set_new(tj, "template",
		                    str_or_null(t->template_name));
		json_object_set_new(tj, "template_hash",
		                    t->template
		                        ? json_string(t->template->hash)
		                        : json_null());
		for (size_t k = 0; k < t->n_depends; k++)
			json_array_append_new(dj,
			                      json_string(t->depends_on[k]));
		json_object_set_new(tj, "depends_on", dj);
		if (t->deadline.spec.kind != AX_DEADLINE_NONE)
			json_object_set_new(
			    tj, "deadline",
			    ax_deadline_to_json(&t->deadline.spec));
		json_array_append_new(tasks, tj);
	}
	json_object_set_new(o, "tasks", tasks);
	return o;
}

json_t *
ax_template_to_json(const ax_task_template *t)
{
	json_t *o = spec_json(&t->spec);
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "kind", json_string("TaskTemplate"));
	json_object_set_new(o, "name", str_or_null(t->name));
	json_object_set_new(o, "description", str_or_null(t->description));
	/* which fields the template sets matters when tasks merge it */
	json_t                  *set                = json_array();
	static const char *const bits[AX_TF_COUNT_] = { "type",
		                                        "command",
		                                        "priority",
		                                        "channel",
		                                        "worker_group",
		                                        "pool",
		                                        "retries.count",
		                                        "timeout",
		                                        "cpu",
		                                        "memory",
		                                        "shards",
		                                        "routing",
		                                        "retries.backoff",
		                                        "retries.delay",
		                                        "retries.max_delay",
		                                        NULL,
		                                        "preemptible" };
	/* run_as (bit 15) was never listed: templates keep their hashes */
	for (size_t i = 0; set && i < sizeof(bits) / sizeof(bits[0]); i++)
		if (bits[i] != NULL && (t->spec.set & (1u << i)))
			json_array_append_new(set, json_string(bits[i]));
	json_object_set_new(o, "set", set ? set : json_null());
	return o;
}

ax_err
ax_json_hash(const json_t *j, char hex[AX_SHA256_HEX_LEN])
{
	char *s =
	    json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	if (s == NULL)
		return ax_err_set(AX_ENOMEM, "serialising JSON for a hash");
	ax_sha256_hex(s, strlen(s), hex);
	free(s);
	return AX_OK;
}

/* --- JSON back to a DAG -------------------------------------------------- */

/*
 * Reading the stored definition back (ax_dag_from_json). Every accessor
 * records the JSON pointer of the first problem in the reader; the caller
 * turns it into one AX_EPARSE. The form read is exactly what
 * ax_dag_to_json writes, so a DAG survives a round trip with its hash.
 */
typedef struct jreader {
	ax_dagset *set;
	char       where[160]; /* JSON pointer of the first error */
	char       what[160];
	int        bad;
} jreader;

static void
jr_fail(jreader *r, const char *where, const char *fmt, const char *arg)
{
	if (r->bad)
		return;
	r->bad = 1;
	snprintf(r->where, sizeof(r->where), "%s", where);
	snprintf(r->what, sizeof(r->what), fmt, arg);
}

/* String member (NULL allowed when nullable). */
/* ptr/key into p; a path too long for p is cut (it only names a place
 * in an error message). */
static void
jr_join(char *p, size_t n, const char *ptr, const char *key)
{
	if (snprintf(p, n, "%s/%s", ptr, key) >= (int) n)
		p[n - 1] = '\0';
}

static const char *
jr_str(jreader *r, const json_t *o, const char *key, const char *ptr,
       int nullable)
{
	const json_t *v = json_object_get(o, key);
	char          p[160];

	jr_join(p, sizeof(p), ptr, key);
	if ((v == NULL || json_is_null(v)) && nullable)
		return NULL;
	if (!json_is_string(v)) {
		jr_fail(r, p, "expected a string%s",
		        nullable ? " or null" : "");
		return NULL;
	}
	const char *s = ax_dagset_strdup(r->set, json_string_value(v));
	if (s == NULL)
		jr_fail(r, p, "out of memory%s", "");
	return s;
}

static int64_t
jr_int(jreader *r, const json_t *o, const char *key, const char *ptr)
{
	const json_t *v = json_object_get(o, key);
	char          p[160];

	if (!json_is_integer(v)) {
		jr_join(p, sizeof(p), ptr, key);
		jr_fail(r, p, "expected an integer%s", "");
		return 0;
	}
	return (int64_t) json_integer_value(v);
}

/* Duration text as written by dur_json; null gives 0 when nullable. */
static int64_t
jr_dur(jreader *r, const json_t *o, const char *key, const char *ptr,
       int nullable)
{
	const char *s  = jr_str(r, o, key, ptr, nullable);
	int64_t     us = 0;
	char        p[160];

	if (s == NULL)
		return 0;
	if (ax_duration_parse(s, &us) != AX_OK) {
		jr_join(p, sizeof(p), ptr, key);
		jr_fail(r, p, "bad duration '%s'", s);
	}
	return us;
}

/* Index of name in names[0..n) (an enum spelling), or -1 + error. */
static int
jr_enum(jreader *r, const json_t *o, const char *key, const char *ptr,
        const char *(*name_of)(int), int n)
{
	const char *s = jr_str(r, o, key, ptr, 0);
	char        p[160];

	if (s == NULL)
		return 0;
	for (int i = 0; i < n; i++)
		if (strcmp(name_of(i), s) == 0)
			return i;
	jr_join(p, sizeof(p), ptr, key);
	jr_fail(r, p, "unknown value '%s'", s);
	return 0;
}

static const char *
impact_name_i(int i)
{
	return ax_impact_name((ax_impact) i);
}
static const char *
channel_name_i(int i)
{
	return ax_channel_name((ax_channel) i);
}
static const char *
overlap_name_i(int i)
{
	return ax_overlap_name((ax_overlap) i);
}
static const char *
dep_mode_name_i(int i)
{
	return ax_dep_mode_name((ax_dep_mode) i);
}
static const char *
backoff_name_i(int i)
{
	return ax_backoff_name((ax_backoff) i);
}
static const char *
routing_name_i(int i)
{
	return ax_routing_name((ax_routing_kind) i);
}
static const char *
sched_kind_name_i(int i)
{
	return ax_sched_kind_name((ax_sched_kind) i);
}

static const json_t *
jr_obj(jreader *r, const json_t *o, const char *key, const char *ptr)
{
	const json_t *v = json_object_get(o, key);
	char          p[160];

	if (!json_is_object(v)) {
		jr_join(p, sizeof(p), ptr, key);
		jr_fail(r, p, "expected an object%s", "");
		return NULL;
	}
	return v;
}

static const json_t *
jr_arr(jreader *r, const json_t *o, const char *key, const char *ptr)
{
	const json_t *v = json_object_get(o, key);
	char          p[160];

	if (!json_is_array(v)) {
		jr_join(p, sizeof(p), ptr, key);
		jr_fail(r, p, "expected an array%s", "");
		return NULL;
	}
	return v;
}

static void
jr_kvs(jreader *r, const json_t *o, const char *key, const char *ptr,
       ax_kvs *out)
{
	const json_t *m = jr_obj(r, o, key, ptr);
	const char   *k;
	json_t       *v;
	char          p[160];

	memset(out, 0, sizeof(*out));
	if (m == NULL || json_object_size(m) == 0)
		return;
	out->v = ax_dagset_alloc(r->set, json_object_size(m) * sizeof(ax_kv));
	if (out->v == NULL) {
		jr_fail(r, ptr, "out of memory%s", "");
		return;
	}
	json_object_foreach((json_t *) m, k, v)
	{
		const json_t *src = v;
		snprintf(p, sizeof(p), "%s/%s/%s", ptr, key, k);
		memset(&out->v[out->n], 0, sizeof(ax_kv));
		if (json_is_object(v) && json_object_size(v) == 1 &&
		    (src = json_object_get(v, "from_file")) != NULL)
			out->v[out->n].source = AX_KV_FROM_FILE;
		else if (json_is_object(v) && json_object_size(v) == 1 &&
		         (src = json_object_get(v, "from_env")) != NULL)
			out->v[out->n].source = AX_KV_FROM_ENV;
		else
			src = v;
		if (!json_is_string(src)) {
			jr_fail(r, p, "expected a string%s",
			        " or {\"from_file\": PATH} or "
			        "{\"from_env\": NAME}");
			return;
		}
		out->v[out->n].key = ax_dagset_strdup(r->set, k);
		out->v[out->n].value =
		    ax_dagset_strdup(r->set, json_string_value(src));
		out->n++;
	}
}

/* The inverse of decls_json (absent: no declarations). */
static void
jr_decls(jreader *r, const json_t *j, ax_dag *d)
{
	const json_t *m = json_object_get(j, "param_types");
	const char   *k;
	json_t       *v;
	char          p[160];

	if (m == NULL)
		return;
	if (!json_is_object(m)) {
		jr_fail(r, "/param_types", "expected an object%s", "");
		return;
	}
	d->param_decls =
	    ax_dagset_alloc(r->set, (d->params.n + 1) * sizeof(ax_param_decl));
	if (d->param_decls == NULL) {
		jr_fail(r, "/param_types", "out of memory%s", "");
		return;
	}
	json_object_foreach((json_t *) m, k, v)
	{
		size_t i = 0;
		snprintf(p, sizeof(p), "/param_types/%.140s", k);
		while (i < d->params.n && strcmp(d->params.v[i].key, k) != 0)
			i++;
		const char *t = json_string_value(json_object_get(v, "type"));
		const json_t *pat = json_object_get(v, "pattern");
		if (i == d->params.n || t == NULL ||
		    ax_param_type_parse(t, &d->param_decls[i].type) != 0 ||
		    (pat != NULL && !json_is_null(pat) &&
		     !json_is_string(pat))) {
			jr_fail(r, p,
			        "expected {type, pattern} of a declared "
			        "param%s",
			        "");
			return;
		}
		if (json_is_string(pat))
			d->param_decls[i].pattern =
			    ax_dagset_strdup(r->set, json_string_value(pat));
	}
}

/* The inverse of spec_json; every field becomes "set". */
static void
jr_spec(jreader *r, const json_t *o, const char *ptr, ax_task_spec *s)
{
	const json_t *rt, *res, *ro;
	char          p[256];

	ax_task_spec_defaults(s);
	s->set         = (1u << AX_TF_COUNT_) - 1;
	s->type        = jr_str(r, o, "type", ptr, 0);
	s->run_as      = jr_str(r, o, "run_as", ptr, 1);
	s->preemptible = json_is_true(json_object_get(o, "preemptible"));
	s->command     = jr_str(r, o, "command", ptr, 1);
	s->priority    = (int) jr_int(r, o, "priority", ptr);
	s->channel =
	    (ax_channel) jr_enum(r, o, "channel", ptr, channel_name_i, 4);
	s->worker_group = jr_str(r, o, "worker_group", ptr, 1);
	s->pool         = jr_str(r, o, "pool", ptr, 1);
	snprintf(p, sizeof(p), "%s/retries", ptr);
	if ((rt = jr_obj(r, o, "retries", ptr)) != NULL) {
		s->retries.count    = (int) jr_int(r, rt, "count", p);
		s->retries.backoff  = (ax_backoff) jr_enum(r, rt, "backoff", p,
		                                           backoff_name_i, 2);
		s->retries.delay_us = jr_dur(r, rt, "delay", p, 0);
		s->retries.max_delay_us = jr_dur(r, rt, "max_delay", p, 0);
	}
	s->timeout_us = jr_dur(r, o, "timeout", ptr, 1);
	snprintf(p, sizeof(p), "%s/resources", ptr);
	if ((res = jr_obj(r, o, "resources", ptr)) != NULL) {
		s->cpu_milli    = (int) jr_int(r, res, "cpu_milli", p);
		s->memory_bytes = jr_int(r, res, "memory_bytes", p);
		if (json_object_get(res, "named") != NULL)
			jr_kvs(r, res, "named", p, &s->res);
	}
	s->shards = (int) jr_int(r, o, "shards", ptr);
	snprintf(p, sizeof(p), "%s/routing", ptr);
	if ((ro = jr_obj(r, o, "routing", ptr)) != NULL) {
		s->routing.kind = (ax_routing_kind) jr_enum(
		    r, ro, "strategy", p, routing_name_i, 5);
		s->routing.key  = jr_str(r, ro, "key", p, 1);
		s->routing.node = jr_str(r, ro, "node", p, 1);
	}
	jr_kvs(r, o, "params", ptr, &s->params);
	jr_kvs(r, o, "env", ptr, &s->env);
}

/* The deadline member of o (absent: none); see ax_deadline_from_json. */
static void
jr_deadline(jreader *r, const json_t *o, const char *ptr, ax_deadline_spec *s)
{
	char p[120];

	if (ax_deadline_from_json(json_object_get(o, "deadline"), s) == AX_OK)
		return;
	snprintf(p, sizeof(p), "%.100s/deadline", ptr);
	jr_fail(r, p, "%s", ax_err_detail());
}

static void
jr_task(jreader *r, const json_t *tj, const char *ptr, ax_task *t)
{
	const json_t *dj;
	const char   *thash;

	jr_spec(r, tj, ptr, &t->eff);
	t->spec          = t->eff;
	t->name          = jr_str(r, tj, "name", ptr, 0);
	t->template_name = jr_str(r, tj, "template", ptr, 1);
	thash            = jr_str(r, tj, "template_hash", ptr, 1);
	jr_deadline(r, tj, ptr, &t->deadline.spec);
	t->deadline.set = t->deadline.spec.kind != AX_DEADLINE_NONE;
	if (thash != NULL) {
		/* a stand-in carrying the name and hash the JSON records; the
		 * template's own spec is already merged into eff */
		ax_task_template *tpl = ax_dagset_alloc(r->set, sizeof(*tpl));
		if (tpl == NULL || strlen(thash) >= AX_SHA256_HEX_LEN) {
			jr_fail(r, ptr, "bad template_hash%s", "");
			return;
		}
		tpl->name  = t->template_name;
		tpl->valid = 1;
		memcpy(tpl->hash, thash, strlen(thash) + 1);
		ax_task_spec_defaults(&tpl->spec);
		t->template = tpl;
	}
	if ((dj = jr_arr(r, tj, "depends_on", ptr)) == NULL)
		return;
	t->n_depends = json_array_size(dj);
	if (t->n_depends == 0)
		return;
	t->depends_on =
	    ax_dagset_alloc(r->set, t->n_depends * sizeof(const char *));
	t->depends_pos =
	    ax_dagset_alloc(r->set, t->n_depends * sizeof(ax_pos));
	t->deps = ax_dagset_alloc(r->set, t->n_depends * sizeof(size_t));
	if (!t->depends_on || !t->depends_pos || !t->deps) {
		jr_fail(r, ptr, "out of memory%s", "");
		return;
	}
	for (size_t k = 0; k < t->n_depends; k++) {
		const json_t *v = json_array_get(dj, k);
		if (!json_is_string(v)) {
			jr_fail(r, ptr, "depends_on: expected strings%s", "");
			return;
		}
		t->depends_on[k] =
		    ax_dagset_strdup(r->set, json_string_value(v));
	}
}

static void
jr_dag(jreader *r, const json_t *j, ax_dag *d)
{
	const json_t *sched, *conc, *arr;
	char          p[160];

	d->name   = jr_str(r, j, "name", "", 0);
	d->owner  = jr_str(r, j, "owner", "", 1);
	d->impact = (ax_impact) jr_enum(r, j, "impact", "", impact_name_i, 4);
	d->description = jr_str(r, j, "description", "", 1);
	if ((arr = jr_arr(r, j, "tags", "")) != NULL &&
	    json_array_size(arr) > 0) {
		d->n_tags = json_array_size(arr);
		d->tags = ax_dagset_alloc(r->set, d->n_tags * sizeof(char *));
		for (size_t i = 0; d->tags && i < d->n_tags; i++) {
			const json_t *v = json_array_get(arr, i);
			if (!json_is_string(v))
				jr_fail(r, "/tags", "expected strings%s", "");
			else
				d->tags[i] = ax_dagset_strdup(
				    r->set, json_string_value(v));
		}
	}
	if ((sched = jr_obj(r, j, "schedule", "")) != NULL) {
		d->schedule.kind = (ax_sched_kind) jr_enum(
		    r, sched, "kind", "/schedule", sched_kind_name_i, 4);
		d->schedule.cron = jr_str(r, sched, "cron", "/schedule", 1);
		d->schedule.timezone =
		    jr_str(r, sched, "timezone", "/schedule", 1);
		d->schedule.every_us =
		    jr_dur(r, sched, "every", "/schedule", 1);
		d->schedule.at = jr_str(r, sched, "at", "/schedule", 1);
	}
	d->start = jr_str(r, j, "start", "", 1);
	d->end   = jr_str(r, j, "end", "", 1);
	if (!json_is_boolean(json_object_get(j, "catchup")))
		jr_fail(r, "/catchup", "expected a boolean%s", "");
	d->catchup = json_is_true(json_object_get(j, "catchup"));
	if ((conc = jr_obj(r, j, "concurrency", "")) != NULL) {
		d->max_active_runs =
		    (int) jr_int(r, conc, "max_active_runs", "/concurrency");
		d->policy = (ax_overlap) jr_enum(
		    r, conc, "policy", "/concurrency", overlap_name_i, 4);
	}
	ax_task_spec_defaults(&d->defaults);
	jr_kvs(r, j, "params", "", &d->params);
	jr_deadline(r, j, "", &d->deadline.spec);
	d->deadline.set = d->deadline.spec.kind != AX_DEADLINE_NONE;
	jr_decls(r, j, d);
	if ((arr = jr_arr(r, j, "depends_on_dags", "")) != NULL &&
	    json_array_size(arr) > 0) {
		d->n_deps = json_array_size(arr);
		d->deps =
		    ax_dagset_alloc(r->set, d->n_deps * sizeof(ax_dag_dep));
		for (size_t i = 0; d->deps && i < d->n_deps; i++) {
			const json_t *dj = json_array_get(arr, i);
			snprintf(p, sizeof(p), "/depends_on_dags/%zu", i);
			d->deps[i].dag  = jr_str(r, dj, "dag", p, 0);
			d->deps[i].mode = (ax_dep_mode) jr_enum(
			    r, dj, "mode", p, dep_mode_name_i, 2);
		}
	}
	if ((arr = jr_arr(r, j, "tasks", "")) == NULL)
		return;
	d->n_tasks = json_array_size(arr);
	if (d->n_tasks > 0)
		d->tasks =
		    ax_dagset_alloc(r->set, d->n_tasks * sizeof(ax_task));
	for (size_t i = 0; d->tasks && i < d->n_tasks; i++) {
		snprintf(p, sizeof(p), "/tasks/%zu", i);
		jr_task(r, json_array_get(arr, i), p, &d->tasks[i]);
	}
}

/* Resolves depends_on names into indices; 0 or an error in r. */
static void
jr_resolve(jreader *r, ax_dag *d)
{
	char p[160];

	for (size_t i = 0; i < d->n_tasks && !r->bad; i++) {
		ax_task *t = &d->tasks[i];
		for (size_t k = 0; k < t->n_depends; k++) {
			long ix = ax_dag_task_index(d, t->depends_on[k]);
			if (ix < 0) {
				snprintf(p, sizeof(p),
				         "/tasks/%zu/depends_on/%zu", i, k);
				jr_fail(r, p, "unknown task '%s'",
				        t->depends_on[k]);
				return;
			}
			t->deps[k] = (size_t) ix;
		}
	}
}

ax_err
ax_dag_from_json(ax_dagset *set, const json_t *j, ax_dag **out)
{
	jreader r = { .set = set };
	ax_dag *d;
	json_t *back;
	ax_err  rv;

	*out = NULL;
	if (!json_is_object(j))
		return ax_err_set(AX_EPARSE,
		                  "DAG definition: expected a JSON "
		                  "object");
	if (!json_is_string(json_object_get(j, "kind")) ||
	    strcmp(json_string_value(json_object_get(j, "kind")), "DAG") != 0)
		return ax_err_set(AX_EPARSE,
		                  "DAG definition /kind: expected \"DAG\"");
	if ((d = ax_dagset_add_dag(set)) == NULL)
		return ax_err_set(AX_ENOMEM, "DAG definition");
	jr_dag(&r, j, d);
	if (!r.bad)
		jr_resolve(&r, d);
	if (r.bad) {
		set->n_dags--; /* drop the half-built DAG (arena keeps bytes)
		                */
		return ax_err_set(AX_EPARSE, "DAG definition %s: %s",
		                  r.where[0] ? r.where : "/", r.what);
	}
	if ((rv = ax_dag_toposort(set, d)) != AX_OK) {
		set->n_dags--;
		return rv;
	}
	if ((back = ax_dag_to_json(d)) == NULL) {
		set->n_dags--;
		return ax_err_set(AX_ENOMEM, "DAG definition");
	}
	rv = ax_json_hash(back, d->hash);
	json_decref(back);
	if (rv != AX_OK) {
		set->n_dags--;
		return rv;
	}
	d->valid = 1;
	*out     = d;
	return AX_OK;
}
