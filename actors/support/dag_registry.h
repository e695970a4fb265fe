/*
 * dag_registry.h - the DAG versions axd has decoded, shared read-only by
 * every actor of axd: a bounded, lazily filled cache over PostgreSQL.
 *
 * Role: the time detector, dependency detector, resource detector,
 * instance generator, renderer, hooks and result handler read DAG
 * versions here. An entry is immutable: a new version of a DAG is a new
 * entry that becomes the DAG's current one, while runs still planned
 * against an older version keep that entry alive through their reference.
 *
 * Lazy loading: nothing is decoded at start-up (a million DAGs would cost
 * gigabytes). ax_dag_registry_current() on a miss reads the DAG's active
 * version from PostgreSQL on the registry's own connection (opened from
 * the DSN given with ax_dag_registry_set_source(), guarded by a mutex) and
 * caches it. A miss costs one round trip: fine on the first fire of a DAG,
 * not per instance. Without a source the registry holds only what is
 * published or loaded into it (tests, tools).
 *
 * Eviction: at most cache_max decoded entries that nobody references stay
 * cached (CLOCK, an approximation of LRU: a lookup sets a used bit, the
 * sweep gives used entries a second chance). An entry a caller references
 * is never freed under it: evicting drops only the registry's reference.
 *
 * Invariants:
 *  - An entry (and the ax_dag inside it, its ax_dagset) is never written
 *    after publication and is freed when its last reference is released.
 *    The registry holds one reference on each cached entry: the current
 *    entry of a DAG, and versions loaded by id or superseded by an
 *    invalidation ("pinned": they serve runs of older versions).
 *  - Lookups by DAG name and by version id are O(1) (hash tables under a
 *    rwlock; readers share it). References are atomic counters, so taking
 *    and releasing one costs no lock in the common case.
 *  - Paused flags are kept apart from the cache, by DAG name, only for
 *    paused DAGs: exact whether the DAG is cached or not.
 *  - A load that read PostgreSQL before an invalidation (a DAG change
 *    notified meanwhile) never installs its result as the current entry.
 *  - Thread-safe: every function may be called from any thread.
 *
 * Workload: up to 1,000,000 DAGs, of which cache_max (default 10,000) are
 * decoded; lookups on every Due and every plan (thousands per second).
 */
#ifndef AX_DAG_REGISTRY_H
#define AX_DAG_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "dag.h"
#include "list.h"
#include "store.h"

#define AX_DAG_REGISTRY_CACHE_DEFAULT 10000

typedef struct ax_dag_registry ax_dag_registry;

/* One decoded DAG version; immutable once published. */
typedef struct ax_dag_entry {
	int64_t       dag_id;     /* dags.id */
	int64_t       version_id; /* dag_versions.id */
	const ax_dag *dag;        /* merged, validated; owned by the entry */
	/* private: */
	ax_dagset              *set_;     /* owns dag */
	atomic_int              refs_;    /* references held */
	atomic_int              used_;    /* looked up since the last sweep */
	struct ax_dag_registry *reg_;     /* the registry it belongs to */
	struct ax_dag_entry    *dnext_;   /* list of entries to free */
	ax_list_node            clock_;   /* CLOCK list while cached */
	uint32_t               *tix_;     /* task name hash -> index + 1 */
	uint32_t                tcap_;    /* slots in tix_ (power of two) */
	uint8_t                 cached_;  /* the registry holds a reference */
	uint8_t                 pinned_;  /* cached but not current */
	uint8_t                 current_; /* the current entry of its DAG */
} ax_dag_entry;

/* Counters (ax_dag_registry_stats). */
typedef struct ax_dag_registry_stats {
	size_t   dags;      /* DAGs with a cached current entry */
	size_t   entries;   /* live entries (cached or referenced) */
	size_t   cached;    /* entries the registry holds a reference on */
	size_t   cache_max; /* bound on unreferenced cached entries */
	uint64_t hits;      /* current() found in memory */
	uint64_t loads;     /* versions decoded from PostgreSQL */
	uint64_t evictions; /* cached entries dropped by the bound */
} ax_dag_registry_stats;

/* Creates an empty registry without a source (cache_max default).
 * AX_ENOMEM. */
ax_err ax_dag_registry_new(ax_dag_registry **out);

/*
 * Frees the registry, its connection and the entries it still
 * references. Every reference taken by callers must have been released
 * first (an entry still referenced is freed anyway and the count is
 * logged). NULL is fine.
 */
void ax_dag_registry_free(ax_dag_registry *reg);

/*
 * Where lazy loads read: dsn (copied; NULL or "" turns lazy loading off).
 * The connection is opened on the first miss and reopened after an
 * error. AX_ENOMEM.
 */
