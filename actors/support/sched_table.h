/*
 * sched_table.h - the time detector's armed schedules in compact records:
 * one 40-byte record a schedule in chunked arrays (addressed by a 32-bit
 * index), its DAG name once in a chunked names arena, a node-less map
 * from name to record, and the schedule spec of most crons encoded in
 * one 64-bit word instead of an allocation.
 *
 * Role: the time detector (actors/time_detector.c) arms a million
 * schedules from ScheduleArmed alone; this table is what each costs in
 * memory: 40 bytes of record, the name and its NUL in the arena, and 5.3
 * to 10.7 bytes of map slot (an ax_imap of record indexes), about 69
 * bytes for a 20-byte name. A
 * record holds no pointer: the wheel timer that fires it lives in the
 * wheel's id-mode pool only while it is due soon (see time_detector.c).
 *
 * Ids: schedules.id, dags.id and dag_versions.id are stored in 32 bits
 * each; a record whose ids do not all fit keeps them in a side table
 * (AX_SCHEDTAB_WIDE), so every id of PostgreSQL's bigint range works.
 *
 * Spec codes (ax_schedtab_cron_code): a 5- or 6-field cron whose fields
 * are each `*`, `?` or a decimal number below 100 written without a
 * leading zero (most DAG schedules: "0 30 2 * * ?", "0 0 * * *"), with a
 * zone among the first 65,536 distinct zones and no start or end, is
 * encoded exactly: ax_schedtab_cron_text() gives back the very bytes
 * that were encoded, so the schedule compiled from it is the one the DAG
 * declares. Other specs are the caller's to intern (bit 0 of a code is 1;
 * an aligned pointer has it 0).
 *
 * Invariants:
 *  1. A used record has AX_SCHEDTAB_USED in flags; an unused one is on
 *     the free list (linked through next_utc) and its gen survives, so a
 *     stale reference (index, gen) never matches a reused record.
 *  2. The map holds the index of every used record, hashed by its name
 *     in the arena. Arena chunks never move; compaction rewrites every
 *     live name into fresh chunks and updates the records' handles.
 *  3. Names are unique among used records.
 *
 * Threads: one owner (the time detector's thread); nothing locks.
 */
#ifndef AX_SCHED_TABLE_H
#define AX_SCHED_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ax_err.h"
#include "hmap.h"

#define AX_SCHEDTAB_NONE     UINT32_MAX /* no record */
#define AX_SCHEDTAB_USED     0x01u      /* flags: the record is in use */
#define AX_SCHEDTAB_WIDE     0x02u      /* flags: ids in the side table */
#define AX_SCHEDTAB_NAME_MAX 65535u     /* longest name, bytes */

/* One armed schedule. The fields next_utc, spec, gen and user belong to
 * the owner; the table sets them to 0 when a record is added. */
typedef struct ax_schedtab_rec {
	int64_t  next_utc; /* owner: next fire instant, UTC us; 0: none */
	uint64_t spec;     /* owner: a spec code or an interned spec */
	uint32_t name;     /* arena handle of the DAG name */
	uint32_t gen;      /* owner: generation of its wheel timer */
	uint32_t id[3];    /* schedule, dag, version ids (or wide index) */
	uint8_t  flags;    /* AX_SCHEDTAB_* */
	uint8_t  user;     /* owner's bits */
	uint16_t pad_;
} ax_schedtab_rec;

typedef struct ax_schedtab {
	ax_schedtab_rec **rchunks;   /* record chunks */
	uint32_t          nrchunks;  /* allocated */
	uint32_t          end;       /* records ever handed out */
	uint32_t          free_head; /* first unused record, or NONE */
	size_t            n;         /* used records */
	char            **achunks;   /* arena chunks (NULL: freed) */
	uint32_t         *alive;     /* live bytes per arena chunk */
	uint32_t         *fill;      /* bytes written per arena chunk */
	uint32_t          nachunks;  /* arena chunk table size */
	uint32_t          acur;      /* chunk being filled */
	uint32_t          aoff;      /* next free byte in it */
	size_t            name_live, name_used; /* arena bytes */
	ax_imap           names;                /* name -> record index */
	int64_t (*wide)[3];                     /* side table of ids */
	uint32_t nwide, capwide, wide_free;     /* wide_free: list head */
	char   **zones;                         /* interned zone names */
	ax_hmap  zmap;                          /* zone name -> index+1 */
	uint32_t nzones, capzones;
} ax_schedtab;

