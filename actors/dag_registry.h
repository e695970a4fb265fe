/*
 * dag_registry.h - the loaded DAG versions, shared read-only by every
 * actor of axd.
 *
 * Role: the DAG loader publishes each DAG's active version here; the time
 * detector, dependency detector, resource detector, instance generator and
 * renderer read them. A published entry is immutable: a new version of a
 * DAG is a new entry that becomes the DAG's current one, while runs still
 * planned against an older version keep that entry alive through their
 * reference.
 *
 * Invariants:
 *  - An entry (and the ax_dag inside it, its ax_dagset) is never written
 *    after publication and is freed when its last reference is released.
 *    The registry holds one reference on each DAG's current entry and on
 *    entries loaded with ax_dag_registry_load_version (pinned until the
 *    registry is freed: they serve runs of older versions, few of them).
 *  - Lookups by DAG name and by version id are O(1) (hash tables under a
 *    rwlock; readers share it). References are atomic counters, so taking
 *    and releasing one costs no lock in the common case.
 *  - Thread-safe: every function may be called from any thread.
 *
 * Workload: a few publishes per minute at most; lookups on every Due and
 * every plan (thousands per second).
 */
#ifndef AX_DAG_REGISTRY_H
#define AX_DAG_REGISTRY_H

#include <stdatomic.h>
#include <stdint.h>

#include "ax_err.h"
#include "dag.h"
#include "store.h"

typedef struct ax_dag_registry ax_dag_registry;

/* One published DAG version; immutable once published. */
typedef struct ax_dag_entry {
	int64_t       dag_id;     /* dags.id */
	int64_t       version_id; /* dag_versions.id */
	const ax_dag *dag;        /* merged, validated; owned by the entry */
	/* private: */
	ax_dagset              *set_;    /* owns dag */
	atomic_int              refs_;   /* references held */
	struct ax_dag_registry *reg_;    /* the registry it belongs to */
	struct ax_dag_entry    *vnext_;  /* version hash chain (reg lock) */
	uint32_t               *tix_;    /* task name hash -> index + 1 */
	uint32_t                tcap_;   /* slots in tix_ (power of two) */
	int                     pinned_; /* registry holds a load ref */
} ax_dag_entry;

/* Creates an empty registry. AX_ENOMEM. */
ax_err ax_dag_registry_new(ax_dag_registry **out);

/*
 * Frees the registry and the entries it still references. Every
 * reference taken by callers must have been released first (an entry
 * still referenced is freed anyway and the count is logged). NULL is
 * fine.
 */
void ax_dag_registry_free(ax_dag_registry *reg);

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
 * Forgets the current version of dag_name (the DAG was deleted): lookups
 * by name return NULL afterwards; references held live on. AX_ENOENT
 * when the DAG has no current version.
 */
ax_err ax_dag_registry_remove(ax_dag_registry *reg, const char *dag_name);

/* A reference to the current version of dag_name, or NULL. */
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
 * Paused flags by DAG name (dags.paused), independent of versions: a DAG
 * may be paused before it has a loaded version.
 */
void ax_dag_registry_set_paused(ax_dag_registry *reg, const char *dag,
                                int paused);
int  ax_dag_registry_paused(ax_dag_registry *reg, const char *dag);

/*
 * Loads version version_id from PostgreSQL (dag_versions.definition,
 * rebuilt with ax_dag_from_json) unless it is already alive here. It
 * becomes the DAG's current version when it is the DAG's active version
 * and the DAG has none loaded; otherwise the registry pins it. Errors:
 * AX_ENOENT (no such version), AX_EPARSE (a definition that does not
 * decode: the detail names the version and the JSON pointer), store
 * errors. Call from a thread that owns store.
 */
ax_err ax_dag_registry_load_version(ax_dag_registry *reg, ax_store *store,
                                    int64_t version_id);

/* Number of DAGs with a current version, and of live entries. */
void ax_dag_registry_counts(ax_dag_registry *reg, size_t *dags,
                            size_t *entries);

#endif /* AX_DAG_REGISTRY_H */
