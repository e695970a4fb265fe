/*
 * time_detector.c - schedules and one-shot timers on a timing wheel (see
 * time_detector.h).
 *
 * State: one wheel on the monotonic clock; armed schedules in compact
 * records (support/sched_table.h: 40 bytes a record, the DAG name once in
 * an arena, an index map by name: about 69 bytes a schedule with a
 * 20-byte name), armed from ScheduleArmed alone, no DAG decoded. A
 * record's spec is a 64-bit code for most crons (a simple cron in one of
 * the first 65,536 zones, no window: nothing allocated) or a pointer to
 * an interned spec shared by every schedule with the same expression,
 * zone, catchup and window (a node-less map). A compiled ax_schedule
 * (about 300 bytes) is kept for the scheduler.compiled_schedules most
 * recently used specs; the others are compiled again from their key when
 * they fire (microseconds, once per fire), so a million distinct
 * schedules do not hold a million compiled ones.
 *
 * The wheel holds only the schedules due within HORIZON_US (an id-mode
 * timer of 40 bytes each, in the wheel's pool); the others are parked in
 * their records, and a refill timer every HORIZON_US / 2 walks the
 * records and puts those now due within the horizon on the wheel, so a
 * million monthly schedules keep a few hundred timers. A record's timer
 * is never cancelled: re-arming or deleting bumps the record's gen, and
 * a timer whose cookie carries an older gen is ignored when it fires.
 *
 * One-shot timers by "kind/key" (each embeds its timer and owns the
 * TimerSet it replays). The wheel's callback only collects what fired;
 * the tick then builds one batch of runs, writes it in one transaction
 * and sends the Due commands, so a tick with 200 fires costs one commit.
 */
#include "time_detector.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "clock.h"
#include "dag_params.h"
#include "dag_registry.h"
#include "dag_schedule.h"
#include "flow_util.h"
#include "hmap.h"
#include "list.h"
#include "sched_table.h"
#include "store.h"
#include "store_attempts.h"
#include "store_commands.h"
#include "store_sched.h"
#include "timing_wheel.h"

#define COMP          AX_A_TIME_DETECTOR
#define JUMP_US       (2 * AX_USEC_PER_SEC)
#define COOKIE_TIMER  2
#define COOKIE_REFILL 3
#define COOKIE_SCHED  (UINT64_C(1) << 63) /* | gen << 32 | record index */
#define GEN_MASK      0x7fffffffu
#define RETRY_DB_US   (500 * AX_USEC_PER_MSEC)
#define HORIZON_US    (10 * 60 * AX_USEC_PER_SEC) /* on the wheel */

/* The owner's bits of a record (ax_schedtab_rec.user). */
#define U_MARK   0x01u /* parity of the loader pass that armed it */
#define U_WHEEL  0x02u /* a timer with its gen is on the wheel */
#define U_FIRED  0x0cu /* 1 << 2: collected in this tick; 2 << 2: retry */
#define FIRED(r) (((r)->user & U_FIRED) >> 2)
#define SET_FIRED(r, v)                                                       \
	((r)->user = (uint8_t) (((r)->user & ~U_FIRED) | ((v) << 2)))

/*
 * An interned schedule spec: every armed schedule with the same
 * expression, zone, catchup and window that has no spec code shares one
 * (refs counts them); a spec code's compiled schedule is cached in one
 * with refs 0, freed when the LRU drops it. Allocated with its key.
 */
typedef struct sspec {
	ax_schedule *sch;   /* owned; NULL: not compiled now */
	ax_list_node lru;   /* on tdet.lru while compiled */
	uint32_t     refs;  /* armed schedules using it */
	uint16_t     klen;  /* bytes in key */
	char         key[]; /* spec_key(): flags, expression, zone, window */
} sspec;

/* The lookup key of the spec table: spec_key() bytes. */
typedef struct spec_view {
	const char *key;
	size_t      klen;
} spec_view;

typedef struct otimer {
	ax_wheel_timer t;
	char          *key; /* "kind/key" */
	Ax__Command   *cmd; /* the TimerSet, unpacked (owned) */
	int64_t        fire_utc;
} otimer;

/* One run to create in this tick, and what to send after the commit. */
typedef struct fire {
	uint32_t      s;        /* schedule record; AX_SCHEDTAB_NONE: manual */
	int64_t       prev_utc; /* its next fire before this tick */
	ax_dag_entry *ref;      /* manual: keeps dag alive until the flush */
	char         *conf;     /* manual: params (owned; the command is gone
	                           by the flush) */
	char   *dag;
	int64_t version_id;
	int64_t command_id; /* manual: control_command.id (0: none) */
	int     manual, catchup;
} fire;

typedef struct tdet {
	const ax_pipeline_ctx  *ctx;
	ax_actor               *self;
	ax_store               *store;
	ax_tz_cache            *tzc;
	ax_wheel               *wheel;
	ax_schedtab             tab;   /* armed schedules */
	ax_hmap                 specs; /* interned sspec by key (node-less) */
	int64_t                 horizon; /* mono: due by then => on wheel */
	ax_list                 lru; /* compiled specs, newest at the head */
	size_t                  ncompiled, compiled_max;
	uint8_t                 mark;   /* U_MARK of the current loader pass */
	int                     refill; /* the refill timer fired */
	ax_strmap              *timers; /* kind/key -> otimer */
	int64_t                 offset; /* utc - mono at the last tick */
	int64_t                 lead;   /* scheduler.prepare_ahead, us */
	size_t                  fires_max; /* scheduler.fires_per_tick */
	ax_time_detector_stats *stats;
	ax_time_detector_stats  own_stats;
	/* per-tick collection */
	uint32_t         *due;
	size_t            ndue, capdue;
	otimer          **tfired;
	size_t            ntf, captf;
	ax_store_run_row *rows;
	fire             *fires;
	size_t            nrows, caprows, capfires;
} tdet;

/* --- helpers ------------------------------------------------------------
 */

static int64_t
mono_of(int64_t utc_due, int64_t utc_now, int64_t mono_now)
{
	int64_t d = mono_now + (utc_due - utc_now);
	return d < 0 ? 0 : d;
}

/* --- interned specs ------------------------------------------------------
 */

static uint64_t
spec_hash_key(const void *key)
{
	const spec_view *v = key;
	return ax_hash_bytes(v->key, v->klen);
}

static uint64_t
spec_hash_entry(const void *entry)
{
	const sspec *p = entry;
	return ax_hash_bytes(p->key, p->klen);
}

static int
spec_match(const void *entry, const void *key)
{
	const sspec     *p = entry;
	const spec_view *v = key;
	return p->klen == v->klen && memcmp(p->key, v->key, v->klen) == 0;
}

static const ax_hmap_ops spec_ops = {
	.hash_key   = spec_hash_key,
	.hash_entry = spec_hash_entry,
	.match      = spec_match,
};

