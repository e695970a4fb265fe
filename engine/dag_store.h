/*
 * dag_store.h - DAG and task template versions in PostgreSQL.
 *
 * Role: the DAG loader (and `axctl dag load`, and later the API) hands
 * validated DAGs and templates here. Each becomes an immutable, content-
 * hashed row of dag_versions / task_template_versions (hash: dag.h), and
 * the dags / task_templates row points at its active version.
 * Resubmitting the same content changes nothing ("unchanged"); different
 * content inserts version N+1 and makes it active ("updated"); content
 * equal to an older version makes that version active again ("updated",
 * no new row). Concurrent submitters of one name are serialised by a row
 * lock on its dags / task_templates row.
 * Invariants: only valid DAGs/templates are accepted (AX_EINVAL
 * otherwise); each submission is one transaction (ax_store_tx).
 * Workload: submissions, rare; a folder of DAGs at start-up.
 */
#ifndef AX_DAG_STORE_H
#define AX_DAG_STORE_H

#include <stdint.h>

#include "dag.h"
#include "store.h"

typedef enum ax_dag_store_outcome {
	AX_DAG_CREATED = 0, /* a new name; version 1 */
	AX_DAG_UNCHANGED,   /* the active version has this content */
	AX_DAG_UPDATED,     /* another version became active */
} ax_dag_store_outcome;

/* "created", "unchanged", "updated". */
const char *ax_dag_store_outcome_name(ax_dag_store_outcome o);

typedef struct ax_dag_store_result {
	ax_dag_store_outcome outcome;
	int64_t              id;         /* dags.id / task_templates.id */
	int64_t              version_id; /* the active version's row id */
	int                  version;    /* its number, 1, 2, ... */
} ax_dag_store_result;

/*
 * Stores dag (validated: valid = 1 and hash set) with source (a file
 * path or "api"; may be NULL). Fills *res. Errors from store.h
 * (AX_EDB..., with detail) or AX_EINVAL for an invalid DAG.
 */
ax_err ax_dag_store_submit(ax_store *s, const ax_dag *dag, const char *source,
                           ax_dag_store_result *res);

/* The same for a task template. */
ax_err ax_dag_store_submit_template(ax_store *s, const ax_task_template *t,
                                    const char          *source,
                                    ax_dag_store_result *res);

#endif /* AX_DAG_STORE_H */