ax_err ax_dag_registry_set_source(ax_dag_registry *reg, const char *dsn);

/*
 * At most n decoded entries that nobody references stay cached (the
 * config key registry.cache_dags). Entries over the bound are dropped at
 * the next insertion.
 */
void ax_dag_registry_set_cache_max(ax_dag_registry *reg, size_t n);

/*
 * Publishes version version_id of DAG dag_id: set (owned by the registry
 * from now on, also on failure) holds dag (validated: valid = 1, topo
 * set). The entry becomes the DAG's current version (by dag->name); the
 * previous current entry loses the registry's reference and lives on
 * while others hold one. Publishing the version that is already current
 * is a no-op (set is freed). Errors: AX_EINVAL (NULL or invalid dag, id
 * <= 0), AX_ENOMEM.
 */
ax_err ax_dag_registry_publish(ax_dag_registry *reg, int64_t dag_id,
                               int64_t version_id, ax_dagset *set,
                               const ax_dag *dag);

/*
 * Forgets the current version of dag_name (the DAG was deleted): the
 * registry drops its reference (references held live on). With a source,
 * a later lookup reads PostgreSQL again. AX_ENOENT when the DAG has no
 * cached current version.
 */
ax_err ax_dag_registry_remove(ax_dag_registry *reg, const char *dag_name);

/*
 * The DAG dag_name changed (NULL: any DAG may have, after a lost
 * notification): its current entry stops being current (it stays cached
 * by version id while the bound allows) and the next
 * ax_dag_registry_current() reads the active version again. A load that
 * read PostgreSQL before this call does not become current.
 */
void ax_dag_registry_invalidate(ax_dag_registry *reg, const char *dag_name);

/*
 * A reference to the current version of dag_name, or NULL (no such DAG,
 * no active version, or PostgreSQL unreachable: logged). On a miss with
 * a source it is loaded from PostgreSQL (blocks for one round trip and a
 * decode).
 */
ax_dag_entry *ax_dag_registry_current(ax_dag_registry *reg,
                                      const char      *dag_name);

/* A reference to version version_id while it is alive, or NULL. */
ax_dag_entry *ax_dag_registry_version(ax_dag_registry *reg,
                                      int64_t          version_id);

/* An extra reference to e (which the caller already holds). */
ax_dag_entry *ax_dag_entry_ref(ax_dag_entry *e);

/* Releases a reference; the last one frees the entry. NULL is fine. */
void ax_dag_entry_release(ax_dag_entry *e);

/* The task named task in e's DAG (O(1)), or NULL. */
const ax_task *ax_dag_entry_task(const ax_dag_entry *e, const char *task);

/* Index of the task named task in e->dag->tasks, or -1 (O(1)). */
long ax_dag_entry_task_index(const ax_dag_entry *e, const char *task);

/*
 * Paused flags by DAG name (dags.paused), independent of versions and of
 * the cache: a DAG may be paused before it has a loaded version. Only
 * paused DAGs take memory.
 */
void ax_dag_registry_set_paused(ax_dag_registry *reg, const char *dag,
                                int paused);
int  ax_dag_registry_paused(ax_dag_registry *reg, const char *dag);

/*
 * Loads version version_id from PostgreSQL (dag_versions.definition,
 * rebuilt with ax_dag_from_json) unless it is already alive here. It
 * becomes the DAG's current version when it is the DAG's active version
 * and the DAG has none cached; otherwise it is cached as a pinned
 * version (evictable like any other). Errors: AX_ENOENT (no such
 * version), AX_EPARSE (a definition that does not decode: the detail
 * names the version and the JSON pointer), store errors. Call from a
 * thread that owns store.
 */
ax_err ax_dag_registry_load_version(ax_dag_registry *reg, ax_store *store,
                                    int64_t version_id);

/*
 * Warms the cache at start-up on the registry's own connection: decodes
 * the active versions of the unpaused DAGs whose next fire is within
 * horizon_us (database clock), soonest first, at most max of them and
 * never past the cache bound, so that their first fires find them in
 * memory. *loaded (may be NULL) gets the count decoded. Errors: AX_ESTATE
 * without a source, store errors (what was loaded stays).
 */
ax_err ax_dag_registry_warm(ax_dag_registry *reg, size_t max,
                            int64_t horizon_us, size_t *loaded);

/* Number of DAGs with a cached current version, and of live entries. */
void ax_dag_registry_counts(ax_dag_registry *reg, size_t *dags,
                            size_t *entries);

/* Copies the counters. */
void ax_dag_registry_stats_get(ax_dag_registry       *reg,
                               ax_dag_registry_stats *out);

#endif /* AX_DAG_REGISTRY_H */