/*
 * The identity of a schedule in at most cap bytes: one flag byte
 * (catchup, start set, end set), expression NUL, zone NUL, then the start
 * and end instants only when set (0: open). 0 when too long.
 */
static size_t
spec_key(const char *expr, const char *zone, int catchup, int64_t start_us,
         int64_t end_us, char *key, size_t cap)
{
	size_t el, zl, n = 0;

	expr = expr ? expr : "";
	zone = zone && zone[0] ? zone : "UTC";
	el   = strlen(expr);
	zl   = strlen(zone);
	if (1 + el + 1 + zl + 1 + 2 * sizeof(int64_t) > cap)
		return 0;
	key[n++] =
	    (char) ((catchup ? 1 : 0) | (start_us ? 2 : 0) | (end_us ? 4 : 0));
	memcpy(key + n, expr, el + 1);
	n += el + 1;
	memcpy(key + n, zone, zl + 1);
	n += zl + 1;
	if (start_us) {
		memcpy(key + n, &start_us, sizeof(int64_t));
		n += sizeof(int64_t);
	}
	if (end_us) {
		memcpy(key + n, &end_us, sizeof(int64_t));
		n += sizeof(int64_t);
	}
	return n;
}

static void
spec_unlink(tdet *d, sspec *p)
{
	ax_hmap_remove(&d->specs, p);
	if (p->sch != NULL) {
		ax_list_remove(&d->lru, &p->lru);
		d->ncompiled--;
	}
	ax_schedule_free(p->sch);
	free(p);
}

/* Lists the freshly compiled p; drops the oldest compiled one if over
 * (and the spec itself when no schedule references it: the cache entry
 * of a spec code). */
static void
lru_add(tdet *d, sspec *p)
{
	ax_list_prepend(&d->lru, &p->lru);
	if (++d->ncompiled > d->compiled_max) {
		sspec *old = AX_LIST_ENTRY(d->lru.tail, sspec, lru);
		if (old->refs == 0) {
			spec_unlink(d, old);
			return;
		}
		ax_list_remove(&d->lru, &old->lru);
		ax_schedule_free(old->sch);
		old->sch = NULL;
		d->ncompiled--;
	}
}

/* Compiles the spec whose key is key (see spec_key). */
static ax_err
spec_compile(tdet *d, const char *key, ax_schedule **out)
{
	const char *expr = key + 1, *zone = expr + strlen(expr) + 1;
	const char *w     = zone + strlen(zone) + 1;
	int64_t     start = AX_SCHED_NO_START, end = AX_SCHED_NO_END;

	if (key[0] & 2) {
		memcpy(&start, w, sizeof(int64_t));
		w += sizeof(int64_t);
	}
	if (key[0] & 4)
		memcpy(&end, w, sizeof(int64_t));
	return ax_dag_schedule_parse(expr, zone, key[0] & 1, start, end,
	                             d->tzc, out);
}

/*
 * The compiled schedule of p (NULL, detail set, when it no longer
 * compiles or memory is short): kept among the compiled_max most
 * recently used; the least recently used one is dropped when over.
 */
static ax_schedule *
spec_sched(tdet *d, sspec *p)
{
	if (p->sch != NULL) {
		if (d->lru.head != &p->lru) {
			ax_list_remove(&d->lru, &p->lru);
			ax_list_prepend(&d->lru, &p->lru);
		}
		return p->sch;
	}
	if (spec_compile(d, p->key, &p->sch) != AX_OK)
		return NULL;
	lru_add(d, p);
	return p->sch;
}

/*
 * The spec of key (klen bytes), compiled, found or created with refs
 * refs more; NULL (detail set) when it does not compile or memory is
 * short. A spec created with refs 0 is a cache entry: it goes when the
 * LRU drops its compiled schedule.
 */
static sspec *
spec_intern(tdet *d, const char *key, size_t klen, uint32_t refs)
{
	spec_view    v = { key, klen };
	sspec       *p;
	ax_schedule *sch;

	if ((p = ax_hmap_get(&d->specs, &v)) != NULL) {
		if (spec_sched(d, p) == NULL)
			return NULL;
		p->refs += refs;
		return p;
	}
	if (spec_compile(d, key, &sch) != AX_OK)
		return NULL;
	if ((p = calloc(1, offsetof(sspec, key) + klen)) == NULL) {
		ax_schedule_free(sch);
		ax_err_set(AX_ENOMEM, "time_detector: out of memory");
		return NULL;
	}
	p->sch  = sch;
	p->refs = refs;
	p->klen = (uint16_t) klen;
	memcpy(p->key, key, klen);
	v.key = p->key;
	if (ax_hmap_put(&d->specs, &v, p, NULL) != AX_OK) {
		ax_schedule_free(sch);
		free(p);
		return NULL;
	}
	lru_add(d, p);
	return p;
}

/* Drops a reference; the last one frees the spec and its schedule. */
static void
spec_release(tdet *d, sspec *p)
{
	if (p == NULL || --p->refs > 0)
		return;
	spec_unlink(d, p);
}

/* The spec_key() of a spec code into key (cap bytes); 0 when too long. */
static size_t
code_key(tdet *d, uint64_t code, char *key, size_t cap)
{
	char        expr[32];
	const char *zone;
	int         catchup;

	ax_schedtab_cron_text(&d->tab, code, expr, sizeof(expr), &zone,
	                      &catchup);
	return spec_key(expr, zone, catchup, 0, 0, key, cap);
}

/* The compiled schedule of a spec code (through its cache entry). */
static ax_schedule *
code_sched(tdet *d, uint64_t code)
{
	char   key[128];
	size_t klen = code_key(d, code, key, sizeof(key));
	sspec *p;

	if (klen == 0) {
		ax_err_set(AX_EINVAL, "schedule zone name too long");
		return NULL;
	}
	p = spec_intern(d, key, klen, 0);
	return p ? p->sch : NULL;
}

/*
 * Whether a spec code compiles: found in the cache, or compiled and
 * freed at once, so that arming a million schedules does not fill the
 * cache with specs that fire next month (they are compiled when they
 * fire). 0, detail set, when it does not compile.
 */
static int
code_valid(tdet *d, uint64_t code)
{
	char         key[128];
	size_t       klen = code_key(d, code, key, sizeof(key));
	spec_view    v    = { key, klen };
	ax_schedule *sch;

	if (klen == 0) {
		ax_err_set(AX_EINVAL, "schedule zone name too long");
		return 0;
	}
	if (ax_hmap_get(&d->specs, &v) != NULL)
		return 1;
	if (spec_compile(d, key, &sch) != AX_OK)
		return 0;
	ax_schedule_free(sch);
	return 1;
}

/*
 * The spec handle of sa: a spec code when it has one, else an interned
 * spec with a new reference; validated (it compiles). 0 (detail set)
 * when it does not compile or memory is short.
 */
