/*
 * dag_yaml.h - the YAML front end of the DAG format (docs/dag-format.md).
 *
 * Role: turns files of `kind: DAG` and `kind: TaskTemplate` documents
 * (several per file, separated by ---) into the model of dag.h, with the
 * FILE:LINE:COL of every value. Shape errors (unknown keys with a
 * did-you-mean, wrong types, bad enum values, bad durations, limits) are
 * recorded in the set as they are found, and loading goes on so that one
 * run reports every error of a file; the cross-references (tasks,
 * templates, cron, zones, template variables) are checked afterwards by
 * ax_dagset_validate() (dag_validate.h).
 *
 * Hostile input: the file size, the number of documents, the nesting
 * depth and the number of nodes that aliases add are bounded by the set's
 * ax_dag_limits and checked in a streaming pre-pass, before libyaml
 * builds a tree, so a "billion laughs" or a deeply nested file costs
 * one linear scan. Aliases may only refer to a completed node (no cycles).
 * `<<` merge keys are supported.
 */
#ifndef AX_DAG_YAML_H
#define AX_DAG_YAML_H

#include <stddef.h>

#include "dag.h"

/*
 * Parses the YAML text buf (len bytes) named file into set. Returns AX_OK
 * when no error was found, AX_EPARSE when errors were recorded in set
 * (shape or syntax), AX_ELIMIT when a limit stopped loading (also
 * recorded), AX_ENOMEM. DAGs and templates that parsed are added even
 * when others in the file failed (their `valid` flag says so for DAGs).
 */
ax_err ax_dag_yaml_load_buf(ax_dagset *set, const char *file, const char *buf,
                            size_t len);

/*
 * Reads path and parses it as ax_dag_yaml_load_buf() does. A file that
 * cannot be read is an error recorded at path:1:1 and AX_EIO.
 */
ax_err ax_dag_yaml_load_file(ax_dagset *set, const char *path);

#endif /* AX_DAG_YAML_H */
