/*
 * ax_worker.c - one worker of a worker group: pulls attempts, runs them and
 * reports results (DESIGN.md section 4). Options and signals here; the
 * loop and protocol live in worker_client.c.
 *
 * Started as root, it runs tasks as worker.run_as (default ax-task) and
 * refuses to start when that user does not exist (exit status 2).
 *
 * Signals: SIGTERM and SIGINT write one byte to a self-pipe that the
 * loop polls (first: drain; second: kill the attempts and exit).
 * SIGCHLD keeps its default: the executors reap every child.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "ax_config.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "worker_client.h"

static int stop_pipe[2] = { -1, -1 };

static void
on_stop(int sig)
{
	int  saved = errno;
	char b     = (char) sig;
	if (write(stop_pipe[1], &b, 1) < 0)
		(void) 0;
	errno = saved;
}

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: ax-worker [--config FILE] [--server URL] [--group G]\n"
	    "                 [--slots N] [--id NAME] [--log-dir DIR]\n"
	    "\n"
	    "One worker of an AX worker group: registers with the queue\n"
	    "service, pulls attempts for its free slots, runs them (bash,\n"
	    "noop), reports their start and result, heartbeats.\n"
	    "\n"
	    "  -c, --config FILE   configuration file (YAML); AX_* "
	    "variables\n"
	    "                      override its keys, flags override "
	    "both\n"
	    "  -s, --server URL    queue address (worker.server), "
	    "tcp:// or ipc://\n"
	    "  -g, --group G       worker group (worker.group)\n"
	    "  -n, --slots N       attempts run at once (worker.slots)\n"
	    "  -i, --id NAME       worker id (worker.id; default "
	    "hostname:pid)\n"
	    "  -l, --log-dir DIR   attempt logs (worker.log_dir)\n"
	    "  -h, --help          show this help\n"
	    "  -V, --version       show the version\n"
	    "\n"
	    "SIGTERM drains (finish running attempts, report, leave);\n"
	    "a second SIGTERM kills the running attempts and exits.\n"
	    "Exit status: 0 after a drain, 1 on a runtime error or a\n"
	    "forced stop, 2 on a usage or configuration error.\n");
}

/* The exit status the watchdog ends the process with. */
static int exit_code;

/*
 * A bound on the teardown after the worker has left: nng 1.5's socket
 * close and nng_fini() can wait forever on a pipe or a context being
 * torn down (nanomsg/nng#1543, #1813), and a worker that has drained,
 * or been told to stop twice, must exit. Nothing is lost at this point:
 * results were reported, or the lease is left to settle them.
 */
