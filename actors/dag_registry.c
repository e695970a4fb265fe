/*
 * dag_registry.c - refcounted, immutable DAG versions shared by the actors.
 *
 * Role: see dag_registry.h. Two hash tables under one rwlock: DAG name ->
 * slot (current entry, paused flag) and version id -> entry (every live
 * entry). An entry is unlinked and freed by whoever drops its last
 * reference; lookups take a reference with "increment unless zero", so an
 * entry whose count reached zero is never handed out again even before it
 * is unlinked.
 *
 * Invariants: entries and slots are only linked or unlinked under the
 * write lock; an entry in the version table is not freed; a slot's
 * current entry carries one reference owned by the registry.
 */
#include "dag_registry.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

typedef struct slot {
	struct slot  *next;
	char         *name;
	ax_dag_entry *current; /* registry's reference, or NULL */
	int           paused;
} slot;

struct ax_dag_registry {
	pthread_rwlock_t lock;
	slot           **names; /* buckets */
	size_t           ncap, nlen;
	ax_dag_entry   **vers; /* buckets, chained by vnext_ */
	size_t           vcap, vlen;
	size_t           ndags; /* slots with a current entry */
};

static uint64_t
hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char) *s) * 1099511628211ULL;
	return h;
}

static uint64_t
hash_i64(int64_t v)
{
	uint64_t x = (uint64_t) v;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

ax_err
ax_dag_registry_new(ax_dag_registry **out)
{
	ax_dag_registry *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (r == NULL)
		return ax_err_set(AX_ENOMEM, "DAG registry");
	r->ncap  = 64;
	r->vcap  = 64;
	r->names = calloc(r->ncap, sizeof(slot *));
	r->vers  = calloc(r->vcap, sizeof(ax_dag_entry *));
	if (r->names == NULL || r->vers == NULL ||
	    pthread_rwlock_init(&r->lock, NULL) != 0) {
		free(r->names);
		free(r->vers);
		free(r);
		return ax_err_set(AX_ENOMEM, "DAG registry");
	}
	*out = r;
	return AX_OK;
}

static void
entry_free(ax_dag_entry *e)
{
	ax_dagset_free(e->set_);
	free(e->tix_);
	free(e);
}

void
ax_dag_registry_free(ax_dag_registry *r)
{
	size_t held = 0;

	if (r == NULL)
		return;
	/* drop the registry's own references first: what remains is held
	 * by callers who did not release (a bug worth a line in the log) */
	for (size_t i = 0; i < r->ncap; i++) {
		slot *s = r->names[i];
		while (s != NULL) {
			slot *n = s->next;
			if (s->current != NULL)
				atomic_fetch_sub(&s->current->refs_, 1);
			free(s->name);
			free(s);
			s = n;
		}
	}
	for (size_t i = 0; i < r->vcap; i++) {
		ax_dag_entry *e = r->vers[i];
		while (e != NULL) {
			ax_dag_entry *n    = e->vnext_;
			int           refs = atomic_load(&e->refs_);
			if (e->pinned_)
				refs--;
			held += (size_t) (refs > 0 ? refs : 0);
			entry_free(e);
			e = n;
		}
	}
	if (held > 0)
		ax_logf(AX_LOG_WARN, "dag_registry", NULL, NULL,
		        "freed with %zu DAG version references still held",
		        held);
	pthread_rwlock_destroy(&r->lock);
	free(r->names);
	free(r->vers);
	free(r);
}

/* --- tables (callers hold the lock) -------------------------------------
 */

static slot *
slot_find(ax_dag_registry *r, const char *name)
{
	slot *s = r->names[hash_str(name) & (r->ncap - 1)];
	while (s != NULL && strcmp(s->name, name) != 0)
		s = s->next;
	return s;
}

static void
names_grow(ax_dag_registry *r)
{
	size_t ncap = r->ncap * 2;
	slot **nb   = calloc(ncap, sizeof(slot *));
	if (nb == NULL)
		return; /* keep the longer chains; still correct */
	for (size_t i = 0; i < r->ncap; i++) {
		slot *s = r->names[i];
		while (s != NULL) {
			slot  *n = s->next;
			size_t b = hash_str(s->name) & (ncap - 1);
			s->next  = nb[b];
			nb[b]    = s;
			s        = n;
		}
	}
	free(r->names);
	r->names = nb;
	r->ncap  = ncap;
}

/* The slot of name, created when missing; NULL when out of memory. */
static slot *
slot_get(ax_dag_registry *r, const char *name)
{
	slot *s = slot_find(r, name);
	if (s != NULL)
		return s;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->name = strdup(name)) == NULL) {
		free(s);
		return NULL;
	}
	if (r->nlen + 1 > r->ncap)
		names_grow(r);
	size_t b    = hash_str(name) & (r->ncap - 1);
	s->next     = r->names[b];
	r->names[b] = s;
	r->nlen++;
	return s;
}

