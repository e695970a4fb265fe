/*
 * worker_client.c - ax-worker's loop and protocol (see worker_client.h).
 */
#include "worker_client.h"
#include "worker_internal.h"

#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ax_config.h"
#include "buf.h"
#include "clock.h"
#include "executor.h"
#include "task_env.h"
#include "task_records.h"
#include "log.h"
#include "resources.h"
#include "worker.pb-c.h"
#include "worker_proto.h"

/* ------------------------------------------------------------ outbox */

static void
out_started(ax_worker *w, const char *run_id, int64_t at)
{
	if (AX_GROW(w->ost, w->cost, w->nost + 1) != AX_OK)
		return;
	w->ost[w->nost].run_id       = strdup(run_id);
	w->ost[w->nost++].started_at = at;
	w->report_at                 = 0;
}

static void
out_result(ax_worker *w, const char *run_id, int status, int exit_code,
           int sig, int64_t started, int64_t ended, const char *error,
           const char *log_path, const ax_exec_result *er)
{
	Ax__Result *r;
	if (AX_GROW(w->ores, w->cores, w->nores + 1) != AX_OK)
		return;
	r = &w->ores[w->nores++];
	ax__result__init(r);
	r->run_id        = strdup(run_id);
	r->status        = status;
	r->exit_code     = exit_code;
	r->term_signal   = sig;
	r->started_at_us = started;
	r->ended_at_us   = ended;
	r->error         = strdup(error ? error : "");
	r->log_path      = strdup(log_path ? log_path : "");
	if (er != NULL) {
		r->cpu_user_us = er->cpu_user_us;
		r->cpu_sys_us  = er->cpu_sys_us;
		r->max_rss_kb  = er->max_rss_kb;
		r->log_bytes   = er->log_bytes;
	}
	w->report_at = 0;
}

static void
out_ack(ax_worker *w, const char *run_id)
{
	if (AX_GROW(w->acks, w->cacks, w->nacks + 1) != AX_OK)
		return;
	w->acks[w->nacks++] = strdup(run_id);
	w->report_at        = 0;
}

/* Drops the first n entries of an outbox array. */
#define OUT_SHIFT(arr, cnt, n, freeone)                                       \
	do {                                                                  \
		if ((n) == 0)                                                 \
			break; /* arr may be NULL: memmove needs a pointer */ \
		for (size_t i_ = 0; i_ < (n); i_++)                           \
			freeone(&(arr)[i_]);                                  \
		memmove((arr), (arr) + (n), ((cnt) - (n)) * sizeof(*(arr)));  \
		(cnt) -= (n);                                                 \
	} while (0)

static void
free_started(wstarted *s)
{
	free(s->run_id);
}

static void
free_result(Ax__Result *r)
{
	free(r->run_id);
	free(r->error);
	free(r->log_path);
}

static void
free_ack(char **a)
{
	free(*a);
}

/* ---------------------------------------------------------- attempts */

static wrun *
run_find(ax_worker *w, const char *run_id)
{
	for (size_t i = 0; i < w->nrun; i++)
		if (strcmp(w->run[i].run_id, run_id) == 0)
			return &w->run[i];
	return NULL;
}

static int
done_has(const ax_worker *w, const char *run_id)
{
	for (size_t i = 0; i < DONE_RING; i++)
		if (w->done[i][0] && strcmp(w->done[i], run_id) == 0)
			return 1;
	return 0;
}

static void
done_add(ax_worker *w, const char *run_id)
{
	size_t n = strnlen(run_id, AX_EXEC_RUN_ID_MAX - 1);
	memcpy(w->done[w->done_next], run_id, n);
	w->done[w->done_next][n] = '\0';
	w->done_next             = (w->done_next + 1) % DONE_RING;
}

static int
slots_used(const ax_worker *w)
{
	int n = 0;
	for (size_t i = 0; i < w->nrun; i++)
		n += w->run[i].slots;
	return n;
}

/* The slots of the attempts started (not those held for an instant). */
static int
slots_running(const ax_worker *w)
{
	int n = 0;
	for (size_t i = 0; i < w->nrun; i++)
		if (w->run[i].pend == NULL)
			n += w->run[i].slots;
	return n;
}

/*
 * The task's user into s->cred and its environment into *envp
 * (NULL-terminated "KEY=VALUE", each string malloc'd: wipe them with
 * ax_task_env_wipe, then free the array; *own: a user looked up for
 * this task, or NULL). On an error nothing is left to free and the
 * detail says why the task must not run.
 */
static ax_err
task_setup(ax_worker *w, const Ax__Dispatch *d, ax_exec_spec *s,
           ax_exec_cred **own, char ***envp)
{
	size_t n = d->n_env + d->n_env_from_file + d->n_env_from_env, k = 0;
	char **env;
	ax_err rv;

	*envp = NULL;
	if ((rv = ax_task_cred(&w->policy, d->run_as, own, &s->cred)) != AX_OK)
		return rv;
	if ((env = calloc(n + 1, sizeof(*env))) == NULL) {
		rv = ax_err_set(AX_ENOMEM, "environment: out of memory");
		goto fail;
	}
	for (size_t i = 0; i < d->n_env; i++)
		if (asprintf(&env[k], "%s=%s", d->env[i]->key,
		             d->env[i]->value) >= 0)
			k++;
	for (size_t i = 0; i < d->n_env_from_file + d->n_env_from_env; i++) {
		int f = i < d->n_env_from_file;
		const Ax__Dispatch__EnvFromFileEntry *ef =
		    f ? d->env_from_file[i] : NULL;
		const Ax__Dispatch__EnvFromEnvEntry *ee =
		    f ? NULL : d->env_from_env[i - d->n_env_from_file];
		ax_task_env_src src = {
			.key       = f ? ef->key : ee->key,
			.from_file = f ? ef->value : NULL,
			.from_env  = f ? NULL : ee->value,
		};
		if ((rv = ax_task_env_read(&w->policy, &src, &env[k])) !=
		    AX_OK)
			goto fail;
		k++;
	}
	*envp = env;
	return AX_OK;
fail:
	for (size_t i = 0; env != NULL && env[i] != NULL; i++)
		ax_task_env_wipe(env[i]);
	free(env);
	free(*own);
	*own = NULL;
	return rv;
}

