/*
 * queue_internal.h - the queue service's state, shared by its files
 * (private to actors/queue/; the public API is actors/queue_service.h).
 *
 * queue.c owns the actor (callbacks, timers, start) and the helpers that
 * send to other actors; queue_endpoint.c the worker endpoint (REP
 * contexts, hand-off, requests, Pull long poll, deferred acks);
 * queue_workers.c workers, groups and leases; queue_dispatch.c attempts,
 * the heaps and dispatch; queue_reconcile.c records dispatches and
 * settles, after a start, the attempts a worker may hold; queue_stats.c
 * counts and publishes the queue's metrics; queue_preempt.c and
 * queue_calendar.c stop running work (for a higher tier, for a capacity
 * calendar that preempts). The overview
 * and the invariants are at the top of queue.c. Everything here runs on
 * the queue actor's thread only, except the hand-off fields of ax_queue
 * (under mu).
 */
#ifndef AX_QUEUE_INTERNAL_H
#define AX_QUEUE_INTERNAL_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "calendar.h"
#include "group_spec.h"
#include "heap.h"
#include "hist.h"
#include "hmap.h"
#include "list.h"
#include "preempt.h"
#include "log.h"
#include "queue_service.h"
#include "resources.h"
#include "routing.h"
#include "store.h"
#include "worker.pb-c.h"

#define DISPATCH_MAX 256                 /* dispatches per Pull reply */
#define ITEM_WAKE    (AX_ITEM_USER + 50) /* empty: "drain the hand-off" */
#define DB_RETRY_US  AX_USEC_PER_SEC     /* see axq_record_dispatches */

/* Scheduling latency kinds (DESIGN.md 3): decision = dispatched - due,
 * environment ready = started - dispatched, end to end = started - due. */
enum { AXQ_LAT_DECISION = 0, AXQ_LAT_ENV_READY, AXQ_LAT_E2E, AXQ_LAT_KINDS };

#define AXQ_STATS_US AX_USEC_PER_SEC /* component_stats period */
#define AXQ_PRE_RING 16              /* preemptions remembered per worker */

typedef struct qatt    qatt;
typedef struct qworker qworker;
typedef struct qgroup  qgroup;
typedef struct qctx    qctx;
typedef struct qcal    qcal;

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
	int                        ch;          /* channel index */
	int                        rank;        /* 1 for P0 */
	double                     key;         /* ax_aging_key at enqueue */
	int64_t                    queued_mono; /* mono us of the enqueue */
	uint64_t                   seq;         /* arrival order (ties) */
	int32_t                    slots;       /* >= 1 */
	qgroup                    *group;
	const ax_routing_ops      *route;
	qheap                     *heap;         /* while QUEUED */
	ax_heap_node               hn;           /* its node in heap */
	qworker                   *worker;       /* DISPATCHED / RUNNING */
	ax_list_node               wn;           /* worker->att (in flight) */
	ax_list_node               un;           /* q->unacked (DISPATCHED) */
	ax_list_node               rn;           /* q->retired (DONE) */
	ax_list_node               heln;         /* q->held (ST_HELD) */
	int64_t                    release_mono; /* ST_HELD: mono us */
	int64_t                    start_mono;   /* due, mono us (or 0) */
	int64_t                    ack_deadline; /* mono us */
	int64_t                    retire_at;    /* mono us */
	int64_t                    dispatched_at_us, started_at_us; /* UTC */
	int                        kill; /* cancel requested */
	char                       kill_reason[32];
	int64_t  kill_grace_ms; /* SIGTERM -> SIGKILL (0: the attempt's own) */
	int32_t  cpu_milli;     /* RUNNING: its live use, last heartbeat */
	int64_t  rss_kb;
	int      doubt; /* ST_DOUBT: 1 DISPATCHED, 2 RUNNING in the database */
	qworker *bound; /* dispatch only to this worker until it acks */
	int64_t  verify; /* mono us; RUNNING, not listed at register: UNKNOWN
	                    at a heartbeat after this that does not list it,
	                    unless its result came (0: none) */
	ax_list_node xn; /* holder->doubt (ST_DOUBT) */
	qworker     *holder; /* ST_DOUBT: the worker that may hold it */
	int resend;      /* DISPATCHED, not acknowledged in time: goes again
	                    to its worker in that worker's next Pull reply */
	int tier;        /* 0 = P0 .. 3 = P3 (AttemptRendered.impact) */
	int preemptible; /* the task's flag (queue_preempt.c) */
	int prefetched;  /* sent beyond its worker's free slots, not started
	                    (fill_prefetch); cleared by a start or unlink */
	int withdrawing; /* prefetched, asked back (axq_on_heartbeat) */
};