static void
vers_grow(ax_dag_registry *r)
{
	size_t         vcap = r->vcap * 2;
	ax_dag_entry **nb   = calloc(vcap, sizeof(ax_dag_entry *));
	if (nb == NULL)
		return;
	for (size_t i = 0; i < r->vcap; i++) {
		ax_dag_entry *e = r->vers[i];
		while (e != NULL) {
			ax_dag_entry *n = e->vnext_;
			size_t        b = hash_i64(e->version_id) & (vcap - 1);
			e->vnext_       = nb[b];
			nb[b]           = e;
			e               = n;
		}
	}
	free(r->vers);
	r->vers = nb;
	r->vcap = vcap;
}

static void
vers_link(ax_dag_registry *r, ax_dag_entry *e)
{
	if (r->vlen + 1 > r->vcap)
		vers_grow(r);
	size_t b   = hash_i64(e->version_id) & (r->vcap - 1);
	e->vnext_  = r->vers[b];
	r->vers[b] = e;
	r->vlen++;
}

static void
vers_unlink(ax_dag_registry *r, ax_dag_entry *e)
{
	ax_dag_entry **pp = &r->vers[hash_i64(e->version_id) & (r->vcap - 1)];
	for (; *pp != NULL; pp = &(*pp)->vnext_)
		if (*pp == e) {
			*pp = e->vnext_;
			r->vlen--;
			return;
		}
}

/* A live entry of version_id with a new reference, or NULL. */
static ax_dag_entry *
vers_ref(ax_dag_registry *r, int64_t version_id)
{
	ax_dag_entry *e = r->vers[hash_i64(version_id) & (r->vcap - 1)];
	for (; e != NULL; e = e->vnext_) {
		if (e->version_id != version_id)
			continue;
		int n = atomic_load(&e->refs_);
		while (n > 0)
			if (atomic_compare_exchange_weak(&e->refs_, &n, n + 1))
				return e;
	}
	return NULL;
}

/* --- entries ------------------------------------------------------------
 */

static ax_err
entry_new(ax_dag_registry *r, int64_t dag_id, int64_t version_id,
          ax_dagset *set, const ax_dag *dag, ax_dag_entry **out)
{
	ax_dag_entry *e   = calloc(1, sizeof(*e));
	uint32_t      cap = 8;

	while (cap < dag->n_tasks * 2)
		cap *= 2;
	if (e == NULL || (e->tix_ = calloc(cap, sizeof(uint32_t))) == NULL) {
		free(e);
		ax_dagset_free(set);
		return ax_err_set(AX_ENOMEM, "DAG registry entry");
	}
	e->dag_id     = dag_id;
	e->version_id = version_id;
	e->dag        = dag;
	e->set_       = set;
	e->reg_       = r;
	e->tcap_      = cap;
	atomic_init(&e->refs_, 1);
	for (size_t i = 0; i < dag->n_tasks; i++) {
		uint32_t h =
		    (uint32_t) hash_str(dag->tasks[i].name) & (cap - 1);
		while (e->tix_[h] != 0)
			h = (h + 1) & (cap - 1);
		e->tix_[h] = (uint32_t) i + 1;
	}
	*out = e;
	return AX_OK;
}

ax_dag_entry *
ax_dag_entry_ref(ax_dag_entry *e)
{
	if (e != NULL)
		atomic_fetch_add(&e->refs_, 1);
	return e;
}

void
ax_dag_entry_release(ax_dag_entry *e)
{
	ax_dag_registry *r;

	if (e == NULL || atomic_fetch_sub(&e->refs_, 1) != 1)
		return;
	/* the count is 0: lookups cannot resurrect it (increment unless
	 * zero), so unlink and free it */
	r = e->reg_;
	pthread_rwlock_wrlock(&r->lock);
	vers_unlink(r, e);
	pthread_rwlock_unlock(&r->lock);
	entry_free(e);
}

