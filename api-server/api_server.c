/*
 * api_server.c - the ax-api HTTP server (see api_server.h): request
 * life cycle on libmicrohttpd, body limit, routing, auth, answers,
 * metrics, and the pool of PostgreSQL connections.
 */
#include "api_server.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api_routes.h"
#include "clock.h"
#include "log.h"

#define POOL_WAIT_US (5 * 1000000LL) /* then 503: the database is stuck */
/* a too big body is read and dropped up to this many bytes before the 413 */
#define DRAIN_MAX (1u << 20)

struct ax_api_server {
	struct MHD_Daemon      *d;
	int                     port;
	size_t                  max_body;
	ax_api_metrics         *metrics;
	struct sockaddr_storage addr; /* bound address; MHD reads it */
	char                   *cert_pem, *key_pem;
	atomic_int              stopping;
	pthread_mutex_t         mu; /* guards the pool below */
	pthread_cond_t          cv;
	ax_store              **stores;
	int                    *busy;
	int                     n;
};

/* Per-request state, from the first callback to MHD's "completed". */
typedef struct req_state {
	int64_t t0; /* monotonic us of the first callback */
	char   *body;
	size_t  len, cap;
	int     too_big;  /* body over max_body: answer 413 */
	size_t  dropped;  /* bytes of a too big body read and dropped */
	int     answered; /* a response was queued */
} req_state;

/* ---- store pool -------------------------------------------------------- */

ax_err
ax_api_server_get_store(ax_api_server *s, int64_t timeout_us, ax_store **out)
{
	struct timespec dl;
	int             rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_us / 1000000;
	dl.tv_nsec += (long) (timeout_us % 1000000) * 1000;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	for (;;) {
		for (int i = 0; i < s->n; i++)
			if (!s->busy[i]) {
				s->busy[i] = 1;
				*out       = s->stores[i];
				pthread_mutex_unlock(&s->mu);
				return AX_OK;
			}
		if (rc == ETIMEDOUT)
			break;
		rc = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
	}
	pthread_mutex_unlock(&s->mu);
	return ax_err_set(AX_EBUSY,
	                  "all %d database connections are busy; raise "
	                  "database.pool",
	                  s->n);
}

void
ax_api_server_put_store(ax_api_server *s, ax_store *st)
{
	if (st == NULL)
		return;
	/* A handler that failed mid-transaction must not leak it into the
	 * next request on this connection. */
	if (ax_store_in_tx(st))
		ax_store_rollback(st);
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->n; i++)
		if (s->stores[i] == st)
			s->busy[i] = 0;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

ax_api_metrics *
ax_api_server_metrics(ax_api_server *s)
{
	return s->metrics;
}

int
ax_api_server_stopping(const ax_api_server *s)
{
	return atomic_load(&((ax_api_server *) s)->stopping);
}

int
ax_api_server_port(const ax_api_server *s)
{
	return s->port;
}

/* ---- answers ------------------------------------------------------------ */

