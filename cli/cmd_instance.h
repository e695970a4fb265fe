/*
 * cmd_instance.h - `axctl instance list|show|logs|kill|clear|mark`: task
 * instances through ax-api.
 */
#ifndef AX_CMD_INSTANCE_H
#define AX_CMD_INSTANCE_H

/* ax_cmd_fn of the group (axctl.h): argv[0] is the group name; returns
 * the exit status (0 ok, 1 failure, 2 usage). */
int ax_cmd_instance(int argc, char **argv);

#endif /* AX_CMD_INSTANCE_H */
