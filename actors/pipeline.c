/*
 * pipeline.c - sending commands and emitting events for pipeline actors.
 */
#include "pipeline.h"

#include "clock.h"
#include "uuid.h"

ax_err
ax_pipeline_send(ax_actor *self, const char *dest, const Ax__Command *cmd)
{
	return ax_actor_send_pb(self, dest, AX_ITEM_COMMAND,
	                        (const ProtobufCMessage *) cmd);
}

ax_err
ax_pipeline_event(ax_actor *self, const char *type, const char *reason,
                  const ax_log_ids *ids, const char *payload_json,
                  int persisted)
{
	Ax__Event ev = AX__EVENT__INIT;
	char      id[AX_UUID_LEN];

	ev.id      = ax_uuid_v7(id);
	ev.type    = (char *) type;
	ev.time_us = ax_clock_utc_us();
	ev.source  = (char *) ax_actor_name(self);
	if (reason != NULL)
		ev.reason = (char *) reason;
	if (ids != NULL) {
		if (ids->dag != NULL)
			ev.dag = (char *) ids->dag;
		ev.dag_run_id  = ids->run;
		ev.instance_id = ids->instance;
		if (ids->run_id != NULL)
			ev.run_id = (char *) ids->run_id;
		ev.attempt = ids->attempt;
	}
	if (payload_json != NULL)
		ev.payload_json = (char *) payload_json;
	ev.persisted = persisted != 0;
	return ax_actor_send_pb(self, AX_A_EVENT_EMITTER, AX_ITEM_EVENT,
	                        (const ProtobufCMessage *) &ev);
}

Ax__Command *
ax_pipeline_unpack(ax_actor *self, const ax_actor_item *item)
{
	Ax__Command *cmd;

	cmd =
	    ax__command__unpack(NULL, item->len, (const uint8_t *) item->data);
	if (cmd == NULL)
		ax_logf(AX_LOG_WARN, ax_actor_name(self), "BAD_MESSAGE", NULL,
		        "dropped %u bytes from %s that are not an ax.Command",
		        item->len, item->from);
	return cmd;
}
