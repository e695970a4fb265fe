/*
 * cron.c - cron expressions: parser and next/previous fire time.
 *
 * Role: see cron.h. The parser turns each field into a bitmask (seconds
 * and minutes 64 bits, hours 24, days 31, months 12, weekdays 7, years
 * 230) plus the few day rules that depend on the month (L, L-n, nW, LW,
 * nL, n#k). Matching is done on local wall seconds by a calendar search
 * that jumps field by field (year, month, day, hour, minute, second);
 * the time zone is handled on top of it, one span of constant UTC offset
 * at a time, which is where the Vixie daylight-saving rules live.
 *
 * Invariants: an ax_cron is immutable after parse; all searches are
 * bounded by AX_CRON_YEAR_MIN..AX_CRON_YEAR_MAX.
 *
 * Workload: the time detector calls next() once per fire per DAG (tens of
 * thousands of DAGs); the validator calls parse() on every submitted DAG.
 */
#include "cron.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SEC_PER_DAY  86400LL
#define USEC_PER_SEC 1000000LL
#define NYEARS       (AX_CRON_YEAR_MAX - AX_CRON_YEAR_MIN + 1)

struct ax_cron {
	char    *text;        /* the expression as given */
	uint64_t sec;         /* bits 0-59 */
	uint64_t min;         /* bits 0-59 */
	uint32_t hour;        /* bits 0-23 */
	uint32_t dom;         /* bits 1-31: plain days of month */
	uint16_t mon;         /* bits 1-12 */
	uint8_t  dow;         /* bits 0-6, 0 = Sunday: plain weekdays */
	uint64_t year[4];     /* bit y - AX_CRON_YEAR_MIN */
	uint32_t dom_last;    /* bit n: L-n (L is L-0) */
	uint32_t dom_wd;      /* bit n: nW, nearest weekday to day n */
	int      dom_lw;      /* LW: last weekday of the month */
	uint8_t  dow_last;    /* bit w: wL, last weekday w of the month */
	uint8_t  dow_nth[7];  /* per weekday: bit k for w#k */
	int      dom_star;    /* day-of-month field starts with * or ? */
	int      dow_star;    /* day-of-week field starts with * or ? */
	int      fixed;       /* no * or step in minute and hour */
	uint32_t dow_days[7]; /* plain weekdays as day bits, per weekday of
	                         the 1st of the month */
};

/* ---- parsing ---- */

enum { F_SEC, F_MIN, F_HOUR, F_DOM, F_MON, F_DOW, F_YEAR };

static const struct {
	const char *name;
	int         lo, hi;
} fdefs[] = {
	[F_SEC]  = { "second", 0, 59 },
	[F_MIN]  = { "minute", 0, 59 },
	[F_HOUR] = { "hour", 0, 23 },
	[F_DOM]  = { "day of month", 1, 31 },
	[F_MON]  = { "month", 1, 12 },
	[F_DOW]  = { "day of week", 0, 7 },
	[F_YEAR] = { "year", AX_CRON_YEAR_MIN, AX_CRON_YEAR_MAX },
};

static const char *const mon_names[] = { "JAN", "FEB", "MAR", "APR",
	                                 "MAY", "JUN", "JUL", "AUG",
	                                 "SEP", "OCT", "NOV", "DEC" };
static const char *const dow_names[] = { "SUN", "MON", "TUE", "WED",
	                                 "THU", "FRI", "SAT" };

typedef struct pctx {
	const char  *expr;
	ax_cron_err *err;
	int          field_no; /* 1-based position in the expression */
	int          kind;     /* F_* */
	int          quartz;   /* 6/7-field form: weekday 1-7, 1 = SUN */
	int          lo, hi;   /* the field's range in user numbering */
	size_t       fstart, flen;
	uint64_t     bits[4]; /* user values, bit v - lo */
	ax_cron     *c;
} pctx;

