/*
 * tz.c - IANA time zones from TZif files, civil time, ISO 8601 instants.
 *
 * Role: the time layer under cron, schedules and the renderer; see tz.h.
 *
 * Invariants: an ax_tz is immutable once loaded (no lazy state), so any
 * thread may use it; nothing here reads or sets the process TZ. The
 * transition table is strictly increasing and every type index is valid
 * (checked at load). Instants before the table use type 0 (RFC 8536);
 * instants at or past the last transition use the POSIX TZ footer rule.
 * Leap-second records ("right/" zones) are ignored.
 *
 * Workload: a handful of zones per process, loaded once; offset look-ups
 * are a binary search or a few date computations, a fraction of a
 * microsecond, called several times per cron next().
 */
#include "tz.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suggest.h"

#define TZ_MAX_FILE    (4 << 20) /* larger TZif files are rejected */
#define TZ_MAX_NAME    255
#define TZ_DEFAULT_DIR "/usr/share/zoneinfo"
#define SEC_PER_DAY    86400LL
#define USEC_PER_SEC   1000000LL
/* Rule arithmetic is kept to years where int64 seconds cannot overflow. */
#define TZ_RULE_YEAR_MIN (-1000000)
#define TZ_RULE_YEAR_MAX 1000000

/* One date of a POSIX TZ rule: Jn, n or Mm.w.d, plus a local time. */
typedef struct rule_date {
	char    kind; /* 'J' (1-365, no Feb 29), 'D' (0-365), 'M' */
	int     n;    /* J and D: the day number */
	int     m;    /* M: month 1-12 */
	int     w;    /* M: week 1-5 (5 = last) */
	int     d;    /* M: weekday 0-6, 0 = Sunday */
	int32_t time; /* seconds after local midnight, may be <0 or >24h */
} rule_date;

typedef struct tz_rule {
	int32_t   std_off; /* seconds east of UTC */
	int32_t   dst_off;
	int       has_dst;
	rule_date start; /* in standard time */
	rule_date end;   /* in daylight time */
} tz_rule;

struct ax_tz {
	char    *name;
	int64_t *trans;      /* transition instants, UTC seconds, increasing */
	uint8_t *trans_type; /* type index per transition */
	size_t   ntrans;
	int32_t *type_off; /* per type: offset */
	uint8_t *type_dst; /* per type: is DST */
	size_t   ntypes;
	int      has_rule;
	tz_rule  rule;
};

/* ---- civil calendar (Howard Hinnant's algorithms) ---- */

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

int64_t
ax_tz_days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = floor_div(y, 400);
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void
ax_tz_civil_from_days(int64_t z, int64_t *year, int *mon, int *mday)
{
	z += 719468;
	int64_t era = floor_div(z, 146097);
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp  = (5 * doy + 2) / 153;
	int64_t d   = doy - (153 * mp + 2) / 5 + 1;
	int64_t m   = mp < 10 ? mp + 3 : mp - 9;
	*year       = yoe + era * 400 + (m <= 2);
	*mon        = (int) m;
	*mday       = (int) d;
}

static int
is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int
ax_tz_days_in_month(int64_t y, int m)
{
	static const int dim[] = { 31, 28, 31, 30, 31, 30,
		                   31, 31, 30, 31, 30, 31 };
	if (m == 2 && is_leap(y))
		return 29;
	return dim[(m - 1) % 12];
}

static int64_t
year_of(int64_t utc_sec)
{
	int64_t y;
	int     m, d;
	ax_tz_civil_from_days(floor_div(utc_sec, SEC_PER_DAY), &y, &m, &d);
	return y;
}

/* ---- POSIX TZ rule ---- */

/* Local seconds since the epoch of the rule date in year y. */
static int64_t
rule_local(const rule_date *r, int64_t y)
{
	int64_t jan1 = ax_tz_days_from_civil(y, 1, 1);
	int64_t day;

	switch (r->kind) {
	case 'J':
		day = jan1 + r->n - 1;
		if (is_leap(y) && r->n >= 60)
			day++;
		break;
	case 'D':
		day = jan1 + r->n;
		break;
	default: {
		int64_t first = ax_tz_days_from_civil(y, r->m, 1);
		int     wd1   = (int) ((first + 4) % 7 + 7) % 7;
		int     md    = 1 + (r->d - wd1 + 7) % 7 + 7 * (r->w - 1);
		while (md > ax_tz_days_in_month(y, r->m))
			md -= 7;
		day = first + md - 1;
		break;
	}
	}
	return day * SEC_PER_DAY + r->time;
}

