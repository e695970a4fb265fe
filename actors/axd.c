/*
 * axd.c - the AX scheduler daemon: hosts the actor pipeline and the queue
 * service (DESIGN.md section 2).
 *
 * Role: main() resolves the database (database.dsn, or the embedded
 * cluster of `home`, which axctl starts: axd never starts PostgreSQL),
 * refuses a schema that is not exactly the one it was built for, takes
 * the scheduler lease, builds the pipeline context and every actor,
 * starts them and the control thread (actors/control.h), then renews the
 * lease until SIGINT/SIGTERM, and stops in order.
 *
 * Invariants:
 *  - At most one axd schedules per database: the scheduler_lease row
 *    (engine/store_sched.h) carries an epoch that grows at every take;
 *    the holder renews it every lease_ttl/3. While another holder's lease
 *    is valid axd waits as a standby (renewal attempts every lease_ttl/3)
 *    and takes over once it lapses. A renewal refused (epoch moved on) or
 *    impossible for a whole lease_ttl means another axd may be active:
 *    axd stops scheduling at once and exits 1, so its supervisor restarts
 *    it as a standby.
 *  - Every write of the pipeline is fenced by the epoch (store.h,
 *    "Fencing"): the actors open their connections with a DSN that
 *    carries it, so a transaction that finds the lease moved on writes
 *    nothing, and its fence hook wakes main() (SIGUSR1), which stops
 *    scheduling and exits 1 without waiting for the next renewal.
 *  - The lease is taken before the actors are built (the queue binds its
 *    worker address when added: a standby must not), and the LISTEN
 *    connection is open before the lease is taken, so a control payload
 *    sent once the lease is visible (what axctl waits for) is not lost.
 *  - Signals are blocked in every thread; only main() takes them
 *    (sigtimedwait), between lease renewals.
 *
 * Workload: one lease renewal every lease_ttl/3 (default 3.3 s); the
 * actors carry the scheduling load.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "hooks.h"
#include "instance_generator.h"
#include "log.h"
#include "migrate.h"
#include "pg_embed.h"
#include "pipeline.h"
#include "queue_service.h"
#include "renderer.h"
#include "resource_detector.h"
#include "result_handler.h"
#include "store.h"
#include "store_sched.h"
#include "time_detector.h"

#define COMP "axd"

/* Exit codes (see usage()). */
enum { EXIT_CLEAN = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

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
	ax_store                    *store;       /* main's own connection */
	ax_dag_registry             *reg;
	ax_pipeline_ctx              ctx;
	ax_actor_system             *sys;
	ax_control                  *ctl;
	ax_time_detector_stats       tds;
	ax_dependency_detector_stats dds;
	ax_queue                    *queue;
	ax_event_emitter            *emitter;
	sigset_t                     sigs; /* SIGINT, SIGTERM, SIGUSR1 */
} axd;

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axd [--config FILE] [--help] [--version]\n"
	    "\n"
	    "The AX scheduler: hosts the actor pipeline (DAG loader, time,\n"
	    "dependency and resource detectors, instance generator, "
	    "renderer,\n"
	    "hooks, result handler, event emitter) and the queue service.\n"
	    "It needs a running, migrated PostgreSQL: database.dsn, or the\n"
	    "embedded cluster of `home` (start it with `axctl db up`).\n"
	    "Only one axd schedules per database (the scheduler lease); a\n"
	    "second one waits as a standby and takes over when the lease\n"
	    "lapses.\n"
	    "\n"
	    "  -c, --config FILE  configuration file (YAML); AX_* variables\n"
	    "                     override its keys\n"
	    "  -h, --help         show this help\n"
	    "  -V, --version      show the version\n"
	    "\n"
	    "Exit status: 0 after a clean shutdown (SIGINT/SIGTERM), 1 on a\n"
	    "runtime error (database missing, schema not migrated, lease\n"
	    "lost), 2 on a usage error.\n");
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
 * Waits for SIGINT/SIGTERM for at most us; returns the signal, or 0 on
 * timeout.
 */
