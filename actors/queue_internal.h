/*
 * queue_internal.h - the queue service's state, shared by its files
 * (private to actors/queue_*.c; the public API is queue_service.h).
 *
 * queue_service.c owns the actor, the heaps, routing, workers and the
 * worker endpoint; queue_reconcile.c records dispatches and settles, after
 * a start, the attempts a worker may hold (see "Reconciliation" in
 * queue_service.c). Everything here runs on the queue actor's thread
 * only, except the hand-off fields of ax_queue (under mu).
 */
#ifndef AX_QUEUE_INTERNAL_H
#define AX_QUEUE_INTERNAL_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "heap.h"
#include "hmap.h"
#include "log.h"
#include "queue_service.h"
#include "routing.h"
#include "store.h"
#include "worker.pb-c.h"

#define DISPATCH_MAX 256             /* dispatches per Pull reply */
#define DB_RETRY_US  AX_USEC_PER_SEC /* see axq_record_dispatches */

typedef struct qatt    qatt;
typedef struct qworker qworker;
typedef struct qgroup  qgroup;
typedef struct qctx    qctx;

/* Attempts ordered by channel rank, aging key, arrival (att_before);
 * initialised with axq_heap_init. */
typedef ax_heap qheap;

enum {
	ST_QUEUED = 1,
	ST_DISPATCHED,
	ST_RUNNING,
	ST_DONE,
	ST_HELD,
	ST_DOUBT, /* may run on a worker that has not reported since a start */
};

/* One attempt. Owned by the queue; in q->runs by run_id until freed. */
struct qatt {
	char                      *run_id;
	Ax__Command               *cmd; /* owned; NULL for adopted attempts */
	const Ax__AttemptRendered *ar;  /* cmd's body, or NULL */
	char                       inst_key[24]; /* instance id text, "" */
	int                        state;
	int                        ch;    /* channel index */
	int                        rank;  /* 1 for P0 */
	double                     key;   /* priority - enq / aging */
	uint64_t                   seq;   /* arrival order (ties) */
	int32_t                    slots; /* >= 1 */
	qgroup                    *group;
	const ax_routing_ops      *route;
	qheap                     *heap;   /* while QUEUED */
	ax_heap_node               hn;     /* its node in heap */
	qworker                   *worker; /* DISPATCHED / RUNNING */
	qatt                      *wnext, *wprev;
	qatt                      *unext, *uprev; /* unacked FIFO */
	qatt                      *rnext;         /* retired FIFO */
	qatt                      *hnext, *hprev; /* held list (ST_HELD) */
	int64_t                    release_mono;  /* ST_HELD: due, mono us */
	int64_t                    ack_deadline;  /* mono us */
	int64_t                    retire_at;     /* mono us */
	int64_t                    dispatched_at_us, started_at_us; /* UTC */
	int                        kill; /* cancel requested */
	char                       kill_reason[32];
	int      doubt; /* ST_DOUBT: 1 DISPATCHED, 2 RUNNING in the database */
	qworker *bound; /* dispatch only to this worker until it acks */
	int64_t  verify; /* mono us; RUNNING, not listed at register: UNKNOWN
	                    at a heartbeat after this that does not list it,
	                    unless its result came (0: none) */
	qatt    *xnext, *xprev; /* holder's in-doubt list (ST_DOUBT) */
	qworker *holder;        /* ST_DOUBT: the worker that may hold it */
	int      resend; /* DISPATCHED, not acknowledged in time: goes again
	                    to its worker in that worker's next Pull reply */
};

/* One worker id: a live session, or a placeholder pinned attempts wait
 * for. Owned by q->workers; never freed before the queue. */
struct qworker {
	char       *id;
	qgroup     *group; /* last group; NULL until it registers */
	int         alive, draining;
	int         joined; /* in group->members and the ring */
	uint64_t    session, ordinal;
	int32_t     slots, used, load_x100;
	char       *hostname;
	int32_t     pid;
	int64_t     lease_mono, registered_at_us, heartbeat_at_us;
	qworker    *lnext, *lprev;   /* lease FIFO (alive) */
	qworker    *gnext, *gprev;   /* group members (alive) */
	qworker    *pknext, *pkprev; /* group's waiting workers */
	qworker    *pdnext, *pdprev; /* park deadline list */
	qctx       *parked;          /* parked Pull */
	int32_t     pull_free;       /* free slots of the parked Pull */
	int32_t     quota;           /* slots routed to it, reply pending */
	qworker    *fnext;           /* fill list (quota > 0) */
	int64_t     park_deadline;   /* mono us */
	qheap       personal;        /* sticky attempts bound to it */
	qatt       *att;             /* in-flight attempts */
	int         db_dirty, db_urgent;
	qworker    *dnext; /* dirty list */
	const char *db_state;
	qatt       *doubt;          /* in-doubt attempts, since a start */
	int64_t     doubt_deadline; /* mono us: then they go UNKNOWN */
	qworker    *xnext, *xprev;  /* doubt deadline list */
	int         on_dl;          /* on that list */
	int32_t     doubt_pid;      /* pid of the session that held them */
	char       *doubt_host;     /* and its host ("" unknown) */
	int         held;       /* its reports whose ack waits for a commit */
	int64_t     held_until; /* mono us: its report channel was blocked */
	int32_t     nresend;    /* its attempts with resend set */
};

