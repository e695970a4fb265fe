/*
 * timing_wheel.c - hierarchical timing wheel with microsecond slots.
 *
 * What: 11 levels of 64 slots over 64-bit keys, key = deadline - origin
 * (microseconds since the wheel was created). Level L slot s holds the
 * timers whose key agrees with the cursor above digit L (6 bits per digit)
 * and has digit s at L. Occupancy bitmaps (one word per level) find the
 * next busy slot with one count-trailing-zeros, so advancing over an idle
 * hour costs the same as advancing over one microsecond.
 *
 * Role: the store of every armed timer of the time detector (see the
 * header for clocks and wall-clock jumps).
 *
 * Invariants (with cur = the smallest key not yet processed):
 *  - every timer in a slot has key >= cur, sits at level
 *    msb(key ^ cur) / 6 (level 0 when key == cur), slot = its digit there.
 *    Consequences: a level-0 slot holds one exact key; every timer at a
 *    lower level is earlier than every timer at a higher level; two timers
 *    with the same deadline are always in the same slot, in insertion
 *    order, because cascading walks a slot in order and appends to empty
 *    lower levels.
 *  - timers with key < cur (armed "in the past") live on the overdue list
 *    in insertion order; advance stable-sorts it and fires it first.
 *  - t->state: 0 idle, 1 overdue, 2 detached for firing, 3 + slot index.
 *  - bitmap[L] bit s is set iff slot (L, s) is non-empty.
 *
 * Workload: 10^4 to 10^6 armed timers (cron schedules firing once a minute
 * to once a year, retry delays, timeouts mostly cancelled before they
 * fire); a few hundred fires per second; one advance per OS-timer wake-up.
 */
#include "timing_wheel.h"

#include <stdlib.h>
#include <string.h>

#define WHEEL_BITS   6
#define WHEEL_SLOTS  64 /* 1 << WHEEL_BITS */
#define WHEEL_LEVELS 11 /* 11 * 6 >= 64 key bits */
#define WHEEL_MASK   (WHEEL_SLOTS - 1)

#define ST_IDLE    0u
#define ST_OVERDUE 1u
#define ST_FIRING  2u
#define ST_SLOT0   3u

#define POOL_CHUNK_BYTES                                                      \
	(256u * 1024u) /* id-mode chunk, also its alignment                   \
	                */
#define POOL_CHUNK_HDR 64u
#define POOL_CHUNK_NODES                                                      \
	((POOL_CHUNK_BYTES - POOL_CHUNK_HDR) / sizeof(ax_wheel_timer))

/*
 * Circular doubly linked list head: a whole node used as sentinel (only
 * next/prev are used), so that list code never accesses one object through
 * two struct types (strict aliasing).
 */
typedef ax_wheel_timer wheel_list;

/* One aligned block of id-mode nodes; the header names the block. */
typedef struct pool_chunk {
	uint32_t       index; /* position in wheel_pool.chunks */
	char           pad[POOL_CHUNK_HDR - sizeof(uint32_t)];
	ax_wheel_timer nodes[];
} pool_chunk;

/* Id-mode nodes: ax_wheel_timer handed out by ax_wheel_add_id. */
typedef struct wheel_pool {
	pool_chunk    **chunks;  /* chunk table */
	uint32_t        nchunks; /* chunks allocated */
	uint32_t        cap;     /* capacity of the chunk table */
	ax_wheel_timer *free;    /* free nodes, linked through next */
	uint32_t        used;    /* nodes ever handed out (first unused idx) */
} wheel_pool;

struct ax_wheel {
	int64_t     origin; /* key 0 in caller's clock */
	int64_t     now;    /* last now given to advance / new */
	uint64_t    cur;    /* smallest key not yet processed */
	size_t      count;  /* armed timers, all lists */
	uint64_t    bitmap[WHEEL_LEVELS];
	wheel_list  slots[WHEEL_LEVELS * WHEEL_SLOTS];
	wheel_list  overdue;   /* keys < cur, insertion order */
	wheel_list *firing;    /* list being fired by advance, or NULL */
	int         advancing; /* inside ax_wheel_advance */
	int         min_valid; /* min_us is the exact earliest deadline */
	int64_t     min_us;    /* cache for ax_wheel_next_deadline */
	wheel_pool  pool;
};