static uint64_t
spec_get(tdet *d, const Ax__ScheduleArmed *sa)
{
	char     key[1024];
	size_t   klen;
	uint64_t code;
	sspec   *p;

	if (sa->start_us == 0 && sa->end_us == 0 &&
	    ax_schedtab_cron_code(&d->tab, sa->cron, sa->timezone, sa->catchup,
	                          &code))
		return code_valid(d, code) ? code : 0;
	klen = spec_key(sa->cron, sa->timezone, sa->catchup, sa->start_us,
	                sa->end_us, key, sizeof(key));
	if (klen == 0) {
		ax_err_set(AX_EINVAL, "schedule expression too long");
		return 0;
	}
	p = spec_intern(d, key, klen, 1);
	return p ? (uint64_t) (uintptr_t) p : 0;
}

static void
handle_release(tdet *d, uint64_t h)
{
	if (h != 0 && !ax_schedtab_is_code(h))
		spec_release(d, (sspec *) (uintptr_t) h);
}

/* The compiled schedule of handle h (NULL, detail set, on failure). */
static ax_schedule *
handle_sched(tdet *d, uint64_t h)
{
	if (ax_schedtab_is_code(h))
		return code_sched(d, h);
	return spec_sched(d, (sspec *) (uintptr_t) h);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

/* Distinct specs among the armed schedules: a sort of their handles (8
 * bytes a schedule for a moment), so only when the actor stops. */
static size_t
count_specs(tdet *d)
{
	size_t    n = 0, distinct = 0;
	uint64_t *v = malloc(ax_schedtab_count(&d->tab) * sizeof(*v) + 1);

	if (v == NULL)
		return ax_hmap_count(&d->specs);
	for (uint32_t i = 0; i < ax_schedtab_end(&d->tab); i++) {
		ax_schedtab_rec *r = ax_schedtab_at(&d->tab, i);
		if (r != NULL)
			v[n++] = r->spec;
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		distinct += i == 0 || v[i] != v[i - 1];
	free(v);
	return distinct;
}

static void
otimer_free(void *p)
{
	otimer *t = p;
	if (t == NULL)
		return;
	if (t->cmd != NULL)
		ax__command__free_unpacked(t->cmd, NULL);
	free(t->key);
	free(t);
}

static void
set_deadline(tdet *d)
{
	int64_t dl;
	if (ax_wheel_next_deadline(d->wheel, &dl) == AX_OK)
		ax_actor_set_deadline(d->self, dl > 0 ? dl : 1);
	else
		ax_actor_set_deadline(d->self, 0);
}

/* Appends one run to the tick's batch; -1 when out of memory. */
static int
add_run(tdet *d, uint32_t s, ax_dag_entry *ref, const char *dag,
        int64_t dag_id, int64_t version_id, const ax_period *p, int64_t due_us,
        const char *conf, int manual, int catchup)
{
	if (AX_GROW(d->rows, d->caprows, d->nrows + 1) != AX_OK ||
	    AX_GROW(d->fires, d->capfires, d->nrows + 1) != AX_OK)
		return -1;
	ax_store_run_row *r = &d->rows[d->nrows];
	fire             *f = &d->fires[d->nrows];
	memset(r, 0, sizeof(*r));
	memset(f, 0, sizeof(*f));
	r->dag_id            = dag_id;
	r->dag_version_id    = version_id;
	r->run_type          = manual ? "manual" : "scheduled";
	r->logical_us        = p->logical_us;
	r->interval_start_us = p->start_us;
	r->interval_end_us   = p->end_us;
	r->due_us            = due_us;
	f->conf              = conf ? strdup(conf) : NULL;
	r->conf_json         = f->conf;
	f->s                 = s;
	if (s != AX_SCHEDTAB_NONE) {
		int64_t ids[3];
		ax_schedtab_ids(&d->tab, s, ids);
		r->schedule_id = ids[0];
		f->prev_utc    = ax_schedtab_at(&d->tab, s)->next_utc;
	}
	f->ref        = ref;
	f->dag        = (char *) dag;
	f->version_id = version_id;
	f->manual     = manual;
	f->catchup    = catchup;
	d->nrows++;
	return 0;
}

/*
 * Collects the runs of s that are due by utc_now + lead (periods ending
 * after s->next_utc - 1, honouring catchup, capped) into the batch and
 * moves s->next_utc past them. The schedules row gets the new next fire
 * in the same transaction (the last row of the schedule carries it).
 * A run collected ahead keeps its due instant: the queue holds its
 * attempts until then (see time_detector.h, "prepare ahead").
 */
static void arm_at(tdet *d, uint32_t idx, int64_t deadline);

static void
collect_sched(tdet *d, uint32_t idx, int64_t utc_now)
{
	ax_schedtab_rec *s   = ax_schedtab_at(&d->tab, idx);
	const char      *dag = ax_schedtab_name(&d->tab, idx);
	ax_period        per[64];
	size_t           n = 0, total = 0;
	int              more = 0, oom = 0;
	int64_t          from = s->next_utc - 1, last_end = 0, ids[3];
	int64_t          horizon = utc_now + d->lead, prev = s->next_utc;
	ax_schedule     *sch = handle_sched(d, s->spec);

	if (sch == NULL) {
		/* compiled before, so memory is short: try again shortly */
		ax_logf(AX_LOG_ERROR, COMP, NULL, &(ax_log_ids) { .dag = dag },
		        "schedule not evaluated, retrying in 0.5 s: %s",
		        ax_err_detail());
		SET_FIRED(s, 2u);
		arm_at(d, idx, ax_clock_mono_us() + RETRY_DB_US);
		return;
	}
	ax_schedtab_ids(&d->tab, idx, ids);

	/* the wheel fired s for next_utc - lead; a few ms of rounding
	 * between the clocks must not make that a no-op tick */
	if (s->next_utc > horizon &&
	    s->next_utc - horizon < 5 * AX_USEC_PER_MSEC)
		horizon = s->next_utc;
	/* missed periods (downtime, pause): catchup decides which, up to
	 * now; the next one is prepared ahead at the following tick */
	if (s->next_utc <= utc_now)
		horizon = utc_now;

	do {
		if (ax_schedule_due(sch, from, horizon, per, 64, &n, &more) !=
		    AX_OK)
			break;
		for (size_t i = 0; i < n; i++) {
			/* a catch-up is a period due well before now */
			int late = utc_now - per[i].end_us > AX_USEC_PER_SEC;
			if (add_run(d, idx, NULL, dag, ids[1], ids[2], &per[i],
			            per[i].end_us, NULL, 0, late) != 0) {
				oom = 1;
				break;
			}
			d->fires[d->nrows - 1].prev_utc = prev;
			last_end                        = per[i].end_us;
			total++;
		}
		if (n > 0)
			from = per[n - 1].end_us;
	} while (more && !oom && n > 0 &&
	         total < AX_TIME_DETECTOR_CATCHUP_MAX);
	if (more && total >= AX_TIME_DETECTOR_CATCHUP_MAX) {
		/* the rest at the next tick: next fire stays in the past */
		ax_logf(
		    AX_LOG_WARN, COMP, "CATCHUP_CAPPED",
		    &(ax_log_ids) { .dag = dag },
		    "%zu missed periods created this tick; the rest follow",
		    total);
		ax_schedule_next_fire(sch, last_end, &s->next_utc);
	} else {
		int64_t after = last_end > horizon ? last_end : horizon;
		if (ax_schedule_next_fire(sch, after, &s->next_utc) != AX_OK)
			s->next_utc = 0; /* nothing left (end or at) */
	}
	if (total > 0)
		d->rows[d->nrows - 1].next_fire_us = s->next_utc;
	else if (ids[0] > 0) {
		/* nothing due (paused window, past end): persist anyway */
		ax_store_sched_set_next(d->store, &ids[0], &s->next_utc, 1);
	}
}

/* Puts record idx's timer on the wheel at deadline (mono). */
static void
arm_at(tdet *d, uint32_t idx, int64_t deadline)
{
	ax_schedtab_rec *r = ax_schedtab_at(&d->tab, idx);
	uint64_t         id;

	r->gen++;
	r->user |= U_WHEEL;
	if (ax_wheel_add_id(d->wheel, deadline,
	                    COOKIE_SCHED |
	                        ((uint64_t) (r->gen & GEN_MASK) << 32) | idx,
	                    &id) != AX_OK) {
		/* parked: the next refill retries */
		r->user &= (uint8_t) ~U_WHEEL;
		ax_logf(
		    AX_LOG_ERROR, COMP, NULL,
		    &(ax_log_ids) { .dag = ax_schedtab_name(&d->tab, idx) },
		    "schedule parked until the next refill: %s",
		    ax_err_detail());
	}
}

/*
 * (Re)arms record idx at its next UTC instant: on the wheel when due by
 * the horizon, else parked for a refill. Any timer it had goes stale.
 */
static void
arm_sched(tdet *d, uint32_t idx, int64_t utc_now, int64_t mono_now)
{
	ax_schedtab_rec *r = ax_schedtab_at(&d->tab, idx);
	int64_t          dl;

	r->gen++; /* the timer it had, if any, is stale */
	r->user &= (uint8_t) ~U_WHEEL;
	if (r->next_utc == 0)
		return;
	dl = mono_of(r->next_utc - d->lead, utc_now, mono_now);
	if (dl <= d->horizon)
		arm_at(d, idx, dl);
}

/*
 * Moves the horizon to mono_now + HORIZON_US and puts every parked
 * schedule due by then on the wheel; the next refill fires at half the
 * horizon, so no parked schedule comes due unseen. O(records). Without
 * a refill timer (memory short) the horizon becomes unbounded: every
 * schedule goes on the wheel, none waits for a refill that never comes.
 */
static void
refill(tdet *d, int64_t utc_now, int64_t mono_now)
{
	uint64_t id;

	d->horizon = mono_now + HORIZON_US;
	if (ax_wheel_add_id(d->wheel, mono_now + HORIZON_US / 2, COOKIE_REFILL,
	                    &id) != AX_OK) {
		d->horizon = INT64_MAX;
		ax_logf(
		    AX_LOG_ERROR, COMP, NULL, NULL,
		    "no refill timer: every schedule goes on the wheel: %s",
		    ax_err_detail());
	}
	for (uint32_t i = 0; i < ax_schedtab_end(&d->tab); i++) {
		ax_schedtab_rec *r = ax_schedtab_at(&d->tab, i);
		if (r != NULL && r->next_utc != 0 && !(r->user & U_WHEEL) &&
		    FIRED(r) == 0)
			arm_sched(d, i, utc_now, mono_now);
	}
}

/*
 * The runtime buffers at most outbox_max (65,536) items for one
 * destination per handler call: a pass firing more schedules than that
 * at one instant (100,000 DAGs at midnight) lost the Due of the excess,
 * whose runs then never started. A pass fires at most fires_per_tick
 * timers, creates runs for schedules only until it holds fires_per_tick
 * runs (catch-ups make many per schedule), and fires none while
 * TD_OUTBOX_BUSY items still wait for the
 * dependency detector; the others go back on the wheel at their own
 * deadline and fire at the next pass, right after the runtime flushed.
 */
#define TD_OUTBOX_BUSY 16384
#define TD_BUSY_RETRY  (2 * AX_USEC_PER_MSEC)

static void
on_fire(void *arg, ax_wheel_timer *t)
{
	tdet *d = arg;

	if (t->cookie & COOKIE_SCHED) {
		uint32_t         idx = (uint32_t) t->cookie;
		uint32_t         gen = (uint32_t) (t->cookie >> 32) & GEN_MASK;
		ax_schedtab_rec *r   = ax_schedtab_at(&d->tab, idx);
		if (r == NULL || (r->gen & GEN_MASK) != gen)
			return; /* stale: re-armed or disarmed since */
		if (d->ndue + d->ntf >= d->fires_max) {
			(void) ax_wheel_add(d->wheel, t->deadline_us,
			                    t->cookie, t);
			return;
		}
		r->user &= (uint8_t) ~U_WHEEL;
		if (FIRED(r) == 0 &&
		    AX_GROW(d->due, d->capdue, d->ndue + 1) == AX_OK) {
			SET_FIRED(r, 1u);
			d->due[d->ndue++] = idx;
		}
		return;
	}
	if (t->cookie == COOKIE_REFILL) {
		d->refill = 1;
		return;
	}
	if (d->ndue + d->ntf >= d->fires_max) {
		(void) ax_wheel_add(d->wheel, t->deadline_us, t->cookie, t);
		return;
	}
	otimer *o = (otimer *) t;
	if (AX_GROW(d->tfired, d->captf, d->ntf + 1) == AX_OK)
		d->tfired[d->ntf++] = o;
}

/* --- the batch: one transaction, then Due ------------------------------
 */

/*
 * The outcome of the batch's triggers that came from a control_command
 * row, in the transaction that creates their runs: applied with the new
 * run's id, or rejected when the DAG had a run at that logical date. A
 * trigger whose row is no longer pending (forwarded twice) created no run
 * (its logical date is the first one's), so it changes nothing.
 */
static ax_err
finish_triggers(tdet *d, ax_store *st)
{
	ax_store_cmd_done *done = NULL;
	char(*txt)[160]         = NULL;
	size_t n = 0, cap = 0;
	ax_err rv = AX_OK;

	for (size_t i = 0; i < d->nrows; i++)
		if (d->fires[i].command_id > 0)
			cap++;
	if (cap == 0)
		return AX_OK;
	done = calloc(cap, sizeof(*done));
	txt  = calloc(cap, sizeof(*txt));
	if (done == NULL || txt == NULL) {
		rv = ax_err_set(AX_ENOMEM, "%s: out of memory", COMP);
		goto out;
	}
	for (size_t i = 0; i < d->nrows; i++) {
		ax_store_run_row *r = &d->rows[i];
		if (d->fires[i].command_id <= 0)
			continue;
		done[n].id = d->fires[i].command_id;
		if (r->run_id > 0) {
			snprintf(txt[n], sizeof(txt[n]),
			         "{\"run_id\":%lld,\"logical_date_us\":%lld}",
			         (long long) r->run_id,
			         (long long) r->logical_us);
			done[n].status      = AX_CMD_APPLIED;
			done[n].result_json = txt[n];
		} else {
			snprintf(txt[n], sizeof(txt[n]),
			         "DAG '%.60s' already has a run at logical "
			         "date %lld (UTC us); clear its instances to "
			         "run it again",
			         d->fires[i].dag, (long long) r->logical_us);
			done[n].status = AX_CMD_REJECTED;
			done[n].reason = txt[n];
		}
		n++;
	}
	rv = ax_store_commands_finish(st, done, n, NULL);
out:
	free(done);
	free(txt);
	return rv;
}

static ax_err
write_batch(ax_store *st, void *arg)
{
	tdet  *d = arg;
	ax_err rv;

	if ((rv = ax_store_sched_create_runs(st, d->rows, d->nrows)) != AX_OK)
		return rv;
	return finish_triggers(d, st);
}

static void
send_due(tdet *d, size_t i, const char *trace)
{
	ax_store_run_row *r   = &d->rows[i];
	fire             *f   = &d->fires[i];
	Ax__Command       cmd = AX__COMMAND__INIT;
	Ax__Due           due = AX__DUE__INIT;
	int64_t           now = ax_clock_utc_us();

	due.schedule_id       = r->schedule_id;
	due.dag               = f->dag;
	due.dag_version_id    = r->dag_version_id;
	due.dag_run_id        = r->run_id;
	due.logical_time_us   = r->logical_us;
	due.due_at_us         = r->due_us;
	due.manual            = f->manual;
	due.catchup           = f->catchup;
	due.interval_start_us = r->interval_start_us;
	due.interval_end_us   = r->interval_end_us;
	cmd.trace_id          = (char *) trace;
	cmd.issued_at_us      = now;
	cmd.body_case         = AX__COMMAND__BODY_DUE;
	cmd.due               = &due;
	if (ax_pipeline_send(d->self, AX_A_DEPENDENCY_DETECTOR, &cmd) != AX_OK)
		ax_logf(AX_LOG_ERROR, COMP, NULL,
		        &(ax_log_ids) { .dag = f->dag, .run = r->run_id },
		        "Due not sent: %s", ax_err_detail());
	if (!f->manual && !f->catchup &&
	    now - r->due_us > d->stats->max_late_us)
		d->stats->max_late_us = now - r->due_us;
}

static void
emit_created(tdet *d, size_t i)
{
	ax_store_run_row *r = &d->rows[i];
	char              payload[160];

	snprintf(payload, sizeof(payload),
	         "{\"run_type\":\"%s\",\"logical_date_us\":%lld,"
	         "\"due_at_us\":%lld}",
	         r->run_type, (long long) r->logical_us,
	         (long long) r->due_us);
	ax_pipeline_event(
	    d->self, "run.created", d->fires[i].catchup ? "CATCHUP" : NULL,
	    &(ax_log_ids) { .dag = d->fires[i].dag, .run = r->run_id },
	    payload, 0);
}

/*
 * Writes the tick's runs in one transaction and sends their Due. On a
 * database error the schedules roll back to their previous next fire and
 * are re-armed shortly (nothing was committed, so nothing repeats).
 */
static void
flush_batch(tdet *d)
{
	ax_err rv;
	char   trace[33];

	if (d->nrows == 0)
		return;
	rv = ax_store_tx_relaxed(d->store, write_batch, d);
	if (rv != AX_OK) {
		/* nothing was committed: the schedules go back to their
		 * previous next fire and refire in 0.5 s; manual runs are
		 * dropped (logged; a trigger recorded as a control_command
		 * stays pending and the control thread sends it again) */
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "%zu run(s) not created, retrying in 0.5 s: %s",
		        d->nrows, ax_err_detail());
		for (size_t i = 0; i < d->nrows; i++) {
			ax_schedtab_rec *s =
			    ax_schedtab_at(&d->tab, d->fires[i].s);
			if (d->fires[i].s == AX_SCHEDTAB_NONE || s == NULL ||
			    FIRED(s) == 2)
				continue;
			SET_FIRED(s, 2u);
			s->next_utc = d->fires[i].prev_utc;
			arm_at(d, d->fires[i].s,
			       ax_clock_mono_us() + RETRY_DB_US);
		}
		goto out;
	}
	/* Due first: latency; the events follow in the same flush */
	for (size_t i = 0; i < d->nrows; i++) {
		if (d->rows[i].run_id == 0)
			continue; /* existed: announced when it was created */
		char id[AX_UUID_LEN];
		ax_uuid_v4(id);
		for (int k = 0, j = 0; id[k] && j < 32; k++)
			if (id[k] != '-')
				trace[j++] = id[k];
		trace[32] = '\0';
		send_due(d, i, trace);
		if (d->fires[i].manual)
			d->stats->manual++;
		else
			d->stats->fires++;
	}
	for (size_t i = 0; i < d->nrows; i++)
		if (d->rows[i].run_id != 0)
			emit_created(d, i);
out:
	for (size_t i = 0; i < d->nrows; i++) {
		ax_dag_entry_release(d->fires[i].ref);
		free(d->fires[i].conf);
	}
	d->nrows = 0;
}

/* --- one-shot timers ----------------------------------------------------
 */

static void
fire_timer(tdet *d, otimer *o, int64_t utc_now)
{
	Ax__TimerSet *ts  = o->cmd->timer_set;
	Ax__Command   cmd = AX__COMMAND__INIT;

	cmd.trace_id     = o->cmd->trace_id;
	cmd.issued_at_us = utc_now;
	if (ts->kind == AX__TIMER_KIND__TIMER_RETRY) {
		Ax__InstanceReady  rd = AX__INSTANCE_READY__INIT;
		Ax__InstanceReady *r  = ts->ready;
		if (r == NULL) {
			rd.instance = ts->instance;
			rd.slots    = 1;
			r           = &rd;
		}
		cmd.body_case      = AX__COMMAND__BODY_INSTANCE_READY;
		cmd.instance_ready = r;
		ax_pipeline_send(d->self, AX_A_RESOURCE_DETECTOR, &cmd);
	} else {
		Ax__TimerFired tf = AX__TIMER_FIRED__INIT;
		tf.kind           = ts->kind;
		tf.key            = ts->key;
		tf.fire_at_us     = ts->fire_at_us;
		tf.fired_at_us    = utc_now;
		tf.instance       = ts->instance;
		tf.run_id         = ts->run_id;
		cmd.body_case     = AX__COMMAND__BODY_TIMER_FIRED;
		cmd.timer_fired   = &tf;
		if (ts->notify != NULL && ts->notify[0] != '\0')
			ax_pipeline_send(d->self, ts->notify, &cmd);
	}
	d->stats->timers_fired++;
	ax_strmap_del(d->timers, o->key);
	otimer_free(o);
}

static void
timer_key(char *buf, size_t len, int kind, const char *key)
{
	snprintf(buf, len, "%d/%s", kind, key ? key : "");
}

/* Takes ownership of cmd (a TimerSet). */
static void
timer_set(tdet *d, Ax__Command *cmd, int64_t utc_now, int64_t mono_now)
{
	Ax__TimerSet *ts = cmd->timer_set;
	char          key[512];
	otimer       *o;

	timer_key(key, sizeof(key), ts->kind, ts->key);
	if ((o = ax_strmap_get(d->timers, key)) != NULL) {
		ax_wheel_cancel(d->wheel, &o->t);
		ax__command__free_unpacked(o->cmd, NULL);
	} else {
		if ((o = calloc(1, sizeof(*o))) == NULL ||
		    (o->key = strdup(key)) == NULL ||
		    ax_strmap_put(d->timers, key, o) != AX_OK) {
			if (o != NULL)
				free(o->key);
			free(o);
			ax__command__free_unpacked(cmd, NULL);
			ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
			        "timer %s dropped: out of memory", key);
			return;
		}
	}
	o->cmd      = cmd;
	o->fire_utc = ts->fire_at_us;
	ax_wheel_add(d->wheel, mono_of(ts->fire_at_us, utc_now, mono_now),
	             COOKIE_TIMER, &o->t);
}

