/*
 * log.c - JSON-lines logger. See log.h for the contract.
 */
#include "log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "utf8.h"

/* Set once by main() before any thread starts; read-only afterwards. */
static struct {
	ax_log_level min;
	int          fd;
} ax_log_cfg = { AX_LOG_INFO, 2 };

static const char *const level_names[] = { "debug", "info", "warn", "error",
	                                   "off" };

void
ax_log_init(ax_log_level min, int fd)
{
	ax_log_cfg.min = min;
	ax_log_cfg.fd  = fd;
}

int
ax_log_level_parse(const char *s)
{
	for (int i = 0; i <= AX_LOG_OFF; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return i;
	if (strcasecmp(s, "warning") == 0)
		return AX_LOG_WARN;
	return -1;
}

int
ax_log_enabled(ax_log_level lvl)
{
	return lvl >= ax_log_cfg.min && lvl < AX_LOG_OFF;
}

/* The valid UTF-8 sequence at the NUL-terminated s, or 0. */
static size_t
utf8_len(const unsigned char *s)
{
	return ax_utf8_seq_len((const char *) s, strnlen((const char *) s, 4));
}

/* ---- JSON text check (ax_json_object_valid) ---- */

#define JSON_DEPTH_MAX 64

static const unsigned char *json_value(const unsigned char *p, int depth);

static const unsigned char *
json_ws(const unsigned char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static int
hex4(const unsigned char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return 0;
		v = v * 16 + d;
	}
	*out = v;
	return 1;
}

/* p at the opening quote; returns the byte after the closing one. */
static const unsigned char *
json_string(const unsigned char *p)
{
	p++;
	for (;;) {
		unsigned u, lo;
		size_t   n;
		if (*p == '"')
			return p + 1;
		if (*p < 0x20) /* control characters, and the end of s */
			return NULL;
		if (*p != '\\') {
			if ((n = utf8_len(p)) == 0)
				return NULL;
			p += n;
			continue;
		}
		p++;
		if (strchr("\"\\/bfnrt", *p) != NULL && *p != '\0') {
			p++;
			continue;
		}
		if (*p != 'u' || !hex4(p + 1, &u) || u == 0)
			return NULL; /* PostgreSQL's jsonb refuses \u0000 */
		p += 5;
		if (u >= 0xDC00 && u <= 0xDFFF)
			return NULL; /* a low surrogate alone */
		if (u >= 0xD800 && u <= 0xDBFF) {
			if (p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) ||
			    lo < 0xDC00 || lo > 0xDFFF)
				return NULL;
			p += 6;
		}
	}
}

/* 1 to max digits; NULL when there are none or more. */
static const unsigned char *
json_digits(const unsigned char *p, size_t max)
{
	const unsigned char *q = p;
	while (*q >= '0' && *q <= '9')
		q++;
	return q == p || (size_t) (q - p) > max ? NULL : q;
}

/* A number jsonb's numeric also takes: at most 1000 digits before and
 * after the point and a 3-digit exponent (PostgreSQL refuses numbers
 * past its numeric range, which would fail the whole batch). */
static const unsigned char *
json_number(const unsigned char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if ((p = json_digits(p, 1000)) == NULL)
		return NULL;
	if (*p == '.' && (p = json_digits(p + 1, 1000)) == NULL)
		return NULL;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		p = json_digits(p, 3);
	}
	return p;
}

/* An object or array; p at its opening bracket. */
static const unsigned char *
json_members(const unsigned char *p, int depth)
{
	int obj = *p == '{';
	if (depth >= JSON_DEPTH_MAX)
		return NULL;
	p = json_ws(p + 1);
	if (*p == (obj ? '}' : ']'))
		return p + 1;
	for (;;) {
		if (obj) {
			if (*p != '"' || (p = json_string(p)) == NULL)
				return NULL;
			p = json_ws(p);
			if (*p != ':')
				return NULL;
			p = json_ws(p + 1);
		}
		if ((p = json_value(p, depth + 1)) == NULL)
			return NULL;
		p = json_ws(p);
		if (*p == ',') {
			p = json_ws(p + 1);
			continue;
		}
		return *p == (obj ? '}' : ']') ? p + 1 : NULL;
	}
}

