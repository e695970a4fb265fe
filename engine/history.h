/*
 * history.h - AX's history kept as long as history.retention_days says:
 * retention, archive to files and restore (schema and SQL functions in
 * engine/migrations/0015_event_log_partitions.sql).
 *
 * Role: event_log, the largest history table, is partitioned by event
 * time, one partition per UTC month named event_log_pYYYYMM plus a
 * default partition; a month leaves whole. The instance history
 * (dag_runs, task_instances, attempts) stays in plain tables, which keep
 * the pipeline's inserts, foreign key checks and look-ups by id at one
 * index probe; it leaves by run, in batches: a run goes with its
 * instances and their attempts. `axctl db maintain` (cron, daily) creates
 * the months ahead, detaches event months older than the retention into
 * the schema ax_archive and deletes older finished runs; `axctl db
 * archive` writes old runs and event months to files under DIR and
 * removes them from the database; `axctl db restore` copies files back.
 *
 * Files (gzip-compressed CSV, a header line of column names, timestamps
 * ISO with UTC offset):
 *   event_log_pYYYYMM.csv.gz                  one month of events
 *   <table>_runs_<first>-<last>.csv.gz         one batch of runs (ids
 *                                              first..last) for table
 *                                              dag_runs, task_instances
 *                                              and attempts: three files
 *
 * Invariants:
 * - A row leaves the database only after its file is written, flushed
 *   (fsync of the file and of its directory) and linked into place; an
 *   existing file is never overwritten. A crash at any point leaves every
 *   row in the database, in a complete file, or both.
 * - A run leaves only when it and every instance and attempt of it have
 *   finished; unfinished ones stay and are counted ("kept").
 * - A batch of runs leaves in one REPEATABLE READ transaction: the rows
 *   in its files are exactly the rows deleted (a concurrent change of one
 *   of them fails the batch, which then leaves nothing).
 *
 * Workload: a few calls a day; archive and restore stream rows through
 * COPY without holding them in memory; a batch holds at most
 * AX_HISTORY_BATCH runs' locks. Callers own the ax_store and use it from
 * one thread.
 */
#ifndef AX_HISTORY_H
#define AX_HISTORY_H

#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* Months of event partitions kept ahead of the current one by default. */
#define AX_HISTORY_AHEAD_DEFAULT 3

/* Runs per retention / archive transaction. */
#define AX_HISTORY_BATCH 5000

/*
 * What a maintain or archive step did, for the caller to print: `what` is
 * "created" (partitions ahead; rows = how many), "detached" (name = an
 * event month's partition), "deleted" (rows = runs deleted by
 * retention), "kept" (rows = unfinished runs older than the limit that
 * stay), or "archived" (name and path of a file, rows its rows). Called
 * on the caller's thread, during the call.
 */
typedef void (*ax_history_fn)(void *arg, const char *what, const char *name,
                              const char *path, int64_t rows);

/*
 * The instant before which history leaves under a retention of `days`
 * (1..36500) counted back from now_us: AX_EINVAL naming
 * history.retention_days otherwise.
 */
ax_err ax_history_cutoff(int days, int64_t now_us, int64_t *before_us);

/*
 * Creates the event month partitions from the current month through
 * `ahead` (0..120) months later; *created (may be NULL) receives how
 * many. Cheap when they exist (a catalog look-up per month): axd runs it
 * hourly.
 */
ax_err ax_history_ensure(ax_store *s, int ahead, int *created);

/*
 * Retention: ax_history_ensure(ahead), then detaches into ax_archive the
 * event months that ended before now - retention_days, and deletes the
 * finished runs (with their instances and attempts) whose logical date is
 * before that, AX_HISTORY_BATCH runs per transaction. Unfinished runs
 * stay and are reported ("kept"). AX_OK even when some were kept.
 */
ax_err ax_history_maintain(ax_store *s, int retention_days, int ahead,
                           ax_history_fn fn, void *arg);

/*
 * Archive to dir (an existing writable directory): the finished runs with
 * a logical date before before_us, batch by batch (three files a batch,
 * then the batch is deleted), then the event months that end at or
 * before before_us (detached, written, dropped) and any month already
 * detached. AX_EINVAL for a bad dir; AX_EEXIST when a file of that name
 * exists (nothing of that batch or month leaves); AX_EIO for a write
 * failure; AX_ERETRY when a batch met a concurrent change of one of its
 * rows (nothing of it left: run it again). What was archived before a
 * failure stays archived.
 */
ax_err ax_history_archive(ax_store *s, int64_t before_us, const char *dir,
                          ax_history_fn fn, void *arg);

/*
 * Copies one archive file back, in one transaction: all rows or none.
 * *rows (may be NULL) receives how many. AX_EINVAL for a file name that
 * is not an archive file name or a bad header, AX_EIO when it cannot be
 * read or is not gzip or is cut short, AX_EEXIST when a row is already
 * there, AX_ENOENT when a row references a run or instance that is not
 * there (restore dag_runs, then task_instances, then attempts: see
 * ax_history_restore_rank).
 */
ax_err ax_history_restore(ax_store *s, const char *path, int64_t *rows);

/*
 * Restore order of an archive file by its table: 0 dag_runs,
 * 1 task_instances, 2 attempts, 3 event_log; -1 when the name is not an
 * archive file name.
 */
int ax_history_restore_rank(const char *path);

#endif /* AX_HISTORY_H */