static ax_err perr(pctx *p, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records a parse error at byte off of the expression. */
static ax_err
perr(pctx *p, size_t off, const char *fmt, ...)
{
	ax_cron_err tmp, *e = p->err ? p->err : &tmp;
	char        msg[160];
	va_list     ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->field        = p->field_no;
	e->offset       = off;
	e->field_offset = p->field_no ? p->fstart : off;
	e->field_len    = p->field_no ? p->flen : 0;
	if (p->field_no)
		snprintf(e->msg, sizeof(e->msg), "field %d (%s): %s",
		         p->field_no, fdefs[p->kind].name, msg);
	else
		snprintf(e->msg, sizeof(e->msg), "%s", msg);
	return ax_err_set(AX_EPARSE, "%s", e->msg);
}

static size_t
off_of(const pctx *p, const char *s)
{
	return (size_t) (s - p->expr);
}

/* Range text for messages: "0-23", or "1-7 (1 = SUN)" for Quartz. */
static const char *
range_text(const pctx *p, char *buf, size_t len)
{
	if (p->kind == F_DOW)
		snprintf(buf, len, "%s",
		         p->quartz ? "1-7 (SUN-SAT; 1 = SUN)"
		                   : "0-7 (SUN-SAT; 0 and 7 = SUN)");
	else if (p->kind == F_MON)
		snprintf(buf, len, "1-12 (JAN-DEC)");
	else
		snprintf(buf, len, "%d-%d", p->lo, p->hi);
	return buf;
}

/*
 * Reads one value (number or name) from [*sp, e) in user numbering,
 * stopping at the first character that cannot continue it.
 */
static ax_err
read_value(pctx *p, const char **sp, const char *e, int *out)
{
	const char *s = *sp;
	char        rb[48];

	if (s < e && isdigit((unsigned char) *s)) {
		long v = 0;
		while (s < e && isdigit((unsigned char) *s)) {
			if (v < 100000)
				v = v * 10 + (*s - '0');
			s++;
		}
		if (v < p->lo || v > p->hi)
			return perr(p, off_of(p, *sp),
			            "value %.*s out of range %s",
			            (int) (s - *sp), *sp,
			            range_text(p, rb, sizeof(rb)));
		*out = (int) v;
		*sp  = s;
		return AX_OK;
	}
	if (s < e && isalpha((unsigned char) *s) &&
	    (p->kind == F_MON || p->kind == F_DOW)) {
		const char *const *names =
		    p->kind == F_MON ? mon_names : dow_names;
		int         n = p->kind == F_MON ? 12 : 7;
		const char *t = s;
		while (t < e && isalpha((unsigned char) *t) && t - s < 3)
			t++;
		for (int i = 0; i < n && t - s == 3; i++)
			if (strncasecmp(s, names[i], 3) == 0) {
				if (p->kind == F_MON)
					*out = i + 1;
				else
					*out = p->quartz ? i + 1 : i;
				*sp = t;
				return AX_OK;
			}
		while (t < e && isalpha((unsigned char) *t))
			t++;
		return perr(p, off_of(p, s),
		            "unknown name '%.*s' (expected %s)", (int) (t - s),
		            s, p->kind == F_MON ? "JAN-DEC" : "SUN-SAT");
	}
	if (s >= e)
		return perr(p, off_of(p, s), "missing value");
	return perr(p, off_of(p, s), "unexpected '%c', expected a value in %s",
	            *s, range_text(p, rb, sizeof(rb)));
}

static void
set_bit(pctx *p, int v)
{
	int i = v - p->lo;
	p->bits[i / 64] |= 1ULL << (i % 64);
}

/* Weekday 0-6 (0 = Sunday) of a user day-of-week value. */
static int
user_wday(const pctx *p, int v)
{
	return p->quartz ? v - 1 : v % 7;
}

/* Reads a small number in [lo, hi] for L-n, nW, #k. */
static ax_err
read_small(pctx *p, const char **sp, const char *e, int lo, int hi,
           const char *what)
{
	const char *s = *sp;
	int         v = 0;
	if (s >= e || !isdigit((unsigned char) *s))
		return perr(p, off_of(p, s), "expected %s (%d-%d)", what, lo,
		            hi);
	while (s < e && isdigit((unsigned char) *s)) {
		if (v < 1000)
			v = v * 10 + (*s - '0');
		s++;
	}
	if (v < lo || v > hi)
		return perr(p, off_of(p, *sp), "%s %.*s out of range %d-%d",
		            what, (int) (s - *sp), *sp, lo, hi);
	*sp = s;
	return AX_OK;
}

static int
read_small_value(const char *s, const char *e)
{
	int v = 0;
	for (; s < e; s++)
		v = v * 10 + (*s - '0');
	return v;
}

/* Day-of-month specials: L, L-n, LW, nW. Returns 1 when handled. */
static int
dom_special(pctx *p, const char *s, const char *e, ax_err *rv)
{
	size_t n = (size_t) (e - s);
	*rv      = AX_OK;
	if (n == 1 && (*s == 'L' || *s == 'l')) {
		p->c->dom_last |= 1;
		return 1;
	}
	if (n == 2 && strncasecmp(s, "LW", 2) == 0) {
		p->c->dom_lw = 1;
		return 1;
	}
	if (n >= 2 && (*s == 'L' || *s == 'l') && s[1] == '-') {
		const char *t = s + 2;
		if ((*rv = read_small(p, &t, e, 0, 30,
		                      "days before the last")) != AX_OK)
			return 1;
		if (t != e)
			*rv = perr(p, off_of(p, t),
			           "unexpected '%c' after L-n", *t);
		else
			p->c->dom_last |= 1u << read_small_value(s + 2, e);
		return 1;
	}
	if (n >= 2 && (e[-1] == 'W' || e[-1] == 'w')) {
		const char *t = s;
		if ((*rv = read_small(p, &t, e - 1, 1, 31, "day")) != AX_OK)
			return 1;
		if (t != e - 1)
			*rv = perr(p, off_of(p, t), "unexpected '%c' before W",
			           *t);
		else
			p->c->dom_wd |= 1u << read_small_value(s, e - 1);
		return 1;
	}
	return 0;
}

/* Day-of-week specials: L, wL, w#k. Returns 1 when handled. */
static int
dow_special(pctx *p, const char *s, const char *e, ax_err *rv)
{
	size_t      n    = (size_t) (e - s);
	const char *hash = memchr(s, '#', n);
	const char *t    = s;
	int         v;

	*rv = AX_OK;
	if (n == 1 && (*s == 'L' || *s == 'l')) {
		set_bit(p, p->quartz ? 7 : 6); /* Saturday */
		return 1;
	}
	if (hash != NULL) {
		if ((*rv = read_value(p, &t, hash, &v)) != AX_OK)
			return 1;
		if (t != hash) {
			*rv = perr(p, off_of(p, t), "unexpected '%c' before #",
			           *t);
			return 1;
		}
		t = hash + 1;
		if ((*rv = read_small(p, &t, e, 1, 5, "week")) != AX_OK)
			return 1;
		if (t != e) {
			*rv = perr(p, off_of(p, t), "unexpected '%c' after #",
			           *t);
			return 1;
		}
		p->c->dow_nth[user_wday(p, v)] |= 1u
		    << read_small_value(hash + 1, e);
		return 1;
	}
	if (n >= 2 && (e[-1] == 'L' || e[-1] == 'l') &&
	    (isdigit((unsigned char) *s) || n == 4)) {
		if ((*rv = read_value(p, &t, e - 1, &v)) != AX_OK)
			return 1;
		if (t != e - 1) {
			*rv = perr(p, off_of(p, t), "unexpected '%c' before L",
			           *t);
			return 1;
		}
		p->c->dow_last |= 1u << user_wday(p, v);
		return 1;
	}
	return 0;
}

static int
is_cyclic(int kind)
{
	return kind != F_DOM && kind != F_YEAR;
}

/* One comma-separated item [s, e) of the current field. */
static ax_err
parse_item(pctx *p, const char *s, const char *e)
{
	const char *slash = memchr(s, '/', (size_t) (e - s));
	const char *t     = s;
	const char *be    = slash ? slash : e;
	int         a, b, step = 1;
	ax_err      rv;

	if (s == e)
		return perr(p, off_of(p, s), "empty list item");
	if (p->kind == F_DOM && dom_special(p, s, e, &rv))
		return rv;
	if (p->kind == F_DOW && dow_special(p, s, e, &rv))
		return rv;

	if (*t == '*' || *t == '?') {
		if (*t == '?' && p->kind != F_DOM && p->kind != F_DOW)
			return perr(p, off_of(p, t),
			            "'?' is only allowed in day of month and "
			            "day of week");
		if (*t == '?' && slash)
			return perr(p, off_of(p, slash),
			            "'?' cannot take a step");
		a = p->lo, b = p->hi, t++;
		if (p->kind == F_DOW)
			b = p->quartz ? 7 : 6;
	} else {
		if ((rv = read_value(p, &t, be, &a)) != AX_OK)
			return rv;
		b = slash ? p->hi : a;
		if (t < be && *t == '-') {
			t++;
			if ((rv = read_value(p, &t, be, &b)) != AX_OK)
				return rv;
			if (a > b && !is_cyclic(p->kind))
				return perr(p, off_of(p, s),
				            "range %d-%d is backwards (write "
				            "%d-%d)",
				            a, b, b, a);
		}
	}
	if (t != be)
		return perr(p, off_of(p, t), "unexpected '%c'", *t);
	if (slash) {
		const char *st = slash + 1;
		if ((rv = read_small(p, &st, e, 1, p->hi - p->lo + 1,
		                     "step")) != AX_OK)
			return rv;
		if (st != e)
			return perr(p, off_of(p, st), "unexpected '%c'", *st);
		step = read_small_value(slash + 1, e);
	}
	int span = p->hi - p->lo + 1;
	int n    = a <= b ? b - a + 1 : b - a + span + 1;
	for (int i = 0; i < n; i += step)
		set_bit(p, p->lo + (a - p->lo + i) % span);
	return AX_OK;
}

static int
test_bit(const pctx *p, int v)
{
	int i = v - p->lo;
	return (p->bits[i / 64] >> (i % 64)) & 1;
}

/* Stores the user-numbered bits of the current field into the cron. */
static void
store_field(pctx *p, const char *fs)
{
	ax_cron *c = p->c;
	for (int v = p->lo; v <= p->hi; v++) {
		if (!test_bit(p, v))
			continue;
		switch (p->kind) {
		case F_SEC:
			c->sec |= 1ULL << v;
			break;
		case F_MIN:
			c->min |= 1ULL << v;
			break;
		case F_HOUR:
			c->hour |= 1u << v;
			break;
		case F_DOM:
			c->dom |= 1u << v;
			break;
		case F_MON:
			c->mon |= (uint16_t) (1u << v);
			break;
		case F_DOW:
			c->dow |= (uint8_t) (1u << user_wday(p, v));
			break;
		default:
			c->year[(v - AX_CRON_YEAR_MIN) / 64] |= 1ULL
			    << ((v - AX_CRON_YEAR_MIN) % 64);
		}
	}
	if (p->kind == F_DOM)
		c->dom_star = *fs == '*' || *fs == '?';
	if (p->kind == F_DOW)
		c->dow_star = *fs == '*' || *fs == '?';
}

static ax_err
parse_field(pctx *p, const char *fs, const char *fe)
{
	ax_err rv;

	memset(p->bits, 0, sizeof(p->bits));
	p->lo = fdefs[p->kind].lo;
	p->hi = fdefs[p->kind].hi;
	if (p->kind == F_DOW && p->quartz)
		p->lo = 1;
	p->fstart = off_of(p, fs);
	p->flen   = (size_t) (fe - fs);
	for (const char *s = fs;;) {
		const char *comma = memchr(s, ',', (size_t) (fe - s));
		const char *ie    = comma ? comma : fe;
		if ((rv = parse_item(p, s, ie)) != AX_OK)
			return rv;
		if (comma == NULL)
			break;
		s = comma + 1;
	}
	store_field(p, fs);
	if ((p->kind == F_MIN || p->kind == F_HOUR) &&
	    (memchr(fs, '*', p->flen) || memchr(fs, '/', p->flen)))
		p->c->fixed = 0;
	return AX_OK;
}

static const struct {
	const char *name;
	const char *expansion;
} macros[] = {
	{ "@yearly", "0 0 1 1 *" },  { "@annually", "0 0 1 1 *" },
	{ "@monthly", "0 0 1 * *" }, { "@weekly", "0 0 * * 0" },
	{ "@daily", "0 0 * * *" },   { "@midnight", "0 0 * * *" },
	{ "@hourly", "0 * * * *" },
};

static void
precompute(ax_cron *c)
{
	for (int wd1 = 0; wd1 < 7; wd1++) {
		uint32_t m = 0;
		for (int d = 1; d <= 31; d++)
			if (c->dow >> ((wd1 + d - 1) % 7) & 1)
				m |= 1u << d;
		c->dow_days[wd1] = m;
	}
}

/* Parses the fields of a 5/6/7-field expression (no macro). */
static ax_err
parse_fields(pctx *p, const char *text)
{
	const char      *fs[8], *fe[8];
	int              n        = 0;
	const char      *s        = text;
	static const int kinds5[] = { F_MIN, F_HOUR, F_DOM, F_MON, F_DOW };
	static const int kinds7[] = { F_SEC, F_MIN, F_HOUR, F_DOM,
		                      F_MON, F_DOW, F_YEAR };
	ax_err           rv;

	for (;;) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0')
			break;
		if (n == 8)
			break;
		fs[n] = s;
		while (*s && *s != ' ' && *s != '\t')
			s++;
		fe[n++] = s;
	}
	if (n < 5 || n > 7)
		return perr(p, n == 8 ? off_of(p, fs[7]) : 0,
		            "expected 5 fields (MIN HOUR DOM MON DOW) or 6-7 "
		            "(SEC MIN HOUR DOM MON DOW [YEAR]), got %s%d",
		            n == 8 ? "more than " : "", n == 8 ? 7 : n);
	p->quartz = n >= 6;
	if (n == 5)
		p->c->sec = 1; /* second 0 */
	if (n < 7)
		memset(p->c->year, 0xff, sizeof(p->c->year));
	for (int i = 0; i < n; i++) {
		p->field_no = i + 1;
		p->kind     = n == 5 ? kinds5[i] : kinds7[i];
		if ((rv = parse_field(p, fs[i], fe[i])) != AX_OK)
			return rv;
	}
	p->field_no = 0;
	return AX_OK;
}

