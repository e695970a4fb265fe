/*
 * http_rx.h - a small HTTP receiver for tests of the HTTP sinks
 * (OpenLineage, Alertmanager, alert webhooks, and Alertmanager's own
 * webhook notifications): libmicrohttpd on a free loopback port that
 * records every request's body and path, and can answer errors on
 * demand. Its fields are read by the test under mu.
 */
#ifndef AX_TEST_HTTP_RX_H
#define AX_TEST_HTTP_RX_H

#include <microhttpd.h>
#include <pthread.h>

#define AX_HTTP_RX_MAX 256

typedef struct ax_http_rx {
	pthread_mutex_t mu;
	char           *body[AX_HTTP_RX_MAX]; /* recorded bodies (owned) */
	char           *path[AX_HTTP_RX_MAX]; /* their request paths */
	int             nbody;
	int             fail_next; /* answer 503 to this many requests */
	int             hits;      /* requests seen (any answer) */
	int             bad_ctype; /* POSTs without application/json */
	unsigned        answer;    /* nonzero: answer this status to all */
} ax_http_rx;

#define AX_HTTP_RX_INIT                                                       \
	{                                                                     \
		.mu = PTHREAD_MUTEX_INITIALIZER                               \
	}

/* Starts the receiver on 127.0.0.1 and a free port (*port); fails the
 * current criterion test when it cannot. Stop it with MHD_stop_daemon. */
struct MHD_Daemon *ax_http_rx_start(ax_http_rx *rx, unsigned *port);

/* Bodies recorded so far. */
int ax_http_rx_count(ax_http_rx *rx);

/* Frees what was recorded and clears every counter and setting. */
void ax_http_rx_reset(ax_http_rx *rx);

#endif /* AX_TEST_HTTP_RX_H */
