/*
 * cmd_drill.h - `axctl drill NAME`: fault drills on a standalone home
 * (see cmd_drill.c).
 */
#ifndef AX_CMD_DRILL_H
#define AX_CMD_DRILL_H

/* `axctl drill ...`; argv[0] is "drill". Exit status 0 / 1 / 2. */
int ax_cmd_drill(int argc, char **argv);

#endif /* AX_CMD_DRILL_H */