static void
timer_cancel(tdet *d, const Ax__TimerCancel *tc)
{
	char    key[512];
	otimer *o;

	timer_key(key, sizeof(key), tc->kind, tc->key);
	if ((o = ax_strmap_del(d->timers, key)) == NULL)
		return;
	ax_wheel_cancel(d->wheel, &o->t);
	otimer_free(o);
}

/* --- schedules ----------------------------------------------------------
 */

static void
unarm(tdet *d, uint32_t idx, const char *reason)
{
	ax_schedtab_rec *r = ax_schedtab_at(&d->tab, idx);

	ax_logf(AX_LOG_INFO, COMP, reason,
	        &(ax_log_ids) { .dag = ax_schedtab_name(&d->tab, idx) },
	        "schedule disarmed");
	handle_release(d, r->spec);
	ax_schedtab_del(&d->tab, idx); /* its timer, if any, goes stale */
	d->stats->armed    = ax_schedtab_count(&d->tab);
	d->stats->compiled = d->ncompiled;
}

/*
 * End of a loader pass over every DAG: the schedules it did not (re)arm
 * belong to DAGs that are gone. O(armed schedules), once per full pass.
 */
static void
sweep(tdet *d)
{
	size_t n = 0;

	for (uint32_t i = 0; i < ax_schedtab_end(&d->tab); i++) {
		ax_schedtab_rec *r = ax_schedtab_at(&d->tab, i);
		if (r == NULL || (r->user & U_MARK) == d->mark)
			continue;
		unarm(d, i, "DELETED");
		n++;
	}
	d->mark ^= U_MARK;
	d->stats->swept += n;
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "loader pass complete: %zu schedule(s) armed (%zu interned "
	        "spec(s), %zu compiled), %zu swept; %zu timer(s) on the "
	        "wheel, %.1f MB of schedule records",
	        ax_schedtab_count(&d->tab), ax_hmap_count(&d->specs),
	        d->ncompiled, n, ax_wheel_count(d->wheel),
	        (double) ax_schedtab_bytes(&d->tab) / (1024.0 * 1024.0));
}

