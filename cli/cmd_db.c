/*
 * cmd_db.c - `axctl db up | down | status | migrate | psql | maintain |
 * archive | restore`.
 *
 * Role: the operator's handle on AX's database. Without a DSN it manages
 * the embedded PostgreSQL cluster under the AX home (engine/pg_embed.h);
 * with --dsn / $AX_DSN it works on that database and never starts or stops
 * anything. Migrations come from engine/migrate.h.
 *
 * Invariants: every failure prints one line (or one detail block) on
 * stderr, prefixed `axctl db CMD:`, and exits 1; usage errors exit 2.
 * `up` leaves a running, migrated database; `up`, `down` and `migrate` are
 * idempotent.
 *
 * History (engine/history.h): `maintain` is the retention job (cron,
 * daily): finished runs moved to the instance history, months ahead
 * created, event and instance history months past
 * history.retention_days detached, older finished runs still hot deleted
 * in batches; `archive` writes old runs and months to files and removes
 * them; `restore` copies files back.
 *
 * Workload: one command per process.
 */
#include "cmd_db.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "history.h"
#include "log.h"
#include "migrate.h"
#include "store.h"

#define DSN_SHOW_MAX 1024

static void
usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: axctl db [--home DIR] [--dsn DSN] COMMAND [ARGS...]\n"
	    "\n"
	    "Commands:\n"
	    "  up        create and start the embedded PostgreSQL cluster\n"
	    "            when needed, then apply pending migrations\n"
	    "  down      stop the embedded cluster (fast shutdown)\n"
	    "  status    whether the server runs, the DSN, and the schema\n"
	    "            version of the database against this binary\n"
	    "  migrate   apply pending migrations (idempotent)\n"
	    "  psql [ARGS...]\n"
	    "            run psql on the database (ARGS go to psql)\n"
	    "  maintain [--config FILE]\n"
	    "            retention (run daily from cron): move the runs that\n"
	    "            finished history.hot_hours ago (default 24) to the\n"
	    "            month-partitioned instance history, create the\n"
	    "            partitions of the months ahead, detach the event "
	    "and\n"
	    "            instance history months that ended more than\n"
	    "            history.retention_days ago (default 180) and delete\n"
	    "            the finished runs (with instances and attempts)\n"
	    "            older than that; unfinished runs are kept\n"
	    "  archive --to DIR [--before YYYY-MM-DD] [--config FILE]\n"
	    "            write the finished runs older than --before "
	    "(default:\n"
	    "            the retention limit) to DIR/<table>_runs_*.csv.gz "
	    "and\n"
	    "            the months that end by then (and detached ones) to\n"
	    "            DIR/<table>_pYYYYMM.csv.gz, then remove them\n"
	    "  restore FILE...\n"
	    "            copy archive files back (runs, then instances, then\n"
	    "            attempts, then events)\n"
	    "\n"
	    "Options:\n"
	    "  --home DIR  AX home holding the embedded cluster in DIR/pg\n"
	    "              (default: $AX_HOME, else ./.ax)\n"
	    "  --dsn DSN   use this PostgreSQL instead (libpq conninfo or\n"
	    "              URI; default: $AX_DSN); nothing is started or\n"
	    "              stopped then\n"
	    "\n"
	    "Environment: AX_PGBIN the directory of initdb and postgres.\n"
	    "Exit status: 0 success, 1 failure (for status: the server does\n"
	    "not run or cannot be reached), 2 usage error.\n");
}

int
ax_db_where_opt(int argc, char **argv, int *i, const char **home,
                const char **dsn)
{
	static const struct {
		const char *name;
		size_t      len;
	} opts[]      = { { "--home", 6 }, { "--dsn", 5 } };
	const char *a = argv[*i];

	for (size_t k = 0; k < 2; k++) {
		const char **dst = k == 0 ? home : dsn;
		if (strncmp(a, opts[k].name, opts[k].len) != 0)
			continue;
		if (a[opts[k].len] == '=') {
			*dst = a + opts[k].len + 1;
			*i += 1;
		} else if (a[opts[k].len] == '\0') {
			if (*i + 1 >= argc) {
				fprintf(stderr, "axctl: %s needs a value\n",
				        opts[k].name);
				return -1;
			}
			*dst = argv[*i + 1];
			*i += 2;
		} else {
			continue;
		}
		if ((*dst)[0] == '\0') {
			fprintf(stderr, "axctl: %s needs a non-empty value\n",
			        opts[k].name);
			return -1;
		}
		return 1;
	}
	return 0;
}

