/*
 * dag_validate.c - semantic validation, template resolution and hashing
 * of a DAG set (see dag_validate.h).
 *
 * Invariants: every error names a position in the file where the user
 * must change something; checks keep going after an error so one run
 * lists everything. Workload: per submission, O(tasks + edges) per DAG
 * apart from the topological sort (dag.c).
 */
#include "dag_validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "dag_params.h"
#include "deadline.h"
#include "render.h"
#include "resources.h"
#include "suggest.h"
#include "tz.h"

#define ERR(set, pos, ...) ax_dagset_error((set), (pos), __VA_ARGS__)

typedef struct vctx {
	ax_dagset   *set;
	ax_tz_cache *tzc;
} vctx;

/* --- names ------------------------------------------------------------- */

static int
word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* DAG and template names: dot-separated words of [A-Za-z0-9_-]. */
static int
valid_dotted(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 200)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (i == 0 || i + 1 == n || s[i + 1] == '.')
				return 0;
		} else if (!word_char(s[i])) {
			return 0;
		}
	}
	return s[0] != '-';
}

int
ax_dag_name_valid(const char *s)
{
	return s != NULL && valid_dotted(s);
}

static int
valid_task_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 128 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!word_char(s[i]))
			return 0;
	return 1;
}

static int
valid_ident(const char *s)
{
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      s[0] == '_'))
		return 0;
	for (const char *p = s; *p; p++)
		if (!word_char(*p) || *p == '-')
			return 0;
	return strlen(s) <= 128;
}

/* --- effective specs -------------------------------------------------------
 */

static int
merge_kvs(ax_dagset *set, ax_kvs *dst, const ax_kvs *src)
{
	if (src->n == 0)
		return 0;
	ax_kv *v = ax_dagset_alloc(set, (dst->n + src->n) * sizeof(ax_kv));
	if (v == NULL)
		return -1;
	size_t n = dst->n;
	if (n > 0)
		memcpy(v, dst->v, n * sizeof(ax_kv));
	for (size_t i = 0; i < src->n; i++) {
		size_t k = 0;
		while (k < n && strcmp(v[k].key, src->v[i].key) != 0)
			k++;
		v[k] = src->v[i];
		if (k == n)
			n++;
	}
	dst->v = v;
	dst->n = n;
	return 0;
}

/* Copies the fields src sets over dst. */
static int
merge_spec(ax_dagset *set, ax_task_spec *dst, const ax_task_spec *src)
{
	uint32_t b = src->set;
	if (b & AX_TF_TYPE)
		dst->type = src->type;
	if (b & AX_TF_COMMAND) {
		dst->command     = src->command;
		dst->command_pos = src->command_pos;
	}
	if (b & AX_TF_PRIORITY)
		dst->priority = src->priority;
	if (b & AX_TF_CHANNEL)
		dst->channel = src->channel;
	if (b & AX_TF_GROUP)
		dst->worker_group = src->worker_group;
	if (b & AX_TF_POOL)
		dst->pool = src->pool;
	if (b & AX_TF_RETRY_COUNT)
		dst->retries.count = src->retries.count;
	if (b & AX_TF_RETRY_BACKOFF)
		dst->retries.backoff = src->retries.backoff;
	if (b & AX_TF_RETRY_DELAY)
		dst->retries.delay_us = src->retries.delay_us;
	if (b & AX_TF_RETRY_MAX)
		dst->retries.max_delay_us = src->retries.max_delay_us;
	if (b & AX_TF_TIMEOUT)
		dst->timeout_us = src->timeout_us;
	if (b & AX_TF_CPU)
		dst->cpu_milli = src->cpu_milli;
	if (b & AX_TF_MEMORY)
		dst->memory_bytes = src->memory_bytes;
	if (b & AX_TF_SHARDS)
		dst->shards = src->shards;
	if (b & AX_TF_ROUTING)
		dst->routing = src->routing;
	if (b & AX_TF_RUN_AS) {
		dst->run_as     = src->run_as;
		dst->run_as_pos = src->run_as_pos;
	}
	if (b & AX_TF_PREEMPTIBLE)
		dst->preemptible = src->preemptible;
	dst->set |= b;
	if (merge_kvs(set, &dst->params, &src->params) != 0 ||
	    merge_kvs(set, &dst->env, &src->env) != 0 ||
	    merge_kvs(set, &dst->res, &src->res) != 0)
		return -1;
	return 0;
}

