/*
 * sched_table.c - compact records of armed schedules, their names and
 * spec codes (see sched_table.h).
 *
 * Records: chunks of REC_CHUNK records, index = chunk * REC_CHUNK + slot;
 * unused records form a free list through next_utc. Names: arena chunks
 * of ARENA_CHUNK bytes holding NUL-terminated names, handle = chunk <<
 * ARENA_BITS | offset; a chunk whose names all died is freed, and when
 * dead bytes pass both the live ones and ARENA_CHUNK the live names are
 * copied into fresh chunks. The name map is an ax_imap of record indexes
 * (it hashes a record's name through the table), so moving names never
 * touches it. Zones: each interned once as [u32 index][name NUL].
 */
#include "sched_table.h"

#include <stdlib.h>
#include <string.h>

#define REC_CHUNK   4096u
#define ARENA_BITS  20u
#define ARENA_CHUNK (1u << ARENA_BITS) /* bytes */
#define ARENA_MAX   (1u << (32u - ARENA_BITS))
#define ZONES_MAX   65536u
#define FIELD_STAR  126u
#define FIELD_QMARK 127u

_Static_assert(sizeof(ax_schedtab_rec) == 40, "a record is 40 bytes");

/* --- the zone map: entries point at a name preceded by its u32 index -- */

static uint64_t
name_hash_entry(const void *entry)
{
	return ax_hash_str(entry);
}

static int
name_match(const void *entry, const void *key)
{
	return strcmp(entry, key) == 0;
}

static const ax_hmap_ops zone_ops = {
	.hash_key   = ax_hmap_hash_str,
	.hash_entry = name_hash_entry,
	.match      = name_match,
};

static const char *rec_name(const ax_schedtab *t, uint32_t idx);

/* --- the name map: record indexes, hashed through their names -------- */

static uint64_t
idx_hash(const void *ctx, uint32_t idx)
{
	return ax_hash_str(rec_name(ctx, idx));
}

static int
idx_match(const void *ctx, uint32_t idx, const void *key)
{
	return strcmp(rec_name(ctx, idx), key) == 0;
}

static const ax_imap_ops idx_ops = {
	.hash_key   = ax_hmap_hash_str,
	.hash_index = idx_hash,
	.match      = idx_match,
};

static uint32_t
index_before(const char *name)
{
	uint32_t v;
	memcpy(&v, name - sizeof(uint32_t), sizeof(v));
	return v;
}

/* --- records -------------------------------------------------------------
 */

void
ax_schedtab_init(ax_schedtab *t)
{
	memset(t, 0, sizeof(*t));
	t->free_head = AX_SCHEDTAB_NONE;
	t->wide_free = AX_SCHEDTAB_NONE;
	ax_imap_init(&t->names, &idx_ops, t);
	ax_hmap_init(&t->zmap, &zone_ops);
}

void
ax_schedtab_fini(ax_schedtab *t)
{
	for (uint32_t i = 0; i < t->nrchunks; i++)
		free(t->rchunks[i]);
	for (uint32_t i = 0; i < t->nachunks; i++)
		free(t->achunks[i]);
	for (uint32_t i = 0; i < t->nzones; i++)
		free(t->zones[i] - sizeof(uint32_t));
	free(t->rchunks);
	free(t->achunks);
	free(t->alive);
	free(t->fill);
	free(t->wide);
	free(t->zones);
	ax_imap_fini(&t->names);
	ax_hmap_fini(&t->zmap);
	memset(t, 0, sizeof(*t));
	t->free_head = AX_SCHEDTAB_NONE;
	t->wide_free = AX_SCHEDTAB_NONE;
}

static ax_schedtab_rec *
rec_at(const ax_schedtab *t, uint32_t idx)
{
	return &t->rchunks[idx / REC_CHUNK][idx % REC_CHUNK];
}

ax_schedtab_rec *
ax_schedtab_at(const ax_schedtab *t, uint32_t idx)
{
	ax_schedtab_rec *r;

	if (idx >= t->end)
		return NULL;
	r = rec_at(t, idx);
	return (r->flags & AX_SCHEDTAB_USED) ? r : NULL;
}

