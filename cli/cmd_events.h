/*
 * cmd_events.h - `axctl events [--follow]`: the event log through ax-api.
 */
#ifndef AX_CMD_EVENTS_H
#define AX_CMD_EVENTS_H

/* ax_cmd_fn of the group (axctl.h): argv[0] is the group name; returns
 * the exit status (0 ok, 1 failure, 2 usage). */
int ax_cmd_events(int argc, char **argv);

#endif /* AX_CMD_EVENTS_H */
