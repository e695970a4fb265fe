/*
 * actor.c - the actor runtime over nng. See actor.h for the model.
 *
 * Inside: each actor's inbox is an nng PULL socket. An nng aio callback
 * moves received envelopes into a bounded ring (inbox_depth envelopes);
 * when the ring is full the callback stops re-arming the receive, so nng
 * stops taking messages and the senders' PUSH buffers fill up: that is
 * the backpressure path. The actor's thread waits on a condition variable
 * (with a timeout for its deadline), takes every queued envelope at once
 * (up to max_batch items) and calls the handler with all their items.
 *
 * Senders keep one "link" per destination: the envelope being filled, a
 * FIFO of sealed envelopes not yet accepted, and, for a route (another
 * process), a PUSH socket dialled to its address. One PUSH pipe per
 * (sender, dest) plus the single in-order receive keeps per-sender FIFO.
 * A destination of the same system is not reached through nng: the
 * sender puts the envelope into the destination's ring itself (under its
 * mutex) and signals its thread, which saves the hand-offs through nng's
 * threads on every in-process hop (see local_put). The ring takes up to
 * inbox_depth + AX_ACTOR_SENDBUF envelopes that way (what the inbox plus
 * one sender's nng buffer held before), one slot kept free while an nng
 * receive is outstanding; a full ring makes a blocking sender wait on
 * the destination's `space` condition, woken when its thread takes
 * envelopes, and a non-blocking one get AX_EAGAIN.
 *
 * In-flight accounting: sys->pending counts items buffered or in flight
 * to a destination plus one token per actor busy in a handler or tick.
 * A sender adds an item when it buffers it; a local receiver subtracts
 * the items of an envelope of its own system when it takes it (adding
 * its busy token in the same atomic step, so the count never reads zero
 * while work remains); a remote destination's items are subtracted when
 * nng accepts them; drops subtract and are counted. pending == 0 means
 * the system is quiescent, which is what ax_actor_system_stop() waits for.
 */
#include "actor.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <protobuf-c/protobuf-c.h>

#include "clock.h"
#include "log.h"

#define ENV_MAGIC       0x41584531u /* "AXE1" */
#define ENV_FIXED       17          /* magic + sysid + namelen + count */
#define ITEM_HDR        8           /* type + length */
#define SEND_SLICE_MS   50 /* blocking sends re-check stop flags this often */
#define RETRY_MIN_US    1000
#define RETRY_MAX_US    32000
#define DEF_INBOX_DEPTH 64
#define DEF_MAX_BATCH   1024
#define DEF_OUTBOX_MAX  65536

enum sys_state { SYS_NEW = 0, SYS_RUNNING, SYS_STOPPING, SYS_STOPPED };

/* A sealed envelope waiting for nng to accept it. */
typedef struct outmsg {
	nng_msg *msg;
	uint32_t items;
} outmsg;

/* A sender's connection to one destination (owned by one thread). */
typedef struct out_link {
	char       name[AX_ACTOR_NAME_MAX + 1];
	char      *url;   /* borrowed from the actor or route */
	ax_actor  *local; /* destination in this system, NULL for a route */
	nng_socket sock;  /* PUSH, opened on first flush */
	int        open;  /* sock is valid */
	nng_msg   *cur;   /* envelope being filled, NULL when none */
	uint32_t   cur_items;
	size_t     count_off; /* offset of the item count in cur */
	outmsg    *q;         /* sealed envelopes, FIFO from qhead */
	size_t     qhead, qlen, qcap;
	size_t     pending; /* items in cur + q */
} out_link;

typedef struct route {
	char  name[AX_ACTOR_NAME_MAX + 1];
	char *url;
} route;

/* Ownership: the system owns every actor, route and their memory. */
struct ax_actor_system {
	uint64_t         id; /* random; marks envelopes of this system */
	ax_actor       **actors;
	size_t           nactors;
	route           *routes;
	size_t           nroutes;
	_Atomic int      state;   /* enum sys_state */
	_Atomic int64_t  pending; /* see the file comment */
	_Atomic uint64_t dropped; /* items dropped by clients */
	/*
	 * Sender sockets of freed clients. Closing a PUSH socket throws away
	 * what its send buffer still holds, so they stay open until the stop
	 * has drained the system.
	 */
	pthread_mutex_t retired_mu;
	nng_socket     *retired;
	size_t          nretired;
	int             retired_closed;
};

struct ax_actor {
	ax_actor_system    *sys;
	char                name[AX_ACTOR_NAME_MAX + 1];
	char               *url;
	uint32_t            inbox_depth, max_batch, outbox_max;
	int                 send_nonblock;
	const ax_actor_ops *ops;
	void               *state; /* owned; freed by ops->fini */

	nng_socket inbox;
	int        inbox_open;
	nng_aio   *aio;
	pthread_t  thread;
	int        thread_started;

	/* Inbox ring, protected by mu; filled by rx_cb and local_put,
	 * emptied by thread. */
	pthread_mutex_t mu;
	pthread_cond_t  cv;
	pthread_cond_t  space; /* local senders waiting for room */
	nng_msg       **ring;
	uint32_t        ring_cap; /* inbox_depth + AX_ACTOR_SENDBUF */
	uint32_t        rhead, rcount;
	uint32_t        space_waiters;
	int             rx_armed; /* a receive is outstanding */
	int             rx_dead;  /* the socket is closed */
	int             stop;     /* thread must exit (under mu) */

	_Atomic int closed; /* inbox closed: senders drop instead of send */

	/* Thread-private. */
	int64_t   deadline; /* tick at this mono instant; 0: none */
	int64_t   retry_at; /* retry pending flush; 0: none */
	int64_t   retry_us;
	out_link *links;
	size_t    nlinks;
	nng_msg **bmsgs; /* envelopes of the batch being handled */
	char (*bnames)[AX_ACTOR_NAME_MAX + 1];
	ax_actor_item *items;
	size_t         items_cap;

	struct {
		_Atomic uint64_t envelopes_in, items_in, batches, max_batch,
		    items_out, envelopes_out, errors, ticks, eagain, dropped,
		    bad_envelopes;
	} st;
};

struct ax_actor_client {
	ax_actor_system *sys;
	char             name[AX_ACTOR_NAME_MAX + 1];
	out_link        *links;
	size_t           nlinks;
};

#define STAT_ADD(a, f, v)                                                     \
	atomic_fetch_add_explicit(&(a)->st.f, (v), memory_order_relaxed)

/* ---------------------------------------------------------------- utils */

