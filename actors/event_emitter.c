/*
 * event_emitter.c - events -> sinks (structured log, event_log), see
 * event_emitter.h.
 *
 * Invariants: the event_log buffer holds at most `cap` events, oldest
 * first; an event leaves it only once its insert committed. While the
 * buffer is not empty new events queue behind it (order of event_log ids
 * follows arrival order per producer).
 *
 * Workload: every decision and state change of the pipeline passes here
 * (several events per instance): one insert per drained batch.
 */
#include "event_emitter.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "flow_util.h"
#include "store.h"
#include "store_attempts.h"

#define EM_CHUNK        2000 /* rows per insert */
#define EM_BACKOFF0_US  (100 * AX_USEC_PER_MSEC)
#define EM_BACKOFF_MAX  (5 * AX_USEC_PER_SEC)
#define EM_RECONNECT_US (200 * AX_USEC_PER_MSEC)

struct ax_event_emitter {
	const ax_pipeline_ctx *ctx;
	ax_store              *store;
	Ax__Event            **buf; /* ring of unpacked events (owned) */
	size_t                 cap, head, n;
	int64_t                backoff_us;
	int                    down; /* last write failed: wait for tick */
	_Atomic uint64_t       events, stored, dropped, failures, bad;
};

typedef struct em_sink {
	const char *name;
	/* one drained batch of events (borrowed); errors are logged */
	ax_err (*write)(ax_actor *self, ax_event_emitter *em, Ax__Event **evs,
	                size_t n);
	/* called from the tick (retries); may be NULL */
	ax_err (*tick)(ax_actor *self, ax_event_emitter *em);
} em_sink;

/* ---------------------------------------------------------------------- */
/* log sink */

static int
decision_type(const char *type)
{
	static const char *const t[] = {
		"instance.admitted", "instance.delayed", "instance.blocked",
		"admission.skipped", "attempt.reported",
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(type, t[i]) == 0)
			return 1;
	return 0;
}

static ax_err
log_write(ax_actor *self, ax_event_emitter *em, Ax__Event **evs, size_t n)
{
	(void) self;
	(void) em;
	for (size_t i = 0; i < n; i++) {
		const Ax__Event *e = evs[i];
		ax_log_level     lvl =
                    decision_type(e->type) ? AX_LOG_DEBUG : AX_LOG_INFO;
		if (!ax_log_enabled(lvl))
			continue;
		ax_log_ids ids = {
			.dag      = e->dag[0] ? e->dag : NULL,
			.run      = e->dag_run_id,
			.instance = e->instance_id,
			.run_id   = e->run_id[0] ? e->run_id : NULL,
			.attempt  = e->attempt,
		};
		ax_logf(lvl, "event", e->reason[0] ? e->reason : NULL, &ids,
		        "%s task=%s shard=%d source=%s id=%s trace=%s %s",
		        e->type, e->task, e->shard_index, e->source, e->id,
		        e->trace_id, e->payload_json);
	}
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* event_log sink */

static void
buf_push(ax_event_emitter *em, Ax__Event *e)
{
	if (em->n == em->cap) {
		/* full: the oldest waiting event is lost (counted) */
		ax__event__free_unpacked(em->buf[em->head], NULL);
		em->head = (em->head + 1) % em->cap;
		em->n--;
		atomic_fetch_add(&em->dropped, 1);
	}
	em->buf[(em->head + em->n++) % em->cap] = e;
}

/* Writes the buffer in chunks; stops at the first failure. */
static ax_err
flush(ax_event_emitter *em)
{
	ax_store_event_row rows[EM_CHUNK];
	ax_err             rv = AX_OK;

	if (em->n == 0)
		return AX_OK;
	if (em->store == NULL) {
		if ((rv = ax_store_open(em->ctx->dsn, &em->store)) != AX_OK)
			return rv;
		ax_store_set_reconnect_timeout(em->store, EM_RECONNECT_US);
	}
	while (em->n > 0) {
		size_t m = em->n < EM_CHUNK ? em->n : EM_CHUNK, ins = 0;
		for (size_t i = 0; i < m; i++)
			ax_flow_event_row(em->buf[(em->head + i) % em->cap],
			                  &rows[i]);
		if ((rv = ax_store_insert_events(em->store, rows, m, &ins,
		                                 NULL)) != AX_OK)
			return rv;
		atomic_fetch_add(&em->stored, ins);
		for (size_t i = 0; i < m; i++) {
			ax__event__free_unpacked(em->buf[em->head], NULL);
			em->head = (em->head + 1) % em->cap;
		}
		em->n -= m;
	}
	return AX_OK;
}

static void
flush_or_wait(ax_actor *self, ax_event_emitter *em)
{
	ax_err rv = flush(em);
	if (rv == AX_OK) {
		if (em->down)
			ax_log_info(ax_actor_name(self),
			            "event_log writable again");
		em->down       = 0;
		em->backoff_us = EM_BACKOFF0_US;
		return;
	}
	atomic_fetch_add(&em->failures, 1);
	if (!em->down)
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "cannot write event_log (%s); buffering up to %zu "
		        "events",
		        ax_err_detail(), em->cap);
	em->down = 1;
	ax_actor_set_deadline(self, ax_clock_mono_us() + em->backoff_us);
	em->backoff_us = em->backoff_us * 2 > EM_BACKOFF_MAX
	    ? EM_BACKOFF_MAX
	    : em->backoff_us * 2;
}