/* Starts one dispatched attempt (or fails it at once with a reason). */
static void
start_one(ax_worker *w, const Ax__Dispatch *d)
{
	const ax_exec_ops *ops = ax_exec_ops_find(d->task_type);
	ax_exec           *ex  = NULL;
	ax_exec_spec       s   = { 0 };
	char               logical[40], log_path[2048], err[1024];
	char             **env = NULL;
	ax_exec_cred      *own = NULL;
	ax_err             rv;
	int64_t            started = 0;

	if (strlen(d->run_id) >= AX_EXEC_RUN_ID_MAX || !*d->run_id)
		return;
	if (*d->log_path)
		snprintf(log_path, sizeof(log_path), "%s", d->log_path);
	else
		snprintf(log_path, sizeof(log_path), "%s/%s/%s/%s.log",
		         w->log_dir, *d->dag ? d->dag : "_",
		         *d->task ? d->task : "_", d->run_id);
	for (size_t i = 0; i < NEXEC; i++)
		if (ops != NULL && ax_exec_ops_of(w->ex[i]) == ops)
			ex = w->ex[i];
	if (ex == NULL) {
		snprintf(err, sizeof(err),
		         "unknown task type '%s': this worker runs bash and "
		         "noop",
		         d->task_type);
		ax_logf(AX_LOG_WARN, COMP, "BAD_TASK_TYPE", NULL, "%s: %s",
		        d->run_id, err);
		out_result(w, d->run_id, 2, -1, 0, 0, ax_clock_utc_us(), err,
		           log_path, NULL);
		done_add(w, d->run_id);
		return;
	}
	if ((rv = task_setup(w, d, &s, &own, &env)) != AX_OK) {
		snprintf(err, sizeof(err), "%s", ax_err_detail());
		ax_logf(AX_LOG_WARN, COMP, "START_REFUSED", NULL, "%s: %s",
		        d->run_id, err);
		{
			char line[1200];
			snprintf(line, sizeof(line),
			         "attempt %s did not start: %s", d->run_id,
			         err);
			ax_exec_log_note(log_path, line);
		}
		out_result(w, d->run_id, 2, -1, 0, 0, ax_clock_utc_us(), err,
		           log_path, NULL);
		done_add(w, d->run_id);
		return;
	}
	s.run_id = d->run_id;
	s.dag    = d->dag;
	s.task   = d->task;
	s.logical_date =
	    ax_clock_fmt_utc(d->logical_time_us, logical, sizeof(logical));
	s.attempt     = d->attempt > 0 ? d->attempt : 1;
	s.shard_index = d->shard_index;
	s.shard_total = d->shard_total > 0 ? d->shard_total : 1;
	s.command     = d->command;
	s.env         = env;
	s.workdir     = *d->workdir ? d->workdir : NULL;
	s.timeout_us  = d->timeout_ms * AX_USEC_PER_MSEC;
	s.grace_us = d->kill_grace_ms > 0 ? d->kill_grace_ms * AX_USEC_PER_MSEC
	                                  : w->o.kill_grace_us;
	s.log_path = log_path;
	if (d->rlimits != NULL) {
		s.limits.cpu_seconds   = d->rlimits->cpu_seconds;
		s.limits.address_space = d->rlimits->address_space_bytes;
		s.limits.open_files    = d->rlimits->open_files;
		s.limits.processes     = d->rlimits->processes;
	}
	s.started_at = &started;
	rv           = ax_exec_start(ex, &s);
	for (size_t i = 0; env[i] != NULL; i++)
		ax_task_env_wipe(env[i]);
	free(env);
	free(own);
	if (rv != AX_OK) {
		snprintf(err, sizeof(err), "%s: %s", ax_strerror(rv),
		         ax_err_detail());
		ax_logf(AX_LOG_WARN, COMP, "START_FAILED", NULL, "%s: %s",
		        d->run_id, err);
		out_result(w, d->run_id, 2, -1, 0, 0, ax_clock_utc_us(), err,
		           log_path, NULL);
		done_add(w, d->run_id);
		return;
	}
	{
		wrun *v = realloc(w->run, (w->nrun + 1) * sizeof(*v));
		if (v != NULL) {
			w->run = v;
			memset(&v[w->nrun], 0, sizeof(*v));
			snprintf(v[w->nrun].run_id, AX_EXEC_RUN_ID_MAX, "%s",
			         d->run_id);
			v[w->nrun].ex    = ex;
			v[w->nrun].slots = d->slots > 0 ? d->slots : 1;
			w->nrun++;
		}
	}
	out_started(w, d->run_id, started);
}

/* A dispatch that ax_wproto_dispatch() refused: never run; failed with
 * the reason when its run_id can carry a Result, else only logged (the
 * queue's ack timeout then tells it). */
static void
bad_dispatch(ax_worker *w, const Ax__Dispatch *d)
{
	char err[512];

	snprintf(err, sizeof(err), "dispatch refused by the worker: %s",
	         ax_err_detail());
	ax_logf(AX_LOG_WARN, COMP, "BAD_DISPATCH", NULL, "%s", err);
	if (!ax_wproto_run_id_ok(d->run_id))
		return;
	out_result(w, d->run_id, 2, -1, 0, 0, ax_clock_utc_us(), err, "",
	           NULL);
	done_add(w, d->run_id);
}

/*
 * Keeps d (a copy) to start at start_mono: the queue sent it ahead of its
 * due instant (Dispatch.start_after_us), maybe beyond the free slots
 * (Register.prefetch: it then starts when a slot frees after its
 * instant, see pend_start_due). Returns 0 when it could not be kept (no
 * memory): the caller starts it at once, a little early, rather than
 * lose it.
 */
static int
pend_one(ax_worker *w, const Ax__Dispatch *d, int64_t start_mono)
{
	size_t   len = ax__dispatch__get_packed_size(d);
	uint8_t *buf = malloc(len ? len : 1);
	wrun    *v = buf ? realloc(w->run, (w->nrun + 1) * sizeof(*v)) : NULL;

	if (v == NULL) {
		free(buf);
		return 0;
	}
	ax__dispatch__pack(d, buf);
	w->run = v;
	v      = &w->run[w->nrun++];
	memset(v, 0, sizeof(*v));
	snprintf(v->run_id, AX_EXEC_RUN_ID_MAX, "%s", d->run_id);
	v->slots      = d->slots > 0 ? d->slots : 1;
	v->pend       = buf;
	v->pend_len   = len;
	v->start_mono = start_mono;
	v->pend_seq   = ++w->pend_seq;
	return 1;
}

/* Takes the entry of a dispatch not started yet out of w->run (its
 * Dispatch is freed; x is overwritten by the last entry). */
static void
pend_drop(ax_worker *w, wrun *x)
{
	free(x->pend);
	*x = w->run[--w->nrun];
}

/* The held dispatch due first (earliest instant, then the first
 * received), or NULL when none is held. */
static wrun *
pend_first(ax_worker *w)
{
	wrun *best = NULL;

	for (size_t i = 0; i < w->nrun; i++) {
		wrun *x = &w->run[i];
		if (x->pend != NULL &&
		    (best == NULL || x->start_mono < best->start_mono ||
		     (x->start_mono == best->start_mono &&
		      x->pend_seq < best->pend_seq)))
			best = x;
	}
	return best;
}

/*
 * Starts the held dispatches whose instant has come (now, mono us), the
 * earliest first, as long as their slots are free: the queue may send
 * more than the free slots (Register.prefetch), and those wait here for
 * a slot, in order. Returns the earliest instant still ahead
 * (INT64_MAX: none; a due dispatch waiting for a slot is started when
 * an attempt ends, not on the clock).
 */
