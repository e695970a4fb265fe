/*
 * cmd_pool.h - `axctl pool pressure`: water levels pushed for a pool or
 * worker group through ax-api.
 */
#ifndef AX_CMD_POOL_H
#define AX_CMD_POOL_H

/* ax_cmd_fn of the group (axctl.h): argv[0] is the group name; returns
 * the exit status (0 ok, 1 failure, 2 usage). */
int ax_cmd_pool(int argc, char **argv);

#endif /* AX_CMD_POOL_H */
