/*
 * test_pipeline_def.c - unit tests of the actor definition table
 * (actors/pipeline.h, ax_pipeline_add): a table-defined test actor gets
 * the commands it has handlers for, one it has none for (a warning naming
 * it, no crash), malformed items (BAD_MESSAGE, no crash), an event and a
 * private item type; a handler that keeps its command (the command stays
 * valid after the handler returned and is freed once, by the actor: run
 * under ASan, a double free or a leak fails the test); batch hooks around
 * every drained batch; a wake item that runs a batch and nothing else;
 * handler errors counted by the runtime; the tick
 * period and the first tick at start; the inbox address from the
 * configuration; init and added failures freeing the state once.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ax_config.h"
#include "clock.h"
#include "log.h"
#include "pipeline.h"

#define KEEP_MAX 16

/* What the test sees of the actor; owned by the test, outlives it. */
typedef struct probe {
	_Atomic uint64_t armed;     /* ScheduleArmed handled */
	_Atomic uint64_t canceled;  /* TimerCancel handled (each fails) */
	_Atomic uint64_t kept;      /* TimerSet kept */
	_Atomic uint64_t events;    /* events handled */
	_Atomic uint64_t user;      /* AX_ITEM_USER items */
	_Atomic uint64_t dropped;   /* on_drop calls */
	_Atomic uint64_t begins;    /* batch_begin calls */
	_Atomic uint64_t ends;      /* batch_end calls */
	_Atomic uint64_t items;     /* n summed over batch_begin */
	_Atomic uint64_t ticks;     /* tick calls */
	_Atomic uint64_t checked;   /* kept commands still intact at end */
	_Atomic uint64_t freed;     /* kept commands freed by fini */
	_Atomic int      finis;     /* fini calls */
	_Atomic int      self_ok;   /* added saw a named actor */
	_Atomic int      wrong;     /* callbacks that saw what they must not */
	int              fail_init; /* init returns AX_EINVAL */
	int              fail_add;  /* added returns AX_EINVAL */
	char             last_dag[64]; /* dag of the last ScheduleArmed */
} probe;

/* The actor's state (allocated by the pipeline). */
typedef struct tstate {
	probe       *p;
	Ax__Command *keep[KEEP_MAX]; /* kept TimerSet commands (owned) */
	size_t       nkeep;
	int          inbatch; /* between batch_begin and batch_end */
} tstate;

static ax_err
t_init(void *state, const ax_pipeline_ctx *ctx, void *arg)
{
	tstate *t = state;
	(void) ctx;
	t->p = arg;
	if (t->p->fail_init)
		return ax_err_set(AX_EINVAL, "test: init refused");
	return AX_OK;
}

static ax_err
t_added(ax_actor *self, void *state)
{
	tstate *t = state;
	if (strcmp(ax_actor_name(self), "tdef") == 0 ||
	    strcmp(ax_actor_name(self), "tdef_tick") == 0)
		atomic_store(&t->p->self_ok, 1);
	if (t->p->fail_add)
		return ax_err_set(AX_EINVAL, "test: added refused");
	return AX_OK;
}

static void
t_fini(void *state)
{
	tstate *t = state;
	for (size_t i = 0; i < t->nkeep; i++) {
		ax__command__free_unpacked(t->keep[i], NULL);
		atomic_fetch_add(&t->p->freed, 1);
	}
	atomic_fetch_add(&t->p->finis, 1);
}

static void
t_begin(ax_actor *self, void *state, size_t n)
{
	tstate *t = state;
	(void) self;
	if (t->inbatch)
		atomic_fetch_add(&t->p->wrong, 1);
	t->inbatch = 1;
	atomic_fetch_add(&t->p->begins, 1);
	atomic_fetch_add(&t->p->items, n);
}

/* Reads every kept command: each must still be what it was when kept. */
static ax_err
t_end(ax_actor *self, void *state)
{
	tstate  *t  = state;
	uint64_t ok = 0;
	(void) self;
	if (!t->inbatch)
		atomic_fetch_add(&t->p->wrong, 1);
	t->inbatch = 0;
	for (size_t i = 0; i < t->nkeep; i++)
		ok += t->keep[i]->body_case == AX__COMMAND__BODY_TIMER_SET &&
		    strcmp(t->keep[i]->timer_set->key, "kept") == 0 &&
		    t->keep[i]->timer_set->fire_at_us == (int64_t) (1000 + i);
	atomic_store(&t->p->checked, ok);
	atomic_fetch_add(&t->p->ends, 1);
	return AX_OK;
}