static int64_t
pend_start_due(ax_worker *w, int64_t now)
{
	wrun         *x;
	Ax__Dispatch *d;
	int64_t       next = INT64_MAX;

	/* the clock is read again after each start: the dispatches of one
	 * instant, received in different replies, may have instants a few
	 * microseconds apart, and all that came due while the earlier
	 * ones started start in this sweep */
	while ((x = pend_first(w)) != NULL && x->start_mono <= now) {
		int running = slots_running(w);
		if (running > 0 && running + x->slots > w->o.slots)
			break; /* it starts when a slot frees */
		d = ax__dispatch__unpack(NULL, x->pend_len, x->pend);
		if (d == NULL) { /* our own bytes: only memory can fail */
			out_result(w, x->run_id, 2, -1, 0, 0,
			           ax_clock_utc_us(),
			           "out of memory at the start", "", NULL);
			done_add(w, x->run_id);
		}
		pend_drop(w, x);
		if (d != NULL) {
			start_one(w, d); /* appends its running entry */
			ax__dispatch__free_unpacked(d, NULL);
		}
		now = ax_clock_mono_us();
	}
	for (size_t i = 0; i < w->nrun; i++)
		if (w->run[i].pend != NULL && w->run[i].start_mono > now &&
		    w->run[i].start_mono < next)
			next = w->run[i].start_mono;
	return next;
}

/* The queue takes back a dispatch sent beyond the free slots that has
 * not started (HeartbeatReply.withdraw_run_ids): dropped here, reported
 * in the next Report. One that started already runs on. */
static void
pend_withdraw(ax_worker *w, const char *run_id)
{
	wrun *x = run_find(w, run_id);
	char *id;

	if (x == NULL || x->pend == NULL || x->killed)
		return;
	if ((id = strdup(run_id)) == NULL ||
	    AX_GROW(w->withdrawn, w->cwithdrawn, w->nwithdrawn + 1) != AX_OK) {
		free(id); /* kept: it starts when a slot frees */
		return;
	}
	w->withdrawn[w->nwithdrawn++] = id;
	w->report_at                  = 0;
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "%s: given back to the queue before its start (no slot "
	        "free)",
	        run_id);
	pend_drop(w, x);
}

/*
 * The instant (mono us) a dispatch sent ahead starts, received at now
 * (mono us: when the reply arrived). start_after_us counts from the
 * queue's send, so the reply's transit makes the start later by that
 * much (0.7 ms at the median, 1.7 ms at P90 for a reply of 84 dispatches
 * on the 2-vCPU machine of the notes). A queue on this host (ipc://)
 * reads the same clocks as we do, so the due instant it sent
 * (due_at_us, UTC) is the start, transit or not; it is taken only when
 * it is at most HELD_CLOCK_MAX_US before the counted instant (never
 * later: the count already bounds it), so a stepped clock or a bad
 * due_at_us cannot start a task long before the queue meant it to.
 */
static int64_t
held_start(const ax_worker *w, const Ax__Dispatch *d, int64_t now,
           int64_t utc_to_mono)
{
	int64_t at = now + d->start_after_us, due;

	if (!w->shared_clock || d->due_at_us <= 0)
		return at;
	due = d->due_at_us + utc_to_mono;
	return due < at && at - due <= HELD_CLOCK_MAX_US ? due : at;
}

/* The dispatches of b, received at now (mono us: when the reply arrived,
 * the instant start_after_us counts from). */
static void
on_dispatches(ax_worker *w, const Ax__DispatchBatch *b, int64_t now)
{
	/* once per batch, so that its dispatches of one instant start
	 * together; UTC read first and a microsecond added for the
	 * truncation of each clock, so the offset errs late, never early */
	int64_t utc         = ax_clock_utc_us();
	int64_t utc_to_mono = ax_clock_mono_us() - utc + 1;

	for (size_t i = 0; i < b->n_dispatches; i++) {
		const Ax__Dispatch *d = b->dispatches[i];
		if (d->run_id == NULL || !*d->run_id)
			continue;
		if (run_find(w, d->run_id) != NULL || done_has(w, d->run_id)) {
			out_ack(w,
			        d->run_id); /* duplicate: ack, never rerun */
			continue;
		}
		if (w->draining && w->stops > 1)
			continue;
		if (ax_wproto_dispatch(d) != AX_OK) {
			bad_dispatch(w, d);
			continue;
		}
		/* held: acknowledged now (the queue may ask it back only
		 * once it knows no copy is on the way), started later */
		if (d->start_after_us > 0 &&
		    pend_one(w, d, held_start(w, d, now, utc_to_mono))) {
			out_ack(w, d->run_id);
			continue;
		}
		/* due now but no slot free (one sent beyond the slots whose
		 * instant passed in transit): held until a slot frees, as
		 * the worker never runs more than its slots */
		if (slots_running(w) > 0 &&
		    slots_running(w) + (d->slots > 0 ? d->slots : 1) >
		        w->o.slots &&
		    pend_one(w, d, now)) {
			out_ack(w, d->run_id);
			continue;
		}
		start_one(w, d);
	}
}

/* Collects ended attempts from the executors into the outbox. */
static void
reap(ax_worker *w)
{
	ax_exec_result r[64];
	size_t         n;
	int64_t        now = ax_clock_mono_us();

	for (size_t e = 0; e < NEXEC; e++) {
		do {
			n = 0;
			if (ax_exec_poll(w->ex[e], now, r, 64, &n) != AX_OK)
				break;
			for (size_t i = 0; i < n; i++) {
				wrun *x      = run_find(w, r[i].run_id);
				int   handed = x && x->handed;
				int   st = r[i].status == AX_EXEC_SUCCESS ? 1
				      : r[i].status == AX_EXEC_TIMEOUT    ? 3
				      : r[i].status == AX_EXEC_KILLED     ? 4
				                                          : 2;
				int   fenced = r[i].status == AX_EXEC_FENCED;
				if (x != NULL)
					*x = w->run[--w->nrun];
				done_add(w, r[i].run_id);
				if (handed) {
					if (AX_GROW(w->handed, w->chanded,
					            w->nhanded + 1) == AX_OK)
						w->handed[w->nhanded++] =
						    strdup(r[i].run_id);
					continue;
				}
				out_result(
				    w, r[i].run_id, st, r[i].exit_code,
				    r[i].term_signal, r[i].started_at,
				    r[i].ended_at,
				    fenced ? "worker fenced: lease lapsed, "
				             "the task was killed"
				        : st == 3 ? "execution timeout"
				        : st == 4 ? "killed on request"
				                  : "",
				    NULL, &r[i]);
			}
		} while (n == 64);
	}
}

/* --------------------------------------------------------- requests */

