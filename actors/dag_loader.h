/*
 * dag_loader.h - the DAG loader actor (DESIGN.md 2): publishes the active
 * DAG versions in the shared registry and arms their schedules.
 *
 * Role: at start (its first tick, right after the system starts) it reads
 * every DAG's active version from PostgreSQL (dag_versions.definition,
 * rebuilt with ax_dag_from_json), publishes it, records paused flags,
 * upserts the schedules rows (next_fire_at computed with schedule.h only
 * when missing, so a restart resumes where it stopped) and sends
 * ScheduleArmed to the time detector for every scheduled, unpaused DAG
 * (ScheduleDisarmed for paused ones). Later it reacts to ControlOp
 * commands: dag_changed, paused, unpaused (that DAG only) and resync
 * (everything, after the control thread lost its connection); a DAG that
 * disappeared is removed from the registry and disarmed.
 *
 * Invariants: the loader is the only writer of the registry and of the
 * definition columns of schedules; the time detector owns next_fire_at
 * once a schedule is armed.
 * Workload: thousands of DAGs once at start; then a few changes a minute.
 */
#ifndef AX_DAG_LOADER_H
#define AX_DAG_LOADER_H

#include "actor.h"
#include "pipeline.h"

/*
 * Adds the loader (name AX_A_DAG_LOADER, inbox from actors.dag_loader) to
 * sys; ctx (with its registry) must outlive the system. The initial load
 * runs on the actor's thread once the system starts; a database error
 * there is logged and retried every second. Errors: those of
 * ax_actor_system_add, AX_ENOMEM.
 */
ax_err ax_dag_loader_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

#endif /* AX_DAG_LOADER_H */