/* One worker id: a live session, or a placeholder pinned attempts wait
 * for. Owned by q->workers; never freed before the queue. */
struct qworker {
	char    *id;
	qgroup  *group; /* last group; NULL until it registers */
	int      alive, draining;
	int      joined; /* in group->members and the ring */
	uint64_t session, ordinal;
	int32_t  slots, used, load_x100;
	/* the live water level from its last heartbeat (has_usage 0: none
	 * yet): the host's CPUs and memory, its attempts' use summed */
	int          has_usage;
	int32_t      cpus, tasks_cpu_milli;
	int64_t      mem_total_kb, mem_available_kb, tasks_rss_kb;
	int32_t      reserve_p0; /* of slots, kept for P0 (Register) */
	int64_t      cpu_milli, memory_bytes; /* offered (Register) */
	int64_t      used_cpu, used_mem;      /* declared by its attempts */
	int          refit;  /* cpu or memory freed: look at its Pull again */
	ax_res_set   res;    /* named resources offered (Register) */
	ax_label    *labels; /* worker.labels (Register; malloc'd) */
	size_t       nlabels;
	char        *hostname;
	int32_t      pid;
	int64_t      lease_mono, registered_at_us, heartbeat_at_us;
	ax_list_node ln;            /* q->leases (alive) */
	ax_list_node gn;            /* group->members (joined) */
	ax_list_node pkn;           /* group->parked (waiting) */
	ax_list_node pdn;           /* q->park_dl (parked) */
	qctx        *parked;        /* parked Pull */
	int32_t      pull_free;     /* free slots of the parked Pull */
	int32_t      quota;         /* slots routed to it, reply pending */
	ax_list_node fn;            /* q->fill (quota > 0) */
	int64_t      park_deadline; /* mono us */
	qheap        personal;      /* sticky attempts bound to it */
	ax_list      att;           /* in-flight attempts (qatt.wn) */
	int          db_dirty, db_urgent;
	ax_list_node dn; /* q->dirty (db_dirty) */
	const char  *db_state;
	ax_list      doubt; /* in-doubt attempts since a start (qatt.xn) */
	int64_t      doubt_deadline; /* mono us: then they go UNKNOWN */
	ax_list_node dln;            /* q->doubt_dl (on_dl) */
	int          on_dl;          /* on that list */
	int32_t      doubt_pid;      /* pid of the session that held them */
	char        *doubt_host;     /* and its host ("" unknown) */
	int          held;       /* its reports whose ack waits for a commit */
	int64_t      held_until; /* mono us: its report channel was blocked */
	int32_t      nresend;    /* its attempts with resend set */
	int          start_after; /* holds a dispatch for its instant */
	int32_t      prefetch;    /* held dispatches it takes beyond its free
	                             slots (Register.prefetch; 0 without
	                             start_after) */
	int64_t pre_at[AXQ_PRE_RING]; /* its last preemptions, mono us */
	int     pre_i;                /* next slot of pre_at */
};

struct qgroup {
	char            *name;
	qheap            heaps[AX_QUEUE_NCHANNELS];
	qheap            unrouted; /* consistent_hash with no live worker */
	ax_routing_state rs;
	ax_routing_ring  ring;
	ax_list          members; /* joined workers (qworker.gn) */
	ax_list          parked;  /* waiting workers (qworker.pkn) */
	int32_t          sent_total, sent_free, sent_p0;
	int64_t          sent_cpu, sent_mem;
	ax_res_set       sent_res;    /* named resources last sent */
	char            *sent_labels; /* labels text last sent (malloc'd) */
	int              cap_dirty, cap_sent;
	ax_list_node     cn; /* q->cap_dirty (cap_dirty) */
	qcal *cal;   /* its capacity calendar that preempts (name match,
	                set by axq_calendar_scan); NULL: none */
	int cal_cut; /* a Pull got fewer slots for cal: refill when it
	                gives more */
	/* last published (queue_stats.c): depth per channel, slots */
	int64_t pub_depth[AX_QUEUE_NCHANNELS], pub_used, pub_free;
	int     pub_ok; /* its rows were written once since the start */
};