static void
disarm(tdet *d, const Ax__ScheduleDisarmed *sd)
{
	uint32_t idx;

	if (sd->sweep) {
		sweep(d);
		return;
	}
	if (sd->dag != NULL &&
	    (idx = ax_schedtab_find(&d->tab, sd->dag)) != AX_SCHEDTAB_NONE)
		unarm(d, idx, sd->reason);
}

/* The dags.id of a ScheduleArmed from a sender that left it out. */
static int64_t
dag_id_of(tdet *d, const Ax__ScheduleArmed *sa)
{
	ax_dag_registry *reg = d->ctx->registry;
	ax_dag_entry    *e  = ax_dag_registry_version(reg, sa->dag_version_id);
	int64_t          id = 0;

	if (e == NULL &&
	    ax_dag_registry_load_version(reg, d->store, sa->dag_version_id) ==
	        AX_OK)
		e = ax_dag_registry_version(reg, sa->dag_version_id);
	if (e != NULL)
		id = e->dag_id;
	ax_dag_entry_release(e);
	return id;
}

/*
 * Arms (or re-arms: the newest message wins) the schedule of sa->dag from
 * the message alone: the spec is encoded or interned, the DAG is not
 * looked up.
 */
static void
arm(tdet *d, const Ax__ScheduleArmed *sa, int64_t utc_now, int64_t mono_now)
{
	int64_t          dag_id = sa->dag_id ? sa->dag_id : dag_id_of(d, sa);
	uint64_t         sp     = 0;
	ax_schedule     *sch;
	ax_schedtab_rec *s;
	uint32_t         idx;

	if (sa->dag == NULL || sa->dag[0] == '\0' || dag_id <= 0 ||
	    (sp = spec_get(d, sa)) == 0) {
		ax_logf(AX_LOG_ERROR, COMP, "BAD_SCHEDULE",
		        &(ax_log_ids) { .dag = sa->dag },
		        "cannot arm version %lld: %s",
		        (long long) sa->dag_version_id,
		        dag_id <= 0 ? "unknown DAG" : ax_err_detail());
		return;
	}
	if ((idx = ax_schedtab_find(&d->tab, sa->dag)) == AX_SCHEDTAB_NONE) {
		if (ax_schedtab_add(&d->tab, sa->dag, &idx) != AX_OK) {
			handle_release(d, sp);
			ax_logf(AX_LOG_ERROR, COMP, NULL,
			        &(ax_log_ids) { .dag = sa->dag },
			        "schedule not armed: %s", ax_err_detail());
			return;
		}
	} else {
		handle_release(d, ax_schedtab_at(&d->tab, idx)->spec);
	}
	s = ax_schedtab_at(&d->tab, idx);
	if (ax_schedtab_set_ids(&d->tab, idx, sa->schedule_id, dag_id,
	                        sa->dag_version_id) != AX_OK) {
		ax_schedtab_del(&d->tab, idx);
		handle_release(d, sp);
		ax_logf(AX_LOG_ERROR, COMP, NULL,
		        &(ax_log_ids) { .dag = sa->dag },
		        "schedule not armed: %s", ax_err_detail());
		return;
	}
	s->spec     = sp;
	s->user     = (uint8_t) ((s->user & ~U_MARK) | d->mark);
	s->next_utc = sa->next_fire_us;
	if (s->next_utc == 0 && (sch = handle_sched(d, sp)) != NULL &&
	    ax_schedule_next_fire(sch, utc_now, &s->next_utc) != AX_OK)
		s->next_utc = 0;
	/* a next fire in the past fires at the next tick: collect_sched
	 * creates the missed periods (catchup) or the latest */
	arm_sched(d, idx, utc_now, mono_now);
	d->stats->armed    = ax_schedtab_count(&d->tab);
	d->stats->compiled = d->ncompiled;
	ax_logf(AX_LOG_DEBUG, COMP, NULL, &(ax_log_ids) { .dag = sa->dag },
	        "armed version %lld, next fire %lld",
	        (long long) sa->dag_version_id, (long long) s->next_utc);
}

