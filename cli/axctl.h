/*
 * axctl.h - subcommands of axctl. Each group lives in cli/cmd_<group>.c
 * and has the signature of ax_cmd_fn: argv[0] is the group name, the
 * return value is the process exit status (0 ok, 1 failure, 2 usage).
 */
#ifndef AX_AXCTL_H
#define AX_AXCTL_H

typedef int (*ax_cmd_fn)(int argc, char **argv);

typedef struct ax_cmd {
	const char *name;
	ax_cmd_fn   run;
	const char *summary;
} ax_cmd;

#endif /* AX_AXCTL_H */
