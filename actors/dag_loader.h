/*
 * dag_loader.h - the DAG loader actor (DESIGN.md 2): keeps the schedules
 * rows in step with the active DAG versions and arms them in the time
 * detector.
 *
 * Role: at start (its first tick, right after the system starts) it reads
 * every DAG in slices of a few thousand (keyset paging on dags.id): name,
 * ids, paused flag, the schedule columns of its active version (migration
 * 0005: expression, zone, catchup, start, end) and its schedules row. It
 * never decodes a definition: DAG versions are decoded lazily by the
 * registry (dag_registry.h) when an actor first needs one, so a million
 * DAGs arm in seconds and in little memory. It records paused flags,
 * upserts the schedules rows that are missing or no longer match their
 * version (next_fire_at computed with schedule.h only when missing, so a
 * restart resumes where it stopped; an unchanged restart writes nothing),
 * and sends ScheduleArmed to the time detector for every scheduled,
 * unpaused DAG (ScheduleDisarmed for the others, except on the very first
 * pass, when nothing is armed yet). The very first pass runs in two
 * phases: the schedules due within ten minutes are written and armed
 * first, the rows of the later ones (all of them on a first start) after,
 * so the time detector fires the due ones while the rest is written; a
 * schedule is always armed after its row is written, and first fires
 * count from the instant the pass began. A full pass ends with a sweep marker
 * (ScheduleDisarmed.sweep) that disarms the schedules of DAGs that are
 * gone. Then it warms the registry with the DAGs due in the next ten
 * minutes, soonest first, up to registry.cache_dags. Later it reacts to
 * ControlOp commands: dag_changed, paused, unpaused (that DAG only;
 * dag_changed also invalidates the DAG's cached version), submit (each
 * DAG it names, as dag_changed; its control_command row is marked applied
 * once they are loaded) and resync
 * (everything, after the control thread lost its connection: every cached
 * current version is invalidated); a DAG that disappeared is removed from the
 * registry and disarmed.
 *
 * Invariants: the loader is the only writer of the registry's paused
 * flags and the only one that invalidates its cached versions, and the
 * only writer of the definition columns of schedules;
 * the time detector owns next_fire_at once a schedule is armed. Memory per
 * DAG is O(1) and transient: one slice of rows at a time, no set of every
 * DAG name.
 * Workload: up to 1,000,000 DAGs once at start; then a few changes a
 * minute.
 */
#ifndef AX_DAG_LOADER_H
#define AX_DAG_LOADER_H

#include "actor.h"
#include "pipeline.h"

/*
 * Adds the loader (name AX_A_DAG_LOADER, inbox from actors.dag_loader) to
 * sys; ctx (with its registry) must outlive the system. Points the
 * registry at ctx->dsn for its lazy loads and bounds it with the config
 * key registry.cache_dags. The initial load runs on the actor's thread
 * once the system starts; a database error there is logged and retried
 * every second. Errors: those of ax_actor_system_add, store errors,
 * AX_ENOMEM.
 */
ax_err ax_dag_loader_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx);

#endif /* AX_DAG_LOADER_H */
