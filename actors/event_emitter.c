/*
 * event_emitter.c - events -> sinks (structured log, nng PUB,
 * OpenLineage, event_log), see event_emitter.h.
 *
 * Invariants: the event_log buffer holds at most `cap` events, oldest
 * first; an event leaves it only once its insert committed, or once
 * PostgreSQL refused it for its content and it was kept in
 * event_dead_letter (or, when even that failed, dropped and counted).
 * While the buffer is not empty new events queue behind it (order of
 * event_log ids follows arrival order per producer). A database that
 * cannot be written (connection down, disk full, ...) never dead-letters
 * an event: the buffer waits and the write is retried with backoff.
 *
 * Workload: every decision and state change of the pipeline passes here
 * (several events per instance): one insert per drained batch; a batch
 * with k refused rows costs about 2 k log2(batch) more inserts.
 */
#include "event_emitter.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "buf.h"
#include "flow_util.h"
#include "sink_alert.h"
#include "sink_openlineage.h"
#include "sink_pub.h"
#include "store.h"
#include "store_attempts.h"
#include "store_stats.h"

#define EM_CHUNK          2000 /* rows per insert */
#define EM_BACKOFF0_US    (100 * AX_USEC_PER_MSEC)
#define EM_BACKOFF_MAX    (5 * AX_USEC_PER_SEC)
#define EM_RECONNECT_US   (200 * AX_USEC_PER_MSEC)
#define EM_OL_DRAIN_US    (2 * AX_USEC_PER_SEC) /* OpenLineage at stop */
#define EM_ALERT_DRAIN_US (2 * AX_USEC_PER_SEC) /* alerts at stop */
#define EM_STATS_MAX      32                    /* component_stats rows */

