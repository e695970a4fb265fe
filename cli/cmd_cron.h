/*
 * cmd_cron.h - `axctl cron next 'EXPR' --tz ZONE --from ISO8601 --count N`:
 * prints the next fire times of a cron expression (see cli/cmd_cron.c).
 */
#ifndef AX_CMD_CRON_H
#define AX_CMD_CRON_H

/* ax_cmd_fn for the `cron` group; argv[0] is "cron". */
int ax_cmd_cron(int argc, char **argv);

#endif /* AX_CMD_CRON_H */
