/*
 * shell_quote.c - a bash context tracker and the quoting of values.
 *
 * Role: see shell_quote.h. The tracker reads the script byte by byte
 * (step()); ax_shq_word() picks the quoting for the context on top of the
 * stack, then feeds the quoted bytes through a copy of the tracker with
 * in_value set, and accepts them only if the copy ends in the same
 * context having opened nothing but its own single quotes. So a mistake in
 * the quoting shows as a refused value, not as a changed command.
 * Invariants: the stack never grows past AX_SHQ_DEPTH (beyond that the
 * tracker stops and refuses every value); no heap in the tracker.
 */
#include "shell_quote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	SHQ_CMD,     /* bare words: top level, $( ), ( ) */
	SHQ_DQ,      /* "..." */
	SHQ_SQ,      /* '...' */
	SHQ_ANSI,    /* $'...' */
	SHQ_PARAM,   /* ${...} */
	SHQ_ARITH,   /* $(( )) and (( )) */
	SHQ_COMMENT, /* # to the end of the line */
	SHQ_DOC,     /* a heredoc body */
	SHQ_BQ,      /* `...` */
	SHQ_SUB,     /* ${name[...]}: an arithmetic subscript */
};

void
ax_shq_init(ax_shq *q)
{
	memset(q, 0, sizeof(*q));
	q->wstart = 1;
	q->docf   = -1;
}

static int
cur(const ax_shq *q)
{
	return q->f[q->top].kind;
}

static void
push(ax_shq *q, int kind)
{
	int k = cur(q);
	if (q->in_value &&
	    !(kind == SHQ_SQ && (k == SHQ_CMD || k == SHQ_PARAM)))
		q->violation = 1;
	if (q->top + 1 >= AX_SHQ_DEPTH) {
		q->overflow = 1;
		return;
	}
	q->top++;
	q->f[q->top].kind  = (unsigned char) kind;
	q->f[q->top].under = (unsigned char) k;
	q->f[q->top].depth = 0;
	q->f[q->top].name  = kind == SHQ_PARAM;
	/* a word with a substitution is no keyword; $( starts a command */
	if (kind != SHQ_SQ)
		q->wlen = kind == SHQ_CMD ? 0 : 8;
}

static void
pop(ax_shq *q)
{
	if (q->top == 0)
		return; /* a stray closer: bash reports it */
	/* a value inside '...' closes and reopens it around each '\'' */
	if (q->in_value && q->top <= q->vtop &&
	    !(q->top == q->vtop && cur(q) == SHQ_SQ))
		q->violation = 1;
	if (q->top == q->docf)
		q->docf = -1;
	q->top--;
}

static void
start_doc(ax_shq *q)
{
	q->doc = q->pend[0];
	memmove(&q->pend[0], &q->pend[1],
	        (size_t) (q->npend - 1) * sizeof(q->pend[0]));
	q->npend--;
	push(q, SHQ_DOC);
	q->docf = q->top;
	q->llen = 0;
	q->lval = 0;
}

/* Every byte inside a heredoc body: bash cuts the body by raw lines. */
static int
doc_line(ax_shq *q, char c)
{
	if (q->in_value)
		q->lval = 1;
	if (c != '\n') {
		if (q->llen < sizeof(q->line))
			q->line[q->llen++] = c;
		return 0;
	}
	const char *l = q->line;
	size_t      n = q->llen;
	while (q->doc.strip && n > 0 && *l == '\t') {
		l++;
		n--;
	}
	int end = n == q->doc.len && n < sizeof(q->line) &&
	    memcmp(l, q->doc.delim, n) == 0;
	if (end) {
		if (q->lval) {
			q->broken = 1;
			if (q->in_value)
				q->violation = 1;
		}
		if (q->in_value && q->docf <= q->vtop)
			q->violation = 1;
		q->top  = q->docf - 1;
		q->docf = -1;
		if (q->npend > 0)
			start_doc(q);
	}
	q->llen = 0;
	q->lval = 0;
	return end;
}

