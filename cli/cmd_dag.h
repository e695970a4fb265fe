/*
 * cmd_dag.h - `axctl dag validate FILE...` and `axctl dag load DIR`.
 */
#ifndef AX_CMD_DAG_H
#define AX_CMD_DAG_H

/* `axctl dag ...`; argv[0] is "dag". Exit status 0 / 1 / 2. */
int ax_cmd_dag(int argc, char **argv);

#endif /* AX_CMD_DAG_H */