ax_err
ax_cron_parse(const char *expr, ax_cron **out, ax_cron_err *err)
{
	pctx        p    = { 0 };
	const char *text = expr;
	ax_err      rv;

	*out   = NULL;
	p.expr = expr;
	p.err  = err;
	if (err != NULL)
		memset(err, 0, sizeof(*err));
	if (expr == NULL)
		return perr(&p, 0, "empty cron expression");
	if (strlen(expr) > AX_CRON_MAX_LEN)
		return perr(&p, AX_CRON_MAX_LEN,
		            "cron expression longer than %d bytes",
		            AX_CRON_MAX_LEN);
	const char *s = expr;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '\0')
		return perr(&p, 0, "empty cron expression");
	for (const char *q = expr; *q; q++)
		if (!isprint((unsigned char) *q) && *q != '\t')
			return perr(&p, off_of(&p, q),
			            "unexpected byte 0x%02x",
			            (unsigned char) *q);
	if (*s == '@') {
		size_t n = strcspn(s, " \t");
		text     = NULL;
		for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
			if (strlen(macros[i].name) == n &&
			    strncasecmp(s, macros[i].name, n) == 0)
				text = macros[i].expansion;
		if (text == NULL)
			return perr(&p, off_of(&p, s),
			            "unknown macro '%.*s' (use @yearly, "
			            "@annually, @monthly, @weekly, @daily, "
			            "@midnight or @hourly)",
			            (int) n, s);
		const char *rest = s + n;
		while (*rest == ' ' || *rest == '\t')
			rest++;
		if (*rest != '\0')
			return perr(&p, off_of(&p, rest),
			            "unexpected text after %.*s", (int) n, s);
	}

	ax_cron *c = calloc(1, sizeof(*c));
	if (c == NULL || (c->text = strdup(expr)) == NULL) {
		free(c);
		return ax_err_set(AX_ENOMEM, "out of memory parsing cron");
	}
	c->fixed = 1;
	p.c      = c;
	if (text != expr)
		p.expr = text; /* macro: offsets are into the expansion */
	if ((rv = parse_fields(&p, text)) != AX_OK) {
		ax_cron_free(c);
		return rv;
	}
	precompute(c);
	*out = c;
	return AX_OK;
}

