/*
 * cmd_dag_api.h - `axctl dag`: the subcommands that go through ax-api
 * (submit, list, show, pause, unpause, trigger, backfill) and the group's
 * dispatcher; the offline ones (validate, json, load) stay in cmd_dag.c.
 */
#ifndef AX_CMD_DAG_API_H
#define AX_CMD_DAG_API_H

/* ax_cmd_fn of the group (axctl.h): argv[0] is the group name; returns
 * the exit status (0 ok, 1 failure, 2 usage). */
int ax_cmd_dag_api(int argc, char **argv);

#endif /* AX_CMD_DAG_API_H */
