/*
 * store_events.h - batched SQL of the event_log table and its dead
 * letters: the idempotent insert of events (every actor that changes
 * state writes its events in the same transaction; the event emitter
 * writes the others) and the event_dead_letter row that keeps an event
 * PostgreSQL refuses.
 *
 * Invariants:
 * - The insert is idempotent on event_id: a replayed event is left out,
 *   so a batch redone after a lost COMMIT writes each event once.
 * - Every function runs inside the caller's transaction when one is open
 *   (so a state change and its events commit together), else in its own.
 *
 * Workload: batches of up to a few thousand events; one statement for a
 * small batch, a lookup of the stored ids then COPY for a large one.
 */
#ifndef AX_STORE_EVENTS_H
#define AX_STORE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* One event for event_log (fields of ax.Event; strings borrowed). */
typedef struct ax_store_event_row {
	const char *event_id; /* uuid text; rows with a bad id are skipped */
	const char *type;     /* required */
	int64_t     time_us;
	const char *dag; /* name; stored as dags.id when the DAG exists */
	int64_t     dag_run_id;
	int64_t     instance_id;
	const char *run_id; /* uuid text or NULL / "" */
	int32_t     attempt;
	const char *trace_id;
	const char *reason;
	const char *source;          /* kept in payload.source */
	const char *task;            /* kept in payload.task */
	int64_t     logical_time_us; /* kept in payload when not 0 */
	int32_t     shard_index, shard_total;
	const char *payload_json; /* a JSON object text or NULL; anything
	                             else is kept as {"raw": text} */
} ax_store_event_row;

/*
 * Inserts n events with one lookup and one COPY: an event whose id is
 * already stored, or that appears earlier in rows, is left out, so a
 * re-sent event is stored once. Usable inside the transaction of a
 * state change. *inserted (may be NULL) counts the new rows; *skipped
 * (may be NULL) the rows refused before SQL (bad event_id or no type).
 * With inserted NULL inside a transaction a batch under 128 rows is sent
 * without waiting for its answer (ax_store_write_deferred): it travels
 * with the transaction's next statement or COMMIT; a larger batch is one
 * COPY, which waits.
 */
ax_err ax_store_insert_events(ax_store *s, const ax_store_event_row *rows,
                              size_t n, size_t *inserted, size_t *skipped);

/* One event that event_log refused, for event_dead_letter. */
typedef struct ax_store_dead_letter {
	const char    *event_id; /* stored when a valid uuid, else NULL */
	const uint8_t *envelope; /* the event as received (packed ax.Event) */
	size_t         len;
	const char    *error; /* why it was refused */
} ax_store_dead_letter;

/*
 * Keeps one refused event in event_dead_letter (migration 0008): its
 * envelope as bytea and the error, which is stored with every byte
 * outside printable ASCII as '?' (it may quote the very bytes that were
 * refused). A write (ax_store_write); errors as ax_store_query, AX_ENOMEM.
 */
ax_err ax_store_dead_letter_event(ax_store *s, const ax_store_dead_letter *d);

/* Prepares the statement of ax_store_insert_events' smaller batches on s
 * without running it (for ax_store_warm, engine/store.h). */
ax_err ax_store_events_prepare(ax_store *s);

#endif /* AX_STORE_EVENTS_H */