enum { OP_IDLE = 0, OP_RECV, OP_HANDED, OP_SEND };

/* One REP context. op is written by the callback and by the actor thread
 * at points where the other side cannot run (see the top of
 * queue_endpoint.c). */
struct qctx {
	ax_queue    *q;
	nng_ctx      ctx;
	nng_aio     *aio;
	int          op;
	nng_msg     *req;       /* received, handed to the actor */
	ax_list_node rn;        /* q->ready: hand-off list (under q->mu) */
	nng_msg     *deferred;  /* ack waiting for the results' commit */
	uint64_t     need_seq;  /* ... of results forwarded up to this */
	int64_t      def_until; /* mono us: then dropped unanswered */
	qworker     *dworker;   /* whose report it answers (NULL: unknown) */
	ax_list_node dn;        /* q->deferred (deferred != NULL) */
};

/* One worker's part of a fill: the attempts picked for its parked Pull
 * (the heaps they came from in from[]), recorded together with the other
 * workers' parts of the same batch, then sent as its reply. */
typedef struct qfill {
	qworker *w;
	size_t   n;
	qatt    *batch[DISPATCH_MAX];
	qheap   *from[DISPATCH_MAX];
} qfill;

struct ax_queue {
	const ax_pipeline_ctx *pctx;
	ax_actor              *self;
	int64_t aging_us, ack_timeout_us, lease_us, hb_us, retain_us;
	int64_t lease_grace_us;
	int64_t dispatch_ahead_us; /* queue.dispatch_ahead */
	int64_t prefetch_wait_us;  /* queue.prefetch_wait */
	int     hand_back;
	char    addr[256];

	nng_socket sock;
	int        sock_open;
	qctx     **ctxs;
	size_t     nctx;
	size_t     nparked, ndeferred;

	/* hand-off, shared with nng callbacks */
	pthread_mutex_t  mu;
	ax_list          ready; /* handed contexts (qctx.rn) */
	int              woken, wake_retry, closing;
	int              wake_start; /* wake once at start (reconcile) */
	ax_actor_client *client;
	nng_aio         *wake_aio;

	/* actor-thread state */
	/* node-less maps (engine/hmap.h), keys borrowed from the entries:
	 * qatt by run_id and by inst_key, qworker by id, qgroup by name */
	ax_hmap   runs, insts, workers, groups;
	ax_list   unacked;   /* DISPATCHED, by ack_deadline (FIFO) */
	ax_list   retired;   /* DONE, by retire_at (FIFO) */
	ax_list   held;      /* ST_HELD, sorted by release_mono */
	ax_list   leases;    /* live workers, by lease_mono (FIFO) */
	ax_list   park_dl;   /* parked workers, sorted by park_deadline */
	ax_list   dirty;     /* workers to write (newest first) */
	ax_list   cap_dirty; /* groups whose capacity changed */
	ax_list   deferred;  /* deferred acks (FIFO) */
	uint64_t  fwd_seq;   /* results forwarded (AttemptResult.queue_seq) */
	uint64_t  committed; /* durable ResultsCommitted watermark: acked */
	uint64_t  relaxed;   /* committed, not yet known durable */
	int64_t   relaxed_since; /* mono us: relaxed first passed committed */
	ax_list   fill;     /* workers with a quota: answered at the end */
	int       batching; /* route now, answer Pulls at fill_flush() */
	uint64_t  seq, ordinal, session_ctr, qseq;
	ax_store *store;
	int64_t   db_last;
	int       reconciled;    /* the in-doubt attempts are loaded */
	int64_t   reconcile_at;  /* mono us: next try to load them */
	int64_t   db_down_until; /* mono us: no dispatch (not recordable) */
	int       fill_blocked;  /* a Pull waits for the database */
	int64_t   early_retry;   /* mono us: fill the Pulls again (0: no) */
	ax_list   doubt_dl; /* workers with in-doubt attempts, by deadline */

	/* preemption (queue_preempt.c) */
	int               pre_on; /* preemption.enabled */
	ax_preempt_policy pre_pol;
	int64_t           pre_window_us; /* preemption.window */
	int64_t           pre_grace_ms;  /* preemption.grace */
	int64_t           pre_next;      /* mono us: next scan */
	ax_strmap        *pre_hist; /* instance id -> qpre, in the window */
	ax_list           pre_fifo; /* those qpre, oldest first */

