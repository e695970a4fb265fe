/*
 * group_spec.c - a task's worker group as text: one name, a list of
 * names, or a label selector (see group_spec.h).
 */
#include "group_spec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
name_char(int c, int extra)
{
	return isalnum(c) || c == '_' || c == '.' || c == '-' ||
	    (extra != 0 && c == extra);
}

/* Length of the valid name at s[0..len) with extra allowed, or 0. */
static int
name_valid(const char *s, size_t len, size_t max, int extra1, int extra2)
{
	if (len == 0 || len > max)
		return 0;
	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char) s[i];
		if (!name_char(c, extra1) && !(extra2 != 0 && c == extra2))
			return 0;
	}
	return 1;
}

int
ax_group_name_ok(const char *name)
{
	return name != NULL &&
	    name_valid(name, strlen(name), AX_GROUP_NAME_MAX, ':', 0);
}

int
ax_group_spec_multi(const char *text)
{
	return text != NULL && strpbrk(text, ",=") != NULL;
}

/* Trims spaces around s[0..*len): returns the new start. */
static const char *
trim(const char *s, size_t *len)
{
	while (*len > 0 && isspace((unsigned char) s[0])) {
		s++;
		(*len)--;
	}
	while (*len > 0 && isspace((unsigned char) s[*len - 1]))
		(*len)--;
	return s;
}

/* Parses one "key=value" term s[0..len) into *out. */
static ax_err
label_term(const char *s, size_t len, const char *what, ax_label *out)
{
	const char *eq = memchr(s, '=', len);
	size_t      kl, vl;
	const char *k, *v;

	if (eq == NULL)
		return ax_err_set(AX_EINVAL,
		                  "%s: '%.*s' is not a label; write key=value "
		                  "(e.g. gpu=a100)",
		                  what, (int) len, s);
	kl = (size_t) (eq - s);
	vl = len - kl - 1;
	k  = trim(s, &kl);
	v  = trim(eq + 1, &vl);
	if (!name_valid(k, kl, AX_LABEL_MAX, '/', ':'))
		return ax_err_set(
		    AX_EINVAL,
		    "%s: label key '%.*s' is not a name (letters, "
		    "digits, '_', '.', '-', '/', ':', up to %d)",
		    what, (int) kl, k, AX_LABEL_MAX);
	if (!name_valid(v, vl, AX_LABEL_MAX, 0, 0))
		return ax_err_set(
		    AX_EINVAL,
		    "%s: value '%.*s' of label '%.*s' is not a "
		    "plain value (letters, digits, '_', '.', '-', "
		    "up to %d)",
		    what, (int) vl, v, (int) kl, k, AX_LABEL_MAX);
	memcpy(out->key, k, kl);
	out->key[kl] = '\0';
	memcpy(out->value, v, vl);
	out->value[vl] = '\0';
	return AX_OK;
}

ax_err
ax_labels_parse(const char *text, const char *what, ax_label *out, size_t max,
                size_t *n)
{
	const char *s = text != NULL ? text : "";
	ax_err      rv;

	*n = 0;
	for (;;) {
		const char *end = strchr(s, ',');
		size_t      len = end != NULL ? (size_t) (end - s) : strlen(s);
		const char *t   = trim(s, &len);
		if (len == 0) {
			if (end == NULL && *n == 0)
				break; /* no labels */
			if (end == NULL)
				return ax_err_set(
				    AX_EINVAL,
				    "%s: the list ends with ','; remove it",
				    what);
			return ax_err_set(AX_EINVAL,
			                  "%s: an empty label between ','; "
			                  "remove the extra ','",
			                  what);
		}
		if (*n >= max)
			return ax_err_set(AX_EINVAL,
			                  "%s: more than %zu labels; keep at "
			                  "most %zu",
			                  what, max, max);
		if ((rv = label_term(t, len, what, &out[*n])) != AX_OK)
			return rv;
		for (size_t i = 0; i < *n; i++)
			if (strcmp(out[i].key, out[*n].key) == 0)
				return ax_err_set(
				    AX_EINVAL,
				    "%s: label '%s' given twice; "
				    "keep one",
				    what, out[i].key);
		(*n)++;
		if (end == NULL)
			break;
		s = end + 1;
	}
	return AX_OK;
}

ax_err
ax_group_spec_parse(const char *text, ax_group_spec *out)
{
	const char *s = text != NULL && text[0] != '\0' ? text : "default";

	memset(out, 0, sizeof(*out));
	if (strchr(s, '=') != NULL) {
		out->kind = AX_GSPEC_LABELS;
		ax_err rv =
		    ax_labels_parse(s, "worker_group labels", out->labels,
		                    AX_GSPEC_MAX, &out->n);
		if (rv == AX_OK && out->n == 0)
			return ax_err_set(AX_EINVAL,
			                  "worker_group labels: none given; "
			                  "write {labels: {key: value}}");
		return rv;
	}
	out->kind = strchr(s, ',') != NULL ? AX_GSPEC_ANY : AX_GSPEC_NAME;
	for (;;) {
		const char *end = strchr(s, ',');
		size_t      len = end != NULL ? (size_t) (end - s) : strlen(s);
		const char *t   = trim(s, &len);
		if (out->n >= AX_GSPEC_MAX)
			return ax_err_set(AX_EINVAL,
			                  "worker_group: more than %d groups; "
			                  "list at most %d",
			                  AX_GSPEC_MAX, AX_GSPEC_MAX);
		if (!name_valid(t, len, AX_GROUP_NAME_MAX, ':', 0))
			return ax_err_set(
			    AX_EINVAL,
			    "worker_group: '%.*s' is not a group name "
			    "(letters, "
			    "digits, '_', '.', '-', ':', up to %d)",
			    (int) len, t, AX_GROUP_NAME_MAX);
		memcpy(out->names[out->n], t, len);
		out->names[out->n][len] = '\0';
		for (size_t i = 0; i < out->n; i++)
			if (strcmp(out->names[i], out->names[out->n]) == 0)
				return ax_err_set(AX_EINVAL,
				                  "worker_group: '%s' listed "
				                  "twice; list it once",
				                  out->names[i]);
		out->n++;
		if (end == NULL)
			break;
		s = end + 1;
	}
	return AX_OK;
}

int
ax_labels_match(const ax_label *sel, size_t nsel, const ax_label *have,
                size_t nhave)
{
	for (size_t i = 0; i < nsel; i++) {
		size_t j = 0;
		while (j < nhave && strcmp(sel[i].key, have[j].key) != 0)
			j++;
		if (j == nhave || strcmp(sel[i].value, have[j].value) != 0)
			return 0;
	}
	return 1;
}

static int
label_cmp(const void *a, const void *b)
{
	return strcmp(((const ax_label *) a)->key,
	              ((const ax_label *) b)->key);
}

char *
ax_labels_text(ax_label *labels, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	qsort(labels, n, sizeof(*labels), label_cmp);
	for (size_t i = 0; i < n; i++) {
		int w =
		    snprintf(buf + off, len - off, "%s%s=%s", i > 0 ? "," : "",
		             labels[i].key, labels[i].value);
		if (w < 0 || (size_t) w >= len - off) {
			buf[0] = '\0';
			return buf;
		}
		off += (size_t) w;
	}
	return buf;
}
