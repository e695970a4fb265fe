/*
 * table.c - aligned text tables and JSON value text for axctl (see
 * table.h). Rows are kept until printing because column widths depend on
 * every row; axctl tables are one page of an API list (at most 1000
 * rows), so this costs nothing.
 */
#include "table.h"

#include <stdlib.h>
#include <string.h>

struct ax_table {
	size_t  ncols;
	size_t  nrows, cap;
	char  **cells; /* (nrows + 1) * ncols, row 0 = headers */
	size_t *width;
};

static int
grow(ax_table *t)
{
	if (t->nrows + 1 < t->cap)
		return 0;
	size_t cap = t->cap ? t->cap * 2 : 16;
	char **nc  = realloc(t->cells, cap * t->ncols * sizeof(char *));
	if (nc == NULL)
		return -1;
	t->cells = nc;
	t->cap   = cap;
	return 0;
}

static int
put_row(ax_table *t, const char *const *cells, size_t row)
{
	for (size_t c = 0; c < t->ncols; c++) {
		const char *v = cells[c] && *cells[c] ? cells[c] : "-";
		char       *d = strdup(v);
		if (d == NULL) {
			while (c-- > 0)
				free(t->cells[row * t->ncols + c]);
			return -1;
		}
		t->cells[row * t->ncols + c] = d;
		if (strlen(d) > t->width[c])
			t->width[c] = strlen(d);
	}
	return 0;
}

ax_table *
ax_table_new(size_t ncols, const char *const *headers)
{
	ax_table *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->ncols = ncols;
	t->width = calloc(ncols, sizeof(size_t));
	if (t->width == NULL || grow(t) != 0 || put_row(t, headers, 0) != 0) {
		free(t->width);
		free(t->cells);
		free(t);
		return NULL;
	}
	return t;
}

void
ax_table_free(ax_table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < (t->nrows + 1) * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->width);
	free(t);
}

int
ax_table_add(ax_table *t, const char *const *cells)
{
	if (grow(t) != 0 || put_row(t, cells, t->nrows + 1) != 0)
		return -1;
	t->nrows++;
	return 0;
}

int
ax_table_add_json(ax_table *t, json_t *o, const char *const *keys)
{
	char        buf[16][256];
	const char *cells[16];

	if (t->ncols > 16)
		return -1;
	for (size_t c = 0; c < t->ncols; c++)
		cells[c] = ax_table_text(json_object_get(o, keys[c]), buf[c],
		                         sizeof(buf[c]));
	return ax_table_add(t, cells);
}

size_t
ax_table_rows(const ax_table *t)
{
	return t->nrows;
}

void
ax_table_print(const ax_table *t, FILE *f)
{
	for (size_t r = 0; r <= t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *v    = t->cells[r * t->ncols + c];
			int         last = c + 1 == t->ncols;
			fprintf(f, "%s%-*s", c ? "  " : "",
			        last ? 0 : (int) t->width[c], v);
		}
		fputc('\n', f);
	}
}

/* 1 when s looks like "YYYY-MM-DDTHH:MM:SS" (an instant from ax-api). */
static int
is_instant(const char *s)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";

	for (size_t i = 0; i < sizeof(shape) - 1; i++) {
		if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9')
		                    : s[i] != shape[i])
			return 0;
	}
	return 1;
}

const char *
ax_table_text(json_t *v, char *buf, size_t len)
{
	const char *s;

	if (v == NULL || json_is_null(v)) {
		snprintf(buf, len, "-");
	} else if (json_is_boolean(v)) {
		snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
	} else if (json_is_integer(v)) {
		snprintf(buf, len, "%lld", (long long) json_integer_value(v));
	} else if (json_is_real(v)) {
		snprintf(buf, len, "%g", json_real_value(v));
	} else if ((s = json_string_value(v)) != NULL) {
		const char *frac = is_instant(s) ? s + 19 : NULL;
		if (frac != NULL) {
			/* drop the fraction; UTC as "Z", other zones kept */
			const char *zone = frac;
			if (*zone == '.')
				zone += 1 + strspn(zone + 1, "0123456789");
			if (strcmp(zone, "+00:00") == 0 ||
			    strcmp(zone, "+00") == 0)
				zone = "Z";
			snprintf(buf, len, "%.19s%s", s, zone);
		} else {
			snprintf(buf, len, "%s", s);
		}
	} else if (json_is_array(v) && json_array_size(v) == 0) {
		snprintf(buf, len, "-");
	} else if (json_is_array(v) && json_is_string(json_array_get(v, 0))) {
		size_t  i, used = 0;
		json_t *e;
		buf[0] = '\0';
		json_array_foreach(v, i, e)
		{
			int n = snprintf(
			    buf + used, len - used, "%s%s", i ? "," : "",
			    json_is_string(e) ? json_string_value(e) : "?");
			if (n < 0 || (size_t) n >= len - used)
				break;
			used += (size_t) n;
		}
	} else {
		char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		snprintf(buf, len, "%s", d ? d : "?");
		free(d);
	}
	if (buf[0] == '\0')
		snprintf(buf, len, "-");
	return buf;
}

void
ax_table_print_kv(FILE *f, json_t *o, const char *const *keys)
{
	size_t w = 0;
	char   buf[1024];

	for (const char *const *k = keys; *k != NULL; k++)
		if (strlen(*k) > w)
			w = strlen(*k);
	for (const char *const *k = keys; *k != NULL; k++)
		fprintf(
		    f, "%s:%*s %s\n", *k, (int) (w - strlen(*k)), "",
		    ax_table_text(json_object_get(o, *k), buf, sizeof(buf)));
}