void
ax_cron_free(ax_cron *c)
{
	if (c == NULL)
		return;
	free(c->text);
	free(c);
}

int
ax_cron_is_fixed(const ax_cron *c)
{
	return c->fixed;
}

const char *
ax_cron_text(const ax_cron *c)
{
	return c->text;
}

/* ---- calendar search on wall seconds ---- */

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

/* Lowest set bit >= from, or -1. */
static int
next_bit(uint64_t m, int from)
{
	if (from < 0)
		from = 0;
	if (from > 63)
		return -1;
	m &= ~0ULL << from;
	return m ? __builtin_ctzll(m) : -1;
}

/* Highest set bit <= from, or -1. */
static int
prev_bit(uint64_t m, int from)
{
	if (from < 0)
		return -1;
	if (from < 63)
		m &= (1ULL << (from + 1)) - 1;
	return m ? 63 - __builtin_clzll(m) : -1;
}

static int
year_ok(const ax_cron *c, int64_t y)
{
	int64_t i = y - AX_CRON_YEAR_MIN;
	return i >= 0 && i < NYEARS && (c->year[i / 64] >> (i % 64) & 1);
}

/* Next allowed year >= y, or -1. */
static int64_t
year_next(const ax_cron *c, int64_t y)
{
	for (int64_t i = y < AX_CRON_YEAR_MIN ? 0 : y - AX_CRON_YEAR_MIN;
	     i < NYEARS; i++) {
		int b = next_bit(c->year[i / 64], (int) (i % 64));
		if (b >= 0)
			return AX_CRON_YEAR_MIN + (i / 64) * 64 + b;
		i = (i / 64) * 64 + 63;
	}
	return -1;
}

