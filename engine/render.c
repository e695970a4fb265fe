/*
 * render.c - `{{ ... }}` templates: one scanner shared by render and check.
 *
 * Role: see render.h. The same code walks the template in both modes so
 * that check mode accepts exactly what render mode can render.
 * Invariants: never reads past the NUL of the template; output bounded by
 * AX_RENDER_MAX_OUT; a template either renders completely or fails.
 * Workload: short strings (commands, env values), a handful of blocks.
 */
#include "render.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "shell_quote.h"
#include "suggest.h"

static const char *const known_vars[] = {
	"ds",
	"ds_nodash",
	"ts",
	"logical_date",
	"data_interval_start",
	"data_interval_end",
	"run_id",
	"dag.name",
	"task.name",
	"shard.index",
	"shard.total",
};
#define N_KNOWN_VARS (sizeof(known_vars) / sizeof(known_vars[0]))

static const char *const known_filters[] = {
	"add_days", "add_hours", "add_minutes", "format", "raw",
};
#define N_KNOWN_FILTERS (sizeof(known_filters) / sizeof(known_filters[0]))

typedef enum { V_TEXT, V_DATE } vkind;
typedef enum { DF_DS, DF_DS_NODASH, DF_ISO } dfmt;

/* A value while an expression is evaluated. */
typedef struct val {
	vkind   kind;
	dfmt    fmt;       /* V_DATE: how it prints */
	int64_t us;        /* V_DATE: UTC microseconds */
	char    text[512]; /* V_TEXT in render mode (empty in check mode) */
	size_t  text_len;
	const char *big;     /* V_TEXT longer than text[] (a param value) */
	int         literal; /* a string literal of the template itself */
	int         raw;     /* `| raw`: written without shell quoting */
} val;

typedef struct rstate {
	const char          *tmpl;
	const ax_render_ctx *ctx; /* NULL: check mode */
	const char *const   *params;
	size_t               n_params;
	int                  any_param;
	ax_render_report_fn  report;
	void                *arg;
	size_t               nerr;
	ax_render_err       *first; /* render mode: first error */
	ax_buf               out;   /* render mode: the text; its sticky
	                               error is AX_ELIMIT past the limit */
	ax_shq             *shq;    /* shell mode: the script's context */
	ax_render_report_fn on_raw; /* check mode: each `| raw` */
	void               *raw_arg;
} rstate;

