/*
 * sink_http.c - a bounded queue of JSON bodies POSTed by one sender
 * thread (see sink_http.h).
 *
 * Invariants: the queue holds at most `cap` bodies, oldest first; only
 * the sender thread takes from it; pushers (any thread) add to it or,
 * under DROP_OLDEST, evict its head, all under mu; a body leaves the queue
 * before it is POSTed, so a slow endpoint never holds the lock. Stopping
 * wakes every wait (backoff included).
 *
 * Workload: a few bodies per task attempt at most; the sender reuses one
 * libcurl handle (keep-alive) and POSTs one body per request.
 */
#include "sink_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ax_config.h"
#include "clock.h"
#include "log.h"

#define HTTP_ATTEMPTS    5
#define HTTP_BACKOFF0_US (100 * AX_USEC_PER_MSEC)
#define HTTP_BACKOFF_MAX (5 * AX_USEC_PER_SEC)
#define HTTP_TIMEOUT_US  (5 * AX_USEC_PER_SEC)

struct ax_sink_http {
	char                 *name, *url;
	int                   max_attempts;
	int64_t               backoff0_us, timeout_us;
	ax_sink_http_overflow overflow;
	pthread_t             thr;
	pthread_mutex_t       mu;
	pthread_cond_t        cv;
	char                **q; /* ring of JSON texts (owned) */
	size_t                cap, head, n;
	int                   stop;     /* under mu */
	int64_t               stop_end; /* mono deadline of the drain */
	_Atomic uint64_t      pushed, delivered, retries, dropped_full,
	    undeliverable, rejected;
};

static size_t
discard_body(char *p, size_t sz, size_t n, void *u)
{
	(void) p;
	(void) u;
	return sz * n;
}

typedef enum { POST_OK, POST_RETRY, POST_REJECT } post_result;

static post_result
post(ax_sink_http *h, CURL *c, const char *body)
{
	long     code = 0;
	CURLcode rc;

	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		ax_logf(AX_LOG_DEBUG, h->name, NULL, NULL, "POST %s: %s",
		        h->url, curl_easy_strerror(rc));
		return POST_RETRY;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300)
		return POST_OK;
	ax_logf(AX_LOG_DEBUG, h->name, NULL, NULL, "POST %s: HTTP %ld", h->url,
	        code);
	if (code >= 500 || code == 408 || code == 429)
		return POST_RETRY;
	return POST_REJECT;
}

/* Takes the oldest queued body, waiting while there is none; NULL when
 * stopping and (empty or the drain deadline passed). Sender thread. */
static char *
take(ax_sink_http *h)
{
	char *body = NULL;

	pthread_mutex_lock(&h->mu);
	while (h->n == 0 && !h->stop)
		pthread_cond_wait(&h->cv, &h->mu);
	if (h->n > 0 && (!h->stop || ax_clock_mono_us() < h->stop_end)) {
		body    = h->q[h->head];
		h->head = (h->head + 1) % h->cap;
		h->n--;
	}
	pthread_mutex_unlock(&h->mu);
	return body;
}

static void
deliver(ax_sink_http *h, CURL *c, const char *body)
{
	int64_t delay = h->backoff0_us;

	for (int a = 1;; a++) {
		post_result r = post(h, c, body);
		if (r == POST_OK) {
			atomic_fetch_add(&h->delivered, 1);
			return;
		}
		if (r == POST_REJECT) {
			atomic_fetch_add(&h->rejected, 1);
			ax_logf(AX_LOG_WARN, h->name, NULL, NULL,
			        "%s refused a POST (4xx): dropped", h->url);
			return;
		}
		if (a >= h->max_attempts ||
		    ax_clock_cond_sleep(&h->cv, &h->mu, &h->stop, delay)) {
			atomic_fetch_add(&h->undeliverable, 1);
			ax_logf(AX_LOG_WARN, h->name, NULL, NULL,
			        "cannot deliver to %s after %d attempts: "
			        "dropped",
			        h->url, a);
			return;
		}
		atomic_fetch_add(&h->retries, 1);
		delay = delay * 2 > HTTP_BACKOFF_MAX ? HTTP_BACKOFF_MAX
		                                     : delay * 2;
	}
}

static void *
sender(void *arg)
{
	ax_sink_http      *h   = arg;
	CURL              *c   = curl_easy_init();
	struct curl_slist *hdr = NULL;
	char              *body;
	long               ms = (long) (h->timeout_us / AX_USEC_PER_MSEC);

	if (c != NULL) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_URL, h->url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
		curl_easy_setopt(c, CURLOPT_USERAGENT, "ax/" AX_VERSION);
	}
	while ((body = take(h)) != NULL) {
		if (c == NULL)
			atomic_fetch_add(&h->undeliverable, 1);
		else
			deliver(h, c, body);
		free(body);
	}
	curl_slist_free_all(hdr);
	if (c != NULL)
		curl_easy_cleanup(c);
	return NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode       curl_init_rc;