static ax_err
t_armed(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	tstate *t = state;
	(void) self;
	if (!t->inbatch || m->ev != NULL ||
	    m->cmd->body_case != AX__COMMAND__BODY_SCHEDULE_ARMED)
		atomic_fetch_add(&t->p->wrong, 1);
	snprintf(t->p->last_dag, sizeof(t->p->last_dag), "%s",
	         m->cmd->schedule_armed->dag);
	atomic_fetch_add(&t->p->armed, 1);
	return AX_OK;
}

/* Keeps its command (the rule of ax_pipeline_keep). */
static ax_err
t_timer_set(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	tstate *t = state;
	(void) self;
	if (t->nkeep == KEEP_MAX)
		return ax_err_set(AX_ELIMIT, "test: keep is full");
	ax_pipeline_keep(m);
	t->keep[t->nkeep++] = m->cmd;
	atomic_fetch_add(&t->p->kept, 1);
	return AX_OK;
}

/* Fails: the runtime counts one error per batch, the batch goes on. */
static ax_err
t_cancel(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	tstate *t = state;
	(void) self;
	(void) m;
	atomic_fetch_add(&t->p->canceled, 1);
	return ax_err_set(AX_EINVAL, "test: cancel %s refused",
	                  m->cmd->timer_cancel->key);
}

static ax_err
t_event(ax_actor *self, void *state, ax_pipeline_msg *m)
{
	tstate *t = state;
	(void) self;
	if (m->cmd != NULL || strcmp(m->ev->type, "test.ping") != 0)
		atomic_fetch_add(&t->p->wrong, 1);
	atomic_fetch_add(&t->p->events, 1);
	return AX_OK;
}

static ax_err
t_item(ax_actor *self, void *state, const ax_actor_item *item)
{
	tstate *t = state;
	(void) self;
	if (item->type != AX_ITEM_USER + 7)
		atomic_fetch_add(&t->p->wrong, 1);
	atomic_fetch_add(&t->p->user, 1);
	return AX_OK;
}

static void
t_drop(ax_actor *self, void *state, const ax_actor_item *item)
{
	tstate *t = state;
	(void) self;
	(void) item;
	atomic_fetch_add(&t->p->dropped, 1);
}

static ax_err
t_tick(ax_actor *self, void *state, int64_t now)
{
	tstate *t = state;
	(void) self;
	(void) now;
	atomic_fetch_add(&t->p->ticks, 1);
	return AX_OK;
}

static const ax_pipeline_def tdef = {
	.name        = "tdef",
	.state_size  = sizeof(tstate),
	.init        = t_init,
	.added       = t_added,
	.fini        = t_fini,
	.tick        = t_tick,
	.batch_begin = t_begin,
	.batch_end   = t_end,
	.on_event    = t_event,
	.on_item     = t_item,
	.on_drop     = t_drop,
	.on = {
		[AX__COMMAND__BODY_SCHEDULE_ARMED] = t_armed,
		[AX__COMMAND__BODY_TIMER_SET]      = t_timer_set,
		[AX__COMMAND__BODY_TIMER_CANCEL]   = t_cancel,
	},
};

/* The same actor ticking every 20 ms from the start. */
static const ax_pipeline_def tdef_tick = {
	.name           = "tdef_tick",
	.state_size     = sizeof(tstate),
	.init           = t_init,
	.fini           = t_fini,
	.tick           = t_tick,
	.tick_period_us = 20 * AX_USEC_PER_MSEC,
};

/* Ticks once, right at the start, and never again. */
static const ax_pipeline_def tdef_start = {
	.name          = "tdef_start",
	.state_size    = sizeof(tstate),
	.init          = t_init,
	.fini          = t_fini,
	.tick          = t_tick,
	.tick_at_start = 1,
};

/* The test actor with a wake item type. */
#define T_WAKE (AX_ITEM_USER + 9)
static const ax_pipeline_def tdef_wake = {
	.name        = "tdef_wake",
	.state_size  = sizeof(tstate),
	.init        = t_init,
	.fini        = t_fini,
	.batch_begin = t_begin,
	.batch_end   = t_end,
	.wake_type   = T_WAKE,
	.on_item     = t_item,
	.on_drop     = t_drop,
};

