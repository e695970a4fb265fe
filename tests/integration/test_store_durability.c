/*
 * test_store_durability.c - what a crash of PostgreSQL keeps of the
 * store's commits (store.h, ax_store_tx_relaxed): a relaxed commit alone
 * may be lost; a relaxed commit followed by a durable one, on another
 * connection, never is, because WAL is flushed in order. The pipeline
 * relies on that second rule: the instance generator's admission and the
 * result handler's results are relaxed, and the queue's dispatch record,
 * which hands the attempt to a worker, is durable; a result no dispatch
 * record followed is taken to disk by a flush of the queue's
 * (ax_store_flush_commits) before its report is acknowledged
 * (docs/pipeline.md, sections 4 and 7).
 *
 * Each test kills the server the way a crash does (ax_pg_embed_crash:
 * SIGKILL to every process) and starts it again (crash recovery). The
 * harness's clusters commit without waiting for the flush and have fsync
 * off; here synchronous_commit is on again, so a durable commit writes its
 * WAL to the kernel (which a killed server does not lose), and the WAL
 * writer runs every 10 s, so a relaxed commit stays in the server's memory
 * until something flushes it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_harness.h"
#include "store.h"

static ax_test_pg *pg;
static ax_store   *st;

static void
sql(const char *q)
{
	cr_assert_eq(ax_store_exec(st, q, 0, NULL), AX_OK, "%s: %s", q,
	             ax_err_detail());
}

static void
setup(void)
{
	ax_log_init(AX_LOG_ERROR, 2);
	cr_assert_eq(ax_test_pg_start(&pg), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &st), AX_OK, "%s",
	             ax_err_detail());
	sql("CREATE TABLE marks (v text)");
	sql("ALTER SYSTEM SET synchronous_commit = on");
	sql("ALTER SYSTEM SET wal_writer_delay = '10s'");
	sql("SELECT pg_reload_conf()");
	/* the WAL writer takes the new delay when its current sleep (200
	 * ms) ends; a commit then wakes it if it hibernates, so that it is
	 * awake and not woken again by the test's own commit */
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC);
	sql("INSERT INTO marks VALUES ('warm')");
	ax_clock_sleep_us(300 * AX_USEC_PER_MSEC);
}

static void
teardown(void)
{
	ax_store_close(st);
	ax_test_pg_stop(pg);
}

TestSuite(store_durability, .init = setup, .fini = teardown, .timeout = 120);

static ax_err
insert_mark(ax_store *s, void *arg)
{
	const char *p[1] = { arg };
	return ax_store_exec(s, "INSERT INTO marks VALUES ($1)", 1, p);
}

/* A commit of its own store (connection). */
static void
commit_mark(const char *v, int relaxed)
{
	ax_store *s = NULL;
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &s), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(relaxed ? ax_store_tx_relaxed(s, insert_mark, (void *) v)
	                     : ax_store_tx(s, insert_mark, (void *) v),
	             AX_OK, "%s", ax_err_detail());
	ax_store_close(s);
}

/* Kills the server and starts it again (crash recovery). */
static void
crash_and_recover(void)
{
	ax_pg_embed *e = ax_test_pg_embed(pg);
	cr_assert_eq(ax_pg_embed_crash(e), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_pg_embed_up(e), AX_OK, "%s", ax_err_detail());
}

static int64_t
marks(const char *v)
{
	const char *p[1] = { v };
	int64_t     n    = -1;
	cr_assert_eq(
	    ax_store_query_int64(st, "SELECT count(*) FROM marks WHERE v = $1",
	                         1, p, &n),
	    AX_OK, "%s", ax_err_detail());
	return n;
}

/* The crash is real: a relaxed commit that nothing flushed is gone after
 * it (without this, the next test could not fail). */
Test(store_durability, a_relaxed_commit_alone_is_lost_in_a_crash)
{
	commit_mark("relaxed", 1);
	cr_assert_eq(marks("relaxed"), 1, "committed before the crash");
	crash_and_recover();
	cr_assert_eq(marks("relaxed"), 0,
	             "the relaxed commit survived: the crash flushed it");
	cr_assert_eq(marks("warm"), 1, "a durable commit before it was lost");
}

/* The admission's rule: a durable commit on another connection after a
 * relaxed one takes the relaxed one to disk with it. */
Test(store_durability, a_durable_commit_keeps_the_relaxed_ones_before_it)
{
	commit_mark("admission", 1);
	commit_mark("dispatch", 0);
	crash_and_recover();
	cr_assert_eq(marks("dispatch"), 1, "the durable commit was lost");
	cr_assert_eq(marks("admission"), 1,
	             "the relaxed commit before the durable one was lost");
}

/* The result handler's rule: its commits are relaxed, and the queue
 * acknowledges the workers' reports once its own durable commit or a
 * flush (ax_store_flush_commits, on another connection) has followed
 * them. The flush writes nothing of its own. */
Test(store_durability, a_flush_keeps_the_relaxed_commits_before_it)
{
	ax_store *q = NULL;
	commit_mark("result", 1);
	cr_assert_eq(ax_store_open(ax_test_pg_dsn(pg), &q), AX_OK, "%s",
	             ax_err_detail());
	cr_assert_eq(ax_store_flush_commits(q), AX_OK, "%s", ax_err_detail());
	ax_store_close(q);
	commit_mark("after", 1);
	crash_and_recover();
	cr_assert_eq(marks("result"), 1,
	             "the relaxed commit before the flush was lost");
	cr_assert_eq(marks("after"), 0,
	             "the relaxed commit after the flush survived: the "
	             "crash is not real");
}
