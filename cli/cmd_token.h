/*
 * cmd_token.h - `axctl token create|list|revoke`: bearer tokens of ax-api,
 * through the API, or on the database directly with --home / --dsn
 * (bootstrap of the first admin token).
 */
#ifndef AX_CMD_TOKEN_H
#define AX_CMD_TOKEN_H

/* ax_cmd_fn for the `token` group; argv[0] is "token". */
int ax_cmd_token(int argc, char **argv);

#endif /* AX_CMD_TOKEN_H */
