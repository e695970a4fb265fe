/*
 * task_records.h - records of the tasks a worker runs, kept in its state
 * directory, and the killing of what an earlier life of the worker left.
 *
 * Role: the local executor (executor_local.c) writes one record per
 * running attempt and removes it when the attempt is reported; a worker
 * starting with the same id calls ax_task_records_kill_leftovers() on
 * the same directory before it registers. That matters only when the
 * worker died together with the tasks' shims (their own death kills the
 * tasks otherwise): a whole service cgroup killed, the OOM killer.
 *
 * Format: <dir>/<run_id, '/' as '_'>.task, written to a temporary name
 * and renamed, six lines (the last is absent in older records):
 *   ax-task 1
 *   boot <kernel boot id>
 *   pgid <process group id = pid of the task's main process>
 *   start <start time of that process, field 22 of /proc/PID/stat>
 *   run_id <run_id>
 *   cgroup <the attempt's cgroup v2 directory, or ->
 * A recorded cgroup (named ax-*) still holding processes is killed whole
 * with cgroup.kill, then removed: no pid reuse can fool that.
 * Pid reuse: a group is killed whole only while its leader is the very
 * process recorded (same start time); once the leader is gone, only the
 * members of the group that started after it and carry
 * AX_RUN_ID=<run_id> in their environment are killed. A record of
 * another boot names nothing that still runs.
 */
#ifndef AX_TASK_RECORDS_H
#define AX_TASK_RECORDS_H

#include <sys/types.h>

#include "ax_err.h"

/*
 * Writes the record of run_id's process group pgid (and its cgroup
 * directory, or NULL) into dir (which must
 * exist). Returns the record's path (the caller owns it), or NULL when
 * it could not be written (logged as a warning: the task runs anyway).
 */
char *ax_task_record_write(const char *dir, const char *run_id, pid_t pgid,
                           const char *cgroup);

/* Removes a record written by ax_task_record_write (a warning if not). */
void ax_task_record_remove(const char *path, const char *run_id);

/*
 * Kills what the records in dir name and still runs (see the top) and
 * removes the records; *killed (may be NULL) counts the attempts that
 * still had processes. A missing dir is fine. Errors: AX_EIO (dir
 * unreadable).
 */
ax_err ax_task_records_kill_leftovers(const char *dir, int *killed);

#endif /* AX_TASK_RECORDS_H */