/* --- template variables ------------------------------------------------- */

typedef struct rchk {
	ax_dagset  *set;
	ax_pos      pos; /* of the value's first character */
	const char *value;
	int         at; /* 1: point into the value; 0: at pos */
	int         params_only;
	const char *prefix; /* prepended to each message */
} rchk;

static void
on_render_err(void *arg, size_t off, const char *msg)
{
	rchk *r = arg;
	if (r->params_only &&
	    strncmp(msg, "unknown template variable 'params.", 34) != 0)
		return;
	ax_pos p = r->at ? ax_pos_at(r->pos, r->value, off) : r->pos;
	ERR(r->set, p, "%s%s", r->prefix, msg);
}

typedef struct scope {
	const char **names;
	size_t       n;
	int          any;
} scope;

static void
check_text(ax_dagset *set, const scope *sc, const char *value, ax_pos pos,
           const char *what, const ax_task *via_tpl)
{
	char prefix[256] = "";
	rchk r           = { set, pos, value, 1, 0, prefix };

	if (value == NULL)
		return;
	if (via_tpl != NULL) {
		/* a template's text, checked against this task's params:
		 * report at the task's `template:` line */
		snprintf(prefix, sizeof(prefix),
		         "%s of template '%s' (%s:%u): ", what,
		         via_tpl->template_name, pos.file ? pos.file : "?",
		         pos.line);
		r.pos         = via_tpl->template_pos;
		r.at          = 0;
		r.params_only = 1;
	} else if (what[0] != '\0') {
		snprintf(prefix, sizeof(prefix), "%s: ", what);
	}
	ax_render_check(value, sc->names, sc->n, sc->any, on_render_err, &r);
}

/* Checks the templated strings of one layer of a task. */
static void
check_layer(ax_dagset *set, const scope *sc, const ax_task_spec *s,
            const ax_task *via_tpl)
{
	char what[192];
	if (s->set & AX_TF_COMMAND)
		check_text(set, sc, s->command, s->command_pos, "command",
		           via_tpl);
	for (size_t i = 0; i < s->env.n; i++) {
		if (s->env.v[i].source != AX_KV_VALUE)
			continue; /* a file or variable name, not a template */
		snprintf(what, sizeof(what), "env %s", s->env.v[i].key);
		check_text(set, sc, s->env.v[i].value, s->env.v[i].pos, what,
		           via_tpl);
	}
	/* params are rendered before the text that uses them, so they
	 * may not refer to other params */
	scope none = { NULL, 0, 0 };
	for (size_t i = 0; i < s->params.n; i++) {
		snprintf(what, sizeof(what), "param %s", s->params.v[i].key);
		check_text(set, &none, s->params.v[i].value,
		           s->params.v[i].pos, what, via_tpl);
	}
}

static void
check_kv_names(ax_dagset *set, const ax_kvs *k, int env)
{
	for (size_t i = 0; i < k->n; i++) {
		const ax_kv *kv = &k->v[i];
		if (!valid_ident(kv->key))
			ERR(set, kv->key_pos,
			    "%s name '%s' is not valid; use letters, digits "
			    "and '_', not starting with a digit",
			    env ? "env" : "param", kv->key);
		else if (env && strncmp(kv->key, "AX_", 3) == 0)
			ERR(set, kv->key_pos,
			    "env name '%s' is reserved: AX sets the AX_* "
			    "variables itself",
			    kv->key);
	}
}

/* Patterns compile; a default that is not a template fits its type. */
static void
check_param_decls(ax_dagset *set, const ax_dag *d)
{
	char why[300];

	for (size_t i = 0; d->param_decls != NULL && i < d->params.n; i++) {
		const ax_param_decl *pd = &d->param_decls[i];
		const ax_kv         *kv = &d->params.v[i];
		if (pd->pattern != NULL &&
		    ax_param_pattern_check(pd->pattern, why, sizeof(why)) !=
		        0) {
			ERR(set, pd->pattern_pos, "params.%s: %s", kv->key,
			    why);
			continue;
		}
		if (strstr(kv->value, "{{") == NULL &&
		    ax_param_text_check(pd, kv->value, why, sizeof(why)) != 0)
			ERR(set, kv->pos,
			    "params.%s: the default '%s' does not fit its "
			    "declaration: %s",
			    kv->key, kv->value, why);
	}
}

