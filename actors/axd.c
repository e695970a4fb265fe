/*
 * axd.c - the AX scheduler daemon: hosts the actor pipeline and the queue
 * service (DESIGN.md section 2).
 *
 * Role: main() resolves the database (database.dsn, or the embedded
 * cluster of `home`, which axctl starts: axd never starts PostgreSQL),
 * refuses a schema that is not exactly the one it was built for, then
 * runs one cycle after another until SIGINT/SIGTERM: become the leader
 * (a standby waits here), build the pipeline context and every actor,
 * start them and the control thread (actors/control.h), lead (renew the
 * lease row, watch the leader session), and stop in order when the
 * leadership is lost. Only a signal ends the process: a database outage
 * of any length, a takeover by another axd or a fenced write send axd
 * back to standby, never out (its supervisor has nothing to do).
 *
 * Invariants:
 *  - At most one axd decides per database: the leader holds the
 *    session-level advisory lock of its leader connection
 *    (engine/store_sched.h, "scheduler leadership"), and bumps the
 *    scheduler_lease epoch at every take. PostgreSQL frees the lock the
 *    moment that session ends, so after kill -9 of the leader a standby,
 *    polling every scheduler.standby_poll, takes over within that poll
 *    plus the pipeline's start (well under 2 s), without waiting for the
 *    lease row to lapse. The row (renewed every lease_ttl/3) is the
 *    record and, for a leader that hangs, the deadline: past expires_at
 *    a standby ends the hung leader's session and takes over.
 *  - Leadership lost means stop deciding at once: the end of the leader
 *    session (seen the moment its socket closes: the database stopped or
 *    restarted, the session was terminated), a renewal refused (the
 *    epoch moved on), renewals failing for a whole lease_ttl, or a
 *    fenced write (SIGUSR1 from on_fenced). axd then stops the control
 *    thread and the actors (1 s drain) and frees them, which closes the
 *    queue's worker endpoint, so nothing is dispatched without a lease;
 *    it drops the leader session (freeing the lock) and goes back to
 *    standby, reconnecting with backoff (100 ms doubling to 1 s) while
 *    the database is away. On the next take it builds a fresh pipeline,
 *    whose actors recover from PostgreSQL as after a restart.
 *  - Every write of the pipeline is fenced by the epoch (store.h,
 *    "Fencing"): the actors open their connections with a DSN that
 *    carries it, so a deposed leader (hung past its lease, then resumed)
 *    writes nothing, and its first fenced write brings it back to
 *    standby without waiting for the next renewal.
 *  - The lease is taken before the actors are built (the queue binds its
 *    worker address when added: a standby must not), and the LISTEN
 *    connection is open before the lease is taken, so a control payload
 *    sent once the lease is visible (what axctl waits for) is not lost.
 *  - Signals are blocked in every thread; only main() takes them, from a
 *    signalfd polled together with the leader connection's socket.
 *
 * Workload: one lease renewal every lease_ttl/3 (default 3.3 s) and, on a
 * standby, one lock attempt every scheduler.standby_poll (100 ms); the
 * actors carry the scheduling load.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "ax_config.h"
#include "clock.h"
#include "config.h"
#include "control.h"
#include "dag_loader.h"
#include "dag_registry.h"
#include "dependency_detector.h"
#include "event_emitter.h"
#include "history.h"
#include "instance_generator.h"
#include "log.h"
#include "migrate.h"
#include "pg_embed.h"
#include "pipeline.h"
#include "queue_service.h"
#include "resource_detector.h"
#include "result_handler.h"
#include "sink_alert.h"
#include "store.h"
#include "store_sched.h"
#include "time_detector.h"

#define COMP "axd"

/* Exit codes (see usage()). */
enum { EXIT_CLEAN = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Reconnect backoff while the database is away. The cap is the delay
 * added to a failover's recovery (a new primary comes up while axd
 * waits); one failed connect a second costs the server nothing. */
#define BACKOFF_MIN_US (100 * AX_USEC_PER_MSEC)
#define BACKOFF_MAX_US (1 * AX_USEC_PER_SEC)