struct ax_event_emitter {
	const ax_pipeline_ctx *ctx;
	ax_store              *store;
	Ax__Event            **buf; /* ring of unpacked events (owned) */
	size_t                 cap, head, n;
	int64_t                backoff_us;
	int                    down;   /* last write failed: wait for tick */
	int64_t                db_due; /* mono: retry event_log; 0 none */
	int64_t                stats_due; /* mono: next component_stats */
	int64_t                last_stats[EM_STATS_MAX]; /* last upserted */
	ax_sink_pub           *pub;           /* NULL: PUB sink off */
	ax_sink_ol            *ol;            /* NULL: OpenLineage off */
	ax_sink_alert         *alert;         /* NULL: alerts off */
	int                    alert_on;      /* configured (stats rows) */
	ax_sink_alert_stats    alert_final;   /* counters after stop */
	int                    pub_on, ol_on; /* configured (stats rows) */
	ax_sink_ol_stats       ol_final;      /* counters after stop */
	ax_sink_pub_stats      pub_final;
	_Atomic uint64_t       events, stored, dropped, failures, bad;
	_Atomic uint64_t       dead_lettered, refused_dropped;
	_Atomic uint64_t       stats_writes;
	Ax__Event            **evs; /* the batch being handled (owned) */
	size_t                 nevs, capevs;
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
/* deadlines: the event_log retry and the component_stats period share the
 * actor's single deadline */

static void
arm(ax_actor *self, ax_event_emitter *em)
{
	int64_t d = em->db_due;
	if (em->stats_due != 0 && (d == 0 || em->stats_due < d))
		d = em->stats_due;
	ax_actor_set_deadline(self, d);
}

/* ---------------------------------------------------------------------- */
/* PUB and OpenLineage sinks */

static ax_err
pub_write(ax_actor *self, ax_event_emitter *em, Ax__Event **evs, size_t n)
{
	(void) self;
	if (em->pub == NULL)
		return AX_OK;
	for (size_t i = 0; i < n; i++)
		ax_sink_pub_publish(em->pub, evs[i]);
	return AX_OK;
}

static ax_err
ol_write(ax_actor *self, ax_event_emitter *em, Ax__Event **evs, size_t n)
{
	(void) self;
	if (em->ol == NULL)
		return AX_OK;
	for (size_t i = 0; i < n; i++)
		(void) ax_sink_ol_submit(em->ol, evs[i]);
	return AX_OK;
}

static ax_err
alert_write(ax_actor *self, ax_event_emitter *em, Ax__Event **evs, size_t n)
{
	(void) self;
	if (em->alert == NULL)
		return AX_OK;
	for (size_t i = 0; i < n; i++)
		(void) ax_sink_alert_submit(em->alert, evs[i]);
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

/* One chunk of audit rows. Decision events may be lost with the last
 * moments before a PostgreSQL crash (the log line stays), so they are
 * committed without waiting for the WAL flush: see ax_store_tx_relaxed. */
typedef struct em_chunk {
	ax_store_event_row *rows;
	size_t              n, inserted;
} em_chunk;

static ax_err
insert_chunk(ax_store *s, void *arg)
{
	em_chunk *c = arg;
	return ax_store_insert_events(s, c->rows, c->n, &c->inserted, NULL);
}

/* Frees the m oldest buffered events. */
static void
buf_pop(ax_event_emitter *em, size_t m)
{
	for (size_t i = 0; i < m; i++) {
		ax__event__free_unpacked(em->buf[em->head], NULL);
		em->head = (em->head + 1) % em->cap;
	}
	em->n -= m;
}

/* 1 for the errors after which PostgreSQL is not reachable now. */
static int
db_unreachable(ax_err rv)
{
	return rv == AX_EDBCONN || rv == AX_ERETRY || rv == AX_ETIMEDOUT ||
	    rv == AX_EFENCED || rv == AX_ENOMEM;
}

/*
 * 1 when PostgreSQL refused the write for the content of its rows
 * (SQLSTATE class 22 data exception, 23 integrity constraint, 54 program
 * limit: an invalid UTF-8 byte, a time out of range), 0 when the database
 * itself failed (connection, timeout, serialization, disk full, missing
 * table, ...). Only the first is worth isolating rows for; dead-lettering
 * on the second would empty the buffer into event_dead_letter (or drop
 * it) during an outage.
 */
static int
rows_refused(ax_store *s, ax_err rv)
{
	const char *st = ax_store_error_sqlstate(s);

	if (db_unreachable(rv))
		return 0;
	return strncmp(st, "22", 2) == 0 || strncmp(st, "23", 2) == 0 ||
	    strncmp(st, "54", 2) == 0;
}

/*
 * The oldest buffered event, which event_log refused alone (why: the
 * error), goes to event_dead_letter with its envelope; when that insert
 * fails too for another reason than an unreachable database, the event is
 * dropped, counted and logged. Either way it leaves the buffer (AX_OK);
 * an unreachable database keeps it there (the error).
 */
static ax_err
dead_letter_head(ax_event_emitter *em, const char *why)
{
	Ax__Event *e   = em->buf[em->head];
	size_t     len = ax__event__get_packed_size(e);
	uint8_t   *env = malloc(len + 1);
	ax_err     rv;

	if (env == NULL)
		return ax_err_set(AX_ENOMEM, "event_emitter: dead letter");
	ax__event__pack(e, env);
	ax_store_dead_letter dl = {
		.event_id = e->id, .envelope = env, .len = len, .error = why
	};
	rv = ax_store_dead_letter_event(em->store, &dl);
	free(env);
	if (rv == AX_OK)
		ax_logf(AX_LOG_WARN, AX_A_EVENT_EMITTER, NULL, NULL,
		        "event %s (%s) refused by event_log, kept in "
		        "event_dead_letter: %s",
		        e->id, e->type, why);
	else if (db_unreachable(rv))
		return rv;
	else
		ax_logf(AX_LOG_ERROR, AX_A_EVENT_EMITTER, NULL, NULL,
		        "event %s (%s) dropped: event_log refused it (%s) and "
		        "event_dead_letter too: %s",
		        e->id, e->type, why, ax_err_detail());
	/* out of the buffer before it is counted: a reader of the stats
	 * that sees it counted sees it gone from `buffered` */
	buf_pop(em, 1);
	atomic_fetch_add(
	    rv == AX_OK ? &em->dead_lettered : &em->refused_dropped, 1);
	return AX_OK;
}

/*
 * Writes the m oldest buffered events and takes them out of the buffer.
 * A write refused for its rows' content is split in halves, oldest half
 * first, down to the single rows PostgreSQL refuses, which are
 * dead-lettered: the good rows of the batch are written, and what has
 * been handled is always a prefix of the buffer, so an outage in the
 * middle leaves exactly the rest buffered. rows has room for m rows.
 */
static ax_err
write_head(ax_event_emitter *em, size_t m, ax_store_event_row *rows)
{
	char   why[512];
	ax_err rv;

	for (size_t i = 0; i < m; i++)
		ax_flow_event_row(em->buf[(em->head + i) % em->cap], &rows[i]);
	em_chunk c = { rows, m, 0 };
	if ((rv = ax_store_tx_relaxed(em->store, insert_chunk, &c)) == AX_OK) {
		buf_pop(em, m); /* before the count, as above */
		atomic_fetch_add(&em->stored, c.inserted);
		return AX_OK;
	}
	if (!rows_refused(em->store, rv))
		return rv;
	if (m == 1) {
		snprintf(why, sizeof(why), "%s", ax_err_detail());
		return dead_letter_head(em, why);
	}
	if ((rv = write_head(em, m / 2, rows)) != AX_OK)
		return rv;
	return write_head(em, m - m / 2, rows);
}

/* Writes the buffer in chunks; stops at the first failure of the
 * database (what is not written stays buffered). */
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
	while (em->n > 0)
		if ((rv = write_head(em, em->n < EM_CHUNK ? em->n : EM_CHUNK,
		                     rows)) != AX_OK)
			return rv;
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
		if (em->db_due != 0) {
			em->db_due = 0;
			arm(self, em);
		}
		return;
	}
	atomic_fetch_add(&em->failures, 1);
	if (!em->down)
		ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
		        "cannot write event_log (%s); buffering up to %zu "
		        "events",
		        ax_err_detail(), em->cap);
	em->down   = 1;
	em->db_due = ax_clock_mono_us() + em->backoff_us;
	arm(self, em);
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
	if (em->db_due == 0 || ax_clock_mono_us() < em->db_due)
		return AX_OK;
	em->db_due = 0;
	if (em->n > 0)
		flush_or_wait(self, em);
	return AX_OK;
}