static ax_err
nng_to_ax(int rv, const char *what, const char *name, const char *url)
{
	ax_err e = AX_ENNG;
	if (rv == NNG_EADDRINUSE)
		e = AX_EEXIST;
	else if (rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP || rv == NNG_EINVAL)
		e = AX_EINVAL;
	else if (rv == NNG_ENOMEM)
		e = AX_ENOMEM;
	else if (rv == NNG_ECLOSED)
		e = AX_ECLOSED;
	return ax_err_set(e, "actor %s: %s %s: %s", name, what, url ? url : "",
	                  nng_strerror(rv));
}

static int
name_valid(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	if (len == 0 || len > AX_ACTOR_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = n[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

static int
url_valid(const char *u)
{
	static const char *const schemes[] = { "inproc://", "ipc://",
		                               "tcp://" };
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t l = strlen(schemes[i]);
		if (strncmp(u, schemes[i], l) == 0 && u[l] != '\0')
			return 1;
	}
	return 0;
}

static void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t) (v >> 24);
	p[1] = (uint8_t) (v >> 16);
	p[2] = (uint8_t) (v >> 8);
	p[3] = (uint8_t) v;
}

static uint32_t
get_be32(const uint8_t *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) |
	    ((uint32_t) p[2] << 8) | p[3];
}

static uint64_t
get_be64(const uint8_t *p)
{
	return ((uint64_t) get_be32(p) << 32) | get_be32(p + 4);
}

static void
mono_to_timespec(int64_t us, struct timespec *ts)
{
	ts->tv_sec  = (time_t) (us / AX_USEC_PER_SEC);
	ts->tv_nsec = (long) (us % AX_USEC_PER_SEC) * 1000;
}

/* -------------------------------------------------------------- framing */

uint32_t
ax_actor_env_count(const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint32_t       cnt;

	if (len < ENV_FIXED || get_be32(b) != ENV_MAGIC)
		return 0;
	size_t nl = b[12];
	if (len < ENV_FIXED + nl)
		return 0;
	cnt = get_be32(b + 13 + nl);
	/* a count the parse refuses must not count towards a batch */
	return cnt > AX_ACTOR_ENVELOPE_MAX_ITEMS ? 0 : cnt;
}

ax_err
ax_actor_env_parse(const void *buf, size_t len,
                   char name[AX_ACTOR_NAME_MAX + 1], uint64_t *sysid,
                   ax_actor_item *items, size_t room, size_t *n)
{
	const uint8_t *b = buf;
	size_t         off, nl;
	uint32_t       cnt;

	if (len < ENV_FIXED || get_be32(b) != ENV_MAGIC)
		return ax_err_set(AX_EPROTO,
		                  "envelope: bad magic or short "
		                  "header (%zu bytes)",
		                  len);
	nl = b[12];
	if (nl == 0 || nl > AX_ACTOR_NAME_MAX || len < ENV_FIXED + nl)
		return ax_err_set(AX_EPROTO,
		                  "envelope: bad sender name "
		                  "length %zu",
		                  nl);
	memcpy(name, b + 13, nl);
	name[nl] = '\0';
	*sysid   = get_be64(b + 4);
	cnt      = get_be32(b + 13 + nl);
	if (cnt > AX_ACTOR_ENVELOPE_MAX_ITEMS)
		return ax_err_set(AX_EPROTO,
		                  "envelope from %s: %u items, "
		                  "limit %d",
		                  name, cnt, AX_ACTOR_ENVELOPE_MAX_ITEMS);
	if (cnt > room)
		return ax_err_set(AX_EPROTO,
		                  "envelope from %s: %u items, room for "
		                  "%zu in the batch",
		                  name, cnt, room);
	off = ENV_FIXED + nl;
	for (uint32_t i = 0; i < cnt; i++) {
		if (len - off < ITEM_HDR)
			return ax_err_set(AX_EPROTO,
			                  "envelope from %s: item "
			                  "%u header truncated",
			                  name, i);
		uint32_t ilen = get_be32(b + off + 4);
		if (len - off - ITEM_HDR < ilen)
			return ax_err_set(AX_EPROTO,
			                  "envelope from %s: item "
			                  "%u length %u past end",
			                  name, i, ilen);
		ax_actor_item *it = &items[*n + i];
		it->from          = name;
		it->type          = get_be32(b + off);
		it->len           = ilen;
		it->data          = b + off + ITEM_HDR;
		off += ITEM_HDR + ilen;
	}
	if (off != len)
		return ax_err_set(AX_EPROTO,
		                  "envelope from %s: %zu trailing "
		                  "bytes",
		                  name, len - off);
	*n += cnt;
	return AX_OK;
}

/* Starts a new envelope in l->cur for sender `from` of system sysid. */
static ax_err
env_begin(out_link *l, uint64_t sysid, const char *from)
{
	nng_msg *m;
	size_t   nl  = strlen(from);
	uint8_t  nlb = (uint8_t) nl;

	if (nng_msg_alloc(&m, 0) != 0)
		return ax_err_set(AX_ENOMEM, "envelope allocation");
	if (nng_msg_append_u32(m, ENV_MAGIC) != 0 ||
	    nng_msg_append_u64(m, sysid) != 0 ||
	    nng_msg_append(m, &nlb, 1) != 0 ||
	    nng_msg_append(m, from, nl) != 0 ||
	    nng_msg_append_u32(m, 0) != 0) {
		nng_msg_free(m);
		return ax_err_set(AX_ENOMEM, "envelope allocation");
	}
	l->cur       = m;
	l->cur_items = 0;
	l->count_off = ENV_FIXED + nl - 4;
	return AX_OK;
}

/* Moves the envelope being filled to the send FIFO. */
static ax_err
env_seal(out_link *l)
{
	if (l->cur == NULL)
		return AX_OK;
	if (l->qhead + l->qlen == l->qcap) {
		if (l->qhead > 0) {
			memmove(l->q, l->q + l->qhead,
			        l->qlen * sizeof(*l->q));
			l->qhead = 0;
		} else {
			size_t  cap = l->qcap ? l->qcap * 2 : 4;
			outmsg *q   = realloc(l->q, cap * sizeof(*q));
			if (q == NULL)
				return ax_err_set(AX_ENOMEM, "outbox queue");
			l->q    = q;
			l->qcap = cap;
		}
	}
	put_be32((uint8_t *) nng_msg_body(l->cur) + l->count_off,
	         l->cur_items);
	l->q[l->qhead + l->qlen].msg   = l->cur;
	l->q[l->qhead + l->qlen].items = l->cur_items;
	l->qlen++;
	l->cur = NULL;
	return AX_OK;
}