static int64_t
year_prev(const ax_cron *c, int64_t y)
{
	for (int64_t i = y > AX_CRON_YEAR_MAX ? NYEARS - 1
	                                      : y - AX_CRON_YEAR_MIN;
	     i >= 0; i--) {
		int b = prev_bit(c->year[i / 64], (int) (i % 64));
		if (b >= 0)
			return AX_CRON_YEAR_MIN + (i / 64) * 64 + b;
		i = (i / 64) * 64;
	}
	return -1;
}

/* Matching days of month y-m as bits 1..31. */
static uint32_t
day_mask(const ax_cron *c, int64_t y, int m)
{
	int      dim  = ax_tz_days_in_month(y, m);
	uint32_t all  = (uint32_t) (((1ULL << dim) - 1) << 1);
	int64_t  day1 = ax_tz_days_from_civil(y, m, 1);
	int      wd1  = (int) (((day1 + 4) % 7 + 7) % 7);
	uint32_t dm = 0, wm = 0;

	if (c->dom_star && c->dow_star && c->dom == 0xfffffffeu &&
	    c->dow == 0x7f)
		return all; /* the common `* *`: nothing to compute */
	{
		dm = c->dom & all;
		for (uint32_t b = c->dom_last; b; b &= b - 1) {
			int n = __builtin_ctz(b);
			if (dim - n >= 1)
				dm |= 1u << (dim - n);
		}
		for (uint32_t b = c->dom_wd; b; b &= b - 1) {
			int n = __builtin_ctz(b), wd;
			if (n > dim)
				continue;
			wd = (wd1 + n - 1) % 7;
			if (wd ==
			    6) /* Saturday: Friday, or Monday on the 1st */
				n = n > 1 ? n - 1 : n + 2;
			else if (wd ==
			         0) /* Sunday: Monday, or Friday at end */
				n = n < dim ? n + 1 : n - 2;
			dm |= 1u << n;
		}
		if (c->dom_lw) {
			int wd = (wd1 + dim - 1) % 7;
			int n  = wd == 6 ? dim - 1 : wd == 0 ? dim - 2 : dim;
			dm |= 1u << n;
		}
	}
	{
		int wdl = (wd1 + dim - 1) % 7; /* weekday of the last day */
		wm      = c->dow_days[wd1] & all;
		for (int w = 0; w < 7; w++) {
			if (c->dow_last >> w & 1)
				wm |= 1u << (dim - (wdl - w + 7) % 7);
			for (int k = 1; k <= 5; k++) {
				int d = 1 + (w - wd1 + 7) % 7 + 7 * (k - 1);
				if ((c->dow_nth[w] >> k & 1) && d <= dim)
					wm |= 1u << d;
			}
		}
	}
	/* Vixie: either field starting with * or ? means both must match
	 * (the starred one usually matches every day); otherwise either. */
	if (c->dom_star || c->dow_star)
		return dm & wm;
	return dm | wm;
}