/* ---------------------------------------------------------------------- */
/* helpers */

static ax_config      *cfg;
static ax_pipeline_ctx ctx;
static char            logpath[] = "/tmp/ax_pipeline_logXXXXXX";
static int             logfd     = -1;

static void
setup(void)
{
	cr_assert_eq(ax_config_load(NULL, &cfg), AX_OK);
	ctx.cfg = cfg;
	logfd   = mkstemp(logpath);
	cr_assert_geq(logfd, 0);
	ax_log_init(AX_LOG_INFO, logfd);
}

static void
teardown(void)
{
	ax_log_init(AX_LOG_INFO, 2);
	if (logfd >= 0) {
		close(logfd);
		unlink(logpath);
	}
	ax_config_free(cfg);
}

TestSuite(pipeline, .init = setup, .fini = teardown, .timeout = 30);

/* Everything logged so far (a static buffer). */
static const char *
logged(void)
{
	static char buf[65536];
	ssize_t     len        = pread(logfd, buf, sizeof(buf) - 1, 0);
	buf[len > 0 ? len : 0] = '\0';
	return buf;
}

static int
wait_u64(_Atomic uint64_t *v, uint64_t want, int ms)
{
	for (int i = 0; i < ms && atomic_load(v) < want; i++)
		ax_clock_sleep_us(1000);
	return atomic_load(v) >= want;
}

/* One packed ax.Command as an item (buf must hold it). */
static ax_actor_item
cmd_item(const Ax__Command *c, uint8_t *buf, size_t cap)
{
	size_t len = ax__command__get_packed_size(c);
	cr_assert_leq(len, cap);
	ax__command__pack(c, buf);
	return (ax_actor_item) { .type = AX_ITEM_COMMAND,
		                 .len  = (uint32_t) len,
		                 .data = buf };
}

static ax_err
send_armed(ax_actor_client *cl, const char *dag)
{
	Ax__Command       c = AX__COMMAND__INIT;
	Ax__ScheduleArmed a = AX__SCHEDULE_ARMED__INIT;
	uint8_t           buf[256];
	ax_actor_item     it;
	a.dag            = (char *) dag;
	c.body_case      = AX__COMMAND__BODY_SCHEDULE_ARMED;
	c.schedule_armed = &a;
	it               = cmd_item(&c, buf, sizeof(buf));
	return ax_actor_client_send(cl, "tdef", &it, 1, 0);
}

/* ---------------------------------------------------------------------- */
/* tests */

