/*
 * pipeline.h - what every pipeline actor of axd shares.
 *
 * The actors of DESIGN.md section 2 run on the actor runtime (actor.h)
 * and exchange items of type AX_ITEM_COMMAND (one packed ax.Command,
 * proto/commands.proto) and AX_ITEM_EVENT (one packed ax.Event,
 * proto/events.proto). This header names the actors, holds the context
 * every actor is built with, and the two helpers every actor uses to send
 * a command and to emit an event.
 *
 * Each actor module exposes `ax_<actor>_add(ax_actor_system *, const
 * ax_pipeline_ctx *)`, which adds it to the system under its name below,
 * so axd and tests can compose any subset. An actor is defined by one
 * const table (ax_pipeline_def, below): its name, state size, init /
 * fini, tick, send mode and one handler per command kind; its _add is
 * ax_pipeline_add() with that table. The table's glue resolves the
 * inbox address, allocates the state, unpacks every item once, dispatches
 * it to the handler of its kind, refuses what the actor has no handler
 * for (logged with the actor's name) and frees each command once.
 */
#ifndef AX_PIPELINE_H
#define AX_PIPELINE_H

#include <stdint.h>

#include "actor.h"
#include "ax_err.h"
#include "commands.pb-c.h"
#include "config.h"
#include "events.pb-c.h"
#include "log.h"

/* Actor names (and inbox names: inproc://ax/<name> unless configured). */
#define AX_A_DAG_LOADER          "dag_loader"
#define AX_A_TIME_DETECTOR       "time_detector"
#define AX_A_DEPENDENCY_DETECTOR "dependency_detector"
#define AX_A_RESOURCE_DETECTOR   "resource_detector"
#define AX_A_INSTANCE_GENERATOR  "instance_generator"
#define AX_A_QUEUE               "queue"
#define AX_A_RESULT_HANDLER      "result_handler"
#define AX_A_EVENT_EMITTER       "event_emitter"

struct ax_dag_registry;

/*
 * Built by axd's main() before the actors; read-only afterwards, shared
 * by every actor thread. Owned by main().
 */
typedef struct ax_pipeline_ctx {
	const ax_config *cfg;             /* configuration */
	const char      *dsn;             /* PostgreSQL; each actor opens its
	                                     own connection */
	const char             *home;     /* AX home (logs, sockets) */
	struct ax_dag_registry *registry; /* loaded DAG versions */
	int64_t                 epoch;    /* scheduler lease epoch (fencing) */
} ax_pipeline_ctx;

/*
 * Packs cmd into self's outbox for dest (flushed when the handler
 * returns). Only from self's handler or tick. Errors as ax_actor_send().
 */
ax_err ax_pipeline_send(ax_actor *self, const char *dest,
                        const Ax__Command *cmd);

/*
 * Emits one event to the event emitter: a fresh id, the current UTC time,
 * type (e.g. "instance.admitted"), reason code (may be NULL), the ids of
 * ids (may be NULL), payload_json (may be NULL; a JSON object text).
 * persisted = 1 when the producer already wrote it to event_log in its
 * own transaction (the emitter then only logs and publishes it).
 */
ax_err ax_pipeline_event(ax_actor *self, const char *type, const char *reason,
                         const ax_log_ids *ids, const char *payload_json,
                         int persisted);

/*
 * Unpacks one AX_ITEM_COMMAND item; NULL (and a logged warning naming
 * the actor and the sender) when the bytes are not a Command. Free with
 * ax__command__free_unpacked(cmd, NULL).
 */
Ax__Command *ax_pipeline_unpack(ax_actor *self, const ax_actor_item *item);

/* ---------------------------------------------------------------------- */
/* defining an actor */

/* Command kinds a table can name: ax.Command body field numbers
 * (proto/commands.proto) below this. A larger field number does not
 * compile in a table's designated initialiser; raise it then. */
#define AX_PIPELINE_BODY_MAX 64

/*
 * One unpacked item handed to a handler, valid during the call. cmd (for
 * the handlers of on[]) or ev (for on_event) is owned by the pipeline,
 * which frees it once when the handler returns, unless the handler called
 * ax_pipeline_keep(m).
 */
typedef struct ax_pipeline_msg {
	const char  *from; /* sender's name */
	Ax__Command *cmd;  /* the command (on[] handlers), else NULL */
	Ax__Event   *ev;   /* the event (on_event), else NULL */
	int          kept; /* set by ax_pipeline_keep() */
} ax_pipeline_msg;

/*
 * A handler of one command kind (or of events). Called on the actor's
 * thread only, between batch_begin and batch_end of its batch. Returns
 * AX_OK or an error (detail via ax_err_set) that ends up in the batch's
 * result: the first error of a batch is logged with the actor's name and
 * counted by the runtime (actor.h); later items are still handled.
 */
typedef ax_err (*ax_pipeline_fn)(ax_actor *self, void *state,
                                 ax_pipeline_msg *m);

