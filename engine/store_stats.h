/*
 * store_stats.h - the component_stats table: in-memory counters of a
 * process published for other processes (migration 0004).
 *
 * Role: axd's event emitter upserts its sink counters every few seconds;
 * ax-api reads them for /metrics. Nothing on the scheduling path waits on
 * it.
 *
 * Invariants: one round trip per call (unnest of array parameters,
 * INSERT ... ON CONFLICT DO UPDATE); a row holds the last value written.
 *
 * Workload: a few dozen rows every few seconds.
 */
#ifndef AX_STORE_STATS_H
#define AX_STORE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* One counter. Strings are borrowed for the duration of the call. */
typedef struct ax_store_stat {
	const char *component; /* e.g. "event_sink.openlineage" */
	const char *key;       /* e.g. "dropped.buffer_full" */
	int64_t     value;
} ax_store_stat;

/*
 * Upserts n counters (updated_at = now()) in one statement. n == 0 is a
 * no-op. AX_EINVAL for a NULL or empty component or key (detail names the
 * index); database errors as ax_store_exec. Thread: the caller's store.
 */
ax_err ax_store_stats_put(ax_store *s, const ax_store_stat *rows, size_t n);

#endif /* AX_STORE_STATS_H */
