/*
 * store_sched.h - batched SQL of the scheduling actors: the DAG loader
 * (active DAG versions, schedules rows), the time detector (DAG runs
 * created with their schedules' next fire times in one transaction),
 * the scheduler lease row, and the leadership of axd (the advisory lock
 * of its leader connection, "scheduler leadership" below).
 *
 * Role: keeps the SQL of the sched area in one module; the actors only
 * fill rows. Every hot-path call is one round trip for the whole batch
 * (unnest of array parameters built with ax_sqlarr of store.h), prepared
 * once per connection.
 *
 * Invariants: instants cross this API as UTC microseconds, 0 meaning SQL
 * NULL where a field says so. Run creation is idempotent on (dag_id,
 * logical_date): a run that exists is reported with run_id 0 and is not
 * touched, so a replayed fire never creates or announces a run twice.
 *
 * Workload: the time detector fires up to a few hundred schedules per
 * tick; the loader touches thousands of DAGs once at start-up; the
 * leader renews its row every lease_ttl/3, a standby tries the lock
 * every scheduler.standby_poll (two short statements).
 */
#ifndef AX_STORE_SCHED_H
#define AX_STORE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

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
 * a batch costs O(n)). AX_EINVAL for n over 10000.
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
 *
 * The lease row by itself, with expiry-based takeover (no lock); axd uses
 * the leadership below, which keeps this row as its record.
 */

/*
 * Takes the scheduler lease for holder when it is free, expired or
 * already held by holder: epoch + 1, expires_at = now() + ttl_us (database
 * clock). *epoch receives the new epoch. AX_EBUSY (detail: the holder and
 * when its lease expires) when another holder's lease is still valid.
 * The epoch moves under the EXCLUSIVE lock that fenced transactions
 * conflict with (store.h, "Fencing"), so the take waits for the deposed
 * holder's transactions in flight: at most ttl_us / 3 (at least 100 ms),
 * then AX_EBUSY (try again later). A valid lease is only read: a standby
 * polling it stalls nobody.
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

/* --- scheduler leadership -----------------------------------------------
 *
 * Who schedules is decided by a session-level advisory lock
 * (AX_SCHED_LOCK_KEY) held on a dedicated connection, the leader
 * connection: PostgreSQL frees it the moment that session ends (the axd
 * killed, its socket closed, the server restarted), so a standby polling
 * it takes over at once rather than after a lease lapses. The
 * scheduler_lease row stays the record of the leadership (epoch, holder,
 * expires_at for display and for a hung holder, below) and the fence of
 * every pipeline write (store.h, "Fencing"): a take holds the lock, then
 * bumps the epoch under the EXCLUSIVE lock the fenced transactions
 * conflict with, so a deposed leader writes nothing afterwards.
 *
 * A holder that hangs (SIGSTOP, a stuck host) keeps its session and so
 * the lock: its row stops being renewed, and once expires_at has passed
 * (database clock) a standby ends that session (pg_terminate_backend,
 * same role or pg_signal_backend) and takes the lock. The holder itself
 * stops deciding when it cannot renew for a whole lease_ttl, which is no
 * later than that expiry.
 *
 * The leader connection never reconnects by itself: its end is the loss
 * of the leadership, which the caller must see (ax_store_sched_leader_
 * alive, or any call failing with AX_EDBCONN). It sets libpq TCP
 * keepalives and tcp_user_timeout, and the server's tcp_keepalives_* and
 * tcp_user_timeout of its session, from the lease ttl: over TCP each
 * side notices a dead peer within about ttl / 2 (on a Unix socket the
 * kernel tells at once and these are unused).
 */

/* The advisory lock key: 'AXsched' in ASCII (pg_locks: classid 0x41587363,
 * objid 0x68656400, objsubid 1). */
#define AX_SCHED_LOCK_KEY 0x4158736368656400LL

typedef struct ax_store_sched_leader ax_store_sched_leader;

/*
 * Opens the leader connection to dsn (not fenced) for a lease of ttl_us.
 * AX_EDBCONN (detail: the redacted DSN and libpq's reason) when it
 * cannot connect; the caller owns *out and closes it with
 * ax_store_sched_leader_close. One thread at a time.
 */
ax_err ax_store_sched_leader_open(const char *dsn, int64_t ttl_us,
                                  ax_store_sched_leader **out);

/* Ends the session, which frees the lock if held. Accepts NULL. */
void ax_store_sched_leader_close(ax_store_sched_leader *l);

/* The connection's socket, to poll for its end (-1 when none). */
int ax_store_sched_leader_socket(const ax_store_sched_leader *l);

/*
 * Reads what the server sent without blocking: AX_OK while the session
 * lives, AX_EDBCONN (detail: libpq's reason) once it has ended, e.g. the
 * server restarted or an administrator or a standby terminated it; the
 * lock is then lost.
 */
ax_err ax_store_sched_leader_alive(ax_store_sched_leader *l);

/*
 * One attempt to become the leader: takes the lock without waiting, then
 * bumps the epoch (holder, acquired_at, expires_at = now() + ttl_us),
 * whatever the row says: holding the lock is the right to the lease.
 * *epoch receives the new epoch. AX_EBUSY (detail: the holder and until
 * when) while another session holds the lock; when that holder's row
 * expired, its session is terminated first (logged) and the lock tried
 * once more. Fenced transactions of the deposed leader still open after
 * a short wait (a hung process keeps them open) are terminated so the
 * bump cannot stall. AX_EDBCONN when the connection is gone (close it and
 * open another). On any error the lock is not held.
 */
ax_err ax_store_sched_leader_take(ax_store_sched_leader *l, const char *holder,
                                  int64_t ttl_us, int64_t *epoch);

/*
 * Renews the row of the lease held with epoch (expires_at = now() +
 * ttl_us). AX_EFENCED when the epoch moved on (the row was taken by hand
 * or by an axd that does not use the lock): stop scheduling;
 * AX_EDBCONN when the session ended (the lock is lost); AX_EDB and the
 * like otherwise (retry).
 */
ax_err ax_store_sched_leader_renew(ax_store_sched_leader *l,
                                   const char *holder, int64_t epoch,
                                   int64_t ttl_us);

/*
 * Gives the leadership up: expires the row when still held with epoch,
 * and frees the lock (a standby takes over at its next poll).
 */
ax_err ax_store_sched_leader_release(ax_store_sched_leader *l,
                                     const char *holder, int64_t epoch);

#endif /* AX_STORE_SCHED_H */
