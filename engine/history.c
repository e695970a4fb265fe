/*
 * history.c - the move to the instance history, retention, archive and
 * restore of AX's history (see history.h; the partitions and the SQL
 * functions this file calls are in engine/migrations/
 * 0015_event_log_partitions.sql and 0022_instance_history.sql).
 *
 * A file is written as DIR/.<name>.tmp through zlib from a COPY ... TO
 * STDOUT, closed and fsynced, linked to DIR/<name> (link fails when the
 * name exists: never overwrite) and the directory fsynced; only then do
 * its rows leave (DROP of a detached month; DELETE of a batch of
 * runs, committed after its three files are linked). Restore streams a
 * file back with COPY FROM STDIN in one transaction.
 *
 * Sessions doing either set DateStyle ISO and TimeZone UTC, so a file
 * written by one server reads back the same on another.
 */
#include "history.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <libpq-fe.h>

#include "clock.h"

#define CHUNK 65536

static const char *const tables[] = { "dag_runs", "task_instances", "attempts",
	                              "event_log" };

/* The rows of a batch of runs (temp table ax_arch_runs), per table. */
static const char *const batch_sql[] = {
	"SELECT r.* FROM dag_runs r JOIN ax_arch_runs b ON b.id = r.id "
	"ORDER BY r.id",
	"SELECT ti.* FROM task_instances ti JOIN ax_arch_runs b "
	"ON b.id = ti.dag_run_id ORDER BY ti.id",
	"SELECT a.* FROM attempts a JOIN task_instances ti "
	"ON ti.id = a.instance_id JOIN ax_arch_runs b ON b.id = ti.dag_run_id "
	"ORDER BY a.id",
};

ax_err
ax_history_cutoff(int days, int64_t now_us, int64_t *before_us)
{
	if (days < 1 || days > 36500)
		return ax_err_set(
		    AX_EINVAL,
		    "history.retention_days is %d: give a number "
		    "of days from 1 to 36500 (default 180)",
		    days);
	*before_us = now_us - (int64_t) days * 86400 * 1000000;
	return AX_OK;
}

ax_err
ax_history_ensure(ax_store *s, int ahead, int *created)
{
	char        a[16];
	const char *p[1] = { a };
	int64_t     n    = 0;
	ax_err      rv;

	if (created != NULL)
		*created = 0;
	if (ahead < 0 || ahead > 120)
		return ax_err_set(AX_EINVAL,
		                  "history.partitions_ahead is %d: give 0 to "
		                  "120 months",
		                  ahead);
	snprintf(a, sizeof(a), "%d", ahead);
	rv = ax_store_query_int64(s, "SELECT ax_history_ensure($1::int)", 1, p,
	                          &n);
	if (rv == AX_OK && created != NULL)
		*created = (int) n;
	return rv;
}

/* Runs ax_history_detach(before); reports each month detached. */
static ax_err
detach(ax_store *s, int64_t before_us, ax_history_fn fn, void *arg)
{
	char        b[32];
	const char *p[1] = { b };
	PGresult   *r    = NULL;
	ax_err      rv;

	snprintf(b, sizeof(b), "%lld", (long long) before_us);
	/* A writer ahead of us holds event_log: wait a while, then give up
	 * rather than stall the event writers behind our lock queue. */
	if ((rv = ax_store_exec(s, "SET lock_timeout = '10s'", 0, NULL)) !=
	    AX_OK)
		return rv;
	rv = ax_store_query(
	    s, "SELECT d FROM ax_history_detach(ax_ts($1::bigint)) d", 1, p,
	    &r);
	(void) ax_store_exec(s, "RESET lock_timeout", 0, NULL);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++)
		if (fn != NULL)
			fn(arg, "detached", PQgetvalue(r, i, 0), NULL, 0);
	PQclear(r);
	return AX_OK;
}

/* Reports how many runs older than before_us stay: unfinished ones (or
 * ones another transaction held while the batches ran). Runs whose rows
 * are in history leave with their month, not counted. */