/*
 * Reserves room for one item of len bytes in the envelope being filled
 * (sealing it first when full) and returns a pointer to the payload area.
 */
static ax_err
env_item(out_link *l, uint64_t sysid, const char *from, uint32_t type,
         size_t len, uint8_t **payload)
{
	ax_err rv;
	size_t old;

	if (l->cur != NULL &&
	    (l->cur_items >= AX_ACTOR_ENVELOPE_MAX_ITEMS ||
	     nng_msg_len(l->cur) + ITEM_HDR + len >
	         AX_ACTOR_ENVELOPE_MAX_BYTES) &&
	    (rv = env_seal(l)) != AX_OK)
		return rv;
	if (l->cur == NULL && (rv = env_begin(l, sysid, from)) != AX_OK)
		return rv;
	old = nng_msg_len(l->cur);
	if (nng_msg_capacity(l->cur) < old + ITEM_HDR + len &&
	    nng_msg_reserve(l->cur, 2 * (old + ITEM_HDR + len)) != 0)
		return ax_err_set(AX_ENOMEM, "envelope growth");
	if (nng_msg_realloc(l->cur, old + ITEM_HDR + len) != 0)
		return ax_err_set(AX_ENOMEM, "envelope growth");
	uint8_t *p = (uint8_t *) nng_msg_body(l->cur) + old;
	put_be32(p, type);
	put_be32(p + 4, (uint32_t) len);
	*payload = p + ITEM_HDR;
	l->cur_items++;
	l->pending++;
	return AX_OK;
}

/* ---------------------------------------------------------------- links */

static out_link *
links_find(out_link *links, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(links[i].name, name) == 0)
			return &links[i];
	return NULL;
}

/*
 * Finds or creates the link from a sender to dest. AX_ENOENT when dest is
 * neither an actor of sys nor a route.
 */
static ax_err
links_get(ax_actor_system *sys, out_link **links, size_t *n, const char *dest,
          out_link **out)
{
	out_link *l = links_find(*links, *n, dest);
	ax_actor *local;
	char     *url = NULL;

	if (l != NULL) {
		*out = l;
		return AX_OK;
	}
	if (dest == NULL || strlen(dest) > AX_ACTOR_NAME_MAX)
		return ax_err_set(AX_ENOENT, "no actor or route named '%s'",
		                  dest ? dest : "(null)");
	local = ax_actor_system_find(sys, dest);
	if (local != NULL)
		url = local->url;
	for (size_t i = 0; url == NULL && i < sys->nroutes; i++)
		if (strcmp(sys->routes[i].name, dest) == 0)
			url = sys->routes[i].url;
	if (url == NULL)
		return ax_err_set(AX_ENOENT, "no actor or route named '%s'",
		                  dest);
	l = realloc(*links, (*n + 1) * sizeof(**links));
	if (l == NULL)
		return ax_err_set(AX_ENOMEM, "link to %s", dest);
	*links = l;
	l      = &l[(*n)++];
	memset(l, 0, sizeof(*l));
	snprintf(l->name, sizeof(l->name), "%s", dest);
	l->url   = url;
	l->local = local;
	*out     = l;
	return AX_OK;
}

static ax_err
link_open(out_link *l, const char *owner)
{
	int rv;
	if (l->open)
		return AX_OK;
	if ((rv = nng_push0_open(&l->sock)) != 0)
		return nng_to_ax(rv, "open sender to", owner, l->url);
	l->open = 1;
	if ((rv = nng_socket_set_int(l->sock, NNG_OPT_SENDBUF,
	                             AX_ACTOR_SENDBUF)) != 0 ||
	    (rv = nng_socket_set_ms(l->sock, NNG_OPT_SENDTIMEO,
	                            SEND_SLICE_MS)) != 0 ||
	    (rv = nng_dial(l->sock, l->url, NULL, NNG_FLAG_NONBLOCK)) != 0)
		return nng_to_ax(rv, "dial", owner, l->url);
	return AX_OK;
}

/* Drops everything buffered on l; returns the number of items. */
static size_t
link_drop(ax_actor_system *sys, out_link *l)
{
	size_t n = l->pending;
	if (l->cur != NULL) {
		nng_msg_free(l->cur);
		l->cur = NULL;
	}
	for (size_t i = 0; i < l->qlen; i++)
		nng_msg_free(l->q[l->qhead + i].msg);
	l->qhead = l->qlen = 0;
	l->pending         = 0;
	atomic_fetch_sub(&sys->pending, (int64_t) n);
	return n;
}

static void
link_fini(ax_actor_system *sys, out_link *l)
{
	link_drop(sys, l);
	free(l->q);
	if (l->open)
		nng_close(l->sock);
	l->open = 0;
}

/*
 * Puts envelope m into d's ring (the in-process hop; see the file
 * comment) and wakes d's thread. 0 when taken (d owns m), NNG_EAGAIN when
 * the ring is full and nonblock, NNG_ETIMEDOUT after SEND_SLICE_MS of
 * waiting for room (the caller re-checks the stop flags), NNG_ECLOSED
 * when d stops.
 */