static const unsigned char *
json_value(const unsigned char *p, int depth)
{
	switch (*p) {
	case '{':
	case '[':
		return json_members(p, depth);
	case '"':
		return json_string(p);
	case 't':
		return strncmp((const char *) p, "true", 4) == 0 ? p + 4
		                                                 : NULL;
	case 'f':
		return strncmp((const char *) p, "false", 5) == 0 ? p + 5
		                                                  : NULL;
	case 'n':
		return strncmp((const char *) p, "null", 4) == 0 ? p + 4
		                                                 : NULL;
	default:
		return json_number(p);
	}
}

int
ax_json_object_valid(const char *s)
{
	const unsigned char *p;
	if (s == NULL)
		return 0;
	p = json_ws((const unsigned char *) s);
	if (*p != '{' || (p = json_members(p, 0)) == NULL)
		return 0;
	return *json_ws(p) == '\0';
}

size_t
ax_json_escape(char *buf, size_t len, size_t cap, const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	if (cap == 0)
		return 0;
	while (*p != '\0' && len + 7 < cap) {
		size_t n;
		switch (*p) {
		case '"':
			len += (size_t) snprintf(buf + len, cap - len, "\\\"");
			p++;
			continue;
		case '\\':
			len += (size_t) snprintf(buf + len, cap - len, "\\\\");
			p++;
			continue;
		case '\n':
			len += (size_t) snprintf(buf + len, cap - len, "\\n");
			p++;
			continue;
		case '\t':
			len += (size_t) snprintf(buf + len, cap - len, "\\t");
			p++;
			continue;
		case '\r':
			len += (size_t) snprintf(buf + len, cap - len, "\\r");
			p++;
			continue;
		default:
			break;
		}
		if (*p < 0x20) {
			len += (size_t) snprintf(buf + len, cap - len,
			                         "\\u%04x", *p);
			p++;
			continue;
		}
		n = utf8_len(p);
		if (n == 0) {
			len +=
			    (size_t) snprintf(buf + len, cap - len, "\\ufffd");
			p++;
			continue;
		}
		memcpy(buf + len, p, n);
		len += n;
		p += n;
	}
	buf[len] = '\0';
	return len;
}

static size_t
put_str(char *buf, size_t len, size_t cap, const char *key, const char *v)
{
	if (len + 8 >= cap)
		return len;
	len += (size_t) snprintf(buf + len, cap - len, ",\"%s\":\"", key);
	len        = ax_json_escape(buf, len, cap - 2, v);
	buf[len++] = '"';
	buf[len]   = '\0';
	return len;
}

static size_t
put_int(char *buf, size_t len, size_t cap, const char *key, int64_t v)
{
	int n = snprintf(buf + len, cap - len, ",\"%s\":%" PRId64, key, v);
	if (n < 0 || (size_t) n >= cap - len)
		return len;
	return len + (size_t) n;
}

void
ax_logf(ax_log_level lvl, const char *component, const char *reason,
        const ax_log_ids *ids, const char *fmt, ...)
{
	char    line[4096];
	char    msg[2048];
	char    ts[40];
	size_t  len;
	va_list ap;

	if (!ax_log_enabled(lvl))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ax_clock_fmt_utc(ax_clock_utc_us(), ts, sizeof(ts));
	len = (size_t) snprintf(line, sizeof(line),
	                        "{\"time\":\"%s\",\"level\":\"%s\"", ts,
	                        level_names[lvl]);
	len = put_str(line, len, sizeof(line) - 2, "component",
	              component ? component : "ax");
	len = put_str(line, len, sizeof(line) - 2, "msg", msg);
	if (reason != NULL)
		len = put_str(line, len, sizeof(line) - 2, "reason", reason);
	if (ids != NULL) {
		if (ids->dag != NULL)
			len = put_str(line, len, sizeof(line) - 2, "dag",
			              ids->dag);
		if (ids->run != 0)
			len = put_int(line, len, sizeof(line) - 2, "run",
			              ids->run);
		if (ids->instance != 0)
			len = put_int(line, len, sizeof(line) - 2, "instance",
			              ids->instance);
		if (ids->run_id != NULL)
			len = put_str(line, len, sizeof(line) - 2, "run_id",
			              ids->run_id);
		if (ids->attempt != 0)
			len = put_int(line, len, sizeof(line) - 2, "attempt",
			              ids->attempt);
	}
	line[len++] = '}';
	line[len++] = '\n';
	/* One write keeps lines whole; a short write on a log is dropped. */
	if (write(ax_log_cfg.fd, line, len) < 0)
		return;
}
