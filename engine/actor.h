/*
 * actor.h - the actor runtime of AX over nng.
 *
 * What: an actor is a name, an inbox (an nng PULL socket listening on
 * inproc://ax/<name> by default, or on an ipc:// / tcp:// address given by
 * the caller from configuration), a handler and private state. Each actor
 * runs on its own thread; only that thread calls its handler and tick, so
 * the state needs no lock. A system (ax_actor_system) owns the actors of
 * one process, plus routes to actors living in other processes.
 *
 * Role: every pipeline stage of DESIGN.md section 2 is an actor.
 *
 * Messages: an nng message is an ENVELOPE carrying a batch of ITEMS. An
 * item is (type, bytes): the runtime does not look inside; pipeline code
 * puts one packed protobuf message in each item (AX_ITEM_COMMAND: an
 * ax.Command, AX_ITEM_EVENT: an ax.Event) and may use its own types from
 * AX_ITEM_USER up. Envelope framing (all integers big-endian):
 *
 *   u32 magic 'AXE1' | u64 system id | u8 sender name length | name bytes
 *   | u32 item count | count x (u32 type | u32 length | bytes)
 *
 * The framing is validated before a handler sees it; a malformed envelope
 * (for example garbage on an ipc:// or tcp:// inbox) is logged, counted in
 * bad_envelopes and dropped. Items are not copied into protobuf batches:
 * an actor appends packed items straight into the envelope it will send.
 *
 * Batching: the actor's thread waits for its inbox, then takes every
 * envelope already queued (up to max_batch items) and calls the handler
 * once with all their items. Items the handler sends with ax_actor_send()
 * are buffered per destination and flushed as ONE envelope per
 * destination when the handler returns (split only past
 * AX_ACTOR_ENVELOPE_MAX_ITEMS items or AX_ACTOR_ENVELOPE_MAX_BYTES bytes).
 * An idle pipeline therefore costs one hop per stage; a loaded one
 * amortises the hop over the batch. A hop to an actor of the same system
 * does not go through nng: the sender puts the envelope into the
 * destination's inbox ring and wakes its thread (nng carries routes to
 * other processes, and the inbox socket still receives from them).
 *
 * Invariants:
 *  - Per-sender FIFO: items from one sender (actor or client) to one
 *    destination are handled in the order they were sent.
 *  - Bounded memory: an inbox queues at most inbox_depth +
 *    AX_ACTOR_SENDBUF envelopes (nng fills it up to inbox_depth, senders
 *    of its own system up to the end);
 *    a sender to a route buffers at most AX_ACTOR_SENDBUF envelopes plus
 *    a few (5 measured) in flight inside nng's pipes; an outbox
 *    holds at most outbox_max items per destination. When a destination
 *    is full a sender blocks (default) or gets AX_EAGAIN
 *    (AX_ACTOR_NONBLOCK / send_nonblock).
 *  - A handler error is logged with the actor's name and counted; the
 *    actor goes on with the next batch.
 *  - Shutdown is ordered: stop accepting, drain what is in flight, stop
 *    the actors in the order they were added, join, free; anything not
 *    handled is counted in the stop report.
 *
 * Workload: tens of thousands of items per second through ~10 actors on
 * 2 cores; an nng hop costs ~50-90 us of CPU, so batching carries the
 * throughput and an idle hop stays in the tens of microseconds.
 *
 * Delivery: in-process delivery is reliable until the stop; delivery to a
 * route (another process) is at-most-once across a stop or a peer crash
 * (envelopes still buffered in nng when a socket closes are lost): the
 * protocols on top (worker acks, PostgreSQL) carry reliability there.
 *
 * Deadlock note: with blocking sends, a cycle of actors whose inboxes are
 * all full would wait forever. Actors on a back edge of the pipeline (the
 * result handler's retry and release edges) set send_nonblock: their full
 * destinations keep items in the outbox and the actor retries later. For
 * the same reason an actor that sends to itself must use send_nonblock.
 */
#ifndef AX_ACTOR_H
#define AX_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

struct ProtobufCMessage;

/* Item types. Payloads are opaque to the runtime. */
enum {
	AX_ITEM_COMMAND = 1,    /* one packed ax.Command (commands.proto) */
	AX_ITEM_EVENT   = 2,    /* one packed ax.Event (events.proto) */
	AX_ITEM_USER    = 1000, /* first type free for module-private use */
};

#define AX_ACTOR_NAME_MAX           64 /* name length, excluding NUL */
#define AX_ACTOR_ENVELOPE_MAX_ITEMS 1024
#define AX_ACTOR_ENVELOPE_MAX_BYTES (512 * 1024)
#define AX_ACTOR_SENDBUF            4 /* envelopes buffered per sender */

