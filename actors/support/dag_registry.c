/*
 * dag_registry.c - refcounted, immutable DAG versions shared by the actors,
 * loaded lazily from PostgreSQL and bounded (see dag_registry.h).
 *
 * Tables, all under one rwlock: DAG name -> current entry and version id ->
 * live entry (node-less maps of engine/hmap.h: the entry holds both
 * keys), and the names of the paused DAGs (an ax_strmap). The cached
 * entries (those the registry holds a reference on) are also on a CLOCK
 * list (clock_, an ax_list): eviction walks it from
 * the head, gives an entry whose used_ bit is set a second chance (moves
 * it to the tail), skips entries someone references and drops the
 * registry's reference on the others.
 *
 * An entry is unlinked and freed by whoever drops its last reference;
 * lookups take a reference with "increment unless zero" under the lock,
 * so an entry whose count reached zero is never handed out again even
 * before it is unlinked. Under the write lock a cached entry with a count
 * of 1 is referenced by the registry alone and nobody can take a new
 * reference, which is what makes eviction safe.
 *
 * Lazy loads run on the registry's own ax_store, serialised by smu (libpq
 * connections are not shared between threads); the decode happens outside
 * every lock. gen counts the writer's changes of current entries
 * (publish, remove, invalidate): a load that read PostgreSQL under an
 * older gen does not install its result as current, so a DAG change
 * notified during the round trip is never hidden by a stale load.
 *
 * Two entries of one version can be alive at once: one whose last
 * reference is being dropped (count 0, about to unlink itself) and a
 * fresh one installed meanwhile. The version map holds the fresh one; the
 * dying one was replaced in it (vers_link), so its own unlink finds
 * nothing to remove. Changes that link an entry reserve the room in the
 * maps first (ax_hmap_reserve), so none fails half-way.
 */
#include "dag_registry.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "hash.h"
#include "hmap.h"
#include "log.h"

#define COMP        "dag_registry"
#define WARM_SLICE  256                    /* definitions per warm-up query */
#define ERR_LOG_GAP (10 * AX_USEC_PER_SEC) /* one load error line per */

struct ax_dag_registry {
	pthread_rwlock_t lock;
	ax_hmap          names;  /* current entries by DAG name */
	ax_hmap          vers;   /* live entries by version id */
	ax_strmap       *paused; /* paused DAG names -> (void *) 1 */
	ax_list          clock;  /* CLOCK list of cached entries */
	size_t           ncached;
	size_t           cache_max;
	atomic_ullong    gen;
	atomic_ullong    hits, loads, evictions;
	/* lazy loads */
	pthread_mutex_t smu;
	char           *dsn;        /* NULL: no lazy loads */
	ax_store       *store;      /* opened on first use */
	int64_t         err_logged; /* mono us of the last load error line */
};

static uint64_t
name_hash_entry(const void *e)
{
	return ax_hash_str(((const ax_dag_entry *) e)->dag->name);
}

static int
name_match(const void *e, const void *key)
{
	return strcmp(((const ax_dag_entry *) e)->dag->name, key) == 0;
}

static const ax_hmap_ops name_ops = {
	.hash_key   = ax_hmap_hash_str,
	.hash_entry = name_hash_entry,
	.match      = name_match,
};

static uint64_t
vers_hash_key(const void *key)
{
	return ax_hash_u64((uint64_t) * (const int64_t *) key);
}

static uint64_t
vers_hash_entry(const void *e)
{
	return ax_hash_u64((uint64_t) ((const ax_dag_entry *) e)->version_id);
}

static int
vers_match(const void *e, const void *key)
{
	return ((const ax_dag_entry *) e)->version_id ==
	    *(const int64_t *) key;
}

static const ax_hmap_ops vers_ops = {
	.hash_key   = vers_hash_key,
	.hash_entry = vers_hash_entry,
	.match      = vers_match,
};