static ax_err
report_kept(ax_store *s, int64_t before_us, ax_history_fn fn, void *arg)
{
	char        b[32];
	const char *p[1] = { b };
	int64_t     n    = 0;
	ax_err      rv;

	snprintf(b, sizeof(b), "%lld", (long long) before_us);
	rv = ax_store_query_int64(s,
	                          "SELECT count(*) FROM dag_runs WHERE "
	                          "logical_date < ax_ts($1::bigint) AND "
	                          "history_at IS NULL",
	                          1, p, &n);
	if (rv == AX_OK && n > 0 && fn != NULL)
		fn(arg, "kept", "unfinished runs", NULL, n);
	return rv;
}

ax_err
ax_history_move(ax_store *s, int64_t ended_before_us, int64_t logical_from_us,
                int64_t budget_us, int64_t *moved, int *more)
{
	char        e[32], l[32], bs[16];
	const char *p[3] = { e, l, bs };
	int64_t     n = 0, t0 = ax_clock_mono_us();
	ax_err      rv;

	*moved = 0;
	if (more != NULL)
		*more = 0;
	snprintf(e, sizeof(e), "%lld", (long long) ended_before_us);
	snprintf(l, sizeof(l), "%lld", (long long) logical_from_us);
	snprintf(bs, sizeof(bs), "%d", AX_HISTORY_MOVE_BATCH);
	do {
		/* autocommit: one transaction per batch */
		rv = ax_store_query_int64(
		    s,
		    "SELECT ax_history_move("
		    "ax_ts($1::bigint), ax_ts($2::bigint), "
		    "$3::int)",
		    3, p, &n);
		if (rv != AX_OK)
			return rv;
		*moved += n;
	} while (n == AX_HISTORY_MOVE_BATCH &&
	         (budget_us <= 0 || ax_clock_mono_us() - t0 < budget_us));
	if (more != NULL)
		*more = n == AX_HISTORY_MOVE_BATCH;
	return AX_OK;
}

ax_err
ax_history_restore_instance_run(ax_store *s, int64_t instance_id,
                                int *restored)
{
	char        id[24];
	const char *p[1] = { id };
	int64_t     n    = 0;
	ax_err      rv;

	snprintf(id, sizeof(id), "%lld", (long long) instance_id);
	rv = ax_store_query_int64(s,
	                          "SELECT ax_history_restore_run((SELECT "
	                          "dag_run_id FROM task_instances_history "
	                          "WHERE id = $1::bigint))::int",
	                          1, p, &n);
	if (restored != NULL)
		*restored = rv == AX_OK && n == 1;
	return rv;
}

ax_err
ax_history_hot_cutoff(int hours, int64_t now_us, int64_t *before_us)
{
	if (hours < 0 || hours > 8760)
		return ax_err_set(AX_EINVAL,
		                  "history.hot_hours is %d: give 0 to 8760 "
		                  "hours (default 24)",
		                  hours);
	*before_us = now_us - (int64_t) hours * 3600 * 1000000;
	return AX_OK;
}

ax_err
ax_history_maintain(ax_store *s, int retention_days, int hot_hours, int ahead,
                    ax_history_fn fn, void *arg)
{
	int64_t     before, hot, now = ax_clock_utc_us(), n, total = 0;
	int         created = 0;
	char        b[32], bs[16];
	const char *p[2] = { b, bs };
	ax_err      rv;

	if ((rv = ax_history_cutoff(retention_days, now, &before)) != AX_OK ||
	    (rv = ax_history_hot_cutoff(hot_hours, now, &hot)) != AX_OK ||
	    (rv = ax_history_ensure(s, ahead, &created)) != AX_OK)
		return rv;
	if (fn != NULL && created > 0)
		fn(arg, "created", "month partition(s) ahead", NULL, created);
	/* runs older than the retention are deleted below, not moved */
	if ((rv = ax_history_move(s, hot, before, 0, &n, NULL)) != AX_OK)
		return rv;
	if (fn != NULL && n > 0)
		fn(arg, "moved", "runs (instances and attempts to history)",
		   NULL, n);
	if ((rv = detach(s, before, fn, arg)) != AX_OK)
		return rv;
	snprintf(b, sizeof(b), "%lld", (long long) before);
	snprintf(bs, sizeof(bs), "%d", AX_HISTORY_BATCH);
	do {
		/* autocommit: one transaction per batch */
		rv = ax_store_query_int64(s,
		                          "SELECT ax_history_delete_runs("
		                          "ax_ts($1::bigint), $2::int)",
		                          2, p, &n);
		total += rv == AX_OK ? n : 0;
	} while (rv == AX_OK && n > 0);
	if (rv != AX_OK)
		return rv;
	if (fn != NULL && total > 0)
		fn(arg, "deleted", "runs (with their instances and attempts)",
		   NULL, total);
	return report_kept(s, before, fn, arg);
}