/*
 * The current version of a DAG for a trigger. A trigger may arrive before
 * the loader has published a DAG that was just stored (both follow the
 * same NOTIFY path, and a large DAG takes a while to load), so a DAG the
 * registry does not know is looked up in PostgreSQL once. NULL when the
 * DAG does not exist or cannot be loaded.
 */
static ax_dag_entry *
trigger_entry(tdet *d, const char *dag)
{
	ax_dag_entry *e    = ax_dag_registry_current(d->ctx->registry, dag);
	PGresult     *res  = NULL;
	const char   *p[1] = { dag };
	int64_t       vid  = 0;

	if (e != NULL || d->store == NULL)
		return e;
	if (ax_store_query(d->store,
	                   "SELECT active_version_id FROM dags WHERE name = $1"
	                   " AND active_version_id IS NOT NULL",
	                   1, p, &res) == AX_OK &&
	    PQntuples(res) == 1)
		vid = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (vid > 0 &&
	    ax_dag_registry_load_version(d->ctx->registry, d->store, vid) ==
	        AX_OK)
		e = ax_dag_registry_version(d->ctx->registry, vid);
	return e;
}

/* Rejects the command of a trigger whose DAG does not exist, or whose
 * params the DAG does not declare (reason: NULL for the first); a store
 * error leaves it pending: the control thread sends it again. */
