/*
 * cmd_explain.h - `axctl explain instance|run ID [--json]`: what an
 * instance or a run waits for, its decision timeline and its attempts,
 * through ax-api (GET /api/v1/{instances,runs}/ID/explain).
 */
#ifndef AX_CMD_EXPLAIN_H
#define AX_CMD_EXPLAIN_H

int ax_cmd_explain(int argc, char **argv);

#endif /* AX_CMD_EXPLAIN_H */
