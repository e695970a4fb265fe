/*
 * http_rx.c - the tests' HTTP receiver (see http_rx.h). Requests are
 * answered from MHD's internal polling thread; the recorded bodies are
 * guarded by the receiver's mutex.
 */
#include "http_rx.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	char  *p;
	size_t len;
} rx_req;

static enum MHD_Result
rx_handler(void *cls, struct MHD_Connection *c, const char *url,
           const char *method, const char *version, const char *data,
           size_t *size, void **con_cls)
{
	ax_http_rx *rx = cls;
	rx_req     *q  = *con_cls;
	(void) version;
	if (q == NULL) {
		*con_cls = calloc(1, sizeof(rx_req));
		return *con_cls != NULL ? MHD_YES : MHD_NO;
	}
	if (*size > 0) {
		char *np = realloc(q->p, q->len + *size + 1);
		if (np == NULL)
			return MHD_NO;
		memcpy(np + q->len, data, *size);
		q->p = np;
		q->len += *size;
		q->p[q->len] = '\0';
		*size        = 0;
		return MHD_YES;
	}
	const char *ct =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	unsigned status = 200;
	pthread_mutex_lock(&rx->mu);
	rx->hits++;
	if (strcmp(method, "POST") != 0 || ct == NULL ||
	    strncmp(ct, "application/json", 16) != 0)
		rx->bad_ctype++;
	if (rx->answer != 0) {
		status = rx->answer;
	} else if (rx->fail_next > 0) {
		rx->fail_next--;
		status = 503;
	} else if (rx->nbody < AX_HTTP_RX_MAX) {
		rx->path[rx->nbody]   = strdup(url);
		rx->body[rx->nbody++] = q->p != NULL ? q->p : strdup("");
		q->p                  = NULL;
	}
	pthread_mutex_unlock(&rx->mu);
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    2, (void *) "{}", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rv = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rv;
}

static void
rx_done(void *cls, struct MHD_Connection *c, void **con_cls,
        enum MHD_RequestTerminationCode toe)
{
	rx_req *q = *con_cls;
	(void) cls;
	(void) c;
	(void) toe;
	if (q != NULL) {
		free(q->p);
		free(q);
	}
	*con_cls = NULL;
}

struct MHD_Daemon *
ax_http_rx_start(ax_http_rx *rx, unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr    = htonl(INADDR_LOOPBACK);
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, rx_handler, rx,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &a,
	    MHD_OPTION_NOTIFY_COMPLETED, rx_done, NULL, MHD_OPTION_END);
	cr_assert_not_null(d, "cannot start the HTTP receiver");
	const union MHD_DaemonInfo *i =
	    MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*port = i->port;
	return d;
}

int
ax_http_rx_count(ax_http_rx *rx)
{
	pthread_mutex_lock(&rx->mu);
	int n = rx->nbody;
	pthread_mutex_unlock(&rx->mu);
	return n;
}

void
ax_http_rx_reset(ax_http_rx *rx)
{
	pthread_mutex_lock(&rx->mu);
	for (int i = 0; i < rx->nbody; i++) {
		free(rx->body[i]);
		free(rx->path[i]);
	}
	rx->nbody = rx->hits = rx->fail_next = rx->bad_ctype = 0;
	rx->answer                                           = 0;
	pthread_mutex_unlock(&rx->mu);
}