static void
rule_year(const tz_rule *r, int64_t y, int64_t *start, int64_t *end)
{
	*start = rule_local(&r->start, y) - r->std_off;
	*end   = rule_local(&r->end, y) - r->dst_off;
}

static int
rule_is_dst(const tz_rule *r, int64_t t)
{
	int64_t s, e, y = year_of(t);

	if (!r->has_dst || y < TZ_RULE_YEAR_MIN || y > TZ_RULE_YEAR_MAX)
		return 0;
	rule_year(r, y, &s, &e);
	if (s < e)
		return t >= s && t < e;
	return !(t >= e && t < s);
}

/* ---- look-ups ---- */

/* Index of the last transition <= t, or -1. */
static ptrdiff_t
trans_le(const ax_tz *tz, int64_t t)
{
	size_t lo = 0, hi = tz->ntrans; /* first index with trans > t */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tz->trans[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ptrdiff_t) lo - 1;
}

static void
lookup(const ax_tz *tz, int64_t t, int32_t *off, int *dst)
{
	size_t n = tz->ntrans;

	if (tz->has_rule && (n == 0 || t >= tz->trans[n - 1])) {
		int d = rule_is_dst(&tz->rule, t);
		*off  = d ? tz->rule.dst_off : tz->rule.std_off;
		*dst  = d;
		return;
	}
	ptrdiff_t i  = trans_le(tz, t);
	size_t    ty = i < 0 ? 0 : tz->trans_type[i];
	*off         = tz->type_off[ty];
	*dst         = tz->type_dst[ty];
}

int32_t
ax_tz_offset(const ax_tz *tz, int64_t utc_sec)
{
	int32_t off;
	int     dst;
	lookup(tz, utc_sec, &off, &dst);
	return off;
}

/* Smallest raw transition instant > t; 0 when none. */
static int
raw_next(const ax_tz *tz, int64_t t, int64_t *out)
{
	size_t n = tz->ntrans;

	if (n > 0 && t < tz->trans[n - 1]) {
		*out = tz->trans[trans_le(tz, t) + 1];
		return 1;
	}
	if (!tz->has_rule || !tz->rule.has_dst)
		return 0;
	int64_t floor = n > 0 ? tz->trans[n - 1] : INT64_MIN;
	int64_t y = year_of(t), best = INT64_MAX;
	if (y < TZ_RULE_YEAR_MIN || y > TZ_RULE_YEAR_MAX)
		return 0;
	for (int64_t yy = y - 1; yy <= y + 1; yy++) {
		int64_t tt[2];
		rule_year(&tz->rule, yy, &tt[0], &tt[1]);
		for (int k = 0; k < 2; k++)
			if (tt[k] > t && tt[k] > floor && tt[k] < best)
				best = tt[k];
	}
	*out = best;
	return best != INT64_MAX;
}

/* Largest raw transition instant <= t; 0 when none. */
static int
raw_prev(const ax_tz *tz, int64_t t, int64_t *out)
{
	size_t n = tz->ntrans;

	if (tz->has_rule && tz->rule.has_dst &&
	    (n == 0 || t > tz->trans[n - 1])) {
		int64_t floor = n > 0 ? tz->trans[n - 1] : INT64_MIN;
		int64_t y = year_of(t), best = INT64_MIN;
		if (y < TZ_RULE_YEAR_MIN || y > TZ_RULE_YEAR_MAX)
			return 0;
		for (int64_t yy = y - 1; yy <= y + 1; yy++) {
			int64_t tt[2];
			rule_year(&tz->rule, yy, &tt[0], &tt[1]);
			for (int k = 0; k < 2; k++)
				if (tt[k] <= t && tt[k] > floor &&
				    tt[k] > best)
					best = tt[k];
		}
		if (best != INT64_MIN) {
			*out = best;
			return 1;
		}
	}
	ptrdiff_t i = trans_le(tz, t);
	if (i < 0)
		return 0;
	*out = tz->trans[i];
	return 1;
}

/* Raw transitions that do not change the offset are skipped; a zone
 * cannot have this many in a row, the cap only bounds hostile files. */
#define SPAN_MAX_STEPS 4096