/* A record off the free list or a fresh one; NONE when out of memory. */
static uint32_t
rec_take(ax_schedtab *t)
{
	uint32_t idx;

	if (t->free_head != AX_SCHEDTAB_NONE) {
		idx          = t->free_head;
		t->free_head = (uint32_t) rec_at(t, idx)->next_utc;
		return idx;
	}
	if (t->end == AX_SCHEDTAB_NONE)
		return AX_SCHEDTAB_NONE;
	if (t->end % REC_CHUNK == 0) {
		uint32_t          c = t->end / REC_CHUNK;
		ax_schedtab_rec **tab;
		if (c == t->nrchunks) {
			tab =
			    realloc(t->rchunks, (c + 1) * sizeof(*t->rchunks));
			if (tab == NULL)
				return AX_SCHEDTAB_NONE;
			t->rchunks = tab;
			if ((tab[c] = calloc(REC_CHUNK, sizeof(**tab))) ==
			    NULL)
				return AX_SCHEDTAB_NONE;
			t->nrchunks = c + 1;
		}
	}
	return t->end++;
}

static void
rec_give(ax_schedtab *t, uint32_t idx)
{
	ax_schedtab_rec *r   = rec_at(t, idx);
	uint32_t         gen = r->gen + 1;

	memset(r, 0, sizeof(*r));
	r->gen       = gen;
	r->next_utc  = t->free_head;
	t->free_head = idx;
}

/* --- names arena ----------------------------------------------------------
 */

static char *
name_ptr(const ax_schedtab *t, uint32_t h)
{
	return t->achunks[h >> ARENA_BITS] + (h & (ARENA_CHUNK - 1));
}

/* Copies name (len bytes) into the arena; *h gets its handle.
 * AX_ENOMEM / AX_ELIMIT. */
static ax_err
arena_put(ax_schedtab *t, const char *name, size_t len, uint32_t *h)
{
	size_t need = len + 1;

	if (t->nachunks == 0 || t->achunks[t->acur] == NULL ||
	    t->aoff + need > ARENA_CHUNK) {
		uint32_t c = 0;
		while (c < t->nachunks && t->achunks[c] != NULL)
			c++;
		if (c == ARENA_MAX)
			return ax_err_set(AX_ELIMIT,
			                  "schedule names: arena "
			                  "full");
		if (c == t->nachunks) {
			char **a =
			    realloc(t->achunks, (c + 1) * sizeof(*t->achunks));
			uint32_t *l;
			if (a == NULL)
				return ax_err_set(
				    AX_ENOMEM,
				    "schedule names: out of memory");
			t->achunks = a;
			if ((l = realloc(t->alive, (c + 1) * sizeof(*l))) ==
			    NULL)
				return ax_err_set(
				    AX_ENOMEM,
				    "schedule names: out of memory");
			t->alive = l;
			if ((l = realloc(t->fill, (c + 1) * sizeof(*l))) ==
			    NULL)
				return ax_err_set(
				    AX_ENOMEM,
				    "schedule names: out of memory");
			t->fill     = l;
			a[c]        = NULL;
			t->alive[c] = 0;
			t->fill[c]  = 0;
			t->nachunks = c + 1;
		}
		if ((t->achunks[c] = malloc(ARENA_CHUNK)) == NULL)
			return ax_err_set(AX_ENOMEM,
			                  "schedule names: out of memory");
		t->alive[c] = 0;
		t->fill[c]  = 0;
		t->acur     = c;
		t->aoff     = 0;
	}
	memcpy(t->achunks[t->acur] + t->aoff, name, len + 1);
	*h = (t->acur << ARENA_BITS) | t->aoff;
	t->aoff += (uint32_t) need;
	t->alive[t->acur] += (uint32_t) need;
	t->fill[t->acur] = t->aoff;
	t->name_live += need;
	t->name_used += need;
	return AX_OK;
}

