/*
 * sink_pub.h - the nng PUB sink of the event emitter: every event is
 * published on an nng PUB socket (config events.pub) for any subscriber.
 *
 * Wire format (docs/events.md): one nng message per event =
 *   <type> '\0' <JSON object>
 * i.e. the event type (the topic, e.g. "instance.succeeded"), one NUL
 * byte, then the event as UTF-8 JSON (ax_sink_pub_event_json). A SUB
 * socket subscribes by prefix: "instance.succeeded\0" for exactly one
 * type, "instance." for a family, "" for everything.
 *
 * Never blocks: nng's PUB queues up to AX_SINK_PUB_SENDBUF messages per
 * subscriber and silently discards for a subscriber whose queue is full
 * (nng 1.5 does not report those discards, so they cannot be counted);
 * a send that nng refuses (out of memory, socket closed) is counted as a
 * drop.
 *
 * Thread: one owner thread (the emitter) calls publish; stats from any
 * thread.
 */
#ifndef AX_SINK_PUB_H
#define AX_SINK_PUB_H

#include <stdint.h>

#include "ax_err.h"
#include "events.pb-c.h"

#define AX_SINK_PUB_SENDBUF 1024 /* messages queued per subscriber */

typedef struct ax_sink_pub ax_sink_pub;

typedef struct ax_sink_pub_stats {
	uint64_t published; /* messages nng accepted */
	uint64_t dropped;   /* messages nng refused or could not be built */
	uint64_t unheard;   /* events while no subscriber was connected:
	                       not encoded (PUB would discard them) */
} ax_sink_pub_stats;

/*
 * Opens a PUB socket listening on url (ipc://, tcp://, inproc://).
 * Errors: AX_EINVAL (empty url), AX_EEXIST (address in use), AX_ENNG
 * (any other nng failure); the detail names the address.
 */
ax_err ax_sink_pub_open(const char *url, ax_sink_pub **out);

/* Publishes one event (borrowed). Never blocks, never fails loudly:
 * failures are counted. */
void ax_sink_pub_publish(ax_sink_pub *p, const Ax__Event *e);

void ax_sink_pub_stats_get(const ax_sink_pub *p, ax_sink_pub_stats *out);

/* Closes the socket and frees p. NULL is fine. */
void ax_sink_pub_close(ax_sink_pub *p);

/*
 * The JSON form of an event (docs/events.md): every field of ax.Event
 * under its proto name, "time" as RFC 3339 UTC with microseconds, and
 * "payload" as the parsed payload object (null when empty; a string when
 * payload_json is not valid JSON). Returns malloc'd text (free()) or NULL
 * when out of memory.
 */
char *ax_sink_pub_event_json(const Ax__Event *e);

/* Writes us (UTC microseconds since the epoch) as
 * "YYYY-MM-DDTHH:MM:SS.ffffffZ" into buf (at least 32 bytes). */
void ax_sink_pub_time(int64_t us, char *buf, size_t len);

#endif /* AX_SINK_PUB_H */
