/*
 * dependency_internal.h - the dependency detector's state, shared by its
 * files (private to actors/dependency/; the public API is
 * actors/dependency_detector.h, which also says what the actor receives
 * and sends).
 *
 * Files, by concept:
 *  - detector.c: the actor (its definition table: handlers, tick, start,
 *    stop) and the batch: what one batch of commands writes in ONE
 *    transaction, and what it sends after.
 *  - graph.c: the graph of a DAG version, the per-run counters of unmet
 *    upstreams, the release of downstream instances, and the DAG-to-DAG
 *    edges (depends_on_dags waits).
 *  - run_life.c: runs from due events, run states, finish, drop,
 *    run-level concurrency (max_active_runs, overlap policy, supersede,
 *    serial backfill), plans to the instance generator.
 *  - overlap.c (overlap.h): the overlap decision itself, a pure function
 *    run_life.c applies.
 *  - rebuild.c: runs rebuilt from PostgreSQL at start (and takeover) and
 *    re-read after a control op.
 *  - control.c: the clear / mark / backfill commands the detector applies.
 *
 * State (memory; PostgreSQL is the truth, rebuilt from it at start):
 *  - vers: DAG version id -> dver, the graph of one version computed once
 *    (shards and instance offsets per task, downstream lists in CSR form,
 *    the initial unmet count of each task, its try budget). A dver holds
 *    a registry reference, so the version outlives DAG changes while runs
 *    use it; it is freed with the last run in memory that uses it, so a
 *    million DAGs firing now and then do not pin a million versions.
 *  - runs: dag_run id -> drun; a run is in memory while it is held or
 *    active, and dropped when it finishes.
 *  - dqs: DAG name -> dq: the DAG's active runs (a list, oldest first),
 *    its runs held by concurrency (by logical date) and its serial
 *    backfill queue.
 *  - waiters: upstream DAG name -> the runs waiting for it
 *    (depends_on_dags).
 *
 * Counters: unmet[t] = upstream instances of task t not in SUCCESS; an
 * instance is WAIT (not released), SENT (released or in flight), OK or
 * FAIL. A run with no SENT instance left is finished.
 *
 * Writes: the handlers of a batch collect its run changes, reason
 * updates, supersedes and events, written in ONE transaction at its end;
 * RunCompleted (to itself) leaves only after that commit.
 *
 * Threads: everything here runs on the detector's actor thread only.
 */
#ifndef AX_DEPENDENCY_INTERNAL_H
#define AX_DEPENDENCY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dag_registry.h"
#include "dependency_detector.h"
#include "flow_util.h"
#include "hmap.h"
#include "list.h"
#include "store.h"
#include "store_deps.h"
#include "tz.h"

#define COMP AX_A_DEPENDENCY_DETECTOR

#define DD_TRACE_LEN 33 /* a trace id (32 hex digits) and its NUL */
/* How long the ids the start-up rebuild read are kept (dd.rebuilt): far
 * longer than a Due waits in the detector's inbox. */
#define DD_REBUILT_KEEP_US (10 * 60 * AX_USEC_PER_SEC)

enum { I_WAIT = 0, I_SENT, I_OK, I_FAIL };
enum { R_NEW = 0, R_HELD_DEP, R_HELD_CONC, R_ACTIVE };
enum { M_RESTART = 0, M_RELOAD, M_BACKFILL_SERIAL, M_BACKFILL_PARALLEL };

/* The graph of one DAG version. */
typedef struct dver {
	ax_dag_entry *e; /* reference held */
	size_t        ntask, ninst;
	int32_t      *shards; /* per task, >= 1 */
	size_t       *off;    /* per task: index of its shard 0 */
	size_t       *doff;   /* ntask + 1: downstreams of t are */
	size_t       *down;   /*   down[doff[t] .. doff[t+1]) */
	int32_t      *unmet0; /* per task: upstream instances */
	int32_t      *tries;  /* per task: 1 + retries */
	size_t        refs;   /* runs in memory using it */
	char          key[24];
} dver;