void
ax_tz_span_at(const ax_tz *tz, int64_t t, ax_tz_span *sp)
{
	int64_t cur, tt = 0;

	sp->off      = ax_tz_offset(tz, t);
	sp->start    = INT64_MIN;
	sp->end      = INT64_MAX;
	sp->prev_off = sp->off;
	sp->next_off = sp->off;

	cur = t;
	for (int i = 0; i < SPAN_MAX_STEPS && raw_next(tz, cur, &tt); i++) {
		int32_t o = ax_tz_offset(tz, tt);
		if (o != sp->off) {
			sp->end      = tt;
			sp->next_off = o;
			break;
		}
		cur = tt;
	}
	cur = t;
	for (int i = 0; i < SPAN_MAX_STEPS && raw_prev(tz, cur, &tt); i++) {
		int32_t o = ax_tz_offset(tz, tt - 1);
		if (o != sp->off) {
			sp->start    = tt;
			sp->prev_off = o;
			break;
		}
		if (tt == INT64_MIN)
			break;
		cur = tt - 1;
	}
}

void
ax_tz_to_local(const ax_tz *tz, int64_t utc_us, ax_tm *tm)
{
	int64_t sec  = floor_div(utc_us, USEC_PER_SEC);
	int64_t wall = 0, days, y;
	int32_t off;
	int     dst;

	lookup(tz, sec, &off, &dst);
	wall        = sec + off;
	days        = floor_div(wall, SEC_PER_DAY);
	int64_t sod = wall - days * SEC_PER_DAY;
	ax_tz_civil_from_days(days, &y, &tm->mon, &tm->mday);
	tm->year   = (int) y;
	tm->hour   = (int) (sod / 3600);
	tm->min    = (int) (sod / 60 % 60);
	tm->sec    = (int) (sod % 60);
	tm->usec   = (int) (utc_us - sec * USEC_PER_SEC);
	tm->wday   = (int) (((days + 4) % 7 + 7) % 7);
	tm->yday   = (int) (days - ax_tz_days_from_civil(y, 1, 1));
	tm->utcoff = off;
	tm->is_dst = dst;
}

static void
add_candidate(int64_t u, int64_t *c, int *nc)
{
	for (int i = 0; i < *nc; i++)
		if (c[i] == u)
			return;
	c[(*nc)++] = u;
}

void
ax_tz_from_wall(const ax_tz *tz, int64_t wall, ax_tz_local *out)
{
	ax_tz_span sp;
	int64_t    c[3], u;
	int        nc = 0;

	ax_tz_span_at(tz, wall - ax_tz_offset(tz, wall), &sp);
	u = wall - sp.off;
	if (u >= sp.start && u < sp.end)
		add_candidate(u, c, &nc);
	u = wall - sp.prev_off;
	if (sp.start != INT64_MIN && u < sp.start &&
	    ax_tz_offset(tz, u) == sp.prev_off)
		add_candidate(u, c, &nc);
	u = wall - sp.next_off;
	if (sp.end != INT64_MAX && u >= sp.end &&
	    ax_tz_offset(tz, u) == sp.next_off)
		add_candidate(u, c, &nc);

	if (nc == 0) {
		out->kind = AX_TZ_GAP;
		if (sp.start != INT64_MIN && sp.prev_off < sp.off &&
		    wall >= sp.start + sp.prev_off && wall < sp.start + sp.off)
			out->first = sp.start;
		else if (sp.end != INT64_MAX && sp.off < sp.next_off)
			out->first = sp.end;
		else /* not reachable for sane zones; stay monotonic */
			out->first = wall - sp.off;
		out->second = out->first;
		return;
	}
	int64_t lo = c[0], hi = c[0];
	for (int i = 1; i < nc; i++) {
		lo = c[i] < lo ? c[i] : lo;
		hi = c[i] > hi ? c[i] : hi;
	}
	out->kind   = nc == 1 ? AX_TZ_UNIQUE : AX_TZ_OVERLAP;
	out->first  = lo;
	out->second = hi;
}

int64_t
ax_tz_mktime(const ax_tz *tz, int year, int mon, int mday, int hour, int min,
             int sec)
{
	ax_tz_local l;
	int64_t wall = ax_tz_days_from_civil(year, mon, mday) * SEC_PER_DAY +
	    hour * 3600LL + min * 60LL + sec;
	ax_tz_from_wall(tz, wall, &l);
	return l.first * USEC_PER_SEC;
}

/* ---- TZif parsing ---- */

typedef struct rd {
	const unsigned char *p;
	size_t               len;
	size_t               pos;
} rd;

static int
rd_need(const rd *r, size_t n)
{
	return r->len - r->pos >= n;
}

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
	    (uint32_t) p[2] << 8 | p[3];
}

static uint64_t
be64(const unsigned char *p)
{
	return (uint64_t) be32(p) << 32 | be32(p + 4);
}