ax_err
ax_db_where_init(ax_db_where *w, const char *home, const char *dsn)
{
	const char *env;

	w->dsn   = NULL;
	w->embed = NULL;
	if (dsn == NULL && (env = getenv("AX_DSN")) != NULL && env[0] != '\0')
		dsn = env;
	if (dsn != NULL) {
		w->dsn = dsn;
		return AX_OK;
	}
	if (home == NULL && (env = getenv("AX_HOME")) != NULL &&
	    env[0] != '\0')
		home = env;
	if (home == NULL)
		home = ".ax";
	ax_err rv = ax_pg_embed_new(home, NULL, &w->embed);
	if (rv == AX_OK)
		w->dsn = ax_pg_embed_dsn(w->embed);
	return rv;
}

/* Connects once to an explicit DSN to tell "unreachable" early. */
static ax_err
check_dsn(const char *dsn)
{
	char    shown[DSN_SHOW_MAX];
	PGconn *c  = PQconnectdb(dsn);
	ax_err  rv = AX_OK;
	if (PQstatus(c) != CONNECTION_OK) {
		char  *msg = PQerrorMessage(c);
		size_t n   = strlen(msg);
		while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
			msg[--n] = '\0';
		rv = ax_err_set(AX_EDBCONN, "cannot connect to %s: %s",
		                ax_store_dsn_redact(dsn, shown, sizeof(shown)),
		                msg);
	}
	PQfinish(c);
	return rv;
}

ax_err
ax_db_where_up(ax_db_where *w)
{
	if (w->embed != NULL)
		return ax_pg_embed_up(w->embed);
	return check_dsn(w->dsn);
}

void
ax_db_where_fini(ax_db_where *w)
{
	ax_pg_embed_free(w->embed);
	w->embed = NULL;
	w->dsn   = NULL;
}

/* ---- subcommands -------------------------------------------------------- */

static int
fail(const char *cmd, ax_err rv)
{
	const char *d = ax_err_detail();
	fprintf(stderr, "axctl db %s: %s\n", cmd,
	        d[0] != '\0' ? d : ax_strerror(rv));
	return 1;
}

/* The embedded DSN has no password: shown as is, so it can be pasted. */
static const char *
shown_dsn(const ax_db_where *w, char *buf, size_t len)
{
	if (w->embed != NULL)
		return w->dsn;
	return ax_store_dsn_redact(w->dsn, buf, len);
}

static int
cluster_initialised(const ax_db_where *w)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/PG_VERSION",
	         ax_pg_embed_datadir(w->embed));
	return access(path, F_OK) == 0;
}

/* Applies pending migrations and prints the outcome. */
static int
migrate(const char *cmd, ax_db_where *w)
{
	int    applied = 0, dbv = 0, binv = 0;
	ax_err rv = ax_migrate_run(w->dsn, &applied);
	if (rv != AX_OK) {
		if (applied > 0)
			printf("applied %d migration(s) before the failure\n",
			       applied);
		return fail(cmd, rv);
	}
	if ((rv = ax_migrate_status(w->dsn, &dbv, &binv)) != AX_OK)
		return fail(cmd, rv);
	if (applied > 0)
		printf("schema: applied %d migration(s), now at version %d\n",
		       applied, dbv);
	else
		printf("schema: up to date (version %d)\n", dbv);
	return 0;
}

static int
cmd_up(ax_db_where *w)
{
	char   buf[DSN_SHOW_MAX];
	int    existed = 1, running = 1;
	ax_err rv;

	if (w->embed != NULL) {
		existed = cluster_initialised(w);
		if ((rv = ax_pg_embed_status(w->embed, &running)) != AX_OK)
			return fail("up", rv);
	}
	if ((rv = ax_db_where_up(w)) != AX_OK)
		return fail("up", rv);
	if (w->embed == NULL)
		printf("server: reachable (external DSN; nothing to start)\n");
	else if (!existed)
		printf("server: created and started the cluster in %s\n",
		       ax_pg_embed_datadir(w->embed));
	else if (!running)
		printf("server: started (data %s)\n",
		       ax_pg_embed_datadir(w->embed));
	else
		printf("server: already running (data %s)\n",
		       ax_pg_embed_datadir(w->embed));
	printf("dsn:    %s\n", shown_dsn(w, buf, sizeof(buf)));
	return migrate("up", w);
}

