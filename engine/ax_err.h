/*
 * ax_err.h - the one error enum of AX.
 *
 * Every function that can fail returns an ax_err; results go through
 * out-parameters. A module translates libpq, libyaml, nng, protobuf-c and
 * errno failures into an ax_err at its boundary and records a human detail
 * (what failed, where, what to do) with ax_err_set(). The detail lives in a
 * thread-local buffer, like errno: read it with ax_err_detail() right after
 * the failing call, before calling anything else that may fail.
 */
#ifndef AX_ERR_H
#define AX_ERR_H

#include <stdarg.h>
#include <stddef.h>

typedef enum ax_err {
	AX_OK = 0,
	AX_ENOMEM,     /* out of memory */
	AX_EINVAL,     /* invalid argument or input */
	AX_ENOENT,     /* no such object */
	AX_EEXIST,     /* object already exists */
	AX_EIO,        /* operating system I/O error */
	AX_ETIMEDOUT,  /* deadline passed */
	AX_ECLOSED,    /* object closed or shutting down */
	AX_EAGAIN,     /* try again later (backpressure, would block) */
	AX_EPARSE,     /* malformed text input (YAML, cron, JSON) */
	AX_ESTATE,     /* illegal state transition */
	AX_EDB,        /* database error (query failed) */
	AX_EDBCONN,    /* database connection failed or was lost */
	AX_ERETRY,     /* serialization failure or deadlock: retry */
	AX_ESCHEMA,    /* database schema newer than this binary */
	AX_ENNG,       /* nng transport error */
	AX_EPROTO,     /* malformed or unexpected network message */
	AX_ECONFIG,    /* bad configuration */
	AX_EPERM,      /* permission denied */
	AX_EBUSY,      /* resource busy (lease held, lock taken) */
	AX_ELIMIT,     /* a size or count limit was exceeded */
	AX_EINTERNAL,  /* invariant broken: a bug */
	AX_EFENCED,    /* fenced: the scheduler lease moved to another axd */
	AX_ERR_COUNT_, /* number of codes; not an error */
} ax_err;

/* Short stable text for a code, e.g. "illegal state transition". */
const char *ax_strerror(ax_err e);

/* Stable identifier for a code, e.g. "AX_ESTATE". */
const char *ax_errname(ax_err e);

/*
 * Records a detail message for the calling thread and returns e, so that
 * `return ax_err_set(AX_EINVAL, "key %s: ...", k);` reads naturally.
 */
ax_err ax_err_set(ax_err e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
ax_err ax_err_vset(ax_err e, const char *fmt, va_list ap);

/* The calling thread's last detail ("" when none). Valid until next set. */
const char *ax_err_detail(void);

/* Forgets the calling thread's detail. */
void ax_err_clear(void);

#endif /* AX_ERR_H */
