/*
 * history.h - AX's history kept as long as history.retention_days says:
 * retention, archive to files and restore (schema and SQL functions in
 * engine/migrations/0015_event_log_partitions.sql).
 *
 * Role: the history is kept in tables partitioned by UTC month, so a
 * month leaves whole: event_log by event time (event_log_pYYYYMM), and
 * the instance history by its run's logical month
 * (task_instances_history_pYYYYMM, attempts_history_pYYYYMM), each with a
 * default partition. The pipeline writes and reads the plain hot tables
 * task_instances and attempts, which keep its inserts, foreign key
 * checks and look-ups by id at one index probe; ax_history_move takes the
 * instances and attempts of runs that finished history.hot_hours ago out
 * of them into the history tables, a run at a time (axd does it while it
 * leads; readers of old runs read the views task_instances_all and
 * attempts_all). dag_runs stays one table; a run whose rows moved keeps
 * its row (history_at set) until its month leaves. `axctl db maintain`
 * (cron, daily) moves, creates the event months ahead, detaches the
 * months older than the retention into the schema ax_archive (with the
 * runs of each instance month, ax_archive.dag_runs_pYYYYMM) and deletes
 * older finished runs still hot; `axctl db archive` writes old hot runs
 * and the detached months to files under DIR and removes them from the
 * database; `axctl db restore` copies files back.
 *
 * Files (gzip-compressed CSV, a header line of column names, timestamps
 * ISO with UTC offset):
 *   <table>_pYYYYMM.csv.gz                     one month of event_log,
 *                                              task_instances_history,
 *                                              attempts_history, or the
 *                                              dag_runs of that month's
 *                                              instance history
 *   <table>_runs_<first>-<last>.csv.gz         one batch of hot runs (ids
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
 * - A run's instances and attempts are all hot or all in history (a move
 *   is one transaction per batch of whole runs); unfinished instances and
 *   open attempts are always hot. A run made QUEUED or RUNNING again
 *   brings its rows back first (a trigger on dag_runs), and
 *   ax_history_restore_run (SQL) does it for a writer that changes an
 *   instance of a finished run.
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

/* Runs per move transaction (each brings its instances and attempts). */
#define AX_HISTORY_MOVE_BATCH 500

/*
 * What a maintain or archive step did, for the caller to print: `what` is
 * "created" (partitions ahead; rows = how many), "moved" (rows = runs
 * whose instances and attempts moved to history), "detached" (name = a
 * month's partition, or the runs set aside with an instance month:
 * dag_runs_pYYYYMM), "deleted" (rows = runs deleted by
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
 * Creates the month partitions of event_log and of the instance history
 * from the current month through `ahead` (0..120) months later; *created (may
 * be NULL) receives how many. Cheap when they exist (a catalog look-up per
 * month): axd runs it hourly.
 */
ax_err ax_history_ensure(ax_store *s, int ahead, int *created);

/*
 * The instant before which finished runs move to history under
 * history.hot_hours = hours (0..8760) counted back from now_us: AX_EINVAL
 * naming history.hot_hours otherwise.
 */
ax_err ax_history_hot_cutoff(int hours, int64_t now_us, int64_t *before_us);

/*
 * Moves the instances and attempts of finished runs (no unfinished
 * instance, no open attempt) that ended before ended_before_us and whose
 * logical date is at or after logical_from_us into the history tables,
 * AX_HISTORY_MOVE_BATCH runs per transaction, the oldest first; a run
 * another transaction holds is skipped (the next call takes it). Stops
 * when none is left or, with budget_us > 0, after the batch that passes
 * budget_us of elapsed time: *more (may be NULL) is then 1. *moved gets
 * how many runs moved.
 */
ax_err ax_history_move(ax_store *s, int64_t ended_before_us,
                       int64_t logical_from_us, int64_t budget_us,
                       int64_t *moved, int *more);

/*
 * For a writer about to change instance instance_id of a finished run:
 * when its run's rows are in history, brings them back to the hot tables
 * (ids and all; the run locked meanwhile, so a move cannot take it) and
 * sets *restored (may be NULL) to 1; 0 when they are hot or the instance
 * does not exist. Call inside the writer's transaction, before its
 * statements; without one it commits on its own, and a move may take
 * the run again later (a run made active again comes back by itself).
 */
ax_err ax_history_restore_instance_run(ax_store *s, int64_t instance_id,
                                       int *restored);

/*
 * Retention: ax_history_ensure(ahead); moves the runs that finished
 * hot_hours ago (ax_history_move, with no budget); detaches into
 * ax_archive the months that ended before now - retention_days (an
 * instance month with its runs); deletes the finished runs still hot
 * (with their instances and attempts) whose logical date is before that,
 * AX_HISTORY_BATCH runs per transaction. Unfinished runs stay and are
 * reported ("kept"). AX_OK even when some were kept.
 */
ax_err ax_history_maintain(ax_store *s, int retention_days, int hot_hours,
                           int ahead, ax_history_fn fn, void *arg);

/*
 * Archive to dir (an existing writable directory): the finished hot runs
 * with a logical date before before_us, batch by batch (three files a
 * batch, then the batch is deleted), then the months that end at or
 * before before_us (detached, written, dropped: event_log's, and the
 * instance history's with its runs) and any month already detached. AX_EINVAL
 * for a bad dir; AX_EEXIST when a file of that name exists (nothing of that
 * batch or month leaves); AX_EIO for a write failure; AX_ERETRY when a batch
 * met a concurrent change of one of its rows (nothing of it left: run it
 * again). What was archived before a failure stays archived.
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
 * 1 task_instances(_history), 2 attempts(_history), 3 event_log; -1 when
 * the name is not an archive file name.
 */
int ax_history_restore_rank(const char *path);

#endif /* AX_HISTORY_H */