ax_err
ax_dag_registry_new(ax_dag_registry **out)
{
	ax_dag_registry *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (r == NULL)
		return ax_err_set(AX_ENOMEM, "DAG registry");
	r->cache_max = AX_DAG_REGISTRY_CACHE_DEFAULT;
	ax_hmap_init(&r->names, &name_ops);
	ax_hmap_init(&r->vers, &vers_ops);
	if (ax_strmap_new(&r->paused) != AX_OK ||
	    pthread_rwlock_init(&r->lock, NULL) != 0) {
		ax_strmap_free(r->paused, NULL);
		free(r);
		return ax_err_set(AX_ENOMEM, "DAG registry");
	}
	pthread_mutex_init(&r->smu, NULL);
	*out = r;
	return AX_OK;
}

static void
entry_free(ax_dag_entry *e)
{
	if (e == NULL)
		return;
	ax_dagset_free(e->set_);
	free(e->tix_);
	free(e);
}

/* Frees a list chained through dnext_ (entries already unlinked). */
static void
free_list(ax_dag_entry *e)
{
	while (e != NULL) {
		ax_dag_entry *n = e->dnext_;
		entry_free(e);
		e = n;
	}
}

void
ax_dag_registry_free(ax_dag_registry *r)
{
	size_t        held = 0;
	ax_hmap_iter  it;
	ax_dag_entry *e;

	if (r == NULL)
		return;
	ax_hmap_iter_init(&it, &r->vers);
	while ((e = ax_hmap_iter_next(&it)) != NULL) {
		int refs = atomic_load(&e->refs_);
		if (e->cached_)
			refs--; /* the registry's own */
		held += (size_t) (refs > 0 ? refs : 0);
		entry_free(e);
	}
	if (held > 0)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "freed with %zu DAG version references still held",
		        held);
	ax_strmap_free(r->paused, NULL);
	ax_store_close(r->store);
	free(r->dsn);
	pthread_mutex_destroy(&r->smu);
	pthread_rwlock_destroy(&r->lock);
	ax_hmap_fini(&r->names);
	ax_hmap_fini(&r->vers);
	free(r);
}

ax_err
ax_dag_registry_set_source(ax_dag_registry *r, const char *dsn)
{
	char *copy = NULL;

	if (dsn != NULL && dsn[0] != '\0' && (copy = strdup(dsn)) == NULL)
		return ax_err_set(AX_ENOMEM, "DAG registry source");
	pthread_mutex_lock(&r->smu);
	free(r->dsn);
	r->dsn = copy;
	ax_store_close(r->store); /* the next load connects to the new one */
	r->store = NULL;
	pthread_mutex_unlock(&r->smu);
	return AX_OK;
}

/* --- tables (callers hold the write lock unless said) -------------------
 */

/* The current entry of name (read or write lock). */
static ax_dag_entry *
name_find(ax_dag_registry *r, const char *name)
{
	return ax_hmap_get(&r->names, name);
}

/*
 * Room for one more entry in each map, taken before a change that links
 * one (the puts below then cannot fail). AX_ENOMEM, nothing changed.
 */
static ax_err
tables_reserve(ax_dag_registry *r)
{
	if (ax_hmap_reserve(&r->names, ax_hmap_count(&r->names) + 1) !=
	        AX_OK ||
	    ax_hmap_reserve(&r->vers, ax_hmap_count(&r->vers) + 1) != AX_OK)
		return ax_err_set(AX_ENOMEM, "DAG registry: out of memory");
	return AX_OK;
}

/* e (cached, not current) becomes the current entry of its DAG (room
 * reserved). */
static void
name_link(ax_dag_registry *r, ax_dag_entry *e)
{
	(void) ax_hmap_put(&r->names, e->dag->name, e, NULL);
	e->current_ = 1;
	e->pinned_  = 0;
}

/* e stops being current; it stays cached as a pinned version. */
static void
name_unlink(ax_dag_registry *r, ax_dag_entry *e)
{
	ax_hmap_remove(&r->names, e);
	e->current_ = 0;
	e->pinned_  = 1;
}

/* e becomes the live entry of its version (room reserved); a dying entry
 * of the same version is replaced (see the file comment). */
static void
vers_link(ax_dag_registry *r, ax_dag_entry *e)
{
	(void) ax_hmap_put(&r->vers, &e->version_id, e, NULL);
}

