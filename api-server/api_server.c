/*
 * api_server.c - the ax-api HTTP server (see api_server.h): request
 * life cycle on libmicrohttpd in its epoll mode, the head deadline,
 * limits (connections, head and body size), routing, auth, answers,
 * metrics, and the pool of PostgreSQL connections. A GET that no API
 * route knows goes to the web UI's assets (api_ui.h).
 *
 * Threads: MHD's pool of epoll threads runs every callback of the
 * connections it accepted; one "ticker" thread of ours wakes suspended
 * log follows and drops connections past their head deadline. The
 * connection registry (conn_state) and the list of suspended follows are
 * guarded by cmu; lock order is response mutex (MHD, content readers)
 * -> cmu -> MHD's own connection mutex.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "api_routes.h"
#include "api_ui.h"
#include "clock.h"
#include "log.h"
#include "utf8.h"

#define POOL_WAIT_US (5 * 1000000LL) /* then 503: the database is stuck */
/* A too big body is read and dropped up to this many bytes before the
 * 413: a client that sends its whole body before it reads sees the
 * answer, not a broken connection. Past it the connection is closed
 * (after a best-effort 413 on plain HTTP). */
#define DRAIN_MAX (64u << 20)
#define TICK_NS   (100 * 1000000L) /* follows woken, deadlines checked */

/*
 * One TCP connection (MHD's socket context), from accept to close. The
 * head deadline: a connection waits for a request head from its accept
 * or the end of its previous request (wait_since); when the head is not
 * complete within header_timeout the ticker shuts the socket down. The
 * fd stays valid while the entry is registered: MHD notifies the close
 * (and we unregister) before it closes the fd.
 */
typedef struct conn_state {
	struct conn_state *prev, *next; /* s->conns; under cmu */
	int                fd;
	int64_t            wait_since; /* mono us; 0: a request in hand */
	int                got_line;   /* its request line arrived */
	int                killed;     /* dropped by the ticker */
} conn_state;

struct ax_api_server {
	struct MHD_Daemon      *d;
	int                     port;
	size_t                  max_body;
	size_t                  max_header;
	int64_t                 header_timeout_us;
	int                     tls;
	ax_api_metrics         *metrics;
	struct sockaddr_storage addr; /* bound address; MHD reads it */
	char                   *cert_pem, *key_pem;
	atomic_int              stopping;
	pthread_mutex_t         mu; /* guards the pool below */
	pthread_cond_t          cv;
	ax_store              **stores;
	int                    *busy;
	int                     n;
	pthread_mutex_t         cmu; /* connections, sleepers, ticker */
	pthread_cond_t          ccv; /* wakes the ticker to stop */
	conn_state             *conns;
	struct MHD_Connection **sleepers; /* suspended until the next tick */
	size_t                  n_sleep, cap_sleep;
	pthread_t               ticker;
	int                     ticker_up, ticker_stop;
	atomic_uint_fast64_t    head_timeouts; /* connections dropped */
};

/* Per-request state, from the request line (on_uri) to MHD's
 * "completed". */