#define l (l)

_Static_assert(sizeof(ax_wheel_timer) == 40, "timer node is 40 bytes");

static void
list_init(wheel_list *l)
{
	l->next = l;
	l->prev = l;
}

static int
list_empty(const wheel_list *l)
{
	return l->next == l;
}

static void
list_append(wheel_list *l, ax_wheel_timer *t)
{
	t->prev       = l->prev;
	t->next       = l;
	l->prev->next = t;
	l->prev       = t;
}

static void
list_unlink(ax_wheel_timer *t)
{
	t->prev->next = t->next;
	t->next->prev = t->prev;
	t->next       = NULL;
	t->prev       = NULL;
}

/* Moves every node of from onto the empty list to, keeping order. */
static void
list_move(wheel_list *from, wheel_list *to)
{
	if (list_empty(from)) {
		list_init(to);
		return;
	}
	to->next       = from->next;
	to->prev       = from->prev;
	to->next->prev = to;
	to->prev->next = to;
	list_init(from);
}

static uint64_t
key_of(const ax_wheel *w, int64_t deadline_us)
{
	return (uint64_t) deadline_us - (uint64_t) w->origin;
}

/* Whether deadline_us is at or before the processed part of the time. */
static int
is_past(const ax_wheel *w, int64_t deadline_us)
{
	return deadline_us < w->origin || key_of(w, deadline_us) < w->cur;
}

/* Links t into the slot its key belongs to. Caller: key >= cur. */
static void
wheel_place(ax_wheel *w, ax_wheel_timer *t)
{
	uint64_t k   = key_of(w, t->deadline_us);
	uint64_t x   = k ^ w->cur;
	unsigned lvl = x == 0 ? 0 : (unsigned) (63 - __builtin_clzll(x)) / 6;
	unsigned d   = (unsigned) (k >> (WHEEL_BITS * lvl)) & WHEEL_MASK;
	unsigned idx = lvl * WHEEL_SLOTS + d;

	list_append(&w->slots[idx], t);
	t->state = ST_SLOT0 + idx;
	w->bitmap[lvl] |= 1ull << d;
}

/* Lowest non-empty level, or -1 when the slots are all empty. */
static int
lowest_level(const ax_wheel *w)
{
	for (int l = 0; l < WHEEL_LEVELS; l++)
		if (w->bitmap[l] != 0)
			return l;
	return -1;
}

static unsigned
digit(uint64_t k, int lvl)
{
	return (unsigned) (k >> (WHEEL_BITS * lvl)) & WHEEL_MASK;
}

/* First key of slot s at level lvl, relative to the cursor. */
static uint64_t
slot_start(const ax_wheel *w, int lvl, unsigned s)
{
	unsigned sh   = WHEEL_BITS * (unsigned) (lvl + 1);
	uint64_t high = sh >= 64 ? 0 : (w->cur >> sh) << sh;
	return high | ((uint64_t) s << (WHEEL_BITS * lvl));
}

/*
 * Empties slot (lvl, s), re-placing its timers relative to cur, in list
 * order. Cost: one node visit per timer; this is the wheel's only bulk
 * step (a level-L slot is cascaded once per 64^L us).
 */
static void
cascade(ax_wheel *w, int lvl, unsigned s)
{
	wheel_list     *l = &w->slots[lvl * WHEEL_SLOTS + s];
	ax_wheel_timer *t = l->next, *nx;

	l->prev->next = NULL; /* detach the chain, then walk it */
	list_init(l);
	w->bitmap[lvl] &= ~(1ull << s);
	for (; t != NULL; t = nx) {
		nx = t->next;
		wheel_place(w, t);
	}
}

