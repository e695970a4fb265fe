/*
 * store_sched.h - batched SQL of the scheduling actors: the DAG loader
 * (active DAG versions, schedules rows), the time detector (DAG runs
 * created with their schedules' next fire times in one transaction) and
 * the scheduler lease of axd.
 *
 * Role: keeps the SQL of the sched area in one module; the actors only
 * fill rows. Every hot-path call is one round trip for the whole batch
 * (unnest of array parameters built with ax_sqlarr), prepared once per
 * connection.
 *
 * Invariants: instants cross this API as UTC microseconds, 0 meaning SQL
 * NULL where a field says so. Run creation is idempotent on (dag_id,
 * logical_date): a run that exists is reported with run_id 0 and is not
 * touched, so a replayed fire never creates or announces a run twice.
 *
 * Workload: the time detector fires up to a few hundred schedules per
 * tick; the loader touches thousands of DAGs once at start-up.
 */
#ifndef AX_STORE_SCHED_H
#define AX_STORE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* --- PostgreSQL array literals ------------------------------------------
 */

/* A growing array literal "{...}"; zeroed memory is an empty array. */
typedef struct ax_sqlarr {
	char  *buf;
	size_t len, cap;
	size_t n;   /* elements so far */
	int    oom; /* an allocation failed: ax_sqlarr_end returns NULL */
} ax_sqlarr;

void ax_sqlarr_int(ax_sqlarr *a, int64_t v);
/* Appends NULL when v == 0 (the "0 means NULL" convention above). */
void ax_sqlarr_int0(ax_sqlarr *a, int64_t v);
/* Appends s quoted and escaped; NULL appends SQL NULL. */
void ax_sqlarr_text(ax_sqlarr *a, const char *s);
void ax_sqlarr_bool(ax_sqlarr *a, int v);
/* Closes the literal and returns it (valid until fini); NULL on OOM. */
const char *ax_sqlarr_end(ax_sqlarr *a);
void        ax_sqlarr_fini(ax_sqlarr *a);

/* --- DAG loader ---------------------------------------------------------
 */

/*
 * Reads the active version of every DAG (dag_name NULL) or of one DAG.
 * *res columns: 0 dags.id, 1 name, 2 paused ('t'/'f'), 3
 * active_version_id, 4 definition (JSON text); the caller PQclear()s it.
 * DAGs without an active version are left out.
 */
ax_err ax_store_sched_dags(ax_store *s, const char *dag_name, PGresult **res);

/* One schedules row to upsert (strings borrowed for the call). */
typedef struct ax_store_sched_row {
	/* in */
	int64_t     dag_id;
	const char *expression; /* ax_dag_schedule_expr() */
	const char *tz;
	int         catchup;
	int64_t     start_us, end_us; /* 0: NULL */
	int64_t     first_fire_us;    /* used when the row has no next fire
	                                 and never fired, or its expression or
	                                 zone changed; 0: NULL */
	/* out */
	int64_t schedule_id;
	int64_t next_fire_us; /* as stored afterwards; 0: NULL (nothing left)
	                       */
} ax_store_sched_row;

/*
 * Upserts n schedules rows in one statement (ON CONFLICT (dag_id)): the
 * definition columns are overwritten; next_fire_at is kept when present
 * (a restart neither skips nor repeats a period) unless the expression or
 * time zone changed. Fills the out fields. AX_EINVAL for n over 10000.
 */
ax_err ax_store_sched_upsert(ax_store *s, ax_store_sched_row *rows, size_t n);

/* Deletes the schedules rows of DAGs that no longer have a schedule. */
ax_err ax_store_sched_delete(ax_store *s, const int64_t *dag_ids, size_t n);

/* --- time detector ------------------------------------------------------
 */

/* One DAG run to create (and the schedule it advances, if any). */
typedef struct ax_store_run_row {
	/* in */
	int64_t     dag_id;
	int64_t     dag_version_id;
	const char *run_type; /* "scheduled" | "manual" | "backfill" */
	int64_t     logical_us;
	int64_t     interval_start_us, interval_end_us;
	int64_t     due_us;       /* the fire instant (theoretical start) */
	const char *conf_json;    /* params of a manual run; NULL: {} */
	int64_t     schedule_id;  /* 0: no schedule to update */
	int64_t     next_fire_us; /* schedules.next_fire_at; 0: NULL */
	/* out */
	int64_t run_id; /* new dag_runs.id; 0 when the run existed */
} ax_store_run_row;

/*
 * In the caller's transaction (or its own when none is open): inserts the
 * n runs (ON CONFLICT (dag_id, logical_date) DO NOTHING, state QUEUED,
 * due_at), then sets next_fire_at / last_fire_at of their schedules (the
 * last row of a schedule wins) — two prepared statements, one round trip
 * each. Fills run_id. AX_EINVAL for n over 10000.
 */
ax_err ax_store_sched_create_runs(ax_store *s, ax_store_run_row *rows,
                                  size_t n);

/*
 * Sets schedules.next_fire_at (0: NULL) of n schedules without creating a
 * run (a disarmed schedule whose period was skipped, a recomputation).
 */
ax_err ax_store_sched_set_next(ax_store *s, const int64_t *schedule_ids,
                               const int64_t *next_fire_us, size_t n);

/* --- scheduler lease ----------------------------------------------------
 */

/*
 * Takes the scheduler lease for holder when it is free, expired or
 * already held by holder: epoch + 1, expires_at = now() + ttl_us (database
 * clock). *epoch receives the new epoch. AX_EBUSY (detail: the holder and
 * when its lease expires) when another holder's lease is still valid.
 */
ax_err ax_store_sched_lease_take(ax_store *s, const char *holder,
                                 int64_t ttl_us, int64_t *epoch);

/*
 * Renews the lease held with epoch: expires_at = now() + ttl_us.
 * AX_EBUSY when the lease was taken over (the epoch moved on): the caller
 * must stop scheduling.
 */
ax_err ax_store_sched_lease_renew(ax_store *s, const char *holder,
                                  int64_t epoch, int64_t ttl_us);

/* Gives the lease up (expires it now) when still held with epoch. */
ax_err ax_store_sched_lease_release(ax_store *s, const char *holder,
                                    int64_t epoch);

#endif /* AX_STORE_SCHED_H */
