/*
 * cmd_standalone.c - `axctl standalone [--home DIR] [--dags DIR]
 * [--workers N] [--port P]`: AX on one machine (DESIGN.md section 1).
 *
 * Role: brings up the embedded PostgreSQL of the home (or uses $AX_DSN),
 * migrates it, loads a DAG folder (the code of `axctl dag load`), starts
 * axd, N workers and ax-api through cli/stack.h, prints where everything
 * is, then shows progress until SIGINT or SIGTERM, when it stops the API,
 * the workers, axd and PostgreSQL, in that order, and exits 0.
 *
 * Supervision: a child that dies on its own (axd, a worker, ax-api) is
 * reported with its exit status or signal and the end of its log, and
 * started again after a backoff (stack.h: 100 ms doubling to 10 s, reset
 * after 60 s up); the others keep running. The embedded PostgreSQL is
 * probed once a second and started again the same way when it is gone;
 * the daemons reconnect on their own. Only a failure during start-up
 * ends standalone with exit status 1.
 *
 * Invariants: the children run in their own process groups, so a Ctrl-C
 * on the terminal reaches only axctl, which keeps the stop order. The
 * progress display runs one query per second on its own connection (a UI
 * refresh: the scheduler never depends on it).
 *
 * Workload: one process per installation; the display query scans the
 * runs and the instances, hot and in history (task_instances_all), fine
 * at demo scale (use the API beyond).
 */
#include "cmd_standalone.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cmd_dag.h"
#include "cmd_db.h"
#include "log.h"
#include "migrate.h"
#include "stack.h"
#include "store.h"

#define GRACE_US (20 * AX_USEC_PER_SEC)
#define SEEN_MAX 4096

static volatile sig_atomic_t g_stop; /* SIGINT / SIGTERM received */

static void
on_stop(int sig)
{
	g_stop = sig;
}

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl standalone [--home DIR] [--dags DIR] [--workers N]\n"
	    "                        [--port P]\n"
	    "\n"
	    "Runs AX on this machine: the embedded PostgreSQL (unless "
	    "$AX_DSN\n"
	    "names a database), axd, N workers and ax-api (when installed),\n"
	    "with the DAGs of a folder loaded; shows runs and instances as\n"
	    "they change until Ctrl-C or SIGTERM, which stop everything.\n"
	    "\n"
	    "  --home DIR   AX home: database, config, logs (default: "
	    "$AX_HOME,\n"
	    "               else ./.ax)\n"
	    "  --dags DIR   DAG folder to load (default: ./examples)\n"
	    "  --workers N  local workers, 1-64 (default: 2)\n"
	    "  --port P     port of the HTTP API (default: 8080)\n"
	    "\n"
	    "A daemon that dies is logged and started again (backoff 100 ms\n"
	    "doubling to 10 s); so is the embedded PostgreSQL.\n"
	    "\n"
	    "Logs: HOME/logs/axd.log, worker-N.log, ax-api.log, tasks/.\n"
	    "Exit status: 0 after a clean stop, 1 on a failure during "
	    "start-up,\n2 usage error.\n");
}

typedef struct sa_opts {
	const char *home;
	const char *dags;
	int         dags_given;
	int         workers;
	int         port;
} sa_opts;

/* Parses an integer option value in [lo, hi]; -1 on error (printed). */
static int
int_opt(const char *name, const char *v, int lo, int hi, int *out)
{
	char *end;
	long  n;

	errno = 0;
	n     = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) {
		fprintf(stderr,
		        "axctl standalone: %s must be an integer from %d to "
		        "%d, not '%s'\n",
		        name, lo, hi, v);
		return -1;
	}
	*out = (int) n;
	return 0;
}