static void fail(rstate *s, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fail(rstate *s, size_t off, const char *fmt, ...)
{
	char    msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (s->nerr++ == 0 && s->first != NULL) {
		s->first->offset = off;
		snprintf(s->first->msg, sizeof(s->first->msg), "%s", msg);
	}
	if (s->report != NULL)
		s->report(s->arg, off, msg);
}

static void
emit(rstate *s, const char *p, size_t n)
{
	if (s->ctx != NULL)
		ax_buf_append(&s->out, p, n);
}

/* Literal script text (the author's): written and tracked. */
static void
emit_text(rstate *s, const char *p, size_t n)
{
	if (s->shq != NULL)
		ax_shq_feed(s->shq, p, n);
	emit(s, p, n);
}

/*
 * A value: in shell mode quoted for its place in the script (raw values
 * and the template's own string literals are script text). Fails at off
 * when the value cannot be placed there.
 */
static void
emit_value(rstate *s, size_t off, const val *v, const char *p, size_t n)
{
	char  msg[200];
	char *q;

	if (s->shq == NULL || v->raw || v->literal) {
		emit_text(s, p, n);
		return;
	}
	if (ax_shq_word(s->shq, p, n, &q, msg, sizeof(msg)) != AX_OK) {
		fail(s, off, "%s", msg);
		return;
	}
	emit(s, q, strlen(q));
	free(q);
}

/* --- expression scanner ------------------------------------------------ */

typedef struct lex {
	const char *p;   /* cursor */
	const char *end; /* the closing "}}" */
	const char *base;
} lex;

static void
skip_ws(lex *l)
{
	while (
	    l->p < l->end &&
	    (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
		l->p++;
}

static int
is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int
is_ident(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Scans an identifier with dots; returns its length (0: none). */
static size_t
scan_ident(lex *l)
{
	const char *q = l->p;
	if (q >= l->end || !is_ident_start(*q))
		return 0;
	while (q < l->end && (is_ident(*q) || *q == '.'))
		q++;
	return (size_t) (q - l->p);
}

/* Scans a quoted literal at l->p into buf; -1 when unterminated. */
static int
scan_string(lex *l, char *buf, size_t cap, size_t *n)
{
	char        quote = *l->p;
	const char *q     = l->p + 1;
	size_t      k     = 0;

	while (q < l->end && *q != quote) {
		if (k + 1 < cap)
			buf[k++] = *q;
		q++;
	}
	if (q >= l->end)
		return -1;
	buf[k] = '\0';
	*n     = k;
	l->p   = q + 1;
	return 0;
}

static size_t
off_of(const rstate *s, const char *p)
{
	return (size_t) (p - s->tmpl);
}

static const char *
find_param(const rstate *s, const char *name, size_t n)
{
	if (s->ctx != NULL) {
		for (size_t i = 0; i < s->ctx->n_params; i++)
			if (strlen(s->ctx->params[i].name) == n &&
			    memcmp(s->ctx->params[i].name, name, n) == 0)
				return s->ctx->params[i].value;
		return NULL;
	}
	if (s->any_param)
		return "";
	for (size_t i = 0; i < s->n_params; i++)
		if (strlen(s->params[i]) == n &&
		    memcmp(s->params[i], name, n) == 0)
			return "";
	return NULL;
}

static void
set_text(val *v, const char *t)
{
	size_t n = strlen(t);
	v->kind  = V_TEXT;
	v->big   = NULL;
	if (n >= sizeof(v->text)) {
		v->big      = t;
		v->text_len = n;
		return;
	}
	memcpy(v->text, t, n + 1);
	v->text_len = n;
}

/* Resolves a variable name into v; 0 ok, -1 reported. */
static int
lookup(rstate *s, const char *name, size_t n, val *v)
{
	char                 word[128];
	const ax_render_ctx *c = s->ctx;

	snprintf(word, sizeof(word), "%.*s", (int) n, name);
	memset(v, 0, sizeof(*v));
	if (strncmp(word, "params.", 7) == 0 && n > 7) {
		const char *pv = find_param(s, name + 7, n - 7);
		if (pv == NULL) {
			const char *sug = NULL;
			if (c == NULL)
				sug = ax_suggest(word + 7, s->params,
				                 s->n_params);
			fail(s, off_of(s, name),
			     "unknown template variable '%s'; declare '%s' "
			     "under params%s%s%s",
			     word, word + 7,
			     sug ? " (did you mean 'params." : "",
			     sug ? sug : "", sug ? "'?)" : "");
			return -1;
		}
		set_text(v, pv);
		return 0;
	}
	if (strcmp(word, "ds") == 0 || strcmp(word, "ds_nodash") == 0 ||
	    strcmp(word, "ts") == 0 || strcmp(word, "logical_date") == 0) {
		v->kind = V_DATE;
		v->us   = c ? c->logical_date_us : 0;
		v->fmt  = strcmp(word, "ds") == 0     ? DF_DS
		     : strcmp(word, "ds_nodash") == 0 ? DF_DS_NODASH
		                                      : DF_ISO;
		return 0;
	}
	if (strcmp(word, "data_interval_start") == 0 ||
	    strcmp(word, "data_interval_end") == 0) {
		v->kind = V_DATE;
		v->fmt  = DF_ISO;
		if (c != NULL)
			v->us = word[14] == 's' ? c->interval_start_us
			                        : c->interval_end_us;
		return 0;
	}
	if (strcmp(word, "run_id") == 0 || strcmp(word, "dag.name") == 0 ||
	    strcmp(word, "task.name") == 0) {
		const char *t = "";
		if (c != NULL)
			t = word[0] == 'r'   ? c->run_id
			    : word[0] == 'd' ? c->dag_name
			                     : c->task_name;
		set_text(v, t ? t : "");
		return 0;
	}
	if (strcmp(word, "shard.index") == 0 ||
	    strcmp(word, "shard.total") == 0) {
		v->kind = V_TEXT;
		v->text_len =
		    (size_t) snprintf(v->text, sizeof(v->text), "%d",
		                      c == NULL            ? 0
		                          : word[6] == 'i' ? c->shard_index
		                                           : c->shard_total);
		return 0;
	}
	const char *sug = ax_suggest(word, known_vars, N_KNOWN_VARS);
	fail(s, off_of(s, name), "unknown template variable '%s'%s%s%s", word,
	     sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
	return -1;
}

static int32_t
ctx_offset(const rstate *s)
{
	return s->ctx ? s->ctx->utc_offset_s : 0;
}

/* Broken-down local time of a date value at the context's offset. */
static void
local_tm(const rstate *s, int64_t us, struct tm *tm)
{
	int64_t secs = us / 1000000;
	if (us < 0 && us % 1000000 != 0)
		secs--;
	time_t t = (time_t) (secs + ctx_offset(s));
	gmtime_r(&t, tm);
	tm->tm_gmtoff = ctx_offset(s);
	tm->tm_zone   = "";
}

static void
print_date(const rstate *s, const val *v, char *buf, size_t cap)
{
	struct tm tm;
	int32_t   off  = ctx_offset(s);
	char      sign = off < 0 ? '-' : '+';
	int32_t   a    = off < 0 ? -off : off;

	local_tm(s, v->us, &tm);
	if (v->fmt == DF_DS)
		strftime(buf, cap, "%Y-%m-%d", &tm);
	else if (v->fmt == DF_DS_NODASH)
		strftime(buf, cap, "%Y%m%d", &tm);
	else {
		size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(buf + n, cap - n, "%c%02d:%02d", sign, a / 3600,
		         (a / 60) % 60);
	}
}

/* Filter arguments: integers or strings. */
typedef struct farg {
	int     is_str;
	int64_t n;
	char    s[128];
	size_t  off;
} farg;

static int
apply_filter(rstate *s, const char *name, size_t n, size_t noff, farg *a,
             int na, val *v)
{
	char    word[64];
	int64_t unit = 0;

	snprintf(word, sizeof(word), "%.*s", (int) n, name);
	if (strcmp(word, "raw") == 0) {
		if (v->raw) {
			fail(s, noff, "'raw' must be the last filter");
			return -1;
		}
		if (na != 0) {
			fail(s, noff, "filter 'raw' takes no argument");
			return -1;
		}
		if (v->kind == V_DATE) { /* the text the date prints as */
			char buf[64];
			print_date(s, v, buf, sizeof(buf));
			set_text(v, buf);
			v->big = NULL;
		}
		v->raw = 1;
		if (s->on_raw != NULL)
			s->on_raw(s->raw_arg, noff,
			          "'| raw' writes the value "
			          "into the command unquoted");
		return 0;
	}
	if (strcmp(word, "add_days") == 0)
		unit = 86400LL * 1000000;
	else if (strcmp(word, "add_hours") == 0)
		unit = 3600LL * 1000000;
	else if (strcmp(word, "add_minutes") == 0)
		unit = 60LL * 1000000;
	else if (strcmp(word, "format") != 0) {
		const char *sug =
		    ax_suggest(word, known_filters, N_KNOWN_FILTERS);
		fail(s, noff, "unknown filter '%s'%s%s%s", word,
		     sug ? "; did you mean '" : "", sug ? sug : "",
		     sug ? "'?"
		         : " (filters: add_days, add_hours, "
		           "add_minutes, format, raw)");
		return -1;
	}
	if (v->raw) {
		fail(s, noff, "'raw' must be the last filter");
		return -1;
	}
	if (v->kind != V_DATE) {
		fail(s, noff,
		     "filter '%s' needs a date value (ds, ts, logical_date, "
		     "data_interval_start, data_interval_end)",
		     word);
		return -1;
	}
	if (na != 1 || (unit != 0 && a[0].is_str) ||
	    (unit == 0 && !a[0].is_str)) {
		fail(s, noff, "filter '%s' takes one %s argument, e.g. %s",
		     word, unit ? "integer" : "string",
		     unit ? "add_days(-1)" : "format('%Y%m%d')");
		return -1;
	}
	if (unit != 0) {
		if (a[0].n > 100000 || a[0].n < -100000) {
			fail(s, a[0].off,
			     "argument %lld of '%s' is out of range "
			     "-100000..100000",
			     (long long) a[0].n, word);
			return -1;
		}
		v->us += a[0].n * unit;
		return 0;
	}
	struct tm tm;
	local_tm(s, v->us, &tm);
	v->kind     = V_TEXT;
	v->big      = NULL;
	v->text[0]  = '\0';
	v->text_len = 0;
	if (a[0].s[0] == '\0') {
		fail(s, a[0].off, "format() needs a non-empty pattern");
		return -1;
	}
	v->text_len = strftime(v->text, sizeof(v->text), a[0].s, &tm);
	return 0;
}

/* Parses "( ARG, ... )" after a filter name; -1 on a reported error. */
static int
scan_args(rstate *s, lex *l, farg *a, int *na)
{
	*na = 0;
	skip_ws(l);
	if (l->p >= l->end || *l->p != '(')
		return 0;
	l->p++;
	for (;;) {
		skip_ws(l);
		if (l->p < l->end && *l->p == ')' && *na == 0) {
			l->p++;
			return 0;
		}
		if (*na == 4) {
			fail(s, off_of(s, l->p), "too many filter arguments");
			return -1;
		}
		farg *f = &a[(*na)++];
		memset(f, 0, sizeof(*f));
		f->off = off_of(s, l->p);
		if (l->p < l->end && (*l->p == '\'' || *l->p == '"')) {
			size_t k;
			f->is_str = 1;
			if (scan_string(l, f->s, sizeof(f->s), &k) != 0) {
				fail(s, f->off, "unterminated string");
				return -1;
			}
		} else {
			char     *e;
			long long x = strtoll(l->p, &e, 10);
			if (e == l->p || e > l->end) {
				fail(s, f->off,
				     "expected an integer or a quoted string");
				return -1;
			}
			f->n = x;
			l->p = e;
		}
		skip_ws(l);
		if (l->p < l->end && *l->p == ',') {
			l->p++;
			continue;
		}
		if (l->p < l->end && *l->p == ')') {
			l->p++;
			return 0;
		}
		fail(s, off_of(s, l->p), "expected ',' or ')' in arguments");
		return -1;
	}
}

/* Evaluates the expression between open ("{{") and end ("}}"). */
static void
eval_block(rstate *s, const char *open, const char *end)
{
	lex    l = { open + 2, end, s->tmpl };
	val    v;
	size_t n;

	skip_ws(&l);
	if (l.p >= l.end) {
		fail(s, off_of(s, open),
		     "empty '{{ }}'; write a variable, "
		     "e.g. {{ ds }}");
		return;
	}
	if (*l.p == '\'' || *l.p == '"') {
		memset(&v, 0, sizeof(v));
		v.kind    = V_TEXT;
		v.literal = 1;
		if (scan_string(&l, v.text, sizeof(v.text), &v.text_len) !=
		    0) {
			fail(s, off_of(s, l.p), "unterminated string");
			return;
		}
	} else if ((n = scan_ident(&l)) > 0) {
		if (lookup(s, l.p, n, &v) != 0)
			return;
		l.p += n;
	} else {
		fail(s, off_of(s, l.p), "expected a variable name, got '%c'",
		     *l.p);
		return;
	}
	for (;;) {
		skip_ws(&l);
		if (l.p >= l.end)
			break;
		if (*l.p != '|') {
			fail(s, off_of(s, l.p),
			     "expected '|' or '}}' after the value, got '%c'",
			     *l.p);
			return;
		}
		l.p++;
		skip_ws(&l);
		const char *fname = l.p;
		if ((n = scan_ident(&l)) == 0) {
			fail(s, off_of(s, l.p),
			     "expected a filter name after '|'");
			return;
		}
		l.p += n;
		farg a[4];
		int  na;
		if (scan_args(s, &l, a, &na) != 0)
			return;
		if (apply_filter(s, fname, n, off_of(s, fname), a, na, &v) !=
		    0)
			return;
	}
	if (s->ctx == NULL)
		return;
	if (v.kind == V_DATE) {
		char buf[64];
		print_date(s, &v, buf, sizeof(buf));
		emit_value(s, off_of(s, open), &v, buf, strlen(buf));
	} else if (v.big != NULL) {
		emit_value(s, off_of(s, open), &v, v.big, v.text_len);
	} else {
		emit_value(s, off_of(s, open), &v, v.text, v.text_len);
	}
}

/* Finds the "}}" closing a block, skipping quoted strings. */
static const char *
find_close(const char *p)
{
	char quote = 0;
	for (; *p != '\0'; p++) {
		if (quote) {
			if (*p == quote)
				quote = 0;
		} else if (*p == '\'' || *p == '"') {
			quote = *p;
		} else if (p[0] == '}' && p[1] == '}') {
			return p;
		}
	}
	return NULL;
}

static void
walk(rstate *s)
{
	const char *p = s->tmpl;

	for (;;) {
		const char *open = strstr(p, "{{");
		if (open == NULL) {
			emit_text(s, p, strlen(p));
			return;
		}
		emit_text(s, p, (size_t) (open - p));
		const char *close = find_close(open + 2);
		if (close == NULL) {
			fail(s, off_of(s, open),
			     "unterminated '{{': missing '}}'");
			return;
		}
		size_t before = s->nerr;
		eval_block(s, open, close);
		if (s->ctx != NULL && s->nerr > before)
			return;
		p = close + 2;
	}
}

ax_err
ax_render(const char *tmpl, const ax_render_ctx *ctx, char **out,
          ax_render_err *err)
{
	ax_render_err e;
	rstate        s;

	*out = NULL;
	if (tmpl == NULL || ctx == NULL)
		return ax_err_set(AX_EINVAL,
		                  "ax_render: NULL template or "
		                  "context");
	memset(&s, 0, sizeof(s));
	s.tmpl  = tmpl;
	s.ctx   = ctx;
	s.first = err ? err : &e;
	/* the text stays below AX_RENDER_MAX_OUT bytes */
	ax_buf_init(&s.out, AX_RENDER_MAX_OUT - 1);
	if (ctx->shell) {
		if ((s.shq = malloc(sizeof(*s.shq))) == NULL)
			return ax_err_set(AX_ENOMEM, "rendering a template");
		ax_shq_init(s.shq);
	}
	walk(&s);
	if (s.nerr == 0 && s.shq != NULL) {
		char msg[200];
		if (ax_shq_end(s.shq, msg, sizeof(msg)) != AX_OK)
			fail(&s, strlen(tmpl), "%s", msg);
	}
	free(s.shq);
	if (s.nerr > 0) {
		ax_buf_fini(&s.out);
		return ax_err_set(AX_EPARSE, "offset %zu: %s", s.first->offset,
		                  s.first->msg);
	}
	if (ax_buf_err(&s.out) != AX_OK) {
		ax_err rv = ax_buf_err(&s.out);
		ax_buf_fini(&s.out);
		if (rv != AX_ELIMIT)
			return ax_err_set(AX_ENOMEM, "rendering a template");
		return ax_err_set(AX_ELIMIT,
		                  "rendered text is longer than %d bytes",
		                  AX_RENDER_MAX_OUT);
	}
	return ax_buf_take(&s.out, out, NULL);
}

size_t
ax_render_check(const char *tmpl, const char *const *params, size_t n_params,
                int any_param, ax_render_report_fn report, void *arg)
{
	rstate s;

	if (tmpl == NULL)
		return 0;
	memset(&s, 0, sizeof(s));
	s.tmpl      = tmpl;
	s.params    = params;
	s.n_params  = n_params;
	s.any_param = any_param;
	s.report    = report;
	s.arg       = arg;
	walk(&s);
	return s.nerr;
}

void
ax_render_raw_uses(const char *tmpl, ax_render_report_fn report, void *arg)
{
	rstate s;

	if (tmpl == NULL)
		return;
	memset(&s, 0, sizeof(s));
	s.tmpl      = tmpl;
	s.any_param = 1;
	s.on_raw    = report;
	s.raw_arg   = arg;
	walk(&s);
}