/*
 * Ownership rule for a handler that keeps what it was handed (a timer
 * that holds its command, a batch collected for one transaction at
 * batch_end, a FIFO kept while PostgreSQL is down): it calls
 * ax_pipeline_keep(m) before it returns, whatever it returns. From then on
 * m->cmd (or m->ev) is the actor's, to free exactly once with
 * ax__command__free_unpacked(cmd, NULL) (ax__event__free_unpacked for an
 * event), also from its fini; the pipeline never touches it again. A
 * handler that does not call it must not keep any pointer into the
 * message after it returns (it may take a sub-message out and set the
 * field to NULL: protobuf-c frees what is left).
 */
void ax_pipeline_keep(ax_pipeline_msg *m);

/*
 * The definition of one actor: a const table with designated
 * initialisers, e.g.
 *
 *   static const ax_pipeline_def td_def = {
 *       .name = AX_A_TIME_DETECTOR, .state_size = sizeof(tdet),
 *       .init = td_init, .fini = td_fini, .tick = td_tick,
 *       .on = { [AX__COMMAND__BODY_TIMER_SET] = on_timer_set, ... },
 *   };
 *
 * Every callback runs on the actor's thread, except init and added (the
 * caller of ax_pipeline_add) and fini (ax_actor_system_free's caller,
 * after the thread has exited).
 */
typedef struct ax_pipeline_def {
	const char *name; /* actor, inbox (actors.<name>) and log component */
	size_t      state_size; /* zeroed bytes given to init */
	/* Fills the zeroed state; arg is ax_pipeline_add's. On an error
	 * (detail set) fini runs on the state as init left it. May be NULL. */
	ax_err (*init)(void *state, const ax_pipeline_ctx *ctx, void *arg);
	/* After the actor joined the system and before it starts: self for
	 * the state, a first deadline, sockets of its own. On an error the
	 * actor stays in the system (its state is freed with the system).
	 * May be NULL. */
	ax_err (*added)(ax_actor *self, void *state);
	/* Frees what the state holds (not the state itself: the pipeline
	 * frees it). Safe on a zeroed or half-initialised state. NULL: none */
	void (*fini)(void *state);
	/* Called when its deadline passed (actor.h). May be NULL. */
	ax_err (*tick)(ax_actor *self, void *state, int64_t now_mono_us);
	/* > 0: the pipeline owns the deadline and ticks this often from the
	 * start (the tick must not set a deadline itself). 0: the actor sets
	 * its own deadlines with ax_actor_set_deadline() (the actors of axd:
	 * their next instant depends on their state). */
	int64_t tick_period_us;
	int     tick_at_start; /* first tick as soon as the system runs */
	int     nonblock;      /* ax_actor_config.send_nonblock (back edges,
	                          sends to itself) */
	uint32_t inbox_depth;  /* ax_actor_config.inbox_depth; 0: default */
	/* Around each drained batch (n items): the handlers of its items run
	 * in between, in arrival order. batch_end is where an actor that
	 * writes one transaction per batch commits what its handlers
	 * collected, or flushes its outbox; it runs after every batch, also
	 * when a handler failed. Either may be NULL. */
	void (*batch_begin)(ax_actor *self, void *state, size_t n);
	ax_err (*batch_end)(ax_actor *self, void *state);
	/* Handler per ax.Command body case; a command whose case has none
	 * is logged ("unexpected command", component = name) and freed. */
	ax_pipeline_fn on[AX_PIPELINE_BODY_MAX];
	/* AX_ITEM_EVENT items, unpacked as ax.Event. NULL: refused. */
	ax_pipeline_fn on_event;
	/* Items of this type (AX_ITEM_USER and up; 0: none) only wake the
	 * actor: they carry nothing, reach no handler and are not logged,
	 * but their batch runs (batch_begin, batch_end). For an actor that
	 * other threads hand work outside its inbox (the queue's worker
	 * endpoint): they send an empty item of this type with
	 * ax_actor_client_send, and batch_end picks the work up. */
	uint32_t wake_type;
	/* Items of any other type (AX_ITEM_USER and up), raw. NULL: refused
	 * (logged as an unexpected item). */
	ax_err (*on_item)(ax_actor *self, void *state,
	                  const ax_actor_item *item);
	/* Called for each item the pipeline drops, once it is logged: one
	 * that does not unpack (BAD_MESSAGE) or one the actor has no handler
	 * for; e.g. to count them. May be NULL. */
	void (*on_drop)(ax_actor *self, void *state,
	                const ax_actor_item *item);
} ax_pipeline_def;

/*
 * Adds the actor def describes to sys, before ax_actor_system_start():
 * inbox from ax_config_actor_addr(ctx->cfg, def->name) (inproc://ax/<name>
 * unless configured), a zeroed state of def->state_size bytes given to
 * def->init(state, ctx, arg), then the actor, then def->added. def and
 * ctx must outlive the system. *out_state (may be NULL) is the state once
 * everything succeeded (for the module's stats readers), else NULL. The
 * state is freed once (def->fini, then its memory): here when init fails,
 * else by the system, also when ax_actor_system_add or added fails. Errors:
 * AX_EINVAL (def without a name), AX_ENOMEM, those of init,
 * ax_actor_system_add and added.
 */
ax_err ax_pipeline_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                       const ax_pipeline_def *def, void *arg,
                       void **out_state);

#endif /* AX_PIPELINE_H */