static int
is_meta(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' ||
	    c == '|' || c == '<' || c == '>' || c == '(' || c == ')';
}

/* A heredoc delimiter word after << or <<-; 1 when c was consumed. */
static int
delim_char(ax_shq *q, char c)
{
	ax_shq_doc *d = &q->pend[q->npend];

	if (q->hd_read == 1) {
		if (c == ' ' || c == '\t')
			return 1;
		q->hd_read = 2;
	}
	if (q->hd_q == '\\' || (q->hd_q != 0 && c != q->hd_q)) {
		if (q->hd_q == '\\')
			q->hd_q = 0;
		if (d->len + 1 < sizeof(d->delim))
			d->delim[d->len++] = c;
		return 1;
	}
	if (q->hd_q != 0) { /* the closing quote */
		q->hd_q = 0;
		return 1;
	}
	if (c == '\'' || c == '"' || c == '\\') {
		d->quoted = 1;
		q->hd_q   = c;
		return 1;
	}
	if (!is_meta(c)) {
		if (d->len + 1 < sizeof(d->delim))
			d->delim[d->len++] = c;
		return 1;
	}
	q->hd_read = 0;
	if (d->len > 0 && q->npend + 1 < AX_SHQ_HEREDOC)
		q->npend++;
	return 0;
}

/* $ followed by c, in a context where $ expands; 1 when consumed. */
static int
after_dollar(ax_shq *q, char c, int bare)
{
	q->dollar = 0;
	if (c == '(') {
		push(q, SHQ_CMD);
		q->lparen = 1;
		return 1;
	}
	if (c == '{') {
		push(q, SHQ_PARAM);
		return 1;
	}
	if (bare && c == '\'') {
		push(q, SHQ_ANSI);
		return 1;
	}
	if (bare && c == '"') {
		push(q, SHQ_DQ);
		return 1;
	}
	return 0;
}

/* Contexts where \ $ ` are special: "...", an unquoted heredoc. */
static void
step_dq(ax_shq *q, char c, int is_doc)
{
	if (q->esc) {
		q->esc = 0;
		return;
	}
	if (q->dollar && after_dollar(q, c, 0))
		return;
	if (c == '\\')
		q->esc = 1;
	else if (c == '$')
		q->dollar = 1;
	else if (c == '`')
		push(q, SHQ_BQ);
	else if (c == '"' && !is_doc)
		pop(q);
}

/* A bare word ended: keywords that change how values are read. */
static void
word_end(ax_shq *q)
{
	static const char *const cmp[] = { "-eq", "-ne", "-lt",
		                           "-le", "-gt", "-ge" };
	size_t                   n     = (size_t) q->wlen;

	q->wlen = 0;
	if (n == 0 || n > 7)
		return;
	if (n == 4 && memcmp(q->word, "case", 4) == 0 && q->top > 0)
		q->uncertain = 1;
	if (n == 3 && memcmp(q->word, "let", 3) == 0)
		q->letcmd = 1;
	for (size_t i = 0; n == 3 && i < 6; i++)
		if (memcmp(q->word, cmp[i], 3) == 0)
			q->aw = 1;
}

/* Word and command boundaries in a bare command frame. */
static void
track_word(ax_shq *q, char c)
{
	if (!is_meta(c)) {
		if (q->aw == 1)
			q->aw = 2;
		if (q->wlen < 8)
			q->word[q->wlen < 8 ? q->wlen : 7] = c;
		q->wlen++;
		return;
	}
	if (q->aw == 2)
		q->aw = 0;
	if (c == ';' || c == '\n' || c == '&' || c == '|') {
		q->letcmd = 0;
		q->aw     = 0;
	}
	word_end(q);
}