typedef struct civil {
	int64_t y;
	int     mo, d, h, mi, s;
} civil;

static void
civil_of(int64_t w, civil *t)
{
	int64_t days = floor_div(w, SEC_PER_DAY);
	int64_t sod  = w - days * SEC_PER_DAY;
	ax_tz_civil_from_days(days, &t->y, &t->mo, &t->d);
	t->h  = (int) (sod / 3600);
	t->mi = (int) (sod / 60 % 60);
	t->s  = (int) (sod % 60);
}

static int64_t
wall_of(const civil *t)
{
	return ax_tz_days_from_civil(t->y, t->mo, t->d) * SEC_PER_DAY +
	    t->h * 3600LL + t->mi * 60LL + t->s;
}

/* Smallest matching wall second >= w; 0 when none up to the year max. */
static int
cal_next(const ax_cron *c, int64_t w, int64_t *out)
{
	civil t;

	civil_of(w, &t);
	if (t.y < AX_CRON_YEAR_MIN)
		t = (civil) { AX_CRON_YEAR_MIN, 1, 1, 0, 0, 0 };
	for (;;) {
		if (!year_ok(c, t.y)) {
			if ((t.y = year_next(c, t.y)) < 0)
				return 0;
			t.mo = 1, t.d = 1, t.h = t.mi = t.s = 0;
		}
		int m = next_bit(c->mon, t.mo);
		if (m < 0) {
			t.y++, t.mo = 1, t.d = 1, t.h = t.mi = t.s = 0;
			continue;
		}
		if (m != t.mo)
			t.mo = m, t.d = 1, t.h = t.mi = t.s = 0;
		int d = next_bit(day_mask(c, t.y, t.mo), t.d);
		if (d < 0) {
			t.mo++, t.d = 1, t.h = t.mi = t.s = 0;
			continue;
		}
		if (d != t.d)
			t.d = d, t.h = t.mi = t.s = 0;
		int h = next_bit(c->hour, t.h);
		if (h < 0) {
			t.d++, t.h = t.mi = t.s = 0;
			continue;
		}
		if (h != t.h)
			t.h = h, t.mi = t.s = 0;
		int mi = next_bit(c->min, t.mi);
		if (mi < 0) {
			t.h++, t.mi = t.s = 0;
			continue;
		}
		if (mi != t.mi)
			t.mi = mi, t.s = 0;
		int s = next_bit(c->sec, t.s);
		if (s < 0) {
			t.mi++, t.s = 0;
			continue;
		}
		t.s  = s;
		*out = wall_of(&t);
		return 1;
	}
}