static void
reject_trigger(tdet *d, const Ax__ControlOp *op, const char *reason)
{
	char              why[800];
	ax_store_cmd_done c = { .id     = op->command_id,
		                .status = AX_CMD_REJECTED };

	if (op->command_id <= 0 || d->store == NULL)
		return;
	if (reason != NULL)
		snprintf(why, sizeof(why), "%s", reason);
	else
		snprintf(why, sizeof(why),
		         "no DAG named '%.300s' with an active version "
		         "(deleted, or never loaded); submit it and trigger "
		         "again",
		         op->dag ? op->dag : "");
	c.reason = why;
	if (ax_store_commands_finish(d->store, &c, 1, NULL) != AX_OK)
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "command %lld not rejected (sent again later): %s",
		        (long long) op->command_id, ax_err_detail());
}

/* A manual run (control op trigger): due now. */
static void
trigger(tdet *d, const Ax__ControlOp *op, int64_t utc_now)
{
	ax_dag_entry *e;
	ax_period     p;

	for (size_t i = 0; op->command_id > 0 && i < d->nrows; i++)
		if (d->fires[i].command_id == op->command_id)
			return; /* forwarded twice into one batch */
	if (op->dag == NULL || (e = trigger_entry(d, op->dag)) == NULL) {
		ax_logf(AX_LOG_WARN, COMP, "UNKNOWN_DAG",
		        &(ax_log_ids) { .dag = op->dag },
		        "trigger of a DAG that is not loaded: dropped");
		reject_trigger(d, op, NULL);
		return;
	}
	/* the API checked the params; checked again here, so a command
	 * row written any other way cannot set undeclared params */
	if (op->params_json != NULL && op->params_json[0] != '\0') {
		char    why[700];
		json_t *pj = json_loads(op->params_json, 0, NULL);
		ax_err  rv = pj == NULL
		     ? ax_err_set(AX_EINVAL, "x")
		     : ax_dag_params_check(e->dag, pj, why, sizeof(why), NULL);
		if (pj == NULL)
			snprintf(why, sizeof(why), "params are not JSON");
		json_decref(pj);
		if (rv != AX_OK) {
			ax_logf(AX_LOG_WARN, COMP, "BAD_PARAMS",
			        &(ax_log_ids) { .dag = op->dag },
			        "trigger rejected: %s", why);
			reject_trigger(d, op, why);
			ax_dag_entry_release(e);
			return;
		}
	}
	p.logical_us = op->logical_date_us ? op->logical_date_us : utc_now;
	p.start_us   = p.logical_us;
	p.end_us     = p.logical_us;
	/* the entry's reference goes with the batch: the DAG name must
	 * outlive the flush */
	if (add_run(d, AX_SCHEDTAB_NONE, e, e->dag->name, e->dag_id,
	            e->version_id, &p, utc_now,
	            op->params_json && op->params_json[0] ? op->params_json
	                                                  : NULL,
	            1, 0) != 0) {
		ax_logf(AX_LOG_ERROR, COMP, NULL, NULL,
		        "trigger dropped: out of memory");
		ax_dag_entry_release(e);
		return;
	}
	d->fires[d->nrows - 1].command_id = op->command_id;
}

/* --- actor --------------------------------------------------------------
 */

/* Re-arms every schedule from its UTC instant (after a clock jump). */
static void
rearm_all(tdet *d, int64_t utc_now, int64_t mono_now)
{
	for (uint32_t i = 0; i < ax_schedtab_end(&d->tab); i++)
		if (ax_schedtab_at(&d->tab, i) != NULL)
			arm_sched(d, i, utc_now, mono_now);
}

static ax_err
td_tick(ax_actor *self, void *state, int64_t now_mono_us)
{
	tdet   *d       = state;
	int64_t utc_now = ax_clock_utc_us();
	(void) self;

	{
		int64_t off = utc_now - now_mono_us, jump = off - d->offset;
		if (jump > JUMP_US || jump < -JUMP_US) {
			d->offset = off;
			d->stats->clock_jumps++;
			ax_logf(AX_LOG_WARN, COMP, "CLOCK_JUMP", NULL,
			        "wall clock jumped by %+.3f s; re-arming %zu "
			        "schedule(s) from UTC",
			        (double) jump / AX_USEC_PER_SEC,
			        ax_schedtab_count(&d->tab));
			rearm_all(d, utc_now, now_mono_us);
		}
	}
	d->ndue = d->ntf = 0;
	if (ax_actor_outbox_pending(d->self, AX_A_DEPENDENCY_DETECTOR) >=
	    TD_OUTBOX_BUSY) {
		ax_actor_set_deadline(d->self, now_mono_us + TD_BUSY_RETRY);
		return AX_OK;
	}
	ax_wheel_advance(d->wheel, now_mono_us, on_fire, d, NULL);
	for (size_t i = 0; i < d->ndue; i++) {
		ax_schedtab_rec *s = ax_schedtab_at(&d->tab, d->due[i]);
		if (d->nrows >= d->fires_max) {
			/* enough runs for one pass (catch-ups make up to
			 * AX_TIME_DETECTOR_CATCHUP_MAX each): this schedule
			 * fires again at the next pass */
			SET_FIRED(s, 0u);
			arm_sched(d, d->due[i], utc_now, now_mono_us);
			continue;
		}
		collect_sched(d, d->due[i], utc_now);
	}
	d->stats->compiled = d->ncompiled;
	flush_batch(d);
	for (size_t i = 0; i < d->ndue; i++) {
		ax_schedtab_rec *s = ax_schedtab_at(&d->tab, d->due[i]);
		if (FIRED(s) == 1)
			arm_sched(d, d->due[i], utc_now, now_mono_us);
		SET_FIRED(s, 0u);
	}
	for (size_t i = 0; i < d->ntf; i++)
		fire_timer(d, d->tfired[i], utc_now);
	if (d->refill) {
		d->refill = 0;
		refill(d, utc_now, now_mono_us);
	}
	set_deadline(d);
	return AX_OK;
}