static void
vers_unlink(ax_dag_registry *r, ax_dag_entry *e)
{
	ax_hmap_remove(&r->vers, e);
}

/* A live entry of version_id with a new reference, or NULL (read lock). */
static ax_dag_entry *
vers_ref(ax_dag_registry *r, int64_t version_id)
{
	ax_dag_entry *e = ax_hmap_get(&r->vers, &version_id);
	int           n;

	if (e == NULL)
		return NULL;
	n = atomic_load(&e->refs_);
	while (n > 0)
		if (atomic_compare_exchange_weak(&e->refs_, &n, n + 1)) {
			atomic_store(&e->used_, 1);
			return e;
		}
	return NULL; /* dying: its last reference is being dropped */
}

/* --- the CLOCK list ------------------------------------------------------
 */

static void
lru_add(ax_dag_registry *r, ax_dag_entry *e)
{
	ax_list_append(&r->clock, &e->clock_);
	r->ncached++;
}

static void
lru_unlink(ax_dag_registry *r, ax_dag_entry *e)
{
	ax_list_remove(&r->clock, &e->clock_);
	r->ncached--;
}

/*
 * The registry takes its reference on e (the caller's reference, if any,
 * is untouched): e goes on the CLOCK list. No-op when cached already.
 */
static void
cache_take(ax_dag_registry *r, ax_dag_entry *e)
{
	if (e->cached_)
		return;
	atomic_fetch_add(&e->refs_, 1);
	e->cached_ = 1;
	e->pinned_ = 1;
	lru_add(r, e);
}

/*
 * The registry gives up its reference on cached e; returns e when the
 * caller must release that reference (after unlocking).
 */
static ax_dag_entry *
cache_drop(ax_dag_registry *r, ax_dag_entry *e)
{
	if (e->current_)
		name_unlink(r, e);
	lru_unlink(r, e);
	e->cached_ = 0;
	e->pinned_ = 0;
	return e;
}

/*
 * Drops unreferenced cached entries, oldest first, until at most
 * cache_max are cached or the bounded walk ends (entries someone holds
 * are skipped: they may keep the cache over the bound until released).
 * Returns the entries to free after unlocking, chained through dnext_.
 */
static ax_dag_entry *
evict(ax_dag_registry *r)
{
	ax_dag_entry *dead = NULL;
	size_t        budget, steps = 0;

	if (r->ncached <= r->cache_max)
		return NULL;
	budget = 2 * (r->ncached - r->cache_max) + 32;
	if (budget > 4096)
		budget = 4096;
	while (r->ncached > r->cache_max && steps++ < budget &&
	       !ax_list_empty(&r->clock)) {
		ax_dag_entry *e =
		    AX_LIST_ENTRY(r->clock.head, ax_dag_entry, clock_);
		int one = 1;
		lru_unlink(r, e);
		if (atomic_exchange(&e->used_, 0) != 0 ||
		    !atomic_compare_exchange_strong(&e->refs_, &one, 0)) {
			lru_add(r, e); /* second chance, or referenced */
			continue;
		}
		if (e->current_)
			name_unlink(r, e);
		e->cached_ = 0;
		e->pinned_ = 0;
		vers_unlink(r, e);
		e->dnext_ = dead;
		dead      = e;
		atomic_fetch_add(&r->evictions, 1);
	}
	return dead;
}

/* --- entries ------------------------------------------------------------
 */