static int
local_put(ax_actor *d, nng_msg *m, int nonblock)
{
	struct timespec ts;
	int             rv = 0;

	pthread_mutex_lock(&d->mu);
	while (!d->stop && !atomic_load(&d->closed) &&
	       d->rcount + (d->rx_armed ? 1u : 0u) >= d->ring_cap) {
		if (nonblock) {
			pthread_mutex_unlock(&d->mu);
			return NNG_EAGAIN;
		}
		mono_to_timespec(ax_clock_mono_us() +
		                     SEND_SLICE_MS * AX_USEC_PER_MSEC,
		                 &ts);
		d->space_waiters++;
		rv = pthread_cond_timedwait(&d->space, &d->mu, &ts);
		d->space_waiters--;
		if (rv != 0) {
			pthread_mutex_unlock(&d->mu);
			return NNG_ETIMEDOUT;
		}
	}
	if (d->stop || atomic_load(&d->closed)) {
		pthread_mutex_unlock(&d->mu);
		return NNG_ECLOSED;
	}
	d->ring[(d->rhead + d->rcount) % d->ring_cap] = m;
	d->rcount++;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/*
 * Sends the sealed envelopes of l in order. Blocking mode waits in
 * SEND_SLICE_MS slices and gives up (dropping, AX_ECLOSED) when the
 * destination closes or the system reaches its stop phase (after the
 * drain), so no thread stays blocked on a peer that is gone. Non-blocking mode
 * returns AX_EAGAIN at the first full envelope, keeping it and those behind
 * it. *sent_items / *sent_envs are incremented by what nng accepted; *dropped
 * by what was thrown away.
 */
static ax_err
link_flush(ax_actor_system *sys, out_link *l, const char *owner, int nonblock,
           uint64_t *sent_items, uint64_t *sent_envs, uint64_t *dropped)
{
	ax_err rv;
	int    nrv;

	if ((rv = env_seal(l)) != AX_OK)
		return rv;
	while (l->qlen > 0) {
		outmsg *o = &l->q[l->qhead];
		if ((l->local != NULL && atomic_load(&l->local->closed)) ||
		    atomic_load(&sys->state) >= SYS_STOPPED) {
			*dropped += link_drop(sys, l);
			return ax_err_set(AX_ECLOSED,
			                  "%s: destination %s closed", owner,
			                  l->name);
		}
		if (l->local != NULL) {
			nrv = local_put(l->local, o->msg, nonblock);
		} else {
			if ((rv = link_open(l, owner)) != AX_OK)
				return rv;
			nrv = nng_sendmsg(l->sock, o->msg,
			                  nonblock ? NNG_FLAG_NONBLOCK : 0);
		}
		if (nrv == 0) {
			if (l->local == NULL)
				atomic_fetch_sub(&sys->pending,
				                 (int64_t) o->items);
			l->pending -= o->items;
			*sent_items += o->items;
			*sent_envs += 1;
			l->qhead++;
			l->qlen--;
			continue;
		}
		if (nrv == NNG_EAGAIN && nonblock)
			return ax_err_set(AX_EAGAIN, "%s: inbox of %s is full",
			                  owner, l->name);
		if (nrv == NNG_ETIMEDOUT || nrv == NNG_EAGAIN)
			continue;
		*dropped += link_drop(sys, l);
		return nng_to_ax(nrv, "send to", owner, l->url);
	}
	if (l->qhead > 0 && l->qlen == 0)
		l->qhead = 0;
	return AX_OK;
}

/* --------------------------------------------------------------- system */

ax_err
ax_actor_system_new(ax_actor_system **out)
{
	ax_actor_system *sys = calloc(1, sizeof(*sys));
	if (sys == NULL)
		return ax_err_set(AX_ENOMEM, "actor system");
	if (getrandom(&sys->id, sizeof(sys->id), 0) != sizeof(sys->id))
		sys->id = (uint64_t) ax_clock_mono_us() ^
		    ((uint64_t) getpid() << 32);
	atomic_init(&sys->state, SYS_NEW);
	atomic_init(&sys->pending, 0);
	atomic_init(&sys->dropped, 0);
	pthread_mutex_init(&sys->retired_mu, NULL);
	*out = sys;
	return AX_OK;
}

ax_actor *
ax_actor_system_find(ax_actor_system *sys, const char *name)
{
	for (size_t i = 0; name != NULL && i < sys->nactors; i++)
		if (strcmp(sys->actors[i]->name, name) == 0)
			return sys->actors[i];
	return NULL;
}

static int
name_taken(ax_actor_system *sys, const char *name)
{
	if (ax_actor_system_find(sys, name) != NULL)
		return 1;
	for (size_t i = 0; i < sys->nroutes; i++)
		if (strcmp(sys->routes[i].name, name) == 0)
			return 1;
	return 0;
}

static void
actor_free(ax_actor *a)
{
	if (a == NULL)
		return;
	for (size_t i = 0; i < a->nlinks; i++)
		link_fini(a->sys, &a->links[i]);
	free(a->links);
	if (a->aio != NULL)
		nng_aio_free(a->aio);
	if (a->ops != NULL && a->ops->fini != NULL)
		a->ops->fini(a->state);
	pthread_cond_destroy(&a->cv);
	pthread_cond_destroy(&a->space);
	pthread_mutex_destroy(&a->mu);
	free(a->ring);
	free(a->bmsgs);
	free(a->bnames);
	free(a->items);
	free(a->url);
	free(a);
}

static ax_err
actor_alloc(ax_actor_system *sys, const ax_actor_config *cfg,
            const ax_actor_ops *ops, void *state, ax_actor **out)
{
	pthread_condattr_t ca;
	ax_actor          *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return ax_err_set(AX_ENOMEM, "actor %s", cfg->name);
	a->sys   = sys;
	a->ops   = ops;
	a->state = state;
	snprintf(a->name, sizeof(a->name), "%s", cfg->name);
	a->inbox_depth = cfg->inbox_depth ? cfg->inbox_depth : DEF_INBOX_DEPTH;
	a->max_batch   = cfg->max_batch ? cfg->max_batch : DEF_MAX_BATCH;
	a->outbox_max  = cfg->outbox_max ? cfg->outbox_max : DEF_OUTBOX_MAX;
	a->send_nonblock = cfg->send_nonblock;
	a->items_cap     = a->max_batch > AX_ACTOR_ENVELOPE_MAX_ITEMS
	        ? a->max_batch
	        : AX_ACTOR_ENVELOPE_MAX_ITEMS;
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_cond_init(&a->space, &ca);
	pthread_condattr_destroy(&ca);
	if (cfg->url != NULL) {
		a->url = strdup(cfg->url);
	} else if ((a->url = malloc(strlen(cfg->name) + 16)) != NULL) {
		sprintf(a->url, "inproc://ax/%s", cfg->name);
	}
	a->ring_cap = a->inbox_depth + AX_ACTOR_SENDBUF;
	a->ring     = calloc(a->ring_cap, sizeof(*a->ring));
	a->bmsgs    = calloc(a->ring_cap, sizeof(*a->bmsgs));
	a->bnames   = calloc(a->ring_cap, sizeof(*a->bnames));
	a->items    = calloc(a->items_cap, sizeof(*a->items));
	if (a->url == NULL || a->ring == NULL || a->bmsgs == NULL ||
	    a->bnames == NULL || a->items == NULL) {
		actor_free(a);
		return ax_err_set(AX_ENOMEM, "actor %s", cfg->name);
	}
	*out = a;
	return AX_OK;
}

ax_err
ax_actor_system_add(ax_actor_system *sys, const ax_actor_config *cfg,
                    const ax_actor_ops *ops, void *state, ax_actor **out)
{
	ax_actor  *a = NULL;
	ax_actor **v;
	ax_err     rv;

	if (cfg == NULL || ops == NULL || ops->handle == NULL) {
		rv = ax_err_set(AX_EINVAL,
		                "actor: config and a handler are "
		                "required");
		goto fail;
	}
	if (!name_valid(cfg->name)) {
		rv = ax_err_set(AX_EINVAL,
		                "actor name '%s': use 1-%d of "
		                "[A-Za-z0-9_.-]",
		                cfg->name ? cfg->name : "(null)",
		                AX_ACTOR_NAME_MAX);
		goto fail;
	}
	if (cfg->url != NULL && !url_valid(cfg->url)) {
		rv = ax_err_set(AX_EINVAL,
		                "actor %s: address '%s': use "
		                "inproc://, ipc:// or tcp://",
		                cfg->name, cfg->url);
		goto fail;
	}
	if (atomic_load(&sys->state) != SYS_NEW) {
		rv = ax_err_set(AX_ESTATE, "actor %s: system already started",
		                cfg->name);
		goto fail;
	}
	if (name_taken(sys, cfg->name)) {
		rv = ax_err_set(AX_EEXIST, "actor %s: name already used",
		                cfg->name);
		goto fail;
	}
	v = realloc(sys->actors, (sys->nactors + 1) * sizeof(*v));
	if (v == NULL) {
		rv = ax_err_set(AX_ENOMEM, "actor %s", cfg->name);
		goto fail;
	}
	sys->actors = v;
	if ((rv = actor_alloc(sys, cfg, ops, state, &a)) != AX_OK)
		return rv; /* actor_free already called fini */
	sys->actors[sys->nactors++] = a;
	if (out != NULL)
		*out = a;
	return AX_OK;
fail:
	if (ops != NULL && ops->fini != NULL)
		ops->fini(state);
	return rv;
}

ax_err
ax_actor_system_route(ax_actor_system *sys, const char *name, const char *url)
{
	route *r;

	if (!name_valid(name))
		return ax_err_set(AX_EINVAL,
		                  "route name '%s': use 1-%d of "
		                  "[A-Za-z0-9_.-]",
		                  name ? name : "(null)", AX_ACTOR_NAME_MAX);
	if (url == NULL || !url_valid(url))
		return ax_err_set(AX_EINVAL,
		                  "route %s: address '%s': use "
		                  "inproc://, ipc:// or tcp://",
		                  name, url ? url : "(null)");
	if (atomic_load(&sys->state) != SYS_NEW)
		return ax_err_set(AX_ESTATE,
		                  "route %s: system already started", name);
	if (name_taken(sys, name))
		return ax_err_set(AX_EEXIST, "route %s: name already used",
		                  name);
	r = realloc(sys->routes, (sys->nroutes + 1) * sizeof(*r));
	if (r == NULL)
		return ax_err_set(AX_ENOMEM, "route %s", name);
	sys->routes = r;
	r           = &r[sys->nroutes];
	snprintf(r->name, sizeof(r->name), "%s", name);
	if ((r->url = strdup(url)) == NULL)
		return ax_err_set(AX_ENOMEM, "route %s", name);
	sys->nroutes++;
	return AX_OK;
}

/* ---------------------------------------------------------------- inbox */

/* nng callback: one envelope arrived (or the socket closed). */
static void
rx_cb(void *arg)
{
	ax_actor *a     = arg;
	int       rv    = nng_aio_result(a->aio);
	int       rearm = 0;

	pthread_mutex_lock(&a->mu);
	if (rv == 0) {
		nng_msg *m = nng_aio_get_msg(a->aio);
		a->ring[(a->rhead + a->rcount) % a->ring_cap] = m;
		a->rcount++;
		/* Full ring: stop receiving so that senders feel it. */
		rearm = a->rcount < a->inbox_depth && !a->stop;
	} else if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
		a->rx_dead = 1;
	} else {
		rearm = !a->stop;
	}
	a->rx_armed = rearm;
	pthread_cond_signal(&a->cv);
	pthread_mutex_unlock(&a->mu);
	if (rearm)
		nng_recv_aio(a->inbox, a->aio);
}

