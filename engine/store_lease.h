/*
 * store_lease.h - the scheduler_lease row and the leadership of axd: who
 * schedules, and the epoch every fenced pipeline write checks (store.h,
 * "Fencing").
 *
 * Role: axd holds the leadership on a dedicated leader connection
 * ("scheduler leadership" below) and keeps the lease row as its record;
 * the lease functions alone (expiry-based takeover) serve tests and
 * tools.
 *
 * Workload: the leader renews its row every lease_ttl/3, a standby tries
 * the lock every scheduler.standby_poll (two short statements).
 */
#ifndef AX_STORE_LEASE_H
#define AX_STORE_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

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

#endif /* AX_STORE_LEASE_H */
