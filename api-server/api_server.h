/*
 * api_server.h - the ax-api HTTP server: libmicrohttpd daemon, request
 * bodies and limits, routing (api_routes.h), bearer-token auth, JSON
 * errors, a pool of PostgreSQL connections, request metrics.
 *
 * Role: ax_api.c (main) and the integration tests start one server; the
 * handlers reach the server's pool and metrics through ax_api_req.srv.
 *
 * Threads: libmicrohttpd in its epoll mode with a pool of `threads`
 * event-loop threads (default and at most: pool_size), so an idle or
 * slow connection costs memory, not a thread: thousands may be held
 * open while others are served. A handler runs on the thread of its
 * connection and blocks that thread's other connections while it runs,
 * so every database statement is bounded (statement_timeout, default
 * 15 s) and a thread never waits for a pooled connection: there are no
 * more threads than connections in the pool. A log follow does not
 * block: its reader suspends the connection until the next tick (100
 * ms; ax_api_server_wait). Every pooled connection has TimeZone UTC.
 *
 * Limits: max_connections in all (the process's open-file limit is
 * raised to fit, or the limit clamped with a warning); per_client per
 * client address (default 64; MHD closes a connection over it at accept,
 * before a request exists to answer; behind a proxy every client has the
 * proxy's address: raise it or set no limit); an idle connection is
 * closed after timeout_s; a request head (request line and headers)
 * must arrive within header_timeout_s of the accept or of the end of the
 * previous request on the connection, else the connection is dropped:
 * with a JSON 408 when its request line had come (plain HTTP), silently
 * when nothing had (a keep-alive timeout). This stops slowloris clients
 * that send a byte every few seconds, which the idle timeout does not.
 *
 * Answers, in this order of checks: 431 request line + headers over
 * max_header; 413 body over max_body (announced: at once; chunked: when
 * the body ends, or past 64 MiB on the fly); 400 a NUL (%00) or bad
 * UTF-8 in the path or query; a GET or HEAD of a path outside /api/
 * that no route knows: the web UI (api_ui.h); 404 unknown path; 405
 * known path, other method (with Allow); 400 a path {id} or {name}
 * against its rule (api_http.h); 401 missing/unknown token; 403 role
 * below the route's; 400 bad_utf8 body; 400 a body the route does not
 * take (none, JSON object, no fields: api_routes.h); then the handler's
 * answer. Every error body is JSON {"error": CODE, "detail": TEXT}.
 * The exception is a head so large that it overflows MHD's connection memory
 * (2 x max_header + 16 KiB, 48 KiB by default): MHD 0.9.75 answers that 431
 * itself, with a fixed HTML text and no hook to replace it.
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
	unsigned    header_timeout_s; /* request head deadline; 0: 10 */
	size_t      max_header;       /* request line + headers; 0: 16 KiB */
	unsigned    max_connections;  /* in all; 0: 10000 */
	int         per_client; /* connections per address; 0: 64, <0: any */
	int         threads;    /* event-loop threads; 0: pool_size */
	int64_t     statement_timeout_ms; /* 0: 15000; <0: the server's */
	const char *tls_cert;             /* PEM file; NULL/"": plain HTTP */
	const char *tls_key;              /* PEM file for tls_cert */
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
 * Stops accepting, ends every log follow (within a tick), closes every
 * connection, closes the pool and frees s. Accepts NULL.
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

/*
 * For a content reader (on its connection's thread) that has no bytes
 * yet: suspends the connection c until the server's next tick (about
 * 100 ms), when MHD calls the reader again; the reader then returns 0.
 * Returns 0 without suspending once the server is stopping (or out of
 * memory): end the stream instead.
 */
int ax_api_server_wait(ax_api_server *s, struct MHD_Connection *c);

/* Connections dropped so far for a request head late past
 * header_timeout_s. */
uint64_t ax_api_server_head_timeouts(const ax_api_server *s);

/* The server's request metrics (for GET /metrics). */
ax_api_metrics *ax_api_server_metrics(ax_api_server *s);

#endif /* AX_API_SERVER_H */