/* AX_EDB (or the SQLSTATE's code) from a failed COPY result. */
static ax_err
copy_err(PGconn *c, PGresult *r, const char *what)
{
	const char *st =
	    r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg =
	    r != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *det =
	    r != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : NULL;
	return ax_err_set(
	    ax_store_sqlstate_err(st), "%s: %s [SQLSTATE %s]%s%s", what,
	    msg != NULL ? msg : PQerrorMessage(c), st != NULL ? st : "?",
	    det != NULL ? "; " : "", det != NULL ? det : "");
}

static ax_err
session_iso(ax_store *s)
{
	return ax_store_exec(s,
	                     "SELECT set_config('DateStyle', 'ISO', false), "
	                     "set_config('TimeZone', 'UTC', false), "
	                     "set_config('client_encoding', 'UTF8', false)",
	                     0, NULL);
}

/* COPY (query) out as CSV with a header into the gzip stream gz; *rows
 * gets the row count. */
static ax_err
copy_out(ax_store *s, const char *query, gzFile gz, const char *name,
         int64_t *rows)
{
	PGconn   *c = ax_store_conn(s);
	char      sql[1024];
	char     *buf;
	int       n;
	PGresult *r;
	ax_err    rv = AX_OK;

	snprintf(sql, sizeof(sql),
	         "COPY (%s) TO STDOUT WITH (FORMAT csv, HEADER)", query);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COPY_OUT) {
		rv = copy_err(c, r, "archive: COPY out");
		PQclear(r);
		return rv;
	}
	PQclear(r);
	while ((n = PQgetCopyData(c, &buf, 0)) > 0) {
		if (rv == AX_OK && gzwrite(gz, buf, (unsigned) n) != n)
			rv = ax_err_set(AX_EIO, "archive: cannot write %s: %s",
			                name, strerror(errno));
		PQfreemem(buf);
	}
	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) == PGRES_COMMAND_OK)
			*rows = strtoll(PQcmdTuples(r), NULL, 10);
		else if (rv == AX_OK)
			rv = copy_err(c, r, "archive: COPY out");
		PQclear(r);
	}
	if (rv == AX_OK && n == -2)
		rv = copy_err(c, NULL, "archive: COPY out");
	return rv;
}

static ax_err
fsync_path(const char *path, int dir)
{
	int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
	if (fd < 0 || fsync(fd) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ax_err_set(AX_EIO, "archive: cannot flush %s: %s", path,
		                  strerror(e));
	}
	close(fd);
	return AX_OK;
}

/* A file being written: its final and temporary paths. */
typedef struct afile {
	char path[PATH_MAX];
	char tmp[PATH_MAX];
} afile;

/* Sets f's paths for dir/name; AX_EEXIST when the final one exists. */
static ax_err
afile_init(afile *f, const char *dir, const char *name)
{
	if ((size_t) snprintf(f->path, sizeof(f->path), "%s/%s", dir, name) >=
	        sizeof(f->path) ||
	    (size_t) snprintf(f->tmp, sizeof(f->tmp), "%s/.%s.tmp", dir,
	                      name) >= sizeof(f->tmp))
		return ax_err_set(AX_EINVAL,
		                  "archive: directory %s: path too long", dir);
	if (access(f->path, F_OK) == 0)
		return ax_err_set(
		    AX_EEXIST,
		    "archive: %s exists; refusing to overwrite it (its "
		    "rows stay in the database): move it away or archive "
		    "to another directory",
		    f->path);
	return AX_OK;
}