static void
send_register(ax_worker *w)
{
	Ax__WorkerMessage             m   = AX__WORKER_MESSAGE__INIT;
	Ax__Register                  reg = AX__REGISTER__INIT;
	Ax__Register__ResourcesEntry  resv[AX_RES_MAX];
	Ax__Register__ResourcesEntry *resp[AX_RES_MAX];
	Ax__Register__LabelsEntry     labv[AX_LABELS_MAX];
	Ax__Register__LabelsEntry    *labp[AX_LABELS_MAX];
	char                         *types[] = { "bash", "noop" };
	char **running  = calloc(w->nrun + w->nores + 1, sizeof(char *));
	size_t nrunning = 0;

	if (running == NULL)
		return;
	/* every run_id still held here: running, or ended with a result
	 * the queue has not acknowledged yet */
	for (size_t i = 0; i < w->nrun; i++)
		running[nrunning++] = w->run[i].run_id;
	for (size_t i = 0; i < w->nores; i++)
		running[nrunning++] = w->ores[i].run_id;
	m.body_case      = AX__WORKER_MESSAGE__BODY_REGISTER;
	m.register_      = &reg;
	reg.worker_id    = w->id;
	reg.worker_group = (char *) w->o.group;
	reg.hostname     = w->host;
	reg.pid          = (int32_t) getpid();
	reg.slots        = w->o.slots;
	reg.reserve_p0   = w->o.reserve_p0;
	reg.cpu_milli    = w->o.cpu_milli;
	reg.memory_bytes = w->o.memory_bytes;
	reg.n_resources  = (size_t) w->res.n;
	reg.resources    = resp;
	for (int i = 0; i < w->res.n; i++) {
		Ax__Register__ResourcesEntry e =
		    AX__REGISTER__RESOURCES_ENTRY__INIT;
		e.key   = w->res.v[i].name;
		e.value = w->res.v[i].amount;
		resv[i] = e;
		resp[i] = &resv[i];
	}
	for (size_t i = 0; i < w->nlabels; i++) {
		Ax__Register__LabelsEntry e = AX__REGISTER__LABELS_ENTRY__INIT;
		e.key                       = w->labels[i].key;
		e.value                     = w->labels[i].value;
		labv[i]                     = e;
		labp[i]                     = &labv[i];
	}
	reg.n_labels          = w->nlabels;
	reg.labels            = labp;
	reg.version           = AX_VERSION;
	reg.n_task_types      = 2;
	reg.task_types        = types;
	reg.n_running_run_ids = nrunning;
	reg.running_run_ids   = running;
	reg.start_after       = 1; /* see pend_one */
	reg.prefetch          = w->o.prefetch;
	w->session            = 0;
	axw_rq_send(w, RQ_CTL, K_REGISTER, &m, w->retry_us);
	free(running);
}

static int32_t
load_x100(void)
{
	double l[1];
	return getloadavg(l, 1) == 1 ? (int32_t) (l[0] * 100) : 0;
}

static int64_t
rss_kb(void)
{
	long  pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The machine's memory (kB, /proc/meminfo); 0 when unknown. */
static void
meminfo(int64_t *total_kb, int64_t *avail_kb)
{
	char      line[128];
	long long v;
	FILE     *f = fopen("/proc/meminfo", "r");

	*total_kb = *avail_kb = 0;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "MemTotal: %lld", &v) == 1)
			*total_kb = v;
		else if (sscanf(line, "MemAvailable: %lld", &v) == 1)
			*avail_kb = v;
	}
	fclose(f);
}

/*
 * The live usage of the running attempts into u (cap entries): CPU as
 * the rate since the last heartbeat (thousandths of a core), memory now.
 * Returns how many.
 */
static size_t
task_usage(ax_worker *w, Ax__TaskUsage *u, size_t cap)
{
	ax_exec_usage x[AX_WORKER_USAGE_MAX];
	int64_t       now = ax_clock_mono_us();
	size_t        n   = 0, k;

	if (cap > AX_WORKER_USAGE_MAX)
		cap = AX_WORKER_USAGE_MAX;
	k = ax_exec_usage_now(w->ex[0], x, cap);
	for (size_t i = 0; i < k; i++) {
		wrun *r = run_find(w, x[i].run_id);
		if (r == NULL)
			continue;
		u[n]        = (Ax__TaskUsage) AX__TASK_USAGE__INIT;
		u[n].run_id = r->run_id;
		u[n].rss_kb = x[i].rss_kb;
		if (r->cpu_at > 0 && now > r->cpu_at &&
		    x[i].cpu_us >= r->cpu_us)
			u[n].cpu_milli = (int32_t) ((x[i].cpu_us - r->cpu_us) *
			                            1000 / (now - r->cpu_at));
		r->cpu_us = x[i].cpu_us;
		r->cpu_at = now;
		n++;
	}
	return n;
}

static void
send_heartbeat(ax_worker *w)
{
	Ax__WorkerMessage m       = AX__WORKER_MESSAGE__INIT;
	Ax__Heartbeat     hb      = AX__HEARTBEAT__INIT;
	char            **running = calloc(w->nrun + 1, sizeof(char *));
	Ax__TaskUsage     use[AX_WORKER_USAGE_MAX];
	Ax__TaskUsage    *usep[AX_WORKER_USAGE_MAX];

	if (running == NULL)
		return;
	for (size_t i = 0; i < w->nrun; i++)
		running[i] = w->run[i].run_id;
	m.body_case          = AX__WORKER_MESSAGE__BODY_HEARTBEAT;
	m.heartbeat          = &hb;
	hb.n_running_run_ids = w->nrun;
	hb.running_run_ids   = running;
	hb.slots_total       = w->o.slots;
	hb.slots_free        = w->o.slots - slots_used(w);
	hb.load_x100         = load_x100();
	hb.rss_kb            = rss_kb();
	hb.sent_at_us        = ax_clock_utc_us();
	hb.draining          = w->draining != 0;
	hb.cpus              = (int32_t) sysconf(_SC_NPROCESSORS_ONLN);
	meminfo(&hb.mem_total_kb, &hb.mem_available_kb);
	hb.n_tasks = task_usage(w, use, AX_WORKER_USAGE_MAX);
	for (size_t i = 0; i < hb.n_tasks; i++)
		usep[i] = &use[i];
	hb.tasks = usep;
	axw_rq_send(w, RQ_CTL, K_HEARTBEAT, &m, w->retry_us);
	free(running);
}

static void
send_deregister(ax_worker *w)
{
	Ax__WorkerMessage m = AX__WORKER_MESSAGE__INIT;
	Ax__Deregister    d = AX__DEREGISTER__INIT;

	m.body_case         = AX__WORKER_MESSAGE__BODY_DEREGISTER;
	m.deregister        = &d;
	d.hand_back         = w->hand_back != 0;
	d.n_running_run_ids = w->nhanded;
	d.running_run_ids   = w->handed;
	axw_rq_send(w, RQ_CTL, K_DEREGISTER, &m, w->retry_us);
}

