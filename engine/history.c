/*
 * history.c - retention, archive and restore of the history's month
 * partitions (see history.h; the partitions and the SQL functions this
 * file calls are in engine/migrations/0014_history_partitions.sql).
 *
 * Archive, per detached table: count its rows, COPY it out as CSV into
 * DIR/.<name>.csv.gz.tmp through zlib, close and fsync the file, link it
 * to DIR/<name>.csv.gz (link fails when the name exists: never
 * overwrite), fsync the directory, and only then DROP the table. Restore
 * streams the file back with COPY FROM STDIN in one transaction.
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

/* Runs ax_history_detach(before, strict); reports each name detached. */
static ax_err
detach(ax_store *s, int64_t before_us, int strict, ax_history_fn fn, void *arg)
{
	char        b[32];
	const char *p[2] = { b, strict ? "true" : "false" };
	PGresult   *r    = NULL;
	ax_err      rv;

	snprintf(b, sizeof(b), "%lld", (long long) before_us);
	/* A writer ahead of us holds the history tables: wait a while, then
	 * give up rather than stall the scheduler behind our lock queue. */
	if ((rv = ax_store_exec(s, "SET lock_timeout = '10s'", 0, NULL)) !=
	    AX_OK)
		return rv;
	rv = ax_store_query(s,
	                    "SELECT d FROM ax_history_detach("
	                    "ax_ts($1::bigint), $2::boolean) d",
	                    2, p, &r);
	(void) ax_store_exec(s, "RESET lock_timeout", 0, NULL);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++)
		if (fn != NULL)
			fn(arg, "detached", PQgetvalue(r, i, 0), NULL, 0);
	PQclear(r);
	return AX_OK;
}

ax_err
ax_history_maintain(ax_store *s, int retention_days, int ahead,
                    ax_history_fn fn, void *arg, int *kept)
{
	int64_t     before;
	int         created = 0;
	char        b[32];
	const char *p[1] = { b };
	PGresult   *r    = NULL;
	ax_err      rv;

	if (kept != NULL)
		*kept = 0;
	if ((rv = ax_history_cutoff(retention_days, ax_clock_utc_us(),
	                            &before)) != AX_OK ||
	    (rv = ax_history_ensure(s, ahead, &created)) != AX_OK)
		return rv;
	if (fn != NULL && created > 0) {
		char n[32];
		snprintf(n, sizeof(n), "%d partition(s)", created);
		fn(arg, "created", n, NULL, created);
	}
	if ((rv = detach(s, before, 0, fn, arg)) != AX_OK)
		return rv;
	snprintf(b, sizeof(b), "%lld", (long long) before);
	rv = ax_store_query(
	    s,
	    "SELECT DISTINCT to_char(month_start AT TIME ZONE 'UTC', "
	    "'YYYY-MM') FROM ax_history_partitions() WHERE NOT detached "
	    "AND parent <> 'event_log' AND month_end <= ax_ts($1::bigint) "
	    "ORDER BY 1",
	    1, p, &r);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r); i++)
		if (fn != NULL)
			fn(arg, "kept", PQgetvalue(r, i, 0), NULL, 0);
	if (kept != NULL)
		*kept = PQntuples(r);
	PQclear(r);
	return AX_OK;
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

/* COPY ax_archive.name out into the gzip stream gz. */
static ax_err
copy_out(ax_store *s, const char *name, gzFile gz)
{
	PGconn   *c = ax_store_conn(s);
	char      sql[256];
	char     *buf;
	int       n;
	PGresult *r;
	ax_err    rv = AX_OK;

	snprintf(sql, sizeof(sql),
	         "COPY ax_archive.\"%s\" TO STDOUT WITH (FORMAT csv, HEADER)",
	         name);
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
		if (rv == AX_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
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

/* Writes ax_archive.name to dir/name.csv.gz; *rows gets its row count. */
static ax_err
write_one(ax_store *s, const char *name, const char *dir, char *path,
          size_t pathlen, int64_t *rows)
{
	char   tmp[PATH_MAX], sql[256];
	int    fd;
	gzFile gz;
	ax_err rv;

	if ((size_t) snprintf(path, pathlen, "%s/%s.csv.gz", dir, name) >=
	        pathlen ||
	    (size_t) snprintf(tmp, sizeof(tmp), "%s/.%s.csv.gz.tmp", dir,
	                      name) >= sizeof(tmp))
		return ax_err_set(AX_EINVAL,
		                  "archive: directory %s: path too "
		                  "long",
		                  dir);
	if (access(path, F_OK) == 0)
		return ax_err_set(
		    AX_EEXIST,
		    "archive: %s exists; refusing to overwrite it "
		    "(ax_archive.%s stays in the database): move "
		    "it away or archive to another directory",
		    path, name);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM ax_archive.\"%s\"",
	         name);
	if ((rv = ax_store_query_int64(s, sql, 0, NULL, rows)) != AX_OK)
		return rv;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) <
	    0)
		return ax_err_set(AX_EIO, "archive: cannot create %s: %s", tmp,
		                  strerror(errno));
	int zfd = dup(fd); /* gzclose closes it; fd stays for fsync */
	if (zfd < 0 || (gz = gzdopen(zfd, "wb6")) == NULL) {
		if (zfd >= 0)
			close(zfd);
		close(fd);
		unlink(tmp);
		return ax_err_set(AX_ENOMEM, "archive: zlib: out of memory");
	}
	rv = copy_out(s, name, gz);
	if (gzclose(gz) != Z_OK && rv == AX_OK)
		rv = ax_err_set(AX_EIO, "archive: cannot write %s: %s", tmp,
		                strerror(errno));
	if (rv == AX_OK && fsync(fd) != 0)
		rv = ax_err_set(AX_EIO, "archive: cannot flush %s: %s", tmp,
		                strerror(errno));
	close(fd);
	if (rv == AX_OK && link(tmp, path) != 0)
		rv = ax_err_set(errno == EEXIST ? AX_EEXIST : AX_EIO,
		                "archive: cannot name %s: %s", path,
		                strerror(errno));
	unlink(tmp);
	if (rv == AX_OK)
		rv = fsync_path(dir, 1);
	return rv;
}

