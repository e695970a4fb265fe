/*
 * migrate.c - applies the embedded SQL migrations (see migrate.h).
 *
 * Flow of a run: connect, take the advisory lock (other migrators wait
 * here), create schema_migrations if missing, read what is applied, refuse
 * a newer database or an edited migration, then apply each pending file in
 * its own transaction, statement by statement so that a failure names the
 * statement and its line in the file. The lock is released when the
 * connection closes, so a crashed migrator never leaves it held. Last, it
 * creates event_log's month partitions ahead (ax_history_ensure).
 */
#include "migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "ax_config.h"
#include "clock.h"
#include "log.h"
#include "store.h"

/* "AX_MIGRT" in ASCII: the advisory lock key of every AX migrator. */
#define MIGRATE_LOCK_KEY "4708518077716744788"

#define STMT_EXCERPT 160 /* bytes of a failing statement in the detail */

/* Skips a dollar-quote opener at sql+i; returns its length or 0. */
static size_t
dollar_tag_len(const char *sql, size_t i)
{
	size_t j = i + 1;
	if (sql[i] != '$')
		return 0;
	if (sql[j] >= '0' && sql[j] <= '9')
		return 0; /* $1: a parameter, not a quote */
	while (sql[j] == '_' || (sql[j] >= 'a' && sql[j] <= 'z') ||
	       (sql[j] >= 'A' && sql[j] <= 'Z') ||
	       (sql[j] >= '0' && sql[j] <= '9'))
		j++;
	return sql[j] == '$' ? j - i + 1 : 0;
}

/* Index just past the construct (quote, comment) that starts at i. */
static size_t
skip_construct(const char *sql, size_t i)
{
	size_t tag;

	if (sql[i] == '-' && sql[i + 1] == '-') {
		while (sql[i] != '\0' && sql[i] != '\n')
			i++;
		return i;
	}
	if (sql[i] == '/' && sql[i + 1] == '*') {
		int depth = 1; /* PostgreSQL nests block comments */
		for (i += 2; sql[i] != '\0' && depth > 0; i++) {
			if (sql[i] == '/' && sql[i + 1] == '*')
				depth++, i++;
			else if (sql[i] == '*' && sql[i + 1] == '/')
				depth--, i++;
		}
		return i;
	}
	if (sql[i] == '\'' || sql[i] == '"') {
		char q = sql[i];
		/* E'...' strings allow backslash escapes. */
		int esc = q == '\'' && i > 0 &&
		    (sql[i - 1] == 'E' || sql[i - 1] == 'e');
		for (i++; sql[i] != '\0'; i++) {
			if (esc && sql[i] == '\\' && sql[i + 1] != '\0')
				i++;
			else if (sql[i] == q && sql[i + 1] == q)
				i++;
			else if (sql[i] == q)
				return i + 1;
		}
		return i;
	}
	if ((tag = dollar_tag_len(sql, i)) > 0) {
		const char *end;
		for (end = sql + i + tag; *end != '\0'; end++) {
			if (strncmp(end, sql + i, tag) == 0)
				return (size_t) (end - sql) + tag;
		}
		return (size_t) (end - sql);
	}
	return i;
}

int
ax_migrate_next_statement(const char *sql, size_t *pos, size_t *start,
                          size_t *len)
{
	size_t i = *pos, first = (size_t) -1, last = 0;

	while (sql[i] != '\0') {
		size_t next    = skip_construct(sql, i);
		int    comment = (sql[i] == '-' && sql[i + 1] == '-') ||
		    (sql[i] == '/' && sql[i + 1] == '*');
		if (next != i) {
			if (!comment) {
				if (first == (size_t) -1)
					first = i;
				last = next;
			}
			i = next;
			continue;
		}
		if (sql[i] == ';') {
			i++;
			if (first != (size_t) -1)
				break;
			continue;
		}
		if (sql[i] != ' ' && sql[i] != '\t' && sql[i] != '\n' &&
		    sql[i] != '\r' && sql[i] != '\f') {
			if (first == (size_t) -1)
				first = i;
			last = i + 1;
		}
		i++;
	}
	*pos = i;
	if (first == (size_t) -1)
		return 0;
	*start = first;
	*len   = last - first;
	return 1;
}

/* 1-based line and column of byte offset off in text. */
static void
line_col(const char *text, size_t off, int *line, int *col)
{
	*line = 1;
	*col  = 1;
	for (size_t i = 0; i < off && text[i] != '\0'; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char) text[i] & 0xC0) != 0x80) {
			(*col)++;
		}
	}
}

/* Byte offset of the 1-based character position pos in s (UTF-8). */
static size_t
char_to_byte(const char *s, size_t len, long pos)
{
	size_t i = 0;
	for (long c = 1; i < len && c < pos; c++) {
		i++;
		while (i < len && ((unsigned char) s[i] & 0xC0) == 0x80)
			i++;
	}
	return i;
}

static ax_err
exec_simple(PGconn *c, const char *sql, const char *what)
{
	PGresult *r  = PQexec(c, sql);
	ax_err    rv = AX_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		rv                = ax_store_sqlstate_err(state);
		if (rv == AX_OK)
			rv = AX_EDB;
		ax_err_set(rv, "migrate: %s failed: %s", what,
		           PQerrorMessage(c));
	}
	PQclear(r);
	return rv;
}

