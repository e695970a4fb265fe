/*
 * flow_util.c - string map, instance keys and events of the flow actors
 * (see flow_util.h).
 */
#include "flow_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"

/* ---------------------------------------------------------------------- */
/* map */

typedef struct map_node {
	struct map_node *next;
	uint64_t         hash;
	void            *val;
	char             key[]; /* NUL-terminated */
} map_node;

struct ax_flow_map {
	map_node **b;
	size_t     nb; /* power of two */
	size_t     n;
};

/* FNV-1a, 64 bit: short keys, no adversary (keys come from our DAGs). */
static uint64_t
map_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s != '\0'; s++) {
		h ^= (unsigned char) *s;
		h *= 1099511628211ULL;
	}
	return h;
}

ax_err
ax_flow_map_new(ax_flow_map **out)
{
	ax_flow_map *m = calloc(1, sizeof(*m));
	if (m == NULL || (m->b = calloc(64, sizeof(*m->b))) == NULL) {
		free(m);
		return ax_err_set(AX_ENOMEM, "flow map: out of memory");
	}
	m->nb = 64;
	*out  = m;
	return AX_OK;
}

void
ax_flow_map_free(ax_flow_map *m, void (*free_val)(void *))
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->nb; i++)
		for (map_node *x = m->b[i], *nx; x != NULL; x = nx) {
			nx = x->next;
			if (free_val != NULL)
				free_val(x->val);
			free(x);
		}
	free(m->b);
	free(m);
}

static map_node **
map_slot(const ax_flow_map *m, const char *key, uint64_t h)
{
	map_node **p = &m->b[h & (m->nb - 1)];
	for (; *p != NULL; p = &(*p)->next)
		if ((*p)->hash == h && strcmp((*p)->key, key) == 0)
			return p;
	return p;
}

void *
ax_flow_map_get(const ax_flow_map *m, const char *key)
{
	map_node **p = map_slot(m, key, map_hash(key));
	return *p != NULL ? (*p)->val : NULL;
}

static void
map_grow(ax_flow_map *m)
{
	size_t     nb = m->nb * 2;
	map_node **b  = calloc(nb, sizeof(*b));
	if (b == NULL)
		return; /* keep working with longer chains */
	for (size_t i = 0; i < m->nb; i++)
		for (map_node *x = m->b[i], *nx; x != NULL; x = nx) {
			nx              = x->next;
			map_node **slot = &b[x->hash & (nb - 1)];
			x->next         = *slot;
			*slot           = x;
		}
	free(m->b);
	m->b  = b;
	m->nb = nb;
}

ax_err
ax_flow_map_put(ax_flow_map *m, const char *key, void *val)
{
	uint64_t   h = map_hash(key);
	map_node **p = map_slot(m, key, h);
	if (*p != NULL) {
		(*p)->val = val;
		return AX_OK;
	}
	size_t    kl = strlen(key);
	map_node *x  = malloc(sizeof(*x) + kl + 1);
	if (x == NULL)
		return ax_err_set(AX_ENOMEM, "flow map: out of memory");
	memcpy(x->key, key, kl + 1);
	x->hash = h;
	x->val  = val;
	x->next = NULL;
	*p      = x;
	if (++m->n > m->nb)
		map_grow(m);
	return AX_OK;
}

void *
ax_flow_map_del(ax_flow_map *m, const char *key)
{
	map_node **p = map_slot(m, key, map_hash(key));
	map_node  *x = *p;
	if (x == NULL)
		return NULL;
	void *val = x->val;
	*p        = x->next;
	free(x);
	m->n--;
	return val;
}

size_t
ax_flow_map_count(const ax_flow_map *m)
{
	return m->n;
}

void
ax_flow_map_each(const ax_flow_map *m,
                 void (*fn)(void *arg, const char *key, void *val), void *arg)
{
	for (size_t i = 0; i < m->nb; i++)
		for (map_node *x = m->b[i]; x != NULL; x = x->next)
			fn(arg, x->key, x->val);
}

/* ---------------------------------------------------------------------- */
/* keys and events */

int
ax_flow_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void  *n;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 32;
	while (ncap < need)
		ncap *= 2;
	if ((n = realloc(*arr, ncap * elem)) == NULL)
		return -1;
	*arr = n;
	*cap = ncap;
	return 0;
}

char *
ax_flow_key(const Ax__InstanceRef *ref, char *buf, size_t len)
{
	snprintf(buf, len, "%s\x1f%s\x1f%lld\x1f%d", ref->dag, ref->task,
	         (long long) ref->logical_time_us, ref->shard_index);
	return buf;
}