long
ax_dag_entry_task_index(const ax_dag_entry *e, const char *task)
{
	uint32_t h;

	if (e == NULL || task == NULL)
		return -1;
	h = (uint32_t) hash_str(task) & (e->tcap_ - 1);
	while (e->tix_[h] != 0) {
		uint32_t ix = e->tix_[h] - 1;
		if (strcmp(e->dag->tasks[ix].name, task) == 0)
			return (long) ix;
		h = (h + 1) & (e->tcap_ - 1);
	}
	return -1;
}

const ax_task *
ax_dag_entry_task(const ax_dag_entry *e, const char *task)
{
	long ix = ax_dag_entry_task_index(e, task);
	return ix < 0 ? NULL : &e->dag->tasks[ix];
}

/* --- publish and lookups ------------------------------------------------
 */

ax_err
ax_dag_registry_publish(ax_dag_registry *r, int64_t dag_id, int64_t version_id,
                        ax_dagset *set, const ax_dag *dag)
{
	ax_dag_entry *e, *old, *prev;
	slot         *s;
	ax_err        rv;

	if (r == NULL || dag == NULL || dag->name == NULL || !dag->valid ||
	    dag->topo == NULL || dag_id <= 0 || version_id <= 0) {
		ax_dagset_free(set);
		return ax_err_set(AX_EINVAL,
		                  "publish: need a validated DAG and ids > 0 "
		                  "(dag %lld, version %lld)",
		                  (long long) dag_id, (long long) version_id);
	}
	if ((rv = entry_new(r, dag_id, version_id, set, dag, &e)) != AX_OK)
		return rv;
	pthread_rwlock_wrlock(&r->lock);
	if ((s = slot_get(r, dag->name)) == NULL) {
		pthread_rwlock_unlock(&r->lock);
		entry_free(e);
		return ax_err_set(AX_ENOMEM, "DAG registry slot");
	}
	if (s->current != NULL && s->current->version_id == version_id) {
		pthread_rwlock_unlock(&r->lock);
		entry_free(e);
		return AX_OK;
	}
	if ((old = vers_ref(r, version_id)) != NULL) {
		/* an older version made active again: reuse the live entry */
		entry_free(e);
		e = old;
		if (e->pinned_) { /* the pin becomes the current reference */
			e->pinned_ = 0;
			atomic_fetch_sub(&e->refs_, 1);
		}
	} else {
		vers_link(r, e);
	}
	prev       = s->current;
	s->current = e;
	if (prev == NULL)
		r->ndags++;
	pthread_rwlock_unlock(&r->lock);
	ax_dag_entry_release(prev);
	return AX_OK;
}

ax_err
ax_dag_registry_remove(ax_dag_registry *r, const char *dag_name)
{
	ax_dag_entry *prev = NULL;
	slot         *s;

	pthread_rwlock_wrlock(&r->lock);
	if ((s = slot_find(r, dag_name)) != NULL && s->current != NULL) {
		prev       = s->current;
		s->current = NULL;
		r->ndags--;
	}
	pthread_rwlock_unlock(&r->lock);
	if (prev == NULL)
		return ax_err_set(AX_ENOENT, "DAG '%s' has no loaded version",
		                  dag_name);
	ax_dag_entry_release(prev);
	return AX_OK;
}

ax_dag_entry *
ax_dag_registry_current(ax_dag_registry *r, const char *dag_name)
{
	ax_dag_entry *e = NULL;
	slot         *s;

	if (dag_name == NULL)
		return NULL;
	pthread_rwlock_rdlock(&r->lock);
	if ((s = slot_find(r, dag_name)) != NULL && s->current != NULL)
		e = ax_dag_entry_ref(s->current); /* the slot's ref is > 0 */
	pthread_rwlock_unlock(&r->lock);
	return e;
}

ax_dag_entry *
ax_dag_registry_version(ax_dag_registry *r, int64_t version_id)
{
	ax_dag_entry *e;

	pthread_rwlock_rdlock(&r->lock);
	e = vers_ref(r, version_id);
	pthread_rwlock_unlock(&r->lock);
	return e;
}