/* Writes the result of query to f->tmp (gzip CSV), flushed to disk. */
static ax_err
afile_write(ax_store *s, afile *f, const char *query, int64_t *rows)
{
	int    fd, zfd;
	gzFile gz;
	ax_err rv;

	if ((fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	               0640)) < 0)
		return ax_err_set(AX_EIO, "archive: cannot create %s: %s",
		                  f->tmp, strerror(errno));
	zfd = dup(fd); /* gzclose closes it; fd stays for fsync */
	if (zfd < 0 || (gz = gzdopen(zfd, "wb6")) == NULL) {
		if (zfd >= 0)
			close(zfd);
		close(fd);
		unlink(f->tmp);
		return ax_err_set(AX_ENOMEM, "archive: zlib: out of memory");
	}
	rv = copy_out(s, query, gz, f->tmp, rows);
	if (gzclose(gz) != Z_OK && rv == AX_OK)
		rv = ax_err_set(AX_EIO, "archive: cannot write %s: %s", f->tmp,
		                strerror(errno));
	if (rv == AX_OK && fsync(fd) != 0)
		rv = ax_err_set(AX_EIO, "archive: cannot flush %s: %s", f->tmp,
		                strerror(errno));
	close(fd);
	if (rv != AX_OK)
		unlink(f->tmp);
	return rv;
}

/* Links f->tmp to f->path (never over an existing file), drops tmp. */
static ax_err
afile_link(afile *f)
{
	ax_err rv = AX_OK;
	if (link(f->tmp, f->path) != 0)
		rv = ax_err_set(errno == EEXIST ? AX_EEXIST : AX_EIO,
		                "archive: cannot name %s: %s", f->path,
		                strerror(errno));
	unlink(f->tmp);
	return rv;
}

/* Writes ax_archive.name to dir/name.csv.gz, then drops it. */
static ax_err
archive_month(ax_store *s, const char *name, const char *dir, ax_history_fn fn,
              void *arg)
{
	char    file[128], q[256];
	afile   f;
	int64_t rows = 0;
	ax_err  rv;

	snprintf(file, sizeof(file), "%s.csv.gz", name);
	snprintf(q, sizeof(q), "SELECT * FROM ax_archive.\"%s\" ORDER BY id",
	         name);
	if ((rv = afile_init(&f, dir, file)) != AX_OK ||
	    (rv = afile_write(s, &f, q, &rows)) != AX_OK ||
	    (rv = afile_link(&f)) != AX_OK ||
	    (rv = fsync_path(dir, 1)) != AX_OK)
		return rv;
	snprintf(q, sizeof(q), "DROP TABLE ax_archive.\"%s\"", name);
	if ((rv = ax_store_exec(s, q, 0, NULL)) != AX_OK)
		return rv;
	if (fn != NULL)
		fn(arg, "archived", name, f.path, rows);
	return AX_OK;
}

/* Ends a failed batch: its temporary files removed, rolled back. */
static ax_err
batch_fail(ax_store *s, afile *f, int nf, ax_err rv)
{
	char detail[1200];
	snprintf(detail, sizeof(detail), "%s", ax_err_detail());
	for (int t = 0; t < nf; t++)
		unlink(f[t].tmp);
	(void) ax_store_rollback(s);
	return ax_err_set(rv, "%s (that batch of runs stays in the database)",
	                  detail);
}

/*
 * Archives one batch of old finished runs: *n gets how many runs (0 when
 * none is left). One REPEATABLE READ transaction: the runs are locked and
 * listed, their three files written from the same snapshot the DELETE
 * sees, the files linked, then the DELETE committed.
 */