static int
wait_signal(axd *d, int64_t us)
{
	struct timespec ts;
	int             sig;

	if (us < 0)
		us = 0;
	ts.tv_sec  = us / AX_USEC_PER_SEC;
	ts.tv_nsec = (long) (us % AX_USEC_PER_SEC) * 1000;
	sig        = sigtimedwait(&d->sigs, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/*
 * Takes the lease, waiting as a standby while another axd holds it.
 * Returns AX_OK (d->epoch set), AX_ECLOSED when a signal asked to stop
 * meanwhile, or a database error that persisted.
 */
static ax_err
take_lease(axd *d)
{
	int64_t period = d->ttl_us / 3, logged = 0;
	ax_err  rv;

	for (;;) {
		rv = ax_store_sched_lease_take(d->store, d->holder, d->ttl_us,
		                               &d->epoch);
		if (rv == AX_OK)
			return AX_OK;
		if (rv == AX_EBUSY) {
			int64_t now = ax_clock_mono_us();
			if (logged == 0 ||
			    now - logged > 60 * AX_USEC_PER_SEC) {
				ax_logf(
				    AX_LOG_INFO, COMP, "STANDBY", NULL,
				    "standby: %s; retrying every %lld ms",
				    ax_err_detail(),
				    (long long) (period / AX_USEC_PER_MSEC));
				logged = now;
			}
		} else {
			ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
			        "cannot take the scheduler lease: %s",
			        ax_err_detail());
		}
		ax_control_discard(d->ctl);
		int sig = wait_signal(d, period);
		if (sig == SIGINT || sig == SIGTERM)
			return AX_ECLOSED;
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
	    (rv = ax_renderer_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_hooks_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_queue_add(d->sys, &d->ctx, &d->queue)) != AX_OK ||
	    (rv = ax_result_handler_add(d->sys, &d->ctx)) != AX_OK ||
	    (rv = ax_event_emitter_add(d->sys, &d->ctx, &d->emitter)) != AX_OK)
		return rv;
	return AX_OK;
}

/* Builds and starts the pipeline and the control thread. */
static ax_err
start_pipeline(axd *d)
{
	ax_err rv;

	if ((rv = ax_store_dsn_fenced(d->dsn, d->epoch, &d->fenced_dsn)) !=
	    AX_OK)
		return rv;
	d->ctx.cfg      = d->cfg;
	d->ctx.dsn      = d->fenced_dsn;
	d->ctx.home     = ax_config_str(d->cfg, "home");
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

/*
 * Renews the lease until a signal; returns 0 on SIGINT/SIGTERM, 1 when
 * the lease is lost (refused, not renewed for a whole lease_ttl, or a
 * fenced write: SIGUSR1 from on_fenced).
 */
static int
run(axd *d)
{
	int64_t period = d->ttl_us / 3, last_ok = ax_clock_mono_us();
	int64_t next = last_ok + period;
	int     sig;

	for (;;) {
		sig = wait_signal(d, next - ax_clock_mono_us());
		if (sig == SIGUSR1) {
			ax_logf(
			    AX_LOG_ERROR, COMP, "LEASE_LOST", NULL,
			    "a write of this axd was fenced: the scheduler "
			    "lease (epoch %" PRId64
			    ") was taken over: stopping scheduling",
			    d->epoch);
			return 1;
		}
		if (sig != 0) {
			ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
			        "%s received: stopping", strsignal(sig));
			return 0;
		}
		if (ax_clock_mono_us() < next)
			continue;
		next      = ax_clock_mono_us() + period;
		ax_err rv = ax_store_sched_lease_renew(d->store, d->holder,
		                                       d->epoch, d->ttl_us);
		if (rv == AX_OK) {
			last_ok = ax_clock_mono_us();
			continue;
		}
		if (rv == AX_EBUSY) {
			ax_logf(AX_LOG_ERROR, COMP, "LEASE_LOST", NULL,
			        "%s: stopping scheduling", ax_err_detail());
			return 1;
		}
		if (ax_clock_mono_us() - last_ok >= d->ttl_us) {
			ax_logf(AX_LOG_ERROR, COMP, "LEASE_LOST", NULL,
			        "the scheduler lease (epoch %" PRId64
			        ") could not be renewed for %lld ms and may "
			        "be taken over: stopping scheduling (%s)",
			        d->epoch,
			        (long long) ((ax_clock_mono_us() - last_ok) /
			                     AX_USEC_PER_MSEC),
			        ax_err_detail());
			return 1;
		}
		ax_logf(AX_LOG_WARN, COMP, "DB_UNAVAILABLE", NULL,
		        "scheduler lease renewal failed, retrying: %s",
		        ax_err_detail());
		next = ax_clock_mono_us() + period / 4;
	}
}

/* Ordered stop: control thread, actors (drain), lease. */
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

	memset(&qs, 0, sizeof(qs));
	memset(&es, 0, sizeof(es));
	if (d->ctl != NULL)
		ax_control_stats_get(d->ctl, &cs);
	ax_control_free(d->ctl);
	d->ctl = NULL;
	if (d->sys == NULL)
		return;
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
	        " dispatches=%" PRIu64 " results=%" PRIu64 " events=%" PRIu64
	        " control_ops=%" PRIu64 " control_malformed=%" PRIu64,
	        rep.drained ? "yes" : "no", rep.dropped,
	        (long long) (rep.drain_us / AX_USEC_PER_MSEC), d->tds.fires,
	        d->tds.manual, d->dds.planned, d->dds.succeeded, d->dds.failed,
	        qs.dispatches, qs.results, es.events, cs.received,
	        cs.malformed);
	ax_actor_system_free(d->sys);
	d->sys = NULL;
}