/* Flags for ax_actor_flush() and ax_actor_client_send(). */
#define AX_ACTOR_NONBLOCK 1 /* AX_EAGAIN instead of waiting when full */

typedef struct ax_actor        ax_actor;
typedef struct ax_actor_system ax_actor_system;
typedef struct ax_actor_client ax_actor_client;

/* One item of a received batch; valid only during the handler call. */
typedef struct ax_actor_item {
	const char *from; /* sender's name */
	uint32_t    type; /* AX_ITEM_* */
	uint32_t    len;  /* payload bytes */
	const void *data; /* payload, not aligned, not NUL-terminated */
} ax_actor_item;

/*
 * What an actor does. Called only on the actor's own thread.
 *
 * handle: called with a drained batch (n >= 1 items, in arrival order,
 *   per-sender FIFO). Returns AX_OK, or an error (detail via ax_err_set)
 *   that the runtime logs with the actor's name and counts; items already
 *   sent with ax_actor_send() are still flushed.
 * tick: optional; called when the deadline set with ax_actor_set_deadline()
 *   has passed and the inbox is empty or has just been handled. The
 *   deadline is cleared before the call; set it again to be called again.
 *   Errors are logged and counted like handler errors. Not called once the
 *   system is stopping.
 * fini: optional; frees the state. Called by ax_actor_system_free() after
 *   the actor's thread has exited.
 */
typedef struct ax_actor_ops {
	ax_err (*handle)(ax_actor *self, void *state,
	                 const ax_actor_item *items, size_t n);
	ax_err (*tick)(ax_actor *self, void *state, int64_t now_mono_us);
	void (*fini)(void *state);
} ax_actor_ops;

/* Per-actor settings; zero members take the documented defaults. */
typedef struct ax_actor_config {
	const char *name;        /* required: [A-Za-z0-9_.-], 1..64 chars */
	const char *url;         /* NULL: inproc://ax/<name> */
	uint32_t    inbox_depth; /* envelopes queued in the inbox; 0: 64 */
	uint32_t    max_batch;   /* items per handler call; 0: 1024 */
	uint32_t    outbox_max;  /* items buffered per destination; 0: 65536 */
	int         send_nonblock; /* flush on return without blocking */
} ax_actor_config;

/* Counters of one actor; read with ax_actor_stats() from any thread. */
typedef struct ax_actor_stats {
	uint64_t envelopes_in;  /* envelopes received and valid */
	uint64_t items_in;      /* items received */
	uint64_t batches;       /* handler calls */
	uint64_t max_batch;     /* largest batch passed to the handler */
	uint64_t items_out;     /* items sent (accepted by nng) */
	uint64_t envelopes_out; /* envelopes sent */
	uint64_t errors;        /* handler/tick errors */
	uint64_t ticks;         /* tick calls */
	uint64_t eagain;        /* flushes refused because a dest was full */
	uint64_t dropped;       /* items dropped (stop, dest gone) */
	uint64_t bad_envelopes; /* malformed envelopes dropped */
} ax_actor_stats;

/* What ax_actor_system_stop() observed. */
typedef struct ax_actor_stop_report {
	int      drained;  /* 1: everything in flight was handled */
	uint64_t dropped;  /* items sent but never handled */
	int64_t  drain_us; /* time spent draining */
} ax_actor_stop_report;

/*
 * The envelope framing on its own, for the inbox and for fuzzing; pure.
 *
 * ax_actor_env_count: the item count of the envelope buf[0..len) when its
 * fixed header is well formed and the count within
 * AX_ACTOR_ENVELOPE_MAX_ITEMS, else 0 (the envelope will be refused).
 *
 * ax_actor_env_parse: validates the envelope and appends its items to
 * items[*n..]; the sender name is copied into name, which the items point
 * at, and the sender's system id into *sysid. Items point into buf. An
 * envelope of more than room items is refused. Returns AX_EPROTO with a
 * detail for any malformed field; nothing is appended then.
 */
uint32_t ax_actor_env_count(const void *buf, size_t len);
ax_err   ax_actor_env_parse(const void *buf, size_t len,
                            char name[AX_ACTOR_NAME_MAX + 1], uint64_t *sysid,
                            ax_actor_item *items, size_t room, size_t *n);

/*
 * Creates an empty system. Returns AX_ENOMEM. The system id written into
 * envelopes is random, so envelopes from other processes are told apart.
 */
ax_err ax_actor_system_new(ax_actor_system **out);

/*
 * Adds an actor before ax_actor_system_start(). The system keeps ops and
 * takes ownership of state (freed by ops->fini at system free, also when
 * this call fails). The config strings are copied. Errors: AX_EINVAL (bad
 * name or url, detail names it), AX_EEXIST (name already used), AX_ESTATE
 * (system already started), AX_ENOMEM. *out may be NULL.
 */