static void
arena_drop(ax_schedtab *t, uint32_t h)
{
	uint32_t c    = h >> ARENA_BITS;
	size_t   need = strlen(name_ptr(t, h)) + 1;

	t->alive[c] -= (uint32_t) need;
	t->name_live -= need;
	if (t->alive[c] == 0 && c != t->acur) {
		/* every name in it died */
		t->name_used -= t->fill[c];
		free(t->achunks[c]);
		t->achunks[c] = NULL;
		t->fill[c]    = 0;
	}
}

/*
 * Copies every live name into fresh chunks (the name map holds indexes:
 * it does not change); on failure (memory) nothing changes.
 */
static void
arena_compact(ax_schedtab *t)
{
	ax_schedtab old = *t;
	uint32_t   *nh  = malloc((size_t) t->end * sizeof(*nh) + 1);

	if (nh == NULL)
		return;
	t->achunks   = NULL;
	t->alive     = NULL;
	t->fill      = NULL;
	t->nachunks  = 0;
	t->acur      = 0;
	t->aoff      = 0;
	t->name_live = 0;
	t->name_used = 0;
	for (uint32_t i = 0; i < t->end; i++) {
		ax_schedtab_rec *r = rec_at(t, i);
		if (!(r->flags & AX_SCHEDTAB_USED))
			continue;
		const char *nm = name_ptr(&old, r->name);
		if (arena_put(t, nm, strlen(nm), &nh[i]) != AX_OK)
			goto undo;
	}
	for (uint32_t i = 0; i < t->end; i++) {
		ax_schedtab_rec *r = rec_at(t, i);
		if (r->flags & AX_SCHEDTAB_USED)
			r->name = nh[i];
	}
	free(nh);
	for (uint32_t i = 0; i < old.nachunks; i++)
		free(old.achunks[i]);
	free(old.achunks);
	free(old.alive);
	free(old.fill);
	return;
undo:
	free(nh);
	for (uint32_t i = 0; i < t->nachunks; i++)
		free(t->achunks[i]);
	free(t->achunks);
	free(t->alive);
	free(t->fill);
	t->achunks   = old.achunks;
	t->alive     = old.alive;
	t->fill      = old.fill;
	t->nachunks  = old.nachunks;
	t->acur      = old.acur;
	t->aoff      = old.aoff;
	t->name_live = old.name_live;
	t->name_used = old.name_used;
}

static const char *
rec_name(const ax_schedtab *t, uint32_t idx)
{
	return name_ptr(t, rec_at(t, idx)->name);
}

/* --- public records ------------------------------------------------------
 */

ax_err
ax_schedtab_add(ax_schedtab *t, const char *name, uint32_t *idx)
{
	size_t           len = name ? strlen(name) : 0;
	uint32_t         i, h;
	ax_schedtab_rec *r;
	ax_err           rv;

	if (len == 0 || len > AX_SCHEDTAB_NAME_MAX)
		return ax_err_set(
		    AX_EINVAL, "schedule name empty or longer than %u bytes",
		    AX_SCHEDTAB_NAME_MAX);
	if (ax_imap_get(&t->names, name) != AX_IMAP_NONE)
		return ax_err_set(AX_EEXIST, "schedule of '%s' exists", name);
	if (ax_imap_reserve(&t->names, t->n + 1) != AX_OK ||
	    (i = rec_take(t)) == AX_SCHEDTAB_NONE)
		return ax_err_set(AX_ENOMEM, "schedules: out of memory");
	if ((rv = arena_put(t, name, len, &h)) != AX_OK) {
		rec_give(t, i);
		return rv;
	}
	r           = rec_at(t, i); /* its gen survives reuse (invariant 1) */
	r->flags    = AX_SCHEDTAB_USED;
	r->name     = h;
	r->next_utc = 0;
	(void) ax_imap_put(&t->names, name, i, NULL); /* room reserved */
	t->n++;
	*idx = i;
	return AX_OK;
}

uint32_t
ax_schedtab_find(const ax_schedtab *t, const char *name)
{
	return name ? ax_imap_get(&t->names, name) : AX_SCHEDTAB_NONE;
}