struct qgroup {
	char            *name;
	qheap            heaps[AX_QUEUE_NCHANNELS];
	qheap            unrouted; /* consistent_hash with no live worker */
	ax_routing_state rs;
	ax_routing_ring  ring;
	qworker         *members, *parked;
	int32_t          sent_total, sent_free;
	int              cap_dirty, cap_sent;
	qgroup          *dnext;
};

enum { OP_IDLE = 0, OP_RECV, OP_HANDED, OP_SEND };

/* One REP context. op is written by the callback and by the actor thread
 * at points where the other side cannot run (see the file comment). */
struct qctx {
	ax_queue *q;
	nng_ctx   ctx;
	nng_aio  *aio;
	int       op;
	nng_msg  *req;        /* received, handed to the actor */
	qctx     *ready_next; /* hand-off list (under q->mu) */
	nng_msg  *deferred;   /* ack waiting for the results' commit */
	uint64_t  need_seq;   /* ... of results forwarded up to this */
	int64_t   def_until;  /* mono us: then dropped unanswered */
	qworker  *dworker;    /* whose report it answers (NULL: unknown) */
	qctx     *dnext;
};

struct ax_queue {
	const ax_pipeline_ctx *pctx;
	ax_actor              *self;
	int64_t aging_us, ack_timeout_us, lease_us, hb_us, retain_us;
	int64_t lease_grace_us;
	int     hand_back;
	char    addr[256];

	nng_socket sock;
	int        sock_open;
	qctx     **ctxs;
	size_t     nctx;
	size_t     nparked, ndeferred;

	/* hand-off, shared with nng callbacks */
	pthread_mutex_t  mu;
	qctx            *ready_head, *ready_tail;
	int              woken, wake_retry, closing;
	int              wake_start; /* wake once at start (reconcile) */
	ax_actor_client *client;
	nng_aio         *wake_aio;

	/* actor-thread state */
	/* node-less maps (engine/hmap.h), keys borrowed from the entries:
	 * qatt by run_id and by inst_key, qworker by id, qgroup by name */
	ax_hmap   runs, insts, workers, groups;
	qatt     *un_head, *un_tail;     /* unacked FIFO */
	qatt     *ret_head, *ret_tail;   /* retired FIFO */
	qatt     *held_head, *held_tail; /* ST_HELD, by release_mono */
	qworker  *lease_head, *lease_tail;
	qworker  *pd_head, *pd_tail; /* parked by deadline */
	qworker  *dirty;             /* workers to write */
	qgroup   *cap_dirty;
	qctx     *def_head, *def_tail;
	uint64_t  fwd_seq;   /* results forwarded (AttemptResult.queue_seq) */
	uint64_t  committed; /* ResultsCommitted watermark */
	qworker  *fill_head; /* workers with a quota: answered at the end */
	int       batching;  /* route now, answer Pulls at fill_flush() */
	uint64_t  seq, ordinal, session_ctr, qseq;
	ax_store *store;
	int64_t   db_last;
	int       reconciled;    /* the in-doubt attempts are loaded */
	int64_t   reconcile_at;  /* mono us: next try to load them */
	int64_t   db_down_until; /* mono us: no dispatch (not recordable) */
	int       fill_blocked;  /* a Pull waits for the database */
	qworker  *dl_head, *dl_tail; /* workers with in-doubt attempts */

	_Atomic int      drop_acks;
	_Atomic uint64_t st_depth[AX_QUEUE_NCHANNELS], st_dispatches,
	    st_resends, st_lease_losses, st_started, st_results, st_cancels,
	    st_workers, st_registers;
};

#define STAT(q, f, v)                                                         \
	atomic_fetch_add_explicit(&(q)->f, (v), memory_order_relaxed)