/* Records the failure of statement [start, start+len) of m and returns
 * AX_EDB; the transaction is still to be rolled back by the caller. */
static ax_err
statement_failed(const ax_migration *m, PGresult *r, size_t start, size_t len,
                 int index)
{
	const char *msg   = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char *pos   = PQresultErrorField(r, PG_DIAG_STATEMENT_POSITION);
	const char *det   = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
	size_t      off   = start;
	int         line, col;
	char        excerpt[STMT_EXCERPT + 4];
	size_t      n = len < STMT_EXCERPT ? len : STMT_EXCERPT;

	if (pos != NULL)
		off += char_to_byte(m->sql + start, len, atol(pos));
	line_col(m->sql, off, &line, &col);
	memcpy(excerpt, m->sql + start, n);
	strcpy(excerpt + n, len > n ? "..." : "");
	for (size_t i = 0; i < n; i++)
		if (excerpt[i] == '\n' || excerpt[i] == '\t')
			excerpt[i] = ' ';
	return ax_err_set(
	    AX_EDB,
	    "migration %s failed at %s:%d:%d (statement %d: \"%s\"): %s "
	    "[SQLSTATE %s]%s%s; rolled back, nothing of %s was applied",
	    m->name, m->name, line, col, index, excerpt,
	    msg != NULL ? msg : "unknown error", state != NULL ? state : "?",
	    det != NULL ? "; " : "", det != NULL ? det : "", m->name);
}

static ax_err
apply_one(PGconn *c, const ax_migration *m)
{
	size_t      pos   = 0, start, len;
	int         index = 0;
	ax_err      rv;
	int64_t     t0 = ax_clock_mono_us();
	char        vbuf[16];
	const char *params[3];

	if ((rv = exec_simple(c, "BEGIN", "BEGIN")) != AX_OK)
		return rv;
	while (ax_migrate_next_statement(m->sql, &pos, &start, &len)) {
		char *stmt = strndup(m->sql + start, len);
		if (stmt == NULL) {
			PQclear(PQexec(c, "ROLLBACK"));
			return ax_err_set(AX_ENOMEM, "migrate: out of memory");
		}
		index++;
		PGresult *r = PQexec(c, stmt);
		free(stmt);
		ExecStatusType st = PQresultStatus(r);
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			if (PQstatus(c) == CONNECTION_BAD) {
				PQclear(r);
				return ax_err_set(
				    AX_EDBCONN,
				    "migration %s: connection lost at "
				    "statement %d: %s",
				    m->name, index, PQerrorMessage(c));
			}
			rv = statement_failed(m, r, start, len, index);
			PQclear(r);
			PQclear(PQexec(c, "ROLLBACK"));
			return rv;
		}
		PQclear(r);
	}
	snprintf(vbuf, sizeof(vbuf), "%d", m->version);
	params[0]   = vbuf;
	params[1]   = m->name;
	params[2]   = m->checksum;
	PGresult *r = PQexecParams(
	    c,
	    "INSERT INTO schema_migrations (version, name, checksum) "
	    "VALUES ($1, $2, $3)",
	    3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rv =
		    ax_err_set(AX_EDB, "migration %s: recording it failed: %s",
		               m->name, PQerrorMessage(c));
		PQclear(r);
		PQclear(PQexec(c, "ROLLBACK"));
		return rv;
	}
	PQclear(r);
	if ((rv = exec_simple(c, "COMMIT", m->name)) != AX_OK)
		return rv;
	ax_log_info(
	    "migrate", "applied %s (%d statements) in %lld ms", m->name, index,
	    (long long) ((ax_clock_mono_us() - t0) / AX_USEC_PER_MSEC));
	return AX_OK;
}

/* Bit per applied version (versions are small and dense). */
typedef struct applied_set {
	int   max;      /* highest applied version, 0 when none */
	char *done;     /* done[v] for v in 1..max */
	int   mismatch; /* first version whose checksum differs, 0 when none */
	char  mismatch_msg[256];
} applied_set;

static ax_err
read_applied(PGconn *c, const ax_migration *set, size_t n, applied_set *a)
{
	PGresult *r =
	    PQexec(c,
	           "SELECT version, name, checksum FROM schema_migrations "
	           "ORDER BY version");
	ax_err rv = AX_OK;

	memset(a, 0, sizeof(*a));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rv = ax_err_set(AX_EDB,
		                "migrate: reading schema_migrations: %s",
		                PQerrorMessage(c));
		PQclear(r);
		return rv;
	}
	int rows = PQntuples(r);
	if (rows > 0)
		a->max = atoi(PQgetvalue(r, rows - 1, 0));
	if ((a->done = calloc((size_t) a->max + 2, 1)) == NULL) {
		PQclear(r);
		return ax_err_set(AX_ENOMEM, "migrate: out of memory");
	}
	for (int i = 0; i < rows; i++) {
		int v = atoi(PQgetvalue(r, i, 0));
		if (v < 1 || v > a->max)
			continue;
		a->done[v] = 1;
		if ((size_t) v > n || a->mismatch != 0)
			continue;
		const ax_migration *m = &set[v - 1];
		if (strcmp(PQgetvalue(r, i, 2), m->checksum) != 0) {
			a->mismatch = v;
			snprintf(
			    a->mismatch_msg, sizeof(a->mismatch_msg),
			    "%s was applied as '%s' with checksum %.12s..., "
			    "the binary's file has %.12s...",
			    m->name, PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
			    m->checksum);
		}
	}
	PQclear(r);
	return AX_OK;
}

