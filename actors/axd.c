/*
 * axd.c - the AX scheduler daemon: hosts the actor pipeline and the queue
 * service (DESIGN.md section 2). This file only parses the command line,
 * loads the configuration and runs the pipeline until SIGINT/SIGTERM.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "ax_config.h"
#include "log.h"

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axd [--config FILE] [--help] [--version]\n"
	    "\n"
	    "The AX scheduler: hosts the actor pipeline (DAG loader, time,\n"
	    "dependency and resource detectors, instance generator, "
	    "renderer,\n"
	    "hooks, result handler, event emitter) and the queue service.\n"
	    "\n"
	    "  -c, --config FILE  configuration file (YAML); AX_* variables\n"
	    "                     override its keys\n"
	    "  -h, --help         show this help\n"
	    "  -V, --version      show the version\n"
	    "\n"
	    "Exit status: 0 after a clean shutdown, 1 on a runtime error,\n"
	    "2 on a usage error.\n");
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("axd %s\n", AX_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	ax_log_error("axd", "the scheduler pipeline is not built yet");
	return 1;
}