/* Largest matching wall second <= w; 0 when none down to the year min. */
static int
cal_prev(const ax_cron *c, int64_t w, int64_t *out)
{
	civil t;

	civil_of(w, &t);
	if (t.y > AX_CRON_YEAR_MAX)
		t = (civil) { AX_CRON_YEAR_MAX, 12, 31, 23, 59, 59 };
	for (;;) {
		if (!year_ok(c, t.y)) {
			if ((t.y = year_prev(c, t.y)) < 0)
				return 0;
			t.mo = 12, t.d = 31, t.h = 23, t.mi = t.s = 59;
		}
		int m = prev_bit(c->mon, t.mo);
		if (m < 1) {
			t.y--, t.mo = 12, t.d = 31, t.h = 23, t.mi = t.s = 59;
			continue;
		}
		if (m != t.mo)
			t.mo = m, t.d = 31, t.h = 23, t.mi = t.s = 59;
		int d = prev_bit(day_mask(c, t.y, t.mo), t.d);
		if (d < 1) {
			t.mo--, t.d = 31, t.h = 23, t.mi = t.s = 59;
			if (t.mo == 0)
				t.y--, t.mo = 12;
			continue;
		}
		if (d != t.d)
			t.d = d, t.h = 23, t.mi = t.s = 59;
		int h = prev_bit(c->hour, t.h);
		if (h < 0) {
			t.d--, t.h = 23, t.mi = t.s = 59;
			continue;
		}
		if (h != t.h)
			t.h = h, t.mi = t.s = 59;
		int mi = prev_bit(c->min, t.mi);
		if (mi < 0) {
			t.h--, t.mi = t.s = 59;
			continue;
		}
		if (mi != t.mi)
			t.mi = mi, t.s = 59;
		int s = prev_bit(c->sec, t.s);
		if (s < 0) {
			t.mi--, t.s = 59;
			continue;
		}
		t.s  = s;
		*out = wall_of(&t);
		return 1;
	}
}

/*
 * One remembered calendar answer: the first match at or after `from` is
 * `w` (or none), so any query in [from, w] has the same answer. Walking
 * span after span of a zone then costs no new calendar search.
 */
typedef struct memo {
	int     valid, found;
	int64_t from, w;
} memo;

static int
match_ge(const ax_cron *c, memo *k, int64_t from, int64_t *w)
{
	if (k->valid && from >= k->from && (!k->found || from <= k->w)) {
		*w = k->w;
		return k->found;
	}
	k->valid = 1;
	k->from  = from;
	k->found = cal_next(c, from, &k->w);
	*w       = k->w;
	return k->found;
}

static int
match_le(const ax_cron *c, memo *k, int64_t from, int64_t *w)
{
	if (k->valid && from <= k->from && (!k->found || from >= k->w)) {
		*w = k->w;
		return k->found;
	}
	k->valid = 1;
	k->from  = from;
	k->found = cal_prev(c, from, &k->w);
	*w       = k->w;
	return k->found;
}

/* Spans visited before giving up: two per year for 230 years plus
 * historical oddities; only a hostile zone file could reach it. */