static void
check_spec_names(ax_dagset *set, const ax_task_spec *s, ax_pos where)
{
	check_kv_names(set, &s->params, 0);
	check_kv_names(set, &s->env, 1);
	(void) where;
}

/* --- templates ------------------------------------------------------------
 */

static void
validate_templates(vctx *v)
{
	ax_dagset *set = v->set;
	scope      any = { NULL, 0, 1 };

	for (size_t i = 0; i < set->n_templates; i++) {
		ax_task_template *t      = set->templates[i];
		size_t            before = set->n_diags + set->n_dropped;
		if (t->name == NULL)
			continue;
		if (!valid_dotted(t->name))
			ERR(set, t->name_pos,
			    "template name '%s' is not valid; use words of "
			    "letters, digits, '_' and '-' separated by dots",
			    t->name);
		for (size_t k = 0; k < i; k++) {
			ax_task_template *o = set->templates[k];
			if (o->name && strcmp(o->name, t->name) == 0) {
				ERR(set, t->name_pos,
				    "duplicate TaskTemplate '%s' (first "
				    "defined "
				    "at %s:%u)",
				    t->name, o->pos.file, o->name_pos.line);
				break;
			}
		}
		if ((t->spec.set & AX_TF_TYPE) &&
		    strcmp(t->spec.type, "bash") != 0 &&
		    strcmp(t->spec.type, "noop") != 0)
			ERR(set, t->pos,
			    "task type '%s' is not supported yet; supported: "
			    "bash, noop",
			    t->spec.type);
		check_spec_names(set, &t->spec, t->pos);
		check_layer(set, &any, &t->spec, NULL);
		if (set->n_diags + set->n_dropped != before)
			t->valid = 0;
		json_t *j = ax_template_to_json(t);
		if (j != NULL) {
			ax_json_hash(j, t->hash);
			json_decref(j);
		}
	}
}

/* --- schedule -------------------------------------------------------------
 */

static void
validate_schedule(vctx *v, ax_dag *d)
{
	ax_dagset        *set   = v->set;
	ax_schedule_spec *s     = &d->schedule;
	const ax_tz      *tz    = NULL;
	int64_t           start = 0, end = 0;
	int               have_start = 0, have_end = 0;

	if (s->timezone == NULL) {
		s->timezone = "UTC";
	} else if (ax_tz_cache_get(v->tzc, s->timezone, &tz) != AX_OK) {
		ERR(set, s->tz_pos, "%s", ax_err_detail());
		tz = NULL;
	}
	if (tz == NULL) /* still check the syntax of start, end and at */
		ax_tz_cache_get(v->tzc, "UTC", &tz);
	if (s->kind == AX_SCHED_CRON) {
		ax_cron    *c = NULL;
		ax_cron_err ce;
		memset(&ce, 0, sizeof(ce));
		if (ax_cron_parse(s->cron, &c, &ce) != AX_OK)
			ERR(set, ax_pos_at(s->cron_pos, s->cron, ce.offset),
			    "invalid cron expression '%s': %s", s->cron,
			    ce.msg[0] ? ce.msg : ax_err_detail());
		ax_cron_free(c);
	}
	if (s->kind == AX_SCHED_AT && tz != NULL) {
		int64_t at;
		if (ax_tz_parse_iso8601(s->at, tz, &at) != AX_OK)
			ERR(set, s->at_pos, "'at': %s", ax_err_detail());
	}
	if (d->start != NULL && tz != NULL) {
		if (ax_tz_parse_iso8601(d->start, tz, &start) != AX_OK)
			ERR(set, d->start_pos, "'start': %s", ax_err_detail());
		else
			have_start = 1;
	}
	if (d->end != NULL && tz != NULL) {
		if (ax_tz_parse_iso8601(d->end, tz, &end) != AX_OK)
			ERR(set, d->end_pos, "'end': %s", ax_err_detail());
		else
			have_end = 1;
	}
	if (have_start && have_end && end <= start)
		ERR(set, d->end_pos, "'end' (%s) is not after 'start' (%s)",
		    d->end, d->start);
}