/* ---------------------------------------------------------------------- */
/* component_stats: the sink counters, for ax-api's /metrics */

/* The rows of one HTTP target of the alert sink (component c). */
static void
http_rows(ax_store_stat *rows, size_t *n, const char *c,
          const ax_sink_http_stats *h)
{
	const struct {
		const char *key;
		uint64_t    v;
	} kv[] = {
		{ "delivered", h->delivered },
		{ "retries", h->retries },
		{ "dropped.buffer_full", h->dropped_full },
		{ "dropped.undeliverable", h->undeliverable },
		{ "dropped.rejected", h->rejected },
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		rows[(*n)++] = (ax_store_stat) { .component = c,
			                         .key       = kv[i].key,
			                         .value = (int64_t) kv[i].v };
}

/*
 * Upserts the counters when one changed since the last write. Skipped
 * while event_log is unreachable (same database): the next period tries
 * again. Costs one statement every AX_EVENT_EMITTER_STATS_US at most.
 */
static void
stats_persist(ax_event_emitter *em)
{
	ax_event_emitter_stats st;
	ax_store_stat          rows[EM_STATS_MAX];
	size_t                 n       = 0;
	int                    changed = 0;

	if (em->ctx->dsn == NULL || em->down)
		return;
	ax_event_emitter_stats_get(em, &st);
#define ROW(c, k, v)                                                          \
	rows[n++] = (ax_store_stat) { .component = "event_sink." c,           \
		                      .key       = k,                         \
		                      .value     = (int64_t) (v) }
	ROW("event_log", "delivered", st.stored);
	ROW("event_log", "dropped.buffer_full", st.dropped);
	ROW("event_log", "dead_lettered", st.dead_lettered);
	ROW("event_log", "dropped.refused", st.refused_dropped);
	if (st.pub_on) {
		ROW("pub", "delivered", st.pub_published);
		ROW("pub", "dropped.send_failed", st.pub_dropped);
	}
	if (st.ol_on) {
		ROW("openlineage", "delivered", st.ol_delivered);
		ROW("openlineage", "retries", st.ol_retries);
		ROW("openlineage", "dropped.buffer_full", st.ol_dropped_full);
		ROW("openlineage", "dropped.undeliverable",
		    st.ol_undeliverable);
		ROW("openlineage", "dropped.rejected", st.ol_rejected);
	}
	if (st.alert_on && st.alerts.am_on)
		http_rows(rows, &n, "event_sink.alertmanager", &st.alerts.am);
	if (st.alert_on && st.alerts.wh_on)
		http_rows(rows, &n, "event_sink.webhook", &st.alerts.wh);
#undef ROW
	for (size_t i = 0; i < n; i++)
		if (rows[i].value != em->last_stats[i])
			changed = 1;
	if (!changed && atomic_load(&em->stats_writes) > 0)
		return;
	if (em->store == NULL) {
		if (ax_store_open(em->ctx->dsn, &em->store) != AX_OK)
			return;
		ax_store_set_reconnect_timeout(em->store, EM_RECONNECT_US);
	}
	if (ax_store_stats_put(em->store, rows, n) != AX_OK) {
		ax_logf(AX_LOG_DEBUG, AX_A_EVENT_EMITTER, NULL, NULL,
		        "component_stats not written: %s", ax_err_detail());
		return;
	}
	for (size_t i = 0; i < n; i++)
		em->last_stats[i] = rows[i].value;
	atomic_fetch_add(&em->stats_writes, 1);
}

static ax_err
stats_tick(ax_actor *self, ax_event_emitter *em)
{
	(void) self;
	if (em->stats_due == 0 || ax_clock_mono_us() < em->stats_due)
		return AX_OK;
	stats_persist(em);
	em->stats_due = ax_clock_mono_us() + AX_EVENT_EMITTER_STATS_US;
	return AX_OK;
}

/* The sinks, in the order they see each batch. A sink that keeps events
 * (event_log) comes last: it takes ownership of what it keeps. */
static const em_sink em_sinks[] = {
	{ .name = "log", .write = log_write, .tick = stats_tick },
	{ .name = "pub", .write = pub_write },
	{ .name = "openlineage", .write = ol_write },
	{ .name = "alerts", .write = alert_write },
	{ .name = "event_log", .write = db_write, .tick = db_tick },
};

#define EM_NSINKS (sizeof(em_sinks) / sizeof(em_sinks[0]))

/* ---------------------------------------------------------------------- */
/* actor */

/* Collects the events of a batch for the sinks (batch_end). */
static ax_err
em_on_event(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	ax_event_emitter *em = state;
	ax_err            rv;

	(void) self;
	if (m->ev->type[0] == '\0') {
		atomic_fetch_add(&em->bad, 1);
		return AX_OK;
	}
	if ((rv = AX_GROW(em->evs, em->capevs, em->nevs + 1)) != AX_OK)
		return rv;
	ax_pipeline_keep(m);
	em->evs[em->nevs++] = m->ev;
	return AX_OK;
}

/* An item that is not an ax.Event. */
static void
em_on_drop(ax_actor *self, void *state, const ax_actor_item *item)
{
	ax_event_emitter *em = state;
	(void) self;
	(void) item;
	atomic_fetch_add(&em->bad, 1);
}

/* Hands the batch to every sink, then frees what no sink kept. */
static ax_err
em_batch_end(ax_actor *self, void *state)
{
	ax_event_emitter *em  = state;
	Ax__Event       **evs = em->evs;
	size_t            k   = em->nevs;

	if (em->stats_due == 0 && em->ctx->dsn != NULL) {
		em->stats_due = ax_clock_mono_us() + AX_EVENT_EMITTER_STATS_US;
		arm(self, em);
	}
	for (size_t s = 0; s < EM_NSINKS; s++) {
		ax_err rv = em_sinks[s].write(self, em, evs, k);
		if (rv != AX_OK)
			ax_logf(AX_LOG_WARN, ax_actor_name(self), NULL, NULL,
			        "sink %s: %s", em_sinks[s].name,
			        ax_err_detail());
	}
	/* counted after the sinks ran: whoever reads events == N also sees
	 * what the sinks did with them (stored, dropped) */
	atomic_fetch_add(&em->events, k);
	for (size_t i = 0; i < k; i++)
		if (evs[i] != NULL)
			ax__event__free_unpacked(evs[i], NULL);
	em->nevs = 0;
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
	arm(self, em);
	return AX_OK;
}

static void
em_fini(void *state)
{
	ax_event_emitter *em = state;
	if (em->n > 0 && em->ctx->dsn != NULL)
		(void) flush(em); /* last chance at stop */
	ax_sink_ol_free(em->ol, EM_OL_DRAIN_US, &em->ol_final);
	em->ol = NULL;
	ax_sink_alert_free(em->alert, EM_ALERT_DRAIN_US, &em->alert_final);
	em->alert = NULL;
	if (em->pub != NULL)
		ax_sink_pub_stats_get(em->pub, &em->pub_final);
	ax_sink_pub_close(em->pub);
	em->pub = NULL;
	if (em->ctx->dsn != NULL && atomic_load(&em->events) > 0)
		stats_persist(em);
	ax_log_info(AX_A_EVENT_EMITTER,
	            "stopped: %llu events, %llu stored, %llu dropped, %zu "
	            "unwritten",
	            (unsigned long long) atomic_load(&em->events),
	            (unsigned long long) atomic_load(&em->stored),
	            (unsigned long long) atomic_load(&em->dropped), em->n);
	for (size_t i = 0; i < em->n; i++)
		ax__event__free_unpacked(em->buf[(em->head + i) % em->cap],
		                         NULL);
	free(em->buf);
	for (size_t i = 0; i < em->nevs; i++)
		ax__event__free_unpacked(em->evs[i], NULL);
	free(em->evs);
	ax_store_close(em->store);
}

void
ax_event_emitter_stats_get(const ax_event_emitter *em,
                           ax_event_emitter_stats *out)
{
	ax_event_emitter *m = (ax_event_emitter *) em;
	memset(out, 0, sizeof(*out));
	out->events          = atomic_load(&m->events);
	out->stored          = atomic_load(&m->stored);
	out->dropped         = atomic_load(&m->dropped);
	out->failures        = atomic_load(&m->failures);
	out->bad             = atomic_load(&m->bad);
	out->dead_lettered   = atomic_load(&m->dead_lettered);
	out->refused_dropped = atomic_load(&m->refused_dropped);
	out->buffered        = em->n; /* racy read, for monitoring */
	out->stats_writes    = atomic_load(&m->stats_writes);
	out->pub_on          = em->pub_on;
	if (em->pub_on) {
		ax_sink_pub_stats ps = em->pub_final;
		if (em->pub != NULL)
			ax_sink_pub_stats_get(em->pub, &ps);
		out->pub_published = ps.published;
		out->pub_dropped   = ps.dropped;
		out->pub_unheard   = ps.unheard;
	}
	out->ol_on = em->ol_on;
	if (em->ol_on) {
		ax_sink_ol_stats os = em->ol_final;
		if (em->ol != NULL)
			ax_sink_ol_stats_get(em->ol, &os);
		out->ol_mapped        = os.mapped;
		out->ol_delivered     = os.delivered;
		out->ol_retries       = os.retries;
		out->ol_queued        = os.queued;
		out->ol_dropped_full  = os.dropped_full;
		out->ol_undeliverable = os.undeliverable;
		out->ol_rejected      = os.rejected;
	}
	out->alert_on = em->alert_on;
	if (em->alert_on) {
		out->alerts = em->alert_final;
		if (em->alert != NULL)
			ax_sink_alert_stats_get(em->alert, &out->alerts);
	}
}

/* Opens the alert sink when a target is configured; a bad value is
 * logged with its key and the sink stays off. */
static void
open_alerts(ax_event_emitter *em)
{
	const ax_config *c   = em->ctx->cfg;
	int64_t          cap = ax_config_int(c, "alerts.buffer");
	ax_err           rv;

	ax_sink_alert_config ac = {
		.alertmanager_url =
		    ax_config_str(c, "alerts.alertmanager_url"),
		.webhook_url  = ax_config_str(c, "alerts.webhook_url"),
		.link_url     = ax_config_str(c, "alerts.link_url"),
		.capacity     = cap > 0 ? (size_t) cap : 0,
		.max_attempts = (int) ax_config_int(c, "alerts.attempts"),
		.backoff0_us  = ax_config_duration_us(c, "alerts.backoff"),
		.timeout_us   = ax_config_duration_us(c, "alerts.timeout"),
		.registry     = em->ctx->registry,
		.dsn          = em->ctx->dsn,
		.stuck_after_us =
		    ax_config_duration_us(c, "alerts.stuck_after"),
		.stuck_check_us =
		    ax_config_duration_us(c, "alerts.stuck_check"),
	};
	if ((rv = ax_sink_alert_new(&ac, &em->alert)) == AX_OK) {
		em->alert_on = 1;
		ax_log_info(AX_A_EVENT_EMITTER,
		            "alerts to%s%s%s%s (buffer %zu per target)",
		            ac.alertmanager_url[0] ? " Alertmanager " : "",
		            ac.alertmanager_url,
		            ac.webhook_url[0] ? " webhook " : "",
		            ac.webhook_url, ac.capacity);
	} else if (rv != AX_ENOENT) {
		ax_logf(AX_LOG_ERROR, AX_A_EVENT_EMITTER, NULL, NULL,
		        "alert sink off: %s", ax_err_detail());
	}
}

/* Opens the PUB, OpenLineage and alert sinks; a sink that cannot start
 * is logged and stays off (events still reach the others). */
static void
open_sinks(ax_event_emitter *em)
{
	const ax_config *c   = em->ctx->cfg;
	const char      *pub = ax_config_str(c, "events.pub");
	const char      *url = ax_config_str(c, "openlineage.url");
	int64_t          cap = ax_config_int(c, "openlineage.buffer");

	if (ax_sink_pub_open(pub, &em->pub) == AX_OK) {
		em->pub_on = 1;
		ax_log_info(AX_A_EVENT_EMITTER, "publishing events on %s",
		            pub);
	} else {
		ax_logf(AX_LOG_WARN, AX_A_EVENT_EMITTER, NULL, NULL,
		        "PUB sink off: %s", ax_err_detail());
	}
	open_alerts(em);
	if (url == NULL || url[0] == '\0')
		return;
	ax_sink_ol_config oc = {
		.url      = url,
		.ns       = ax_config_str(c, "openlineage.namespace"),
		.capacity = cap > 0 ? (size_t) cap : 1,
	};
	if (ax_sink_ol_new(&oc, &em->ol) == AX_OK) {
		em->ol_on = 1;
		ax_log_info(AX_A_EVENT_EMITTER,
		            "OpenLineage events to %s (namespace %s, buffer "
		            "%zu)",
		            url, oc.ns, oc.capacity);
	} else {
		ax_logf(AX_LOG_WARN, AX_A_EVENT_EMITTER, NULL, NULL,
		        "OpenLineage sink off: %s", ax_err_detail());
	}
}

static ax_err
em_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	ax_event_emitter *em = state;
	int64_t           cap;

	(void) arg;
	em->ctx        = ctx;
	em->backoff_us = EM_BACKOFF0_US;
	cap            = ax_config_int(ctx->cfg, "events.buffer");
	em->cap        = cap > 0 ? (size_t) cap : 1;
	if ((em->buf = calloc(em->cap, sizeof(*em->buf))) == NULL)
		return ax_err_set(AX_ENOMEM, "event_emitter: out of memory");
	open_sinks(em);
	return AX_OK;
}

static const ax_pipeline_def em_def = {
	.name        = AX_A_EVENT_EMITTER,
	.state_size  = sizeof(ax_event_emitter),
	.init        = em_init,
	.fini        = em_fini,
	.tick        = em_tick,
	.inbox_depth = 1024,
	.batch_end   = em_batch_end,
	.on_event    = em_on_event,
	.on_drop     = em_on_drop,
};

ax_err
ax_event_emitter_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                     ax_event_emitter **out)
{
	void  *st;
	ax_err rv = ax_pipeline_add(sys, ctx, &em_def, NULL, &st);

	if (out != NULL)
		*out = st;
	return rv;
}