ax_err ax_actor_system_add(ax_actor_system *sys, const ax_actor_config *cfg,
                           const ax_actor_ops *ops, void *state,
                           ax_actor **out);

/*
 * Declares that actor `name` lives elsewhere and listens on url
 * (ipc:// or tcp://, from configuration). Sends to name then go there.
 * Errors: AX_EINVAL, AX_EEXIST, AX_ENOMEM. Call before start.
 */
ax_err ax_actor_system_route(ax_actor_system *sys, const char *name,
                             const char *url);

/*
 * Binds every inbox, then starts one thread per actor. On a bind error
 * (AX_EEXIST: address in use, AX_ENNG, AX_EINVAL) nothing is left running
 * and the detail names the actor and the address.
 */
ax_err ax_actor_system_start(ax_actor_system *sys);

/*
 * Ordered shutdown. 1) clients and ticks stop (client sends get
 * AX_ECLOSED); 2) waits up to drain_timeout_us for every item in flight
 * between this system's actors to be handled; 3) stops the actors in the
 * order they were added: each drops what still arrives (counted), closes
 * its inbox, its thread is joined. Safe to call twice and on a system
 * never started. rep may be NULL. Call from a thread that is not an
 * actor's.
 */
void ax_actor_system_stop(ax_actor_system *sys, int64_t drain_timeout_us,
                          ax_actor_stop_report *rep);

/* Stops (1 s drain) if needed, calls every fini, frees. NULL is fine. */
void ax_actor_system_free(ax_actor_system *sys);

/* Finds an actor of this system by name; NULL when unknown. */
ax_actor *ax_actor_system_find(ax_actor_system *sys, const char *name);

/* Name and inbox address of an actor (valid until system free). */
const char *ax_actor_name(const ax_actor *a);
const char *ax_actor_url(const ax_actor *a);

/* Copies the counters. Any thread. */
void ax_actor_stats_get(const ax_actor *a, ax_actor_stats *out);

/*
 * Buffers one item for dest (an actor of this system or a route). Only
 * from the actor's own handler or tick. The item goes out when the
 * handler returns (or at ax_actor_flush()). Errors: AX_ENOENT (unknown
 * dest), AX_ELIMIT (item over AX_ACTOR_ENVELOPE_MAX_BYTES, or outbox_max
 * items already buffered for dest: flush first), AX_ECLOSED (stopping),
 * AX_ENOMEM.
 */
ax_err ax_actor_send(ax_actor *self, const char *dest, uint32_t type,
                     const void *data, size_t len);

/* Like ax_actor_send() with msg packed by protobuf-c into the envelope. */
ax_err ax_actor_send_pb(ax_actor *self, const char *dest, uint32_t type,
                        const struct ProtobufCMessage *msg);

/*
 * Sends every buffered envelope now. Default: waits while a destination
 * is full (until it has room or the system stops). AX_ACTOR_NONBLOCK:
 * sends what fits and returns AX_EAGAIN if some destination was full; the
 * rest stays buffered, in order, and is retried at the next flush (the
 * runtime retries after 1 ms, backing off to 32 ms, while anything is
 * pending). Returns
 * AX_ECLOSED when items had to be dropped because the system stops.
 */
ax_err ax_actor_flush(ax_actor *self, int flags);

/* Items buffered for dest and not yet accepted by nng (0 when unknown).
 * Lets a handler see backpressure (e.g. to DELAY work). */
size_t ax_actor_outbox_pending(const ax_actor *self, const char *dest);

/*
 * Asks for a tick call at mono_us (ax_clock_mono_us() scale); replaces
 * the previous deadline; <= 0 clears it. Only from the actor's thread.
 */
void ax_actor_set_deadline(ax_actor *self, int64_t mono_us);

/*
 * A sender for code that is not an actor (API threads, bridges, tests).
 * One client per thread; free it before the system. name appears as the
 * items' `from`. Errors: AX_EINVAL, AX_ENOMEM.
 */
ax_err ax_actor_client_new(ax_actor_system *sys, const char *name,
                           ax_actor_client **out);
void   ax_actor_client_free(ax_actor_client *c);

/*
 * Sends items[0..n) to dest as one envelope (from is ignored; the
 * client's name is used). Blocks while dest's inbox is full unless flags
 * has AX_ACTOR_NONBLOCK (then AX_EAGAIN, nothing sent). Errors:
 * AX_ESTATE (system not started), AX_ECLOSED (stopping), AX_ENOENT,
 * AX_ELIMIT (too many items or bytes for one envelope), AX_ENNG.
 */
ax_err ax_actor_client_send(ax_actor_client *c, const char *dest,
                            const ax_actor_item *items, size_t n, int flags);

#endif /* AX_ACTOR_H */
