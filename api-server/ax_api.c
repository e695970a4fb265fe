/*
 * ax_api.c - main() of ax-api, the AX HTTP API server (JSON over HTTP
 * under /api/v1; api-server/openapi.yaml describes every route).
 *
 * Role: loads the configuration, finds the database like axd does
 * (database.dsn, else the embedded cluster under `home`, which ax-api
 * does not start: `axctl db up` or `axctl standalone` do), starts the
 * server (api_server.h) and runs until SIGINT or SIGTERM, then stops
 * cleanly: no new connections, running requests finish, log follows end.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_server.h"
#include "ax_config.h"
#include "config.h"
#include "log.h"
#include "migrate.h"
#include "pg_embed.h"

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: ax-api [--config FILE] [--listen ADDR] [--port N]\n"
	    "              [--help] [--version]\n"
	    "\n"
	    "The AX HTTP API: JSON over HTTP under /api/v1 (see\n"
	    "api-server/openapi.yaml), bearer-token auth (`axctl token\n"
	    "create`), /healthz and Prometheus /metrics.\n"
	    "\n"
	    "  -c, --config FILE  configuration file (YAML); AX_* variables\n"
	    "                     override its keys\n"
	    "  -l, --listen ADDR  address to listen on (api.listen)\n"
	    "  -p, --port N       port (api.port; 0 = any free port)\n"
	    "  -h, --help         show this help\n"
	    "  -V, --version      show the version\n"
	    "\n"
	    "The database is database.dsn, else the embedded cluster of\n"
	    "`home` (it must be running). SIGINT/SIGTERM stop cleanly.\n"
	    "Exit status: 0 after a clean shutdown, 1 on a runtime error,\n"
	    "2 on a usage error.\n");
}

/* Blocks SIGINT/SIGTERM in every thread and waits for one of them. */
static int
wait_signal(const sigset_t *set)
{
	int sig = 0;
	sigwait(set, &sig);
	return sig;
}

static int
run(ax_config *cfg)
{
	ax_pg_embed   *embed = NULL;
	ax_api_server *srv   = NULL;
	ax_api_options o     = { 0 };
	const char    *dsn   = ax_config_str(cfg, "database.dsn");
	sigset_t       set;
	ax_err         rv;
	int            dbv = 0, binv = 0;

	if (dsn == NULL || *dsn == '\0') {
		rv = ax_pg_embed_new(ax_config_str(cfg, "home"),
		                     ax_config_str(cfg, "database.pgbin"),
		                     &embed);
		if (rv != AX_OK) {
			ax_log_error("api", "%s", ax_err_detail());
			return 1;
		}
		dsn = ax_pg_embed_dsn(embed);
	}
	if (ax_migrate_status(dsn, &dbv, &binv) == AX_OK && dbv < binv)
		ax_log_warn("api",
		            "database schema is version %d, this binary "
		            "expects %d: run `axctl db migrate`",
		            dbv, binv);
	o.dsn       = dsn;
	o.listen    = ax_config_str(cfg, "api.listen");
	o.port      = (int) ax_config_int(cfg, "api.port");
	o.max_body  = (size_t) ax_config_int(cfg, "api.max_body");
	o.pool_size = (int) ax_config_int(cfg, "database.pool");
	o.timeout_s =
	    (unsigned) (ax_config_duration_us(cfg, "api.timeout") / 1000000);
	o.header_timeout_s =
	    (unsigned) (ax_config_duration_us(cfg, "api.header_timeout") /
	                1000000);
	o.max_header = (size_t) ax_config_int(cfg, "api.max_header");
	o.max_connections =
	    (unsigned) ax_config_int(cfg, "api.max_connections");
	o.per_client =
	    (int) ax_config_int(cfg, "api.max_connections_per_client");
	if (o.per_client == 0)
		o.per_client = -1; /* 0 in the file: no limit */
	o.threads = (int) ax_config_int(cfg, "api.threads");
	o.statement_timeout_ms =
	    ax_config_duration_us(cfg, "api.statement_timeout") / 1000;
	if (o.statement_timeout_ms == 0)
		o.statement_timeout_ms = -1; /* 0 in the file: the server's */
	o.tls_cert = ax_config_str(cfg, "api.tls_cert");
	o.tls_key  = ax_config_str(cfg, "api.tls_key");

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before threads start */
	signal(SIGPIPE, SIG_IGN);
	if ((rv = ax_api_server_start(&o, &srv)) != AX_OK) {
		ax_log_error("api", "cannot start: %s", ax_err_detail());
		ax_pg_embed_free(embed);
		return 1;
	}
	ax_log_info("api", "listening on %s://%s:%d/api/v1",
	            o.tls_cert && *o.tls_cert ? "https" : "http", o.listen,
	            ax_api_server_port(srv));
	int sig = wait_signal(&set);
	ax_log_info("api", "signal %d: stopping", sig);
	ax_api_server_stop(srv);
	ax_pg_embed_free(embed);
	ax_log_info("api", "stopped");
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "port", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *listen = NULL, *port = NULL;
	ax_config  *cfg;
	int         c, rc;

	while ((c = getopt_long(argc, argv, "c:l:p:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ax-api %s\n", AX_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ax-api: unexpected argument '%s'\n",
		        argv[optind]);
		usage(stderr);
		return 2;
	}
	if (ax_config_load(config, &cfg) != AX_OK) {
		fprintf(stderr, "ax-api: %s\n", ax_err_detail());
		return 2;
	}
	if ((listen && ax_config_set(cfg, "api.listen", listen) != AX_OK) ||
	    (port && ax_config_set(cfg, "api.port", port) != AX_OK)) {
		fprintf(stderr, "ax-api: %s\n", ax_err_detail());
		ax_config_free(cfg);
		return 2;
	}
	ax_log_init(
	    (ax_log_level) ax_log_level_parse(ax_config_str(cfg, "log.level")),
	    2);
	rc = run(cfg);
	ax_config_free(cfg);
	return rc;
}
