/*
 * worker_client.h - the engine of ax-worker: registration, long-poll
 * pulls, running attempts with the executors, reports and heartbeats
 * (proto/worker.proto), drain.
 *
 * Role: one ax-worker process = one ax_worker. It joins a worker group of
 * the queue service (actors/queue/) with N slots and runs what
 * it is dispatched: type "bash" with the local executor, "noop" with the
 * noop executor (worker/executor.h); any other type fails at once with a
 * clear error.
 *
 * Event loop: ONE thread runs ax_worker_run(): poll() over the
 * executors' fds, an eventfd that nng completion callbacks write to (the
 * callbacks only mark their request done and wake poll; every protocol
 * decision is taken on the loop thread, so nothing is locked), and the
 * caller's stop fd (SIGTERM self-pipe). Three REQ contexts run at once:
 * control (Register, Heartbeat, Deregister), report (Report with Started,
 * Result and dispatch acks) and pull (long poll), so a long poll never
 * delays a heartbeat and a heartbeat never delays a result.
 *
 * Reliability: Started and Result wait in an outbox until a Report
 * carrying them is acknowledged; a Report without an answer within the
 * retry interval (queue.ack_timeout, learnt at Register) is sent again.
 * A Dispatch of a run_id that runs or recently finished here is only
 * acknowledged, never run twice. The executors make this process a child
 * subreaper and reap every child: nothing else here waits for children.
 *
 * Lease and fencing: the queue renews the worker's lease on Register
 * and Heartbeat. When no such request sent in the last lease_ttl
 * (RegisterReply) was answered, the lease may have lapsed: the worker
 * kills its running attempts (SIGKILL to their process groups), reports
 * them FAILED "worker fenced", and registers again. It checks this first
 * on every turn of its loop, so a worker woken from SIGSTOP kills before
 * it does anything else; the shims (executor.h) enforce the same
 * deadline while the worker cannot. A task never outlives its worker.
 *
 * Held dispatches: one sent ahead of its instant (start_after_us) waits
 * here and counts in the slots; at most opts->prefetch of them beyond the
 * slots (the queue sends those only when its group is full for that
 * instant). Never more than opts->slots attempts run: at its instant a
 * held one starts if a slot is free, else as soon as one frees, earliest
 * instant first. One the queue asks back (HeartbeatReply.withdraw) that
 * has not started is dropped and reported (Report.withdrawn_run_ids).
 *
 * With opts->cgroups, each bash task gets a cgroup v2 of its own where
 * the worker can make one (else process groups only; logged at start).
 *
 * Identity (task_env.h): a worker started as root runs its tasks as
 * opts->run_as (a user that must exist: ax_worker_new fails with
 * AX_ECONFIG otherwise), or as the user a Dispatch names when
 * opts->run_as_allowed lists it; a worker that is not root runs them as
 * itself. Env values from files or the worker's environment are read
 * at start; a Dispatch the worker must refuse (user not allowed, secret
 * missing) ends as a FAILED result whose error says why, and nothing
 * runs.
 *
 * Restart: with a state dir, the local executor records each running
 * task under <state_dir>/<worker id>; a worker started with the same id
 * kills what its previous life left before it registers. A state dir
 * that cannot be used is logged (NO_STATE_DIR), not fatal.
 * Register.running_run_ids lists every run_id still held: running, or
 * ended with a result not yet acknowledged.
 *
 * Drain: the first stop request stops pulling, tells the queue
 * (Heartbeat.draining), finishes the running attempts (or, when the
 * HeartbeatReply says hand_back, kills them and hands them back in
 * Deregister), reports, deregisters and returns AX_OK. A second stop
 * request kills every attempt's process group and returns AX_ECLOSED.
 *
 * Workload: up to a few hundred slots; thousands of noop attempts per
 * second (one Report round trip per batch of results).
 */
#ifndef AX_WORKER_CLIENT_H
#define AX_WORKER_CLIENT_H

#include <stdint.h>

#include "ax_err.h"

/* Longest worker.start_spin: a busy wait, so kept short. */
#define AX_WORKER_SPIN_MAX_US (100 * 1000)

typedef struct ax_worker_opts {
	const char *server;       /* queue address, tcp:// or ipc:// */
	const char *group;        /* worker group */
	const char *id;           /* worker id; NULL or "": hostname:pid */
	const char *log_dir;      /* attempt logs when a dispatch names none */
	int32_t     slots;        /* >= 1 */
	int32_t     reserve_p0;   /* of slots, kept for P0 (0..slots) */
	int64_t     cpu_milli;    /* offered to tasks; 0: online CPUs */
	int64_t     memory_bytes; /* offered to tasks; 0: physical memory */
	const char *resources;    /* worker.resources, "gpu=2, ssd=1"; NULL or
	                             "": none */
	const char *labels;       /* worker.labels, "gpu=a100, zone=east";
	                             NULL or "": none */
	int64_t heartbeat_us;     /* heartbeat period */
	int64_t kill_grace_us;    /* TERM -> KILL when a dispatch says 0 */
	int64_t poll_us;          /* long-poll length; 0: 10 s */
	int64_t start_spin_us;    /* worker.start_spin: wait on the clock
	                             this long before a held start; 0:
	                             sleep to the instant; at most
	                             AX_WORKER_SPIN_MAX_US */
	int32_t prefetch;         /* worker.prefetch: dispatches held for a
	                             later instant taken beyond the free
	                             slots (0..100000) */
	int         cgroups;      /* try a cgroup per bash task */
	const char *state_dir;    /* records of running tasks (per worker id
	                           * under it); NULL or "": none */
	const char *run_as;       /* worker.run_as; NULL: own user */
	const char *run_as_allowed; /* worker.run_as_allowed, "a, b" */
	const char *secrets_dir;    /* worker.secrets_dir */
	const char *secrets_env;    /* worker.secrets_env, "A, B" */
} ax_worker_opts;

typedef struct ax_worker ax_worker;

/*
 * Creates a worker (executors, nng socket dialing opts->server in the
 * background). Errors: AX_EINVAL (bad option, detail names it),
 * AX_ECONFIG (as root: no user opts->run_as), AX_ENNG,
 * AX_EIO, AX_ENOMEM. The caller owns *out.
 */
ax_err ax_worker_new(const ax_worker_opts *opts, ax_worker **out);

/*
 * Runs the loop on the calling thread until drained. stop_fd (or -1)
 * becomes readable once per stop request (each read byte is one
 * request). Returns AX_OK after a clean drain, AX_ECLOSED after a second
 * stop request (attempts killed), or an error.
 */
ax_err ax_worker_run(ax_worker *w, int stop_fd);

/* Kills what still runs, closes the socket, frees. NULL is fine. */
void ax_worker_free(ax_worker *w);

#endif /* AX_WORKER_CLIENT_H */