/* Everything main() owns; freed in reverse order by axd_fini(). */
typedef struct axd {
	ax_config                   *cfg;
	ax_pg_embed                 *embed; /* NULL when database.dsn is set */
	const char                  *dsn;
	char                         holder[160]; /* lease holder name */
	int64_t                      ttl_us;      /* scheduler.lease_ttl */
	int64_t                      epoch;       /* 0: lease not held */
	char                        *fenced_dsn;  /* dsn + epoch (actors) */
	pthread_t                    main_thread; /* woken by on_fenced */
	ax_store_sched_leader       *leader;      /* NULL: not connected */
	int64_t                      poll_us;     /* scheduler.standby_poll */
	int64_t                      history_due; /* mono: next ensure */
	ax_dag_registry             *reg;
	ax_pipeline_ctx              ctx;
	ax_actor_system             *sys;
	ax_control                  *ctl;
	ax_time_detector_stats       tds;
	ax_dependency_detector_stats dds;
	ax_queue                    *queue;
	ax_event_emitter            *emitter;
	ax_sink_alert               *alerts; /* scheduler alerts; NULL: off */
	int64_t                      no_lease_us;   /* alerts.no_lease_after */
	int                          alert_lost;    /* LEASE_LOST firing */
	int                          alert_nolease; /* NO_LEASE firing */
	sigset_t                     sigs;  /* SIGINT, SIGTERM, SIGUSR1 */
	int                          sigfd; /* reads sigs (main() only) */
} axd;

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axd [--config FILE] [--help] [--version]\n"
	    "\n"
	    "The AX scheduler: hosts the actor pipeline (DAG loader, time,\n"
	    "dependency and resource detectors, instance generator with\n"
	    "renderer and pre hooks, result handler with post hooks, event\n"
	    "emitter) and the queue service.\n"
	    "It needs a running, migrated PostgreSQL: database.dsn, or the\n"
	    "embedded cluster of `home` (start it with `axctl db up`).\n"
	    "Only one axd schedules per database (the scheduler lease); a\n"
	    "second one waits as a standby and takes over the moment the\n"
	    "active one's database session ends (or, when the active one\n"
	    "hangs, once its lease lapses). Through a database outage axd\n"
	    "stops scheduling, reconnects and goes on by itself.\n"
	    "\n"
	    "  -c, --config FILE  configuration file (YAML); AX_* variables\n"
	    "                     override its keys\n"
	    "  -h, --help         show this help\n"
	    "  -V, --version      show the version\n"
	    "\n"
	    "Exit status: 0 after a clean shutdown (SIGINT/SIGTERM), 1 when\n"
	    "it cannot start (database missing, schema not migrated, a bad\n"
	    "setting), 2 on a usage error. A lost lease or an outage later\n"
	    "sends axd back to standby; it does not exit.\n");
}

/* Resolves the DSN; AX_EDBCONN with what to do when nothing runs. */
static ax_err
resolve_dsn(axd *d)
{
	const char *home    = ax_config_str(d->cfg, "home");
	int         running = 0;
	ax_err      rv;

	d->dsn = ax_config_str(d->cfg, "database.dsn");
	if (d->dsn[0] != '\0')
		return AX_OK;
	if ((rv =
	         ax_pg_embed_new(home, ax_config_str(d->cfg, "database.pgbin"),
	                         &d->embed)) != AX_OK)
		return rv;
	if ((rv = ax_pg_embed_status(d->embed, &running)) != AX_OK)
		return rv;
	if (!running)
		return ax_err_set(
		    AX_EDBCONN,
		    "the embedded PostgreSQL of home %s is not "
		    "running (axd does not start it): run `axctl "
		    "db up --home %s`, or set database.dsn",
		    home, home);
	d->dsn = ax_pg_embed_dsn(d->embed);
	return AX_OK;
}