static ax_err
archive_batch(ax_store *s, const char *before, const char *dir,
              ax_history_fn fn, void *arg, int64_t *n)
{
	char        bs[16], name[160];
	const char *p[2] = { before, bs };
	afile       f[3];
	int64_t     rows[3] = { 0 }, lo = 0, hi = 0;
	PGresult   *r = NULL;
	ax_err      rv;

	*n = 0;
	snprintf(bs, sizeof(bs), "%d", AX_HISTORY_BATCH);
	if ((rv = ax_store_begin(s)) != AX_OK)
		return rv;
	if ((rv = ax_store_exec(s,
	                        "SET TRANSACTION ISOLATION LEVEL REPEATABLE "
	                        "READ",
	                        0, NULL)) != AX_OK ||
	    (rv = session_iso(s)) != AX_OK ||
	    (rv = ax_store_exec(s,
	                        "CREATE TEMP TABLE ax_arch_runs (id bigint "
	                        "PRIMARY KEY) ON COMMIT DROP",
	                        0, NULL)) != AX_OK ||
	    (rv = ax_store_query(s,
	                         "WITH b AS (INSERT INTO ax_arch_runs SELECT "
	                         "ax_history_old_runs(ax_ts($1::bigint), "
	                         "$2::int) RETURNING id) SELECT count(*), "
	                         "min(id), max(id) FROM b",
	                         2, p, &r)) != AX_OK)
		return batch_fail(s, f, 0, rv);
	*n = ax_store_cell_i64(r, 0, 0);
	if (*n > 0 &&
	    (rv = ax_store_exec(s, "ANALYZE ax_arch_runs", 0, NULL)) !=
	        AX_OK) {
		PQclear(r);
		return batch_fail(s, f, 0, rv);
	}
	lo = ax_store_cell_i64(r, 0, 1);
	hi = ax_store_cell_i64(r, 0, 2);
	PQclear(r);
	if (*n == 0)
		return ax_store_commit(s);
	for (int t = 0; t < 3; t++) {
		snprintf(name, sizeof(name), "%s_runs_%lld-%lld.csv.gz",
		         tables[t], (long long) lo, (long long) hi);
		if ((rv = afile_init(&f[t], dir, name)) != AX_OK)
			return batch_fail(s, f, t, rv);
		if ((rv = afile_write(s, &f[t], batch_sql[t], &rows[t])) !=
		    AX_OK)
			return batch_fail(s, f, t, rv);
	}
	if ((rv = ax_store_exec(s,
	                        "DELETE FROM dag_runs WHERE id IN (SELECT id "
	                        "FROM ax_arch_runs)",
	                        0, NULL)) != AX_OK)
		return batch_fail(s, f, 3, rv);
	for (int t = 0; t < 3; t++)
		if ((rv = afile_link(&f[t])) != AX_OK)
			return batch_fail(s, f, 3, rv);
	if ((rv = fsync_path(dir, 1)) != AX_OK)
		return batch_fail(s, f, 3, rv);
	if ((rv = ax_store_commit(s)) != AX_OK)
		return rv; /* the files stay: rows in both places */
	for (int t = 0; t < 3 && fn != NULL; t++)
		fn(arg, "archived", tables[t], f[t].path, rows[t]);
	return AX_OK;
}

ax_err
ax_history_archive(ax_store *s, int64_t before_us, const char *dir,
                   ax_history_fn fn, void *arg)
{
	struct stat st;
	char        b[32];
	int64_t     n = 0;
	PGresult   *r = NULL;
	ax_err      rv;

	if (dir == NULL || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    access(dir, W_OK) != 0)
		return ax_err_set(AX_EINVAL,
		                  "archive: %s is not a writable directory: "
		                  "create it first",
		                  dir != NULL ? dir : "(none)");
	snprintf(b, sizeof(b), "%lld", (long long) before_us);
	do
		rv = archive_batch(s, b, dir, fn, arg, &n);
	while (rv == AX_OK && n > 0);
	if (rv != AX_OK ||
	    (rv = report_kept(s, before_us, fn, arg)) != AX_OK ||
	    (rv = detach(s, before_us, fn, arg)) != AX_OK ||
	    (rv = session_iso(s)) != AX_OK)
		return rv;
	rv = ax_store_query(s,
	                    "SELECT c.relname FROM pg_class c JOIN "
	                    "pg_namespace n ON n.oid = c.relnamespace WHERE "
	                    "n.nspname = 'ax_archive' AND c.relkind = 'r' "
	                    "AND c.relname ~ '^(event_log|dag_runs|"
	                    "task_instances_history|attempts_history)"
	                    "_p[0-9]{6}$' "
	                    "ORDER BY 1",
	                    0, NULL, &r);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r) && rv == AX_OK; i++)
		rv = archive_month(s, PQgetvalue(r, i, 0), dir, fn, arg);
	PQclear(r);
	return rv;
}