/* The handlers of the time detector's commands; each reads the clocks
 * it computes deadlines from. */
static ax_err
on_armed(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	arm(state, m->cmd->schedule_armed, ax_clock_utc_us(),
	    ax_clock_mono_us());
	return AX_OK;
}

static ax_err
on_disarmed(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	disarm(state, m->cmd->schedule_disarmed);
	return AX_OK;
}

static ax_err
on_timer_set(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	ax_pipeline_keep(m); /* owned by the timer */
	timer_set(state, m->cmd, ax_clock_utc_us(), ax_clock_mono_us());
	return AX_OK;
}

static ax_err
on_timer_cancel(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	timer_cancel(state, m->cmd->timer_cancel);
	return AX_OK;
}

static ax_err
on_control(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	(void) self;
	if (strcmp(m->cmd->control->op, "trigger") == 0)
		trigger(state, m->cmd->control, ax_clock_utc_us());
	else
		ax_logf(AX_LOG_WARN, COMP, NULL, NULL,
		        "control op '%s' is not the time detector's: dropped",
		        m->cmd->control->op);
	return AX_OK;
}

static ax_err
td_batch_end(ax_actor *self, void *state)
{
	tdet *d = state;
	(void) self;
	flush_batch(d); /* manual runs */
	set_deadline(d);
	return AX_OK;
}

static void
td_fini(void *state)
{
	tdet        *d = state;
	ax_hmap_iter it;
	sspec       *p;

	if (d == NULL)
		return;
	d->stats->specs = count_specs(d);
	ax_logf(AX_LOG_INFO, COMP, NULL, NULL,
	        "stopped: %llu scheduled and %llu manual runs, %llu timers "
	        "fired, %llu clock jumps, worst Due lateness %.3f ms",
	        (unsigned long long) d->stats->fires,
	        (unsigned long long) d->stats->manual,
	        (unsigned long long) d->stats->timers_fired,
	        (unsigned long long) d->stats->clock_jumps,
	        (double) d->stats->max_late_us / 1000.0);
	for (uint32_t i = 0; i < ax_schedtab_end(&d->tab); i++) {
		ax_schedtab_rec *r = ax_schedtab_at(&d->tab, i);
		if (r != NULL)
			handle_release(d, r->spec);
	}
	ax_schedtab_fini(&d->tab);
	/* what is left: cache entries of spec codes */
	ax_hmap_iter_init(&it, &d->specs);
	while ((p = ax_hmap_iter_next(&it)) != NULL) {
		ax_schedule_free(p->sch);
		free(p);
	}
	ax_hmap_fini(&d->specs);
	ax_strmap_free(d->timers, otimer_free);
	ax_wheel_free(d->wheel);
	ax_store_close(d->store);
	ax_tz_cache_free(d->tzc);
	free(d->due);
	free(d->tfired);
	free(d->rows);
	free(d->fires);
}

static ax_err
td_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	tdet                   *d     = state;
	ax_time_detector_stats *stats = arg;
	ax_err                  rv;

	d->ctx = ctx;
	ax_schedtab_init(&d->tab);
	ax_hmap_init(&d->specs, &spec_ops);
	d->stats = stats ? stats : &d->own_stats;
	memset(d->stats, 0, sizeof(*d->stats));
	d->offset = ax_clock_utc_us() - ax_clock_mono_us();
	d->lead   = ax_config_duration_us(ctx->cfg, "scheduler.prepare_ahead");
	d->fires_max =
	    (size_t) ax_config_int(ctx->cfg, "scheduler.fires_per_tick");
	if (d->fires_max < 1)
		d->fires_max = 1;
	d->compiled_max =
	    (size_t) ax_config_int(ctx->cfg, "scheduler.compiled_schedules");
	if (d->compiled_max < 1)
		d->compiled_max = 1;
	if (d->lead < 0)
		d->lead = 0;
	if (d->lead > 60 * AX_USEC_PER_SEC) /* the queue holds 2 min at most */
		d->lead = 60 * AX_USEC_PER_SEC;
	if ((rv = ax_tz_cache_new(&d->tzc)) != AX_OK ||
	    (rv = ax_strmap_new(&d->timers)) != AX_OK ||
	    (rv = ax_wheel_new(ax_clock_mono_us(), &d->wheel)) != AX_OK ||
	    (rv = ax_store_open(ctx->dsn, &d->store)) != AX_OK)
		return rv;
	refill(d, ax_clock_utc_us(), ax_clock_mono_us());
	return AX_OK;
}

static ax_err
td_added(ax_actor *self, void *state)
{
	tdet *d = state;
	d->self = self;
	return AX_OK;
}

static const ax_pipeline_def td_def = {
	.name       = AX_A_TIME_DETECTOR,
	.state_size = sizeof(tdet),
	.init       = td_init,
	.added      = td_added,
	.fini       = td_fini,
	.tick       = td_tick,
	.batch_end  = td_batch_end,
	.on = {
		[AX__COMMAND__BODY_SCHEDULE_ARMED]    = on_armed,
		[AX__COMMAND__BODY_SCHEDULE_DISARMED] = on_disarmed,
		[AX__COMMAND__BODY_TIMER_SET]         = on_timer_set,
		[AX__COMMAND__BODY_TIMER_CANCEL]      = on_timer_cancel,
		[AX__COMMAND__BODY_CONTROL]           = on_control,
	},
};

ax_err
ax_time_detector_add_ex(ax_actor_system *sys, const ax_pipeline_ctx *ctx,
                        ax_time_detector_stats *stats)
{
	return ax_pipeline_add(sys, ctx, &td_def, stats, NULL);
}

ax_err
ax_time_detector_add(ax_actor_system *sys, const ax_pipeline_ctx *ctx)
{
	return ax_time_detector_add_ex(sys, ctx, NULL);
}