/* --- tasks ----------------------------------------------------------------
 */

static const char *const *
task_names(ax_dagset *set, const ax_dag *d)
{
	const char **n =
	    ax_dagset_alloc(set, (d->n_tasks + 1) * sizeof(char *));
	for (size_t i = 0; n && i < d->n_tasks; i++)
		n[i] = d->tasks[i].name ? d->tasks[i].name : "";
	return n;
}

static const char *const *
template_names(ax_dagset *set)
{
	const char **n =
	    ax_dagset_alloc(set, (set->n_templates + 1) * sizeof(char *));
	for (size_t i = 0; n && i < set->n_templates; i++)
		n[i] = set->templates[i]->name ? set->templates[i]->name : "";
	return n;
}

static void
resolve_task(vctx *v, ax_dag *d, ax_task *t)
{
	ax_dagset *set = v->set;

	ax_task_spec_defaults(&t->eff);
	merge_kvs(set, &t->eff.params, &d->params);
	merge_spec(set, &t->eff, &d->defaults);
	if (t->template_name != NULL) {
		t->template = ax_dagset_find_template(set, t->template_name);
		if (t->template == NULL) {
			const char *sug =
			    ax_suggest(t->template_name, template_names(set),
			               set->n_templates);
			ERR(set, t->template_pos,
			    "task '%s' uses unknown template '%s'%s%s%s",
			    t->name ? t->name : "?", t->template_name,
			    sug ? "; did you mean '" : "", sug ? sug : "",
			    sug ? "'?" : "");
		} else {
			merge_spec(set, &t->eff, &t->template->spec);
			if (!t->template->valid)
				d->valid = 0; /* its errors are reported at
				                 the template */
		}
	}
	merge_spec(set, &t->eff, &t->spec);
	/* noop: completes inside the worker without a process (benchmarks) */
	if (strcmp(t->eff.type, "bash") != 0 &&
	    strcmp(t->eff.type, "noop") != 0)
		ERR(set, t->name_pos.line ? t->name_pos : t->pos,
		    "task type '%s' is not supported yet; supported: bash, "
		    "noop",
		    t->eff.type);
	if (t->eff.command == NULL &&
	    (t->template_name == NULL || t->template))
		ERR(set, t->name_pos.line ? t->name_pos : t->pos,
		    "task '%s' has no command; set 'command' or use a "
		    "'template' that has one",
		    t->name ? t->name : "?");
	/* nothing ranks above P0: the flag could never apply, and a
	 * reader would believe a critical link may be stopped */
	if (t->eff.preemptible && d->impact == AX_IMPACT_P0)
		ERR(set, t->name_pos.line ? t->name_pos : t->pos,
		    "task '%s' is preemptible but its DAG has impact P0, "
		    "which no tier can preempt; remove 'preemptible' or "
		    "lower the DAG's impact",
		    t->name ? t->name : "?");
	if (t->eff.res.n > AX_RES_MAX)
		ERR(set, t->name_pos.line ? t->name_pos : t->pos,
		    "task '%s' needs %zu named resources with its defaults "
		    "and template; at most %d are allowed (merge some)",
		    t->name ? t->name : "?", t->eff.res.n, AX_RES_MAX);
	check_spec_names(set, &t->spec, t->pos);
}

static void
check_task_texts(ax_dagset *set, const ax_dag *d, const ax_task *t)
{
	scope sc;
	sc.n     = t->eff.params.n;
	sc.any   = 0;
	sc.names = ax_dagset_alloc(set, (sc.n + 1) * sizeof(char *));
	if (sc.names == NULL)
		return;
	for (size_t i = 0; i < sc.n; i++)
		sc.names[i] = t->eff.params.v[i].key;
	check_layer(set, &sc, &d->defaults, NULL);
	if (t->template != NULL)
		check_layer(set, &sc, &t->template->spec, t);
	check_layer(set, &sc, &t->spec, NULL);
	if (t->spec.set & AX_TF_ROUTING && t->spec.routing.key != NULL) {
		ax_pos p = t->pos;
		check_text(set, &sc, t->spec.routing.key, p, "routing key",
		           NULL);
	}
}

