/*
 * history.h - the month partitions of AX's history: retention, archive to
 * files and restore (schema and SQL functions in
 * engine/migrations/0014_history_partitions.sql).
 *
 * Role: dag_runs, task_instances and attempts are partitioned by logical
 * time, event_log by event time, one partition per UTC month named
 * <table>_pYYYYMM plus a default partition. `axctl db maintain` (run by
 * cron) creates the months ahead and detaches the months older than
 * history.retention_days into the schema ax_archive; `axctl db archive`
 * writes every detached month (and those it detaches itself) to a file
 * DIR/<table>_pYYYYMM.csv.gz and drops it; `axctl db restore` copies a
 * file back into its month.
 *
 * Invariants:
 * - A row leaves the database only after its file is written, flushed
 *   (fsync of the file and of its directory) and renamed into place; an
 *   existing file is never overwritten. A crash at any point leaves every
 *   row either in the database (attached, or detached in ax_archive and
 *   archived by the next run) or in a complete file, possibly both.
 * - A month holding an unfinished run, instance or attempt is never
 *   detached: archive refuses (AX_ESTATE, naming the month and ids),
 *   maintain keeps it and reports it.
 * - Files are CSV with a header line (the column names), gzip-compressed,
 *   timestamps in ISO format with their UTC offset.
 *
 * Workload: a few calls a day; archive and restore stream a month (a
 * million rows and more) through COPY without holding it in memory.
 * Callers own the ax_store and use it from one thread.
 */
#ifndef AX_HISTORY_H
#define AX_HISTORY_H

#include <stdint.h>

#include "ax_err.h"
#include "store.h"

/* Months of partitions kept ahead of the current one by default. */
#define AX_HISTORY_AHEAD_DEFAULT 3

/*
 * What a maintain or archive step did, for the caller to print: `what` is
 * "created", "detached", "kept" (a month left attached because it holds
 * unfinished work; name is YYYY-MM), or "archived" (path and rows set).
 * Called on the caller's thread, during the call.
 */
typedef void (*ax_history_fn)(void *arg, const char *what, const char *name,
                              const char *path, int64_t rows);

/*
 * The instant before which months leave under a retention of `days`
 * (1..36500) counted back from now_us: AX_EINVAL naming
 * history.retention_days otherwise.
 */
ax_err ax_history_cutoff(int days, int64_t now_us, int64_t *before_us);

/*
 * Creates the month partitions from the current month through `ahead`
 * (0..120) months later; *created (may be NULL) receives how many.
 */
ax_err ax_history_ensure(ax_store *s, int ahead, int *created);

/*
 * Retention: ax_history_ensure(ahead), then detaches into ax_archive every
 * month that ended before now - retention_days. A month holding
 * unfinished work is kept and reported ("kept"); *kept (may be NULL)
 * counts them. Returns AX_OK even when months were kept.
 */
ax_err ax_history_maintain(ax_store *s, int retention_days, int ahead,
                           ax_history_fn fn, void *arg, int *kept);

/*
 * Detaches every month that ends at or before before_us (refusing, with
 * nothing detached, when one holds unfinished work: AX_ESTATE), then
 * writes every table of ax_archive to dir (an existing directory) and
 * drops it. AX_EEXIST when a file of that name exists (that table stays
 * detached); AX_EIO for a write failure (the table stays). Tables written
 * before a failure stay archived.
 */
ax_err ax_history_archive(ax_store *s, int64_t before_us, const char *dir,
                          ax_history_fn fn, void *arg);

/*
 * Copies one archive file back into its month (creating the partition
 * when missing), in one transaction: all rows or none. *rows (may be
 * NULL) receives how many. AX_EINVAL for a file name that is not
 * <table>_pYYYYMM.csv.gz or a bad header, AX_EIO when it cannot be read or
 * is not gzip, AX_EEXIST when a row is already there, AX_ENOENT when a row
 * references a run or instance that is not there (restore dag_runs, then
 * task_instances, then attempts: see ax_history_restore_rank).
 */
ax_err ax_history_restore(ax_store *s, const char *path, int64_t *rows);

/*
 * Restore order of an archive file by its table: 0 dag_runs,
 * 1 task_instances, 2 attempts, 3 event_log; -1 when the name is not an
 * archive file name.
 */
int ax_history_restore_rank(const char *path);

#endif /* AX_HISTORY_H */
