/*
 * store_deps.h - the store functions of the dependency detector, by
 * table: the run life, wait reasons and cross-DAG checks of dag_runs
 * (store_runs.h) and the manual clear of task_instances
 * (store_instances.h). Include this, or the table's header.
 */
#ifndef AX_STORE_DEPS_H
#define AX_STORE_DEPS_H

#include "store_instances.h"
#include "store_runs.h"

#endif /* AX_STORE_DEPS_H */