typedef struct dq   dq;
typedef struct drun drun;

struct drun {
	int64_t  id;
	char     key[24];
	dver    *v;
	dq      *q;
	int64_t  logical_us, due_us;
	int64_t  iv_start_us, iv_end_us; /* data interval (deadlines) */
	char     trace[DD_TRACE_LEN];
	int      phase;     /* R_* */
	int      backfill;  /* 0, 1 serial, 2 parallel */
	int      due_gated; /* its TIMER_GATE fired: judge it now */
	uint8_t *dep_met;   /* per depends_on_dags entry */
	size_t   ndep_wait;
	int32_t *unmet; /* per task */
	uint8_t *ist;   /* per instance: I_* */
	int64_t *iid;   /* per instance: task_instances.id, 0 unknown */
	size_t   n_sent, n_ok, n_fail;
	/* on one list of q at most: active (R_ACTIVE), held (R_HELD_CONC,
	 * not a serial backfill) or bf (R_HELD_CONC, serial backfill) */
	ax_list_node qn;
};

/* The runs of one DAG (all its versions) in memory. The lists link
 * drun.qn and own nothing (d->runs owns the runs). */
struct dq {
	char   *dag;
	ax_list active; /* active runs, oldest start first */
	size_t  nactive;
	ax_list held; /* held by concurrency, by logical date */
	size_t  nheld;
	ax_list bf; /* serial backfill queue, by logical date */
	size_t  nbf;
	drun   *bf_run; /* the serial backfill run now active */
};

typedef struct rvec {
	drun **v;
	size_t n, cap;
} rvec;

/* An event written in the batch's transaction. It owns every string it
 * carries (see "the batch" in dd): e.ev points only into this struct
 * and at string literals. */
typedef struct pev {
	ax_flow_event   e;
	Ax__InstanceRef ref;
	char            dag[256];
	char            task[256];
	char            payload[192];
	char            trace[DD_TRACE_LEN];
} pev;

typedef struct done {
	char    dag[256];
	int64_t run, logical_us;
	int     ok;
} done;

typedef struct dd_packed {
	uint8_t *data;
	size_t   len;
} dd_packed;

typedef struct dd {
	const ax_pipeline_ctx *ctx;
	ax_actor              *self;
	ax_store              *store;
	ax_strmap             *vers, *runs, *dqs, *waiters;
	int                    started;
	/*
	 * The runs the start-up rebuild read (run id -> non-NULL), kept for
	 * DD_REBUILT_KEEP_US: a Due for one of them is a replay, even when
	 * the run has ended (and left d->runs) since. Without it, the Due
	 * the time detector sent just before the rebuild read the run would
	 * start a run that the rebuild had discarded or superseded.
	 */
	ax_strmap                    *rebuilt;
	int64_t                       rebuilt_until_us; /* monotonic */
	ax_tz_cache                  *tzc; /* deadlines' zones; lazily */
	ax_dependency_detector_stats *stats, own;
	/*
	 * The batch: what one batch of commands writes in flush(). It owns
	 * everything it holds (copies, ids, string literals), never a pointer
	 * into a drun, its dver or the DAG: the call that queues an item may
	 * drop the run before flush() (finish, supersede, discard), and the
	 * last run of a version frees the version's graph and releases its
	 * DAG entry.
	 */
	ax_store_run_change *chg; /* state and reason: string literals */
	size_t               nchg, capchg;
	int64_t             *wr_run;
	char               **wr_task; /* owned copies */
	size_t               nwr, capwr, capwr2;
	int64_t             *sup;
	size_t               nsup, capsup;
	pev                **evs;
	size_t               nev, capev;
	done                *dn;
	size_t               ndn, capdn;
	PGresult            *live; /* supersede: instances to cancel */
	/* InstanceReady commands past the outbox budget, packed, in order */
	dd_packed *spill;
	size_t     nspill, spill_head, capspill;
} dd;

