/*
 * sink_http.h - the delivery half shared by the HTTP sinks of the event
 * emitter (OpenLineage, Alertmanager, alert webhook): a bounded queue of
 * JSON bodies and one sender thread that POSTs them, in order, to one
 * URL with libcurl.
 *
 * Never blocks the caller: push appends to the queue under a mutex the
 * sender holds only to take a body, never across a POST. When the queue
 * is full the configured overflow policy decides which body is lost (the
 * newest, so what waits keeps its order; or the oldest, so the freshest
 * news gets through) and the loss is counted. On a connection error, a
 * timeout, 408, 429 or 5xx the sender retries with exponential backoff
 * (backoff0 doubling, at most 5 s) up to max_attempts POSTs, then drops
 * the body (counted undeliverable); other 4xx are dropped at once
 * (counted rejected): the receiver will never take them.
 */
#ifndef AX_SINK_HTTP_H
#define AX_SINK_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

typedef struct ax_sink_http ax_sink_http;

typedef enum ax_sink_http_overflow {
	AX_SINK_HTTP_DROP_NEWEST = 0, /* refuse the body being pushed */
	AX_SINK_HTTP_DROP_OLDEST,     /* evict the oldest queued body */
} ax_sink_http_overflow;

typedef struct ax_sink_http_config {
	const char           *name;         /* log component, e.g. "alerts" */
	const char           *url;          /* endpoint, required (copied) */
	size_t                capacity;     /* queued bodies; >= 1 */
	int                   max_attempts; /* POSTs per body; 0: 5 */
	int64_t               backoff0_us;  /* first retry delay; 0: 100 ms */
	int64_t               timeout_us;   /* per POST; 0: 5 s */
	ax_sink_http_overflow overflow;
} ax_sink_http_config;

typedef struct ax_sink_http_stats {
	uint64_t pushed;        /* bodies accepted by push */
	uint64_t delivered;     /* POSTs answered 2xx */
	uint64_t retries;       /* POSTs repeated after a failure */
	uint64_t dropped_full;  /* lost to the overflow policy */
	uint64_t undeliverable; /* attempts exhausted, or stopped */
	uint64_t rejected;      /* 4xx (not 408/429) */
	uint64_t queued;        /* waiting now (racy, for monitoring) */
} ax_sink_http_stats;

/*
 * Starts the sender thread. Errors: AX_EINVAL (empty url, capacity 0),
 * AX_ENOMEM, AX_EIO (thread or libcurl could not start). Any thread.
 */
ax_err ax_sink_http_new(const ax_sink_http_config *cfg, ax_sink_http **out);

/*
 * Queues body (a NUL-terminated JSON text; ownership passes to the sink
 * in every case, freed with free()). Returns 1 when body is queued
 * (DROP_OLDEST: possibly after evicting the oldest, counted), 0 when it
 * was refused (DROP_NEWEST and full, or stopping; counted) and freed.
 * Never blocks on the network. Any thread.
 */
int ax_sink_http_push(ax_sink_http *h, char *body);

/* Counters (any thread). */
void ax_sink_http_stats_get(ax_sink_http *h, ax_sink_http_stats *out);

/*
 * Stops the sender: what is queued is still tried once each for up to
 * drain_us (no retries), the rest is counted undeliverable; joins the
 * thread, writes the final counters to *final (may be NULL) and frees h.
 * NULL h is fine (final untouched).
 */
void ax_sink_http_free(ax_sink_http *h, int64_t drain_us,
                       ax_sink_http_stats *final);

#endif /* AX_SINK_HTTP_H */
