/*
 * queue_harness.h - the queue service (actors/queue/) in a test process,
 * for tests/integration/test_queue*.c: real ax-worker processes (path in
 * $AX_WORKER, fork+exec'd) and workers played by the test.
 *
 * The queue actor runs in the test process with two capture actors named
 * result_handler and resource_detector (what reaches them is recorded in
 * C); a client named instance_generator sends AttemptRendered and
 * CancelInstance (send_attempt, send_cancel). Workers talk to the queue
 * over an ipc:// socket in a temp directory (addr). The reconciliation
 * and ownership tests give the queue a throwaway PostgreSQL (db_start:
 * q_dsn) and play the workers themselves over the same socket (peer_*:
 * protocol peers, so what each one reports is exact).
 *
 * The knobs (q_*, w_*) are read by the next start_queue / worker_start; a
 * test that changes them puts them back. One test at a time per process
 * (criterion runs each test in its own process).
 */
#ifndef AX_QUEUE_HARNESS_H
#define AX_QUEUE_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

#include "actor.h"
#include "config.h"
#include "pg_harness.h"
#include "pipeline.h"
#include "queue_service.h"
#include "store.h"
#include "worker.pb-c.h"

#define MAXREC  65536
#define MAXWORK 8

typedef struct rec {
	char    run_id[40];
	int     status;
	char    worker[64];
	char    reason[40];
	char    error[200];
	int64_t dispatched, started, ended;
	int64_t seen_mono;
} rec;

typedef struct cap {
	pthread_mutex_t mu;
	rec            *r;
	size_t          n;
	int             capacity_msgs;
	int32_t         last_total, last_free, last_p0;
	int64_t         last_cpu, last_mem, last_gpu, last_ssd;
} cap;

typedef struct att {
	const char *run_id, *type, *command, *channel, *group, *routing, *key,
	    *pinned;
	int     priority;
	int64_t instance_id;
	int64_t due_in_us; /* due_at = now + due_in_us */
	int64_t due_at_us; /* or this instant (UTC us) when not 0 */
	int32_t cpu_milli; /* declared (the task's resources.cpu) */
} att;

/* A worker played by the test: one REQ socket, one request at a time. */
typedef struct peer {
	nng_socket  s;
	const char *id, *host;
	int32_t     pid;
	uint64_t    session, seq;
	char        got[64][40];   /* run_ids dispatched to it, in order */
	int64_t     got_mono[64];  /* when each came, mono us */
	int64_t     got_after[64]; /* its Dispatch.start_after_us */
	size_t      ngot;
	int         no_ack;      /* receives dispatches, never acknowledges */
	int         start_after; /* Register.start_after */
	int32_t     slots;    /* Register.slots and Pull.free_slots (0: 8) */
	int32_t     prefetch; /* Register.prefetch */
} peer;

#define SUCCESS AX__ATTEMPT_STATUS__ATTEMPT_SUCCESS
#define STARTED AX__ATTEMPT_STATUS__ATTEMPT_STARTED
#define FAILED  AX__ATTEMPT_STATUS__ATTEMPT_FAILED
#define CANCEL  AX__ATTEMPT_STATUS__ATTEMPT_CANCELED
#define UNKNOWN AX__ATTEMPT_STATUS__ATTEMPT_UNKNOWN

/* What the capture actors received. */
extern cap              C;
extern ax_actor_system *sys;
extern ax_queue        *Q;
extern ax_config       *cfg;
extern ax_pipeline_ctx  pctx;
extern ax_actor_client *pre;
extern char             dir[256], addr[300];
extern pid_t            wpid[MAXWORK];
extern char             wname[MAXWORK][32];
/* The stand-in result_handler confirms what it received as committed, as
 * the result handler does in axd (0: it holds confirmations back). */
extern _Atomic int confirm_on;
/* ... as committed without waiting for the WAL flush (ResultsCommitted
 * relaxed, as the result handler sends it), when set. */
extern _Atomic int confirm_relaxed;
/* Lease of the queue and heartbeat of the workers; queue.ack_timeout;
 * the queue's database ("" without db_start). */
extern const char *q_lease, *w_heartbeat, *q_ack_timeout, *q_dsn;
/* queue.dispatch_ahead and queue.prefetch_wait (NULL: the defaults) */
extern const char *q_dispatch_ahead, *q_prefetch_wait;
/* worker.reserve_p0, worker.cpu_milli ("0": the machine's) and
 * worker.resources ("": none) of the workers started next */
extern const char *w_reserve_p0, *w_cpu_milli, *w_resources;
/* The queue's database after db_start. */
extern ax_test_pg *pg;
extern ax_store   *db;

/* The queue with its capture actors; aging: scheduler.aging_interval,
 * hand_back: queue.drain_hand_back. stop_all stops it, kills the
 * workers and removes dir. */
void start_queue(const char *aging, const char *hand_back);
void stop_all(void);
/* Starts ax-worker slot i as id with group and slots. */
void worker_start(int i, const char *id, const char *group, int slots);
/* Waits until the queue counts n live workers. */
void wait_workers(uint64_t n);
void send_attempt(const att *t);
void send_cancel(const char *run_id);
/* Waits for a record (run_id, status); copies it to out (may be NULL). */
int    wait_rec(const char *run_id, int status, int64_t timeout_ms, rec *out);
size_t count_rec(const char *run_id, int status);
/* Index of run_id's STARTED among all STARTED records, or -1. */
int start_index(const char *run_id);

/* A fresh migrated database for the queue (q_dsn); db_stop removes it. */
void db_start(void);
void db_stop(void);
void db_exec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void peer_open(peer *p, const char *id, const char *host, int32_t pid);
/* Sends m (worker id, session and seq filled in); returns the reply. */
Ax__QueueMessage *peer_call(peer *p, Ax__WorkerMessage *m);
void              peer_register(peer *p, char **running, size_t n);
/* One Pull of free slots (the queue holds it up to 100 ms), acknowledging
 * what comes (unless no_ack); returns the number of dispatches. */
size_t peer_pull1(peer *p, int32_t free_slots);
/* Pulls for about ms milliseconds, acknowledging what comes (unless
 * no_ack). */
void peer_pull(peer *p, int ms);
void peer_heartbeat(peer *p, char **running, size_t n);
/* How many times run_id was dispatched to p. */
size_t peer_got(const peer *p, const char *run_id);

#endif /* AX_QUEUE_HARNESS_H */