static void
send_report(ax_worker *w)
{
	Ax__WorkerMessage m   = AX__WORKER_MESSAGE__INIT;
	Ax__Report        rep = AX__REPORT__INIT;
	Ax__Ack           ack = AX__ACK__INIT;
	size_t            ns  = w->nost < REPORT_MAX ? w->nost : REPORT_MAX;
	size_t            nr  = w->nores < REPORT_MAX ? w->nores : REPORT_MAX;
	size_t            na  = w->nacks < REPORT_MAX ? w->nacks : REPORT_MAX;
	size_t nw = w->nwithdrawn < REPORT_MAX ? w->nwithdrawn : REPORT_MAX;
	Ax__Started  *st = calloc(ns + 1, sizeof(*st));
	Ax__Started **sp = calloc(ns + 1, sizeof(*sp));
	Ax__Result  **rp = calloc(nr + 1, sizeof(*rp));

	if (st == NULL || sp == NULL || rp == NULL)
		goto out;
	for (size_t i = 0; i < ns; i++) {
		ax__started__init(&st[i]);
		st[i].run_id        = w->ost[i].run_id;
		st[i].started_at_us = w->ost[i].started_at;
		sp[i]               = &st[i];
	}
	for (size_t i = 0; i < nr; i++)
		rp[i] = &w->ores[i];
	m.body_case                 = AX__WORKER_MESSAGE__BODY_REPORT;
	m.report                    = &rep;
	m.ack                       = &ack;
	ack.n_acked_run_ids         = na;
	ack.acked_run_ids           = w->acks;
	rep.n_started               = ns;
	rep.started                 = sp;
	rep.n_results               = nr;
	rep.results                 = rp;
	rep.n_withdrawn_run_ids     = nw;
	rep.withdrawn_run_ids       = w->withdrawn;
	w->rq[RQ_REPORT].nstarted   = ns;
	w->rq[RQ_REPORT].nresults   = nr;
	w->rq[RQ_REPORT].nacks      = na;
	w->rq[RQ_REPORT].nwithdrawn = nw;
	axw_rq_send(w, RQ_REPORT, K_REPORT, &m, w->retry_us);
out:
	free(st);
	free(sp);
	free(rp);
}

static void
send_pull(ax_worker *w, int free_slots)
{
	Ax__WorkerMessage m = AX__WORKER_MESSAGE__INIT;
	Ax__Pull          p = AX__PULL__INIT;
	m.body_case         = AX__WORKER_MESSAGE__BODY_PULL;
	m.pull              = &p;
	p.free_slots        = free_slots;
	p.wait_ms           = (int32_t) (w->o.poll_us / 1000);
	axw_rq_send(w, RQ_PULL, K_PULL, &m,
	            w->o.poll_us + 5 * AX_USEC_PER_SEC);
}

/* -------------------------------------------------------- replies */

static void
kill_run(ax_worker *w, const char *run_id, int64_t grace_us)
{
	wrun *x = run_find(w, run_id);
	if (x == NULL || x->killed)
		return;
	x->killed = 1;
	ax_logf(AX_LOG_INFO, COMP, "KILL", NULL, "%s: killed on request",
	        run_id);
	if (x->pend != NULL) { /* never started: it ends here */
		out_result(w, run_id, 4, -1, 0, 0, ax_clock_utc_us(),
		           "killed on request before it started", "", NULL);
		done_add(w, run_id);
		pend_drop(w, x);
		return;
	}
	ax_exec_kill(x->ex, run_id, grace_us);
}

static int
session_error(ax_worker *w, const Ax__QueueMessage *m)
{
	if (m->body_case != AX__QUEUE_MESSAGE__BODY_ERROR)
		return 0;
	if (strcmp(m->error->code, "STALE_SESSION") == 0 ||
	    strcmp(m->error->code, "UNKNOWN_WORKER") == 0) {
		if (w->registered)
			ax_logf(AX_LOG_WARN, COMP, m->error->code, NULL,
			        "%s; registering again", m->error->message);
		w->registered    = 0;
		w->next_register = 0;
	} else {
		ax_logf(AX_LOG_WARN, COMP, m->error->code, NULL, "queue: %s",
		        m->error->message);
	}
	return 1;
}

/* A Register or Heartbeat sent at sent_at was answered: the queue
 * renewed the lease when it received it, so it lasts at least until
 * sent_at + lease_ttl on our clock. The shims learn the deadline. */
static void
lease_renewed(ax_worker *w, int64_t sent_at)
{
	if (w->lease_ttl_us <= 0 || (w->leased && sent_at <= w->lease_base))
		return;
	w->leased     = 1;
	w->lease_base = sent_at;
	for (size_t e = 0; e < NEXEC; e++)
		ax_exec_set_lease(w->ex[e], sent_at + w->lease_ttl_us);
}

/* A dispatch not started yet goes back to the queue with the handed
 * ones (Deregister); x is taken out of w->run. */
static void
hand_pending(ax_worker *w, wrun *x)
{
	char *id = strdup(x->run_id);

	if (id != NULL &&
	    AX_GROW(w->handed, w->chanded, w->nhanded + 1) == AX_OK)
		w->handed[w->nhanded++] = id;
	else
		free(id);
	done_add(w, x->run_id);
	pend_drop(w, x);
}

static void
done_ctl(ax_worker *w)
{
	int               kind    = w->rq[RQ_CTL].kind;
	int64_t           sent_at = w->rq[RQ_CTL].sent_at;
	int               current = w->rq[RQ_CTL].session == w->session;
	Ax__QueueMessage *m       = axw_rq_reply(w, RQ_CTL);
	int64_t           now     = ax_clock_mono_us();

	if (m == NULL || session_error(w, m)) {
		if (kind == K_REGISTER)
			w->next_register = now + REGISTER_US;
		else if (kind == K_HEARTBEAT)
			w->next_hb = now + w->retry_us / 2;
		else if (kind == K_DEREGISTER && m != NULL)
			w->deregistered = 1; /* the queue forgot us: done */
		if (m)
			ax__queue_message__free_unpacked(m, NULL);
		return;
	}
	if (kind == K_REGISTER &&
	    m->body_case == AX__QUEUE_MESSAGE__BODY_REGISTER_REPLY) {
		Ax__RegisterReply *r = m->register_reply;
		w->session           = r->session;
		w->registered        = 1;
		w->lease_ttl_us      = r->lease_ttl_ms * AX_USEC_PER_MSEC;
		lease_renewed(w, sent_at);
		if (r->retry_interval_ms > 0)
			w->retry_us = r->retry_interval_ms * AX_USEC_PER_MSEC;
		if (w->retry_us < RETRY_MIN)
			w->retry_us = RETRY_MIN;
		for (size_t i = 0; i < r->n_cancel_run_ids; i++)
			kill_run(w, r->cancel_run_ids[i], 0);
		w->next_hb = now + w->o.heartbeat_us;
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "registered as %s in group %s with %d slots", w->id,
		        w->o.group, (int) w->o.slots);
	} else if (kind == K_HEARTBEAT && current && w->registered &&
	           m->body_case == AX__QUEUE_MESSAGE__BODY_HEARTBEAT_REPLY) {
		Ax__HeartbeatReply *r = m->heartbeat_reply;
		lease_renewed(w, sent_at);
		for (size_t i = 0; i < r->n_cancel_run_ids; i++)
			kill_run(w, r->cancel_run_ids[i],
			         i < r->n_cancel_grace_ms &&
			                 r->cancel_grace_ms[i] > 0
			             ? r->cancel_grace_ms[i] * AX_USEC_PER_MSEC
			             : 0);
		for (size_t i = 0; i < r->n_withdraw_run_ids; i++)
			pend_withdraw(w, r->withdraw_run_ids[i]);
		if (w->draining && r->hand_back && !w->hand_back) {
			w->hand_back = 1;
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "handing back %zu attempts", w->nrun);
			for (size_t i = 0; i < w->nrun;) {
				wrun *x = &w->run[i];
				if (x->pend != NULL) {
					/* never started: handed as it is */
					hand_pending(w, x);
					continue;
				}
				x->handed = 1;
				ax_exec_kill(x->ex, x->run_id, 0);
				i++;
			}
		}
	} else if (kind == K_DEREGISTER) {
		w->deregistered = 1;
	}
	ax__queue_message__free_unpacked(m, NULL);
}

