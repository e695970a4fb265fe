/*
 * Validation errors: one case per error the issue lists (and the other
 * checks of dag_yaml.c / dag_validate.c), each with the exact
 * FILE:LINE:COL: error: MESSAGE a user sees; every error of a file is
 * reported; hostile input hits a limit quickly with a clear message.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"

/* Loads text as t.yaml, validates, returns all diagnostics as lines. */
static char *
diags_of(const char *text, const ax_dag_limits *lim, ax_err *load_rv)
{
	ax_dagset *set;
	char      *buf = NULL;
	size_t     len = 0;
	FILE      *f   = open_memstream(&buf, &len);

	cr_assert_eq(ax_dagset_new(lim, &set), AX_OK);
	ax_err rv = ax_dag_yaml_load_buf(set, "t.yaml", text, strlen(text));
	if (load_rv != NULL)
		*load_rv = rv;
	ax_dagset_validate(set);
	ax_dagset_print_diags(set, f);
	fclose(f);
	ax_dagset_free(set);
	if (len > 0 && buf[len - 1] == '\n')
		buf[len - 1] = '\0';
	return buf;
}

struct vcase {
	char name[32];
	char yaml[400];
	char want[400]; /* every line, in order */
};

ParameterizedTestParameters(dag_validate, one_error_each)
{
	static struct vcase cases[] = {
		{ "unknown_key_suggest",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, comand: \"echo\"}\n"
		  "",
		  "t.yaml:4:12: error: task 'a' has no command; set 'command' "
		  "or use a 'template' that has one\n"
		  "t.yaml:4:15: error: unknown key 'comand' in task; did you "
		  "mean 'command'?" },
		{ "unknown_key_plain",
		  "kind: DAG\n"
		  "name: t\n"
		  "colour: blue\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:1: error: unknown key 'colour' in DAG" },
		{ "wrong_type_list",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks: {name: a}\n"
		  "",
		  "t.yaml:3:8: error: 'tasks' must be a list, got a mapping" },
		{ "wrong_type_int",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, priority: high}\n"
		  "",
		  "t.yaml:4:40: error: 'priority' must be an integer, got "
		  "'high'" },
		{ "int_out_of_range",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, shards: 0}\n"
		  "",
		  "t.yaml:4:38: error: 'shards' is 0; it must be between 1 "
		  "and 1024" },
		{ "wrong_type_bool",
		  "kind: DAG\n"
		  "name: t\n"
		  "catchup: yes\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:10: error: 'catchup' must be true or false, got "
		  "'yes'" },
		{ "wrong_type_scalar",
		  "kind: DAG\n"
		  "name: t\n"
		  "owner: [a, b]\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:8: error: 'owner' must be a string, got a list" },
		{ "duplicate_task",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:5:12: error: duplicate task name 'a' (first defined "
		  "at line 4)" },
		{ "unknown_dep",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: load, command: echo}\n"
		  "  - {name: b, command: echo, depends_on: [laod]}\n"
		  "",
		  "t.yaml:5:43: error: task 'b' depends on unknown task "
		  "'laod'; did you mean 'load'?" },
		{ "cycle",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, depends_on: [c]}\n"
		  "  - {name: b, command: echo, depends_on: [a]}\n"
		  "  - {name: c, command: echo, depends_on: [b]}\n"
		  "",
		  "t.yaml:4:12: error: dependency cycle: a -> b -> c -> a" },
		{ "self_dep",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, depends_on: [a]}\n"
		  "",
		  "t.yaml:4:43: error: dependency cycle: a -> a (task 'a' "
		  "depends on itself)" },
		{ "cron_field",
		  "kind: DAG\n"
		  "name: t\n"
		  "schedule: {cron: \"0 30 25 * * ?\"}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:24: error: invalid cron expression '0 30 25 * * "
		  "?': field 3 (hour): value 25 out of range 0-23" },
		{ "cron_plain",
		  "kind: DAG\n"
		  "name: t\n"
		  "schedule:\n"
		  "  cron: 0 61 * * *\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:4:11: error: invalid cron expression '0 61 * * *': "
		  "field 2 (hour): value 61 out of range 0-23" },
		{ "timezone",
		  "kind: DAG\n"
		  "name: t\n"
		  "schedule: {cron: \"0 0 * * *\", timezone: Europe/Lodnon}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:41: error: unknown time zone 'Europe/Lodnon' (did "
		  "you mean 'Europe/London'?)" },
		{ "negative_duration",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, timeout: -5m}\n"
		  "",
		  "t.yaml:4:39: error: 'timeout' is negative (-5m); durations "
		  "are positive, e.g. 30s, 5m, 2h" },
		{ "absurd_duration",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, timeout: 30d}\n"
		  "",
		  "t.yaml:4:39: error: 'timeout' is 30d; it must be between "
		  "1s and 7d" },
		{ "bad_duration",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, retries: {count: 1, delay: "
		  "5x}}\n"
		  "",
		  "t.yaml:4:57: error: 'delay': duration '5x': unknown unit "
		  "'x'; use one of us, ms, s, m, h, d, w; write e.g. 30s, 5m, "
		  "2h, 1h30m" },
		{ "every_too_short",
		  "kind: DAG\n"
		  "name: t\n"
		  "schedule: {every: 0s}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:19: error: 'every' is 0s; it must be between 1s "
		  "and 366d" },
		{ "unknown_template",
		  "kind: TaskTemplate\n"
		  "name: tpl.check\n"
		  "command: echo\n"
		  "---\n"
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, template: tpl.chek}\n"
		  "",
		  "t.yaml:8:25: error: task 'a' uses unknown template "
		  "'tpl.chek'; did you mean 'tpl.check'?" },
		{ "unknown_variable",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: \"echo {{ dss }}\"}\n"
		  "",
		  "t.yaml:4:33: error: command: unknown template variable "
		  "'dss'; did you mean 'ds'?" },
		{ "unknown_param",
		  "kind: DAG\n"
		  "name: t\n"
		  "params: {table: x}\n"
		  "tasks:\n"
		  "  - {name: a, command: \"echo {{ params.tabel }}\"}\n"
		  "",
		  "t.yaml:5:33: error: command: unknown template variable "
		  "'params.tabel'; declare 'tabel' under params (did you mean "
		  "'params.table'?)" },
		{ "unknown_variable_block",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - name: a\n"
		  "    command: |\n"
		  "      echo one\n"
		  "      echo {{ task.nme }}\n"
		  "",
		  "t.yaml:7:15: error: command: unknown template variable "
		  "'task.nme'; did you mean 'task.name'?" },
		{ "template_param_via_task",
		  "kind: TaskTemplate\n"
		  "name: tpl.check\n"
		  "command: \"echo {{ params.table }}\"\n"
		  "---\n"
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, template: tpl.check}\n"
		  "",
		  "t.yaml:8:25: error: command of template 'tpl.check' "
		  "(t.yaml:3): unknown template variable 'params.table'; "
		  "declare 'table' under params" },
		{ "unknown_enum",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, channel: p9}\n"
		  "",
		  "t.yaml:4:39: error: unknown channel 'p9'; expected one of: "
		  "px, p0, k8s, biz; did you mean 'px'?" },
		{ "missing_kind",
		  "name: t\n"
		  "tasks: []\n"
		  "",
		  "t.yaml:1:1: error: document has no 'kind'; write 'kind: "
		  "DAG' or 'kind: TaskTemplate'" },
		{ "unknown_kind",
		  "kind: Dga\n"
		  "name: t\n"
		  "",
		  "t.yaml:1:7: error: unknown kind 'Dga'; expected one of: "
		  "DAG, TaskTemplate" },
		{ "syntax_error",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo\n"
		  "",
		  "t.yaml:5:1: error: YAML syntax error: did not find "
		  "expected ',' or '}' while parsing a flow mapping (line "
		  "4)" },
		{ "duplicate_yaml_key",
		  "kind: DAG\n"
		  "name: t\n"
		  "owner: a\n"
		  "owner: b\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:4:1: error: duplicate key 'owner' in the document "
		  "(first at line 3)" },
		{ "bad_start",
		  "kind: DAG\n"
		  "name: t\n"
		  "start: 2026-02-30\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:8: error: 'start': invalid ISO 8601 instant "
		  "'2026-02-30': no such date (expected e.g. "
		  "2026-03-29T03:00:00+02:00)" },
		{ "end_before_start",
		  "kind: DAG\n"
		  "name: t\n"
		  "start: 2026-02-01\n"
		  "end: 2026-01-01\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:4:6: error: 'end' (2026-01-01) is not after 'start' "
		  "(2026-02-01)" },
		{ "bad_task_name",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: \"a b\", command: echo}\n"
		  "",
		  "t.yaml:4:13: error: task name 'a b' is not valid; use "
		  "letters, digits, '_' and '-'" },
		{ "bad_dag_name",
		  "kind: DAG\n"
		  "name: ods..orders\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:2:7: error: DAG name 'ods..orders' is not valid; "
		  "use words of letters, digits, '_' and '-' separated by "
		  "dots, e.g. ods.orders.daily" },
		{ "reserved_env",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, env: {AX_RUN_ID: x}}\n"
		  "",
		  "t.yaml:4:36: error: env name 'AX_RUN_ID' is reserved: AX "
		  "sets the AX_* variables itself" },
		{ "unsupported_type",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, type: sql, command: select 1}\n"
		  "",
		  "t.yaml:4:12: error: task type 'sql' is not supported yet; "
		  "supported: bash, noop" },
		{ "no_command",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a}\n"
		  "",
		  "t.yaml:4:12: error: task 'a' has no command; set 'command' "
		  "or use a 'template' that has one" },
		{ "duplicate_dag",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "---\n"
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:7:7: error: duplicate DAG 't' (first defined at "
		  "t.yaml:2)" },
		{ "two_schedule_kinds",
		  "kind: DAG\n"
		  "name: t\n"
		  "schedule: {cron: \"0 0 * * *\", every: 5m}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:11: error: schedule has more than one of 'cron', "
		  "'every' and 'at'; keep one" },
		{ "dag_depends_on_itself",
		  "kind: DAG\n"
		  "name: t\n"
		  "depends_on_dags: [{dag: t}]\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:25: error: DAG 't' depends on itself" },
		{ "bad_dep_mode",
		  "kind: DAG\n"
		  "name: t\n"
		  "depends_on_dags: [{dag: x, mode: latest}]\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:34: error: unknown mode 'latest'; expected one "
		  "of: same_period, latest_success" },
		{ "no_name",
		  "kind: DAG\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:1:1: error: DAG has no 'name'" },
		{ "alias_cycle",
		  "kind: DAG\n"
		  "name: t\n"
		  "tags: &a [*a]\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:11: error: alias '*a' refers to no complete "
		  "anchor before it (anchors cannot refer to themselves)" },
		{ "routing_needs_key",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, routing: consistent_hash}\n"
		  "",
		  "t.yaml:4:39: error: routing 'consistent_hash' needs a key: "
		  "write routing: {strategy: consistent_hash, key: ...}" },
		{ "bad_memory",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, resources: {memory: lots}}\n"
		  "",
		  "t.yaml:4:50: error: 'memory' must be a size up to 4Ti such "
		  "as 512Mi, 2Gi or 1G, got 'lots'" },
		{ "group_bad_name",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: \"gpu a\"}\n"
		  "",
		  "t.yaml:4:45: error: worker_group: 'gpu a' is not a group "
		  "name (letters, digits, '_', '.', '-', ':', up to 63)" },
		{ "group_list_item",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: [ga, {x: 1}]}\n"
		  "",
		  "t.yaml:4:49: error: items of 'worker_group' must be group "
		  "names (letters, digits, '_', '.', '-', ':', up to 63), got "
		  "a mapping" },
		{ "group_list_twice",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: [ga, ga]}\n"
		  "",
		  "t.yaml:4:44: error: worker_group: 'ga' listed twice; list "
		  "it "
		  "once" },
		{ "group_list_empty",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: []}\n"
		  "",
		  "t.yaml:4:44: error: 'worker_group' lists 0 groups; list 1 "
		  "to "
		  "16" },
		{ "group_selector_key",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: {label: {g: "
		  "a}}}\n"
		  "",
		  "t.yaml:4:45: error: unknown key 'label' in worker_group; "
		  "write {labels: {key: value}} to select groups by their "
		  "workers' labels" },
		{ "group_selector_value",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: {labels: {g: "
		  "\"a b\"}}}\n"
		  "",
		  "t.yaml:4:44: error: worker_group labels: value 'a b' of "
		  "label 'g' is not a plain value (letters, digits, '_', '.', "
		  "'-', up to 63)" },
		{ "group_selector_list",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, worker_group: {labels: {g: "
		  "[a]}}}\n"
		  "",
		  "t.yaml:4:57: error: label 'g' of worker_group must have a "
		  "plain value, got a list" },
		{ "preemptible_not_bool",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, preemptible: yes}\n"
		  "",
		  "t.yaml:4:43: error: 'preemptible' must be true or false, "
		  "got 'yes'" },
		{ "preemptible_on_p0",
		  "kind: DAG\n"
		  "name: t\n"
		  "impact: P0\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, preemptible: true}\n"
		  "",
		  "t.yaml:5:12: error: task 'a' is preemptible but its DAG "
		  "has "
		  "impact P0, which no tier can preempt; remove 'preemptible' "
		  "or lower the DAG's impact" },
		{ "named_resource_zero",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, resources: {gpu: 0}}\n"
		  "",
		  "t.yaml:4:47: error: resources.gpu must be a whole number "
		  "from 1 "
		  "to 1000000000, got '0'" },
		{ "named_resource_not_whole",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, resources: {gpu: 1.5}}\n"
		  "",
		  "t.yaml:4:47: error: resources.gpu must be a whole number "
		  "from 1 "
		  "to 1000000000, got '1.5'" },
		{ "named_resource_typo_of_memory",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, resources: {memroy: 1}}\n"
		  "",
		  "t.yaml:4:42: error: unknown key 'memroy' in resources; did "
		  "you "
		  "mean 'memory'? (other names are named resources, e.g. gpu: "
		  "1)" },
		{ "named_resource_bad_name",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, resources: {\"g/pu\": 1}}\n"
		  "",
		  "t.yaml:4:43: error: 'g/pu' is not a resource name: use "
		  "letters, "
		  "digits, '_', '.', '-' (up to 64), e.g. gpu: 1" },
		{ "named_resource_list",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, resources: {gpu: [1]}}\n"
		  "",
		  "t.yaml:4:47: error: 'gpu' must be a whole number, got a "
		  "list" },
		{ "deadline_scalar",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: 2h\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:11: error: 'deadline' must be a mapping, e.g. "
		  "{after: "
		  "2h} or {at: \"08:00\", day: 1}, got '2h'" },
		{ "deadline_both",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {after: 2h, at: \"08:00\"}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:11: error: the deadline of the DAG has both "
		  "'after' "
		  "and 'at'; keep one: {after: 2h} (after the interval ends) "
		  "or "
		  "{at: \"08:00\", day: 1} (a wall-clock time)" },
		{ "deadline_neither",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {day: 1}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:17: error: 'day' of the deadline of the DAG needs "
		  "'at', e.g. {at: \"08:00\", day: 1}" },
		{ "deadline_empty",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:11: error: the deadline of the DAG needs 'after' "
		  "or "
		  "'at', e.g. {after: 2h} or {at: \"08:00\", day: 1}" },
		{ "deadline_bad_at",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {at: \"8am\"}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:17: error: deadline 'at': '8am' is not a time of "
		  "day; "
		  "write HH:MM (24-hour), e.g. \"08:00\"" },
		{ "deadline_at_range",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {at: \"24:00\", day: 1}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:17: error: deadline 'at': '24:00' is out of "
		  "range; "
		  "hours are 00-23, minutes and seconds 00-59" },
		{ "deadline_day_range",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {at: \"08:00\", day: 400}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:30: error: 'day' is 400; it must be between 0 and "
		  "366" },
		{ "deadline_after_small",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {after: 10s}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:19: error: 'after' is 10s; it must be between 1m "
		  "and "
		  "31d" },
		{ "deadline_after_bad",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {after: soon}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:19: error: 'after': duration 'soon': expected a "
		  "digit "
		  "at 'soon' (write e.g. 30s, 5m, 2h, 1h30m); write e.g. 30s, "
		  "5m, 2h, 1h30m" },
		{ "deadline_unknown_key",
		  "kind: DAG\n"
		  "name: t\n"
		  "deadline: {afer: 2h}\n"
		  "tasks:\n"
		  "  - {name: a, command: echo}\n"
		  "",
		  "t.yaml:3:11: error: the deadline of the DAG needs 'after' "
		  "or "
		  "'at', e.g. {after: 2h} or {at: \"08:00\", day: 1}\n"
		  "t.yaml:3:12: error: unknown key 'afer' in deadline; did "
		  "you "
		  "mean 'after'?" },
		{ "deadline_task_both",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, deadline: {at: \"08:00\", "
		  "after: 1h}}\n"
		  "",
		  "t.yaml:4:40: error: the deadline of task 'a' has both "
		  "'after' "
		  "and 'at'; keep one: {after: 2h} (after the interval ends) "
		  "or "
		  "{at: \"08:00\", day: 1} (a wall-clock time)" },
		{ "deadline_task_day_alone",
		  "kind: DAG\n"
		  "name: t\n"
		  "tasks:\n"
		  "  - {name: a, command: echo, deadline: {after: 1h, day: "
		  "2}}\n"
		  "",
		  "t.yaml:4:57: error: 'day' of the deadline of task 'a' "
		  "needs "
		  "'at', e.g. {at: \"08:00\", day: 1}" },
	};
	return cr_make_param_array(struct vcase, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct vcase *c, dag_validate, one_error_each)
{
	char *got = diags_of(c->yaml, NULL, NULL);
	cr_assert_str_eq(got, c->want, "case %s: got\n%s", c->name, got);
	free(got);
}

Test(dag_validate, all_errors_of_a_file_are_reported)
{
	const char *y =
	    "kind: DAG\n"
	    "name: t\n"
	    "schedule: {cron: \"0 0 25 * * ?\", timezone: Mars/Base}\n"
	    "tasks:\n"
	    "  - {name: a, command: \"echo {{ dss }}\", timeout: -1s}\n"
	    "  - {name: b, command: echo, depends_on: [zz]}\n"
	    "  - {name: b, command: echo, priorty: 1}\n"
	    "---\n"
	    "kind: DAG\n"
	    "name: u\n"
	    "tasks:\n"
	    "  - {name: x, command: echo, depends_on: [y]}\n"
	    "  - {name: y, command: echo, depends_on: [x]}\n";
	char *got = diags_of(y, NULL, NULL);
	cr_assert_str_eq(
	    got,
	    "t.yaml:3:23: error: invalid cron expression '0 0 25 * * ?': "
	    "field 3 "
	    "(hour): value 25 out of range 0-23\n"
	    "t.yaml:3:44: error: unknown time zone 'Mars/Base': use an IANA "
	    "name such as Europe/London or UTC\n"
	    "t.yaml:5:33: error: command: unknown template variable 'dss'; "
	    "did "
	    "you mean 'ds'?\n"
	    "t.yaml:5:51: error: 'timeout' is negative (-1s); durations are "
	    "positive, e.g. 30s, 5m, 2h\n"
	    "t.yaml:6:43: error: task 'b' depends on unknown task 'zz'\n"
	    "t.yaml:7:12: error: duplicate task name 'b' (first defined at "
	    "line "
	    "6)\n"
	    "t.yaml:7:30: error: unknown key 'priorty' in task; did you mean "
	    "'priority'?\n"
	    "t.yaml:12:12: error: dependency cycle: x -> y -> x");
	free(got);
}

Test(dag_validate, errors_from_several_files_keep_their_file)
{
	ax_dagset  *set;
	const char *tpl =
	    "kind: TaskTemplate\nname: tpl.a\ncommand: \"{{ tss }}\"\n";
	const char *dag = "kind: DAG\nname: d\ntasks:\n"
	                  "  - {name: a, template: tpl.a}\n"
	                  "  - {name: b, command: echo, depends_on: [c]}\n";
	cr_assert_eq(ax_dagset_new(NULL, &set), AX_OK);
	cr_assert_eq(ax_dag_yaml_load_buf(set, "tpl.yaml", tpl, strlen(tpl)),
	             AX_OK);
	cr_assert_eq(ax_dag_yaml_load_buf(set, "dag.yaml", dag, strlen(dag)),
	             AX_OK);
	cr_assert_eq(ax_dagset_validate(set), AX_EINVAL);
	cr_assert_eq(ax_dagset_error_count(set, "tpl.yaml"), 1);
	cr_assert_eq(ax_dagset_error_count(set, "dag.yaml"), 1);
	cr_assert_str_eq(set->diags[0].pos.file, "dag.yaml");
	cr_assert_eq(set->diags[0].pos.line, 5);
	cr_assert_str_eq(set->diags[1].pos.file, "tpl.yaml");
	cr_assert_eq(set->diags[1].pos.col, 14);
	/* a DAG using a broken template is not valid either */
	cr_assert_eq(set->dags[0]->valid, 0);
	ax_dagset_free(set);
}

/* --- limits: each must fail fast with a clear message ----------------- */

static void
assert_fast(int64_t t0)
{
	cr_assert_lt(ax_clock_mono_us() - t0, 2 * AX_USEC_PER_SEC,
	             "took %lld us", (long long) (ax_clock_mono_us() - t0));
}

Test(dag_validate, limit_file_size)
{
	size_t n = 1024 * 1024 + 100;
	char  *y = malloc(n + 1);
	memset(y, '#', n);
	y[n]       = '\0';
	int64_t t0 = ax_clock_mono_us();
	ax_err  rv;
	char   *got = diags_of(y, NULL, &rv);
	assert_fast(t0);
	cr_assert_eq(rv, AX_ELIMIT);
	cr_assert_str_eq(got,
	                 "t.yaml:1:1: error: file is 1048676 bytes, "
	                 "larger than the limit of 1048576");
	free(got);
	free(y);
}

Test(dag_validate, limit_task_count)
{
	size_t n   = 5001;
	char  *y   = malloc(64 * n + 64);
	size_t len = (size_t) sprintf(y, "kind: DAG\nname: big\ntasks:\n");
	for (size_t i = 0; i < n; i++)
		len += (size_t) sprintf(
		    y + len, "  - {name: t%zu, command: echo}\n", i);
	int64_t t0  = ax_clock_mono_us();
	char   *got = diags_of(y, NULL, NULL);
	assert_fast(t0);
	cr_assert_str_eq(got,
	                 "t.yaml:4:3: error: DAG has 5001 tasks, more "
	                 "than the limit of 5000; split it into several "
	                 "DAGs");
	free(got);
	free(y);
}

Test(dag_validate, limit_nesting_depth)
{
	size_t n = 200000;
	char  *y = malloc(n + 32);
	size_t k = (size_t) sprintf(y, "kind: DAG\nname: d\ntags: ");
	memset(y + k, '[', n);
	y[k + n]   = '\0';
	int64_t t0 = ax_clock_mono_us();
	ax_err  rv;
	char   *got = diags_of(y, NULL, &rv);
	assert_fast(t0);
	cr_assert_eq(rv, AX_ELIMIT);
	cr_assert_str_eq(got,
	                 "t.yaml:3:38: error: YAML nesting is deeper "
	                 "than 32 levels");
	free(got);
	free(y);
}

Test(dag_validate, limit_alias_bomb)
{
	/* "billion laughs": 10^9 nodes if expanded */
	const char *y  = "kind: DAG\nname: d\n"
	                 "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	                 "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
	                 "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
	                 "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
	                 "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
	                 "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	                 "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
	                 "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
	                 "tags: [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
	int64_t     t0 = ax_clock_mono_us();
	ax_err      rv;
	char       *got = diags_of(y, NULL, &rv);
	assert_fast(t0);
	cr_assert_eq(rv, AX_ELIMIT);
	cr_assert_str_eq(got,
	                 "t.yaml:6:36: error: aliases expand to more "
	                 "than 10000 nodes; refusing the document (alias "
	                 "bomb?)");
	free(got);
}

Test(dag_validate, limits_are_configurable)
{
	ax_dag_limits lim = ax_dag_limits_default();
	lim.max_tasks     = 2;
	char *got         = diags_of("kind: DAG\nname: d\ntasks:\n"
	                                     "  - {name: a, command: echo}\n"
	                                     "  - {name: b, command: echo}\n"
	                                     "  - {name: c, command: echo}\n",
	                             &lim, NULL);
	cr_assert_str_eq(got,
	                 "t.yaml:4:3: error: DAG has 3 tasks, more than "
	                 "the limit of 2; split it into several DAGs");
	free(got);
}

Test(dag_validate, many_errors_are_capped)
{
	ax_dag_limits lim = ax_dag_limits_default();
	lim.max_diags     = 3;
	char *got         = diags_of("kind: DAG\nname: d\na: 1\nb: 1\nc: 1\n"
	                                     "e: 1\nf: 1\ntasks:\n"
	                                     "  - {name: a, command: echo}\n",
	                             &lim, NULL);
	cr_assert(strstr(got, "error: 2 more errors not shown") != NULL, "%s",
	          got);
	free(got);
}
