/*
 * cmd_command.h - `axctl command show ID [--wait]`: a durable control
 * command (GET /api/v1/commands/{id}), and the wait the state-changing
 * subcommands (`axctl dag trigger --wait`, ...) share: poll the command
 * until axd applied or rejected it.
 */
#ifndef AX_CMD_COMMAND_H
#define AX_CMD_COMMAND_H

#include <jansson.h>
#include <stdint.h>

#include "api_cmd.h"

/* ax_cmd_fn of the group (axctl.h): argv[0] is the group name; returns
 * the exit status (0 ok, 1 failure or rejected, 2 usage). */
int ax_cmd_command(int argc, char **argv);

/* Default of --timeout: how long --wait waits for axd, in seconds. */
#define AX_CMD_COMMAND_WAIT_S 60

/*
 * Polls GET /api/v1/commands/id every 200 ms until it is no longer
 * pending or timeout_us passed. *out (may be NULL) receives the last
 * answer (new reference). Returns 0 applied, 1 rejected, timed out or
 * failed (the failure printed to stderr, prefixed with cmd->prog).
 */
int ax_cmd_command_wait(ax_api_cmd *cmd, int64_t id, int64_t timeout_us,
                        json_t **out);

/*
 * After a state-changing call answered *answer: prints "command N" (not
 * with --json) and, when wait, waits for it (ax_cmd_command_wait) and
 * prints its outcome (with --json: sets answer["command"] to the
 * command's JSON, and the caller prints answer). Returns the exit status:
 * 0, or 1 (rejected, timed out, no command id in the answer).
 */
int ax_cmd_command_after(ax_api_cmd *cmd, json_t *answer, int wait,
                         int64_t timeout_us);

/* Parses a --timeout value (seconds, > 0) into *us; 0 ok, 2 usage. */
int ax_cmd_command_timeout(const ax_api_cmd *cmd, const char *text,
                           int64_t *us);

#endif /* AX_CMD_COMMAND_H */
