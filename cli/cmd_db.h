/*
 * cmd_db.h - `axctl db`, and the way every axctl command finds its
 * database.
 *
 * Role: a command that needs PostgreSQL takes `--home DIR` and `--dsn DSN`
 * (parse them with ax_db_where_opt) and resolves them with
 * ax_db_where_init: an explicit DSN (--dsn, else $AX_DSN) is used as is
 * and no embedded cluster is involved; otherwise the embedded cluster under
 * --home, else $AX_HOME, else ./.ax. ax_db_where_up then makes the
 * database usable (starts the embedded cluster when there is one).
 *
 * Invariants: an ax_db_where is zeroed or initialised; fini is safe on
 * zeroed memory.
 */
#ifndef AX_CMD_DB_H
#define AX_CMD_DB_H

#include "ax_err.h"
#include "pg_embed.h"

typedef struct ax_db_where {
	const char  *dsn;   /* DSN in use; owned by argv/env or embed */
	ax_pg_embed *embed; /* the embedded cluster, or NULL with a DSN */
} ax_db_where;

/*
 * Consumes `--home DIR`, `--home=DIR`, `--dsn DSN` or `--dsn=DSN` at
 * argv[*i] (argc entries). Returns 1 and advances *i past the option (its
 * value is stored in *home or *dsn, pointing into argv), 0 when argv[*i]
 * is not one of them, -1 when the value is missing (a message is printed
 * on stderr: exit 2).
 */
int ax_db_where_opt(int argc, char **argv, int *i, const char **home,
                    const char **dsn);

/*
 * Resolves home/dsn (NULL: from $AX_DSN, $AX_HOME, ./.ax) into w; touches
 * nothing on disk. AX_EINVAL / AX_ENOMEM with a detail.
 */
ax_err ax_db_where_init(ax_db_where *w, const char *home, const char *dsn);

/*
 * Makes the database reachable: the embedded cluster is created and
 * started as needed (ax_pg_embed_up); an explicit DSN is only checked for
 * a connection (AX_EDBCONN naming the DSN without its password).
 */
ax_err ax_db_where_up(ax_db_where *w);

/* Releases w (the server keeps running). Safe on zeroed memory. */
void ax_db_where_fini(ax_db_where *w);

/* `axctl db ...`; argv[0] is "db". Exit status 0 / 1 / 2. */
int ax_cmd_db(int argc, char **argv);

#endif /* AX_CMD_DB_H */