/* 0 ok, 1 --help shown, 2 usage error. */
static int
parse(int argc, char **argv, sa_opts *o)
{
	o->home    = NULL;
	o->dags    = "examples";
	o->workers = 2;
	o->port    = 8080;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL, *eq = strchr(a, '=');
		char        name[32];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 1;
		}
		if (strncmp(a, "--", 2) != 0 ||
		    (eq != NULL && (size_t) (eq - a) >= sizeof(name))) {
			fprintf(stderr,
			        "axctl standalone: unexpected argument '%s'; "
			        "run `axctl standalone --help`\n",
			        a);
			return 2;
		}
		snprintf(name, sizeof(name), "%.*s",
		         (int) (eq != NULL ? eq - a : (ptrdiff_t) strlen(a)),
		         a);
		if (strcmp(name, "--home") != 0 &&
		    strcmp(name, "--dags") != 0 &&
		    strcmp(name, "--workers") != 0 &&
		    strcmp(name, "--port") != 0) {
			fprintf(stderr,
			        "axctl standalone: unknown option '%s'; run "
			        "`axctl standalone --help`\n",
			        name);
			return 2;
		}
		if (eq != NULL)
			v = eq + 1;
		else if (i + 1 < argc)
			v = argv[++i];
		if (v == NULL || v[0] == '\0') {
			fprintf(stderr, "axctl standalone: %s needs a value\n",
			        name);
			return 2;
		}
		if (strcmp(name, "--home") == 0)
			o->home = v;
		else if (strcmp(name, "--dags") == 0) {
			o->dags       = v;
			o->dags_given = 1;
		} else if (strcmp(name, "--workers") == 0) {
			if (int_opt(name, v, 1, AX_STACK_MAX_WORKERS,
			            &o->workers) != 0)
				return 2;
		} else if (int_opt(name, v, 1, 65535, &o->port) != 0)
			return 2;
	}
	return 0;
}

/* ---- progress display --------------------------------------------------
 */

typedef struct progress {
	ax_store *s;
	int       tty;
	int       line_shown; /* tty: a status line is on screen */
	char      last[512];  /* last status shown */
	int64_t   start_us;   /* runs finished before we started are old */
	int64_t   since_us;   /* lower bound of the next finished-run query */
	int64_t   seen[SEEN_MAX]; /* ids of runs already printed (ring) */
	size_t    n_seen;
	int       db_down; /* the last query failed (said once) */
} progress;

static const char *const status_sql =
    "SELECT 'r', coalesce(string_agg(lower(state) || ' ' || n, ', ' "
    "ORDER BY array_position(ARRAY['QUEUED','RUNNING','SUCCESS',"
    "'FAILED','CANCELED'], state)), 'none'), NULL, NULL, NULL, NULL "
    "FROM (SELECT state, count(*) n FROM dag_runs GROUP BY state) r "
    "UNION ALL "
    "SELECT 'i', coalesce(string_agg(lower(state) || ' ' || n, ', ' "
    "ORDER BY array_position(ARRAY['PENDING','READY','RUNNING',"
    "'SUCCESS','FAILED','TIMEOUT','UNKNOWN','CANCELED','SKIPPED'], "
    "state)), 'none'), NULL, NULL, NULL, NULL "
    "FROM (SELECT state, count(*) n FROM task_instances_all "
    "GROUP BY state) i "
    "UNION ALL "
    "SELECT 'n', ax_us(now())::text, NULL, NULL, NULL, NULL "
    "UNION ALL "
    "(SELECT 'f', r.id::text, d.name, r.state, "
    "to_char(r.logical_date AT TIME ZONE 'UTC', "
    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
    "round(extract(epoch FROM r.ended_at - coalesce(r.started_at, "
    "r.created_at))::numeric, 1)::text || 's, ' || "
    "(SELECT count(*) FILTER (WHERE state = 'SUCCESS') || '/' || "
    "count(*) FROM task_instances_all t WHERE t.dag_run_id = r.id) "
    "|| ' instances succeeded' "
    "FROM dag_runs r JOIN dags d ON d.id = r.dag_id "
    "WHERE r.ended_at > ax_ts($1) ORDER BY r.ended_at, r.id LIMIT 200)";

static int
seen(progress *p, int64_t id)
{
	size_t n = p->n_seen < SEEN_MAX ? p->n_seen : SEEN_MAX;
	for (size_t i = 0; i < n; i++)
		if (p->seen[i] == id)
			return 1;
	p->seen[p->n_seen++ % SEEN_MAX] = id;
	return 0;
}

static void
clear_line(progress *p)
{
	if (p->tty && p->line_shown) {
		fputs("\r\033[K", stdout);
		p->line_shown = 0;
	}
}

static void
show_status(progress *p, const char *runs, const char *insts)
{
	char      line[512], clock[16];
	time_t    t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	snprintf(line, sizeof(line), "runs: %s | instances: %s", runs, insts);
	if (p->tty) {
		clear_line(p);
		printf("%s  %s", clock, line);
		p->line_shown = 1;
	} else if (strcmp(line, p->last) != 0) {
		printf("%s  %s\n", clock, line);
	}
	snprintf(p->last, sizeof(p->last), "%s", line);
	fflush(stdout);
}