static int
cmd_down(ax_db_where *w)
{
	int    running = 0;
	ax_err rv;

	if (w->embed == NULL) {
		fprintf(
		    stderr,
		    "axctl db down: a DSN is configured (--dsn or AX_DSN); "
		    "axctl only stops the embedded cluster it runs\n");
		return 1;
	}
	if ((rv = ax_pg_embed_status(w->embed, &running)) != AX_OK ||
	    (rv = ax_pg_embed_down(w->embed)) != AX_OK)
		return fail("down", rv);
	printf("server: %s (data %s)\n",
	       running ? "stopped" : "was not running",
	       ax_pg_embed_datadir(w->embed));
	return 0;
}

static void
print_schema(int dbv, int binv)
{
	if (dbv == binv)
		printf("schema: migrated (version %d)\n", dbv);
	else if (dbv < binv)
		printf("schema: %d pending (database version %d, binary "
		       "version %d); run `axctl db migrate`\n",
		       binv - dbv, dbv, binv);
	else
		printf("schema: database version %d is newer than this "
		       "binary (%d); upgrade axctl\n",
		       dbv, binv);
}

static int
cmd_status(ax_db_where *w)
{
	char   buf[DSN_SHOW_MAX];
	int    running = 0, dbv = 0, binv = 0;
	ax_err rv;

	if (w->embed != NULL) {
		if ((rv = ax_pg_embed_status(w->embed, &running)) != AX_OK)
			return fail("status", rv);
		printf("server: %s (embedded, data %s)\n",
		       running ? "running"
		               : (cluster_initialised(w) ? "stopped"
		                                         : "not created"),
		       ax_pg_embed_datadir(w->embed));
		printf("dsn:    %s\n", shown_dsn(w, buf, sizeof(buf)));
		if (!running) {
			printf("schema: unknown (server not running; start it "
			       "with `axctl db up`)\n");
			return 1;
		}
	}
	rv = ax_migrate_status(w->dsn, &dbv, &binv);
	if (w->embed == NULL) {
		printf("server: %s (external DSN)\n",
		       rv == AX_EDBCONN ? "unreachable" : "reachable");
		printf("dsn:    %s\n", shown_dsn(w, buf, sizeof(buf)));
	}
	if (rv != AX_OK)
		return fail("status", rv);
	print_schema(dbv, binv);
	return 0;
}

static int
cmd_migrate(ax_db_where *w)
{
	ax_err rv;
	if ((rv = ax_db_where_up(w)) != AX_OK)
		return fail("migrate", rv);
	return migrate("migrate", w);
}

/* Replaces the process with psql on the DSN; extra args follow. */
static int
cmd_psql(ax_db_where *w, char **extra, int nextra)
{
	char   psql[4096];
	char **argv = calloc((size_t) nextra + 4, sizeof(char *));
	ax_err rv;

	if (argv == NULL)
		return fail("psql", ax_err_set(AX_ENOMEM, "out of memory"));
	/* Only the embedded cluster is started; a DSN is psql's to try. */
	if (w->embed != NULL && (rv = ax_db_where_up(w)) != AX_OK) {
		free(argv);
		return fail("psql", rv);
	}
	snprintf(psql, sizeof(psql), "psql");
	if (w->embed != NULL) {
		snprintf(psql, sizeof(psql), "%s/psql",
		         ax_pg_embed_pgbin(w->embed));
		if (access(psql, X_OK) != 0)
			snprintf(psql, sizeof(psql), "psql");
	}
	argv[0] = "psql";
	argv[1] = "--dbname";
	argv[2] = (char *) w->dsn;
	for (int k = 0; k < nextra; k++)
		argv[3 + k] = extra[k];
	fflush(NULL);
	execvp(psql, argv);
	fprintf(
	    stderr,
	    "axctl db psql: cannot run %s: %s; install postgresql-client-15 "
	    "or put psql on PATH\n",
	    psql, strerror(errno));
	free(argv);
	return 1;
}

/* Options of maintain / archive; positional arguments go to files. */
typedef struct hist_opts {
	const char  *config;
	const char  *to;
	const char  *before;
	const char **files;
	int          nfiles;
} hist_opts;

static int
hist_parse(const char *cmd, char **extra, int nextra, hist_opts *o)
{
	for (int k = 0; k < nextra; k++) {
		const char *a = extra[k], **dst = NULL;
		if (strcmp(a, "--config") == 0)
			dst = &o->config;
		else if (strcmp(a, "--to") == 0 && strcmp(cmd, "archive") == 0)
			dst = &o->to;
		else if (strcmp(a, "--before") == 0 &&
		         strcmp(cmd, "archive") == 0)
			dst = &o->before;
		else if (a[0] != '-' && strcmp(cmd, "restore") == 0) {
			o->files[o->nfiles++] = a;
			continue;
		}
		if (dst == NULL) {
			fprintf(stderr,
			        "axctl db %s: unexpected argument '%s'; run "
			        "`axctl db --help`\n",
			        cmd, a);
			return 2;
		}
		if (k + 1 >= nextra) {
			fprintf(stderr, "axctl db %s: %s needs a value\n", cmd,
			        a);
			return 2;
		}
		*dst = extra[++k];
	}
	return 0;
}

