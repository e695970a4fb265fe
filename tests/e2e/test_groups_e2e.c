/*
 * test_groups_e2e.c - a task that may run in several worker groups, end
 * to end (engine/group_spec.h, actors/resource/groups.c): real axd and
 * ax-worker processes on a real PostgreSQL; where each attempt ran is
 * read from what the tasks themselves record (their AX_RUN_ID) joined to
 * the worker that ran it.
 *
 *  - four tasks listing [east-a, east-b], two slots in each group and no
 *    overcommit: two run in each group, and each instance row names the
 *    group it ran in, not the list;
 *  - a task selecting {labels: {gpu: h100}} runs only in the group whose
 *    worker declares worker.labels gpu=h100.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "e2e_harness.h"

static ax_e2e *e;
static char    marks[64];

static void
setup(void)
{
	setenv("AX_WORKER_HEARTBEAT", "500ms", 1);
	setenv("AX_WORKER_SLOTS", "2", 1);
	ax_e2e_marks_new(marks, sizeof(marks), "ax-groups");
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
	ax_e2e_marks_free(marks);
	unsetenv("AX_WORKER_SLOTS");
	unsetenv("AX_WORKER_LABELS");
}

TestSuite(groups_e2e, .init = setup, .fini = teardown, .timeout = 180);

/* Starts one worker of group with labels (NULL: none). */
static void
add_worker(const char *group, const char *labels)
{
	if (labels != NULL)
		setenv("AX_WORKER_LABELS", labels, 1);
	else
		unsetenv("AX_WORKER_LABELS");
	cr_assert_eq(ax_stack_add_group_worker(&e->st, group), AX_OK, "%s",
	             ax_err_detail());
	unsetenv("AX_WORKER_LABELS");
}

/* How many run_ids recorded in marks/file ran on a worker of group. */
static int64_t
ran_in(const char *file, const char *group)
{
	char  path[128], line[64], ids[1024] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", marks, file);
	cr_assert_not_null(f = fopen(path, "r"), "%s: no marks", path);
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strlen(ids) + strlen(line) + 8 < sizeof(ids))
			snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids),
			         "%s'%s'", ids[0] ? "," : "", line);
	}
	fclose(f);
	return ax_e2e_int(e,
	                  "SELECT count(*) FROM attempts a JOIN workers w ON "
	                  "w.id = a.worker_id WHERE a.run_id::text IN (%s) "
	                  "AND w.worker_group = '%s'",
	                  ids, group);
}

Test(groups_e2e, a_list_spreads_over_its_groups_and_labels_select_one)
{
	char at[32], yaml[2048];

	e = ax_e2e_new(0,
	               "resources:\n  overcommit: 1\n"
	               "  default_group_slots: 0\n");
	ax_e2e_start_axd(e);
	add_worker("east-a", "gpu=a100, zone=east");
	add_worker("east-b", "gpu=h100, zone=east");
	ax_e2e_wait(e, 30, "both workers to register",
	            "SELECT (count(*) = 2)::int FROM workers WHERE state = "
	            "'ACTIVE'");
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.groups\nschedule: {at: \"%s\"}\n"
	         "defaults: {worker_group: [east-a, east-b]}\n"
	         "tasks:\n"
	         "  - {name: s1, command: \"echo $AX_RUN_ID >> %s/spread; "
	         "sleep 2\"}\n"
	         "  - {name: s2, command: \"echo $AX_RUN_ID >> %s/spread; "
	         "sleep 2\"}\n"
	         "  - {name: s3, command: \"echo $AX_RUN_ID >> %s/spread; "
	         "sleep 2\"}\n"
	         "  - {name: s4, command: \"echo $AX_RUN_ID >> %s/spread; "
	         "sleep 2\"}\n"
	         "  - name: h\n"
	         "    command: \"echo $AX_RUN_ID >> %s/h\"\n"
	         "    worker_group: {labels: {gpu: h100}}\n"
	         "    depends_on: [s1]\n",
	         ax_e2e_at(3, at, sizeof(at)), marks, marks, marks, marks,
	         marks);
	ax_e2e_load(e, "groups", NULL, yaml);
	ax_e2e_wait(e, 90, "the run to succeed",
	            "SELECT count(*) FROM dag_runs r JOIN dags d ON d.id = "
	            "r.dag_id WHERE d.name = 'e2e.groups' AND r.state = "
	            "'SUCCESS'");
	cr_assert_eq(ran_in("spread", "east-a"), 2,
	             "the listed tasks did not spread 2 and 2");
	cr_assert_eq(ran_in("spread", "east-b"), 2);
	cr_assert_eq(ran_in("h", "east-b"), 1,
	             "the h100 task did not run on the h100 group");
	cr_assert_eq(ax_e2e_int(e, "SELECT count(*) FROM attempts"), 5,
	             "one attempt per task");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances "
	                        "WHERE worker_group IN ('east-a', "
	                        "'east-b')"),
	             5, "an instance row does not name the group it ran in");
}