/* AX_ESCHEMA unless the database is at exactly this binary's version. */
static ax_err
check_schema(axd *d)
{
	int    dbv = 0, binv = 0;
	ax_err rv = ax_migrate_status(d->dsn, &dbv, &binv);

	if (rv != AX_OK)
		return rv;
	if (dbv == 0)
		return ax_err_set(
		    AX_ESCHEMA,
		    "the database is not migrated (schema version "
		    "0, axd needs %d): run `axctl db migrate` "
		    "(or `axctl db up`)",
		    binv);
	if (dbv < binv)
		return ax_err_set(
		    AX_ESCHEMA,
		    "the database schema is at version %d, older "
		    "than this axd's %d: run `axctl db migrate`",
		    dbv, binv);
	if (dbv > binv)
		return ax_err_set(
		    AX_ESCHEMA,
		    "the database schema is at version %d, newer "
		    "than this axd's %d (axd %s): upgrade axd",
		    dbv, binv, AX_VERSION);
	return AX_OK;
}

/*
 * Waits up to us for a signal or for the leader connection's socket
 * (when there is one) to become readable. Returns the signal (SIGINT,
 * SIGTERM, SIGUSR1) or 0; *readable (may be NULL) is set when the socket
 * has something to read (a message, or its end).
 */
static int
wait_event(axd *d, int64_t us, int *readable)
{
	struct pollfd           p[2] = { { .fd = d->sigfd, .events = POLLIN },
		                         { .fd = -1, .events = POLLIN } };
	struct signalfd_siginfo si;
	int                     ms;

	if (readable != NULL)
		*readable = 0;
	if (us < 0)
		us = 0;
	ms = (int) ((us + AX_USEC_PER_MSEC - 1) / AX_USEC_PER_MSEC);
	if (readable != NULL)
		p[1].fd = ax_store_sched_leader_socket(d->leader);
	if (poll(p, 2, ms) <= 0)
		return 0;
	if ((p[0].revents & POLLIN) &&
	    read(d->sigfd, &si, sizeof(si)) == (ssize_t) sizeof(si))
		return (int) si.ssi_signo;
	if (readable != NULL && p[1].revents != 0)
		*readable = 1;
	return 0;
}

/*
 * Reads the signals that arrived while nobody waited (a fenced write of
 * the pipeline just stopped sends SIGUSR1, which is stale now). 1 when
 * one of them asks to stop.
 */
static int
drain_signals(axd *d)
{
	int sig, stop = 0;

	while ((sig = wait_event(d, 0, NULL)) != 0)
		if (sig == SIGINT || sig == SIGTERM)
			stop = sig;
	if (stop)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL, "%s received: stopping",
		        strsignal(stop));
	return stop != 0;
}

/* Next delay of a reconnect backoff: doubling up to BACKOFF_MAX_US. */
static int64_t
backoff_next(int64_t us)
{
	return us * 2 > BACKOFF_MAX_US ? BACKOFF_MAX_US : us * 2;
}

/*
 * Opens what a take needs while there is none: the leader connection,
 * then the LISTEN connection (ax_control_new: open before the lease is
 * taken). AX_EDBCONN (detail set) while the database is away.
 */
static ax_err
connect_standby(axd *d)
{
	ax_err rv;

	if (d->leader == NULL &&
	    (rv = ax_store_sched_leader_open(d->dsn, d->ttl_us, &d->leader)) !=
	        AX_OK)
		return rv;
	if (d->ctl == NULL && (rv = ax_control_new(&d->ctx, &d->ctl)) != AX_OK)
		return rv;
	return AX_OK;
}

/*
 * Scheduler alerts (sink_alert.h): this axd lost its lease (LEASE_LOST),
 * or could not take one for alerts.no_lease_after because the database
 * is away (NO_LEASE); both are resolved once it leads again. Why: while
 * no axd leads nothing is scheduled at all, and the pipeline's own alert
 * sink stops with the pipeline, so main() keeps a sink of its own.
 * A wrong call costs a page for a short database blip (raise
 * no_lease_after) or a silent outage (never: the lease loss always
 * fires). Main thread only.
 */
