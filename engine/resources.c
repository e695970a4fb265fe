/*
 * resources.c - named resources: names, small sets, the "gpu=1, ssd=2"
 * configuration form, and the fit check (see resources.h). Sets are
 * arrays of at most AX_RES_MAX entries searched linearly: a task or a
 * worker names a handful, and a linear scan of 16 beats any index.
 */
#include "resources.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
ax_res_name_ok(const char *s)
{
	size_t n = 0;

	if (s == NULL || s[0] == '\0' || s[0] == '-' || s[0] == '.')
		return 0;
	for (; s[n] != '\0'; n++)
		if (!isalnum((unsigned char) s[n]) && s[n] != '_' &&
		    s[n] != '.' && s[n] != '-')
			return 0;
	return n <= AX_RES_NAME_MAX && strcmp(s, "cpu") != 0 &&
	    strcmp(s, "memory") != 0;
}

static int
res_find(const ax_res_set *set, const char *name)
{
	for (int i = 0; i < set->n; i++)
		if (strcmp(set->v[i].name, name) == 0)
			return i;
	return -1;
}

int64_t
ax_res_get(const ax_res_set *set, const char *name)
{
	int i = res_find(set, name);
	return i < 0 ? 0 : set->v[i].amount;
}

ax_err
ax_res_add(ax_res_set *set, const char *name, int64_t delta)
{
	int i = res_find(set, name);

	if (i < 0) {
		if (delta <= 0)
			return AX_OK;
		if (set->n >= AX_RES_MAX)
			return ax_err_set(AX_ELIMIT,
			                  "more than %d named resources",
			                  AX_RES_MAX);
		i = set->n++;
		snprintf(set->v[i].name, sizeof(set->v[i].name), "%s", name);
		set->v[i].amount = 0;
	}
	set->v[i].amount += delta;
	if (set->v[i].amount <= 0)
		set->v[i] = set->v[--set->n];
	return AX_OK;
}

ax_err
ax_res_parse(const char *s, const char *what, ax_res_set *out)
{
	const char *p = s;

	memset(out, 0, sizeof(*out));
	for (;;) {
		char        name[AX_RES_NAME_MAX + 2], *end;
		size_t      n;
		long long   v;
		const char *pair;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			return AX_OK;
		pair = p;
		n    = strcspn(p, "=, \t");
		if (p[n] != '=' || n == 0 || n > AX_RES_NAME_MAX)
			return ax_err_set(
			    AX_ECONFIG,
			    "%s: '%.80s' is not name=amount; write e.g. "
			    "{gpu: 2} in the file or \"gpu=2, ssd=1\"",
			    what, pair);
		memcpy(name, p, n);
		name[n] = '\0';
		if (!ax_res_name_ok(name))
			return ax_err_set(
			    AX_ECONFIG,
			    "%s: '%s' is not a resource name (letters, "
			    "digits, "
			    "'_', '.', '-', up to %d; cpu and memory have "
			    "their own keys)",
			    what, name, AX_RES_NAME_MAX);
		p += n + 1;
		errno = 0;
		v     = strtoll(p, &end, 10);
		if (errno != 0 || end == p || v < 1 || v > AX_RES_AMOUNT_MAX ||
		    (*end != '\0' && *end != ',' && *end != ' ' &&
		     *end != '\t'))
			return ax_err_set(
			    AX_ECONFIG,
			    "%s: the amount of '%s' must be a whole number "
			    "from 1 to %d, got '%.*s'",
			    what, name, AX_RES_AMOUNT_MAX,
			    (int) strcspn(p, ", \t"), p);
		if (res_find(out, name) >= 0)
			return ax_err_set(AX_ECONFIG,
			                  "%s: '%s' is given twice; keep one",
			                  what, name);
		if (ax_res_add(out, name, v) != AX_OK)
			return ax_err_set(AX_ECONFIG,
			                  "%s: more than %d named resources; "
			                  "merge some",
			                  what, AX_RES_MAX);
		p = end;
	}
}

const char *
ax_res_short(const ax_res *need, size_t n, const ax_res_set *offer,
             const ax_res_set *used)
{
	for (size_t i = 0; i < n; i++) {
		int64_t total = ax_res_get(offer, need[i].name);
		int64_t u = used != NULL ? ax_res_get(used, need[i].name) : 0;
		if (need[i].amount <= 0)
			continue;
		if (total <= 0)
			return need[i].name;
		if (u + need[i].amount > total && u > 0)
			return need[i].name;
	}
	return NULL;
}