void
ax_flow_event_init(ax_flow_event *e, const char *source, const char *type,
                   const char *reason, const Ax__InstanceRef *ref,
                   const char *run_id, int32_t attempt, const char *trace,
                   const char *payload)
{
	Ax__Event init = AX__EVENT__INIT;

	e->ev         = init;
	e->ev.id      = ax_uuid_v7(e->id);
	e->ev.type    = (char *) type;
	e->ev.time_us = ax_clock_utc_us();
	e->ev.source  = (char *) source;
	if (reason != NULL)
		e->ev.reason = (char *) reason;
	if (ref != NULL) {
		e->ev.dag             = ref->dag;
		e->ev.dag_version_id  = ref->dag_version_id;
		e->ev.dag_run_id      = ref->dag_run_id;
		e->ev.task            = ref->task;
		e->ev.instance_id     = ref->instance_id;
		e->ev.logical_time_us = ref->logical_time_us;
		e->ev.shard_index     = ref->shard_index;
		e->ev.shard_total     = ref->shard_total;
	}
	if (run_id != NULL)
		e->ev.run_id = (char *) run_id;
	e->ev.attempt = attempt;
	if (trace != NULL)
		e->ev.trace_id = (char *) trace;
	if (payload != NULL)
		e->ev.payload_json = (char *) payload;
}

ax_err
ax_flow_event_send(ax_actor *self, ax_flow_event *e, int persisted)
{
	e->ev.persisted = persisted != 0;
	return ax_actor_send_pb(self, AX_A_EVENT_EMITTER, AX_ITEM_EVENT,
	                        (const ProtobufCMessage *) &e->ev);
}

void
ax_flow_event_row(const Ax__Event *ev, ax_store_event_row *row)
{
	*row = (ax_store_event_row) {
		.event_id        = ev->id,
		.type            = ev->type,
		.time_us         = ev->time_us,
		.dag             = ev->dag,
		.dag_run_id      = ev->dag_run_id,
		.instance_id     = ev->instance_id,
		.run_id          = ev->run_id,
		.attempt         = ev->attempt,
		.trace_id        = ev->trace_id,
		.reason          = ev->reason,
		.source          = ev->source,
		.task            = ev->task,
		.logical_time_us = ev->logical_time_us,
		.shard_index     = ev->shard_index,
		.shard_total     = ev->shard_total,
		.payload_json    = ev->payload_json,
	};
}

const char *
ax_flow_db_channel(const char *ch)
{
	if (ch == NULL || ch[0] == '\0')
		return "Px";
	if (strcasecmp(ch, "P0") == 0)
		return "P0";
	if (strcasecmp(ch, "k8s") == 0)
		return "k8s";
	if (strncasecmp(ch, "biz", 3) == 0)
		return "biz";
	return "Px";
}

/* ---------------------------------------------------------------------- */
/* pending commands */

void
ax_flow_pending_keep(ax_flow_pending *p, Ax__Command *cmd)
{
	size_t max = p->max ? p->max : 100000;

	if (p->n >= max) {
		p->dropped++;
		ax__command__free_unpacked(cmd, NULL);
		return;
	}
	if (p->n == p->cap) {
		size_t        c = p->cap ? p->cap * 2 : 256;
		Ax__Command **v = realloc(p->v, c * sizeof(*v));
		if (v == NULL) {
			p->dropped++;
			ax__command__free_unpacked(cmd, NULL);
			return;
		}
		p->v   = v;
		p->cap = c;
	}
	p->v[p->n++] = cmd;
}

Ax__Command **
ax_flow_pending_take(ax_flow_pending *p, size_t *n)
{
	Ax__Command **v = p->v;
	*n              = p->n;
	p->v            = NULL;
	p->n = p->cap = 0;
	return v;
}

ax_err
ax_flow_pending_handle(ax_actor *self, void *st, ax_flow_pending *p,
                       const ax_actor_item *items, size_t n,
                       ax_flow_run_fn run)
{
	Ax__Command **cmds = calloc(n + 1, sizeof(*cmds));
	size_t        k    = 0;
	ax_err        rv;

	if (cmds == NULL)
		return ax_err_set(AX_ENOMEM, "%s: out of memory",
		                  ax_actor_name(self));
	for (size_t i = 0; i < n; i++) {
		Ax__Command *c = items[i].type == AX_ITEM_COMMAND
		    ? ax_pipeline_unpack(self, &items[i])
		    : NULL;
		if (c == NULL)
			continue;
		if (p->n > 0)
			ax_flow_pending_keep(p, c); /* keep order */
		else
			cmds[k++] = c;
	}
	rv = run(self, st, cmds, k);
	free(cmds);
	return rv;
}

ax_err
ax_flow_pending_retry(ax_actor *self, void *st, ax_flow_pending *p,
                      ax_flow_run_fn run)
{
	size_t        n;
	Ax__Command **v = ax_flow_pending_take(p, &n);
	ax_err        rv;

	rv = run(self, st, v, n);
	free(v);
	return rv;
}

void
ax_flow_pending_fini(ax_flow_pending *p)
{
	for (size_t i = 0; i < p->n; i++)
		ax__command__free_unpacked(p->v[i], NULL);
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
}

int
ax_flow_db_transient(ax_err rv)
{
	return rv == AX_EDBCONN || rv == AX_ERETRY || rv == AX_EDB ||
	    rv == AX_ETIMEDOUT;
}