/* Digits [p, p + n) as a number; -1 when one is not a digit. */
static long long
digits(const char *p, size_t n)
{
	long long v = 0;
	if (n == 0 || n > 18)
		return -1;
	for (size_t k = 0; k < n; k++) {
		if (p[k] < '0' || p[k] > '9')
			return -1;
		v = v * 10 + (p[k] - '0');
	}
	return v;
}

/*
 * Files of one month (<prefix>_pYYYYMM.csv.gz): the table their rows go
 * back to, its restore rank, and whether it is partitioned by month (the
 * month's partition is created before the rows come back).
 */
static const struct {
	const char *table;
	int         rank, part;
} month_files[] = {
	{ "dag_runs", 0, 0 },
	{ "task_instances_history", 1, 1 },
	{ "attempts_history", 2, 1 },
	{ "event_log", 3, 1 },
};

#define N_MONTH_FILES (sizeof(month_files) / sizeof(month_files[0]))

/*
 * What an archive file name holds: its table into *table, "YYYY-MM-01"
 * of a month file's month into month[] ("" for a batch of runs), *part 1
 * when the table is partitioned by month; returns the restore rank, -1
 * if the name is not an archive file name (see history.h).
 */
static int
parse_name(const char *path, char month[16], const char **table, int *part)
{
	const char *base = strrchr(path, '/'), *d, *dash;
	size_t      n;

	base = base != NULL ? base + 1 : path;
	n    = strlen(base);
	if (n < 15 || strcmp(base + n - 7, ".csv.gz") != 0)
		return -1;
	n -= 7;
	month[0] = '\0';
	*part    = 0;
	for (size_t k = 0; k < N_MONTH_FILES; k++) {
		size_t tl = strlen(month_files[k].table);
		if (n != tl + 2 + 6 ||
		    strncmp(base, month_files[k].table, tl) != 0 ||
		    strncmp(base + tl, "_p", 2) != 0)
			continue;
		long long ym = digits(base + tl + 2, 6);
		int       y = (int) (ym / 100), m = (int) (ym % 100);
		if (ym < 0 || y < 1900 || y > 9999 || m < 1 || m > 12)
			return -1;
		snprintf(month, 16, "%04d-%02d-01", y % 10000, m % 100);
		*table = month_files[k].table;
		*part  = month_files[k].part;
		return month_files[k].rank;
	}
	for (int t = 0; t < 3; t++) {
		size_t tl = strlen(tables[t]);
		if (n <= tl + 6 || strncmp(base, tables[t], tl) != 0 ||
		    strncmp(base + tl, "_runs_", 6) != 0)
			continue;
		d    = base + tl + 6;
		dash = memchr(d, '-', n - tl - 6);
		if (dash == NULL || digits(d, (size_t) (dash - d)) < 0 ||
		    digits(dash + 1, (size_t) (base + n - dash - 1)) < 0)
			return -1;
		*table = tables[t];
		return t;
	}
	return -1;
}

int
ax_history_restore_rank(const char *path)
{
	char        month[16];
	const char *table;
	int         part;
	return parse_name(path, month, &table, &part);
}

/* Reads the header line (column names) into cols; AX_EINVAL if bad. */
static ax_err
read_header(gzFile gz, const char *path, char *cols, size_t len)
{
	size_t n;
	int    err;

	if (gzgets(gz, cols, (int) len) == NULL) {
		const char *zmsg = gzerror(gz, &err);
		return ax_err_set(AX_EIO, "restore: %s: cannot read: %s", path,
		                  err != Z_OK ? zmsg
		                              : "empty, not an archive file");
	}
	n = strlen(cols);
	if (n == 0 || cols[n - 1] != '\n')
		return ax_err_set(AX_EINVAL,
		                  "restore: %s: line 1 is not a header of "
		                  "column names",
		                  path);
	cols[--n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!((cols[i] >= 'a' && cols[i] <= 'z') || cols[i] == '_' ||
		      cols[i] == ','))
			return ax_err_set(AX_EINVAL,
			                  "restore: %s: line 1 col %zu: not a "
			                  "header of column names (expected "
			                  "e.g. id,dag_id,...)",
			                  path, i + 1);
	return AX_OK;
}