static void
resolve_deps(ax_dagset *set, ax_dag *d, const char *const *names)
{
	for (size_t i = 0; i < d->n_tasks; i++) {
		ax_task *t = &d->tasks[i];
		size_t   n = 0;
		t->deps =
		    ax_dagset_alloc(set, (t->n_depends + 1) * sizeof(size_t));
		if (t->deps == NULL)
			return;
		for (size_t k = 0; k < t->n_depends; k++) {
			const char *dn  = t->depends_on[k];
			long        idx = ax_dag_task_index(d, dn);
			int         dup = 0;
			for (size_t j = 0; j < k; j++)
				dup |= strcmp(t->depends_on[j], dn) == 0;
			if (dup) {
				ERR(set, t->depends_pos[k],
				    "task '%s' lists '%s' twice in depends_on",
				    t->name ? t->name : "?", dn);
			} else if (idx < 0) {
				const char *sug =
				    ax_suggest(dn, names, d->n_tasks);
				ERR(set, t->depends_pos[k],
				    "task '%s' depends on unknown task "
				    "'%s'%s%s%s",
				    t->name ? t->name : "?", dn,
				    sug ? "; did you mean '" : "",
				    sug ? sug : "", sug ? "'?" : "");
			} else if ((size_t) idx == i) {
				ERR(set, t->depends_pos[k],
				    "dependency cycle: %s -> %s (task '%s' "
				    "depends on itself)",
				    dn, dn, dn);
			} else {
				t->deps[n++] = (size_t) idx;
			}
		}
		/* only resolved edges count for cycles and order */
		t->n_depends = n;
		for (size_t k = 0, w = 0; k < n; k++, w++)
			t->depends_on[w] = d->tasks[t->deps[k]].name;
	}
}

/* --- cycles -----------------------------------------------------------------
 */

typedef struct cyc {
	ax_dagset *set;
	ax_dag    *dag;
	uint8_t   *color; /* 0 white, 1 on the stack, 2 done */
	size_t    *stack;
	size_t     depth;
} cyc;