static void sched_alert(axd *d, const char *reason, int *firing, int resolve,
                        const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
sched_alert(axd *d, const char *reason, int *firing, int resolve,
            const char *fmt, ...)
{
	char    summary[512];
	va_list ap;

	if (d->alerts == NULL || *firing == !resolve)
		return;
	va_start(ap, fmt);
	vsnprintf(summary, sizeof(summary), fmt, ap);
	va_end(ap);
	(void) ax_sink_alert_scheduler(d->alerts, reason, d->holder, summary,
	                               resolve);
	*firing = !resolve;
}

/* Opens main()'s alert sink when an alert target is configured. */
static void
open_sched_alerts(axd *d)
{
	int64_t cap = ax_config_int(d->cfg, "alerts.buffer");
	ax_err  rv;

	ax_sink_alert_config ac = {
		.alertmanager_url =
		    ax_config_str(d->cfg, "alerts.alertmanager_url"),
		.webhook_url  = ax_config_str(d->cfg, "alerts.webhook_url"),
		.capacity     = cap > 0 ? (size_t) cap : 0,
		.max_attempts = (int) ax_config_int(d->cfg, "alerts.attempts"),
		.backoff0_us = ax_config_duration_us(d->cfg, "alerts.backoff"),
		.timeout_us  = ax_config_duration_us(d->cfg, "alerts.timeout"),
	};
	d->no_lease_us =
	    ax_config_duration_us(d->cfg, "alerts.no_lease_after");
	if ((rv = ax_sink_alert_new(&ac, &d->alerts)) != AX_OK &&
	    rv != AX_ENOENT)
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "scheduler alerts off: %s", ax_err_detail());
}

/*
 * Becomes the leader: (re)connects with backoff while the database is
 * away, then tries the leadership lock every standby poll while another
 * axd holds it. Returns AX_OK (d->epoch set), or AX_ECLOSED when a signal
 * asked to stop meanwhile.
 */
static ax_err
acquire(axd *d)
{
	int64_t backoff = BACKOFF_MIN_US, logged = 0, down_since = 0;
	int64_t wait;
	ax_err  rv;

	for (;;) {
		if ((rv = connect_standby(d)) == AX_OK)
			rv = ax_store_sched_leader_take(d->leader, d->holder,
			                                d->ttl_us, &d->epoch);
		if (rv == AX_OK) {
			if (down_since != 0)
				ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
				        "database back after %lld ms",
				        (long long) ((ax_clock_mono_us() -
				                      down_since) /
				                     AX_USEC_PER_MSEC));
			sched_alert(d, "NO_LEASE", &d->alert_nolease, 1,
			            "scheduling again");
			sched_alert(d, "LEASE_LOST", &d->alert_lost, 1,
			            "scheduling again");
			return AX_OK;
		}
		if (rv == AX_EBUSY) {
			int64_t now = ax_clock_mono_us();
			if (logged == 0 ||
			    now - logged > 60 * AX_USEC_PER_SEC) {
				ax_logf(AX_LOG_INFO, COMP, "STANDBY", NULL,
				        "standby: %s; trying every %lld ms",
				        ax_err_detail(),
				        (long long) (d->poll_us /
				                     AX_USEC_PER_MSEC));
				logged = now;
			}
			backoff = BACKOFF_MIN_US;
			wait    = d->poll_us;
		} else {
			/* the database is away (or refused us): drop what
			 * may be broken and reconnect with backoff */
			if (down_since == 0)
				down_since = ax_clock_mono_us();
			ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
			        "cannot take the scheduler lease, retrying in "
			        "%lld ms: %s",
			        (long long) (backoff / AX_USEC_PER_MSEC),
			        ax_err_detail());
			if (rv == AX_EDBCONN) {
				ax_store_sched_leader_close(d->leader);
				d->leader = NULL;
				ax_control_free(d->ctl);
				d->ctl = NULL;
			}
			wait    = backoff;
			backoff = backoff_next(backoff);
			if (d->no_lease_us > 0 &&
			    ax_clock_mono_us() - down_since >= d->no_lease_us)
				sched_alert(d, "NO_LEASE", &d->alert_nolease,
				            0,
				            "%s has not been able to take the "
				            "scheduler lease for %lld s: %s",
				            d->holder,
				            (long long) ((ax_clock_mono_us() -
				                          down_since) /
				                         AX_USEC_PER_SEC),
				            ax_err_detail());
		}
		ax_control_discard(d->ctl);
		int sig = wait_event(d, wait, NULL);
		if (sig == SIGINT || sig == SIGTERM) {
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "%s received: stopping", strsignal(sig));
			return AX_ECLOSED;
		}
	}
}