	/* capacity calendars that preempt (queue_calendar.c) */
	qcal   *cals; /* owned; ncal of them */
	size_t  ncal;
	int     cal_reload; /* read capacity_calendars at the next scan */
	int64_t cal_next;   /* mono us: next scan */

	/* scheduling latency per kind (AXQ_LAT_*) and channel, observed at
	 * an attempt's first STARTED; what was last published of it and
	 * the next publication (queue_stats.c) */
	ax_hist lat[AXQ_LAT_KINDS][AX_QUEUE_NCHANNELS];
	ax_hist lat_pub[AXQ_LAT_KINDS][AX_QUEUE_NCHANNELS];
	int64_t stats_due;     /* mono us */
	int     stats_written; /* every row written once since the start */
	int64_t pub_lease_losses;

	_Atomic int      drop_acks;
	_Atomic uint64_t st_depth[AX_QUEUE_NCHANNELS], st_dispatches,
	    st_resends, st_lease_losses, st_started, st_results, st_cancels,
	    st_workers, st_registers, st_preemptions;
};

#define STAT(q, f, v)                                                         \
	atomic_fetch_add_explicit(&(q)->f, (v), memory_order_relaxed)

/* The entry of a list node (NULL for NULL): QATT(n, un), QWORKER(n, ln). */
#define QATT(n, m)    AX_LIST_ENTRY((n), qatt, m)
#define QWORKER(n, m) AX_LIST_ENTRY((n), qworker, m)
#define QGROUP(n, m)  AX_LIST_ENTRY((n), qgroup, m)
#define QCTX(n, m)    AX_LIST_ENTRY((n), qctx, m)

/* ------------------------------------------------------ queue_dispatch.c */

/* Heap of attempts ordered by channel rank, aging key, arrival: init
 * once (zeroed memory then init), push, remove from whichever heap a is
 * in (no-op when in none), top, and the attempt at a position. */
void   axq_heap_init(qheap *h);
ax_err axq_heap_push(qheap *h, qatt *a);
void   axq_heap_remove(qatt *a);
qatt  *axq_heap_top(const qheap *h);
qatt  *axq_heap_at(const qheap *h, size_t i);

/* a goes to w's in-flight list as DISPATCHED (unacked FIFO, slots);
 * unlink undoes it (whatever its state). */
/* 1 for an attempt sent to a worker to hold for its instant, not started
 * (no Started yet): no slot to stop, work to take back once the worker
 * acknowledged it (withdraw_due). */
int  axq_att_unstarted(const qatt *a);
void axq_att_link_worker(ax_queue *q, qatt *a, qworker *w);
void axq_att_unlink_worker(ax_queue *q, qatt *a);

/* Queues a (QUEUED) where its route or binding says, and offers it to a
 * waiting worker. a must have its rendered attempt. */
void axq_att_enqueue(ax_queue *q, qatt *a);

/* Reports a CANCELED and retires it; retire alone takes a out of every
 * list into the retired FIFO. */
void axq_att_cancel_now(ax_queue *q, qatt *a);
void axq_att_retire(ax_queue *q, qatt *a);

/* Frees an attempt out of every list and map (the retired FIFO's end, or
 * the queue's fini). */
void axq_att_free(qatt *a);

/* Back to the queue: a dispatch known never to have run (see "Ownership
 * of a dispatch" in queue_dispatch.c); canceled instead when a kill is
 * pending. */
void axq_att_requeue(ax_queue *q, qatt *a);

/* AttemptRendered (takes cmd) and CancelInstance from the pipeline. */
void axq_on_attempt_rendered(ax_queue *q, Ax__Command *cmd);
void axq_on_cancel(ax_queue *q, const Ax__CancelInstance *ci);

/* 1 when a dispatch may leave now: with a database, only once the
 * in-doubt attempts are loaded and while dispatches can be recorded. */
int axq_dispatch_open(const ax_queue *q);

/* Answers w's parked Pull with the best work for it plus its resends;
 * returns the dispatches sent (0: the Pull stays parked). */
size_t axq_try_fill(ax_queue *q, qworker *w);
void   axq_refit(ax_queue *q, qworker *w);

/* Ends a batch (q->batching): answers the Pulls given a quota in it. */
void axq_fill_flush(ax_queue *q);

/* Timers (now: mono us): held attempts whose instant came are queued;
 * dispatches whose ack timed out go again to their worker; retired
 * attempts past their retention are freed. */