/* Takes the persisted = 0 events out of evs (ownership moves to the
 * buffer; their slot in evs becomes NULL). */
static ax_err
db_write(ax_actor *self, ax_event_emitter *em, Ax__Event **evs, size_t n)
{
	if (em->ctx->dsn == NULL)
		return AX_OK;
	for (size_t i = 0; i < n; i++)
		if (evs[i] != NULL && !evs[i]->persisted) {
			buf_push(em, evs[i]);
			evs[i] = NULL;
		}
	if (!em->down)
		flush_or_wait(self, em);
	return AX_OK;
}

static ax_err
db_tick(ax_actor *self, ax_event_emitter *em)
{
	if (em->n > 0)
		flush_or_wait(self, em);
	return AX_OK;
}

/* The sinks, in the order they see each batch. A sink that keeps events
 * (event_log) comes last: it takes ownership of what it keeps. */
static const em_sink em_sinks[] = {
	{ .name = "log", .write = log_write },
	{ .name = "event_log", .write = db_write, .tick = db_tick },
};

#define EM_NSINKS (sizeof(em_sinks) / sizeof(em_sinks[0]))

/* ---------------------------------------------------------------------- */
/* actor */

static ax_err
em_handle(ax_actor *self, void *state, const ax_actor_item *items, size_t n)
{
	ax_event_emitter *em  = state;
	Ax__Event       **evs = calloc(n, sizeof(*evs));
	size_t            k   = 0;

	if (evs == NULL)
		return ax_err_set(AX_ENOMEM, "event_emitter: out of memory");
	for (size_t i = 0; i < n; i++) {
		Ax__Event *e = items[i].type == AX_ITEM_EVENT
		    ? ax__event__unpack(NULL, items[i].len, items[i].data)
		    : NULL;
		if (e == NULL || e->type[0] == '\0') {
			if (e != NULL)
				ax__event__free_unpacked(e, NULL);
			atomic_fetch_add(&em->bad, 1);
			continue;
		}
		evs[k++] = e;
	}
	atomic_fetch_add(&em->events, k);
	for (size_t s = 0; s < EM_NSINKS; s++) {
		ax_err rv = em_sinks[s].write(self, em, evs, k);
		if (rv != AX_OK)
			ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
			        "sink %s: %s", em_sinks[s].name,
			        ax_err_detail());
	}
	for (size_t i = 0; i < k; i++)
		if (evs[i] != NULL)
			ax__event__free_unpacked(evs[i], NULL);
	free(evs);
	return AX_OK;
}

static ax_err
em_tick(ax_actor *self, void *state, int64_t now)
{
	ax_event_emitter *em = state;
	(void) now;
	for (size_t s = 0; s < EM_NSINKS; s++)
		if (em_sinks[s].tick != NULL)
			(void) em_sinks[s].tick(self, em);
	return AX_OK;
}

static void
em_fini(void *state)
{
	ax_event_emitter *em = state;
	if (em == NULL)
		return;
	if (em->n > 0 && em->ctx->dsn != NULL)
		(void) flush(em); /* last chance at stop */
	ax_log_info("event_emitter",
	            "stopped: %llu events, %llu stored, %llu dropped, %zu "
	            "unwritten",
	            (unsigned long long) atomic_load(&em->events),
	            (unsigned long long) atomic_load(&em->stored),
	            (unsigned long long) atomic_load(&em->dropped), em->n);
	for (size_t i = 0; i < em->n; i++)
		ax__event__free_unpacked(em->buf[(em->head + i) % em->cap],
		                         NULL);
	free(em->buf);
	ax_store_close(em->store);
	free(em);
}

void
ax_event_emitter_stats_get(const ax_event_emitter *em,
                           ax_event_emitter_stats *out)
{
	ax_event_emitter *m = (ax_event_emitter *) em;
	out->events         = atomic_load(&m->events);
	out->stored         = atomic_load(&m->stored);
	out->dropped        = atomic_load(&m->dropped);
	out->failures       = atomic_load(&m->failures);
	out->bad            = atomic_load(&m->bad);
	out->buffered       = em->n; /* racy read, for monitoring */
}

ax_err
ax_event_emitter_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                     ax_event_emitter **out)
{
	static const ax_actor_ops ops = {
		.handle = em_handle,
		.tick   = em_tick,
		.fini   = em_fini,
	};
	char              url[256];
	ax_event_emitter *em = calloc(1, sizeof(*em));
	int64_t           cap;

	if (out != NULL)
		*out = NULL;
	if (em == NULL)
		return ax_err_set(AX_ENOMEM, "event_emitter: out of memory");
	em->ctx        = ctx;
	em->backoff_us = EM_BACKOFF0_US;
	cap            = ax_config_int(ctx->cfg, "events.buffer");
	em->cap        = cap > 0 ? (size_t) cap : 1;
	if ((em->buf = calloc(em->cap, sizeof(*em->buf))) == NULL) {
		free(em);
		return ax_err_set(AX_ENOMEM, "event_emitter: out of memory");
	}
	ax_actor_config cfg = {
		.name = AX_A_EVENT_EMITTER,
		.url  = ax_config_actor_addr(ctx->cfg, AX_A_EVENT_EMITTER, url,
		                             sizeof(url)),
		.inbox_depth = 1024,
	};
	ax_err rv = ax_actor_system_add(sys, &cfg, &ops, em, NULL);
	if (rv == AX_OK && out != NULL)
		*out = em;
	return rv;
}
