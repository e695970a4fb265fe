/*
 * dag_validate.h - the semantic checks of a loaded DAG set.
 *
 * Role: after dag_yaml.c has loaded every file of a submission (so that
 * templates and DAGs may sit in different files), this resolves and
 * checks the cross-references and records each problem in the set as
 * `FILE:LINE:COL: error: MESSAGE`: names, duplicate DAGs / templates /
 * tasks, unknown or self dependencies, cycles (printed a -> b -> a, in
 * run order), cron expressions (pointing at the bad field), time zones,
 * start/end/at instants, unknown templates, task types, commands, env
 * names and unknown template variables (render.h check mode).
 * It also computes each task's effective definition, each DAG's
 * topological order, and the content hashes (dag.h).
 */
#ifndef AX_DAG_VALIDATE_H
#define AX_DAG_VALIDATE_H

#include "dag.h"

/*
 * Validates every DAG and template of set. Returns AX_OK when the set has
 * no error at all (including the loader's), AX_EINVAL when it has some
 * (sorted, see ax_dagset_print_diags), AX_ENOMEM. A DAG without an error
 * of its own has valid = 1, its eff, topo and hash filled, even when
 * other DAGs of the set are invalid. Call once per set.
 */
ax_err ax_dagset_validate(ax_dagset *set);

/* Called for each `| raw` use: where it is and "OWNER FIELD: MESSAGE". */
typedef void (*ax_dag_raw_fn)(void *arg, ax_pos pos, const char *what);

/*
 * Reports every `| raw` filter in the set's commands, env and params
 * (templates, DAG defaults, DAG params, tasks as written), in document
 * order per owner, so `axctl dag validate` can warn about each value
 * written into a command without shell quoting.
 */
void ax_dagset_raw_uses(const ax_dagset *set, ax_dag_raw_fn fn, void *arg);

/*
 * 1 when s is a valid DAG or TaskTemplate name: words of letters, digits,
 * '_' and '-' separated by single dots, 1 to 200 bytes, not starting
 * with '-' or a dot, not ending with a dot. Pure.
 */
int ax_dag_name_valid(const char *s);

#endif /* AX_DAG_VALIDATE_H */