static void
done_report(ax_worker *w)
{
	wreq             *r = &w->rq[RQ_REPORT];
	Ax__QueueMessage *m = axw_rq_reply(w, RQ_REPORT);

	if (m == NULL || m->body_case != AX__QUEUE_MESSAGE__BODY_ACK) {
		/* no answer: the same entries go again after the retry */
		w->report_at = ax_clock_mono_us() + w->retry_us;
		if (m)
			ax__queue_message__free_unpacked(m, NULL);
		return;
	}
	OUT_SHIFT(w->ost, w->nost, r->nstarted, free_started);
	OUT_SHIFT(w->ores, w->nores, r->nresults, free_result);
	OUT_SHIFT(w->acks, w->nacks, r->nacks, free_ack);
	OUT_SHIFT(w->withdrawn, w->nwithdrawn, r->nwithdrawn, free_ack);
	ax__queue_message__free_unpacked(m, NULL);
}

static void
done_pull(ax_worker *w)
{
	int               current = w->rq[RQ_PULL].session == w->session;
	int64_t           at      = w->rq[RQ_PULL].done_at;
	Ax__QueueMessage *m       = axw_rq_reply(w, RQ_PULL);
	if (m == NULL)
		return;
	/* dispatches of a session that ended (fenced) are not ours to run:
	 * not acknowledged, the queue takes them back */
	if (!session_error(w, m) && current && w->registered &&
	    m->body_case == AX__QUEUE_MESSAGE__BODY_DISPATCH)
		on_dispatches(w, m->dispatch, at);
	ax__queue_message__free_unpacked(m, NULL);
}

/* -------------------------------------------------------------- loop */

/*
 * The lease may have lapsed at the queue (no Register or Heartbeat sent
 * in the last lease_ttl was answered): the scheduler may hand our
 * attempts to another worker, so they die now (SIGKILL to their groups;
 * their shims did it already if the deadline passed while this process
 * was stopped), their results say FENCED, and we register again. The
 * requests in flight belong to the old session: their answers are
 * dropped (see done_pull).
 */
static void
fence(ax_worker *w, int64_t now)
{
	int64_t lapsed = w->lease_base + w->lease_ttl_us;

	ax_logf(AX_LOG_WARN, COMP, "WORKER_FENCED", NULL,
	        "lease lapsed: no heartbeat answered for %lld ms (lease "
	        "%lld ms); killing %zu attempts and registering again",
	        (long long) ((now - w->lease_base) / AX_USEC_PER_MSEC),
	        (long long) (w->lease_ttl_us / AX_USEC_PER_MSEC), w->nrun);
	for (size_t e = 0; e < NEXEC; e++)
		ax_exec_fence(w->ex[e], lapsed);
	/* a dispatch not started yet never starts: it may be handed to
	 * another worker now, like the running ones */
	for (size_t i = 0; i < w->nrun;) {
		wrun *x = &w->run[i];
		if (x->pend == NULL) {
			i++;
			continue;
		}
		out_result(w, x->run_id, 2, -1, 0, 0, ax_clock_utc_us(),
		           "worker fenced: lease lapsed before the task "
		           "started",
		           "", NULL);
		done_add(w, x->run_id);
		pend_drop(w, x);
	}
	w->fences++;
	w->leased        = 0;
	w->registered    = 0;
	w->session       = 0;
	w->next_register = now;
	axw_link_reset(w, "no answer for a whole lease");
}

/* Starts what may start now; returns the next instant to look again. */
static int64_t
step(ax_worker *w, int64_t now)
{
	int64_t next = pend_start_due(w, now);
	int     used = slots_used(w);
	int64_t heard =
	    w->last_answer > w->link_since ? w->last_answer : w->link_since;

	w->pend_next = next; /* ax_worker_run waits on the clock for it */

	if (next > now + AX_USEC_PER_SEC)
		next = now + AX_USEC_PER_SEC;
	/* Silent for half the lease: a new link can still renew the lease
	 * (or register again with a restarted queue) before the attempts
	 * have to be fenced. */
	if (w->leased && now - heard > w->lease_ttl_us / 2)
		axw_link_reset(w, "no answer for half the lease");
	if (!w->registered) {
		if (now - heard > axw_relink_us(w))
			axw_link_reset(w, "no answer to Register");
		if (axw_rq_idle(w, RQ_CTL) && now >= w->next_register)
			send_register(w);
		if (w->next_register > now && w->next_register < next)
			next = w->next_register;
	} else if (axw_rq_idle(w, RQ_CTL)) {
		int quiet = w->nrun == 0 && w->nost == 0 && w->nores == 0 &&
		    axw_rq_idle(w, RQ_REPORT);
		if (w->draining && quiet && !w->deregistered)
			send_deregister(w);
		else if (now >= w->next_hb) {
			send_heartbeat(w);
			w->next_hb = now + w->o.heartbeat_us;
		}
	}
	if (w->next_hb > now && w->next_hb < next)
		next = w->next_hb;
	if (w->registered && axw_rq_idle(w, RQ_REPORT) &&
	    (w->nost || w->nores || w->nacks || w->nwithdrawn)) {
		if (now >= w->report_at)
			send_report(w);
		else if (w->report_at < next)
			next = w->report_at;
	}
	if (w->registered && !w->draining && axw_rq_idle(w, RQ_PULL) &&
	    used < w->o.slots)
		send_pull(w, w->o.slots - used);
	return next;
}

/* One pause in a wait on the clock: cheaper for the sibling hardware
 * thread than a bare loop. */
static inline void
spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