void axq_held_release(ax_queue *q, int64_t now);
void axq_ack_timeouts(ax_queue *q, int64_t now);
void axq_retired_free(ax_queue *q, int64_t now);

/* ---------------------------------------------------------------- queue.c */

/* Log ids of a (borrowed from it). */
ax_log_ids axq_att_ids(const qatt *a);

/* Sends an event (type, reason, JSON payload) to the event emitter. */
void axq_emit(ax_queue *q, const char *type, const char *reason,
              const char *json);

/* Sends cmd to dest without blocking; a missing destination (a
 * composition without it) is not an error of the queue. */
void axq_send_cmd(ax_queue *q, const char *dest, Ax__Command *cmd);

/* Forwards what happened to attempt run_id (a may be NULL: unknown
 * run_id) to result_handler as AttemptResult with the next queue_seq. */
void axq_forward(ax_queue *q, const qatt *a, const char *run_id, int status,
                 const char *worker, const Ax__Result *r, int64_t started_at,
                 const char *reason);

/* ------------------------------------------------------ queue_endpoint.c */

/* Binds the REP socket on q->addr and opens the first contexts. */
ax_err axq_endpoint_listen(ax_queue *q);

/* Drains the hand-off list, handles every request on it and opens
 * contexts while parked and deferred ones leave too few receiving. */
void axq_drain_requests(ax_queue *q);

/* Under q->mu: makes sure the actor will drain the hand-off list;
 * wake_cb is the retry aio's callback (arg: q). */
void axq_wake_locked(ax_queue *q);
void axq_wake_cb(void *arg);

/* c receives its next request (the current one is dropped unanswered). */
void axq_ctx_recv(qctx *c);

/* Replies on c (the request is answered): a packed message, an Ack of
 * seq, an Error (code, text). */
void axq_reply_now(ax_queue *q, qctx *c, const Ax__QueueMessage *m);
void axq_reply_ack(ax_queue *q, qctx *c, uint64_t seq);
void axq_reply_error(ax_queue *q, qctx *c, uint64_t seq, const char *code,
                     const char *text);

/* Sends the deferred acks whose results are committed; drops those whose
 * time ran out (the worker sends the same results again). */
void axq_deferred_flush(ax_queue *q);

/* The result handler's ResultsCommitted: up to seq, committed durably or
 * (relaxed) without waiting for the WAL flush. */
void axq_results_committed(ax_queue *q, uint64_t seq, int relaxed);

/* A durable commit of the queue ended that began when the relaxed
 * watermark was seq: results up to seq are on disk with it. */
void axq_results_durable(ax_queue *q, uint64_t seq);

/* Flushes the WAL for results committed relaxed that no durable commit
 * of the queue took to disk within RESULTS_FLUSH_WAIT_US; returns when
 * to look again (mono us; INT64_MAX: nothing waits). */
int64_t axq_results_flush(ax_queue *q, int64_t now);

/* Takes w's parked Pull off the parking lists (no-op when none);
 * answer_empty answers it with no dispatch (reply_to_seq seq). */
void axq_unpark(ax_queue *q, qworker *w);
void axq_park_answer_empty(ax_queue *q, qworker *w, uint64_t seq);

/* ------------------------------------------------------- queue_workers.c */

/* The worker with id, created as a placeholder (not alive) when new;
 * NULL when out of memory. Workers live as long as the queue. */
qworker *axq_worker_get(ax_queue *q, const char *id);

/* Reports a UNKNOWN (reason; worker wid may hold it) and retires it. */
void axq_att_lost(ax_queue *q, qatt *a, const char *wid, const char *reason);

/* The group with name, created when new; NULL (ax_err set) when out of
 * memory. Groups live as long as the queue. */
qgroup *axq_group_get(ax_queue *q, const char *name);

/* g's capacity changed (NULL: none); flush sends WorkerCapacity for each
 * group marked in this batch whose totals changed. */
void axq_cap_mark(ax_queue *q, qgroup *g);
void axq_cap_flush(ax_queue *q);

/* Writes the dirty worker rows (now: mono us): at once after a state
 * change, else at most once per heartbeat interval. */
void axq_db_flush(ax_queue *q, int64_t now);

/* w's lease lapsed: its attempts go UNKNOWN, worker.lost is emitted. */
void axq_worker_lost(ax_queue *q, qworker *w);

/* A request of w's live session: its lease is extended. */
void axq_lease_touch(ax_queue *q, qworker *w);