typedef struct tzif_hdr {
	int      version;
	uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
} tzif_hdr;

static int
read_hdr(rd *r, tzif_hdr *h)
{
	if (!rd_need(r, 44) || memcmp(r->p + r->pos, "TZif", 4) != 0)
		return 0;
	const unsigned char *p = r->p + r->pos;
	h->version             = p[4] == 0 ? 1 : p[4] - '0';
	h->isutcnt             = be32(p + 20);
	h->isstdcnt            = be32(p + 24);
	h->leapcnt             = be32(p + 28);
	h->timecnt             = be32(p + 32);
	h->typecnt             = be32(p + 36);
	h->charcnt             = be32(p + 40);
	r->pos += 44;
	if (h->typecnt == 0 || h->typecnt > 256 || h->timecnt > 100000 ||
	    h->charcnt > 100000 || h->leapcnt > 100000 ||
	    (h->isutcnt != 0 && h->isutcnt != h->typecnt) ||
	    (h->isstdcnt != 0 && h->isstdcnt != h->typecnt))
		return 0;
	return 1;
}

static size_t
data_len(const tzif_hdr *h, size_t tsize)
{
	return h->timecnt * tsize + h->timecnt + h->typecnt * 6 + h->charcnt +
	    h->leapcnt * (tsize + 4) + h->isstdcnt + h->isutcnt;
}

static ax_err
read_data(ax_tz *tz, rd *r, const tzif_hdr *h, size_t tsize)
{
	const unsigned char *p;

	if (!rd_need(r, data_len(h, tsize)))
		return ax_err_set(AX_EPARSE, "truncated TZif data");
	p              = r->p + r->pos;
	tz->ntrans     = h->timecnt;
	tz->ntypes     = h->typecnt;
	tz->trans      = calloc(h->timecnt + 1, sizeof(int64_t));
	tz->trans_type = calloc(h->timecnt + 1, 1);
	tz->type_off   = calloc(h->typecnt, sizeof(int32_t));
	tz->type_dst   = calloc(h->typecnt, 1);
	if (!tz->trans || !tz->trans_type || !tz->type_off || !tz->type_dst)
		return ax_err_set(AX_ENOMEM, "out of memory loading a zone");
	for (size_t i = 0; i < h->timecnt; i++, p += tsize) {
		tz->trans[i] = tsize == 8 ? (int64_t) be64(p)
		                          : (int64_t) (int32_t) be32(p);
		if (i > 0 && tz->trans[i] <= tz->trans[i - 1])
			return ax_err_set(AX_EPARSE,
			                  "TZif transitions not increasing");
	}
	for (size_t i = 0; i < h->timecnt; i++, p++) {
		if (*p >= h->typecnt)
			return ax_err_set(AX_EPARSE,
			                  "TZif type index %u "
			                  "out of range",
			                  *p);
		tz->trans_type[i] = *p;
	}
	for (size_t i = 0; i < h->typecnt; i++, p += 6) {
		int32_t off = (int32_t) be32(p);
		if (off < -25 * 3600 || off > 26 * 3600)
			return ax_err_set(AX_EPARSE,
			                  "TZif offset %d out of "
			                  "range",
			                  (int) off);
		tz->type_off[i] = off;
		tz->type_dst[i] = p[4] != 0;
	}
	r->pos += data_len(h, tsize);
	return AX_OK;
}

/* ---- POSIX TZ string (the TZif footer) ---- */

static int
parse_name(const char **sp)
{
	const char *s = *sp;
	size_t      n = 0;
	if (*s == '<') {
		s++;
		while (*s && *s != '>') {
			if (!isalnum((unsigned char) *s) && *s != '+' &&
			    *s != '-')
				return 0;
			s++, n++;
		}
		if (*s != '>' || n < 3)
			return 0;
		*sp = s + 1;
		return 1;
	}
	while (isalpha((unsigned char) *s))
		s++, n++;
	if (n < 3)
		return 0;
	*sp = s;
	return 1;
}

/* [+-]hh[:mm[:ss]] with hh <= maxh; returns seconds (sign applied). */
static int
parse_hms(const char **sp, int maxh, int32_t *out)
{
	const char *s    = *sp;
	int         sign = 1, part[3] = { 0, 0, 0 };
	if (*s == '+' || *s == '-')
		sign = *s++ == '-' ? -1 : 1;
	for (int k = 0; k < 3; k++) {
		if (k > 0) {
			if (*s != ':')
				break;
			s++;
		}
		if (!isdigit((unsigned char) *s))
			return 0;
		int v = 0, nd = 0;
		while (isdigit((unsigned char) *s) && nd < 3)
			v = v * 10 + (*s++ - '0'), nd++;
		part[k] = v;
	}
	if (part[0] > maxh || part[1] > 59 || part[2] > 59)
		return 0;
	*out = sign * (part[0] * 3600 + part[1] * 60 + part[2]);
	*sp  = s;
	return 1;
}