typedef struct req_state {
	int64_t t0;      /* monotonic us of the request line */
	int     started; /* the access handler has seen the head */
	int     nul;     /* the raw URL holds %00 */
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
	if ((key && !ax_utf8_valid(key, strlen(key))) ||
	    (value && !ax_utf8_valid(value, strlen(value)))) {
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

/* 1 when the raw (undecoded) URL holds an encoded NUL: MHD decodes the
 * path and query into C strings, where %00 would cut them short. */
static int
raw_has_nul(const char *uri)
{
	for (const char *p = strchr(uri, '%'); p != NULL;
	     p             = strchr(p + 1, '%'))
                if (p[1] == '0' && p[2] == '0')
                        return 1;
	return 0;
}

static enum MHD_Result
bad_request(ax_api_server *s, struct MHD_Connection *c, req_state *rs,
            const char *code, const char *detail)
{
	ax_api_resp r = { 0 };
	ax_api_reply_error(&r, 400, code, "%s", detail);
	return answer(s, c, rs, -1, &r);
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

	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, check_arg, &bad);
	if (rs->nul)
		return bad_request(s, c, rs, "invalid",
		                   "the URL holds an encoded NUL byte (%00); "
		                   "remove it");
	if (bad || !ax_utf8_valid(url, strlen(url)))
		return bad_request(s, c, rs, "bad_utf8",
		                   "the path or query is not valid UTF-8");
	route = ax_api_route_match(method, url, &m);
	if (route < 0) {
		if (m.path_found) {
			ax_api_reply_error(
			    &r, 405, "method_not_allowed",
			    "%s is not served on %s; allowed: %s", method, url,
			    m.allow);
			r.allow = m.allow;
		} else if ((!strcmp(method, "GET") ||
		            !strcmp(method, "HEAD")) &&
		           ax_api_ui_answer(
		               url,
		               MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		                                           "If-None-Match"),
		               &r)) {
			/* the web UI (api_ui.h): assets and client routes */
		} else {
			ax_api_reply_error(&r, 404, "not_found",
			                   "no route %s %s; see "
			                   "api-server/openapi.yaml",
			                   method, url);
		}
		return answer(s, c, rs, -1, &r);
	}
	const ax_api_route *rt = &ax_api_routes[route];
	if (!ax_api_check_path_params(rt->pattern, m.params, &r))
		return answer(s, c, rs, route, &r);
	q.conn   = c;
	q.srv    = s;
	q.method = method;
	q.path   = url;
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
	if (!ax_utf8_valid(q.body, q.body_len) ||
	    strlen(q.body) != q.body_len) {
		ax_api_reply_error(&r, 400, "bad_utf8",
		                   "the body is not valid UTF-8 (or holds a "
		                   "NUL byte)");
		goto done;
	}
	if (!ax_api_check_body(&q, ax_api_route_body(rt), &r))
		goto done;
	rt->handler(&q, &r);
done:
	ax_api_server_put_store(s, q.st);
	return answer(s, c, rs, route, &r);
}

static conn_state *
conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci != NULL ? ci->socket_context : NULL;
}

/*
 * The head of a request is complete: its connection leaves the head
 * deadline. 0 when the ticker dropped it meanwhile (refuse the request).
 */
static int
head_arrived(ax_api_server *s, struct MHD_Connection *c)
{
	conn_state *cs = conn_of(c);
	int         ok = 1;

	if (cs == NULL)
		return 1;
	pthread_mutex_lock(&s->cmu);
	if (cs->killed)
		ok = 0;
	cs->wait_since = 0;
	pthread_mutex_unlock(&s->cmu);
	return ok;
}

static enum MHD_Result
sum_header(void *cls, enum MHD_ValueKind kind, const char *key,
           const char *value)
{
	size_t *n = cls;
	*n += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " CRLF */
	return MHD_YES;
}

/* First call of a request: its head is complete; checks its size and
 * the body it announces. */
static enum MHD_Result
on_head(ax_api_server *s, struct MHD_Connection *c, const char *url,
        const char *method, req_state *rs)
{
	const char *cl;
	size_t      hn = strlen(method) + strlen(url) + 12;

	rs->started = 1;
	if (!head_arrived(s, c))
		return MHD_NO;
	MHD_get_connection_values(c, MHD_HEADER_KIND, sum_header, &hn);
	if (hn > s->max_header) {
		ax_api_resp r = { 0 };
		ax_api_reply_error(&r, 431, "header_too_large",
		                   "the request line and headers are %zu "
		                   "bytes, over %zu (api.max_header)",
		                   hn, s->max_header);
		return answer(s, c, rs, -1, &r);
	}
	cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	/* An announced huge body: a client that waits for "100 Continue"
	 * is refused before it sends a byte; one that sends at once has
	 * its body read and dropped (up to DRAIN_MAX) before the 413. */
	if (cl != NULL && strtoull(cl, NULL, 10) > s->max_body) {
		rs->too_big = 1;
		if (MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		                                "Expect") != NULL ||
		    strtoull(cl, NULL, 10) > DRAIN_MAX)
			return answer_too_big(s, c, rs);
	}
	return MHD_YES;
}

