/*
 * dag_yaml_scan.c - the DAG loader's pre-pass: one stream over a file's
 * libyaml events before any document is loaded (see
 * dag_yaml_internal.h).
 *
 * Invariants: the limits of the set (documents, depth, aliases and their
 * expansion, anchors) are checked on events, so no tree is ever built for
 * a file beyond them (an alias bomb costs one pass, not its expansion);
 * a scalar that decodes to a NUL refuses the file.
 * Workload: once per file loaded, linear in its size.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "dag_yaml_internal.h"

typedef struct anchor {
	char  *name;
	size_t size; /* nodes, aliases expanded, saturated */
} anchor;

typedef struct scan {
	size_t *count; /* node count per open collection */
	char  **aname; /* anchor per open collection */
	size_t  depth;
	anchor *anchors;
	size_t  n_anchors, cap_anchors;
	size_t  expanded; /* nodes added by aliases in this document */
} scan;

#define MAX_ANCHORS 1000

static void
scan_reset(scan *s)
{
	for (size_t i = 0; i < s->n_anchors; i++)
		free(s->anchors[i].name);
	s->n_anchors = 0;
	s->expanded  = 0;
	for (size_t i = 0; i < s->depth; i++)
		free(s->aname[i]);
	s->depth = 0;
}

static int
scan_define(scan *s, const char *name, size_t size)
{
	if (AX_GROW(s->anchors, s->cap_anchors, s->n_anchors + 1) != AX_OK)
		return -1;
	s->anchors[s->n_anchors].name   = strdup(name);
	s->anchors[s->n_anchors++].size = size;
	return s->anchors[s->n_anchors - 1].name ? 0 : -1;
}

static void
scan_add(scan *s, size_t n, size_t cap)
{
	if (s->depth > 0) {
		size_t *c = &s->count[s->depth - 1];
		*c        = *c + n > cap ? cap : *c + n;
	}
}

ax_err
yl_syntax_error(ld *l, yaml_parser_t *p)
{
	ax_pos pos = yl_mark_pos(l, p->problem_mark);
	if (p->error == YAML_MEMORY_ERROR)
		return ax_err_set(AX_ENOMEM, "libyaml: out of memory");
	if (p->context != NULL)
		ERR(l, pos, "YAML syntax error: %s %s (line %zu)", p->problem,
		    p->context, p->context_mark.line + 1);
	else
		ERR(l, pos, "YAML syntax error: %s",
		    p->problem ? p->problem : "malformed input");
	return AX_EPARSE;
}

/*
 * A scalar (key or value) whose escapes decode to a NUL ("\0", "\x00",
 * "\u0000" in double quotes). C strings would cut the value there, so the
 * parsed DAG would differ from the YAML that is stored, and PostgreSQL text
 * cannot hold a NUL at all: the file is refused, naming the scalar.
 */
static void
scalar_nul(ld *l, const yaml_event_t *ev)
{
	ax_pos pos = yl_mark_pos(l, ev->start_mark);
	if (ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
	    ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE)
		pos.col++; /* after the quote, as yl_node_pos() */
	ERR(l, pos,
	    "NUL (\\0) is not allowed in DAG YAML values; remove the "
	    "escape");
}

/*
 * Streams the events of the whole file once. Returns AX_OK when the file
 * is within limits and well-formed, else the recorded error's code. Every
 * scalar that holds a NUL is reported (AX_EPARSE), so no document of the
 * file is loaded: every scalar the loader copies (adup) is NUL-free.
 */
ax_err
yl_prescan(ld *l)
{
	const ax_dag_limits *lim = &l->set->limits;
	yaml_parser_t        p;
	yaml_event_t         ev;
	scan                 s    = { 0 };
	size_t               docs = 0, cap = lim->max_alias_nodes + 1;
	ax_err               rv   = AX_OK;
	int                  done = 0;
	size_t               nul  = 0; /* scalars holding a NUL */

	s.count = calloc(lim->max_depth + 1, sizeof(size_t));
	s.aname = calloc(lim->max_depth + 1, sizeof(char *));
	if (s.count == NULL || s.aname == NULL ||
	    !yaml_parser_initialize(&p)) {
		free(s.count);
		free(s.aname);
		return ax_err_set(AX_ENOMEM, "YAML pre-pass");
	}
	yaml_parser_set_input_string(&p, (const unsigned char *) l->src,
	                             l->len);
	while (!done && rv == AX_OK) {
		if (!yaml_parser_parse(&p, &ev)) {
			rv = yl_syntax_error(l, &p);
			break;
		}
		ax_pos      pos = yl_mark_pos(l, ev.start_mark);
		const char *an  = NULL;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			scan_reset(&s);
			if (++docs > lim->max_documents) {
				ERR(l, pos,
				    "more than %zu documents in one file",
				    lim->max_documents);
				rv = AX_ELIMIT;
			}
			break;
		case YAML_SCALAR_EVENT:
			if (memchr(ev.data.scalar.value, '\0',
			           ev.data.scalar.length) != NULL) {
				scalar_nul(l, &ev);
				nul++;
			}
			an = (const char *) ev.data.scalar.anchor;
			if (an != NULL && scan_define(&s, an, 1) != 0)
				rv = AX_ENOMEM;
			scan_add(&s, 1, cap);
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (s.depth >= lim->max_depth) {
				ERR(l, pos,
				    "YAML nesting is deeper than %zu levels",
				    lim->max_depth);
				rv = AX_ELIMIT;
				break;
			}
			an               = ev.type == YAML_SEQUENCE_START_EVENT
			                  ? (const char *) ev.data.sequence_start.anchor
			                  : (const char *) ev.data.mapping_start.anchor;
			s.count[s.depth] = 1;
			s.aname[s.depth] = an ? strdup(an) : NULL;
			s.depth++;
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (s.depth == 0)
				break;
			s.depth--;
			if (s.aname[s.depth] != NULL) {
				if (scan_define(&s, s.aname[s.depth],
				                s.count[s.depth]) != 0)
					rv = AX_ENOMEM;
				free(s.aname[s.depth]);
				s.aname[s.depth] = NULL;
			}
			scan_add(&s, s.count[s.depth], cap);
			break;
		case YAML_ALIAS_EVENT: {
			const char *name = (const char *) ev.data.alias.anchor;
			size_t      k    = s.n_anchors;
			while (k > 0 &&
			       strcmp(s.anchors[k - 1].name, name) != 0)
				k--;
			if (k == 0) {
				ERR(l, pos,
				    "alias '*%s' refers to no complete anchor "
				    "before it (anchors cannot refer to "
				    "themselves)",
				    name);
				rv = AX_EPARSE;
				break;
			}
			s.expanded += s.anchors[k - 1].size;
			if (s.expanded > lim->max_alias_nodes) {
				ERR(l, pos,
				    "aliases expand to more than %zu nodes; "
				    "refusing the document (alias bomb?)",
				    lim->max_alias_nodes);
				rv = AX_ELIMIT;
				break;
			}
			scan_add(&s, s.anchors[k - 1].size, cap);
			break;
		}
		default:
			break;
		}
		if (s.n_anchors > MAX_ANCHORS && rv == AX_OK) {
			ERR(l, pos, "more than %d anchors in one document",
			    MAX_ANCHORS);
			rv = AX_ELIMIT;
		}
		yaml_event_delete(&ev);
	}
	scan_reset(&s);
	free(s.anchors);
	free(s.count);
	free(s.aname);
	yaml_parser_delete(&p);
	return rv == AX_OK && nul > 0 ? AX_EPARSE : rv;
}