static int
parse_num(const char **sp, int lo, int hi, int *out)
{
	const char *s = *sp;
	int         v = 0, nd = 0;
	while (isdigit((unsigned char) *s) && nd < 4)
		v = v * 10 + (*s++ - '0'), nd++;
	if (nd == 0 || v < lo || v > hi)
		return 0;
	*out = v;
	*sp  = s;
	return 1;
}

static int
parse_rule_date(const char **sp, rule_date *d)
{
	const char *s = *sp;
	if (*s == 'J') {
		s++;
		d->kind = 'J';
		if (!parse_num(&s, 1, 365, &d->n))
			return 0;
	} else if (*s == 'M') {
		s++;
		d->kind = 'M';
		if (!parse_num(&s, 1, 12, &d->m) || *s++ != '.' ||
		    !parse_num(&s, 1, 5, &d->w) || *s++ != '.' ||
		    !parse_num(&s, 0, 6, &d->d))
			return 0;
	} else {
		d->kind = 'D';
		if (!parse_num(&s, 0, 365, &d->n))
			return 0;
	}
	d->time = 7200;
	if (*s == '/') {
		s++;
		if (!parse_hms(&s, 167, &d->time))
			return 0;
	}
	*sp = s;
	return 1;
}

/* Parses a POSIX TZ string such as "GMT0BST,M3.5.0/1,M10.5.0". */
static int
parse_posix_tz(const char *s, tz_rule *r)
{
	int32_t off;

	memset(r, 0, sizeof(*r));
	if (!parse_name(&s) || !parse_hms(&s, 24, &off))
		return 0;
	r->std_off = -off; /* POSIX offsets are west of Greenwich */
	if (*s == '\0')
		return 1;
	if (!parse_name(&s))
		return 0;
	r->dst_off = r->std_off + 3600;
	if (*s != ',' && *s != '\0') {
		if (!parse_hms(&s, 24, &off))
			return 0;
		r->dst_off = -off;
	}
	r->has_dst = 1;
	if (*s == '\0') { /* POSIX leaves it open; use the US rule as glibc */
		r->start = (rule_date) { 'M', 0, 3, 2, 0, 7200 };
		r->end   = (rule_date) { 'M', 0, 11, 1, 0, 7200 };
		return 1;
	}
	if (*s++ != ',' || !parse_rule_date(&s, &r->start) || *s++ != ',' ||
	    !parse_rule_date(&s, &r->end) || *s != '\0')
		return 0;
	if (r->dst_off == r->std_off)
		r->has_dst = 0;
	return 1;
}

static ax_err
parse_tzif(ax_tz *tz, const unsigned char *data, size_t len)
{
	rd       r = { data, len, 0 };
	tzif_hdr h;
	ax_err   rv;

	if (!read_hdr(&r, &h))
		return ax_err_set(AX_EPARSE, "not a TZif file");
	if (h.version < 2)
		return read_data(tz, &r, &h, 4);
	if (!rd_need(&r, data_len(&h, 4)))
		return ax_err_set(AX_EPARSE, "truncated TZif data");
	r.pos += data_len(&h, 4);
	if (!read_hdr(&r, &h))
		return ax_err_set(AX_EPARSE, "bad TZif v2 header");
	if ((rv = read_data(tz, &r, &h, 8)) != AX_OK)
		return rv;
	if (!rd_need(&r, 1) || r.p[r.pos] != '\n')
		return ax_err_set(AX_EPARSE, "missing TZif footer");
	const char *f   = (const char *) r.p + r.pos + 1;
	const char *end = memchr(f, '\n', r.len - r.pos - 1);
	if (end == NULL || end - f > 255)
		return ax_err_set(AX_EPARSE, "bad TZif footer");
	if (end == f)
		return AX_OK;
	char buf[256];
	memcpy(buf, f, (size_t) (end - f));
	buf[end - f] = '\0';
	if (!parse_posix_tz(buf, &tz->rule))
		return ax_err_set(AX_EPARSE, "bad TZ rule '%s' in TZif footer",
		                  buf);
	tz->has_rule = 1;
	return AX_OK;
}