/*
 * Adds every actor. Stop order is add order (after the drain), so the
 * sources come first and the event emitter, which every actor feeds,
 * last: nothing emits after it has stopped. Start order does not matter
 * (every inbox is bound before any thread starts).
 */
static ax_err
add_actors(axd *d)
{
	ax_err rv;

	if ((rv = ax_dag_loader_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_time_detector_add_ex(d->sys, &d->ctx, &d->tds)) !=
	        AX_OK ||
	    (rv = ax_dependency_detector_add_ex(d->sys, &d->ctx, &d->dds)) !=
	        AX_OK ||
	    (rv = ax_resource_detector_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_instance_generator_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_queue_add(d->sys, &d->ctx, &d->queue)) != AX_OK ||
	    (rv = ax_result_handler_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_event_emitter_add(d->sys, &d->ctx, &d->emitter)) != AX_OK)
		return rv;
	return AX_OK;
}

/*
 * Builds and starts a fresh pipeline (registry, actors, control thread)
 * for the epoch just taken; a previous one was freed by stop_pipeline.
 */
static ax_err
start_pipeline(axd *d)
{
	ax_err rv;

	memset(&d->tds, 0, sizeof(d->tds));
	memset(&d->dds, 0, sizeof(d->dds));
	if ((rv = ax_store_dsn_fenced(d->dsn, d->epoch, &d->fenced_dsn)) !=
	        AX_OK ||
	    (rv = ax_dag_registry_new(&d->reg)) != AX_OK)
		return rv;
	d->ctx.dsn      = d->fenced_dsn;
	d->ctx.registry = d->reg;
	d->ctx.epoch    = d->epoch;
	if ((rv = ax_actor_system_new(&d->sys)) != AX_OK ||
	    (rv = add_actors(d)) != AX_OK ||
	    (rv = ax_actor_system_start(d->sys)) != AX_OK)
		return rv;
	return ax_control_start(d->ctl, d->sys);
}

/*
 * The fence hook (store.h): a pipeline transaction found the lease at
 * another epoch. Runs on that actor's thread: only wakes main().
 */
static void
on_fenced(void *arg, int64_t fence, int64_t epoch)
{
	axd *d = arg;

	(void) fence;
	(void) epoch;
	pthread_kill(d->main_thread, SIGUSR1);
}

/* How often the leader creates event_log's months ahead: a missed month
 * sends its events into the default partition, from which that month can
 * no longer be made a partition (history.h); an hour is far inside the
 * months ahead, and a check costs a connection and a catalog look-up. */
#define HISTORY_ENSURE_US (3600 * AX_USEC_PER_SEC)

/*
 * Keeps event_log's month partitions ahead (history.partitions_ahead) and
 * moves the runs that finished history.hot_hours ago to the history
 * tables, on a connection of its own, once an hour while leading. A move
 * runs at most budget_us per call, so the lease renewals that call it
 * keep their pace; when runs are left, the next renewal goes on. A
 * failure is logged and tried again at the next renewal; it never stops
 * leading.
 */
static void
history_ensure(axd *d, int64_t budget_us)
{
	ax_store *s;
	int       created = 0, more = 0;
	int64_t   now = ax_clock_utc_us(), hot = 0, old = 0, moved = 0;
	ax_err    rv;

	if (ax_clock_mono_us() < d->history_due)
		return;
	d->history_due = ax_clock_mono_us() + HISTORY_ENSURE_US;
	rv             = ax_history_hot_cutoff(
	                (int) ax_config_int(d->cfg, "history.hot_hours"), now, &hot);
	if (rv == AX_OK)
		rv = ax_history_cutoff(
		    (int) ax_config_int(d->cfg, "history.retention_days"), now,
		    &old);
	if (rv == AX_OK && (rv = ax_store_open(d->dsn, &s)) == AX_OK) {
		rv = ax_history_ensure(
		    s, (int) ax_config_int(d->cfg, "history.partitions_ahead"),
		    &created);
		if (rv == AX_OK)
			rv = ax_history_move(s, hot, old, budget_us, &moved,
			                     &more);
		ax_store_close(s);
	}
	if (rv != AX_OK) {
		d->history_due = ax_clock_mono_us() + d->ttl_us;
		ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
		        "history upkeep (partitions ahead, moving finished "
		        "runs to history) failed, retrying later: %s",
		        ax_err_detail());
		return;
	}
	if (more)
		d->history_due = 0; /* the next renewal goes on */
	if (created > 0)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "created %d month partition(s) ahead (event_log, "
		        "instance history)",
		        created);
	if (moved > 0)
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "moved %lld finished run(s) to history%s",
		        (long long) moved, more ? " (more left)" : "");
}