static void
step_bare_char(ax_shq *q, int k, char c)
{
	ax_shq_frame *f  = &q->f[q->top];
	int           lp = q->lp;

	q->lp = 0;
	switch (c) {
	case '\\':
		q->esc = 1;
		break;
	case '\'':
		push(q, SHQ_SQ);
		break;
	case '"':
		push(q, SHQ_DQ);
		break;
	case '`':
		if (k == SHQ_BQ)
			pop(q);
		else
			push(q, SHQ_BQ);
		break;
	case '$':
		q->dollar = 1;
		break;
	case '#':
		if (k == SHQ_CMD && q->wstart)
			push(q, SHQ_COMMENT);
		break;
	case '(':
		if (k == SHQ_CMD && lp) { /* (( arithmetic )) */
			f->depth--;
			push(q, SHQ_ARITH);
		} else if (k == SHQ_CMD || k == SHQ_ARITH) {
			f->depth++;
			q->lp = k == SHQ_CMD;
		}
		break;
	case ')':
		if (k == SHQ_ARITH && f->depth == 0) {
			if (q->rparen) {
				q->rparen = 0;
				pop(q);
			} else {
				q->rparen = 1;
			}
		} else if (k == SHQ_ARITH || (k == SHQ_CMD && f->depth > 0)) {
			f->depth--;
		} else if (k == SHQ_CMD) {
			pop(q);
		}
		break;
	case '{':
		if (k == SHQ_PARAM)
			f->depth++;
		break;
	case '[':
		if (k == SHQ_PARAM && f->name) {
			f->name = 0;
			push(q, SHQ_SUB);
		} else if (k == SHQ_SUB) {
			f->depth++;
		}
		break;
	case ']':
		if (k == SHQ_SUB && f->depth > 0)
			f->depth--;
		else if (k == SHQ_SUB)
			pop(q);
		break;
	case '}':
		if (k == SHQ_PARAM && f->depth > 0)
			f->depth--;
		else if (k == SHQ_PARAM)
			pop(q);
		break;
	case '\n':
		if (k == SHQ_CMD && q->npend > 0 && q->docf < 0)
			start_doc(q);
		break;
	default:
		break;
	}
}

/* Bare contexts: command words, ${ }, $(( )), `...`. */
static void
step_bare(ax_shq *q, int k, char c)
{
	/* a value that closed the single quotes it is in may only write
	 * an escaped quote before reopening them */
	if (q->in_value && q->top < q->vtop && c != '\\' && c != '\'')
		q->violation = 1;
	if (q->esc) {
		q->esc    = 0;
		q->wstart = 0;
		return;
	}
	if (q->lparen) {
		q->lparen = 0;
		if (c == '(') { /* $(( : the frame is arithmetic */
			q->f[q->top].kind = SHQ_ARITH;
			return;
		}
	}
	if (q->rparen && c != ')')
		q->rparen = 0;
	if (q->dollar && after_dollar(q, c, 1)) {
		q->wstart = 0;
		return;
	}
	if (k == SHQ_CMD && q->hd_read && delim_char(q, c))
		return;
	if (k == SHQ_CMD && c == '<') {
		q->lt++;
		if (q->lt == 3) /* <<< is a here-string, not a heredoc */
			q->lt = 0;
	} else if (k == SHQ_CMD && q->lt == 2) {
		q->lt = 0;
		memset(&q->pend[q->npend], 0, sizeof(q->pend[0]));
		q->hd_read = 1;
		if (c == '-') {
			q->pend[q->npend].strip = 1;
			return;
		}
		if (delim_char(q, c))
			return;
	} else {
		q->lt = 0;
	}
	if (k == SHQ_PARAM && q->f[q->top].name && c != '[' &&
	    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	      (c >= '0' && c <= '9') || c == '_' || c == '#' || c == '!'))
		q->f[q->top].name = 0;
	step_bare_char(q, k, c);
	if (k == SHQ_CMD) {
		q->wstart = is_meta(c);
		track_word(q, c);
	}
}