#define LIST_UNLINK(head, tail, x, nx, pv)                                    \
	do {                                                                  \
		if ((x)->pv)                                                  \
			(x)->pv->nx = (x)->nx;                                \
		else                                                          \
			(head) = (x)->nx;                                     \
		if ((x)->nx)                                                  \
			(x)->nx->pv = (x)->pv;                                \
		else                                                          \
			(tail) = (x)->pv;                                     \
		(x)->nx = (x)->pv = NULL;                                     \
	} while (0)

#define LIST_APPEND(head, tail, x, nx, pv)                                    \
	do {                                                                  \
		(x)->nx = NULL;                                               \
		(x)->pv = (tail);                                             \
		if (tail)                                                     \
			(tail)->nx = (x);                                     \
		else                                                          \
			(head) = (x);                                         \
		(tail) = (x);                                                 \
	} while (0)

/* Inserts x into a list sorted by key, walking back from the tail (items
 * arrive almost in key order, so the walk is a step or two); x goes
 * after the items with an equal key. */
#define LIST_INSERT_SORTED(head, tail, x, nx, pv, key)                        \
	do {                                                                  \
		__typeof__(x) p_ = (tail);                                    \
		while (p_ != NULL && p_->key > (x)->key)                      \
			p_ = p_->pv;                                          \
		(x)->pv = p_;                                                 \
		(x)->nx = p_ ? p_->nx : (head);                               \
		if ((x)->nx)                                                  \
			(x)->nx->pv = (x);                                    \
		else                                                          \
			(tail) = (x);                                         \
		if (p_)                                                       \
			p_->nx = (x);                                         \
		else                                                          \
			(head) = (x);                                         \
	} while (0)

/* --------------------------------------------- shared by queue_*.c */

/* Heap of attempts ordered by channel rank, aging key, arrival: init
 * once (zeroed memory then init), push, remove from whichever heap a is
 * in (no-op when in none), top, and the attempt at a position. */
void   axq_heap_init(qheap *h);
ax_err axq_heap_push(qheap *h, qatt *a);
void   axq_heap_remove(qatt *a);
qatt  *axq_heap_top(const qheap *h);
qatt  *axq_heap_at(const qheap *h, size_t i);

/* Log ids of a (borrowed from it). */
ax_log_ids axq_att_ids(const qatt *a);

/* Sends an event (type, reason, JSON payload) to the event emitter. */
void axq_emit(ax_queue *q, const char *type, const char *reason,
              const char *json);

/* The worker with id, created as a placeholder (not alive) when new;
 * NULL when out of memory. Workers live as long as the queue. */
qworker *axq_worker_get(ax_queue *q, const char *id);

/* a goes to w's in-flight list as DISPATCHED (unacked FIFO, slots);
 * unlink undoes it (whatever its state). */
void axq_att_link_worker(ax_queue *q, qatt *a, qworker *w);
void axq_att_unlink_worker(ax_queue *q, qatt *a);

/* Queues a (QUEUED) where its route or binding says, and offers it to a
 * waiting worker. a must have its rendered attempt. */
void axq_att_enqueue(ax_queue *q, qatt *a);

/* Reports a CANCELED / UNKNOWN (with reason, worker wid) and retires it;
 * retire alone takes a out of every list into the retired FIFO. */
void axq_att_cancel_now(ax_queue *q, qatt *a);
void axq_att_lost(ax_queue *q, qatt *a, const char *wid, const char *reason);
void axq_att_retire(ax_queue *q, qatt *a);

/* ------------------------------------------------ queue_reconcile.c */

/*
 * Records the dispatches batch[0..*n) to w (their heaps in from[]) before
 * they are sent. Returns 0 on a database error (nothing may be sent: the
 * attempts are back in their heaps, dispatching pauses DB_RETRY_US), else
 * 1 with *n the attempts left to send (one the database has no longer
 * waiting is retired). With no database it does nothing and returns 1.
 */
int axq_record_dispatches(ax_queue *q, qworker *w, qatt **batch, qheap **from,
                          size_t *n);

/* Loads the attempts that may run on workers since a start (retried
 * every DB_RETRY_US on failure; q->reconciled once done). */
void axq_reconcile_load(ax_queue *q);

/* w registered with r: settles the attempts it may hold. */
void axq_doubt_settle(ax_queue *q, qworker *w, const Ax__Register *r);

/* w's in-doubt deadline passed without a register: they go UNKNOWN. */
void axq_doubt_lapse(ax_queue *q, qworker *w);

/* Takes an in-doubt attempt off its holder's list (no-op when none). */
void axq_doubt_unlink(qatt *a);

#endif /* AX_QUEUE_INTERNAL_H */