/*
 * Restores the invariant after cur moved forward over keys that held no
 * timer: the slot now containing cur (only ever on the lowest busy level,
 * since lower levels are earlier) is cascaded, repeatedly.
 */
static void
fixup(ax_wheel *w)
{
	for (;;) {
		int lvl = lowest_level(w);
		if (lvl <= 0)
			return;
		unsigned s = (unsigned) __builtin_ctzll(w->bitmap[lvl]);
		if (s != digit(w->cur, lvl))
			return;
		cascade(w, lvl, s);
	}
}

void
ax_wheel_timer_init(ax_wheel_timer *t)
{
	if (t != NULL)
		memset(t, 0, sizeof(*t));
}

int
ax_wheel_timer_armed(const ax_wheel_timer *t)
{
	return t != NULL && t->state != ST_IDLE;
}

ax_err
ax_wheel_new(int64_t now_us, ax_wheel **out)
{
	ax_wheel *w;

	if (out == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_new: out is NULL");
	*out = NULL;
	if (now_us < 0)
		return ax_err_set(
		    AX_EINVAL,
		    "ax_wheel_new: now_us %lld is negative; pass "
		    "ax_clock_mono_us()",
		    (long long) now_us);
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return ax_err_set(AX_ENOMEM, "ax_wheel_new: out of memory");
	w->origin = now_us;
	w->now    = now_us;
	for (size_t i = 0; i < WHEEL_LEVELS * WHEEL_SLOTS; i++)
		list_init(&w->slots[i]);
	list_init(&w->overdue);
	*out = w;
	return AX_OK;
}

void
ax_wheel_free(ax_wheel *w)
{
	if (w == NULL)
		return;
	for (uint32_t i = 0; i < w->pool.nchunks; i++)
		free(w->pool.chunks[i]);
	free(w->pool.chunks);
	free(w);
}

/* Links an idle t with its fields set; keeps count and the min cache. */
static void
arm(ax_wheel *w, ax_wheel_timer *t)
{
	if (is_past(w, t->deadline_us)) {
		list_append(&w->overdue, t);
		t->state = ST_OVERDUE;
	} else {
		wheel_place(w, t);
	}
	w->count++;
	if (w->min_valid && t->deadline_us < w->min_us)
		w->min_us = t->deadline_us;
}

/* Unlinks an armed t; keeps count, bitmaps and the min cache. */
static void
disarm(ax_wheel *w, ax_wheel_timer *t)
{
	uint32_t st = t->state;

	list_unlink(t);
	t->state = ST_IDLE;
	w->count--;
	if (st >= ST_SLOT0) {
		uint32_t idx = st - ST_SLOT0;
		if (list_empty(&w->slots[idx]))
			w->bitmap[idx / WHEEL_SLOTS] &=
			    ~(1ull << (idx % WHEEL_SLOTS));
	}
	if (w->min_valid && t->deadline_us <= w->min_us)
		w->min_valid = 0;
}

ax_err
ax_wheel_add(ax_wheel *w, int64_t deadline_us, uint64_t cookie,
             ax_wheel_timer *t)
{
	if (w == NULL || t == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_add: NULL %s",
		                  w == NULL ? "wheel" : "timer");
	if (t->state != ST_IDLE)
		return ax_err_set(
		    AX_EBUSY,
		    "ax_wheel_add: timer already armed (deadline "
		    "%lld); cancel it or use ax_wheel_reschedule",
		    (long long) t->deadline_us);
	t->deadline_us = deadline_us;
	t->cookie      = cookie;
	arm(w, t);
	return AX_OK;
}

ax_err
ax_wheel_cancel(ax_wheel *w, ax_wheel_timer *t)
{
	if (w == NULL || t == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_cancel: NULL %s",
		                  w == NULL ? "wheel" : "timer");
	if (t->state == ST_IDLE)
		return ax_err_set(AX_ENOENT,
		                  "ax_wheel_cancel: timer is not armed (it "
		                  "fired or was cancelled)");
	disarm(w, t);
	return AX_OK;
}

ax_err
ax_wheel_reschedule(ax_wheel *w, ax_wheel_timer *t, int64_t deadline_us,
                    uint64_t cookie)
{
	if (w == NULL || t == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_reschedule: NULL %s",
		                  w == NULL ? "wheel" : "timer");
	if (t->state != ST_IDLE)
		disarm(w, t);
	t->deadline_us = deadline_us;
	t->cookie      = cookie;
	arm(w, t);
	return AX_OK;
}

/* ---- id mode: pool of nodes ------------------------------------------ */

/*
 * Pool nodes live in POOL_CHUNK_BYTES-aligned chunks whose header holds
 * the chunk number, so a node's index (for its id) is found from its
 * address alone, and a fired node goes back to the free list in O(1).
 * Pool nodes have gen != 0; embedded timers keep gen == 0.
 */
static pool_chunk *
chunk_of(const ax_wheel_timer *t)
{
	return (pool_chunk *) ((uintptr_t) t &
	                       ~(uintptr_t) (POOL_CHUNK_BYTES - 1));
}

static uint32_t
pool_index(const ax_wheel_timer *t)
{
	const pool_chunk *c = chunk_of(t);
	return c->index * (uint32_t) POOL_CHUNK_NODES +
	    (uint32_t) (t - c->nodes);
}

static ax_wheel_timer *
pool_node(const wheel_pool *p, uint32_t idx)
{
	return &p->chunks[idx / POOL_CHUNK_NODES]
	            ->nodes[idx % POOL_CHUNK_NODES];
}

/* Grows the chunk table and adds one chunk. */
static ax_err
pool_grow(wheel_pool *p)
{
	pool_chunk *c;

	if (p->nchunks == p->cap) {
		uint32_t     ncap = p->cap ? p->cap * 2 : 16;
		pool_chunk **nc   = realloc(p->chunks, ncap * sizeof(*nc));
		if (nc == NULL)
			return ax_err_set(AX_ENOMEM,
			                  "ax_wheel_add_id: out of memory");
		p->chunks = nc;
		p->cap    = ncap;
	}
	/* Not zeroed: nodes are initialised when first handed out, so
	 * untouched pages cost no RSS. */
	c = aligned_alloc(POOL_CHUNK_BYTES, POOL_CHUNK_BYTES);
	if (c == NULL)
		return ax_err_set(AX_ENOMEM, "ax_wheel_add_id: out of memory");
	c->index                = p->nchunks;
	p->chunks[p->nchunks++] = c;
	return AX_OK;
}

static ax_err
pool_get(wheel_pool *p, ax_wheel_timer **out)
{
	ax_wheel_timer *t;
	ax_err          rv;

	if (p->free != NULL) {
		t       = p->free;
		p->free = t->next;
	} else {
		if (p->used == UINT32_MAX - POOL_CHUNK_NODES)
			return ax_err_set(AX_ELIMIT,
			                  "ax_wheel_add_id: too many id-mode "
			                  "timers (2^32)");
		if (p->used / POOL_CHUNK_NODES >= p->nchunks &&
		    (rv = pool_grow(p)) != AX_OK)
			return rv;
		t = pool_node(p, p->used++);
		memset(t, 0, sizeof(*t));
	}
	if (++t->gen == 0) /* gen 0 marks embedded timers; id 0 never exists */
		t->gen = 1;
	t->next = t->prev = NULL;
	t->state          = ST_IDLE;
	*out              = t;
	return AX_OK;
}

static void
pool_put(wheel_pool *p, ax_wheel_timer *t)
{
	t->next = p->free;
	p->free = t;
}

ax_err
ax_wheel_add_id(ax_wheel *w, int64_t deadline_us, uint64_t cookie,
                uint64_t *id_out)
{
	ax_wheel_timer *t = NULL;
	ax_err          rv;

	if (w == NULL || id_out == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_add_id: NULL %s",
		                  w == NULL ? "wheel" : "id_out");
	if ((rv = pool_get(&w->pool, &t)) != AX_OK)
		return rv;
	t->deadline_us = deadline_us;
	t->cookie      = cookie;
	arm(w, t);
	*id_out = ((uint64_t) t->gen << 32) | pool_index(t);
	return AX_OK;
}

ax_err
ax_wheel_cancel_id(ax_wheel *w, uint64_t id)
{
	uint32_t        idx = (uint32_t) id;
	uint32_t        gen = (uint32_t) (id >> 32);
	ax_wheel_timer *t;

	if (w == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_cancel_id: NULL wheel");
	if (gen == 0 || idx >= w->pool.used)
		return ax_err_set(AX_ENOENT,
		                  "ax_wheel_cancel_id: no timer with id %llu",
		                  (unsigned long long) id);
	t = pool_node(&w->pool, idx);
	if (t->gen != gen || t->state == ST_IDLE)
		return ax_err_set(
		    AX_ENOENT,
		    "ax_wheel_cancel_id: timer %llu already fired "
		    "or was cancelled",
		    (unsigned long long) id);
	disarm(w, t);
	pool_put(&w->pool, t);
	return AX_OK;
}

/* ---- advance ---------------------------------------------------------- */

/* Stable merge sort of a NULL-terminated singly linked run by deadline. */
static ax_wheel_timer *
sort_run(ax_wheel_timer *h, size_t n)
{
	ax_wheel_timer *a, *b, *tail, head;
	size_t          half = n / 2;

	if (n < 2)
		return h;
	b = h;
	for (size_t i = 1; i < half; i++)
		b = b->next;
	a          = h;
	tail       = b;
	b          = b->next;
	tail->next = NULL;
	a          = sort_run(a, half);
	b          = sort_run(b, n - half);
	tail       = &head;
	while (a != NULL && b != NULL) {
		if (b->deadline_us < a->deadline_us) { /* ties: a first */
			tail->next = b;
			b          = b->next;
		} else {
			tail->next = a;
			a          = a->next;
		}
		tail = tail->next;
	}
	tail->next = a != NULL ? a : b;
	return head.next;
}

/* Sorts the circular list l by deadline, stably (insertion order on ties). */
static void
list_sort(wheel_list *l)
{
	ax_wheel_timer *h, *prev;
	size_t          n = 0;

	if (list_empty(l))
		return;
	for (ax_wheel_timer *t = l->next; t != l; t = t->next)
		n++;
	l->prev->next = NULL;
	h             = sort_run(l->next, n);
	prev          = l;
	l->next       = h;
	for (; h != NULL; h = h->next) {
		h->prev = prev;
		prev    = h;
	}
	prev->next = l;
	l->prev    = prev;
}

/*
 * Fires every timer of the detached list l in order. The callback may
 * cancel timers still on l (they are armed, state ST_FIRING) and add new
 * ones: those land in the wheel or on the overdue list, never on l.
 */
static size_t
fire_list(ax_wheel *w, wheel_list *l, ax_wheel_fire_fn cb, void *arg)
{
	size_t n = 0;

	for (ax_wheel_timer *t = l->next; t != l; t = t->next)
		t->state = ST_FIRING;
	w->firing = l;
	while (!list_empty(l)) {
		ax_wheel_timer *t = l->next;
		list_unlink(t);
		t->state = ST_IDLE;
		w->count--;
		n++;
		if (t->gen == 0) {
			cb(arg, t); /* t may be freed by now */
			continue;
		}
		cb(arg, t);
		if (t->state == ST_IDLE)
			pool_put(&w->pool, t);
	}
	w->firing = NULL;
	return n;
}

ax_err
ax_wheel_advance(ax_wheel *w, int64_t now_us, ax_wheel_fire_fn cb, void *arg,
                 size_t *fired_out)
{
	wheel_list batch;
	size_t     fired = 0;
	uint64_t   tk;

	if (fired_out != NULL)
		*fired_out = 0;
	if (w == NULL || cb == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_advance: NULL %s",
		                  w == NULL ? "wheel" : "callback");
	if (w->advancing)
		return ax_err_set(AX_ESTATE,
		                  "ax_wheel_advance: called from "
		                  "inside a timer callback");
	if (now_us < w->now)
		return ax_err_set(AX_EINVAL,
		                  "ax_wheel_advance: time went back from %lld "
		                  "to %lld us; the wheel needs a monotonic "
		                  "clock",
		                  (long long) w->now, (long long) now_us);
	w->advancing = 1;
	w->min_valid = 0;
	w->now       = now_us;
	tk           = key_of(w, now_us);

	/* Timers armed in the past: all earlier than anything in a slot. */
	list_move(&w->overdue, &batch);
	list_sort(&batch);
	fired += fire_list(w, &batch, cb, arg);

	while (w->cur <= tk) {
		int      lvl = lowest_level(w);
		unsigned s;
		uint64_t start;

		if (lvl < 0) {
			w->cur = tk + 1;
			break;
		}
		s     = (unsigned) __builtin_ctzll(w->bitmap[lvl]);
		start = slot_start(w, lvl, s);
		if (start > tk) {
			w->cur = tk + 1;
			fixup(w);
			break;
		}
		if (lvl > 0) {
			w->cur = start; /* no timer before start */
			fixup(w);       /* cascades slot (lvl, s) */
			continue;
		}
		/* Level 0: slot s holds exactly the key start. */
		list_move(&w->slots[s], &batch);
		w->bitmap[0] &= ~(1ull << s);
		w->cur = start + 1;
		fixup(w);
		fired += fire_list(w, &batch, cb, arg);
	}
	w->advancing = 0;
	w->min_valid = 0;
	if (fired_out != NULL)
		*fired_out = fired;
	return AX_OK;
}

/* ---- queries ---------------------------------------------------------- */

/* Earliest deadline on list l (walks it). */
static int64_t
list_min(const wheel_list *l)
{
	int64_t m = INT64_MAX;
	for (const ax_wheel_timer *t = l->next; t != l; t = t->next)
		if (t->deadline_us < m)
			m = t->deadline_us;
	return m;
}

ax_err
ax_wheel_next_deadline(ax_wheel *w, int64_t *out)
{
	int      lvl;
	unsigned s;

	if (w == NULL || out == NULL)
		return ax_err_set(AX_EINVAL, "ax_wheel_next_deadline: NULL %s",
		                  w == NULL ? "wheel" : "out");
	if (w->count == 0)
		return ax_err_set(AX_ENOENT,
		                  "ax_wheel_next_deadline: no timer armed");
	if (w->min_valid) {
		*out = w->min_us;
		return AX_OK;
	}
	if (w->firing != NULL && !list_empty(w->firing)) {
		/* Inside a callback: the rest of the batch is due already. */
		*out = w->firing->next->deadline_us;
		return AX_OK;
	}
	if (!list_empty(&w->overdue)) {
		*out = list_min(&w->overdue);
	} else {
		lvl = lowest_level(w);
		if (lvl < 0)
			return ax_err_set(
			    AX_EINTERNAL,
			    "ax_wheel_next_deadline: count %zu but "
			    "no slot in use",
			    w->count);
		s = (unsigned) __builtin_ctzll(w->bitmap[lvl]);
		if (lvl == 0)
			*out = w->origin + (int64_t) slot_start(w, 0, s);
		else
			*out = list_min(&w->slots[lvl * WHEEL_SLOTS + s]);
	}
	if (!w->advancing) {
		w->min_us    = *out;
		w->min_valid = 1;
	}
	return AX_OK;
}

size_t
ax_wheel_count(const ax_wheel *w)
{
	return w == NULL ? 0 : w->count;
}

int64_t
ax_wheel_now(const ax_wheel *w)
{
	return w == NULL ? 0 : w->now;
}
