/*
 * worker_proto.h - decoding and checking of the worker protocol
 * (proto/worker.proto) at both ends: what the queue service accepts from
 * a worker, and what a worker accepts from the queue service.
 *
 * Role: the queue service's worker endpoint (actors/queue/queue_endpoint.c)
 * decodes every request with ax_wproto_worker_msg(); ax-worker
 * (worker/worker_client.c) decodes every reply with ax_wproto_queue_msg()
 * and checks each dispatch with ax_wproto_dispatch() before it starts
 * anything. The messages come over ipc:// or tcp:// from a process that
 * may be broken, old or hostile, so everything a handler relies on is
 * checked here, once: counts and lengths are bounded, numbers are in
 * range, names that become paths or environment entries are safe. The
 * functions are pure (no I/O, no state); tests/fuzz/fuzz_worker_proto.c
 * runs them on arbitrary bytes.
 *
 * Errors: AX_EPROTO with a detail naming the message and field and what
 * is allowed, e.g. "Register.slots is -3; 1..100000 allowed".
 */
#ifndef AX_WORKER_PROTO_H
#define AX_WORKER_PROTO_H

#include <stddef.h>

#include "ax_err.h"
#include "worker.pb-c.h"

#define AX_WPROTO_NAME_MAX   255    /* worker id, group, host, dag, task */
#define AX_WPROTO_RUN_ID_MAX 127    /* a run_id (a UUID is 36) */
#define AX_WPROTO_SLOTS_MAX  100000 /* slots of one worker */
/* CPU and memory one worker may offer: a 64 Ki-core, 64 TiB machine */
#define AX_WPROTO_CPU_MILLI_MAX (65536LL * 1000)
#define AX_WPROTO_MEMORY_MAX    (64LL << 40)
#define AX_WPROTO_LIST_MAX      100000 /* run ids or reports in one message */
#define AX_WPROTO_LABELS_MAX    256    /* labels, task types, env entries */
#define AX_WPROTO_PATH_MAX      4096   /* log paths, workdirs */
#define AX_WPROTO_TEXT_MAX      65536  /* error texts, label values */
/* Dispatch.start_after_us: the queue sends at most queue.dispatch_ahead
 * (up to 1 s) early; a minute leaves room and refuses nonsense. */
#define AX_WPROTO_START_AFTER_MAX (60LL * 1000000)
/* instants: years 0001-9999 in UTC microseconds */
#define AX_WPROTO_TIME_MIN (-62135596800LL * 1000000)
#define AX_WPROTO_TIME_MAX (253402300800LL * 1000000 - 1)

/*
 * Unpacks buf[0..len) as an ax.WorkerMessage and checks it. On AX_OK
 * *out is the message (free with ax__worker_message__free_unpacked);
 * otherwise *out is NULL and the error is AX_EPROTO (or AX_ENOMEM). A
 * message with no body, or one of a newer protocol, passes: the caller
 * answers it as unsupported.
 */
ax_err ax_wproto_worker_msg(const void *buf, size_t len,
                            Ax__WorkerMessage **out);

/*
 * Unpacks buf[0..len) as an ax.QueueMessage and checks it (but not each
 * dispatch of a DispatchBatch: see ax_wproto_dispatch). *out as above
 * (free with ax__queue_message__free_unpacked).
 */
ax_err ax_wproto_queue_msg(const void *buf, size_t len,
                           Ax__QueueMessage **out);

/*
 * Checks one dispatch before the worker runs it: a run_id, dag and task
 * that are safe in a log path, attempt and shard in range, timeouts that
 * convert to microseconds, env names that are names. AX_EPROTO names the
 * field; the run_id is usable in a Result when d->run_id passes
 * ax_wproto_run_id_ok().
 */
ax_err ax_wproto_dispatch(const Ax__Dispatch *d);

/* 1 when s is a run_id: 1..AX_WPROTO_RUN_ID_MAX of [A-Za-z0-9._-], not
 * starting with '.'. */
int ax_wproto_run_id_ok(const char *s);

#endif /* AX_WORKER_PROTO_H */
