/*
 * pg_embed.h - a private PostgreSQL cluster under an AX home directory.
 *
 * Role: when no DSN is configured, `axctl db`, `axctl standalone` and the
 * test harness run their own PostgreSQL 15 cluster: data in $home/pg/data,
 * server log in $home/pg/server.log, and a Unix socket in $home/pg/run (no
 * TCP listener). The cluster is created on first use (initdb + database
 * "ax"), started when not running, reused when running, and stopped with a
 * fast shutdown.
 *
 * Invariants: the binaries come from one directory (pgbin: the argument,
 * else $AX_PGBIN, else AX_PGBIN_DEFAULT from the build). PostgreSQL never
 * runs as root: as root the server and initdb run as the `postgres` system
 * user (or `ax`, created when neither exists), which owns $home/pg; the
 * home directory itself may stay root-owned but must be traversable by it.
 * Children are started with fork + exec and argument vectors, never through
 * a shell. All configuration AX sets lives in $home/pg/data/ax.conf, which
 * is rewritten on every start (so a copied data directory picks up its own
 * socket directory).
 *
 * Workload: a handful of calls per process (CLI, test fixtures); start-up
 * time is dominated by PostgreSQL itself. Not thread-safe per object; two
 * processes on one home are serialised by a lock file ($home/pg/lock).
 */
#ifndef AX_PG_EMBED_H
#define AX_PG_EMBED_H

#include "ax_err.h"

/* The port in the socket name; the socket directory is private anyway. */
#define AX_PG_EMBED_PORT 5432

/* The database AX uses, created right after initdb. */
#define AX_PG_EMBED_DB "ax"

/* The superuser role initdb creates (trust auth over the private socket). */
#define AX_PG_EMBED_USER "ax"

typedef struct ax_pg_embed ax_pg_embed;

/*
 * Prepares (but does not touch the disk for) a cluster under home. pgbin
 * may be NULL: $AX_PGBIN, else the build's default. Both strings are
 * copied. Fails with AX_EINVAL on an empty home or a socket path too long
 * for a Unix socket (about 100 bytes), AX_ENOMEM. On success the caller
 * owns *out and frees it with ax_pg_embed_free.
 */
ax_err ax_pg_embed_new(const char *home, const char *pgbin, ax_pg_embed **out);

/* Frees the handle; the server keeps running (use down to stop it). */
void ax_pg_embed_free(ax_pg_embed *e);

/*
 * Test-only speed settings, applied at the next up: fsync, synchronous
 * commit and full page writes off, smaller shared buffers, initdb without
 * sync. A crash of the machine can then lose or corrupt the cluster, so
 * never for real use. Default off.
 */
void ax_pg_embed_set_fast(ax_pg_embed *e, int fast);

/*
 * Makes the cluster usable: creates home and $home/pg when missing, runs
 * initdb when the cluster does not exist, starts the server when it does
 * not answer, waits until it accepts connections (60 s at most) and
 * creates database "ax" when missing. Idempotent: on a running cluster it
 * only checks. Errors (detail says which path or command, and what to do):
 * AX_EPERM home or $home/pg not writable, or not reachable by the server's
 * user; AX_EIO other file-system failures; AX_ENOENT binaries missing
 * (install postgresql-15 or set AX_PGBIN); AX_EINTERNAL initdb failed
 * (tail of its log); AX_EDBCONN server did not start (tail of server.log);
 * AX_ETIMEDOUT no answer within the deadline; AX_EBUSY another process
 * holds the home's lock for too long.
 */
ax_err ax_pg_embed_up(ax_pg_embed *e);

/*
 * Stops the server with a fast shutdown (SIGINT: running transactions are
 * rolled back) and waits until it has exited; falls back to an immediate
 * shutdown after 60 s. Idempotent: OK when the cluster is not running or
 * does not exist.
 */
ax_err ax_pg_embed_down(ax_pg_embed *e);

/*
 * Kills the server the way a crash does: SIGKILL to the postmaster and
 * every process of it (nothing flushed, no checkpoint; WAL that was not
 * yet written is lost, and the next ax_pg_embed_up runs crash recovery).
 * For fault drills. Waits until every process is gone; OK when the
 * cluster is not running or does not exist. Start it again before
 * removing it: PostgreSQL deletes the dead server's System V shared
 * memory segment at that start, and a crashed cluster removed without one
 * leaves the segment behind (kernel.shmmni of them at most, then no
 * server starts), so this is no faster way to stop a throwaway cluster.
 */
ax_err ax_pg_embed_crash(ax_pg_embed *e);

/*
 * Sets *running to 1 when the server answers on its socket (or is still
 * starting up), else 0. Never starts anything.
 */
ax_err ax_pg_embed_status(ax_pg_embed *e, int *running);

/* libpq conninfo for database "ax" over the private socket. */
const char *ax_pg_embed_dsn(const ax_pg_embed *e);

/* The directories and files in use (for messages and tests). */
const char *ax_pg_embed_home(const ax_pg_embed *e);
const char *ax_pg_embed_datadir(const ax_pg_embed *e);
const char *ax_pg_embed_logpath(const ax_pg_embed *e);
const char *ax_pg_embed_pgbin(const ax_pg_embed *e);

#endif /* AX_PG_EMBED_H */