static ax_err
check_set(const ax_migration *set, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i].version != (int) i + 1)
			return ax_err_set(AX_EINTERNAL,
			                  "migrate: migration %s has version "
			                  "%d, expected %zu",
			                  set[i].name, set[i].version, i + 1);
	}
	return AX_OK;
}

static ax_err
run_locked(PGconn *c, const ax_migration *set, size_t n, int *applied)
{
	applied_set a;
	ax_err      rv;

	if ((rv =
	         exec_simple(c,
	                     "CREATE TABLE IF NOT EXISTS schema_migrations ("
	                     " version integer PRIMARY KEY,"
	                     " name text NOT NULL,"
	                     " checksum text NOT NULL,"
	                     " applied_at timestamptz NOT NULL DEFAULT now())",
	                     "creating schema_migrations")) != AX_OK)
		return rv;
	if ((rv = read_applied(c, set, n, &a)) != AX_OK)
		return rv;
	if ((size_t) a.max > n) {
		rv = ax_err_set(
		    AX_ESCHEMA,
		    "database schema version %d is newer than this binary's "
		    "version %zu (AX %s knows migrations 1..%zu); upgrade AX "
		    "or use a database of this version",
		    a.max, n, AX_VERSION, n);
	} else if (a.mismatch != 0) {
		rv = ax_err_set(
		    AX_ESCHEMA,
		    "checksum mismatch on applied migration %s; a released "
		    "migration must never be edited: restore the file and add "
		    "a new migration instead",
		    a.mismatch_msg);
	}
	for (size_t i = 0; rv == AX_OK && i < n; i++) {
		if ((int) i + 1 <= a.max && a.done[i + 1])
			continue;
		if ((rv = apply_one(c, &set[i])) == AX_OK)
			(*applied)++;
	}
	free(a.done);
	/* Every start of a standalone home and every `axctl db up` /
	 * `migrate` also keeps event_log's month partitions ahead of time
	 * (0015_event_log_partitions.sql), so inserts stay out of the
	 * default partition even without the `axctl db maintain` cron job. */
	if (rv == AX_OK)
		rv = exec_simple(
		    c,
		    "DO $$BEGIN IF to_regprocedure("
		    "'ax_history_ensure(integer)') IS NOT NULL THEN "
		    "PERFORM ax_history_ensure(3); END IF; END$$",
		    "creating the event_log partitions ahead");
	return rv;
}

ax_err
ax_migrate_run_set(const char *dsn, const ax_migration *set, size_t n,
                   int *applied)
{
	ax_store *s;
	ax_err    rv;
	int       count = 0;

	if (applied != NULL)
		*applied = 0;
	if ((rv = check_set(set, n)) != AX_OK)
		return rv;
	if ((rv = ax_store_open(dsn, &s)) != AX_OK)
		return rv;
	PGconn *c = ax_store_conn(s);
	rv        = exec_simple(c,
	                        "SET client_min_messages = warning; "
	                               "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")",
	                        "taking the migration lock");
	if (rv == AX_OK)
		rv = run_locked(c, set, n, &count);
	/* Closing the session releases the advisory lock. */
	ax_store_close(s);
	if (applied != NULL)
		*applied = count;
	return rv;
}

ax_err
ax_migrate_status_set(const char *dsn, const ax_migration *set, size_t n,
                      int *db_version, int *bin_version)
{
	ax_store *s;
	ax_err    rv;
	int64_t   v = 0;

	(void) set;
	if ((rv = ax_store_open(dsn, &s)) != AX_OK)
		return rv;
	/* Two queries: the second does not parse without the table. */
	rv = ax_store_query_int64(
	    s, "SELECT (to_regclass('schema_migrations') IS NOT NULL)::int", 0,
	    NULL, &v);
	if (rv == AX_OK && v != 0)
		rv = ax_store_query_int64(
		    s,
		    "SELECT coalesce(max(version), 0) FROM schema_migrations",
		    0, NULL, &v);
	ax_store_close(s);
	if (rv != AX_OK)
		return rv;
	*db_version  = (int) v;
	*bin_version = (int) n;
	return AX_OK;
}

ax_err
ax_migrate_run(const char *dsn, int *applied)
{
	return ax_migrate_run_set(dsn, ax_migrations, ax_migrations_count,
	                          applied);
}

ax_err
ax_migrate_status(const char *dsn, int *db_version, int *bin_version)
{
	return ax_migrate_status_set(dsn, ax_migrations, ax_migrations_count,
	                             db_version, bin_version);
}