void
ax_tz_free(ax_tz *tz)
{
	if (tz == NULL)
		return;
	free(tz->name);
	free(tz->trans);
	free(tz->trans_type);
	free(tz->type_off);
	free(tz->type_dst);
	free(tz);
}

const char *
ax_tz_name(const ax_tz *tz)
{
	return tz->name;
}

ax_err
ax_tz_load_tzif(const char *name, const void *data, size_t len, ax_tz **out)
{
	ax_tz *tz = calloc(1, sizeof(*tz));
	ax_err rv;

	*out = NULL;
	if (tz == NULL || (tz->name = strdup(name)) == NULL) {
		ax_tz_free(tz);
		return ax_err_set(AX_ENOMEM, "out of memory loading a zone");
	}
	if ((rv = parse_tzif(tz, data, len)) != AX_OK) {
		ax_tz_free(tz);
		return rv;
	}
	*out = tz;
	return AX_OK;
}

/* Read-only; the casts only fit the struct, nothing writes through them. */
static const int32_t utc_off[1];
static const uint8_t utc_dst[1];
static const ax_tz   utc_zone = {
	  .name     = (char *) "UTC",
	  .type_off = (int32_t *) utc_off,
	  .type_dst = (uint8_t *) utc_dst,
	  .ntypes   = 1,
};

const ax_tz *
ax_tz_utc(void)
{
	return &utc_zone;
}

static ax_err
builtin_utc(const char *name, ax_tz **out)
{
	ax_tz *tz = calloc(1, sizeof(*tz));
	if (tz == NULL || (tz->name = strdup(name)) == NULL ||
	    (tz->type_off = calloc(1, sizeof(int32_t))) == NULL ||
	    (tz->type_dst = calloc(1, 1)) == NULL) {
		ax_tz_free(tz);
		return ax_err_set(AX_ENOMEM, "out of memory loading a zone");
	}
	tz->ntypes = 1;
	*out       = tz;
	return AX_OK;
}

static int
valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > TZ_MAX_NAME || name[0] == '/' || name[n - 1] == '/')
		return 0;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char) *p) && !strchr("_+-./", *p))
			return 0;
	/* no empty, "." or ".." component */
	for (const char *c = name; c != NULL;) {
		const char *e   = strchr(c, '/');
		size_t      len = e ? (size_t) (e - c) : strlen(c);
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c = e ? e + 1 : NULL;
	}
	return 1;
}

static const char *
zone_dir(void)
{
	const char *d = getenv("TZDIR");
	return d != NULL && d[0] != '\0' ? d : TZ_DEFAULT_DIR;
}

/* Reads path into a malloc'd buffer; AX_ENOENT when absent. */
static ax_err
read_file(const char *path, unsigned char **data, size_t *len)
{
	struct stat st;
	int         fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR
		    ? AX_ENOENT
		    : ax_err_set(AX_EIO, "open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return AX_ENOENT; /* a directory such as "Europe" */
	}
	if (st.st_size > TZ_MAX_FILE) {
		close(fd);
		return ax_err_set(AX_EPARSE, "%s: too large for a TZif file",
		                  path);
	}
	*len  = (size_t) st.st_size;
	*data = malloc(*len + 1);
	if (*data == NULL) {
		close(fd);
		return ax_err_set(AX_ENOMEM, "out of memory reading %s", path);
	}
	size_t got = 0;
	while (got < *len) {
		ssize_t r = read(fd, *data + got, *len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t) r;
	}
	close(fd);
	*len = got;
	return AX_OK;
}

/* Closest zone name in name's directory (or the top), case-insensitive
 * exact matches first. Writes "" when nothing is close. */