/* One refresh: one query, the finished runs then the status line. */
static void
refresh(progress *p)
{
	char        since[32];
	const char *params[] = { since };
	const char *runs = "?", *insts = "?";
	PGresult   *res = NULL;
	int64_t     now = 0;

	snprintf(since, sizeof(since), "%" PRId64, p->since_us);
	if (ax_store_query(p->s, status_sql, 1, params, &res) != AX_OK) {
		if (!p->db_down) {
			clear_line(p);
			printf("axctl standalone: status query failed: %s\n",
			       ax_err_detail());
		}
		p->db_down = 1;
		return;
	}
	p->db_down = 0;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *kind = PQgetvalue(res, i, 0);
		if (kind[0] == 'r')
			runs = PQgetvalue(res, i, 1);
		else if (kind[0] == 'i')
			insts = PQgetvalue(res, i, 1);
		else if (kind[0] == 'n')
			now = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		else if (!seen(p, strtoll(PQgetvalue(res, i, 1), NULL, 10))) {
			clear_line(p);
			printf("run %s %s %s %s (%s)\n", PQgetvalue(res, i, 1),
			       PQgetvalue(res, i, 2), PQgetvalue(res, i, 4),
			       PQgetvalue(res, i, 3), PQgetvalue(res, i, 5));
		}
	}
	show_status(p, runs, insts);
	PQclear(res);
	/* Rows committed late may carry an ended_at a little in the past:
	 * look 10 s back, the ring of printed ids drops repeats. */
	if (now - 10 * AX_USEC_PER_SEC > p->since_us)
		p->since_us = now - 10 * AX_USEC_PER_SEC;
	if (p->since_us < p->start_us)
		p->since_us = p->start_us;
}

/* ---- start and stop ----------------------------------------------------
 */

typedef struct standalone {
	sa_opts     o;
	ax_db_where w;
	ax_stack    st;
	int         stack_ready;
} standalone;

static int
fail(const char *what, ax_err rv)
{
	const char *d = ax_err_detail();
	fprintf(stderr, "axctl standalone: %s: %s\n", what,
	        d[0] != '\0' ? d : ax_strerror(rv));
	return 1;
}

static void
stop_all(standalone *sa, int verbose)
{
	if (sa->stack_ready) {
		if (verbose)
			printf("stopping workers and axd...\n");
		ax_stack_stop(&sa->st, GRACE_US);
	}
	if (sa->w.embed != NULL) {
		if (verbose)
			printf("stopping PostgreSQL...\n");
		if (ax_pg_embed_down(sa->w.embed) != AX_OK)
			fprintf(stderr,
			        "axctl standalone: stopping "
			        "PostgreSQL: %s\n",
			        ax_err_detail());
	}
	fflush(stdout);
}

static int
db_up(standalone *sa)
{
	int    applied = 0;
	ax_err rv;

	memset(&sa->w, 0, sizeof(sa->w));
	if ((rv = ax_db_where_init(&sa->w, sa->o.home, NULL)) != AX_OK)
		return fail("database", rv);
	if (sa->w.embed != NULL)
		printf("starting PostgreSQL in %s...\n",
		       ax_pg_embed_datadir(sa->w.embed));
	fflush(stdout);
	if ((rv = ax_db_where_up(&sa->w)) != AX_OK)
		return fail("database", rv);
	if ((rv = ax_migrate_run(sa->w.dsn, &applied)) != AX_OK)
		return fail("migrate", rv);
	if (applied > 0)
		printf("schema: applied %d migration(s)\n", applied);
	return 0;
}