/* "YYYY-MM-DD" as UTC midnight in microseconds; -1 when malformed. */
static int
parse_day(const char *s, int64_t *us)
{
	struct tm tm = { 0 };
	int       y, m, d, n = 0;
	if (sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) != 3 || s[n] != '\0' ||
	    n != 10 || y < 1970 || m < 1 || m > 12 || d < 1 || d > 31)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon  = m - 1;
	tm.tm_mday = d;
	time_t t   = timegm(&tm);
	if (tm.tm_mday != d) /* 2025-02-30 normalised into March */
		return -1;
	*us = (int64_t) t * 1000000;
	return 0;
}

static void
hist_print(void *arg, const char *what, const char *name, const char *path,
           int64_t rows)
{
	(void) arg;
	if (strcmp(what, "kept") == 0)
		printf("kept:     %lld %s older than the limit: they stay "
		       "until they finish\n",
		       (long long) rows, name);
	else if (strcmp(what, "archived") == 0)
		printf("archived: %s (%lld rows) -> %s\n", name,
		       (long long) rows, path);
	else if (strcmp(what, "detached") == 0)
		printf("detached: %s\n", name);
	else
		printf("%-9s %lld %s\n", what, (long long) rows, name);
}

/* Loads the configuration and opens the store for a history command. */
static int
hist_open(const char *cmd, ax_db_where *w, const hist_opts *o, ax_config **cfg,
          ax_store **st)
{
	ax_err rv;
	if ((rv = ax_config_load(o->config, cfg)) != AX_OK)
		return fail(cmd, rv);
	if ((rv = ax_db_where_up(w)) != AX_OK ||
	    (rv = ax_store_open(w->dsn, st)) != AX_OK) {
		ax_config_free(*cfg);
		return fail(cmd, rv);
	}
	return 0;
}

static int
cmd_maintain(ax_db_where *w, const hist_opts *o)
{
	ax_config *cfg;
	ax_store  *st;
	int        rc;
	ax_err     rv;

	if ((rc = hist_open("maintain", w, o, &cfg, &st)) != 0)
		return rc;
	rv = ax_history_maintain(
	    st, (int) ax_config_int(cfg, "history.retention_days"),
	    (int) ax_config_int(cfg, "history.hot_hours"),
	    (int) ax_config_int(cfg, "history.partitions_ahead"), hist_print,
	    NULL);
	ax_store_close(st);
	ax_config_free(cfg);
	return rv != AX_OK ? fail("maintain", rv) : 0;
}

static int
cmd_archive(ax_db_where *w, const hist_opts *o)
{
	ax_config *cfg;
	ax_store  *st;
	int64_t    before = 0;
	int        rc;
	ax_err     rv;

	if (o->to == NULL) {
		fprintf(stderr,
		        "axctl db archive: --to DIR is required (the "
		        "directory the files go to)\n");
		return 2;
	}
	if (o->before != NULL && parse_day(o->before, &before) != 0) {
		fprintf(stderr,
		        "axctl db archive: --before '%s': expected a date "
		        "YYYY-MM-DD (UTC), e.g. 2026-01-01\n",
		        o->before);
		return 2;
	}
	if ((rc = hist_open("archive", w, o, &cfg, &st)) != 0)
		return rc;
	rv = AX_OK;
	if (o->before == NULL)
		rv = ax_history_cutoff(
		    (int) ax_config_int(cfg, "history.retention_days"),
		    ax_clock_utc_us(), &before);
	if (rv == AX_OK)
		rv = ax_history_archive(st, before, o->to, hist_print, NULL);
	ax_store_close(st);
	ax_config_free(cfg);
	return rv != AX_OK ? fail("archive", rv) : 0;
}

static int
cmp_rank(const void *a, const void *b)
{
	int x = ax_history_restore_rank(*(const char *const *) a);
	int y = ax_history_restore_rank(*(const char *const *) b);
	return x != y
	    ? x - y
	    : strcmp(*(const char *const *) a, *(const char *const *) b);
}