#define MAX_SPANS   20000
#define JUMP_MARGIN (3 * SEC_PER_DAY)

ax_err
ax_cron_next(const ax_cron *c, const ax_tz *tz, int64_t after_us,
             int64_t *next_us)
{
	const ax_tz *z = tz ? tz : ax_tz_utc();
	int64_t      s = floor_div(after_us, USEC_PER_SEC) + 1, w;
	ax_tz_span   sp;
	memo         k = { 0 };

	ax_tz_span_at(z, s, &sp);
	for (int i = 0; i < MAX_SPANS; i++) {
		int has_prev = sp.start != INT64_MIN;
		/* Fixed job whose wall time was skipped: fire as the gap
		 * ends, which is the first instant of this span. */
		if (c->fixed && has_prev && s == sp.start &&
		    sp.prev_off < sp.off &&
		    match_ge(c, &k, sp.start + sp.prev_off, &w) &&
		    w < sp.start + sp.off) {
			*next_us = sp.start * USEC_PER_SEC;
			return AX_OK;
		}
		int64_t lower = s + sp.off;
		/* Fixed job: the repeated wall hour already fired in the
		 * span before a fall-back. */
		if (c->fixed && has_prev && sp.prev_off > sp.off &&
		    lower < sp.start + sp.prev_off)
			lower = sp.start + sp.prev_off;
		if (!match_ge(c, &k, lower, &w))
			break;
		if (sp.end == INT64_MAX || w < sp.end + sp.off) {
			*next_us = (w - sp.off) * USEC_PER_SEC;
			return AX_OK;
		}
		s = sp.end;
		/* w is the first match at or after `lower` and lies days
		 * ahead: skip the spans in between (their wall times are in
		 * [lower, w), gaps included), unless a fall-back right after
		 * this span repeats wall times below `lower`. The margin
		 * exceeds any offset difference (< 52h). */
		if (lower <= sp.end +
		            (sp.next_off < sp.off ? sp.next_off : sp.off) &&
		    w - sp.off - JUMP_MARGIN > s)
			s = w - sp.off - JUMP_MARGIN;
		ax_tz_span_at(z, s, &sp);
	}
	return ax_err_set(AX_ENOENT,
	                  "cron '%s' has no fire time after the given "
	                  "instant up to year %d",
	                  c->text, AX_CRON_YEAR_MAX);
}

ax_err
ax_cron_prev(const ax_cron *c, const ax_tz *tz, int64_t before_us,
             int64_t *prev_us)
{
	const ax_tz *z = tz ? tz : ax_tz_utc();
	int64_t      s, w;
	ax_tz_span   sp;
	memo         k = { 0 };

	if (before_us == INT64_MIN)
		return ax_err_set(AX_ENOENT, "no instant before the minimum");
	s = floor_div(before_us - 1, USEC_PER_SEC);
	ax_tz_span_at(z, s, &sp);
	for (int i = 0; i < MAX_SPANS; i++) {
		int     has_prev = sp.start != INT64_MIN;
		int64_t lower    = has_prev ? sp.start + sp.off : INT64_MIN;
		int64_t upper    = s + sp.off;
		if (c->fixed && has_prev && sp.prev_off > sp.off)
			lower = sp.start + sp.prev_off;
		int64_t found = INT64_MIN; /* a match below this span */
		if (lower <= upper) {
			if (!match_le(c, &k, upper, &w))
				break;
			if (w >= lower) {
				*prev_us = (w - sp.off) * USEC_PER_SEC;
				return AX_OK;
			}
			found = w;
		}
		if (!has_prev)
			break;
		if (c->fixed && sp.prev_off < sp.off &&
		    match_le(c, &k, sp.start + sp.off - 1, &w) &&
		    w >= sp.start + sp.prev_off) {
			*prev_us = sp.start * USEC_PER_SEC;
			return AX_OK;
		}
		s = sp.start - 1;
		/* mirror of the jump in ax_cron_next */
		if (upper >= sp.start +
		            (sp.prev_off > sp.off ? sp.prev_off : sp.off) &&
		    found != INT64_MIN && found - sp.off + JUMP_MARGIN < s)
			s = found - sp.off + JUMP_MARGIN;
		ax_tz_span_at(z, s, &sp);
	}
	return ax_err_set(AX_ENOENT,
	                  "cron '%s' has no fire time before the given "
	                  "instant since year %d",
	                  c->text, AX_CRON_YEAR_MIN);
}
