/*
 * cmd_standalone.h - `axctl standalone`: everything on one machine.
 */
#ifndef AX_CMD_STANDALONE_H
#define AX_CMD_STANDALONE_H

/* `axctl standalone ...`; argv[0] is "standalone". Exit status 0 after a
 * clean stop on SIGINT/SIGTERM, 1 on a failure, 2 on a usage error. */
int ax_cmd_standalone(int argc, char **argv);

#endif /* AX_CMD_STANDALONE_H */
