/*
 * config.h - AX configuration: a YAML file plus AX_* environment overrides.
 *
 * Every key is declared in one table (config.c) with its type, default and
 * meaning; a key in the file that is not in the table is an error that names
 * the file, line and column and suggests the closest key. The environment
 * overrides the file: key `a.b_c` is read from AX_A_B_C (e.g.
 * `openlineage.url` from AX_OPENLINEAGE_URL, `database.dsn` from
 * AX_DATABASE_DSN or its short alias AX_DSN). Actor addresses live under
 * `actors.<name>` (any actor name) and default to inproc://ax/<name>.
 *
 * A loaded config is immutable after ax_config_load returns except through
 * ax_config_set, which main() uses for command-line flags before starting
 * threads. Readers may share it across threads afterwards.
 */
#ifndef AX_CONFIG_H
#define AX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"

typedef struct ax_config ax_config;

/*
 * Loads path (NULL: no file, defaults only), then applies the environment.
 * On failure *out is NULL and the detail names the key and the place
 * ("FILE:LINE:COL: key 'x': ..."), and says how to fix it.
 */
ax_err ax_config_load(const char *path, ax_config **out);

void ax_config_free(ax_config *cfg);

/*
 * Sets key to value as if written in the file, validating the value's type.
 * Used for command-line flags. Returns AX_ECONFIG for an unknown key or a
 * bad value, with a detail.
 */
ax_err ax_config_set(ax_config *cfg, const char *key, const char *value);

/* The string value of key (its default when unset; "" when no default). */
const char *ax_config_str(const ax_config *cfg, const char *key);

/* Integer value of an `int` key. */
int64_t ax_config_int(const ax_config *cfg, const char *key);

/* Microseconds of a `duration` key. */
int64_t ax_config_duration_us(const ax_config *cfg, const char *key);

/* 1 or 0 for a `bool` key. */
int ax_config_bool(const ax_config *cfg, const char *key);

/*
 * 1 when name is one of the names of a list key (type `names`, e.g.
 * worker.run_as_allowed: a YAML list or "a, b"), else 0.
 */
int ax_config_has_name(const ax_config *cfg, const char *key,
                       const char *name);

/* The same on the value of such a key ("a, b"; NULL is empty). */
int ax_names_has(const char *list, const char *name);

/*
 * The address of actor `name` (actors.<name>), or inproc://ax/<name>.
 * Writes into buf and returns it.
 */
const char *ax_config_actor_addr(const ax_config *cfg, const char *name,
                                 char *buf, size_t len);

/* Prints every key with its type, default and meaning (for --help). */
void ax_config_describe(void *file);

#endif /* AX_CONFIG_H */