/*
 * Takes queued envelopes into a->bmsgs: all of them, or fewer when the
 * next would push the batch past max_batch items (the first is always
 * taken). Called with mu held. Returns the number taken and sets *rearm
 * when the receive must be restarted (outside the lock).
 */
static uint32_t
inbox_take(ax_actor *a, int *rearm)
{
	uint32_t k     = 0;
	uint64_t items = 0;
	while (a->rcount > 0) {
		nng_msg *m = a->ring[a->rhead];
		uint32_t c =
		    ax_actor_env_count(nng_msg_body(m), nng_msg_len(m));
		if (k > 0 && items + c > a->max_batch)
			break;
		a->bmsgs[k++] = m;
		items += c;
		a->rhead = (a->rhead + 1) % a->ring_cap;
		a->rcount--;
	}
	if (k > 0 && a->space_waiters > 0)
		pthread_cond_broadcast(&a->space);
	*rearm = 0;
	if (k > 0 && !a->rx_armed && !a->rx_dead && !a->stop) {
		a->rx_armed = 1;
		*rearm      = 1;
	}
	return k;
}

/* ------------------------------------------------------------ the loop */

static uint64_t
flush_all(ax_actor *a, int nonblock, ax_err *first_err)
{
	uint64_t items = 0, envs = 0, dropped = 0;
	int      blocked = 0;
	ax_err   rv;

	*first_err = AX_OK;
	for (size_t i = 0; i < a->nlinks; i++) {
		out_link *l = &a->links[i];
		if (l->cur == NULL && l->qlen == 0)
			continue;
		rv = link_flush(a->sys, l, a->name, nonblock, &items, &envs,
		                &dropped);
		if (rv == AX_EAGAIN)
			blocked = 1;
		if (rv != AX_OK && *first_err == AX_OK)
			*first_err = rv;
	}
	STAT_ADD(a, items_out, items);
	STAT_ADD(a, envelopes_out, envs);
	STAT_ADD(a, dropped, dropped);
	if (blocked) {
		STAT_ADD(a, eagain, 1);
		a->retry_us = a->retry_us ? a->retry_us * 2 : RETRY_MIN_US;
		if (a->retry_us > RETRY_MAX_US)
			a->retry_us = RETRY_MAX_US;
		a->retry_at = ax_clock_mono_us() + a->retry_us;
	} else {
		a->retry_at = 0;
		a->retry_us = 0;
	}
	return items;
}

ax_err
ax_actor_flush(ax_actor *self, int flags)
{
	ax_err rv;
	flush_all(self, (flags & AX_ACTOR_NONBLOCK) != 0, &rv);
	return rv;
}