const char *
ax_schedtab_name(const ax_schedtab *t, uint32_t idx)
{
	ax_schedtab_rec *r = ax_schedtab_at(t, idx);
	return r ? name_ptr(t, r->name) : NULL;
}

static void
wide_give(ax_schedtab *t, uint32_t w)
{
	t->wide[w][0] = t->wide_free;
	t->wide_free  = w;
}

void
ax_schedtab_del(ax_schedtab *t, uint32_t idx)
{
	ax_schedtab_rec *r = ax_schedtab_at(t, idx);

	if (r == NULL)
		return;
	ax_imap_remove(&t->names, idx);
	arena_drop(t, r->name);
	if (r->flags & AX_SCHEDTAB_WIDE)
		wide_give(t, r->id[0]);
	rec_give(t, idx);
	t->n--;
	if (t->name_used - t->name_live > t->name_live &&
	    t->name_used - t->name_live > ARENA_CHUNK)
		arena_compact(t);
}

ax_err
ax_schedtab_set_ids(ax_schedtab *t, uint32_t idx, int64_t sched_id,
                    int64_t dag_id, int64_t version_id)
{
	ax_schedtab_rec *r    = ax_schedtab_at(t, idx);
	int64_t          v[3] = { sched_id, dag_id, version_id };
	int              fit  = 1;

	if (r == NULL)
		return ax_err_set(AX_ENOENT, "no schedule record %u", idx);
	for (int k = 0; k < 3; k++)
		fit &= v[k] >= 0 && v[k] <= (int64_t) UINT32_MAX;
	if (fit) {
		if (r->flags & AX_SCHEDTAB_WIDE)
			wide_give(t, r->id[0]);
		r->flags &= (uint8_t) ~AX_SCHEDTAB_WIDE;
		for (int k = 0; k < 3; k++)
			r->id[k] = (uint32_t) v[k];
		return AX_OK;
	}
	if (!(r->flags & AX_SCHEDTAB_WIDE)) {
		uint32_t w;
		if (t->wide_free != AX_SCHEDTAB_NONE) {
			w            = t->wide_free;
			t->wide_free = (uint32_t) t->wide[w][0];
		} else {
			if (t->nwide == t->capwide) {
				uint32_t cap =
				    t->capwide ? t->capwide * 2 : 16;
				void *p =
				    realloc(t->wide, cap * sizeof(*t->wide));
				if (p == NULL)
					return ax_err_set(
					    AX_ENOMEM,
					    "schedule ids: out of "
					    "memory");
				t->wide    = p;
				t->capwide = cap;
			}
			w = t->nwide++;
		}
		r->flags |= AX_SCHEDTAB_WIDE;
		r->id[0] = w;
		r->id[1] = r->id[2] = 0;
	}
	memcpy(t->wide[r->id[0]], v, sizeof(v));
	return AX_OK;
}

void
ax_schedtab_ids(const ax_schedtab *t, uint32_t idx, int64_t out[3])
{
	ax_schedtab_rec *r = ax_schedtab_at(t, idx);

	if (r == NULL) {
		out[0] = out[1] = out[2] = 0;
	} else if (r->flags & AX_SCHEDTAB_WIDE) {
		memcpy(out, t->wide[r->id[0]], 3 * sizeof(int64_t));
	} else {
		for (int k = 0; k < 3; k++)
			out[k] = r->id[k];
	}
}

size_t
ax_schedtab_bytes(const ax_schedtab *t)
{
	size_t b = (size_t) t->nrchunks * REC_CHUNK * sizeof(ax_schedtab_rec);
	for (uint32_t i = 0; i < t->nachunks; i++)
		if (t->achunks[i] != NULL)
			b += ARENA_CHUNK;
	b += t->names.cap * sizeof(uint32_t) + t->zmap.cap * sizeof(void *);
	b += (size_t) t->capwide * sizeof(*t->wide);
	return b;
}