static void
suggest_zone(const char *name, char *out, size_t cap)
{
	char        dir[PATH_MAX], prefix[TZ_MAX_NAME + 2] = "";
	const char *base = strrchr(name, '/');
	const char *cands[512];
	char       *names[512];
	size_t      n = 0;
	DIR        *d;

	out[0] = '\0';
	if (base != NULL) {
		snprintf(prefix, sizeof(prefix), "%.*s/", (int) (base - name),
		         name);
		base++;
	} else {
		base = name;
	}
	snprintf(dir, sizeof(dir), "%s/%s", zone_dir(), prefix);
	if ((d = opendir(dir)) == NULL && prefix[0] != '\0' &&
	    strchr(prefix, '/') == prefix + strlen(prefix) - 1) {
		/* "europe/london": find the directory ignoring case */
		DIR *top = opendir(zone_dir());
		for (struct dirent *e; top && (e = readdir(top)) != NULL;)
			if (strlen(e->d_name) + 1 == strlen(prefix) &&
			    strncasecmp(e->d_name, prefix,
			                strlen(e->d_name)) == 0) {
				snprintf(prefix, sizeof(prefix), "%s/",
				         e->d_name);
				break;
			}
		if (top != NULL)
			closedir(top);
		snprintf(dir, sizeof(dir), "%s/%s", zone_dir(), prefix);
		d = opendir(dir);
	}
	if (d == NULL)
		return;
	for (struct dirent *e; n < 512 && (e = readdir(d)) != NULL;) {
		if (e->d_name[0] == '.' || strchr(e->d_name, '.') != NULL)
			continue;
		if ((names[n] = strdup(e->d_name)) == NULL)
			break;
		cands[n] = names[n];
		n++;
	}
	closedir(d);
	const char *best = NULL;
	for (size_t i = 0; i < n && best == NULL; i++)
		if (strcasecmp(cands[i], base) == 0)
			best = cands[i];
	if (best == NULL)
		best = ax_suggest(base, cands, n);
	if (best != NULL)
		snprintf(out, cap, "%s%s", prefix, best);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

ax_err
ax_tz_load(const char *name, ax_tz **out)
{
	char           path[PATH_MAX], hint[TZ_MAX_NAME + 2];
	unsigned char *data = NULL;
	size_t         len  = 0;
	ax_err         rv;

	*out = NULL;
	if (name == NULL || !valid_name(name))
		return ax_err_set(AX_EINVAL,
		                  "invalid time zone name '%s': use an IANA "
		                  "name such as Europe/London or UTC",
		                  name ? name : "(null)");
	if (snprintf(path, sizeof(path), "%s/%s", zone_dir(), name) >=
	    (int) sizeof(path))
		return ax_err_set(AX_EINVAL, "time zone name too long");
	rv = read_file(path, &data, &len);
	if (rv == AX_ENOENT) {
		if (strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0)
			return builtin_utc(name, out);
		suggest_zone(name, hint, sizeof(hint));
		if (hint[0] != '\0')
			return ax_err_set(AX_ENOENT,
			                  "unknown time zone '%s' (did you "
			                  "mean '%s'?)",
			                  name, hint);
		return ax_err_set(AX_ENOENT,
		                  "unknown time zone '%s': use an IANA name "
		                  "such as Europe/London or UTC",
		                  name);
	}
	if (rv != AX_OK)
		return rv;
	rv = ax_tz_load_tzif(name, data, len, out);
	free(data);
	if (rv == AX_EPARSE)
		return ax_err_set(AX_EPARSE, "time zone '%s' (%s): %s", name,
		                  path, ax_err_detail());
	return rv;
}

/* ---- ISO 8601 ---- */

char *
ax_tz_format(const ax_tz *tz, int64_t utc_us, char *buf, size_t len)
{
	ax_tm tm;
	char  frac[16] = "", off[16];
	int   o, sign;

	ax_tz_to_local(tz, utc_us, &tm);
	if (tm.usec != 0)
		snprintf(frac, sizeof(frac), ".%06d", tm.usec);
	o    = tm.utcoff < 0 ? -tm.utcoff : tm.utcoff;
	sign = tm.utcoff < 0 ? '-' : '+';
	if (o % 60 != 0)
		snprintf(off, sizeof(off), "%c%02d:%02d:%02d", sign, o / 3600,
		         o / 60 % 60, o % 60);
	else
		snprintf(off, sizeof(off), "%c%02d:%02d", sign, o / 3600,
		         o / 60 % 60);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d%s%s", tm.year,
	         tm.mon, tm.mday, tm.hour, tm.min, tm.sec, frac, off);
	return buf;
}

/* Exactly n digits into *v; 0 on failure. */
static int
digits(const char **sp, int n, int *v)
{
	const char *s = *sp;
	*v            = 0;
	for (int i = 0; i < n; i++, s++) {
		if (!isdigit((unsigned char) *s))
			return 0;
		*v = *v * 10 + (*s - '0');
	}
	*sp = s;
	return 1;
}

static ax_err
iso_err(const char *text, const char *what)
{
	return ax_err_set(AX_EPARSE,
	                  "invalid ISO 8601 instant '%s': %s (expected e.g. "
	                  "2026-03-29T03:00:00+02:00)",
	                  text, what);
}