/*
 * Writes a whole canned JSON error answer straight to the socket of cs
 * (plain HTTP only: MHD cannot queue an answer then) and shuts the
 * socket down; MHD closes the connection when it sees the shutdown.
 * Best effort: the client may have gone.
 */
static void
send_raw_and_close(ax_api_server *s, int fd, unsigned status,
                   const char *reason, const char *code, const char *detail)
{
	char body[512], msg[1024];
	int  bn, mn;

	if (!s->tls) {
		bn = snprintf(body, sizeof(body),
		              "{\"error\":\"%s\",\"detail\":\"%s\"}", code,
		              detail);
		mn = snprintf(msg, sizeof(msg),
		              "HTTP/1.1 %u %s\r\nContent-Type: "
		              "application/json\r\nConnection: close\r\n"
		              "Content-Length: %d\r\n\r\n%s",
		              status, reason, bn, body);
		if (mn > 0 && mn < (int) sizeof(msg) &&
		    send(fd, msg, (size_t) mn, MSG_DONTWAIT | MSG_NOSIGNAL) <
		        0)
			ax_log_debug("api", "canned %u answer: %s", status,
			             strerror(errno));
	}
	shutdown(fd, SHUT_RDWR);
}

/* A chunked body passed DRAIN_MAX: MHD 0.9.75 cannot queue an answer
 * while a body is still coming, so the 413 goes out raw and the
 * connection closes. */
static enum MHD_Result
too_big_mid_body(ax_api_server *s, struct MHD_Connection *c, req_state *rs)
{
	conn_state *cs = conn_of(c);
	char        d[160];

	snprintf(d, sizeof(d), "request body is over %zu bytes (api.max_body)",
	         s->max_body);
	rs->answered = 1;
	ax_api_metrics_record(s->metrics, -1, 413,
	                      ax_clock_mono_us() - rs->t0);
	if (cs != NULL)
		send_raw_and_close(s, cs->fd, 413, "Payload Too Large",
		                   "payload_too_large", d);
	return MHD_NO;
}

/* Appends n bytes of body; MHD_NO on out of memory. */
static enum MHD_Result
take_body(ax_api_server *s, struct MHD_Connection *c, req_state *rs,
          const char *upload, size_t n)
{
	if (rs->answered)
		return MHD_YES;
	if (rs->too_big) {
		rs->dropped += n;
		return rs->dropped > DRAIN_MAX ? too_big_mid_body(s, c, rs)
		                               : MHD_YES;
	}
	if (rs->len + n > s->max_body) {
		/* chunked upload: drop the rest, answer at the end */
		rs->too_big = 1;
		rs->dropped = rs->len + n;
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

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **con_cls)
{
	ax_api_server *s  = cls;
	req_state     *rs = *con_cls;

	if (rs == NULL) { /* on_uri could not allocate */
		if ((rs = calloc(1, sizeof(*rs))) == NULL)
			return MHD_NO;
		rs->t0   = ax_clock_mono_us();
		*con_cls = rs;
	}
	if (!rs->started)
		return on_head(s, c, url, method, rs);
	if (*upload_size > 0) {
		size_t n     = *upload_size;
		*upload_size = 0;
		return take_body(s, c, rs, upload, n);
	}
	if (rs->answered)
		return MHD_YES;
	if (rs->too_big)
		return answer_too_big(s, c, rs);
	return dispatch(s, c, url, method, rs);
}

/* MHD's URI log callback: the request line has arrived (raw URL). */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	ax_api_server *s  = cls;
	conn_state    *cs = conn_of(c);
	req_state     *rs = calloc(1, sizeof(*rs));

	if (cs != NULL) {
		pthread_mutex_lock(&s->cmu);
		cs->got_line = 1;
		pthread_mutex_unlock(&s->cmu);
	}
	if (rs != NULL) {
		rs->t0  = ax_clock_mono_us();
		rs->nul = raw_has_nul(uri);
	}
	return rs;
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
	ax_api_server *s  = cls;
	req_state     *rs = *con_cls;
	conn_state    *cs = conn_of(c);

	if (cs != NULL) { /* a kept-alive connection waits for a head */
		pthread_mutex_lock(&s->cmu);
		cs->wait_since = ax_clock_mono_us();
		cs->got_line   = 0;
		pthread_mutex_unlock(&s->cmu);
	}
	if (rs == NULL)
		return;
	free(rs->body);
	free(rs);
	*con_cls = NULL;
}

