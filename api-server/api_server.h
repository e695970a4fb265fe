/*
 * api_server.h - the ax-api HTTP server: libmicrohttpd daemon, request
 * bodies and limits, routing (api_routes.h), bearer-token auth, JSON
 * errors, a pool of PostgreSQL connections, request metrics.
 *
 * Role: ax_api.c (main) and the integration tests start one server; the
 * handlers reach the server's pool and metrics through ax_api_req.srv.
 *
 * Threads: MHD runs one thread per connection (a log follow may stream
 * for hours; per-connection threads let it block without stalling other
 * clients). Handlers borrow a store from a mutex-protected pool of
 * `pool_size` connections; a request that cannot get one within 5 s is
 * answered 503. Every pooled connection has TimeZone UTC.
 *
 * Answers, in this order of checks: 413 body over max_body; 404 unknown
 * path; 405 known path, other method (with Allow); 401 missing/unknown
 * token; 403 role below the route's; 400 bad_utf8 in path, query or
 * body; then the handler's answer. Every error body is JSON
 * {"error": CODE, "detail": TEXT}.
 */
#ifndef AX_API_SERVER_H
#define AX_API_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "api_http.h"
#include "api_metrics.h"
#include "ax_err.h"
#include "store.h"

typedef struct ax_api_options {
	const char *dsn;       /* libpq conninfo */
	const char *listen;    /* address to bind; NULL: 127.0.0.1 */
	int         port;      /* 0: any free port (see ax_api_server_port) */
	size_t      max_body;  /* bytes; 0: 1 MiB */
	int         pool_size; /* store connections; 0: 4 */
	unsigned    timeout_s; /* idle connection timeout; 0: 30 */
	const char *tls_cert;  /* PEM file; NULL/"": plain HTTP */
	const char *tls_key;   /* PEM file for tls_cert */
} ax_api_options;

/*
 * Connects the pool (failing fast with AX_EDBCONN when the database is
 * unreachable), then starts listening. Errors: AX_EDBCONN, AX_ECONFIG
 * (bad address, TLS files unreadable or TLS not supported), AX_EIO
 * (bind failed: the detail names address and port). The caller owns *out
 * and stops it with ax_api_server_stop.
 */
ax_err ax_api_server_start(const ax_api_options *o, ax_api_server **out);

/* The port the server listens on. */
int ax_api_server_port(const ax_api_server *s);

/*
 * Stops accepting, waits for every connection thread (log follows end
 * within a poll interval), closes the pool and frees s. Accepts NULL.
 */
void ax_api_server_stop(ax_api_server *s);

/* 1 once stop has begun (streaming handlers end their streams). */
int ax_api_server_stopping(const ax_api_server *s);

/*
 * Borrows a store from the pool, waiting up to timeout_us; AX_EBUSY when
 * none came free. Return it with ax_api_server_put_store.
 */
ax_err ax_api_server_get_store(ax_api_server *s, int64_t timeout_us,
                               ax_store **out);
void   ax_api_server_put_store(ax_api_server *s, ax_store *st);

/* The server's request metrics (for GET /metrics). */
ax_api_metrics *ax_api_server_metrics(ax_api_server *s);

#endif /* AX_API_SERVER_H */
