/*
 * cmd_rule.h - `axctl rule add|list|rm|test`: Allow/Block rules through
 * ax-api (engine/rule.h has the format, docs/rules.md the guide).
 */
#ifndef AX_CMD_RULE_H
#define AX_CMD_RULE_H

/* ax_cmd_fn for the `rule` group; argv[0] is "rule". */
int ax_cmd_rule(int argc, char **argv);

#endif /* AX_CMD_RULE_H */
