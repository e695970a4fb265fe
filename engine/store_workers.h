/*
 * store_workers.h - the workers table: leases of ax-worker processes.
 *
 * Role: the queue service (actors/queue/, leases in queue_workers.c) owns
 * worker leases in memory (its timers decide when a lease lapses; nothing
 * polls the database) and mirrors them into the `workers` table for
 * `axctl`, the API and audits, with one batched upsert per drained
 * batch. It writes a worker at most once per heartbeat interval unless
 * its state changes (the queue decides when; this module only writes).
 *
 * Invariants: one round trip per call (unnest of array parameters,
 * INSERT ... ON CONFLICT (id) DO UPDATE), so n rows cost one statement;
 * a row written twice ends with the last values.
 *
 * Workload: tens to thousands of workers heartbeating every few seconds.
 */
#ifndef AX_STORE_WORKERS_H
#define AX_STORE_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* One worker's row. Strings are borrowed for the duration of the call. */
typedef struct ax_store_worker_row {
	const char *id;                  /* worker id, required */
	const char *worker_group;        /* required */
	int32_t     slots;               /* >= 0 */
	int32_t     used_slots;          /* >= 0 */
	const char *hostname;            /* may be NULL */
	int32_t     pid;                 /* 0: unknown */
	const char *state;               /* ACTIVE, DRAINING, LOST or GONE */
	int64_t     registered_at_us;    /* UTC us */
	int64_t     heartbeat_at_us;     /* UTC us */
	int64_t     lease_expires_at_us; /* UTC us; stored as the database
	                                    time of the write plus
	                                    (lease_expires_at_us -
	                                    heartbeat_at_us) */
	/* the live water level (migration 0018); has_usage 0: NULL */
	int     has_usage;
	int32_t load_x100, cpus, tasks_cpu_milli;
	int64_t mem_total_kb, mem_available_kb, tasks_rss_kb;
} ax_store_worker_row;

/*
 * Upserts n rows (n <= AX_STORE_BATCH_MAX) in one statement. AX_EINVAL names
 * the first bad row (empty id or group, negative slots, unknown state);
 * database errors as store.h. Runs inside the caller's transaction when one is
 * open, else on its own (autocommit: one statement).
 */
ax_err ax_store_workers_upsert(ax_store *s, const ax_store_worker_row *rows,
                               size_t n);

#endif /* AX_STORE_WORKERS_H */