/* What ended lead(). */
enum { LEAD_STOP = 0, LEAD_LOST = 1 };

/*
 * Leads until a signal (LEAD_STOP) or the loss of the leadership
 * (LEAD_LOST): renews the lease row every lease_ttl/3 and watches the
 * leader session between renewals, so its end is seen at once.
 */
static int
lead(axd *d)
{
	int64_t period = d->ttl_us / 3, last_ok = ax_clock_mono_us();
	int64_t next = last_ok + period;
	int     sig, readable;
	ax_err  rv;

	for (;;) {
		sig = wait_event(d, next - ax_clock_mono_us(), &readable);
		if (sig == SIGUSR1) {
			ax_logf(
			    AX_LOG_ERROR, COMP, "LEASE_LOST", NULL,
			    "a write of this axd was fenced: the scheduler "
			    "lease (epoch %" PRId64
			    ") was taken over: stopping scheduling",
			    d->epoch);
			return LEAD_LOST;
		}
		if (sig != 0) {
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "%s received: stopping", strsignal(sig));
			return LEAD_STOP;
		}
		if (readable &&
		    ax_store_sched_leader_alive(d->leader) != AX_OK)
			break;
		if (ax_clock_mono_us() < next)
			continue;
		next = ax_clock_mono_us() + period;
		rv   = ax_store_sched_leader_renew(d->leader, d->holder,
		                                   d->epoch, d->ttl_us);
		if (rv == AX_OK) {
			last_ok = ax_clock_mono_us();
			history_ensure(d, period / 4);
			continue;
		}
		if (rv == AX_EFENCED || rv == AX_EDBCONN)
			break;
		if (ax_clock_mono_us() - last_ok >= d->ttl_us) {
			ax_logf(AX_LOG_ERROR, COMP, "LEASE_LOST", NULL,
			        "the scheduler lease (epoch %" PRId64
			        ") could not be renewed for %lld ms and may "
			        "be taken over: stopping scheduling (%s)",
			        d->epoch,
			        (long long) ((ax_clock_mono_us() - last_ok) /
			                     AX_USEC_PER_MSEC),
			        ax_err_detail());
			return LEAD_LOST;
		}
		ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
		        "scheduler lease renewal failed, retrying: %s",
		        ax_err_detail());
		next = ax_clock_mono_us() + period / 4;
	}
	ax_logf(AX_LOG_ERROR, COMP, "LEASE_LOST", NULL,
	        "%s: the scheduler lease (epoch %" PRId64
	        ") is lost: stopping scheduling at once",
	        ax_err_detail(), d->epoch);
	return LEAD_LOST;
}

/*
 * Ordered stop: control thread, actors (drain), then frees them (which
 * closes the queue's worker endpoint) and the registry. The leader
 * session is the caller's.
 */