Test(pipeline, dispatches_by_kind_refuses_the_rest)
{
	ax_actor_system *s  = NULL;
	ax_actor_client *cl = NULL;
	probe            p  = { 0 };
	void            *st = NULL;
	ax_actor        *a;
	ax_actor_stats   stats;
	uint8_t          b1[256], b2[256], b3[256];
	const uint8_t    junk[] = { 0xff, 0xff, 0xff, 0xff, 0x0f };
	ax_actor_item    it[4];

	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef, &p, &st), AX_OK);
	cr_assert_not_null(st, "the state is handed out");
	cr_assert_eq(((tstate *) st)->p, &p, "init got arg");
	cr_assert_eq(atomic_load(&p.self_ok), 1, "added got the actor");
	a = ax_actor_system_find(s, "tdef");
	cr_assert_not_null(a);
	cr_assert_str_eq(ax_actor_url(a), "inproc://ax/tdef");
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "tester", &cl), AX_OK);

	/* handled */
	cr_assert_eq(send_armed(cl, "a.dag"), AX_OK);
	cr_assert(wait_u64(&p.armed, 1, 5000));
	cr_assert_str_eq(p.last_dag, "a.dag");

	/* no handler for RunPlan: warned with the actor's name, dropped */
	{
		Ax__Command c  = AX__COMMAND__INIT;
		Ax__RunPlan rp = AX__RUN_PLAN__INIT;
		c.body_case    = AX__COMMAND__BODY_RUN_PLAN;
		c.run_plan     = &rp;
		it[0]          = cmd_item(&c, b1, sizeof(b1));
	}
	/* a command that is not one, and an event that is not one */
	it[1] = (ax_actor_item) { .type = AX_ITEM_COMMAND,
		                  .len  = sizeof(junk),
		                  .data = junk };
	it[2] = (ax_actor_item) { .type = AX_ITEM_EVENT,
		                  .len  = sizeof(junk),
		                  .data = junk };
	/* an empty command (no body): no handler for case 0 */
	{
		Ax__Command c = AX__COMMAND__INIT;
		it[3]         = cmd_item(&c, b2, sizeof(b2));
	}
	cr_assert_eq(ax_actor_client_send(cl, "tdef", it, 4, 0), AX_OK);
	/* two malformed, two without a handler */
	cr_assert(wait_u64(&p.dropped, 4, 5000));

	/* an event, a private item, and the actor still works */
	{
		Ax__Event ev = AX__EVENT__INIT;
		size_t    len;
		ev.type = "test.ping";
		len     = ax__event__get_packed_size(&ev);
		cr_assert_leq(len, sizeof(b3));
		ax__event__pack(&ev, b3);
		it[0] = (ax_actor_item) { .type = AX_ITEM_EVENT,
			                  .len  = (uint32_t) len,
			                  .data = b3 };
	}
	it[1] = (ax_actor_item) { .type = AX_ITEM_USER + 7,
		                  .len  = 1,
		                  .data = "x" };
	cr_assert_eq(ax_actor_client_send(cl, "tdef", it, 2, 0), AX_OK);
	cr_assert_eq(send_armed(cl, "b.dag"), AX_OK);
	cr_assert(wait_u64(&p.armed, 2, 5000), "the actor died");
	cr_assert_eq(atomic_load(&p.events), 1);
	cr_assert_eq(atomic_load(&p.user), 1);
	cr_assert_eq(atomic_load(&p.dropped), 4);
	cr_assert_str_eq(p.last_dag, "b.dag");

	ax_actor_stats_get(a, &stats);
	cr_assert_eq(stats.errors, 0);
	cr_assert_eq(atomic_load(&p.begins), stats.batches);
	cr_assert_eq(atomic_load(&p.ends), stats.batches);
	cr_assert_eq(atomic_load(&p.items), stats.items_in);
	cr_assert_eq(atomic_load(&p.ticks), 0, "no deadline, no tick");
	cr_assert_eq(atomic_load(&p.wrong), 0);
	ax_actor_client_free(cl);
	ax_actor_system_free(s);
	cr_assert_eq(atomic_load(&p.finis), 1);

	const char *log = logged();
	cr_assert(strstr(log, "\"component\":\"tdef\""), "%s", log);
	cr_assert(strstr(log, "unexpected command 31 from tester: dropped"),
	          "%s", log);
	cr_assert(strstr(log, "unexpected command 0 from tester: dropped"),
	          "%s", log);
	cr_assert(strstr(log, "BAD_MESSAGE"), "%s", log);
	cr_assert(strstr(log, "not an ax.Command"), "%s", log);
	cr_assert(strstr(log, "not an ax.Event"), "%s", log);
}