static int
load_dags(standalone *sa)
{
	struct stat sb;

	if (stat(sa->o.dags, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		if (sa->o.dags_given) {
			fprintf(stderr,
			        "axctl standalone: --dags %s: not a folder\n",
			        sa->o.dags);
			return 1;
		}
		printf("no DAG folder ./examples here: starting with the "
		       "DAGs already stored\n");
		return 0;
	}
	printf("loading DAGs from %s:\n", sa->o.dags);
	fflush(stdout);
	if (ax_dag_load_dir(sa->o.dags, NULL, sa->w.dsn) != 0)
		printf("some DAGs were not loaded (errors above); the "
		       "others are\n");
	return 0;
}

/* A failure to write the admin token is reported but does not stop AX:
 * the scheduler runs without the API token. */
static void
ensure_admin_token(standalone *sa)
{
	char path[PATH_MAX + 16];

	if (ax_stack_admin_token(&sa->st, path, sizeof(path)) != AX_OK)
		fprintf(stderr, "axctl standalone: no admin token: %s\n",
		        ax_err_detail());
}

static void
print_where(standalone *sa, int api_up, const char *api_why)
{
	char token[PATH_MAX + 16], dsn[1024];

	printf("\nAX is running.\n");
	printf("  home:     %s\n", sa->st.home);
	printf("  database: %s%s\n",
	       ax_store_dsn_redact(sa->w.dsn, dsn, sizeof(dsn)),
	       sa->w.embed != NULL ? " (embedded)" : "");
	printf("  config:   %s\n", sa->st.config);
	printf("  logs:     %s (axd.log, worker-N.log, tasks/)\n",
	       sa->st.log_dir);
	printf("  workers:  %d, queue at %s\n", sa->st.n_workers,
	       sa->st.queue_addr);
	if (api_up)
		printf("  API:      http://127.0.0.1:%d\n", sa->o.port);
	else
		printf("  API:      not started (%s)\n", api_why);
	snprintf(token, sizeof(token), "%s/admin.token", sa->st.home);
	if (access(token, R_OK) == 0)
		printf("  admin token: %s\n", token);
	printf("Press Ctrl-C to stop.\n\n");
	fflush(stdout);
}

/*
 * Standalone runs everything on this machine, so each worker group that a
 * loaded DAG names (worker_group: etl, ...) gets one worker of its own
 * besides the --workers N of the default group: otherwise those tasks
 * would wait for a worker that never comes.
 */
static ax_err
start_group_workers(standalone *sa)
{
	ax_store *s;
	PGresult *res = NULL;
	ax_err    rv;

	if ((rv = ax_store_open(sa->w.dsn, &s)) != AX_OK)
		return rv;
	rv = ax_store_query(s,
	                    "SELECT DISTINCT t->>'worker_group' FROM dags d "
	                    "JOIN dag_versions v ON v.id = d.active_version_id"
	                    ", jsonb_array_elements(v.definition->'tasks') t "
	                    "WHERE coalesce(t->>'worker_group', 'default') "
	                    "<> 'default' ORDER BY 1",
	                    0, NULL, &res);
	for (int i = 0; rv == AX_OK && i < PQntuples(res); i++) {
		const char *g = PQgetvalue(res, i, 0);
		if ((rv = ax_stack_add_group_worker(&sa->st, g)) == AX_OK)
			printf("started a worker for worker group %s\n", g);
	}
	PQclear(res);
	ax_store_close(s);
	return rv;
}

static int
start_stack(standalone *sa)
{
	ax_stack_opts so = {
		.home     = sa->w.embed != NULL
		        ? ax_pg_embed_home(sa->w.embed)
		        : (sa->o.home != NULL ? sa->o.home : ".ax"),
		.dsn      = sa->w.dsn,
		.workers  = sa->o.workers,
		.api_port = sa->o.port,
	};
	char   why[1200] = "";
	int    api_up    = 0;
	ax_err rv;

	if ((rv = ax_stack_init(&sa->st, &so)) != AX_OK)
		return fail("home", rv);
	sa->stack_ready = 1;
	printf("starting axd...\n");
	fflush(stdout);
	if ((rv = ax_stack_start_axd(&sa->st, 60 * AX_USEC_PER_SEC)) != AX_OK)
		return fail("axd", rv);
	if ((rv = ax_stack_start_workers(&sa->st)) != AX_OK ||
	    (rv = start_group_workers(sa)) != AX_OK)
		return fail("workers", rv);
	/* The token before ax-api: once /healthz answers, a client finds
	 * admin.token in the home (written after, a fast client read none). */
	ensure_admin_token(sa);
	if ((rv = ax_stack_start_api(&sa->st, &api_up, why, sizeof(why))) !=
	    AX_OK)
		return fail("ax-api", rv);
	print_where(sa, api_up, why);
	return 0;
}

/*
 * One supervision pass over the daemons; what it says goes to stderr, on
 * a line of its own (the tty status line is cleared first).
 */
static void
supervise_children(standalone *sa, progress *p)
{
	char  *buf = NULL;
	size_t len = 0;
	FILE  *m   = open_memstream(&buf, &len);

	ax_stack_supervise(&sa->st, m != NULL ? m : stderr,
	                   "axctl standalone: ");
	if (m != NULL)
		fclose(m);
	if (len > 0) {
		clear_line(p);
		fputs(buf, stderr);
		fflush(stderr);
	}
	free(buf);
}

/*
 * Probes the embedded PostgreSQL once a second; when it is gone, reports
 * it with the end of its log and starts it again after the backoff of
 * stack.h (a start that fails doubles the delay).
 */
static void
supervise_pg(standalone *sa, progress *p, ax_stack_sup *sup, int64_t *next)
{
	int64_t now     = ax_clock_mono_us();
	int     running = 1;
	char    tail[4096];

	if (sa->w.embed == NULL || now < *next)
		return;
	*next = now + AX_USEC_PER_SEC;
	if (sup->restart_at == 0) {
		ax_pg_embed_status(sa->w.embed, &running);
		if (running)
			return;
		sup->backoff_us = ax_stack_next_backoff(sup, now);
		sup->restart_at = now + sup->backoff_us;
		clear_line(p);
		fprintf(stderr,
		        "axctl standalone: PostgreSQL is not running; "
		        "starting it again in %lld ms; end of %s:\n%s\n",
		        (long long) (sup->backoff_us / AX_USEC_PER_MSEC),
		        ax_pg_embed_logpath(sa->w.embed),
		        ax_proc_log_tail(ax_pg_embed_logpath(sa->w.embed), 10,
		                         tail, sizeof(tail)));
		*next = sup->restart_at;
		return;
	}
	if (now < sup->restart_at)
		return;
	sup->restart_at = 0;
	sup->restarts++;
	clear_line(p);
	if (ax_pg_embed_up(sa->w.embed) != AX_OK) {
		now             = ax_clock_mono_us();
		sup->backoff_us = ax_stack_next_backoff(sup, now);
		sup->restart_at = now + sup->backoff_us;
		fprintf(stderr,
		        "axctl standalone: cannot start PostgreSQL: %s; "
		        "trying again in %lld ms\n",
		        ax_err_detail(),
		        (long long) (sup->backoff_us / AX_USEC_PER_MSEC));
		*next = sup->restart_at;
		return;
	}
	sup->up_us = ax_clock_mono_us();
	fprintf(stderr, "axctl standalone: PostgreSQL started again\n");
}

/* Runs until SIGINT or SIGTERM (0); 1 when the status connection cannot
 * be opened at all. */
static int
watch(standalone *sa)
{
	progress     p;
	int64_t      next = 0, next_pg = 0;
	ax_stack_sup pg_sup;
	ax_err       rv;

	memset(&p, 0, sizeof(p));
	memset(&pg_sup, 0, sizeof(pg_sup));
	pg_sup.up_us = ax_clock_mono_us();
	p.tty        = isatty(1);
	p.start_us = p.since_us = ax_clock_utc_us();
	if ((rv = ax_store_open(sa->w.dsn, &p.s)) != AX_OK)
		return fail("status connection", rv);
	ax_store_set_reconnect_timeout(p.s, 500 * AX_USEC_PER_MSEC);
	while (!g_stop) {
		supervise_children(sa, &p);
		supervise_pg(sa, &p, &pg_sup, &next_pg);
		if (ax_clock_mono_us() >= next) {
			refresh(&p);
			next = ax_clock_mono_us() + AX_USEC_PER_SEC;
		}
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	clear_line(&p);
	printf("\n%s received: stopping\n",
	       g_stop == SIGINT ? "SIGINT" : "SIGTERM");
	ax_store_close(p.s);
	return 0;
}

int
ax_cmd_standalone(int argc, char **argv)
{
	standalone       sa;
	struct sigaction act;
	int              rc;

	memset(&sa, 0, sizeof(sa));
	if ((rc = parse(argc, argv, &sa.o)) != 0)
		return rc == 1 ? 0 : 2;
	{
		const char *lvl = getenv("AX_LOG_LEVEL");
		int         l   = lvl != NULL ? ax_log_level_parse(lvl) : -1;
		ax_log_init(l >= 0 ? (ax_log_level) l : AX_LOG_WARN, 2);
	}
	memset(&act, 0, sizeof(act));
	/* SA_RESTART: libpq and pg_embed must not see EINTR; the main
	 * loop looks at the flag every 100 ms. */
	act.sa_handler = on_stop;
	act.sa_flags   = SA_RESTART;
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = db_up(&sa);
	if (rc == 0 && !g_stop)
		rc = load_dags(&sa);
	if (rc == 0 && !g_stop)
		rc = start_stack(&sa);
	if (rc == 0 && !g_stop)
		rc = watch(&sa);
	else if (rc == 0)
		printf("signal received during start-up: stopping\n");
	stop_all(&sa, 1);
	ax_stack_fini(&sa.st);
	ax_db_where_fini(&sa.w);
	if (rc == 0)
		printf("stopped.\n");
	return rc;
}
