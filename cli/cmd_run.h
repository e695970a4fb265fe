/*
 * cmd_run.h - `axctl run list|show`: DAG runs through ax-api.
 */
#ifndef AX_CMD_RUN_H
#define AX_CMD_RUN_H

/* ax_cmd_fn of the group (axctl.h): argv[0] is the group name; returns
 * the exit status (0 ok, 1 failure, 2 usage). */
int ax_cmd_run(int argc, char **argv);

#endif /* AX_CMD_RUN_H */