ax_err
ax_history_archive(ax_store *s, int64_t before_us, const char *dir,
                   ax_history_fn fn, void *arg)
{
	struct stat st;
	PGresult   *r = NULL;
	ax_err      rv;

	if (dir == NULL || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    access(dir, W_OK) != 0)
		return ax_err_set(AX_EINVAL,
		                  "archive: %s is not a writable directory: "
		                  "create it first",
		                  dir != NULL ? dir : "(none)");
	if ((rv = detach(s, before_us, 1, fn, arg)) != AX_OK ||
	    (rv = session_iso(s)) != AX_OK)
		return rv;
	rv = ax_store_query(s,
	                    "SELECT c.relname FROM pg_class c JOIN "
	                    "pg_namespace n ON n.oid = c.relnamespace WHERE "
	                    "n.nspname = 'ax_archive' AND c.relkind = 'r' "
	                    "AND c.relname ~ '^(dag_runs|task_instances|"
	                    "attempts|event_log)_p[0-9]{6}$' ORDER BY 1",
	                    0, NULL, &r);
	if (rv != AX_OK)
		return rv;
	for (int i = 0; i < PQntuples(r) && rv == AX_OK; i++) {
		const char *name = PQgetvalue(r, i, 0);
		char        path[PATH_MAX], sql[256];
		int64_t     rows = 0;

		if ((rv = write_one(s, name, dir, path, sizeof(path),
		                    &rows)) != AX_OK)
			break;
		snprintf(sql, sizeof(sql), "DROP TABLE ax_archive.\"%s\"",
		         name);
		if ((rv = ax_store_exec(s, sql, 0, NULL)) != AX_OK)
			break;
		if (fn != NULL)
			fn(arg, "archived", name, path, rows);
	}
	PQclear(r);
	return rv;
}

/* Table index and "YYYY-MM-01" of an archive file name; -1 if not one. */
static int
parse_name(const char *path, char month[16])
{
	const char *base = strrchr(path, '/');
	size_t      n;

	base = base != NULL ? base + 1 : path;
	n    = strlen(base);
	if (n < 15 || strcmp(base + n - 7, ".csv.gz") != 0)
		return -1;
	for (int t = 0; t < 4; t++) {
		size_t      tl = strlen(tables[t]);
		const char *d  = base + tl + 2;
		int         y, m;
		if (n != tl + 2 + 6 + 7 || strncmp(base, tables[t], tl) != 0 ||
		    strncmp(base + tl, "_p", 2) != 0)
			continue;
		for (int k = 0; k < 6; k++)
			if (d[k] < '0' || d[k] > '9')
				return -1;
		y = (d[0] - '0') * 1000 + (d[1] - '0') * 100 +
		    (d[2] - '0') * 10 + (d[3] - '0');
		m = (d[4] - '0') * 10 + (d[5] - '0');
		if (y < 1900 || m < 1 || m > 12)
			return -1;
		snprintf(month, 16, "%04d-%02d-01", y, m);
		return t;
	}
	return -1;
}

int
ax_history_restore_rank(const char *path)
{
	char month[16];
	return parse_name(path, month);
}

/* Reads the header line (column names) into cols; AX_EINVAL if bad. */
static ax_err
read_header(gzFile gz, const char *path, char *cols, size_t len)
{
	size_t n;

	if (gzgets(gz, cols, (int) len) == NULL)
		return ax_err_set(AX_EIO,
		                  "restore: %s: cannot read: not a gzip "
		                  "archive file, or empty",
		                  path);
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
	if (rv == AX_OK && n < 0) {
		zmsg = gzerror(gz, &err);
		rv   = ax_err_set(AX_EIO, "restore: %s: cannot read: %s", path,
		                  zmsg);
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
	int         t = parse_name(path, month);
	const char *p[2];
	int64_t     got = 0;
	gzFile      gz;
	PGresult   *r;
	ax_err      rv;

	if (rows != NULL)
		*rows = 0;
	if (t < 0)
		return ax_err_set(AX_EINVAL,
		                  "restore: %s: not an archive file name; "
		                  "expected <table>_pYYYYMM.csv.gz with table "
		                  "dag_runs, task_instances, attempts or "
		                  "event_log",
		                  path);
	if ((gz = gzopen(path, "rb")) == NULL)
		return ax_err_set(AX_EIO, "restore: cannot open %s: %s", path,
		                  strerror(errno));
	if ((rv = read_header(gz, path, cols, sizeof(cols))) != AX_OK) {
		gzclose(gz);
		return rv;
	}
	p[0] = tables[t];
	p[1] = month;
	if ((rv = ax_store_begin(s)) != AX_OK) {
		gzclose(gz);
		return rv;
	}
	if ((rv = session_iso(s)) != AX_OK ||
	    (rv = ax_store_exec(s, "SELECT ax_part_create($1, $2::date)", 2,
	                        p)) != AX_OK)
		goto out;
	snprintf(sql, sizeof(sql), "COPY %s (%s) FROM STDIN WITH (FORMAT csv)",
	         tables[t], cols);
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