/* MHD's connection notifier: registers and unregisters conn_state. */
static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
              enum MHD_ConnectionNotificationCode toe)
{
	ax_api_server *s  = cls;
	conn_state    *cs = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci == NULL || (cs = calloc(1, sizeof(*cs))) == NULL)
			return; /* no head deadline for this one */
		cs->fd         = ci->connect_fd;
		cs->wait_since = ax_clock_mono_us();
		pthread_mutex_lock(&s->cmu);
		cs->next = s->conns;
		if (s->conns != NULL)
			s->conns->prev = cs;
		s->conns = cs;
		pthread_mutex_unlock(&s->cmu);
		*socket_context = cs;
		return;
	}
	if (cs == NULL)
		return;
	pthread_mutex_lock(&s->cmu);
	if (cs->prev != NULL)
		cs->prev->next = cs->next;
	else
		s->conns = cs->next;
	if (cs->next != NULL)
		cs->next->prev = cs->prev;
	pthread_mutex_unlock(&s->cmu);
	free(cs);
	*socket_context = NULL;
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

/* ---- ticker: follows and head deadlines ---------------------------------
 */

int
ax_api_server_wait(ax_api_server *s, struct MHD_Connection *c)
{
	pthread_mutex_lock(&s->cmu);
	if (atomic_load(&s->stopping)) {
		pthread_mutex_unlock(&s->cmu);
		return 0;
	}
	if (s->n_sleep == s->cap_sleep) {
		size_t cap = s->cap_sleep ? s->cap_sleep * 2 : 16;
		void  *p   = realloc(s->sleepers, cap * sizeof(*s->sleepers));
		if (p == NULL) { /* out of memory: end the stream */
			pthread_mutex_unlock(&s->cmu);
			return 0;
		}
		s->sleepers  = p;
		s->cap_sleep = cap;
	}
	MHD_suspend_connection(c);
	s->sleepers[s->n_sleep++] = c;
	pthread_mutex_unlock(&s->cmu);
	return 1;
}

/* Under cmu: resumes every suspended follow. */
static void
wake_sleepers(ax_api_server *s)
{
	for (size_t i = 0; i < s->n_sleep; i++)
		MHD_resume_connection(s->sleepers[i]);
	s->n_sleep = 0;
}

/* Under cmu: drops the connections past their head deadline. One that
 * sent its request line gets a 408 (plain HTTP); an idle one is closed
 * silently, as a keep-alive timeout is. */
static void
sweep_heads(ax_api_server *s, int64_t now)
{
	for (conn_state *cs = s->conns; cs != NULL; cs = cs->next) {
		if (cs->killed || cs->wait_since == 0 ||
		    now - cs->wait_since < s->header_timeout_us)
			continue;
		cs->killed = 1;
		atomic_fetch_add(&s->head_timeouts, 1);
		if (cs->got_line)
			send_raw_and_close(s, cs->fd, 408, "Request Timeout",
			                   "request_timeout",
			                   "the request head did not arrive "
			                   "in time (api.header_timeout)");
		else
			shutdown(cs->fd, SHUT_RDWR);
	}
}