static void
log_failure(ax_actor *a, const char *what, size_t n, ax_err rv)
{
	STAT_ADD(a, errors, 1);
	ax_logf(AX_LOG_ERROR, a->name, "ACTOR_HANDLER_ERROR", NULL,
	        "%s failed on %zu items: %s: %s", what, n, ax_errname(rv),
	        ax_err_detail());
}

/* Parses and handles the envelopes in a->bmsgs[0..k), then frees them. */
static void
handle_batch(ax_actor *a, uint32_t k)
{
	size_t  n = 0, own = 0;
	ax_err  rv;
	int64_t delta;

	for (uint32_t i = 0; i < k; i++) {
		uint64_t sysid  = 0;
		size_t   before = n;
		rv              = ax_actor_env_parse(
		                 nng_msg_body(a->bmsgs[i]), nng_msg_len(a->bmsgs[i]),
		                 a->bnames[i], &sysid, a->items, a->items_cap - n, &n);
		if (rv != AX_OK) {
			STAT_ADD(a, bad_envelopes, 1);
			ax_logf(AX_LOG_WARN, a->name, "BAD_ENVELOPE", NULL,
			        "dropped a malformed envelope: %s",
			        ax_err_detail());
			continue;
		}
		STAT_ADD(a, envelopes_in, 1);
		if (sysid == a->sys->id)
			own += n - before;
	}
	/* Take the busy token and release the items in one step. */
	delta = 1 - (int64_t) own;
	atomic_fetch_add(&a->sys->pending, delta);
	STAT_ADD(a, items_in, n);
	if (n > 0) {
		STAT_ADD(a, batches, 1);
		if (n > atomic_load_explicit(&a->st.max_batch,
		                             memory_order_relaxed))
			atomic_store_explicit(&a->st.max_batch, n,
			                      memory_order_relaxed);
		rv = a->ops->handle(a, a->state, a->items, n);
		if (rv != AX_OK)
			log_failure(a, "handler", n, rv);
	}
	flush_all(a, a->send_nonblock, &rv);
	for (uint32_t i = 0; i < k; i++)
		nng_msg_free(a->bmsgs[i]);
	atomic_fetch_sub(&a->sys->pending, 1);
}

/* Runs the tick (deadline passed) and/or a pending flush retry. */
static void
handle_timers(ax_actor *a, int64_t now)
{
	ax_err rv;

	atomic_fetch_add(&a->sys->pending, 1);
	if (a->deadline > 0 && now >= a->deadline &&
	    atomic_load(&a->sys->state) == SYS_NEW) {
		/* a deadline set before start (the first tick of an actor
		 * that loads at start) while ax_actor_system_start is still
		 * creating threads: keep it for when the system runs, instead
		 * of consuming it without a tick */
		atomic_fetch_sub(&a->sys->pending, 1);
		ax_clock_sleep_us(100);
		return;
	}
	if (a->deadline > 0 && now >= a->deadline) {
		a->deadline = 0;
		if (a->ops->tick != NULL &&
		    atomic_load(&a->sys->state) == SYS_RUNNING) {
			STAT_ADD(a, ticks, 1);
			rv = a->ops->tick(a, a->state, now);
			if (rv != AX_OK)
				log_failure(a, "tick", 0, rv);
		}
	}
	flush_all(a, a->send_nonblock, &rv);
	atomic_fetch_sub(&a->sys->pending, 1);
}

static int64_t
next_wake(const ax_actor *a)
{
	int64_t w = a->deadline;
	if (a->retry_at > 0 && (w == 0 || a->retry_at < w))
		w = a->retry_at;
	return w;
}

static void *
actor_main(void *arg)
{
	ax_actor *a = arg;
	char      tname[16];

	/* "top -H" and perf show the actor by name (15 bytes at most) */
	memcpy(tname, a->name, sizeof(tname) - 1);
	tname[sizeof(tname) - 1] = '\0';
	(void) pthread_setname_np(pthread_self(), tname);
	for (;;) {
		uint32_t k     = 0;
		int      rearm = 0;
		int64_t  wake, now = 0;

		pthread_mutex_lock(&a->mu);
		for (;;) {
			if (a->stop || a->rcount > 0)
				break;
			wake = next_wake(a);
			if (wake > 0 && (now = ax_clock_mono_us()) >= wake)
				break;
			if (wake > 0) {
				struct timespec ts;
				mono_to_timespec(wake, &ts);
				pthread_cond_timedwait(&a->cv, &a->mu, &ts);
			} else {
				pthread_cond_wait(&a->cv, &a->mu);
			}
		}
		if (a->stop) {
			pthread_mutex_unlock(&a->mu);
			break;
		}
		k = inbox_take(a, &rearm);
		pthread_mutex_unlock(&a->mu);
		if (rearm)
			nng_recv_aio(a->inbox, a->aio);
		if (k > 0)
			handle_batch(a, k);
		wake = next_wake(a);
		if (wake > 0 && (now = ax_clock_mono_us()) >= wake)
			handle_timers(a, now);
	}
	return NULL;
}

/* ------------------------------------------------------- start and stop */

static void
actor_close_inbox(ax_actor *a)
{
	if (a->aio != NULL)
		nng_aio_stop(a->aio);
	if (a->inbox_open)
		nng_close(a->inbox);
	a->inbox_open = 0;
}

static ax_err
actor_bind(ax_actor *a)
{
	int rv;

	if ((rv = nng_pull0_open(&a->inbox)) != 0)
		return nng_to_ax(rv, "open inbox", a->name, a->url);
	a->inbox_open = 1;
	if ((rv = nng_socket_set_size(a->inbox, NNG_OPT_RECVMAXSZ,
	                              AX_ACTOR_ENVELOPE_MAX_BYTES + 4096)) !=
	        0 ||
	    (rv = nng_aio_alloc(&a->aio, rx_cb, a)) != 0 ||
	    (rv = nng_listen(a->inbox, a->url, NULL, 0)) != 0)
		return nng_to_ax(rv, "listen on", a->name, a->url);
	return AX_OK;
}