ax_err
ax_worker_run(ax_worker *w, int stop_fd)
{
	struct pollfd pf[2 + NEXEC];

	for (;;) {
		int64_t         now = ax_clock_mono_us(), next, dl;
		struct timespec to;

		/* The clock first: after a stop (SIGSTOP, a stalled host)
		 * nothing is started or reported before this check. */
		if (w->leased && now >= w->lease_base + w->lease_ttl_us)
			fence(w, now);
		if (atomic_load(&w->rq[RQ_CTL].phase) == PH_DONE)
			done_ctl(w);
		if (atomic_load(&w->rq[RQ_REPORT].phase) == PH_DONE)
			done_report(w);
		if (atomic_load(&w->rq[RQ_PULL].phase) == PH_DONE)
			done_pull(w);
		reap(w);
		if (w->draining && w->nrun == 0 &&
		    (!w->registered ||
		     now - w->drain_since > DRAIN_REPORT_WAIT_US)) {
			/* Nothing runs and the queue cannot be reached (never
			 * registered, or no answer for a while): waiting
			 * longer would hang a shutdown forever. Unacknowledged
			 * reports are settled by the scheduler when the lease
			 * lapses. */
			if (w->nost || w->nores)
				ax_logf(
				    AX_LOG_WARN, COMP, "WORKER_LEFT", NULL,
				    "leaving with %zu unacknowledged reports: "
				    "the queue did not answer",
				    w->nost + w->nores);
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "stopped; worker %s leaves", w->id);
			return AX_OK;
		}
		if (w->deregistered) {
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "drained; worker %s leaves", w->id);
			return AX_OK;
		}
		next = step(w, now);
		if (w->leased && w->lease_base + w->lease_ttl_us < next)
			next = w->lease_base + w->lease_ttl_us;
		for (size_t e = 0; e < NEXEC; e++)
			if ((dl = ax_exec_next_deadline(w->ex[e])) < next)
				next = dl;
		/* The next thing to do is a held start: a sleep that ends
		 * on its instant can wake late by the time a busy or virtual
		 * CPU takes to run us again (milliseconds here, under load).
		 * Sleep to start_spin before it, then wait on the clock. */
		if (w->o.start_spin_us > 0 && w->pend_next != INT64_MAX &&
		    next >= w->pend_next) {
			int64_t from = w->pend_next - w->o.start_spin_us;
			if (now >= from) {
				while (ax_clock_mono_us() < w->pend_next)
					spin_pause();
				continue; /* step() starts it */
			}
			next = from;
		}
		/* to the microsecond: a dispatch held for its instant
		 * starts on it, not up to a millisecond later */
		dl           = next <= now ? 0 : next - now;
		to.tv_sec    = (time_t) (dl / AX_USEC_PER_SEC);
		to.tv_nsec   = (long) (dl % AX_USEC_PER_SEC) * 1000;
		pf[0].fd     = w->evfd;
		pf[0].events = POLLIN;
		pf[1].fd     = stop_fd;
		pf[1].events = POLLIN;
		for (size_t e = 0; e < NEXEC; e++) {
			pf[2 + e].fd     = ax_exec_fd(w->ex[e]);
			pf[2 + e].events = POLLIN;
		}
		if (ppoll(pf, 2 + NEXEC, &to, NULL) < 0 && errno != EINTR)
			return ax_err_set(AX_EIO, "poll: %s", strerror(errno));
		if (pf[0].revents & POLLIN) {
			uint64_t v;
			if (read(w->evfd, &v, sizeof(v)) < 0)
				(void) 0;
		}
		if (stop_fd >= 0 && (pf[1].revents & POLLIN)) {
			char    b[16];
			ssize_t n = read(stop_fd, b, sizeof(b));
			for (ssize_t i = 0; i < n; i++) {
				w->stops++;
				if (w->stops == 1) {
					ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
					        "draining: %zu attempts run",
					        w->nrun);
					w->draining    = 1;
					w->drain_since = now;
					w->next_hb     = 0;
					nng_aio_cancel(w->rq[RQ_PULL].aio);
				}
			}
			if (w->stops > 1) {
				ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
				        "second stop: killing %zu attempts",
				        w->nrun);
				return ax_err_set(AX_ECLOSED,
				                  "stopped before the drain "
				                  "finished");
			}
		}
	}
}

/* ------------------------------------------------------------ set up */

/*
 * <dir>/<worker id> keeps the records of our running tasks; what an
 * earlier life with this id left there still running is killed now,
 * before we register (its attempts may be handed to others).
 */
static ax_err
state_dir_open(ax_worker *w, const char *dir)
{
	char   path[1536];
	int    killed = 0;
	ax_err e;
	size_t n = (size_t) snprintf(path, sizeof(path), "%s/", dir);

	if (n + strlen(w->id) >= sizeof(path))
		return ax_err_set(AX_EINVAL,
		                  "worker: state directory %s is too long; "
		                  "set a shorter worker.state_dir",
		                  dir);
	for (const char *c = w->id; *c; c++)
		path[n++] = *c == '/' ? '_' : *c;
	path[n] = '\0';
	if ((e = ax_task_records_kill_leftovers(path, &killed)) != AX_OK)
		return e;
	if (killed > 0)
		ax_logf(AX_LOG_WARN, COMP, "LEFTOVERS_KILLED", NULL,
		        "killed %d tasks an earlier life of worker %s left "
		        "running (records in %s)",
		        killed, w->id, path);
	if ((e = ax_exec_set_state_dir(w->ex[0], path)) != AX_OK)
		return ax_err_set(e, "worker: %s; fix worker.state_dir",
		                  ax_err_detail());
	return AX_OK;
}