/* --- detector.c: the batch and sending -------------------------------- */

/* Logs an allocation failure of what (the item is dropped). */
void axdd_oom(const char *what);

/* Queues a dag_runs change (state, reason: string literals or NULL). */
void axdd_chg(dd *d, int64_t run, const char *state, const char *reason);

/* Queues an event of run r (task NULL: a run event); the event copies
 * every string, so r may be dropped before the batch is written. */
void axdd_emit(dd *d, const drun *r, const char *type, const char *reason,
               const char *task, int32_t shard, int64_t iid,
               const char *payload);

/* Queues WAIT_DEPENDENCY as the reason of every PENDING instance of task
 * (copied) in run. */
void axdd_wait_reason(dd *d, int64_t run, const char *task);

/* Queues RunCompleted of r (sent to the detector itself after the
 * batch's commit). */
void axdd_completed(dd *d, const drun *r, int ok);

/* Queues the supersede of run (its instances canceled in the batch). */
void axdd_supersede_rows(dd *d, int64_t run);

/* Sends c to dest now (trace may be NULL); errors are logged. */
void axdd_send_cmd(dd *d, const char *dest, Ax__Command *c, const char *trace);

/* --- graph.c: versions, counters, releases, DAG-to-DAG waits ---------- */

void  axdd_dver_free(void *p);
dver *axdd_dver_get(dd *d, int64_t version_id);
void  axdd_dver_unused(dd *d, dver *v);
void  axdd_send_ready(dd *d, drun *r, size_t t, int32_t j);
void  axdd_spill_drain(dd *d);
void  axdd_release_task(dd *d, drun *r, size_t t);
void  axdd_on_succeeded(dd *d, const Ax__InstanceSucceeded *s);
void  axdd_on_finished(dd *d, const Ax__InstanceFinished *f);
void  axdd_admit(dd *d, drun *r);
void  axdd_on_run_completed(dd *d, const Ax__RunCompleted *rc);
void  axdd_rvec_free(void *p);

/* --- run_life.c: runs, their states and run-level concurrency --------- */

void  axdd_dq_free(void *p);
void  axdd_run_free_mem(void *p);
void  axdd_run_drop(dd *d, drun *r);
drun *axdd_run_new(dd *d, int64_t id, dver *v, int64_t logical_us,
                   int64_t due_us, const char *trace);
void  axdd_link_active(drun *r);
void  axdd_unlink_active(drun *r);
void  axdd_send_plan(dd *d, drun *r);
void  axdd_check_done(dd *d, drun *r);
void  axdd_hold(dd *d, drun *r, const char *reason, const char *type);
int   axdd_alloc_counters(drun *r);
void  axdd_gate(dd *d, drun *r);
void  axdd_on_timer(dd *d, const Ax__TimerFired *tf);
void  axdd_on_due(dd *d, const Ax__Command *cmd);

/* --- deadline.c: the timers of declared deadlines and their misses ---- */

/* Arms a TIMER_DEADLINE for each deadline r's DAG declares (the DAG's
 * and each task's); r's interval must be set. Re-arming replaces. */
void axdd_deadline_arm(dd *d, const drun *r);
/* r succeeded: cancels the timers axdd_deadline_arm armed. */
void axdd_deadline_cancel(dd *d, const drun *r);
/* A TIMER_DEADLINE fired: records the miss once when it is one. */
void axdd_deadline_fired(dd *d, const Ax__TimerFired *tf);

/* --- rebuild.c: from PostgreSQL --------------------------------------- */

ax_err axdd_startup(dd *d);
void   axdd_reload(dd *d, const int64_t *ids, size_t n, int mode);

/* --- control.c --------------------------------------------------------- */

void axdd_on_control(dd *d, const Ax__ControlOp *op);

#endif /* AX_DEPENDENCY_INTERNAL_H */