static enum MHD_Result
send_resp(struct MHD_Connection *c, ax_api_resp *r)
{
	struct MHD_Response *mr;
	enum MHD_Result      ret;

	if (r->status == 0)
		ax_api_reply_error(r, 500, "internal", "no answer was set");
	if (r->raw != NULL) {
		mr     = r->raw;
		r->raw = NULL;
	} else if (r->json != NULL) {
		char *t =
		    json_dumps(r->json, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (t == NULL)
			return MHD_NO;
		mr = MHD_create_response_from_buffer(strlen(t), t,
		                                     MHD_RESPMEM_MUST_FREE);
		if (mr != NULL)
			MHD_add_response_header(mr, "Content-Type",
			                        "application/json");
	} else if (r->text != NULL) {
		mr      = MHD_create_response_from_buffer(r->text_len, r->text,
		                                          MHD_RESPMEM_MUST_FREE);
		r->text = NULL;
		if (mr != NULL)
			MHD_add_response_header(
			    mr, "Content-Type",
			    r->content_type ? r->content_type : "text/plain");
	} else {
		mr = MHD_create_response_from_buffer(0, NULL,
		                                     MHD_RESPMEM_PERSISTENT);
	}
	if (mr == NULL)
		return MHD_NO;
	if (r->allow != NULL)
		MHD_add_response_header(mr, "Allow", r->allow);
	if (r->status == 401)
		MHD_add_response_header(mr, "WWW-Authenticate",
		                        "Bearer realm=\"ax\"");
	ret = MHD_queue_response(c, r->status, mr);
	MHD_destroy_response(mr);
	return ret;
}

static void
resp_fini(ax_api_resp *r)
{
	json_decref(r->json);
	free(r->text);
	if (r->raw != NULL)
		MHD_destroy_response(r->raw);
	memset(r, 0, sizeof(*r));
}

static enum MHD_Result
answer(ax_api_server *s, struct MHD_Connection *c, req_state *rs, int route,
       ax_api_resp *r)
{
	enum MHD_Result ret = send_resp(c, r);

	rs->answered = 1;
	ax_api_metrics_record(s->metrics, route, r->status,
	                      ax_clock_mono_us() - rs->t0);
	resp_fini(r);
	return ret;
}

static enum MHD_Result
answer_too_big(ax_api_server *s, struct MHD_Connection *c, req_state *rs)
{
	ax_api_resp r = { 0 };
	ax_api_reply_error(&r, 413, "payload_too_large",
	                   "request body is over %zu bytes (api.max_body)",
	                   s->max_body);
	return answer(s, c, rs, -1, &r);
}

/* ---- checks --------------------------------------------------------------
 */

static enum MHD_Result
check_arg(void *cls, enum MHD_ValueKind kind, const char *key,
          const char *value)
{
	int *bad = cls;
	if ((key && !ax_api_utf8_ok(key, strlen(key))) ||
	    (value && !ax_api_utf8_ok(value, strlen(value)))) {
		*bad = 1;
		return MHD_NO;
	}
	return MHD_YES;
}

/*
 * Authenticates the request for a route needing min_role: sets q->role,
 * token_id and token_name, or an answer (401 unauthorized or
 * token_expired, 403) in r and returns 0.
 */
static int
authenticate(ax_api_req *q, ax_api_role min_role, ax_api_resp *r)
{
	const char   *h = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND,
	                                              "Authorization");
	ax_api_caller who;
	ax_err        rv;

	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) {
		ax_api_reply_error(
		    r, 401, "unauthorized",
		    "send 'Authorization: Bearer TOKEN' (create "
		    "one with `axctl token create`)");
		return 0;
	}
	h += 7;
	while (*h == ' ')
		h++;
	rv = ax_api_token_check(q->st, h, &who);
	if (rv == AX_ENOENT) {
		ax_api_reply_error(r, 401, "unauthorized",
		                   "the bearer token is unknown or revoked");
		return 0;
	}
	if (rv == AX_EPERM) {
		ax_api_reply_error(r, 401, "token_expired", "%s",
		                   ax_err_detail());
		return 0;
	}
	if (rv != AX_OK) {
		ax_api_reply_err(r, rv);
		return 0;
	}
	q->role     = who.role;
	q->token_id = who.token_id;
	memcpy(q->token_name, who.name, sizeof(q->token_name));
	if (q->role < min_role) {
		ax_api_reply_error(r, 403, "forbidden",
		                   "this needs role %s; the token has role %s",
		                   ax_api_role_name(min_role),
		                   ax_api_role_name(q->role));
		return 0;
	}
	return 1;
}

static enum MHD_Result
dispatch(ax_api_server *s, struct MHD_Connection *c, const char *url,
         const char *method, req_state *rs)
{
	ax_api_match m;
	ax_api_resp  r = { 0 };
	ax_api_req   q = { 0 };
	int          route, bad = 0;
	ax_err       rv;

	route = ax_api_route_match(method, url, &m);
	if (route < 0) {
		if (m.path_found) {
			ax_api_reply_error(
			    &r, 405, "method_not_allowed",
			    "%s is not served on %s; allowed: %s", method, url,
			    m.allow);
			r.allow = m.allow;
		} else {
			ax_api_reply_error(&r, 404, "not_found",
			                   "no route %s %s; see "
			                   "api-server/openapi.yaml",
			                   method, url);
		}
		return answer(s, c, rs, -1, &r);
	}
	const ax_api_route *rt = &ax_api_routes[route];
	q.conn                 = c;
	q.srv                  = s;
	q.method               = method;
	q.path                 = url;
	memcpy(q.params, m.params, sizeof(q.params));
	q.body     = rs->body ? rs->body : "";
	q.body_len = rs->len;

	if ((rv = ax_api_server_get_store(s, POOL_WAIT_US, &q.st)) != AX_OK) {
		ax_api_reply_err(&r, rv);
		return answer(s, c, rs, route, &r);
	}
	if (rt->min_role > AX_API_ROLE_NONE &&
	    !authenticate(&q, rt->min_role, &r))
		goto done;
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, check_arg, &bad);
	if (bad || !ax_api_utf8_ok(url, strlen(url)) ||
	    !ax_api_utf8_ok(q.body, q.body_len) ||
	    strlen(q.body) != q.body_len) {
		ax_api_reply_error(
		    &r, 400, "bad_utf8",
		    "the path, query or body is not valid UTF-8 "
		    "(or holds a NUL byte)");
		goto done;
	}
	rt->handler(&q, &r);