/* An empty table; allocates nothing. */
void ax_schedtab_init(ax_schedtab *t);

/* Frees everything the table holds; safe on zeroed memory. */
void ax_schedtab_fini(ax_schedtab *t);

/*
 * Adds a record for name (a NUL-terminated string of at most
 * AX_SCHEDTAB_NAME_MAX bytes, not in the table), ids 0, owner fields 0;
 * *idx gets its index. AX_EINVAL (name too long or empty), AX_EEXIST
 * (name present), AX_ENOMEM; the table is unchanged on failure.
 */
ax_err ax_schedtab_add(ax_schedtab *t, const char *name, uint32_t *idx);

/* The index of the record of name, or AX_SCHEDTAB_NONE. */
uint32_t ax_schedtab_find(const ax_schedtab *t, const char *name);

/* The used record at idx, or NULL (out of range or unused). */
ax_schedtab_rec *ax_schedtab_at(const ax_schedtab *t, uint32_t idx);

/* The name of the used record at idx (valid until the record is deleted
 * or the table compacted by a later add or delete). */
const char *ax_schedtab_name(const ax_schedtab *t, uint32_t idx);

/* Deletes the used record at idx (its gen is bumped); a no-op for an
 * unused one. May compact the arena (names move). */
void ax_schedtab_del(ax_schedtab *t, uint32_t idx);

/* Sets the ids of the used record at idx (any int64 values). AX_ENOMEM
 * when they need the side table and it cannot grow (ids unchanged). */
ax_err ax_schedtab_set_ids(ax_schedtab *t, uint32_t idx, int64_t sched_id,
                           int64_t dag_id, int64_t version_id);

/* The ids of the used record at idx into out[0..3): schedule, dag,
 * version. */
void ax_schedtab_ids(const ax_schedtab *t, uint32_t idx, int64_t out[3]);

static inline size_t
ax_schedtab_count(const ax_schedtab *t)
{
	return t->n;
}

/* Indexes run from 0 to ax_schedtab_end(t) - 1; ax_schedtab_at() says
 * which are used. Deleting during such a walk is allowed; adding is not
 * (a new record may or may not be visited). */
static inline uint32_t
ax_schedtab_end(const ax_schedtab *t)
{
	return t->end;
}

/* Bytes the table holds (records, arena, map, side tables). */
size_t ax_schedtab_bytes(const ax_schedtab *t);

/*
 * Encodes the cron expr in zone (NULL or "": UTC) with the catchup flag
 * into *code when it has the simple form described above (interning
 * zone). Returns 1 when encoded, 0 when not (not simple, too many zones,
 * or out of memory: the caller interns the spec instead).
 */
int ax_schedtab_cron_code(ax_schedtab *t, const char *expr, const char *zone,
                          int catchup, uint64_t *code);

/* Whether code is a spec code (bit 0 set) rather than an owner's
 * pointer. */
static inline int
ax_schedtab_is_code(uint64_t code)
{
	return (code & 1u) != 0;
}

/*
 * The expression and zone of a spec code: writes the expression into
 * buf (len >= 24 suffices for every code), *zone gets the interned zone
 * name (owned by the table), *catchup the flag. Returns the expression's
 * length.
 */
size_t ax_schedtab_cron_text(const ax_schedtab *t, uint64_t code, char *buf,
                             size_t len, const char **zone, int *catchup);

#endif /* AX_SCHED_TABLE_H */