/* A new entry holding one reference (the caller's), not linked. */
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
	atomic_init(&e->used_, 1);
	for (size_t i = 0; i < dag->n_tasks; i++) {
		uint32_t h =
		    (uint32_t) ax_hash_str(dag->tasks[i].name) & (cap - 1);
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
	/* the count is 0, so the registry held none (not cached): lookups
	 * cannot resurrect it (increment unless zero); unlink and free */
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
	h = (uint32_t) ax_hash_str(task) & (e->tcap_ - 1);
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

/*
 * Caches e under the write lock; the caller holds one reference on e,
 * which is either fresh (decoded, not linked yet: an entry of the same
 * version that became alive meanwhile wins and e is freed) or live. The
 * result becomes current when want_current and gen still equals gen0 and
 * the DAG has no current entry, else it is cached as pinned. Returns the
 * entry the caller now holds its one reference on; NULL (e released,
 * detail set) when memory is short.
 */
static ax_dag_entry *
install(ax_dag_registry *r, ax_dag_entry *e, int fresh, int want_current,
        uint64_t gen0)
{
	ax_dag_entry *old, *dead, *discard = NULL;

	pthread_rwlock_wrlock(&r->lock);
	if (tables_reserve(r) != AX_OK) {
		pthread_rwlock_unlock(&r->lock);
		if (fresh)
			entry_free(e); /* never linked: nobody else has it */
		else
			ax_dag_entry_release(e);
		return NULL;
	}
	if (!fresh) {
		/* live already: the caller's reference keeps it */
	} else if ((old = vers_ref(r, e->version_id)) != NULL) {
		discard = e; /* loaded meanwhile by another thread */
		e       = old;
	} else {
		vers_link(r, e);
	}
	cache_take(r, e);
	if (want_current && !e->current_ && atomic_load(&r->gen) == gen0 &&
	    name_find(r, e->dag->name) == NULL)
		name_link(r, e);
	atomic_store(&e->used_, 1);
	dead = evict(r);
	pthread_rwlock_unlock(&r->lock);
	entry_free(discard);
	free_list(dead);
	return e;
}

/* --- publish and lookups ------------------------------------------------
 */

ax_err
ax_dag_registry_publish(ax_dag_registry *r, int64_t dag_id, int64_t version_id,
                        ax_dagset *set, const ax_dag *dag)
{
	ax_dag_entry *e, *old, *cur, *prev = NULL, *dead, *discard = NULL;
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
	if ((rv = tables_reserve(r)) != AX_OK) {
		pthread_rwlock_unlock(&r->lock);
		entry_free(e);
		return rv;
	}
	cur = name_find(r, dag->name);
	if (cur != NULL && cur->version_id == version_id) {
		pthread_rwlock_unlock(&r->lock);
		entry_free(e);
		return AX_OK;
	}
	if ((old = vers_ref(r, version_id)) != NULL) {
		/* an older version made active again: reuse the live entry */
		discard = e;
		e       = old;
	} else {
		vers_link(r, e);
	}
	cache_take(r, e);
	/* the reference taken above (fresh or vers_ref) is not needed: the
	 * registry's own, from cache_take, keeps e */
	atomic_fetch_sub(&e->refs_, 1);
	if (cur != NULL)
		prev = cache_drop(r, cur);
	name_link(r, e); /* e was not current: cur is the DAG's current */
	atomic_fetch_add(&r->gen, 1);
	dead = evict(r);
	pthread_rwlock_unlock(&r->lock);
	entry_free(discard);
	free_list(dead);
	ax_dag_entry_release(prev);
	return AX_OK;
}

ax_err
ax_dag_registry_remove(ax_dag_registry *r, const char *dag_name)
{
	ax_dag_entry *prev = NULL, *cur;

	pthread_rwlock_wrlock(&r->lock);
	if ((cur = name_find(r, dag_name)) != NULL)
		prev = cache_drop(r, cur);
	atomic_fetch_add(&r->gen, 1);
	pthread_rwlock_unlock(&r->lock);
	if (prev == NULL)
		return ax_err_set(AX_ENOENT, "DAG '%s' has no loaded version",
		                  dag_name);
	ax_dag_entry_release(prev);
	return AX_OK;
}

void
ax_dag_registry_invalidate(ax_dag_registry *r, const char *dag_name)
{
	ax_dag_entry *cur;

	pthread_rwlock_wrlock(&r->lock);
	atomic_fetch_add(&r->gen, 1);
	if (dag_name != NULL) {
		if ((cur = name_find(r, dag_name)) != NULL)
			name_unlink(r, cur);
	} else {
		ax_hmap_iter it;
		ax_hmap_iter_init(&it, &r->names);
		while ((cur = ax_hmap_iter_next(&it)) != NULL) {
			ax_hmap_iter_remove(&it);
			cur->current_ = 0;
			cur->pinned_  = 1;
		}
	}
	pthread_rwlock_unlock(&r->lock);
}

/* The cached current entry of name with a new reference, or NULL. */
static ax_dag_entry *
current_cached(ax_dag_registry *r, const char *dag_name)
{
	ax_dag_entry *e;

	pthread_rwlock_rdlock(&r->lock);
	if ((e = name_find(r, dag_name)) != NULL) {
		ax_dag_entry_ref(e); /* cached: the registry's ref is > 0 */
		atomic_store(&e->used_, 1);
	}
	pthread_rwlock_unlock(&r->lock);
	return e;
}

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

/*
 * Decodes row row of res (columns: dag id, version id, definition) into
 * a fresh entry, or takes the live entry of that version (no decode).
 * *fresh tells which. NULL with the ax_err detail set on failure.
 */
static ax_dag_entry *
entry_of_row(ax_dag_registry *r, PGresult *res, int row, int *fresh)
{
	int64_t       dag_id = strtoll(PQgetvalue(res, row, 0), NULL, 10);
	int64_t       vid    = strtoll(PQgetvalue(res, row, 1), NULL, 10);
	ax_dag_entry *e;
	ax_dagset    *set;
	ax_dag       *dag;

	*fresh = 0;
	pthread_rwlock_rdlock(&r->lock);
	e = vers_ref(r, vid);
	pthread_rwlock_unlock(&r->lock);
	if (e != NULL)
		return e;
	if (decode_version(vid, PQgetvalue(res, row, 2), &set, &dag) !=
	        AX_OK ||
	    entry_new(r, dag_id, vid, set, dag, &e) != AX_OK)
		return NULL;
	atomic_fetch_add(&r->loads, 1);
	*fresh = 1;
	return e;
}

/* Logs a failed lazy load, at most once per ERR_LOG_GAP (smu held). */
static void
log_load_error(ax_dag_registry *r, const char *what)
{
	int64_t now = ax_clock_mono_us();
	if (r->err_logged != 0 && now - r->err_logged < ERR_LOG_GAP)
		return;
	r->err_logged = now;
	ax_logf(AX_LOG_WARN, COMP, "REGISTRY_LOAD", NULL,
	        "cannot load %s from PostgreSQL: %s", what, ax_err_detail());
}

/* Runs sql on the registry's connection (smu held), opening it. */
static ax_err
source_query(ax_dag_registry *r, const char *sql, int n, const char **p,
             PGresult **res)
{
	ax_err rv = AX_OK;
	if (r->store == NULL)
		rv = ax_store_open(r->dsn, &r->store);
	if (rv == AX_OK)
		rv = ax_store_query(r->store, sql, n, p, res);
	return rv;
}

/* The active version of dag_name read from PostgreSQL (see header). */
static ax_dag_entry *
load_current(ax_dag_registry *r, const char *dag_name)
{
	static const char sql[] =
	    "SELECT v.dag_id, v.id, v.definition::text FROM dags d"
	    " JOIN dag_versions v ON v.id = d.active_version_id"
	    " WHERE d.name = $1";
	const char   *p[1] = { dag_name };
	PGresult     *res  = NULL;
	ax_dag_entry *e;
	uint64_t      gen0;
	int           fresh;
	ax_err        rv;

	pthread_mutex_lock(&r->smu);
	if (r->dsn == NULL) {
		pthread_mutex_unlock(&r->smu);
		return NULL;
	}
	/* another thread may have loaded it while we waited */
	if ((e = current_cached(r, dag_name)) != NULL) {
		pthread_mutex_unlock(&r->smu);
		return e;
	}
	gen0 = atomic_load(&r->gen);
	if ((rv = source_query(r, sql, 1, p, &res)) != AX_OK) {
		char what[300];
		snprintf(what, sizeof(what), "DAG '%s'", dag_name);
		log_load_error(r, what);
		pthread_mutex_unlock(&r->smu);
		return NULL;
	}
	pthread_mutex_unlock(&r->smu);
	if (PQntuples(res) != 1) {
		PQclear(res);
		ax_err_set(AX_ENOENT, "DAG '%s' has no active version",
		           dag_name);
		return NULL;
	}
	e = entry_of_row(r, res, 0, &fresh);
	PQclear(res);
	if (e == NULL) {
		ax_logf(AX_LOG_ERROR, COMP, "BAD_DEFINITION",
		        &(ax_log_ids) { .dag = dag_name }, "%s",
		        ax_err_detail());
		return NULL;
	}
	return install(r, e, fresh, 1, gen0);
}

ax_dag_entry *
ax_dag_registry_current(ax_dag_registry *r, const char *dag_name)
{
	ax_dag_entry *e;

	if (dag_name == NULL)
		return NULL;
	if ((e = current_cached(r, dag_name)) != NULL) {
		atomic_fetch_add(&r->hits, 1);
		return e;
	}
	return load_current(r, dag_name);
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

/* --- paused flags -------------------------------------------------------
 */

void
ax_dag_registry_set_paused(ax_dag_registry *r, const char *dag, int paused)
{
	ax_err rv = AX_OK;

	if (dag == NULL)
		return;
	pthread_rwlock_wrlock(&r->lock);
	if (!paused)
		ax_strmap_del(r->paused, dag);
	else if (ax_strmap_get(r->paused, dag) == NULL)
		rv = ax_strmap_put(r->paused, dag, (void *) 1);
	pthread_rwlock_unlock(&r->lock);
	if (rv != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "out of memory recording the paused flag of %s", dag);
}

int
ax_dag_registry_paused(ax_dag_registry *r, const char *dag)
{
	int p;

	if (dag == NULL)
		return 0;
	pthread_rwlock_rdlock(&r->lock);
	p = ax_strmap_get(r->paused, dag) != NULL;
	pthread_rwlock_unlock(&r->lock);
	return p;
}

/* --- counters -----------------------------------------------------------
 */

void
ax_dag_registry_set_cache_max(ax_dag_registry *r, size_t n)
{
	ax_dag_entry *dead;

	pthread_rwlock_wrlock(&r->lock);
	r->cache_max = n;
	dead         = evict(r);
	pthread_rwlock_unlock(&r->lock);
	free_list(dead);
}

void
ax_dag_registry_counts(ax_dag_registry *r, size_t *dags, size_t *entries)
{
	pthread_rwlock_rdlock(&r->lock);
	if (dags != NULL)
		*dags = ax_hmap_count(&r->names);
	if (entries != NULL)
		*entries = ax_hmap_count(&r->vers);
	pthread_rwlock_unlock(&r->lock);
}

void
ax_dag_registry_stats_get(ax_dag_registry *r, ax_dag_registry_stats *out)
{
	pthread_rwlock_rdlock(&r->lock);
	out->dags      = ax_hmap_count(&r->names);
	out->entries   = ax_hmap_count(&r->vers);
	out->cached    = r->ncached;
	out->cache_max = r->cache_max;
	pthread_rwlock_unlock(&r->lock);
	out->hits      = atomic_load(&r->hits);
	out->loads     = atomic_load(&r->loads);
	out->evictions = atomic_load(&r->evictions);
}

/* --- loading from PostgreSQL --------------------------------------------
 */

ax_err
ax_dag_registry_load_version(ax_dag_registry *r, ax_store *store,
                             int64_t version_id)
{
	static const char sql[] =
	    "SELECT v.dag_id, v.id, v.definition::text,"
	    " coalesce(d.active_version_id = v.id, false)"
	    " FROM dag_versions v JOIN dags d ON d.id = v.dag_id"
	    " WHERE v.id = $1";
	char          idbuf[32];
	const char   *params[1] = { idbuf };
	PGresult     *res;
	ax_dag_entry *e;
	uint64_t      gen0;
	int           active, fresh;
	ax_err        rv;

	if ((e = ax_dag_registry_version(r, version_id)) != NULL) {
		ax_dag_entry_release(e);
		return AX_OK;
	}
	gen0 = atomic_load(&r->gen);
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long) version_id);
	if ((rv = ax_store_query(store, sql, 1, params, &res)) != AX_OK)
		return rv;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return ax_err_set(AX_ENOENT,
		                  "dag_versions %lld does not exist",
		                  (long long) version_id);
	}
	active = PQgetvalue(res, 0, 3)[0] == 't';
	e      = entry_of_row(r, res, 0, &fresh);
	PQclear(res);
	if (e == NULL)
		return ax_err_set(AX_EPARSE, "%s", ax_err_detail());
	if ((e = install(r, e, fresh, active, gen0)) == NULL)
		return AX_ENOMEM;
	ax_dag_entry_release(e);
	return AX_OK;
}