done:
	ax_api_server_put_store(s, q.st);
	return answer(s, c, rs, route, &r);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **con_cls)
{
	ax_api_server *s  = cls;
	req_state     *rs = *con_cls;

	if (rs == NULL) {
		const char *cl;
		if ((rs = calloc(1, sizeof(*rs))) == NULL)
			return MHD_NO;
		rs->t0   = ax_clock_mono_us();
		*con_cls = rs;
		cl       = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		                                       "Content-Length");
		/* An announced huge body: a client that waits for
		 * "100 Continue" is refused before it sends a byte; one that
		 * sends at once has its body read and dropped (up to
		 * DRAIN_MAX) before the 413, because closing while it still
		 * sends makes it see a broken connection, not the answer. */
		if (cl != NULL && strtoull(cl, NULL, 10) > s->max_body) {
			rs->too_big = 1;
			if (MHD_lookup_connection_value(c, MHD_HEADER_KIND,
			                                "Expect") != NULL ||
			    strtoull(cl, NULL, 10) > DRAIN_MAX)
				return answer_too_big(s, c, rs);
		}
		return MHD_YES;
	}
	if (*upload_size > 0) {
		size_t n     = *upload_size;
		*upload_size = 0;
		if (rs->answered)
			return MHD_YES;
		if (rs->too_big) {
			rs->dropped += n;
			return rs->dropped > DRAIN_MAX
			    ? answer_too_big(s, c, rs)
			    : MHD_YES;
		}
		if (rs->len + n > s->max_body) {
			/* chunked upload: drop the rest, answer at the end */
			rs->too_big = 1;
			free(rs->body);
			rs->body = NULL;
			rs->len  = 0;
			return MHD_YES;
		}
		if (rs->len + n + 1 > rs->cap) {
			size_t cap = rs->cap ? rs->cap : 4096;
			while (cap < rs->len + n + 1)
				cap *= 2;
			char *p = realloc(rs->body, cap);
			if (p == NULL)
				return MHD_NO;
			rs->body = p;
			rs->cap  = cap;
		}
		memcpy(rs->body + rs->len, upload, n);
		rs->len += n;
		rs->body[rs->len] = '\0';
		return MHD_YES;
	}
	if (rs->answered)
		return MHD_YES;
	if (rs->too_big)
		return answer_too_big(s, c, rs);
	return dispatch(s, c, url, method, rs);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
	req_state *rs = *con_cls;
	if (rs == NULL)
		return;
	free(rs->body);
	free(rs);
	*con_cls = NULL;
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	size_t n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	ax_log_warn("api", "libmicrohttpd: %s", buf);
}

/* ---- start / stop ------------------------------------------------------- */