static int
parse_offset(const char **sp, int32_t *off)
{
	const char *s = *sp;
	int         sign, h, m = 0, sec = 0;

	if (*s == 'Z' || *s == 'z') {
		*off = 0;
		*sp  = s + 1;
		return 1;
	}
	if (*s != '+' && *s != '-')
		return 0;
	sign = *s++ == '-' ? -1 : 1;
	if (!digits(&s, 2, &h))
		return 0;
	if (*s == ':') {
		s++;
		if (!digits(&s, 2, &m))
			return 0;
		if (*s == ':' && (s++, !digits(&s, 2, &sec)))
			return 0;
	} else if (isdigit((unsigned char) *s) && !digits(&s, 2, &m)) {
		return 0;
	}
	if (h > 23 || m > 59 || sec > 59)
		return 0;
	*off = sign * (h * 3600 + m * 60 + sec);
	*sp  = s;
	return 1;
}

ax_err
ax_tz_parse_iso8601(const char *text, const ax_tz *tz, int64_t *out_us)
{
	const char *s = text;
	int         y, mo, d, h = 0, mi = 0, sec = 0, usec = 0;
	int32_t     off;
	int         has_off = 0;

	if (text == NULL)
		return ax_err_set(AX_EPARSE, "missing ISO 8601 instant");
	if (!digits(&s, 4, &y) || *s++ != '-' || !digits(&s, 2, &mo) ||
	    *s++ != '-' || !digits(&s, 2, &d))
		return iso_err(text, "bad date, expected YYYY-MM-DD");
	if (y < 1 || mo < 1 || mo > 12 || d < 1 ||
	    d > ax_tz_days_in_month(y, mo))
		return iso_err(text, "no such date");
	if (*s == 'T' || *s == 't' || *s == ' ') {
		s++;
		if (!digits(&s, 2, &h) || *s++ != ':' || !digits(&s, 2, &mi))
			return iso_err(text, "bad time, expected HH:MM[:SS]");
		if (*s == ':') {
			s++;
			if (!digits(&s, 2, &sec))
				return iso_err(text, "bad seconds");
			if (*s == '.' || *s == ',') {
				int nd = 0, scale = 100000;
				s++;
				while (isdigit((unsigned char) *s)) {
					if (nd < 6)
						usec += (*s - '0') * scale;
					scale /= 10, nd++, s++;
				}
				if (nd == 0 || nd > 9)
					return iso_err(text, "bad fraction");
			}
		}
		if (h > 23 || mi > 59 || sec > 59)
			return iso_err(text, "time out of range");
	}
	if (*s != '\0') {
		if (!parse_offset(&s, &off))
			return iso_err(text,
			               "bad UTC offset, expected Z or "
			               "+HH:MM");
		has_off = 1;
	}
	if (*s != '\0')
		return iso_err(text, "trailing characters");
	int64_t wall = ax_tz_days_from_civil(y, mo, d) * SEC_PER_DAY +
	    h * 3600LL + mi * 60LL + sec;
	if (has_off) {
		*out_us = (wall - off) * USEC_PER_SEC + usec;
		return AX_OK;
	}
	if (tz == NULL)
		return iso_err(text, "missing UTC offset (add Z or +HH:MM)");
	ax_tz_local l;
	ax_tz_from_wall(tz, wall, &l);
	*out_us = l.first * USEC_PER_SEC + usec;
	return AX_OK;
}

/* ---- cache ---- */

struct ax_tz_cache {
	ax_tz **zones;
	size_t  n, cap;
};

ax_err
ax_tz_cache_new(ax_tz_cache **out)
{
	*out = calloc(1, sizeof(**out));
	if (*out == NULL)
		return ax_err_set(AX_ENOMEM, "out of memory");
	return AX_OK;
}

void
ax_tz_cache_free(ax_tz_cache *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		ax_tz_free(c->zones[i]);
	free(c->zones);
	free(c);
}

ax_err
ax_tz_cache_get(ax_tz_cache *c, const char *name, const ax_tz **out)
{
	ax_tz *tz;
	ax_err rv;

	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->zones[i]->name, name) == 0) {
			*out = c->zones[i];
			return AX_OK;
		}
	if (c->n == c->cap) {
		size_t  cap = c->cap ? c->cap * 2 : 8;
		ax_tz **z   = realloc(c->zones, cap * sizeof(*z));
		if (z == NULL)
			return ax_err_set(AX_ENOMEM, "out of memory");
		c->zones = z;
		c->cap   = cap;
	}
	if ((rv = ax_tz_load(name, &tz)) != AX_OK)
		return rv;
	c->zones[c->n++] = tz;
	*out             = tz;
	return AX_OK;
}
