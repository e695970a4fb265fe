/*
 * ha_cluster.h - a throwaway highly available PostgreSQL for the `ha`
 * test suite: one etcd and two Patroni nodes of PostgreSQL 15 on this
 * machine, the way docs/operations.md tells an operator to run AX's
 * database, and the faults a drill injects into it.
 *
 * Role: ax_ha_start gives a test a running cluster (a leader and a
 * synchronous streaming replica) with AX's database and role created and
 * AX's migrations applied, reachable through a multi-host DSN with
 * target_session_attrs=read-write, so libpq (and AX) always lands on the
 * current primary. The test then switches the primary over
 * (`patronictl switchover`), or kills a node the way a machine dies
 * (SIGKILL to Patroni and to PostgreSQL's whole process group), restarts
 * a killed node so it rejoins as a replica, and stops everything.
 *
 * Invariants:
 *  - Everything lives in one temp directory /tmp/ax-ha-XXXXXX (etcd's
 *    data, each node's config, data directory, socket and logs); every
 *    port is a free 127.0.0.1 TCP port chosen at start. Nothing listens
 *    on another address, nothing outside the directory is written.
 *  - PostgreSQL refuses root: as root, Patroni (and so PostgreSQL) runs
 *    as the `postgres` user. Patroni and etcd get SIGTERM as their
 *    parent-death signal, so a crashed test stops them; a directory whose
 *    owning test process is gone is swept (its postmasters killed) by the
 *    next ax_ha_start.
 *  - The cluster runs Patroni's synchronous mode: a commit returns once
 *    the replica has it, so a failover loses no acknowledged transaction
 *    (with the replica gone Patroni turns synchronous replication off
 *    and the primary goes on alone).
 *  - Every wait is bounded; failures return an ax_err whose detail says
 *    what did not happen and carries the end of the relevant log.
 *
 * Workload: one cluster per test; start takes about 10-20 s (bootstrap,
 * base backup), a switchover about 3 s, a failover after a kill about
 * the DCS TTL (8 s) plus promotion.
 */
#ifndef AX_HA_CLUSTER_H
#define AX_HA_CLUSTER_H

#include <stdint.h>

#include "ax_err.h"

#define AX_HA_NODES 2

typedef struct ax_ha_cluster ax_ha_cluster;

/*
 * Starts etcd and both Patroni nodes, waits (bounded) for a leader and a
 * synchronous streaming replica, creates role and database `ax` and
 * applies AX's migrations through the multi-host DSN. On failure returns
 * the failing step's error with its detail and leaves nothing behind.
 * The caller owns *out and must call ax_ha_stop.
 */
ax_err ax_ha_start(ax_ha_cluster **out);

/*
 * The multi-host libpq DSN of database `ax` as role `ax`:
 * host=127.0.0.1,127.0.0.1 port=P1,P2 ... target_session_attrs=read-write.
 */
const char *ax_ha_dsn(const ax_ha_cluster *c);

/* The cluster's temp directory (logs of etcd and the nodes live in it). */
const char *ax_ha_dir(const ax_ha_cluster *c);

/* Node i's Patroni member name ("n1", "n2") and PostgreSQL port. */
const char *ax_ha_node_name(const ax_ha_cluster *c, int i);
int         ax_ha_node_port(const ax_ha_cluster *c, int i);

/*
 * Which node is the writable primary now: its index, or -1 when none
 * answers as a primary (asks each node's PostgreSQL directly, 2 s connect
 * timeout per node).
 */
int ax_ha_primary(ax_ha_cluster *c);

/*
 * Waits at most timeout_us until exactly one node is a writable primary
 * and, with want_sync, the other streams from it as its synchronous
 * standby. Sets *primary (may be NULL) to its index. AX_ETIMEDOUT
 * otherwise (the detail says what was missing).
 */
ax_err ax_ha_wait(ax_ha_cluster *c, int want_sync, int64_t timeout_us,
                  int *primary);

/*
 * A planned switchover from the current primary to the other node:
 * `patronictl switchover --leader A --candidate B --force`, then waits
 * until B is the writable primary. AX_EIO when patronictl fails (its
 * output in the detail), AX_ETIMEDOUT when B never becomes primary.
 */
ax_err ax_ha_switchover(ax_ha_cluster *c, int *new_primary);

/*
 * Kills node i as a machine dies: SIGKILL to its Patroni and to its
 * postmaster's process group (every backend with it). Returns at once;
 * the surviving node's Patroni promotes itself once the leader key
 * expires in etcd.
 */
ax_err ax_ha_kill_node(ax_ha_cluster *c, int i);

/*
 * Starts node i's Patroni again (after ax_ha_kill_node): it rewinds its
 * data directory if needed and rejoins as a replica.
 */
ax_err ax_ha_restart_node(ax_ha_cluster *c, int i);

/* A free TCP port on 127.0.0.1 (for the test's own daemons), or -1. */
int ax_ha_free_port(void);

/* Prints the end of the etcd and Patroni logs to stderr. */
void ax_ha_dump(ax_ha_cluster *c);

/* Stops both nodes (Patroni shuts PostgreSQL down), then etcd, kills what
 * is left and removes the directory. Accepts NULL. */
void ax_ha_stop(ax_ha_cluster *c);

#endif /* AX_HA_CLUSTER_H */
