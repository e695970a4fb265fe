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
 * ax_pipeline_ctx *)`, which creates its private state and adds it to the
 * system under its name below, so axd and tests can compose any subset.
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
#define AX_A_RENDERER            "renderer"
#define AX_A_PRE_HOOK            "pre_hook"
#define AX_A_QUEUE               "queue"
#define AX_A_POST_HOOK           "post_hook"
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

#endif /* AX_PIPELINE_H */
