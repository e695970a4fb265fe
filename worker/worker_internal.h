/*
 * worker_internal.h - ax-worker's state, shared by its loop
 * (worker_client.c) and its link to the queue (worker_link.c). Private
 * to worker/.
 *
 * Threads: everything here belongs to the loop thread, except a wreq's
 * phase and result, which nng's callback thread sets (rq_cb) before it
 * wakes the loop through evfd.
 */
#ifndef AX_WORKER_INTERNAL_H
#define AX_WORKER_INTERNAL_H

#include <nng/nng.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "executor.h"
#include "group_spec.h"
#include "resources.h"
#include "task_env.h"
#include "worker.pb-c.h"
#include "worker_client.h"

#define NEXEC 2 /* bash (local), noop */
/* Running attempts whose usage one heartbeat reports (the first ones). */
#define AX_WORKER_USAGE_MAX 256
#define DONE_RING           1024 /* recently finished run_ids kept for dedupe */
#define REPORT_MAX          512  /* entries per Report */
#define RETRY_MIN           (200 * AX_USEC_PER_MSEC)
#define REGISTER_US         (500 * AX_USEC_PER_MSEC)
/* After a stop, how long an idle worker waits for the queue to
 * acknowledge its last reports before it leaves anyway. */
#define DRAIN_REPORT_WAIT_US (10 * AX_USEC_PER_SEC)
/* A held start on the queue's clock may come at most this much before
 * the one counted from the reply's arrival (worker_client.c, held_start) */
#define HELD_CLOCK_MAX_US (AX_USEC_PER_SEC)
#define COMP              "ax-worker"

enum { RQ_CTL = 0, RQ_REPORT, RQ_PULL, NRQ };
enum { PH_IDLE = 0, PH_SEND, PH_RECV, PH_DONE };
enum { K_REGISTER = 1, K_HEARTBEAT, K_DEREGISTER, K_REPORT, K_PULL };

/* One REQ context with its request in flight. */
typedef struct wreq {
	_Atomic(struct ax_worker *) w; /* NULL once its link is retired */
	nng_ctx                     ctx;
	nng_aio                    *aio;
	_Atomic int                 phase;
	int                         kind;
	int                         rv;      /* nng result when PH_DONE */
	int64_t                     timeout; /* receive timeout, ms */
	int64_t                     sent_at; /* mono us of the send */
	int64_t  done_at;  /* mono us its reply arrived (nng thread) */
	uint64_t session;  /* session it was sent in */
	size_t   nstarted; /* Report: entries carried */
	size_t   nresults;
	size_t   nacks;
	size_t   nwithdrawn;
} wreq;

/*
 * The link to the queue: one REQ socket with its dialer and a context per
 * request kind. A link that answered nothing for half the lease (while
 * leased), for a whole one (at a fence) or for axw_relink_us (while not
 * registered) is replaced by a new one (axw_link_reset): a connection can
 * die without either end seeing it (a peer host frozen or cut off, a NAT
 * that dropped the flow: TCP then never reports the loss; and requests
 * that never reached a restarted axd on nng 1.5), and a worker that kept
 * asking on it would never register again, so its group would run
 * nothing. At half the lease a new link can still renew the lease, or
 * register again with a restarted queue, before the attempts must be
 * fenced. The old link is closed on a thread of its own, so that a close
 * that waits on a stuck request cannot stop the worker.
 */
typedef struct wlink {
	nng_socket  sock;
	int         open; /* sock is open */
	atomic_int *live; /* retired: the worker's count of closing links */
	wreq        rq[NRQ];
} wlink;

/* A running attempt, or one received ahead of its start (pend != NULL:
 * not started yet, ex NULL). Both count as held by this worker: their
 * slots are used and they are in the running sets it reports. */
typedef struct wrun {
	char     run_id[AX_EXEC_RUN_ID_MAX];
	ax_exec *ex;
	int      killed; /* kill asked by the queue */
	int      handed; /* killed to hand back: not reported */
	int      slots;
	uint8_t *pend;     /* its Dispatch, packed (owned), until it starts */
	size_t   pend_len; /* bytes in pend */
	int64_t  start_mono; /* pend: mono us at which it starts */
	uint64_t pend_seq;   /* pend: order of receipt (ties) */
	int64_t  cpu_us;     /* its CPU time at the last heartbeat */
	int64_t  cpu_at;     /* mono us of that reading (0: none yet) */
} wrun;