static int
cmd_restore(ax_db_where *w, hist_opts *o)
{
	ax_config *cfg;
	ax_store  *st;
	int        rc;
	ax_err     rv = AX_OK;

	if (o->nfiles == 0) {
		fprintf(stderr,
		        "axctl db restore: name the archive files "
		        "(DIR/<table>_pYYYYMM.csv.gz)\n");
		return 2;
	}
	/* runs before their instances before their attempts */
	qsort(o->files, (size_t) o->nfiles, sizeof(*o->files), cmp_rank);
	if ((rc = hist_open("restore", w, o, &cfg, &st)) != 0)
		return rc;
	for (int k = 0; k < o->nfiles && rv == AX_OK; k++) {
		int64_t rows = 0;
		if ((rv = ax_history_restore(st, o->files[k], &rows)) == AX_OK)
			printf("restored: %s (%lld rows)\n", o->files[k],
			       (long long) rows);
	}
	ax_store_close(st);
	ax_config_free(cfg);
	return rv != AX_OK ? fail("restore", rv) : 0;
}

static ax_log_level
log_level(void)
{
	const char *env = getenv("AX_LOG_LEVEL");
	int         lvl = env != NULL ? ax_log_level_parse(env) : -1;
	return lvl >= 0 ? (ax_log_level) lvl : AX_LOG_WARN;
}

int
ax_cmd_db(int argc, char **argv)
{
	const char *home = NULL, *dsn = NULL, *sub = NULL;
	char      **extra  = calloc((size_t) argc + 1, sizeof(char *));
	int         nextra = 0, rc, i = 1;
	ax_db_where w;
	ax_err      rv;

	if (extra == NULL) {
		fprintf(stderr, "axctl db: out of memory\n");
		return 1;
	}
	while (i < argc) {
		int r = ax_db_where_opt(argc, argv, &i, &home, &dsn);
		if (r < 0) {
			free(extra);
			return 2;
		}
		if (r > 0)
			continue;
		const char *a = argv[i++];
		if (sub != NULL && strcmp(sub, "psql") == 0) {
			if (strcmp(a, "--") != 0 || nextra > 0)
				extra[nextra++] = (char *) a;
		} else if (sub != NULL &&
		           (strcmp(sub, "maintain") == 0 ||
		            strcmp(sub, "archive") == 0 ||
		            strcmp(sub, "restore") == 0)) {
			extra[nextra++] = (char *) a;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			free(extra);
			return 0;
		} else if (a[0] == '-' || sub != NULL) {
			fprintf(
			    stderr,
			    "axctl db: unexpected argument '%s'; run `axctl "
			    "db --help`\n",
			    a);
			free(extra);
			return 2;
		} else {
			sub = a;
		}
	}
	if (sub == NULL) {
		usage(stderr);
		free(extra);
		return 2;
	}
	if (strcmp(sub, "up") != 0 && strcmp(sub, "down") != 0 &&
	    strcmp(sub, "status") != 0 && strcmp(sub, "migrate") != 0 &&
	    strcmp(sub, "psql") != 0 && strcmp(sub, "maintain") != 0 &&
	    strcmp(sub, "archive") != 0 && strcmp(sub, "restore") != 0) {
		fprintf(stderr,
		        "axctl db: unknown command '%s'; expected up, down, "
		        "status, migrate, psql, maintain, archive or "
		        "restore\n",
		        sub);
		free(extra);
		return 2;
	}
	hist_opts ho = { .files = (const char **) extra };
	if (strcmp(sub, "psql") != 0 &&
	    (rc = hist_parse(sub, extra, nextra, &ho)) != 0) {
		free(extra);
		return rc;
	}
	ax_log_init(log_level(), 2);
	if ((rv = ax_db_where_init(&w, home, dsn)) != AX_OK) {
		free(extra);
		return fail(sub, rv);
	}
	if (strcmp(sub, "up") == 0)
		rc = cmd_up(&w);
	else if (strcmp(sub, "down") == 0)
		rc = cmd_down(&w);
	else if (strcmp(sub, "status") == 0)
		rc = cmd_status(&w);
	else if (strcmp(sub, "migrate") == 0)
		rc = cmd_migrate(&w);
	else if (strcmp(sub, "maintain") == 0)
		rc = cmd_maintain(&w, &ho);
	else if (strcmp(sub, "archive") == 0)
		rc = cmd_archive(&w, &ho);
	else if (strcmp(sub, "restore") == 0)
		rc = cmd_restore(&w, &ho);
	else
		rc = cmd_psql(&w, extra, nextra);
	ax_db_where_fini(&w);
	free(extra);
	return rc;
}