/* Streams the rest of gz into a COPY FROM STDIN already started. */
static ax_err
copy_in(PGconn *c, gzFile gz, const char *path, int64_t *rows)
{
	char       *buf = malloc(CHUNK);
	int         n   = 0, err;
	PGresult   *r;
	ax_err      rv = AX_OK;
	const char *zmsg;

	if (buf == NULL)
		rv = ax_err_set(AX_ENOMEM, "restore: out of memory");
	while (rv == AX_OK && (n = gzread(gz, buf, CHUNK)) > 0)
		if (PQputCopyData(c, buf, n) != 1)
			rv = copy_err(c, NULL, "restore: COPY in");
	/* a file cut short ends like a whole one (gzread returns 0) with
	 * Z_BUF_ERROR set: only gzerror tells them apart */
	if (rv == AX_OK && ((void) gzerror(gz, &err), n < 0 || err != Z_OK)) {
		zmsg = gzerror(gz, &err);
		rv   = ax_err_set(AX_EIO,
		                  "restore: %s: cannot read: %s (a damaged or "
		                    "cut-short archive file)",
		                  path, zmsg);
	}
	free(buf);
	PQputCopyEnd(c, rv == AX_OK ? NULL : "restore: input failed");
	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) == PGRES_COMMAND_OK)
			*rows = strtoll(PQcmdTuples(r), NULL, 10);
		else if (rv == AX_OK)
			rv = copy_err(c, r, "restore: COPY in");
		PQclear(r);
	}
	return rv;
}

ax_err
ax_history_restore(ax_store *s, const char *path, int64_t *rows)
{
	char        month[16], cols[2048], sql[2400];
	const char *table = NULL, *p[2];
	int         part = 0, t = parse_name(path, month, &table, &part);
	int64_t     got = 0;
	gzFile      gz;
	PGresult   *r;
	ax_err      rv;

	if (rows != NULL)
		*rows = 0;
	if (t < 0)
		return ax_err_set(
		    AX_EINVAL,
		    "restore: %s: not an archive file name; "
		    "expected <table>_pYYYYMM.csv.gz with table "
		    "event_log, dag_runs, task_instances_history "
		    "or attempts_history, or "
		    "<table>_runs_<first>-<last>.csv.gz with "
		    "table dag_runs, task_instances or attempts",
		    path);
	if ((gz = gzopen(path, "rb")) == NULL)
		return ax_err_set(AX_EIO, "restore: cannot open %s: %s", path,
		                  strerror(errno));
	if ((rv = read_header(gz, path, cols, sizeof(cols))) != AX_OK) {
		gzclose(gz);
		return rv;
	}
	p[0] = table;
	p[1] = month;
	if ((rv = ax_store_begin(s)) != AX_OK) {
		gzclose(gz);
		return rv;
	}
	if ((rv = session_iso(s)) != AX_OK ||
	    (part &&
	     (rv = ax_store_exec(s, "SELECT ax_part_create($1, $2::date)", 2,
	                         p)) != AX_OK))
		goto out;
	snprintf(sql, sizeof(sql), "COPY %s (%s) FROM STDIN WITH (FORMAT csv)",
	         table, cols);
	r = PQexec(ax_store_conn(s), sql);
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		rv = copy_err(ax_store_conn(s), r, "restore: COPY in");
		PQclear(r);
		goto out;
	}
	PQclear(r);
	rv = copy_in(ax_store_conn(s), gz, path, &got);
out:
	gzclose(gz);
	if (rv != AX_OK) {
		char detail[1200];
		snprintf(detail, sizeof(detail), "%s", ax_err_detail());
		(void) ax_store_rollback(s);
		return ax_err_set(rv, "%s (%s: nothing restored)", detail,
		                  path);
	}
	if ((rv = ax_store_commit(s)) != AX_OK)
		return rv;
	if (rows != NULL)
		*rows = got;
	return AX_OK;
}