static void *
ticker_main(void *arg)
{
	ax_api_server  *s = arg;
	struct timespec dl;

	pthread_mutex_lock(&s->cmu);
	while (!s->ticker_stop) {
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += TICK_NS;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->ccv, &s->cmu, &dl);
		wake_sleepers(s);
		sweep_heads(s, ax_clock_mono_us());
	}
	wake_sleepers(s);
	pthread_mutex_unlock(&s->cmu);
	return NULL;
}

uint64_t
ax_api_server_head_timeouts(const ax_api_server *s)
{
	return atomic_load(&((ax_api_server *) s)->head_timeouts);
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
open_pool(ax_api_server *s, const char *dsn, int n, int64_t stmt_ms)
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
		/* a statement holds an event-loop thread: bound it */
		if (stmt_ms > 0 &&
		    (rv = ax_store_set_statement_timeout(s->stores[i],
		                                         stmt_ms)) != AX_OK)
			return rv;
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
	free(s->sleepers);
	ax_api_metrics_free(s->metrics);
	free(s->cert_pem);
	free(s->key_pem);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->cmu);
	pthread_cond_destroy(&s->ccv);
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

static void
stop_ticker(ax_api_server *s)
{
	if (!s->ticker_up)
		return;
	pthread_mutex_lock(&s->cmu);
	s->ticker_stop = 1;
	pthread_cond_signal(&s->ccv);
	pthread_mutex_unlock(&s->cmu);
	pthread_join(s->ticker, NULL);
	s->ticker_up = 0;
}

/*
 * The connection limit that the process's open-file limit allows: raises
 * the soft RLIMIT_NOFILE towards the hard one when want needs it, and
 * clamps want (with a warning) when even the hard limit is too low.
 * Each connection is one fd; reserve covers the pool, logs, epoll.
 */
static unsigned
fit_nofile(unsigned want, unsigned reserve)
{
	struct rlimit rl;
	rlim_t        need = (rlim_t) want + reserve;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return want;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
		rl.rlim_cur = need;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			return want;
	} else {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	unsigned fit = rl.rlim_cur > reserve + 16
	    ? (unsigned) (rl.rlim_cur - reserve)
	    : 16;
	ax_log_warn("api",
	            "api.max_connections %u does not fit the open-file "
	            "limit %llu (ulimit -n); serving at most %u connections",
	            want, (unsigned long long) rl.rlim_cur, fit);
	return fit;
}