ax_err
ax_actor_system_start(ax_actor_system *sys)
{
	ax_err rv = AX_OK;
	size_t i;

	if (atomic_load(&sys->state) != SYS_NEW)
		return ax_err_set(AX_ESTATE, "actor system already started");
	for (i = 0; i < sys->nactors && rv == AX_OK; i++)
		rv = actor_bind(sys->actors[i]);
	for (i = 0; i < sys->nactors && rv == AX_OK; i++) {
		ax_actor *a = sys->actors[i];
		int       arm;
		/* senders of this system may have filled the ring already */
		pthread_mutex_lock(&a->mu);
		arm = a->rx_armed = a->rcount < a->inbox_depth;
		pthread_mutex_unlock(&a->mu);
		if (arm)
			nng_recv_aio(a->inbox, a->aio);
		if (pthread_create(&a->thread, NULL, actor_main, a) != 0) {
			rv = ax_err_set(AX_ENOMEM,
			                "actor %s: cannot start "
			                "thread",
			                a->name);
			break;
		}
		a->thread_started = 1;
	}
	if (rv == AX_OK) {
		atomic_store(&sys->state, SYS_RUNNING);
		return AX_OK;
	}
	/* Undo: stop threads and close what was bound; keep the detail. */
	char detail[512];
	snprintf(detail, sizeof(detail), "%s", ax_err_detail());
	for (i = 0; i < sys->nactors; i++) {
		ax_actor *a = sys->actors[i];
		pthread_mutex_lock(&a->mu);
		a->stop = 1;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->mu);
		if (a->thread_started)
			pthread_join(a->thread, NULL);
		a->thread_started = 0;
		actor_close_inbox(a);
	}
	atomic_store(&sys->state, SYS_STOPPED);
	return ax_err_set(rv, "%s", detail);
}

/* Stops one actor: joins its thread, closes its inbox, counts leftovers. */
static void
actor_stop(ax_actor *a)
{
	ax_actor_system *sys     = a->sys;
	uint64_t         dropped = 0;

	pthread_mutex_lock(&a->mu);
	a->stop = 1;
	pthread_cond_signal(&a->cv);
	pthread_cond_broadcast(&a->space); /* local senders: it stops */
	pthread_mutex_unlock(&a->mu);
	if (a->thread_started)
		pthread_join(a->thread, NULL);
	a->thread_started = 0;
	atomic_store(&a->closed, 1);
	actor_close_inbox(a);
	/* Whatever is still queued was never handled. */
	while (a->rcount > 0) {
		nng_msg *m     = a->ring[a->rhead];
		uint64_t sysid = 0;
		size_t   n     = 0;
		if (ax_actor_env_parse(nng_msg_body(m), nng_msg_len(m),
		                       a->bnames[0], &sysid, a->items,
		                       a->items_cap, &n) == AX_OK) {
			dropped += n;
			if (sysid == sys->id)
				atomic_fetch_sub(&sys->pending, (int64_t) n);
		}
		nng_msg_free(m);
		a->rhead = (a->rhead + 1) % a->ring_cap;
		a->rcount--;
	}
	for (size_t i = 0; i < a->nlinks; i++)
		dropped += link_drop(sys, &a->links[i]);
	for (size_t i = 0; i < a->nlinks; i++) {
		if (a->links[i].open)
			nng_close(a->links[i].sock);
		a->links[i].open = 0;
	}
	STAT_ADD(a, dropped, dropped);
	if (dropped > 0)
		ax_logf(AX_LOG_WARN, a->name, "ACTOR_STOP_DROPPED", NULL,
		        "stopped with %llu items not handled",
		        (unsigned long long) dropped);
}

void
ax_actor_system_stop(ax_actor_system *sys, int64_t drain_timeout_us,
                     ax_actor_stop_report *rep)
{
	ax_actor_stop_report r  = { 0, 0, 0 };
	int64_t              t0 = ax_clock_mono_us(), left;
	int                  prev;

	if (sys == NULL)
		return;
	prev = atomic_exchange(&sys->state, SYS_STOPPING);
	if (prev != SYS_RUNNING) {
		atomic_store(&sys->state,
		             prev == SYS_NEW ? SYS_STOPPED : prev);
		if (rep != NULL)
			*rep = (ax_actor_stop_report) { 1, 0, 0 };
		return;
	}
	while ((left = atomic_load(&sys->pending)) > 0 &&
	       ax_clock_mono_us() - t0 < drain_timeout_us)
		ax_clock_sleep_us(500);
	r.drained  = left <= 0;
	r.drain_us = ax_clock_mono_us() - t0;
	atomic_store(&sys->state, SYS_STOPPED);
	pthread_mutex_lock(&sys->retired_mu);
	for (size_t i = 0; i < sys->nretired; i++)
		nng_close(sys->retired[i]);
	free(sys->retired);
	sys->retired        = NULL;
	sys->nretired       = 0;
	sys->retired_closed = 1;
	pthread_mutex_unlock(&sys->retired_mu);
	for (size_t i = 0; i < sys->nactors; i++) {
		actor_stop(sys->actors[i]);
		r.dropped += atomic_load(&sys->actors[i]->st.dropped);
	}
	r.dropped += atomic_load(&sys->dropped);
	/* Items lost inside nng buffers of closed senders. */
	left = atomic_load(&sys->pending);
	if (left > 0)
		r.dropped += (uint64_t) left;
	atomic_store(&sys->pending, 0);
	if (r.dropped > 0)
		r.drained = 0;
	ax_logf(r.drained ? AX_LOG_INFO : AX_LOG_WARN, "actor", NULL, NULL,
	        "actor system stopped: %zu actors, %s, %llu items dropped, "
	        "drain %lld us",
	        sys->nactors, r.drained ? "drained" : "NOT drained",
	        (unsigned long long) r.dropped, (long long) r.drain_us);
	if (rep != NULL)
		*rep = r;
}

void
ax_actor_system_free(ax_actor_system *sys)
{
	if (sys == NULL)
		return;
	ax_actor_system_stop(sys, AX_USEC_PER_SEC, NULL);
	for (size_t i = 0; i < sys->nactors; i++)
		actor_free(sys->actors[i]);
	for (size_t i = 0; i < sys->nroutes; i++)
		free(sys->routes[i].url);
	free(sys->actors);
	free(sys->routes);
	pthread_mutex_destroy(&sys->retired_mu);
	free(sys);
}

/* -------------------------------------------------------- actor-side API */

const char *
ax_actor_name(const ax_actor *a)
{
	return a->name;
}

const char *
ax_actor_url(const ax_actor *a)
{
	return a->url;
}

void
ax_actor_stats_get(const ax_actor *a, ax_actor_stats *o)
{
	ax_actor *m      = (ax_actor *) a; /* atomics: loads only */
	o->envelopes_in  = atomic_load(&m->st.envelopes_in);
	o->items_in      = atomic_load(&m->st.items_in);
	o->batches       = atomic_load(&m->st.batches);
	o->max_batch     = atomic_load(&m->st.max_batch);
	o->items_out     = atomic_load(&m->st.items_out);
	o->envelopes_out = atomic_load(&m->st.envelopes_out);
	o->errors        = atomic_load(&m->st.errors);
	o->ticks         = atomic_load(&m->st.ticks);
	o->eagain        = atomic_load(&m->st.eagain);
	o->dropped       = atomic_load(&m->st.dropped);
	o->bad_envelopes = atomic_load(&m->st.bad_envelopes);
}