static void
stop_pipeline(axd *d, int lost)
{
	ax_actor_stop_report   rep = { 0 };
	ax_control_stats       cs  = { 0 };
	ax_queue_stats         qs;
	ax_event_emitter_stats es;
	int64_t                drain = lost
	                   ? AX_USEC_PER_SEC
	                   : ax_config_duration_us(d->cfg, "scheduler.drain_timeout");
	int64_t                t0    = ax_clock_mono_us();

	memset(&qs, 0, sizeof(qs));
	memset(&es, 0, sizeof(es));
	if (d->ctl != NULL)
		ax_control_stats_get(d->ctl, &cs);
	ax_control_free(d->ctl);
	d->ctl = NULL;
	if (d->sys != NULL) {
		ax_actor_system_stop(d->sys, drain, &rep);
		if (d->queue != NULL)
			ax_queue_stats_get(d->queue, &qs);
		if (d->emitter != NULL)
			ax_event_emitter_stats_get(d->emitter, &es);
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "axd stopped: drained=%s dropped=%" PRIu64
		        " drain_ms=%lld runs_scheduled=%" PRIu64
		        " runs_manual=%" PRIu64 " runs_planned=%" PRIu64
		        " runs_succeeded=%" PRIu64 " runs_failed=%" PRIu64
		        " dispatches=%" PRIu64 " results=%" PRIu64
		        " events=%" PRIu64 " control_ops=%" PRIu64
		        " control_malformed=%" PRIu64 " stop_ms=%lld",
		        rep.drained ? "yes" : "no", rep.dropped,
		        (long long) (rep.drain_us / AX_USEC_PER_MSEC),
		        d->tds.fires, d->tds.manual, d->dds.planned,
		        d->dds.succeeded, d->dds.failed, qs.dispatches,
		        qs.results, es.events, cs.received, cs.malformed,
		        (long long) ((ax_clock_mono_us() - t0) /
		                     AX_USEC_PER_MSEC));
		ax_actor_system_free(d->sys);
		d->sys = NULL;
	}
	d->queue   = NULL;
	d->emitter = NULL;
	ax_dag_registry_free(d->reg);
	d->reg          = NULL;
	d->ctx.registry = NULL;
	d->ctx.dsn      = d->dsn;
	d->ctx.epoch    = 0;
	free(d->fenced_dsn);
	d->fenced_dsn = NULL;
}

/* Gives the leadership up (a clean stop) and closes the leader session. */
static void
release(axd *d)
{
	if (d->leader != NULL && d->epoch > 0 &&
	    ax_store_sched_leader_release(d->leader, d->holder, d->epoch) !=
	        AX_OK)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "could not release the scheduler lease (it is freed "
		        "with the session anyway): %s",
		        ax_err_detail());
	ax_store_sched_leader_close(d->leader);
	d->leader = NULL;
	d->epoch  = 0;
}

/* Whether a pipeline that failed to start will fail again as it is: a
 * configuration or installation problem, not a passing one. */
static int
start_error_is_final(ax_err rv)
{
	return rv == AX_EINVAL || rv == AX_ECONFIG || rv == AX_EPARSE ||
	    rv == AX_EPERM || rv == AX_ENOMEM || rv == AX_ESCHEMA;
}

static void
axd_fini(axd *d)
{
	ax_sink_alert_free(d->alerts, 2 * AX_USEC_PER_SEC, NULL);
	ax_control_free(d->ctl);
	ax_actor_system_free(d->sys);
	ax_dag_registry_free(d->reg);
	ax_store_sched_leader_close(d->leader);
	free(d->fenced_dsn);
	ax_pg_embed_free(d->embed);
	ax_config_free(d->cfg);
	if (d->sigfd >= 0)
		close(d->sigfd);
}

/*
 * Leader cycles until a signal: take (standby meanwhile), build, lead,
 * stop; a loss goes back to standby. Returns the exit status.
 */
