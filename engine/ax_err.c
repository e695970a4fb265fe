/*
 * ax_err.c - error codes, their text, and the per-thread detail buffer.
 */
#include "ax_err.h"

#include <stdio.h>

#include "utf8.h"

static const struct {
	const char *name;
	const char *text;
} ax_errs[AX_ERR_COUNT_] = {
	[AX_OK]        = { "AX_OK", "success" },
	[AX_ENOMEM]    = { "AX_ENOMEM", "out of memory" },
	[AX_EINVAL]    = { "AX_EINVAL", "invalid argument" },
	[AX_ENOENT]    = { "AX_ENOENT", "not found" },
	[AX_EEXIST]    = { "AX_EEXIST", "already exists" },
	[AX_EIO]       = { "AX_EIO", "I/O error" },
	[AX_ETIMEDOUT] = { "AX_ETIMEDOUT", "timed out" },
	[AX_ECLOSED]   = { "AX_ECLOSED", "closed" },
	[AX_EAGAIN]    = { "AX_EAGAIN", "try again" },
	[AX_EPARSE]    = { "AX_EPARSE", "parse error" },
	[AX_ESTATE]    = { "AX_ESTATE", "illegal state transition" },
	[AX_EDB]       = { "AX_EDB", "database error" },
	[AX_EDBCONN]   = { "AX_EDBCONN", "database connection error" },
	[AX_ERETRY]    = { "AX_ERETRY", "transaction must be retried" },
	[AX_ESCHEMA]   = { "AX_ESCHEMA", "database schema mismatch" },
	[AX_ENNG]      = { "AX_ENNG", "transport error" },
	[AX_EPROTO]    = { "AX_EPROTO", "protocol error" },
	[AX_ECONFIG]   = { "AX_ECONFIG", "configuration error" },
	[AX_EPERM]     = { "AX_EPERM", "permission denied" },
	[AX_EBUSY]     = { "AX_EBUSY", "busy" },
	[AX_ELIMIT]    = { "AX_ELIMIT", "limit exceeded" },
	[AX_EINTERNAL] = { "AX_EINTERNAL", "internal error" },
	[AX_EFENCED]   = { "AX_EFENCED", "fenced: scheduler lease lost" },
};

static _Thread_local char ax_err_buf[1024];

const char *
ax_strerror(ax_err e)
{
	if ((unsigned) e >= AX_ERR_COUNT_ || ax_errs[e].text == NULL)
		return "unknown error";
	return ax_errs[e].text;
}

const char *
ax_errname(ax_err e)
{
	if ((unsigned) e >= AX_ERR_COUNT_ || ax_errs[e].name == NULL)
		return "AX_EUNKNOWN";
	return ax_errs[e].name;
}

/* The detail often quotes input (a name, a file's text): it is kept as
 * valid, printable UTF-8 (see ax_utf8_sanitize), so that every caller can
 * log it and answer it in JSON as is. */
ax_err
ax_err_vset(ax_err e, const char *fmt, va_list ap)
{
	char raw[sizeof(ax_err_buf)];

	vsnprintf(raw, sizeof(raw), fmt, ap);
	ax_utf8_sanitize(ax_err_buf, sizeof(ax_err_buf), raw);
	return e;
}

ax_err
ax_err_set(ax_err e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ax_err_vset(e, fmt, ap);
	va_end(ap);
	return e;
}

const char *
ax_err_detail(void)
{
	return ax_err_buf;
}

void
ax_err_clear(void)
{
	ax_err_buf[0] = '\0';
}
