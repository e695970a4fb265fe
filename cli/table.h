/*
 * table.h - human output of axctl: aligned text tables, key/value blocks
 * and the text form of JSON values (times shown as ISO 8601 UTC to the
 * second).
 *
 * Role: the `axctl` API subcommands print the server's JSON through this
 * module unless --json is given. Invariants: a cell is never empty ("-"
 * stands for null / absent), columns are separated by two spaces, the last
 * column is not padded. Workload: up to a few thousand rows per table.
 */
#ifndef AX_TABLE_H
#define AX_TABLE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

typedef struct ax_table ax_table;

/* A table with ncols columns named by headers (copied). NULL: no memory. */
ax_table *ax_table_new(size_t ncols, const char *const *headers);

/* Frees t; accepts NULL. */
void ax_table_free(ax_table *t);

/* Adds a row of ncols cells (copied; NULL cells print as "-"). 0 ok,
 * -1 out of memory. */
int ax_table_add(ax_table *t, const char *const *cells);

/* Adds a row whose cells are the text forms (ax_table_text) of the
 * members keys[0..ncols) of object o. */
int ax_table_add_json(ax_table *t, json_t *o, const char *const *keys);

/* Prints the header line and the rows, aligned, to f. */
void ax_table_print(const ax_table *t, FILE *f);

/* Number of rows added so far. */
size_t ax_table_rows(const ax_table *t);

/*
 * The text form of a JSON value into buf (len bytes; truncated) and
 * returns buf: null / absent -> "-", booleans -> yes / no, integers,
 * RFC 3339 instants "2024-05-01T02:30:00.123456+00:00" -> to the second
 * with UTC as "Z", empty arrays -> "-",
 * other strings as they are, arrays of strings joined by ",", other
 * values as compact JSON.
 */
const char *ax_table_text(json_t *v, char *buf, size_t len);

/* Prints "  key:<pad> text" lines for keys[] of object o, aligned. */
void ax_table_print_kv(FILE *f, json_t *o, const char *const *keys);

#endif /* AX_TABLE_H */