/* --- spec codes ------------------------------------------------------------
 *
 * bit 0: 1 (a code); bit 1: catchup; bit 2: 5 fields (else 6); bits
 * 3..44: the fields, 7 bits each (0-99, FIELD_STAR, FIELD_QMARK); bits
 * 48..63: the zone's index.
 */

/* The index of zone, interned on first use; -1 when full or no memory. */
static long
zone_index(ax_schedtab *t, const char *zone)
{
	const char *z = ax_hmap_get(&t->zmap, zone);
	size_t      len;
	char       *blk;

	if (z != NULL)
		return (long) index_before(z);
	if (t->nzones == ZONES_MAX)
		return -1;
	if (t->nzones == t->capzones) {
		uint32_t cap = t->capzones ? t->capzones * 2 : 16;
		char   **p   = realloc(t->zones, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		t->zones    = p;
		t->capzones = cap;
	}
	len = strlen(zone);
	if ((blk = malloc(sizeof(uint32_t) + len + 1)) == NULL)
		return -1;
	memcpy(blk, &t->nzones, sizeof(uint32_t));
	memcpy(blk + sizeof(uint32_t), zone, len + 1);
	if (ax_hmap_put(&t->zmap, blk + sizeof(uint32_t),
	                blk + sizeof(uint32_t), NULL) != AX_OK) {
		free(blk);
		return -1;
	}
	t->zones[t->nzones] = blk + sizeof(uint32_t);
	return (long) t->nzones++;
}

/* One field: `*`, `?` or 0-99 without a leading zero; its code, or -1. */
static int
field_code(const char *s, size_t n)
{
	if (n == 1 && s[0] == '*')
		return FIELD_STAR;
	if (n == 1 && s[0] == '?')
		return FIELD_QMARK;
	if (n == 1 && s[0] >= '0' && s[0] <= '9')
		return s[0] - '0';
	if (n == 2 && s[0] >= '1' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9')
		return (s[0] - '0') * 10 + (s[1] - '0');
	return -1;
}

int
ax_schedtab_cron_code(ax_schedtab *t, const char *expr, const char *zone,
                      int catchup, uint64_t *code)
{
	uint64_t    c  = 1u | (catchup ? 2u : 0u);
	int         nf = 0;
	const char *p  = expr;
	long        zi;

	if (expr == NULL)
		return 0;
	for (;;) {
		const char *e = p;
		int         v;
		while (*e != '\0' && *e != ' ')
			e++;
		if (nf == 6 || (v = field_code(p, (size_t) (e - p))) < 0)
			return 0;
		c |= (uint64_t) v << (3 + 7 * nf);
		nf++;
		if (*e == '\0')
			break;
		p = e + 1;
	}
	if (nf != 5 && nf != 6)
		return 0;
	if (nf == 5)
		c |= 4u;
	if ((zi = zone_index(t, zone && zone[0] ? zone : "UTC")) < 0)
		return 0;
	*code = c | ((uint64_t) zi << 48);
	return 1;
}

size_t
ax_schedtab_cron_text(const ax_schedtab *t, uint64_t code, char *buf,
                      size_t len, const char **zone, int *catchup)
{
	int    nf = (code & 4u) ? 5 : 6;
	size_t n  = 0;
	char   tmp[32];

	for (int f = 0; f < nf; f++) {
		unsigned v = (unsigned) (code >> (3 + 7 * f)) & 0x7fu;
		if (f > 0)
			tmp[n++] = ' ';
		if (v == FIELD_STAR)
			tmp[n++] = '*';
		else if (v == FIELD_QMARK)
			tmp[n++] = '?';
		else if (v >= 10) {
			tmp[n++] = (char) ('0' + v / 10);
			tmp[n++] = (char) ('0' + v % 10);
		} else
			tmp[n++] = (char) ('0' + v);
	}
	tmp[n] = '\0';
	if (len > 0) {
		size_t k = n < len ? n : len - 1;
		memcpy(buf, tmp, k);
		buf[k] = '\0';
	}
	if (zone != NULL)
		*zone = t->zones[(uint32_t) (code >> 48)];
	if (catchup != NULL)
		*catchup = (code & 2u) != 0;
	return n;
}
