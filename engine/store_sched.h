/*
 * store_sched.h - batched SQL of the schedules table and the DAG reads
 * of the scheduling actors: the DAG loader (active DAG versions,
 * schedules rows) and the time detector (next fire times of schedules
 * that fire without a run). It includes store_runs.h (the runs the time
 * detector creates with their schedules) and store_lease.h (the
 * scheduler lease and leadership), which its callers use with these.
 *
 * Role: keeps the SQL of schedules in one module; the actors only fill
 * rows. Every call is one round trip for the whole batch (unnest of
 * array literals, store_internal.h), prepared once per connection.
 *
 * Invariants: instants cross this API as UTC microseconds, 0 meaning SQL
 * NULL where a field says so.
 *
 * Workload: the loader touches thousands of DAGs once at start-up; the
 * time detector updates up to a few hundred schedules per tick.
 */
#ifndef AX_STORE_SCHED_H
#define AX_STORE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"
#include "store_lease.h"
#include "store_runs.h"

/* --- DAG loader ---------------------------------------------------------
 */

/* Columns of ax_store_sched_dags(). */
enum {
	AX_SCHED_C_DAG_ID = 0,  /* dags.id */
	AX_SCHED_C_NAME,        /* dags.name */
	AX_SCHED_C_PAUSED,      /* 't' / 'f' */
	AX_SCHED_C_VERSION_ID,  /* dags.active_version_id */
	AX_SCHED_C_EXPR,        /* the version's schedule_expr; NULL: none */
	AX_SCHED_C_TZ,          /* its schedule_tz */
	AX_SCHED_C_CATCHUP,     /* its schedule_catchup, 't' / 'f' */
	AX_SCHED_C_START,       /* its start as written; NULL: open */
	AX_SCHED_C_END,         /* its end as written; NULL: open */
	AX_SCHED_C_SCHED_ID,    /* schedules.id; NULL: no row */
	AX_SCHED_C_ROW_EXPR,    /* schedules.expression */
	AX_SCHED_C_ROW_TZ,      /* schedules.tz */
	AX_SCHED_C_ROW_CATCHUP, /* schedules.catchup */
	AX_SCHED_C_ROW_START,   /* start_at, UTC us; NULL: open */
	AX_SCHED_C_ROW_END,     /* end_at, UTC us; NULL: open */
	AX_SCHED_C_NEXT,        /* next_fire_at, UTC us; NULL: none */
	AX_SCHED_C_FIRED,       /* 't' when last_fire_at is set */
};

/*
 * Reads one slice of DAGs for the loader, never their definitions: the
 * DAG, the schedule columns of its active version (migration 0005) and
 * its schedules row (columns AX_SCHED_C_*), ordered by dags.id, only ids
 * over after_id, at most limit rows (keyset paging: pass the last id of
 * a slice as after_id of the next). dag_name non-NULL: that DAG only
 * (after_id and limit unused). DAGs without an active version are left
 * out. Every slice costs about the same (15 ms for 5000 DAGs here). The
 * connection runs without parallel plans afterwards. The caller
 * PQclear()s *res.
 */
ax_err ax_store_sched_dags(ax_store *s, const char *dag_name, int64_t after_id,
                           int limit, PGresult **res);

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
 * time zone changed. Fills the out fields (rows matched by position, so
 * a batch costs O(n)). AX_EINVAL for n over AX_STORE_BATCH_MAX.
 */
ax_err ax_store_sched_upsert(ax_store *s, ax_store_sched_row *rows, size_t n);

/* Deletes the schedules rows of DAGs that no longer have a schedule. */
ax_err ax_store_sched_delete(ax_store *s, const int64_t *dag_ids, size_t n);

/*
 * Sets schedules.next_fire_at (0: NULL) of n schedules without creating a
 * run (a disarmed schedule whose period was skipped, a recomputation).
 */
ax_err ax_store_sched_set_next(ax_store *s, const int64_t *schedule_ids,
                               const int64_t *next_fire_us, size_t n);

#endif /* AX_STORE_SCHED_H */