/* How many lines of marks/file name task. */
static int
lines_of(const char *file, const char *task)
{
	char  path[128], line[64];
	int   n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", marks, file);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		n += strcmp(line, task) == 0;
	}
	fclose(f);
	return n;
}

/*
 * kill -9 of axd while two attempts admitted to a chosen group wait in
 * the queue behind four running ones: after the restart every task of
 * the list runs exactly once (counted from what the tasks write), in
 * the group its row names: the queue's rebuild reads the chosen group,
 * not the list.
 */
Test(groups_e2e, a_chosen_group_survives_kill_9_of_axd)
{
	char at[32], yaml[2048], tasks[1024] = "";

	e = ax_e2e_new(0,
	               "resources:\n  overcommit: 2\n"
	               "  default_group_slots: 0\n");
	ax_e2e_start_axd(e);
	add_worker("east-a", NULL);
	add_worker("east-b", NULL);
	ax_e2e_wait(e, 30, "both workers to register",
	            "SELECT (count(*) = 2)::int FROM workers WHERE state = "
	            "'ACTIVE'");
	for (int i = 1; i <= 6; i++)
		snprintf(tasks + strlen(tasks), sizeof(tasks) - strlen(tasks),
		         "  - {name: s%d, command: \"echo $AX_TASK >> "
		         "%s/once; sleep 3\"}\n",
		         i, marks);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: e2e.groups.kill\nschedule: {at: \"%s\"}\n"
	         "defaults: {worker_group: [east-a, east-b]}\n"
	         "tasks:\n%s",
	         ax_e2e_at(3, at, sizeof(at)), tasks);
	ax_e2e_load(e, "groups-kill", NULL, yaml);
	ax_e2e_wait(e, 60, "four running, two admitted and queued",
	            "SELECT (count(*) FILTER (WHERE state = 'RUNNING') = 4 "
	            "AND count(*) FILTER (WHERE state = 'READY') = 2)::int "
	            "FROM task_instances");
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances "
	                        "WHERE state = 'READY' AND worker_group "
	                        "IN ('east-a', 'east-b')"),
	             2, "a queued instance's row does not name its group");
	ax_e2e_kill_axd(e, SIGKILL);
	ax_clock_sleep_us(1500 * AX_USEC_PER_MSEC);
	ax_e2e_start_axd(e);
	ax_e2e_wait(e, 90, "the run to succeed after the restart",
	            "SELECT count(*) FROM dag_runs WHERE state = 'SUCCESS'");
	for (int i = 1; i <= 6; i++) {
		char t[8];
		snprintf(t, sizeof(t), "s%d", i);
		cr_assert_eq(lines_of("once", t), 1, "task %s ran %d times", t,
		             lines_of("once", t));
	}
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM task_instances "
	                        "WHERE state = 'SUCCESS' AND worker_group "
	                        "IN ('east-a', 'east-b')"),
	             6);
}