/* Common part of ax_actor_send and ax_actor_send_pb. */
static ax_err
send_reserve(ax_actor *self, const char *dest, uint32_t type, size_t len,
             uint8_t **payload)
{
	out_link *l;
	ax_err    rv;

	if (len > AX_ACTOR_ENVELOPE_MAX_BYTES - ENV_FIXED - AX_ACTOR_NAME_MAX -
	        ITEM_HDR)
		return ax_err_set(AX_ELIMIT,
		                  "%s: item of %zu bytes to %s is "
		                  "over the envelope limit",
		                  self->name, len, dest ? dest : "(null)");
	if (atomic_load(&self->sys->state) >= SYS_STOPPED)
		return ax_err_set(AX_ECLOSED, "%s: system stopping",
		                  self->name);
	if ((rv = links_get(self->sys, &self->links, &self->nlinks, dest,
	                    &l)) != AX_OK)
		return rv;
	if (l->pending >= self->outbox_max)
		return ax_err_set(AX_ELIMIT,
		                  "%s: %zu items already buffered "
		                  "for %s; flush first",
		                  self->name, l->pending, dest);
	if ((rv = env_item(l, self->sys->id, self->name, type, len,
	                   payload)) != AX_OK)
		return rv;
	atomic_fetch_add(&self->sys->pending, 1);
	return AX_OK;
}

ax_err
ax_actor_send(ax_actor *self, const char *dest, uint32_t type,
              const void *data, size_t len)
{
	uint8_t *p;
	ax_err   rv = send_reserve(self, dest, type, len, &p);
	if (rv == AX_OK && len > 0)
		memcpy(p, data, len);
	return rv;
}

ax_err
ax_actor_send_pb(ax_actor *self, const char *dest, uint32_t type,
                 const struct ProtobufCMessage *msg)
{
	uint8_t *p;
	size_t   len = protobuf_c_message_get_packed_size(msg);
	ax_err   rv  = send_reserve(self, dest, type, len, &p);
	if (rv == AX_OK)
		protobuf_c_message_pack(msg, p);
	return rv;
}

size_t
ax_actor_outbox_pending(const ax_actor *self, const char *dest)
{
	out_link *l = links_find(self->links, self->nlinks, dest);
	return l ? l->pending : 0;
}

void
ax_actor_set_deadline(ax_actor *self, int64_t mono_us)
{
	self->deadline = mono_us > 0 ? mono_us : 0;
}

/* --------------------------------------------------------------- client */

ax_err
ax_actor_client_new(ax_actor_system *sys, const char *name,
                    ax_actor_client **out)
{
	ax_actor_client *c;
	if (sys == NULL || !name_valid(name))
		return ax_err_set(AX_EINVAL,
		                  "client name '%s': use 1-%d of "
		                  "[A-Za-z0-9_.-]",
		                  name ? name : "(null)", AX_ACTOR_NAME_MAX);
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return ax_err_set(AX_ENOMEM, "client %s", name);
	c->sys = sys;
	snprintf(c->name, sizeof(c->name), "%s", name);
	*out = c;
	return AX_OK;
}

void
ax_actor_client_free(ax_actor_client *c)
{
	ax_actor_system *sys;

	if (c == NULL)
		return;
	sys = c->sys;
	pthread_mutex_lock(&sys->retired_mu);
	for (size_t i = 0; i < c->nlinks; i++) {
		out_link   *l = &c->links[i];
		nng_socket *v;
		if (l->open && !sys->retired_closed &&
		    (v = realloc(sys->retired,
		                 (sys->nretired + 1) * sizeof(*v))) != NULL) {
			sys->retired                  = v;
			sys->retired[sys->nretired++] = l->sock;
			l->open                       = 0;
		}
		link_fini(sys, l);
	}
	pthread_mutex_unlock(&sys->retired_mu);
	free(c->links);
	free(c);
}

ax_err
ax_actor_client_send(ax_actor_client *c, const char *dest,
                     const ax_actor_item *items, size_t n, int flags)
{
	ax_actor_system *sys = c->sys;
	out_link        *l;
	ax_err           rv;
	uint64_t         sent = 0, envs = 0, dropped = 0;
	size_t           bytes = ENV_FIXED + strlen(c->name);
	int              st    = atomic_load(&sys->state);

	if (st == SYS_NEW)
		return ax_err_set(AX_ESTATE, "client %s: system not started",
		                  c->name);
	if (st != SYS_RUNNING)
		return ax_err_set(AX_ECLOSED, "client %s: system stopping",
		                  c->name);
	if (n > AX_ACTOR_ENVELOPE_MAX_ITEMS)
		return ax_err_set(AX_ELIMIT,
		                  "client %s: %zu items, limit %d "
		                  "per envelope",
		                  c->name, n, AX_ACTOR_ENVELOPE_MAX_ITEMS);
	for (size_t i = 0; i < n; i++)
		bytes += ITEM_HDR + items[i].len;
	if (bytes > AX_ACTOR_ENVELOPE_MAX_BYTES)
		return ax_err_set(AX_ELIMIT,
		                  "client %s: %zu bytes, limit %d "
		                  "per envelope",
		                  c->name, bytes, AX_ACTOR_ENVELOPE_MAX_BYTES);
	if ((rv = links_get(sys, &c->links, &c->nlinks, dest, &l)) != AX_OK)
		return rv;
	if ((rv = env_begin(l, sys->id, c->name)) != AX_OK)
		return rv;
	for (size_t i = 0; i < n; i++) {
		uint8_t *p;
		if ((rv = env_item(l, sys->id, c->name, items[i].type,
		                   items[i].len, &p)) != AX_OK) {
			/* Not yet counted in sys->pending: just discard. */
			nng_msg_free(l->cur);
			l->cur     = NULL;
			l->pending = 0;
			return rv;
		}
		memcpy(p, items[i].data, items[i].len);
	}
	atomic_fetch_add(&sys->pending, (int64_t) n);
	rv = link_flush(sys, l, c->name, (flags & AX_ACTOR_NONBLOCK) != 0,
	                &sent, &envs, &dropped);
	if (rv == AX_EAGAIN) {
		/* Nothing sent: take the envelope back. */
		link_drop(sys, l);
		return rv;
	}
	atomic_fetch_add(&sys->dropped, dropped);
	return rv;
}