ax_err
ax_dag_registry_warm(ax_dag_registry *r, size_t max, int64_t horizon_us,
                     size_t *loaded)
{
	/* the order comes from the next-fire index alone; the definitions
	 * are then fetched by id, a slice at a time */
	static const char ids_sql[] =
	    "SELECT s.dag_id FROM schedules s JOIN dags d ON d.id = s.dag_id"
	    " WHERE s.next_fire_at < now() + $2::bigint * interval '1 "
	    "microsecond'"
	    " AND NOT d.paused AND d.active_version_id IS NOT NULL"
	    " ORDER BY s.next_fire_at LIMIT $1::int";
	static const char defs_sql[] =
	    "SELECT v.dag_id, v.id, v.definition::text FROM dags d"
	    " JOIN dag_versions v ON v.id = d.active_version_id"
	    " WHERE d.id = ANY($1::bigint[])";
	PGresult *ids = NULL;
	char      lim[24], hor[24];
	size_t    n  = 0;
	ax_err    rv = AX_OK;

	if (loaded != NULL)
		*loaded = 0;
	snprintf(lim, sizeof(lim), "%zu", max < INT32_MAX ? max : INT32_MAX);
	snprintf(hor, sizeof(hor), "%lld", (long long) horizon_us);
	pthread_mutex_lock(&r->smu);
	if (r->dsn == NULL) {
		pthread_mutex_unlock(&r->smu);
		return ax_err_set(AX_ESTATE,
		                  "DAG registry: no source to warm from");
	}
	rv = source_query(r, ids_sql, 2, (const char *[]) { lim, hor }, &ids);
	pthread_mutex_unlock(&r->smu);
	for (int off = 0; rv == AX_OK && off < PQntuples(ids);
	     off += WARM_SLICE) {
		char       *arr = malloc((size_t) WARM_SLICE * 24 + 4), *w;
		PGresult   *res = NULL;
		const char *p[1];
		uint64_t    gen0;
		size_t      ncached, cmax;

		pthread_rwlock_rdlock(&r->lock);
		ncached = r->ncached;
		cmax    = r->cache_max;
		pthread_rwlock_unlock(&r->lock);
		if (arr == NULL || ncached >= cmax) { /* must not evict */
			free(arr);
			break;
		}
		w    = arr;
		*w++ = '{';
		for (int i = off; i < PQntuples(ids) && i < off + WARM_SLICE;
		     i++)
			w += sprintf(w, "%s%s", i > off ? "," : "",
			             PQgetvalue(ids, i, 0));
		*w++ = '}';
		*w   = '\0';
		p[0] = arr;
		pthread_mutex_lock(&r->smu);
		gen0 = atomic_load(&r->gen);
		rv   = source_query(r, defs_sql, 1, p, &res);
		pthread_mutex_unlock(&r->smu);
		free(arr);
		for (int i = 0; rv == AX_OK && i < PQntuples(res); i++) {
			int           fresh;
			ax_dag_entry *e;
			pthread_rwlock_rdlock(&r->lock);
			ncached = r->ncached;
			pthread_rwlock_unlock(&r->lock);
			if (ncached >= cmax)
				break; /* must not evict */
			e = entry_of_row(r, res, i, &fresh);
			if (e == NULL) {
				ax_logf(AX_LOG_ERROR, COMP, "BAD_DEFINITION",
				        NULL, "%s", ax_err_detail());
				continue;
			}
			ax_dag_entry_release(install(r, e, fresh, 1, gen0));
			n += (size_t) fresh;
		}
		PQclear(res);
	}
	PQclear(ids);
	if (loaded != NULL)
		*loaded = n;
	return rv;
}