static void
init_curl(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void
destroy(ax_sink_http *h)
{
	if (h == NULL)
		return;
	free(h->q);
	free(h->url);
	free(h->name);
	free(h);
}

ax_err
ax_sink_http_new(const ax_sink_http_config *cfg, ax_sink_http **out)
{
	ax_sink_http *h;
	const char   *name = cfg->name != NULL ? cfg->name : "http";

	*out = NULL;
	if (cfg->url == NULL || cfg->url[0] == '\0')
		return ax_err_set(AX_EINVAL, "%s: the URL is empty", name);
	if (cfg->capacity == 0)
		return ax_err_set(AX_EINVAL,
		                  "%s: the buffer must hold at least 1", name);
	pthread_once(&curl_once, init_curl);
	if (curl_init_rc != CURLE_OK)
		return ax_err_set(AX_EIO, "%s: libcurl: %s", name,
		                  curl_easy_strerror(curl_init_rc));
	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->q = calloc(cfg->capacity, sizeof(*h->q))) == NULL ||
	    (h->url = strdup(cfg->url)) == NULL ||
	    (h->name = strdup(name)) == NULL) {
		destroy(h);
		return ax_err_set(AX_ENOMEM, "%s: out of memory", name);
	}
	h->cap = cfg->capacity;
	h->max_attempts =
	    cfg->max_attempts > 0 ? cfg->max_attempts : HTTP_ATTEMPTS;
	h->backoff0_us =
	    cfg->backoff0_us > 0 ? cfg->backoff0_us : HTTP_BACKOFF0_US;
	h->timeout_us =
	    cfg->timeout_us > 0 ? cfg->timeout_us : HTTP_TIMEOUT_US;
	h->overflow = cfg->overflow;
	pthread_mutex_init(&h->mu, NULL);
	ax_clock_cond_init(&h->cv);
	if (pthread_create(&h->thr, NULL, sender, h) != 0) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		destroy(h);
		return ax_err_set(AX_EIO, "%s: cannot start thread", name);
	}
	*out = h;
	return AX_OK;
}

int
ax_sink_http_push(ax_sink_http *h, char *body)
{
	char *lost   = NULL;
	int   queued = 0;

	pthread_mutex_lock(&h->mu);
	if (!h->stop && h->n == h->cap &&
	    h->overflow == AX_SINK_HTTP_DROP_OLDEST) {
		lost    = h->q[h->head];
		h->head = (h->head + 1) % h->cap;
		h->n--;
	}
	if (!h->stop && h->n < h->cap) {
		h->q[(h->head + h->n++) % h->cap] = body;
		body                              = NULL;
		queued                            = 1;
		pthread_cond_signal(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	if (lost != NULL || body != NULL) {
		if (atomic_fetch_add(&h->dropped_full, 1) == 0)
			ax_logf(AX_LOG_WARN, h->name, NULL, NULL,
			        "buffer of %zu full (%s slow or down): "
			        "dropping the %s, counted in "
			        "ax_event_sink_dropped_total",
			        h->cap, h->url,
			        lost != NULL ? "oldest" : "newest");
		free(lost);
		free(body);
	}
	if (queued)
		atomic_fetch_add(&h->pushed, 1);
	return queued;
}

void
ax_sink_http_stats_get(ax_sink_http *h, ax_sink_http_stats *out)
{
	out->pushed        = atomic_load(&h->pushed);
	out->delivered     = atomic_load(&h->delivered);
	out->retries       = atomic_load(&h->retries);
	out->dropped_full  = atomic_load(&h->dropped_full);
	out->undeliverable = atomic_load(&h->undeliverable);
	out->rejected      = atomic_load(&h->rejected);
	pthread_mutex_lock(&h->mu);
	out->queued = h->n;
	pthread_mutex_unlock(&h->mu);
}

void
ax_sink_http_free(ax_sink_http *h, int64_t drain_us, ax_sink_http_stats *final)
{
	if (h == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop     = 1;
	h->stop_end = ax_clock_mono_us() + (drain_us > 0 ? drain_us : 0);
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->thr, NULL);
	for (size_t i = 0; i < h->n; i++)
		free(h->q[(h->head + i) % h->cap]);
	atomic_fetch_add(&h->undeliverable, h->n);
	if (h->n > 0)
		ax_logf(AX_LOG_WARN, h->name, NULL, NULL,
		        "stopped with %zu bodies not delivered to %s", h->n,
		        h->url);
	h->n = 0;
	if (final != NULL)
		ax_sink_http_stats_get(h, final);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	destroy(h);
}