static void
step(ax_shq *q, char c)
{
	if (q->overflow)
		return;
	if (q->docf >= 0 && doc_line(q, c))
		return;
	int k = cur(q);
	switch (k) {
	case SHQ_SQ:
		if (c == '\'')
			pop(q);
		return;
	case SHQ_ANSI:
		if (q->esc)
			q->esc = 0;
		else if (c == '\\')
			q->esc = 1;
		else if (c == '\'')
			pop(q);
		return;
	case SHQ_COMMENT:
		if (c == '\n') {
			pop(q);
			step(q, c); /* the newline ends a command line */
		}
		return;
	case SHQ_DOC:
		if (!q->doc.quoted)
			step_dq(q, c, 1);
		return;
	case SHQ_DQ:
		step_dq(q, c, 0);
		return;
	default:
		step_bare(q, k, c);
	}
}

void
ax_shq_feed(ax_shq *q, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		step(q, p[i]);
}

/* --- quoting ------------------------------------------------------------ */

/* The quoted text goes to a memory stream (open_memstream). */
typedef struct qbuf {
	FILE  *f;
	char  *p;
	size_t n;
} qbuf;

static void
put(qbuf *b, const char *s, size_t n)
{
	if (n > 0)
		fwrite(s, 1, n, b->f);
}

/* Each byte of v; a byte in `special` gets a backslash before it. */
static void
put_escaped(qbuf *b, const char *v, size_t n, const char *special)
{
	for (size_t i = 0; i < n; i++) {
		if (strchr(special, v[i]) != NULL)
			put(b, "\\", 1);
		put(b, &v[i], 1);
	}
}

/* Single-quoted: ' written as '\'' (close, escaped quote, reopen). */
static void
put_single(qbuf *b, const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == '\'')
			put(b, "'\\''", 4);
		else
			put(b, &v[i], 1);
	}
}

static int
plain_word(const char *v, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr("_./:+@%-", c) != NULL))
			return 0;
	}
	return 1;
}

static int
integer_text(const char *v, size_t n)
{
	size_t i = n > 0 && (v[0] == '-' || v[0] == '+');
	if (i == n || n > 20)
		return 0;
	for (; i < n; i++)
		if (v[i] < '0' || v[i] > '9')
			return 0;
	return 1;
}

static ax_err
refuse(char *msg, size_t cap, const char *why)
{
	snprintf(msg, cap, "%s", why);
	return ax_err_set(AX_EINVAL, "%s", why);
}

/* Where a value cannot go whatever its quoting; NULL: it can. */
static const char *
unplaceable(const ax_shq *q)
{
	if (q->overflow)
		return "the command nests quotes and substitutions too deeply "
		       "to place a value safely";
	if (q->esc)
		return "a value right after an unquoted '\\' cannot be "
		       "quoted; remove the backslash";
	if (q->dollar)
		return "a value right after '$' cannot be quoted; write "
		       "{{ '$' }} or move the value";
	if (q->hd_read || q->lt == 2)
		return "a value cannot be a heredoc delimiter; write the "
		       "delimiter as text";
	if (q->uncertain)
		return "a value after a `case` inside $( ) cannot be placed "
		       "safely (its patterns' ')' are not followed); set a "
		       "variable from the value before the $( )";
	for (int i = 0; i <= q->top; i++)
		if (q->f[i].kind == SHQ_BQ)
			return "a value inside `...` cannot be quoted; use "
			       "$( ... ) instead of backticks";
	int i = q->top;
	while (i > 0 && q->f[i].kind == SHQ_PARAM)
		i--;
	if (i != q->top && q->f[i].kind != SHQ_CMD)
		return "a value inside \"${...}\" cannot be quoted (bash "
		       "reads quotes there by operator); set a variable "
		       "from the value first";
	return NULL;
}

