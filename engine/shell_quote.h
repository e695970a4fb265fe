/*
 * shell_quote.h - quoting template values into bash scripts.
 *
 * Role: the template renderer (render.h) feeds the text of a bash command
 * through an ax_shq as it writes it. Literal template text goes through
 * ax_shq_feed(); each `{{ ... }}` value goes through ax_shq_word(), which
 * quotes it for the bash context at that point, so that the value is read
 * by bash as data inside one word, never as syntax:
 *   bare (command words, inside $( ), ( ), ${x:-...}): 'v' with ' as '\''
 *     (a value made only of [A-Za-z0-9_./:+@%-] is written as it is;
 *     an empty value is '')
 *   inside "...":             \ before each of " \ $ `
 *   inside '...':             ' as '\''
 *   inside $'...':            \ before each of \ '
 *   heredoc body (<<EOF):     \ before each of \ $ `
 *   heredoc body (<<'EOF'):   as it is
 *   shell comment:            as it is (a newline is refused)
 *   arithmetic $(( )), (( )), ${a[...]}, `let`, the operand after
 *   -eq -ne -lt -le -gt -ge: only an integer is accepted (bash evaluates
 *   any other text there as an expression, which can run commands)
 * Refused (an error naming the reason): a value after a `case` word
 * inside $( ) (its patterns' ')' are not followed), right after an unquoted
 * '\' or '$', inside `...` backticks, inside "${...}" (bash reads quotes
 * there by operator), or a value whose quoted form would still change the
 * tracker's state other than by its own quotes (it would end a comment or
 * heredoc; such a check also guards the quoting above against mistakes).
 * A value with a NUL byte is refused (bash cannot hold NUL in a word;
 * stripping it would run a value nobody gave). The renderer and the API
 * refuse NUL before, since C strings would cut the value short.
 *
 * Model: a stack of contexts with the bash rules that open and close
 * them: quotes, backslash escapes, $( ), ${ }, $(( )), (( )), backticks,
 * comments (# at the start of a word) and heredocs (<<, <<-, quoted or
 * not, several per line). It is a subset of the bash grammar: enough to
 * know, at every value, which characters are special. Invariants: the
 * state is a plain struct (copyable, no heap); feeding never fails,
 * ax_shq_word() leaves the state untouched when it refuses.
 * Workload: one command per attempt, a few hundred bytes.
 */
#ifndef AX_SHELL_QUOTE_H
#define AX_SHELL_QUOTE_H

#include <stddef.h>

#include "ax_err.h"

#define AX_SHQ_DEPTH   48  /* nesting levels tracked */
#define AX_SHQ_HEREDOC 8   /* heredocs pending on one line */
#define AX_SHQ_DELIM   128 /* bytes of a heredoc delimiter */

typedef struct ax_shq_frame {
	unsigned char kind;  /* SHQ_* in shell_quote.c */
	unsigned char under; /* kind of the frame below (for ${ }) */
	int           depth; /* open ( or { or [ inside this frame */
	int           name;  /* ${: only name characters so far */
} ax_shq_frame;

typedef struct ax_shq_doc {
	char   delim[AX_SHQ_DELIM];
	size_t len;
	int    quoted; /* <<'EOF' or <<"EOF" or <<\EOF: no expansion */
	int    strip;  /* <<-: leading tabs removed */
} ax_shq_doc;

/* Tracker of one script; zero it with ax_shq_init(). */
typedef struct ax_shq {
	ax_shq_frame f[AX_SHQ_DEPTH];
	int          top;      /* index of the current frame */
	int          overflow; /* nested deeper than AX_SHQ_DEPTH */
	int          esc;      /* previous char was an unquoted '\' */
	int          dollar;   /* previous char was an unquoted '$' */
	int          lparen;   /* "$(" seen: a second '(' is $(( */
	int          rparen;   /* arithmetic: one ')' seen at depth 0 */
	int          wstart;   /* bare: at the start of a word */
	int          lt;       /* '<' seen in a row (heredoc operator) */
	int          hd_read;  /* reading a heredoc delimiter word */
	char         hd_q;     /* quote open in that word */
	ax_shq_doc   pend[AX_SHQ_HEREDOC];
	int          npend;
	ax_shq_doc   doc; /* the heredoc whose body is read */
	char         line[AX_SHQ_DELIM + 2];
	size_t       llen;      /* bytes of the body line kept in line */
	int          lval;      /* the body line holds value bytes */
	int          docf;      /* index of the heredoc frame, -1: none */
	char         word[8];   /* bare: the current word, when short */
	int          wlen;      /* its length; > 7: long, not a keyword */
	int          aw;        /* 1: after -eq etc., 2: in its operand */
	int          letcmd;    /* in the arguments of `let` */
	int          uncertain; /* `case` inside $( ): refuse values */
	int          lp;        /* previous char was a bare '(' */
	int          in_value;  /* feeding a value (checking) */
	int          vtop;      /* top when the value started */
	int          violation; /* the value changed the structure */
	int          broken; /* a heredoc ended on a line with value bytes */
} ax_shq;

void ax_shq_init(ax_shq *q);

/* Feeds n bytes of literal script text (the author's own syntax). */
void ax_shq_feed(ax_shq *q, const char *p, size_t n);

/*
 * Quotes the value v (n bytes) for the context of q. On AX_OK *out is
 * the quoted text (malloc'd, the caller frees it) and q has consumed it.
 * On AX_EINVAL *out is NULL, q is unchanged, and msg (cap bytes) says
 * why the value cannot be placed there and what the author can do.
 */
ax_err ax_shq_word(ax_shq *q, const char *v, size_t n, char **out, char *msg,
                   size_t cap);

/*
 * Called after the last byte: AX_EINVAL with msg when a heredoc ended on
 * a line that holds value bytes (the value and the text after it formed
 * the delimiter line), else AX_OK.
 */
ax_err ax_shq_end(const ax_shq *q, char *msg, size_t cap);

#endif /* AX_SHELL_QUOTE_H */