static char *
read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long  n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    n > 1024 * 1024 || fseek(f, 0, SEEK_SET) != 0 ||
	    (buf = malloc((size_t) n + 1)) == NULL) {
		fclose(f);
		return NULL;
	}
	if (fread(buf, 1, (size_t) n, f) != (size_t) n) {
		fclose(f);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static ax_err
resolve(ax_api_server *s, const char *listen, int port, int *ipv6)
{
	struct addrinfo hints = { 0 }, *ai;
	char            ps[16];
	int             rc;

	hints.ai_family   = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags    = AI_PASSIVE;
	snprintf(ps, sizeof(ps), "%d", port);
	if ((rc = getaddrinfo(listen, ps, &hints, &ai)) != 0)
		return ax_err_set(AX_ECONFIG, "api.listen '%s': %s", listen,
		                  gai_strerror(rc));
	memcpy(&s->addr, ai->ai_addr, ai->ai_addrlen);
	*ipv6 = ai->ai_family == AF_INET6;
	freeaddrinfo(ai);
	return AX_OK;
}

static ax_err
open_pool(ax_api_server *s, const char *dsn, int n)
{
	ax_err rv;

	s->stores = calloc((size_t) n, sizeof(*s->stores));
	s->busy   = calloc((size_t) n, sizeof(*s->busy));
	if (s->stores == NULL || s->busy == NULL)
		return ax_err_set(AX_ENOMEM, "store pool");
	for (int i = 0; i < n; i++) {
		if ((rv = ax_store_open(dsn, &s->stores[i])) != AX_OK)
			return rv;
		s->n++;
	}
	return AX_OK;
}

static void
server_free(ax_api_server *s)
{
	for (int i = 0; i < s->n; i++)
		ax_store_close(s->stores[i]);
	free(s->stores);
	free(s->busy);
	ax_api_metrics_free(s->metrics);
	free(s->cert_pem);
	free(s->key_pem);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static ax_err
load_tls(ax_api_server *s, const ax_api_options *o)
{
	if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
		return ax_err_set(AX_ECONFIG,
		                  "api.tls_cert is set but this libmicrohttpd "
		                  "has no TLS support");
	if (o->tls_key == NULL || *o->tls_key == '\0')
		return ax_err_set(AX_ECONFIG,
		                  "api.tls_cert is set: set api.tls_key too");
	if ((s->cert_pem = read_file(o->tls_cert)) == NULL)
		return ax_err_set(AX_ECONFIG, "api.tls_cert %s: cannot read",
		                  o->tls_cert);
	if ((s->key_pem = read_file(o->tls_key)) == NULL)
		return ax_err_set(AX_ECONFIG, "api.tls_key %s: cannot read",
		                  o->tls_key);
	return AX_OK;
}

ax_err
ax_api_server_start(const ax_api_options *o, ax_api_server **out)
{
	ax_api_server        *s = calloc(1, sizeof(*s));
	ax_err                rv;
	int                   ipv6 = 0, tls;
	unsigned              flags;
	struct MHD_OptionItem opts[12];
	int                   k = 0;

	*out = NULL;
	if (s == NULL)
		return ax_err_set(AX_ENOMEM, "api server");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->max_body = o->max_body ? o->max_body : 1024 * 1024;
	tls         = o->tls_cert != NULL && *o->tls_cert != '\0';
	if ((rv = ax_api_metrics_new(&s->metrics)) != AX_OK ||
	    (tls && (rv = load_tls(s, o)) != AX_OK) ||
	    (rv = resolve(s, o->listen ? o->listen : "127.0.0.1", o->port,
	                  &ipv6)) != AX_OK ||
	    (rv = open_pool(s, o->dsn, o->pool_size > 0 ? o->pool_size : 4)) !=
	        AX_OK) {
		server_free(s);
		return rv;
	}
	flags = MHD_USE_THREAD_PER_CONNECTION |
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (ipv6)
		flags |= MHD_USE_IPv6;
	if (tls)
		flags |= MHD_USE_TLS;
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_EXTERNAL_LOGGER,
		                              (intptr_t) mhd_log, s };
	opts[k++] =
	    (struct MHD_OptionItem) { MHD_OPTION_SOCK_ADDR, 0, &s->addr };
	opts[k++] = (struct MHD_OptionItem) {
		MHD_OPTION_CONNECTION_TIMEOUT,
		(intptr_t) (o->timeout_s ? o->timeout_s : 30), NULL
	};
	opts[k++] =
	    (struct MHD_OptionItem) { MHD_OPTION_CONNECTION_LIMIT, 512, NULL };
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_NOTIFY_COMPLETED,
		                              (intptr_t) on_completed, s };
	if (tls) {
		opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_HTTPS_MEM_KEY,
			                              0, s->key_pem };
		opts[k++] =
		    (struct MHD_OptionItem) { MHD_OPTION_HTTPS_MEM_CERT, 0,
			                      s->cert_pem };
	}
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_END, 0, NULL };
	s->d =
	    MHD_start_daemon(flags, (uint16_t) o->port, NULL, NULL, on_request,
	                     s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (s->d == NULL) {
		server_free(s);
		return ax_err_set(AX_EIO,
		                  "cannot listen on %s port %d (in use, or a "
		                  "bad TLS key/certificate)",
		                  o->listen ? o->listen : "127.0.0.1",
		                  o->port);
	}
	const union MHD_DaemonInfo *di =
	    MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : o->port;
	*out    = s;
	return AX_OK;
}

void
ax_api_server_stop(ax_api_server *s)
{
	if (s == NULL)
		return;
	atomic_store(&s->stopping, 1);
	MHD_stop_daemon(s->d);
	server_free(s);
}