ax_err
ax_api_server_start(const ax_api_options *o, ax_api_server **out)
{
	ax_api_server        *s = calloc(1, sizeof(*s));
	ax_err                rv;
	int                   ipv6 = 0, threads;
	unsigned              flags, max_conn, per_ip;
	struct MHD_OptionItem opts[20];
	int                   k = 0;
	int                   pool;

	*out = NULL;
	if (s == NULL)
		return ax_err_set(AX_ENOMEM, "api server");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_init(&s->cmu, NULL);
	pthread_cond_init(&s->ccv, NULL);
	s->max_body   = o->max_body ? o->max_body : 1024 * 1024;
	s->max_header = o->max_header ? o->max_header : 16 * 1024;
	s->header_timeout_us =
	    (int64_t) (o->header_timeout_s ? o->header_timeout_s : 10) *
	    1000000;
	s->tls  = o->tls_cert != NULL && *o->tls_cert != '\0';
	pool    = o->pool_size > 0 ? o->pool_size : 4;
	threads = o->threads > 0 ? o->threads : pool;
	if (threads > pool) /* a thread never waits for a connection */
		threads = pool;
	if (threads > 64)
		threads = 64;
	max_conn = fit_nofile(o->max_connections ? o->max_connections : 10000,
	                      (unsigned) pool + 64);
	per_ip = o->per_client == 0 ? 64
	    : o->per_client < 0     ? 0
	                            : (unsigned) o->per_client;
	if ((rv = ax_api_metrics_new(&s->metrics)) != AX_OK ||
	    (s->tls && (rv = load_tls(s, o)) != AX_OK) ||
	    (rv = resolve(s, o->listen ? o->listen : "127.0.0.1", o->port,
	                  &ipv6)) != AX_OK ||
	    (rv = open_pool(s, o->dsn, pool,
	                    o->statement_timeout_ms == 0
	                        ? 15000
	                        : o->statement_timeout_ms)) != AX_OK) {
		server_free(s);
		return rv;
	}
	flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG;
	if (ipv6)
		flags |= MHD_USE_IPv6;
	if (s->tls)
		flags |= MHD_USE_TLS;
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_EXTERNAL_LOGGER,
		                              (intptr_t) mhd_log, s };
	opts[k++] =
	    (struct MHD_OptionItem) { MHD_OPTION_SOCK_ADDR, 0, &s->addr };
	opts[k++] = (struct MHD_OptionItem) {
		MHD_OPTION_CONNECTION_TIMEOUT,
		(intptr_t) (o->timeout_s ? o->timeout_s : 30), NULL
	};
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_CONNECTION_LIMIT,
		                              (intptr_t) max_conn, NULL };
	if (per_ip > 0)
		opts[k++] = (struct MHD_OptionItem) {
			MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t) per_ip,
			NULL
		};
	/* Room for a head of max_header and more: a head over max_header
	 * gets our JSON 431; only one past the pool (2 x max_header + 16 KiB,
	 * less MHD's own use) meets MHD's own 431 page (its text is built into
	 * MHD). */
	opts[k++] = (struct MHD_OptionItem) {
		MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(intptr_t) (2 * s->max_header + 16 * 1024), NULL
	};
	if (threads > 1)
		opts[k++] =
		    (struct MHD_OptionItem) { MHD_OPTION_THREAD_POOL_SIZE,
			                      (intptr_t) threads, NULL };
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_NOTIFY_COMPLETED,
		                              (intptr_t) on_completed, s };
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_NOTIFY_CONNECTION,
		                              (intptr_t) on_connection, s };
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_URI_LOG_CALLBACK,
		                              (intptr_t) on_uri, s };
	if (s->tls) {
		opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_HTTPS_MEM_KEY,
			                              0, s->key_pem };
		opts[k++] =
		    (struct MHD_OptionItem) { MHD_OPTION_HTTPS_MEM_CERT, 0,
			                      s->cert_pem };
	}
	opts[k++] = (struct MHD_OptionItem) { MHD_OPTION_END, 0, NULL };
	if (pthread_create(&s->ticker, NULL, ticker_main, s) != 0) {
		server_free(s);
		return ax_err_set(AX_ENOMEM, "api ticker thread");
	}
	s->ticker_up = 1;
	s->d =
	    MHD_start_daemon(flags, (uint16_t) o->port, NULL, NULL, on_request,
	                     s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (s->d == NULL) {
		stop_ticker(s);
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
	ax_log_debug("api",
	             "epoll, %d threads, %u connections (%u per client), "
	             "head %zu bytes in %lld s",
	             threads, max_conn, per_ip, s->max_header,
	             (long long) (s->header_timeout_us / 1000000));
	*out = s;
	return AX_OK;
}

void
ax_api_server_stop(ax_api_server *s)
{
	if (s == NULL)
		return;
	atomic_store(&s->stopping, 1);
	/* every follow is resumed and ends: MHD must not stop with a
	 * suspended connection */
	stop_ticker(s);
	MHD_stop_daemon(s->d);
	server_free(s);
}