static void
report_cycle(cyc *c, size_t from)
{
	/* stack[from..depth-1] is a chain of "depends on"; in run order the
	 * cycle goes the other way */
	size_t  n    = c->depth - from;
	size_t *flow = calloc(n, sizeof(size_t));
	size_t  best = 0;
	char    msg[400];
	size_t  len = 0;

	if (flow == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		flow[i] = c->stack[c->depth - 1 - i];
	for (size_t i = 1; i < n; i++)
		if (flow[i] < flow[best])
			best = i;
	msg[0] = '\0';
	for (size_t i = 0; i <= n && len < sizeof(msg) - 1; i++) {
		const ax_task *t = &c->dag->tasks[flow[(best + i) % n]];
		len += (size_t) snprintf(msg + len, sizeof(msg) - len, "%s%s",
		                         i ? " -> " : "", t->name);
	}
	const ax_task *first = &c->dag->tasks[flow[best]];
	ERR(c->set, first->name_pos, "dependency cycle: %s", msg);
	free(flow);
}

static void
dfs(cyc *c, size_t u)
{
	c->color[u]          = 1;
	c->stack[c->depth++] = u;
	const ax_task *t     = &c->dag->tasks[u];
	for (size_t k = 0; k < t->n_depends; k++) {
		size_t w = t->deps[k];
		if (c->color[w] == 0) {
			dfs(c, w);
		} else if (c->color[w] == 1) {
			size_t from = c->depth;
			while (from > 0 && c->stack[from - 1] != w)
				from--;
			report_cycle(c, from - 1);
		}
	}
	c->depth--;
	c->color[u] = 2;
}

static int
find_cycles(ax_dagset *set, ax_dag *d)
{
	cyc    c      = { set, d, NULL, NULL, 0 };
	size_t before = set->n_diags;
	c.color       = calloc(d->n_tasks + 1, 1);
	c.stack       = calloc(d->n_tasks + 1, sizeof(size_t));
	if (c.color && c.stack)
		for (size_t i = 0; i < d->n_tasks; i++)
			if (c.color[i] == 0)
				dfs(&c, i);
	free(c.color);
	free(c.stack);
	return set->n_diags != before;
}

/* --- deadlines ------------------------------------------------------------
 */

/*
 * Checks a `deadline:` as written (of task, or of the DAG when NULL) and
 * fills dl->spec. Exactly one of `after` and `at`; `day` goes with `at`
 * only. A key whose value dag_yaml.c already refused is not reported
 * again.
 */
static void
validate_deadline(ax_dagset *set, ax_deadline_decl *dl, const char *task)
{
	int32_t sec;
	char    whom[96];

	dl->spec = (ax_deadline_spec) { 0 };
	if (!dl->set)
		return;
	if (task != NULL)
		snprintf(whom, sizeof(whom), "task '%.64s'", task);
	else
		snprintf(whom, sizeof(whom), "the DAG");
	if (dl->at != NULL && (dl->has_after || dl->after_pos.line)) {
		ERR(set, dl->pos,
		    "the deadline of %s has both 'after' and 'at'; keep one: "
		    "{after: 2h} (after the interval ends) or {at: "
		    "\"08:00\", day: 1} (a wall-clock time)",
		    whom);
		return;
	}
	if (dl->at == NULL && dl->day_pos.line) {
		ERR(set, dl->day_pos,
		    "'day' of the deadline of %s needs 'at', e.g. {at: "
		    "\"08:00\", day: 1}",
		    whom);
		return;
	}
	if (dl->at == NULL && !dl->after_pos.line) {
		ERR(set, dl->pos,
		    "the deadline of %s needs 'after' or 'at', e.g. {after: "
		    "2h} or {at: \"08:00\", day: 1}",
		    whom);
		return;
	}
	if (dl->at == NULL) {
		if (dl->has_after)
			dl->spec = (ax_deadline_spec) {
				.kind     = AX_DEADLINE_AFTER,
				.after_us = dl->after_us,
			};
		return;
	}
	if (ax_deadline_parse_at(dl->at, &sec) != AX_OK) {
		ERR(set, dl->at_pos, "deadline 'at': %s", ax_err_detail());
		return;
	}
	if (dl->day_pos.line && !dl->has_day)
		return;
	dl->spec = (ax_deadline_spec) {
		.kind   = AX_DEADLINE_AT,
		.at_sec = sec,
		.day    = dl->has_day ? dl->day : 1,
	};
}

/* --- DAGs -------------------------------------------------------------------
 */

static void
validate_dag(vctx *v, ax_dag *d, size_t index)
{
	ax_dagset *set    = v->set;
	size_t     before = set->n_diags + set->n_dropped;

	if (d->name != NULL) {
		if (!valid_dotted(d->name))
			ERR(set, d->name_pos,
			    "DAG name '%s' is not valid; use words of "
			    "letters, "
			    "digits, '_' and '-' separated by dots, e.g. "
			    "ods.orders.daily",
			    d->name);
		for (size_t k = 0; k < index; k++) {
			ax_dag *o = set->dags[k];
			if (o->name && strcmp(o->name, d->name) == 0) {
				ERR(set, d->name_pos,
				    "duplicate DAG '%s' (first defined at "
				    "%s:%u)",
				    d->name, o->pos.file, o->name_pos.line);
				break;
			}
		}
	}
	validate_schedule(v, d);
	validate_deadline(set, &d->deadline, NULL);
	for (size_t i = 0; i < d->n_deps; i++) {
		const ax_dag_dep *dd = &d->deps[i];
		if (!valid_dotted(dd->dag))
			ERR(set, dd->pos, "'%s' is not a valid DAG name",
			    dd->dag);
		else if (d->name && strcmp(dd->dag, d->name) == 0)
			ERR(set, dd->pos, "DAG '%s' depends on itself",
			    d->name);
	}
	check_kv_names(set, &d->params, 0);
	check_param_decls(set, d);
	check_spec_names(set, &d->defaults, d->pos);
	if (d->n_tasks == 0 && d->tasks != NULL)
		ERR(set, d->pos, "DAG '%s' has no tasks",
		    d->name ? d->name : "?");

	const char *const *names = task_names(set, d);
	for (size_t i = 0; i < d->n_tasks; i++) {
		ax_task *t = &d->tasks[i];
		if (t->name == NULL)
			continue;
		if (!valid_task_name(t->name))
			ERR(set, t->name_pos,
			    "task name '%s' is not valid; use letters, "
			    "digits, '_' and '-'",
			    t->name);
		for (size_t k = 0; k < i; k++)
			if (d->tasks[k].name &&
			    strcmp(d->tasks[k].name, t->name) == 0) {
				ERR(set, t->name_pos,
				    "duplicate task name '%s' (first defined "
				    "at line %u)",
				    t->name, d->tasks[k].name_pos.line);
				break;
			}
		resolve_task(v, d, t);
		validate_deadline(set, &t->deadline, t->name);
	}
	for (size_t i = 0; i < d->n_tasks; i++)
		check_task_texts(set, d, &d->tasks[i]);
	if (names != NULL)
		resolve_deps(set, d, names);
	if (!find_cycles(set, d))
		ax_dag_toposort(set, d);
	if (set->n_diags + set->n_dropped != before)
		d->valid = 0;
	if (d->valid) {
		json_t *j = ax_dag_to_json(d);
		if (j != NULL) {
			ax_json_hash(j, d->hash);
			json_decref(j);
		}
	}
}

ax_err
ax_dagset_validate(ax_dagset *set)
{
	vctx   v = { set, NULL };
	ax_err rv;

	if ((rv = ax_tz_cache_new(&v.tzc)) != AX_OK)
		return rv;
	validate_templates(&v);
	for (size_t i = 0; i < set->n_dags; i++)
		validate_dag(&v, set->dags[i], i);
	ax_tz_cache_free(v.tzc);
	ax_dagset_sort_diags(set);
	return ax_dagset_error_count(set, NULL) ? AX_EINVAL : AX_OK;
}

/* --- `| raw` uses ---------------------------------------------------------
 */

typedef struct rawctx {
	ax_dag_raw_fn fn;
	void         *arg;
	const char   *owner; /* "DAG 'x' task 'y'" or "template 'z'" */
	const char   *field;
	const char   *value;
	ax_pos        pos;
} rawctx;

static void
on_raw(void *arg, size_t off, const char *msg)
{
	rawctx *r = arg;
	char    what[512];
	snprintf(what, sizeof(what), "%s %s: %s", r->owner, r->field, msg);
	r->fn(r->arg, ax_pos_at(r->pos, r->value, off), what);
}

static void
raw_text(rawctx *r, const char *field, const char *value, ax_pos pos)
{
	if (value == NULL)
		return;
	r->field = field;
	r->value = value;
	r->pos   = pos;
	ax_render_raw_uses(value, on_raw, r);
}

static void
raw_spec(rawctx *r, const ax_task_spec *s)
{
	char field[192];
	if (s->set & AX_TF_COMMAND)
		raw_text(r, "command", s->command, s->command_pos);
	for (size_t i = 0; i < s->env.n; i++) {
		snprintf(field, sizeof(field), "env %s", s->env.v[i].key);
		raw_text(r, field, s->env.v[i].value, s->env.v[i].pos);
	}
	for (size_t i = 0; i < s->params.n; i++) {
		snprintf(field, sizeof(field), "param %s", s->params.v[i].key);
		raw_text(r, field, s->params.v[i].value, s->params.v[i].pos);
	}
}

void
ax_dagset_raw_uses(const ax_dagset *set, ax_dag_raw_fn fn, void *arg)
{
	rawctx r = { fn, arg, NULL, NULL, NULL, { 0 } };
	char   owner[384];

	for (size_t i = 0; i < set->n_templates; i++) {
		snprintf(owner, sizeof(owner), "template '%s'",
		         set->templates[i]->name);
		r.owner = owner;
		raw_spec(&r, &set->templates[i]->spec);
	}
	for (size_t i = 0; i < set->n_dags; i++) {
		const ax_dag *d = set->dags[i];
		snprintf(owner, sizeof(owner), "DAG '%s' defaults", d->name);
		r.owner = owner;
		raw_spec(&r, &d->defaults);
		for (size_t k = 0; k < d->params.n; k++) {
			char field[192];
			snprintf(owner, sizeof(owner), "DAG '%s'", d->name);
			snprintf(field, sizeof(field), "param %s",
			         d->params.v[k].key);
			raw_text(&r, field, d->params.v[k].value,
			         d->params.v[k].pos);
		}
		for (size_t k = 0; k < d->n_tasks; k++) {
			snprintf(owner, sizeof(owner), "DAG '%s' task '%s'",
			         d->name, d->tasks[k].name);
			raw_spec(&r, &d->tasks[k].spec);
		}
	}
}
