/*
 * cmd_token.h - `axctl token create --role R [--name N]`: mints an API
 * bearer token (engine/api_token.h) and prints it once.
 */
#ifndef AX_CMD_TOKEN_H
#define AX_CMD_TOKEN_H

/* ax_cmd_fn for the `token` group; argv[0] is "token". */
int ax_cmd_token(int argc, char **argv);

#endif /* AX_CMD_TOKEN_H */