ax_err
ax_worker_new(const ax_worker_opts *o, ax_worker **out)
{
	ax_worker *w;
	ax_err     e;

	if (o->server == NULL || *o->server == '\0')
		return ax_err_set(AX_EINVAL,
		                  "worker: no queue address "
		                  "(--server or worker.server)");
	if (o->slots < 1 || o->slots > 100000)
		return ax_err_set(AX_EINVAL, "worker: slots %d; use 1..100000",
		                  (int) o->slots);
	if (o->reserve_p0 < 0 || o->reserve_p0 > o->slots)
		return ax_err_set(AX_EINVAL,
		                  "worker: worker.reserve_p0 is %d, more than "
		                  "worker.slots (%d); lower worker.reserve_p0 "
		                  "or raise worker.slots",
		                  (int) o->reserve_p0, (int) o->slots);
	if (o->group == NULL || *o->group == '\0')
		return ax_err_set(AX_EINVAL, "worker: empty group");
	if (o->prefetch < 0 || o->prefetch > 100000)
		return ax_err_set(
		    AX_EINVAL,
		    "worker: worker.prefetch is %d; use 0..100000 "
		    "(-1: as many as worker.slots)",
		    (int) o->prefetch);
	if (o->start_spin_us < 0 || o->start_spin_us > AX_WORKER_SPIN_MAX_US)
		return ax_err_set(AX_EINVAL,
		                  "worker: worker.start_spin is %lld us; use "
		                  "0s..100ms (the worker busy-waits that long "
		                  "before each held start; 0s sleeps to it)",
		                  (long long) o->start_spin_us);
	if (o->cpu_milli < 0 || o->cpu_milli > AX_WPROTO_CPU_MILLI_MAX ||
	    o->memory_bytes < 0 || o->memory_bytes > AX_WPROTO_MEMORY_MAX)
		return ax_err_set(AX_EINVAL,
		                  "worker: worker.cpu_milli %lld or "
		                  "worker.memory_mb %lld out of range; use "
		                  "0..%lld millicores and 0..%lld MiB",
		                  (long long) o->cpu_milli,
		                  (long long) (o->memory_bytes >> 20),
		                  (long long) AX_WPROTO_CPU_MILLI_MAX,
		                  (long long) (AX_WPROTO_MEMORY_MAX >> 20));
	ax_res_set res;
	if (ax_res_parse(o->resources ? o->resources : "", "worker.resources",
	                 &res) != AX_OK)
		return ax_err_set(AX_EINVAL, "worker: %s", ax_err_detail());
	ax_label lab[AX_LABELS_MAX];
	size_t   nlab;
	if (ax_labels_parse(o->labels, "worker.labels", lab, AX_LABELS_MAX,
	                    &nlab) != AX_OK)
		return ax_err_set(AX_EINVAL, "worker: %s", ax_err_detail());
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return ax_err_set(AX_ENOMEM, "worker");
	w->o   = *o;
	w->res = res;
	memcpy(w->labels, lab, nlab * sizeof(lab[0]));
	w->nlabels = nlab;
	w->evfd    = -1;
	/* what the machine has, unless the configuration offers less (a
	 * machine shared with other services) */
	if (w->o.cpu_milli == 0 && sysconf(_SC_NPROCESSORS_ONLN) > 0)
		w->o.cpu_milli =
		    (int64_t) sysconf(_SC_NPROCESSORS_ONLN) * 1000;
	if (w->o.memory_bytes == 0 && sysconf(_SC_PHYS_PAGES) > 0)
		w->o.memory_bytes =
		    (int64_t) sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	if (w->o.cpu_milli > AX_WPROTO_CPU_MILLI_MAX)
		w->o.cpu_milli = AX_WPROTO_CPU_MILLI_MAX;
	if (w->o.memory_bytes > AX_WPROTO_MEMORY_MAX)
		w->o.memory_bytes = AX_WPROTO_MEMORY_MAX;
	if (w->o.heartbeat_us <= 0)
		w->o.heartbeat_us = 2 * AX_USEC_PER_SEC;
	if (w->o.poll_us <= 0)
		w->o.poll_us = 10 * AX_USEC_PER_SEC;
	if (w->o.kill_grace_us <= 0)
		w->o.kill_grace_us = AX_EXEC_DEFAULT_GRACE;
	w->retry_us     = 2 * AX_USEC_PER_SEC;
	w->pend_next    = INT64_MAX;
	w->shared_clock = strncmp(o->server, "ipc://", 6) == 0;
	gethostname(w->host, sizeof(w->host) - 1);
	if (o->id != NULL && *o->id)
		snprintf(w->id, sizeof(w->id), "%s", o->id);
	else
		snprintf(w->id, sizeof(w->id), "%s:%d", w->host,
		         (int) getpid());
	snprintf(w->log_dir, sizeof(w->log_dir), "%s",
	         o->log_dir && *o->log_dir ? o->log_dir : "./.ax/logs");
	w->o.id      = w->id;
	w->o.log_dir = w->log_dir;
	if ((e = ax_task_default_cred(o->run_as, &w->cred)) != AX_OK)
		goto fail;
	w->policy = (ax_task_policy) {
		.dflt        = w->cred,
		.allowed     = o->run_as_allowed,
		.secrets_dir = o->secrets_dir,
		.secrets_env = o->secrets_env,
	};
	if (geteuid() != 0 && o->run_as != NULL && *o->run_as &&
	    strcmp(o->run_as, w->cred->name) != 0)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "not root: tasks run as this worker's user '%s' "
		        "(worker.run_as '%s' applies to a worker started as "
		        "root)",
		        w->cred->name, o->run_as);
	else
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "tasks run as user '%s' (uid %u)%s", w->cred->name,
		        (unsigned) w->cred->uid,
		        w->cred->uid == 0 ? ": worker.run_as says root" : "");
	if ((w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		e = ax_err_set(AX_EIO, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if ((e = ax_exec_new(&ax_exec_local_ops, &w->ex[0])) != AX_OK ||
	    (e = ax_exec_new(&ax_exec_noop_ops, &w->ex[1])) != AX_OK)
		goto fail;
	/* Without records a restart cannot find leftovers, but the shims
	 * still kill every task when the worker dies: run anyway. */
	if (o->state_dir != NULL && *o->state_dir &&
	    state_dir_open(w, o->state_dir) != AX_OK)
		ax_logf(AX_LOG_WARN, COMP, "NO_STATE_DIR", NULL,
		        "%s; running without task records, so a restart "
		        "cannot kill what a worker killed with its tasks' "
		        "supervisors left (set worker.state_dir to a writable "
		        "directory)",
		        ax_err_detail());
	if (o->cgroups && ax_exec_use_cgroups(w->ex[0]) != AX_OK)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "no cgroup per task (%s); tasks are killed by process "
		        "group",
		        ax_err_detail());
	else if (o->cgroups)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "each task runs in a cgroup v2 of its own");
	if ((e = axw_link_new(w, &w->link)) != AX_OK)
		goto fail;
	w->rq         = w->link->rq;
	w->link_since = ax_clock_mono_us();
	*out          = w;
	return AX_OK;
fail:
	ax_worker_free(w);
	return e;
}

void
ax_worker_free(ax_worker *w)
{
	if (w == NULL)
		return;
	axw_link_free(w->link);
	/* an old link still closing frees into w's count when it is done */
	axw_link_wait_retired(w, 2 * AX_USEC_PER_SEC);
	for (size_t e = 0; e < NEXEC; e++)
		ax_exec_free(w->ex[e]); /* SIGKILL to what still runs */
	if (w->evfd >= 0)
		close(w->evfd);
	OUT_SHIFT(w->ost, w->nost, w->nost, free_started);
	OUT_SHIFT(w->ores, w->nores, w->nores, free_result);
	OUT_SHIFT(w->acks, w->nacks, w->nacks, free_ack);
	OUT_SHIFT(w->withdrawn, w->nwithdrawn, w->nwithdrawn, free_ack);
	free(w->withdrawn);
	free(w->ost);
	free(w->ores);
	free(w->acks);
	for (size_t i = 0; i < w->nhanded; i++)
		free(w->handed[i]);
	free(w->handed);
	for (size_t i = 0; i < w->nrun; i++)
		free(w->run[i].pend);
	free(w->run);
	free(w->cred);
	if (atomic_load(&w->retiring) > 0) /* its thread still counts in w */
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "an old connection to the queue did not close in 2 s; "
		        "left to the exit");
	else
		free(w);
}