static int
cycles(axd *d)
{
	int64_t backoff = BACKOFF_MIN_US;
	int     started = 0;
	ax_err  rv;

	for (;;) {
		if (acquire(d) != AX_OK)
			return EXIT_CLEAN; /* a signal while standby */
		if ((rv = start_pipeline(d)) != AX_OK) {
			ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
			        "cannot start the pipeline (scheduler lease "
			        "epoch %" PRId64 "): %s",
			        d->epoch, ax_err_detail());
			stop_pipeline(d, 1);
			release(d);
			if (!started && start_error_is_final(rv))
				return EXIT_RUNTIME;
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "lease given up; trying again in %lld ms",
			        (long long) (backoff / AX_USEC_PER_MSEC));
			int sig = wait_event(d, backoff, NULL);
			if (sig == SIGINT || sig == SIGTERM)
				return EXIT_CLEAN;
			backoff = backoff_next(backoff);
			continue;
		}
		started = 1;
		backoff = BACKOFF_MIN_US;
		ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
		        "axd ready: queue %s, scheduler lease epoch %" PRId64
		        " held by '%s' (ttl %lld ms), axd %s",
		        ax_config_str(d->cfg, "queue.address"), d->epoch,
		        d->holder, (long long) (d->ttl_us / AX_USEC_PER_MSEC),
		        AX_VERSION);
		if (lead(d) == LEAD_STOP) {
			stop_pipeline(d, 0);
			release(d);
			return EXIT_CLEAN;
		}
		stop_pipeline(d, 1);
		sched_alert(d, "LEASE_LOST", &d->alert_lost, 0,
		            "%s lost the scheduler lease (epoch %" PRId64
		            ") and stopped scheduling; it tries to take it "
		            "again",
		            d->holder, d->epoch);
		/* drop the session: frees the lock if it still lives */
		ax_store_sched_leader_close(d->leader);
		d->leader = NULL;
		d->epoch  = 0;
		ax_logf(
		    AX_LOG_WARN, COMP, "STANDBY", NULL,
		    "scheduling stopped; back to standby, taking the lease "
		    "again when it is free");
		if (drain_signals(d))
			return EXIT_CLEAN;
	}
}

/* Everything between the configuration and the exit status. */
static int
serve(axd *d)
{
	char   host[64] = "?";
	ax_err rv;

	if ((rv = resolve_dsn(d)) == AX_OK)
		d->ctx.dsn = d->dsn;
	if (rv != AX_OK || (rv = check_schema(d)) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "cannot start: %s",
		        ax_err_detail());
		return EXIT_RUNTIME;
	}
	d->ctx.cfg  = d->cfg;
	d->ctx.home = ax_config_str(d->cfg, "home");
	d->ttl_us   = ax_config_duration_us(d->cfg, "scheduler.lease_ttl");
	if (d->ttl_us < 3 * AX_USEC_PER_MSEC * 100)
		d->ttl_us = 3 * AX_USEC_PER_MSEC * 100; /* renew >= 100 ms */
	d->poll_us = ax_config_duration_us(d->cfg, "scheduler.standby_poll");
	if (d->poll_us < 10 * AX_USEC_PER_MSEC)
		d->poll_us = 10 * AX_USEC_PER_MSEC;
	(void) gethostname(host, sizeof(host) - 1);
	snprintf(d->holder, sizeof(d->holder), "axd %s pid %ld", host,
	         (long) getpid());
	open_sched_alerts(d);
	return cycles(d);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL;
	axd         d;
	int         c, level, code;

	while ((c = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'h':
			usage(stdout);
			return EXIT_CLEAN;
		case 'V':
			printf("axd %s\n", AX_VERSION);
			return EXIT_CLEAN;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "axd: unexpected argument '%s'\n",
		        argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	memset(&d, 0, sizeof(d));
	/* before any thread: only main() takes these signals */
	sigemptyset(&d.sigs);
	sigaddset(&d.sigs, SIGINT);
	sigaddset(&d.sigs, SIGTERM);
	sigaddset(&d.sigs, SIGUSR1); /* a fenced write (on_fenced) */
	pthread_sigmask(SIG_BLOCK, &d.sigs, NULL);
	d.sigfd = signalfd(-1, &d.sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d.sigfd < 0) {
		fprintf(stderr, "axd: signalfd: %s\n", strerror(errno));
		return EXIT_RUNTIME;
	}
	d.main_thread = pthread_self();
	ax_store_set_fence_hook(on_fenced, &d);
	signal(SIGPIPE, SIG_IGN);
	if (ax_config_load(config, &d.cfg) != AX_OK) {
		fprintf(stderr, "axd: %s\n", ax_err_detail());
		return EXIT_USAGE;
	}
	level = ax_log_level_parse(ax_config_str(d.cfg, "log.level"));
	ax_log_init(level < 0 ? AX_LOG_INFO : (ax_log_level) level, 2);
	code = serve(&d);
	axd_fini(&d);
	return code;
}