Test(pipeline, a_kept_command_is_the_actors_until_it_frees_it)
{
	ax_actor_system *s  = NULL;
	ax_actor_client *cl = NULL;
	probe            p  = { 0 };
	ax_actor        *a;
	ax_actor_stats   stats;
	char             keys[8][16];

	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef, &p, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "tester", &cl), AX_OK);
	a = ax_actor_system_find(s, "tdef");
	/* one at a time: each later batch reads the ones kept before */
	for (int i = 0; i < 4; i++) {
		Ax__Command   c  = AX__COMMAND__INIT;
		Ax__TimerSet  ts = AX__TIMER_SET__INIT;
		uint8_t       buf[256];
		ax_actor_item it;
		ts.key        = "kept";
		ts.fire_at_us = 1000 + i;
		c.body_case   = AX__COMMAND__BODY_TIMER_SET;
		c.timer_set   = &ts;
		it            = cmd_item(&c, buf, sizeof(buf));
		/* the bytes the handler unpacked from are gone at once */
		cr_assert_eq(ax_actor_client_send(cl, "tdef", &it, 1, 0),
		             AX_OK);
		memset(buf, 0, sizeof(buf));
		cr_assert(wait_u64(&p.kept, (uint64_t) i + 1, 5000));
	}
	cr_assert(wait_u64(&p.ends, 4, 5000));
	cr_assert_eq(atomic_load(&p.checked), 4, "a kept command changed");
	/* errors: two failing handlers in one batch, one error counted, and
	 * the command after them still handled */
	{
		ax_actor_item it[3];
		uint8_t       b[3][256];
		for (int i = 0; i < 2; i++) {
			Ax__Command     c  = AX__COMMAND__INIT;
			Ax__TimerCancel tc = AX__TIMER_CANCEL__INIT;
			snprintf(keys[i], sizeof(keys[i]), "k%d", i);
			tc.key         = keys[i];
			c.body_case    = AX__COMMAND__BODY_TIMER_CANCEL;
			c.timer_cancel = &tc;
			it[i]          = cmd_item(&c, b[i], sizeof(b[i]));
		}
		Ax__Command       c  = AX__COMMAND__INIT;
		Ax__ScheduleArmed sa = AX__SCHEDULE_ARMED__INIT;
		sa.dag               = "after.errors";
		c.body_case          = AX__COMMAND__BODY_SCHEDULE_ARMED;
		c.schedule_armed     = &sa;
		it[2]                = cmd_item(&c, b[2], sizeof(b[2]));
		cr_assert_eq(ax_actor_client_send(cl, "tdef", it, 3, 0),
		             AX_OK);
	}
	cr_assert(wait_u64(&p.armed, 1, 5000));
	cr_assert_eq(atomic_load(&p.canceled), 2);
	ax_actor_stats_get(a, &stats);
	cr_assert_eq(stats.errors, 1, "one failed batch, one error");
	cr_assert_eq(atomic_load(&p.wrong), 0);
	ax_actor_client_free(cl);
	ax_actor_system_free(s);
	cr_assert_eq(atomic_load(&p.freed), 4, "kept commands freed by fini");
	cr_assert_eq(atomic_load(&p.finis), 1);
	const char *log = logged();
	cr_assert(strstr(log, "ACTOR_HANDLER_ERROR"), "%s", log);
	cr_assert(strstr(log, "test: cancel k0 refused"), "%s", log);
}

Test(pipeline, tick_period_and_tick_at_start)
{
	ax_actor_system *s  = NULL;
	probe            pp = { 0 }, ps = { 0 };

	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef_tick, &pp, NULL), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef_start, &ps, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert(wait_u64(&ps.ticks, 1, 5000), "no tick at start");
	cr_assert(wait_u64(&pp.ticks, 3, 5000), "the period does not tick");
	ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	cr_assert_eq(atomic_load(&ps.ticks), 1, "ticked again unasked");
	ax_actor_system_free(s);
	cr_assert_eq(atomic_load(&pp.finis), 1);
	cr_assert_eq(atomic_load(&ps.finis), 1);
}

Test(pipeline, address_from_the_configuration)
{
	ax_actor_system *s = NULL;
	probe            p = { 0 };
	ax_actor        *a;

	cr_assert_eq(
	    ax_config_set(cfg, "actors.tdef", "inproc://ax/elsewhere"), AX_OK);
	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef, &p, NULL), AX_OK);
	a = ax_actor_system_find(s, "tdef");
	cr_assert_str_eq(ax_actor_url(a), "inproc://ax/elsewhere");
	ax_actor_system_free(s);
}

Test(pipeline, failures_free_the_state_once)
{
	ax_actor_system *s = NULL;
	probe p1 = { .fail_init = 1 }, p2 = { .fail_add = 1 }, p3 = { 0 },
	      p4 = { 0 };
	void *st = &p1;

	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	/* init fails: fini once, nothing added */
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef, &p1, &st), AX_EINVAL);
	cr_assert_null(st);
	cr_assert_eq(atomic_load(&p1.finis), 1);
	cr_assert_null(ax_actor_system_find(s, "tdef"));
	/* added fails: the actor is the system's, freed with it */
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef, &p2, &st), AX_EINVAL);
	cr_assert_null(st);
	cr_assert_eq(atomic_load(&p2.finis), 0);
	/* the name is taken now: the system frees the second state */
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef, &p3, NULL), AX_EEXIST);
	cr_assert_eq(atomic_load(&p3.finis), 1);
	/* no name */
	ax_pipeline_def noname = { .state_size = 8 };
	cr_assert_eq(ax_pipeline_add(s, &ctx, &noname, &p4, NULL), AX_EINVAL);
	cr_assert_null(ax_actor_system_find(s, "tdef_start"));
	ax_actor_system_free(s);
	cr_assert_eq(atomic_load(&p2.finis), 1);
	cr_assert_eq(atomic_load(&p3.finis), 1);
}