static void *
exit_watchdog(void *arg)
{
	(void) arg;
	ax_clock_sleep_us(10 * AX_USEC_PER_SEC);
	ax_log_warn(
	    "ax-worker",
	    "nng teardown still running after 10 s: exiting without it");
	_exit(exit_code);
	return NULL;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "server", required_argument, NULL, 's' },
		{ "group", required_argument, NULL, 'g' },
		{ "slots", required_argument, NULL, 'n' },
		{ "id", required_argument, NULL, 'i' },
		{ "log-dir", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *flags[5][2] = { { 0 } };
	size_t      nflags = 0;
	ax_config  *cfg;
	ax_worker  *w;
	ax_err      rv;
	char        logs[1024], state[1024];
	int         c, lvl;

	while ((c = getopt_long(argc, argv, "c:s:g:n:i:l:hV", opts, NULL)) !=
	       -1) {
		const char *key = NULL;
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 's':
			key = "worker.server";
			break;
		case 'g':
			key = "worker.group";
			break;
		case 'n':
			key = "worker.slots";
			break;
		case 'i':
			key = "worker.id";
			break;
		case 'l':
			key = "worker.log_dir";
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ax-worker %s\n", AX_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (key != NULL && nflags < 5) {
			flags[nflags][0]   = key;
			flags[nflags++][1] = optarg;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ax-worker: unexpected argument '%s'\n",
		        argv[optind]);
		usage(stderr);
		return 2;
	}
	if ((rv = ax_config_load(path, &cfg)) != AX_OK) {
		fprintf(stderr, "ax-worker: %s\n", ax_err_detail());
		return 2;
	}
	for (size_t i = 0; i < nflags; i++)
		if (ax_config_set(cfg, flags[i][0], flags[i][1]) != AX_OK) {
			fprintf(stderr, "ax-worker: %s\n", ax_err_detail());
			ax_config_free(cfg);
			return 2;
		}
	lvl = ax_log_level_parse(ax_config_str(cfg, "log.level"));
	ax_log_init(lvl < 0 ? AX_LOG_INFO : (ax_log_level) lvl, 2);
	if (*ax_config_str(cfg, "worker.log_dir"))
		snprintf(logs, sizeof(logs), "%s",
		         ax_config_str(cfg, "worker.log_dir"));
	else
		snprintf(logs, sizeof(logs), "%s/logs",
		         ax_config_str(cfg, "home"));
	if (*ax_config_str(cfg, "worker.state_dir"))
		snprintf(state, sizeof(state), "%s",
		         ax_config_str(cfg, "worker.state_dir"));
	else
		snprintf(state, sizeof(state), "%s/state/worker",
		         ax_config_str(cfg, "home"));
	/* worker.prefetch -1 (the default): as many as worker.slots */
	int64_t pf       = ax_config_int(cfg, "worker.prefetch");
	int32_t prefetch = pf == -1
	    ? (int32_t) ax_config_int(cfg, "worker.slots")
	    : pf > 100001 ? 100001
	                  : (int32_t) pf;

	ax_worker_opts o = {
		.server  = ax_config_str(cfg, "worker.server"),
		.group   = ax_config_str(cfg, "worker.group"),
		.id      = ax_config_str(cfg, "worker.id"),
		.log_dir = logs,
		.slots   = (int32_t) ax_config_int(cfg, "worker.slots"),
		.reserve_p0 =
		    (int32_t) ax_config_int(cfg, "worker.reserve_p0"),
		.cpu_milli = ax_config_int(cfg, "worker.cpu_milli"),
		.memory_bytes =
		    ax_config_int(cfg, "worker.memory_mb") * (1LL << 20),
		.resources    = ax_config_str(cfg, "worker.resources"),
		.labels       = ax_config_str(cfg, "worker.labels"),
		.heartbeat_us = ax_config_duration_us(cfg, "worker.heartbeat"),
		.kill_grace_us =
		    ax_config_duration_us(cfg, "worker.kill_grace"),
		.start_spin_us =
		    ax_config_duration_us(cfg, "worker.start_spin"),
		.prefetch       = prefetch,
		.state_dir      = state,
		.cgroups        = ax_config_bool(cfg, "worker.cgroups"),
		.run_as         = ax_config_str(cfg, "worker.run_as"),
		.run_as_allowed = ax_config_str(cfg, "worker.run_as_allowed"),
		.secrets_dir    = ax_config_str(cfg, "worker.secrets_dir"),
		.secrets_env    = ax_config_str(cfg, "worker.secrets_env"),
	};
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "ax-worker: pipe: %s\n", strerror(errno));
		ax_config_free(cfg);
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if ((rv = ax_worker_new(&o, &w)) != AX_OK) {
		fprintf(stderr, "ax-worker: %s\n", ax_err_detail());
		ax_config_free(cfg);
		return rv == AX_EINVAL || rv == AX_ECONFIG ? 2 : 1;
	}
	rv = ax_worker_run(w, stop_pipe[0]);
	if (rv != AX_OK && rv != AX_ECLOSED)
		ax_log_error("ax-worker", "%s", ax_err_detail());
	exit_code = rv == AX_OK ? 0 : 1;
	{
		pthread_t t;
		if (pthread_create(&t, NULL, exit_watchdog, NULL) == 0)
			pthread_detach(t);
	}
	ax_worker_free(w); /* kills what still runs (second SIGTERM) */
	ax_config_free(cfg);
	/* nng frees a closed socket's pipes, and the request messages they
	 * still hold, on its reaper thread after nng_close() returns: without
	 * this the process could exit (and LeakSanitizer report) before. */
	nng_fini();
	return rv == AX_OK ? 0 : 1;
}