static void
axd_fini(axd *d)
{
	ax_control_free(d->ctl);
	ax_actor_system_free(d->sys);
	ax_dag_registry_free(d->reg);
	ax_store_close(d->store);
	free(d->fenced_dsn);
	ax_pg_embed_free(d->embed);
	ax_config_free(d->cfg);
}

/* Everything between the configuration and the exit status. */
static int
serve(axd *d)
{
	char   host[64] = "?";
	ax_err rv;
	int    lost;

	if ((rv = resolve_dsn(d)) == AX_OK)
		d->ctx.dsn = d->dsn;
	if (rv != AX_OK || (rv = check_schema(d)) != AX_OK ||
	    (rv = ax_store_open(d->dsn, &d->store)) != AX_OK ||
	    (rv = ax_control_new(&d->ctx, &d->ctl)) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "cannot start: %s",
		        ax_err_detail());
		return EXIT_RUNTIME;
	}
	d->ttl_us = ax_config_duration_us(d->cfg, "scheduler.lease_ttl");
	if (d->ttl_us < 3 * AX_USEC_PER_MSEC * 100)
		d->ttl_us = 3 * AX_USEC_PER_MSEC * 100; /* renew >= 100 ms */
	(void) gethostname(host, sizeof(host) - 1);
	snprintf(d->holder, sizeof(d->holder), "axd %s pid %ld", host,
	         (long) getpid());
	if ((rv = take_lease(d)) == AX_ECLOSED)
		return EXIT_CLEAN; /* stopped while standby */
	if (rv != AX_OK)
		return EXIT_RUNTIME;
	if ((rv = ax_dag_registry_new(&d->reg)) != AX_OK ||
	    (rv = start_pipeline(d)) != AX_OK) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL, "cannot start: %s",
		        ax_err_detail());
		stop_pipeline(d, 1);
		ax_store_sched_lease_release(d->store, d->holder, d->epoch);
		return EXIT_RUNTIME;
	}
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "axd ready: queue %s, scheduler lease epoch %" PRId64
	        " held by '%s' (ttl %lld ms), axd %s",
	        ax_config_str(d->cfg, "queue.address"), d->epoch, d->holder,
	        (long long) (d->ttl_us / AX_USEC_PER_MSEC), AX_VERSION);
	lost = run(d);
	stop_pipeline(d, lost);
	if (!lost &&
	    ax_store_sched_lease_release(d->store, d->holder, d->epoch) !=
	        AX_OK)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "could not release the scheduler lease (it lapses "
		        "by itself): %s",
		        ax_err_detail());
	return lost ? EXIT_RUNTIME : EXIT_CLEAN;
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