Test(pipeline, an_actor_without_handlers_refuses_everything)
{
	ax_actor_system *s  = NULL;
	ax_actor_client *cl = NULL;
	probe            p  = { 0 };
	ax_actor        *a;
	ax_actor_stats   st;
	uint8_t          b1[256], b2[256];
	ax_actor_item    it[3];

	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef_start, &p, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "tester", &cl), AX_OK);
	a = ax_actor_system_find(s, "tdef_start");
	{
		Ax__Command       c  = AX__COMMAND__INIT;
		Ax__ScheduleArmed sa = AX__SCHEDULE_ARMED__INIT;
		sa.dag               = "x";
		c.body_case          = AX__COMMAND__BODY_SCHEDULE_ARMED;
		c.schedule_armed     = &sa;
		it[0]                = cmd_item(&c, b1, sizeof(b1));
	}
	{
		Ax__Event ev = AX__EVENT__INIT;
		size_t    len;
		ev.type = "test.ping";
		len     = ax__event__get_packed_size(&ev);
		ax__event__pack(&ev, b2);
		it[1] = (ax_actor_item) { .type = AX_ITEM_EVENT,
			                  .len  = (uint32_t) len,
			                  .data = b2 };
	}
	it[2] =
	    (ax_actor_item) { .type = AX_ITEM_USER, .len = 1, .data = "x" };
	cr_assert_eq(ax_actor_client_send(cl, "tdef_start", it, 3, 0), AX_OK);
	for (int i = 0; i < 5000; i++) {
		ax_actor_stats_get(a, &st);
		if (st.batches >= 1)
			break;
		ax_clock_sleep_us(1000);
	}
	cr_assert_eq(st.items_in, 3);
	ax_actor_client_free(cl);
	ax_actor_system_free(s);
	const char *log = logged();
	cr_assert(strstr(log, "unexpected command 10 from tester: dropped"),
	          "%s", log);
	cr_assert(strstr(log, "unexpected item of type 2 from tester"), "%s",
	          log);
	cr_assert(strstr(log, "unexpected item of type 1000 from tester"),
	          "%s", log);
	cr_assert(strstr(log, "\"component\":\"tdef_start\""), "%s", log);
}

Test(pipeline, a_wake_item_runs_a_batch_and_reaches_no_handler)
{
	ax_actor_system *s  = NULL;
	ax_actor_client *cl = NULL;
	probe            p  = { 0 };
	ax_actor        *a;
	ax_actor_stats   st;
	ax_actor_item    it[2];

	cr_assert_eq(ax_actor_system_new(&s), AX_OK);
	cr_assert_eq(ax_pipeline_add(s, &ctx, &tdef_wake, &p, NULL), AX_OK);
	cr_assert_eq(ax_actor_system_start(s), AX_OK);
	cr_assert_eq(ax_actor_client_new(s, "tester", &cl), AX_OK);
	a     = ax_actor_system_find(s, "tdef_wake");
	it[0] = (ax_actor_item) { .type = T_WAKE, .len = 0, .data = "" };
	cr_assert_eq(ax_actor_client_send(cl, "tdef_wake", it, 1, 0), AX_OK);
	cr_assert(wait_u64(&p.ends, 1, 5000), "a wake item ran no batch");
	cr_assert_eq(atomic_load(&p.begins), 1);
	/* a wake among other private items: only those reach on_item */
	it[1] = (ax_actor_item) { .type = AX_ITEM_USER + 7,
		                  .len  = 1,
		                  .data = "x" };
	cr_assert_eq(ax_actor_client_send(cl, "tdef_wake", it, 2, 0), AX_OK);
	cr_assert(wait_u64(&p.user, 1, 5000));
	cr_assert(wait_u64(&p.ends, 2, 5000));
	ax_actor_stats_get(a, &st);
	cr_assert_eq(st.errors, 0);
	cr_assert_eq(atomic_load(&p.user), 1, "a wake item reached on_item");
	cr_assert_eq(atomic_load(&p.dropped), 0, "a wake item was dropped");
	cr_assert_eq(atomic_load(&p.wrong), 0);
	ax_actor_client_free(cl);
	ax_actor_system_free(s);
	cr_assert_eq(atomic_load(&p.finis), 1);
	const char *log = logged();
	cr_assert_null(strstr(log, "unexpected item of type 1009"), "%s", log);
}