/* The quoted form of v for the context on top of q, into b. */
static const char *
quote_for(const ax_shq *q, const char *v, size_t n, qbuf *b)
{
	switch (cur(q)) {
	case SHQ_DQ:
		put_escaped(b, v, n, "\"\\$`");
		break;
	case SHQ_SQ:
		put_single(b, v, n);
		break;
	case SHQ_ANSI:
		put_escaped(b, v, n, "\\'");
		break;
	case SHQ_DOC:
		if (q->doc.quoted)
			put(b, v, n);
		else
			put_escaped(b, v, n, "\\$`");
		break;
	case SHQ_COMMENT:
		if (memchr(v, '\n', n) != NULL || memchr(v, '\r', n) != NULL)
			return "a value with a line break cannot be placed in "
			       "a shell comment (it would end the comment)";
		put(b, v, n);
		break;
	case SHQ_ARITH:
	case SHQ_SUB:
	arith:
		if (!integer_text(v, n))
			return "the value is placed in a shell arithmetic "
			       "expression and is not an integer";
		put(b, v, n);
		break;
	default: /* bare */
		if (q->aw != 0 || q->letcmd)
			goto arith;
		if (plain_word(v, n)) {
			put(b, v, n);
			break;
		}
		put(b, "'", 1);
		put_single(b, v, n);
		put(b, "'", 1);
	}
	return NULL;
}

static int
same_stack(const ax_shq *a, const ax_shq *b)
{
	if (a->top != b->top)
		return 0;
	for (int i = 0; i <= a->top; i++)
		if (a->f[i].kind != b->f[i].kind ||
		    a->f[i].depth != b->f[i].depth)
			return 0;
	return 1;
}

ax_err
ax_shq_word(ax_shq *q, const char *v, size_t n, char **out, char *msg,
            size_t cap)
{
	qbuf        b   = { 0 };
	const char *why = unplaceable(q);
	int         bad;

	*out = NULL;
	if (why == NULL && memchr(v, '\0', n) != NULL)
		why = "the value holds a NUL byte, which no shell word can "
		      "carry";
	if (why != NULL)
		return refuse(msg, cap, why);
	if ((b.f = open_memstream(&b.p, &b.n)) == NULL) {
		snprintf(msg, cap, "out of memory quoting a value");
		return ax_err_set(AX_ENOMEM, "quoting a value");
	}
	why = quote_for(q, v, n, &b);
	bad = ferror(b.f);
	if (fclose(b.f) != 0 || bad || b.p == NULL) {
		free(b.p);
		snprintf(msg, cap, "out of memory quoting a value");
		return ax_err_set(AX_ENOMEM, "quoting a value");
	}
	if (why != NULL) {
		free(b.p);
		return refuse(msg, cap, why);
	}
	ax_shq *t = malloc(sizeof(*t));
	if (t == NULL) {
		free(b.p);
		snprintf(msg, cap, "out of memory quoting a value");
		return ax_err_set(AX_ENOMEM, "quoting a value");
	}
	*t          = *q;
	t->in_value = 1;
	t->vtop     = t->top;
	ax_shq_feed(t, b.p, b.n);
	if (t->violation || t->overflow || t->esc || t->dollar || t->lparen ||
	    t->hd_read || t->lt != 0 || !same_stack(q, t)) {
		free(t);
		free(b.p);
		return refuse(msg, cap,
		              "the value would change the structure of the "
		              "command (it would end the surrounding comment "
		              "or heredoc); pass it through env instead");
	}
	t->in_value = 0;
	*q          = *t;
	free(t);
	*out = b.p;
	return AX_OK;
}

ax_err
ax_shq_end(const ax_shq *q, char *msg, size_t cap)
{
	if (!q->broken)
		return AX_OK;
	return refuse(msg, cap,
	              "a value together with the text after it forms the "
	              "delimiter line of a heredoc, which would end the "
	              "heredoc early");
}