void
ax_dag_registry_set_paused(ax_dag_registry *r, const char *dag, int paused)
{
	slot *s;

	pthread_rwlock_wrlock(&r->lock);
	if ((s = slot_get(r, dag)) != NULL)
		s->paused = paused != 0;
	pthread_rwlock_unlock(&r->lock);
	if (s == NULL)
		ax_logf(AX_LOG_ERROR, "dag_registry", NULL, NULL,
		        "out of memory recording the paused flag of %s", dag);
}

int
ax_dag_registry_paused(ax_dag_registry *r, const char *dag)
{
	slot *s;
	int   p = 0;

	pthread_rwlock_rdlock(&r->lock);
	if ((s = slot_find(r, dag)) != NULL)
		p = s->paused;
	pthread_rwlock_unlock(&r->lock);
	return p;
}

void
ax_dag_registry_counts(ax_dag_registry *r, size_t *dags, size_t *entries)
{
	pthread_rwlock_rdlock(&r->lock);
	if (dags != NULL)
		*dags = r->ndags;
	if (entries != NULL)
		*entries = r->vlen;
	pthread_rwlock_unlock(&r->lock);
}

/* --- loading from PostgreSQL --------------------------------------------
 */

/* Decodes a stored definition into a fresh set. */
static ax_err
decode_version(int64_t version_id, const char *text, ax_dagset **set_out,
               ax_dag **dag_out)
{
	json_error_t jerr;
	json_t      *j = json_loads(text, 0, &jerr);
	ax_dagset   *set;
	ax_err       rv;

	if (j == NULL)
		return ax_err_set(
		    AX_EPARSE, "dag_versions %lld: definition is not JSON: %s",
		    (long long) version_id, jerr.text);
	if ((rv = ax_dagset_new(NULL, &set)) != AX_OK) {
		json_decref(j);
		return rv;
	}
	rv = ax_dag_from_json(set, j, dag_out);
	json_decref(j);
	if (rv != AX_OK) {
		char detail[512];
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		ax_dagset_free(set);
		return ax_err_set(rv, "dag_versions %lld: %s",
		                  (long long) version_id, detail);
	}
	*set_out = set;
	return AX_OK;
}

ax_err
ax_dag_registry_load_version(ax_dag_registry *r, ax_store *store,
                             int64_t version_id)
{
	static const char sql[] =
	    "SELECT v.dag_id, d.name, v.definition::text,"
	    " coalesce(d.active_version_id = v.id, false)"
	    " FROM dag_versions v JOIN dags d ON d.id = v.dag_id"
	    " WHERE v.id = $1";
	char          idbuf[32];
	const char   *params[1] = { idbuf };
	PGresult     *res;
	ax_dagset    *set;
	ax_dag       *dag;
	ax_dag_entry *e, *old;
	int64_t       dag_id;
	int           active;
	ax_err        rv;

	if ((e = ax_dag_registry_version(r, version_id)) != NULL) {
		ax_dag_entry_release(e);
		return AX_OK;
	}
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long) version_id);
	if ((rv = ax_store_query(store, sql, 1, params, &res)) != AX_OK)
		return rv;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return ax_err_set(AX_ENOENT,
		                  "dag_versions %lld does not exist",
		                  (long long) version_id);
	}
	dag_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	active = PQgetvalue(res, 0, 3)[0] == 't';
	rv     = decode_version(version_id, PQgetvalue(res, 0, 2), &set, &dag);
	PQclear(res);
	if (rv != AX_OK)
		return rv;
	if ((rv = entry_new(r, dag_id, version_id, set, dag, &e)) != AX_OK)
		return rv;
	pthread_rwlock_wrlock(&r->lock);
	if ((old = vers_ref(r, version_id)) != NULL) {
		/* loaded meanwhile by another thread */
		pthread_rwlock_unlock(&r->lock);
		entry_free(e);
		ax_dag_entry_release(old);
		return AX_OK;
	}
	slot *s = slot_get(r, dag->name);
	vers_link(r, e);
	if (s != NULL && active && s->current == NULL) {
		s->current = e;
		r->ndags++;
	} else {
		e->pinned_ = 1;
	}
	pthread_rwlock_unlock(&r->lock);
	return AX_OK;
}