typedef struct wstarted {
	char   *run_id;
	int64_t started_at;
} wstarted;

struct ax_worker {
	ax_worker_opts o;
	ax_res_set     res; /* named resources offered (o.resources) */
	ax_label       labels[AX_LABELS_MAX]; /* o.labels */
	size_t         nlabels;
	char           id[256];
	char           host[128];
	char           log_dir[1024];
	wlink         *link;        /* the current link (owned) */
	wreq          *rq;          /* link->rq */
	int64_t        link_since;  /* mono us the link was made */
	int64_t        last_answer; /* mono us of the last reply */
	int64_t        reconnects;  /* links replaced */
	atomic_int     retiring;    /* old links still being closed */
	int            evfd;
	ax_exec       *ex[NEXEC]; /* [0] local, [1] noop */

	uint64_t session, seq;
	int      registered;
	int64_t  retry_us, next_register, next_hb, report_at;
	int64_t  pend_next; /* earliest instant of a held dispatch (mono us);
	                       INT64_MAX: none */
	int shared_clock;   /* the queue is on this host (ipc://): its
	                       clocks are ours (see held_start) */
	uint64_t pend_seq;  /* dispatches held so far (wrun.pend_seq) */
	/* Lease: the queue renews it on Register and Heartbeat and lets it
	 * lapse lease_ttl after the last one it received; measuring from
	 * the send time of the last one it answered keeps us ahead. */
	int     leased; /* a lease is held (0 before Register, fenced) */
	int64_t lease_ttl_us, lease_base; /* base: mono us of that send */
	int64_t fences;                   /* times the lease lapsed */

	wrun  *run;
	size_t nrun;
	char   done[DONE_RING][AX_EXEC_RUN_ID_MAX];
	size_t done_next;

	wstarted   *ost;
	size_t      nost, cost;
	Ax__Result *ores; /* owned strings: run_id, error, log_path */
	size_t      nores, cores;
	char      **acks;
	size_t      nacks, cacks;
	char      **withdrawn; /* dispatches dropped on the queue's
	                          withdraw, to report (Report) */
	size_t nwithdrawn, cwithdrawn;
	char **handed; /* run_ids killed to be handed back */
	size_t nhanded, chanded;

	int     stops, draining, hand_back, deregistered;
	int64_t drain_since; /* mono us of the first stop request */

	ax_exec_cred  *cred;   /* the tasks' default user (owned) */
	ax_task_policy policy; /* run_as and secrets rules */
};

/* worker_link.c: the link and its requests */

/* Wakes the loop (any thread). */
void axw_wake(ax_worker *w);

/* Sends m on request context k of the current link; the reply arrives
 * through the callback, which sets the phase to PH_DONE. Loop thread. */
void axw_rq_send(ax_worker *w, int k, int kind, Ax__WorkerMessage *m,
                 int64_t timeout_us);

/* The reply of finished request k (NULL on a transport error or a reply
 * that does not parse); the context is idle again. Free with
 * ax__queue_message__free_unpacked. Loop thread. */
Ax__QueueMessage *axw_rq_reply(ax_worker *w, int k);

/* Whether request context k has nothing in flight. */
int axw_rq_idle(const ax_worker *w, int k);

/* A new link dialing w->o.server, without waiting for the connection. */
ax_err axw_link_new(ax_worker *w, wlink **out);

/* Stops l's requests, closes its socket and frees it (any thread). */
void axw_link_free(wlink *l);

/* How long a link may go unanswered while unregistered before it is
 * replaced. */
int64_t axw_relink_us(const ax_worker *w);

/* Waits up to max_us for the old links' closing threads (at exit, so
 * that what they free is freed before the process ends). */
void axw_link_wait_retired(ax_worker *w, int64_t max_us);

/* Replaces the current link; the old one is closed on a thread of its
 * own. Loop thread. */
void axw_link_reset(ax_worker *w, const char *why);

#endif