/* w acknowledges the dispatch of run_id. */
void axq_ack_dispatch(ax_queue *q, qworker *w, const char *run_id);

/* Worker requests: Register, Heartbeat and Deregister answer on c; w is
 * the live session's worker. Started and Result are forwarded (w NULL:
 * not a valid session; wid is the id the message names). */
void axq_on_register(ax_queue *q, qctx *c, const Ax__WorkerMessage *m);
void axq_on_heartbeat(ax_queue *q, qctx *c, qworker *w,
                      const Ax__WorkerMessage *m);
void axq_on_deregister(ax_queue *q, qctx *c, qworker *w,
                       const Ax__WorkerMessage *m);
void axq_on_started(ax_queue *q, qworker *w, const char *wid,
                    const Ax__Started *s);
void axq_on_result(ax_queue *q, qworker *w, const char *wid,
                   const Ax__Result *r);
/* w (NULL: not a valid session) dropped run_id, not started, as the
 * queue asked (HeartbeatReply.withdraw_run_ids): queued again. */
void axq_on_withdrawn(ax_queue *q, qworker *w, const char *run_id);

/* -------------------------------------------------------- queue_preempt.c */

/* Reads the preemption.* keys (init) and frees the history (fini, safe
 * on zeroed memory). */
void axq_preempt_init(ax_queue *q);
void axq_preempt_fini(ax_queue *q);

/* The tier of AttemptRendered.impact ("P0".."P3"; else 2, P2). */
int axq_tier_of(const char *impact);

/* Stops running preemptible attempts for waiting ones of a higher tier
 * in groups without a free slot (now: mono us); returns the next instant
 * to call it (INT64_MAX: at the next event). Timers only. */
int64_t axq_preempt_scan(ax_queue *q, int64_t now);

/* Marks v (running) to be stopped as a preemption victim: kill with
 * reason PREEMPTED and preemption.grace, counted in its worker's
 * preemptions of the minute and the preemption window (now: mono us).
 * The caller emits the decision's event. */
void axq_preempt_mark(ax_queue *q, qatt *v, int64_t now);

/* ------------------------------------------------------- queue_calendar.c */

/* Asks for capacity_calendars at the first scan (init; no-op without a
 * database); fini frees the calendars (safe on zeroed memory). */
void axq_calendar_init(ax_queue *q);
void axq_calendar_fini(ax_queue *q);

/* ControlOp "calendar": the table is read again at the next scan. */
void axq_calendar_reload(ax_queue *q);

/* Stops running preemptible attempts beyond the slots of the capacity
 * calendars' windows in force that preempt, per group and pool (now:
 * mono us); returns the next instant to call it (INT64_MAX: none
 * loaded). Timers only. */
int64_t axq_calendar_scan(ax_queue *q, int64_t now);

/* How many of free_ slots the workers of g may still take: fewer when a
 * preempting calendar window in force gives g fewer slots than its live
 * workers hold (dispatch gate); free_ itself otherwise. */
int32_t axq_calendar_room(const qgroup *g, int32_t free_);
/* 1 while a preempting calendar window is in force on g (NULL: 0). */
int axq_calendar_in_force(const qgroup *g);

/* ---------------------------------------------------------- queue_stats.c */

/* a's first STARTED (started_at: the worker's UTC us): its three
 * latencies go into q->lat of its channel. */
void axq_lat_observe(ax_queue *q, const qatt *a, int64_t started_at);

/* Publishes the queue's metrics in component_stats when their period
 * came (now: mono us); returns the next instant to call it (mono us),
 * INT64_MAX when there is no database. */
int64_t axq_stats_publish(ax_queue *q, int64_t now);

/* ------------------------------------------------ queue_reconcile.c */

/*
 * Records the dispatches of the k fills f[0..k) (each f[i].batch[0..n)
 * to f[i].w, their heaps in from[]) before they are sent, in one
 * statement and transaction for all of them (at most AX_STORE_BATCH_MAX
 * rows): the Pulls a batch answers wait for one commit, not one each.
 * Returns 0 on a database error (nothing may be sent: the attempts are
 * back in their heaps, every n is 0, dispatching pauses DB_RETRY_US),
 * else 1 with each n the attempts left to send (one the database has no
 * longer waiting is retired). With no database it does nothing and
 * returns 1.
 */
int axq_record_dispatches(ax_queue *q, qfill *f, size_t k);

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
