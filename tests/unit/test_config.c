#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "suggest.h"

static char path[64];

static const char *
write_cfg(const char *text)
{
	int   fd;
	FILE *f;
	snprintf(path, sizeof(path), "/tmp/ax-cfg-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void
cleanup(void)
{
	if (path[0])
		unlink(path);
	unsetenv("AX_DSN");
	unsetenv("AX_DATABASE_DSN");
	unsetenv("AX_OPENLINEAGE_URL");
	unsetenv("AX_WORKER_SLOTS");
	unsetenv("AX_WORKER_RUN_AS_ALLOWED");
}

TestSuite(config, .fini = cleanup);

Test(config, defaults_without_file)
{
	ax_config *c;
	char       buf[128];
	cr_assert_eq(ax_config_load(NULL, &c), AX_OK);
	cr_assert_str_eq(ax_config_str(c, "home"), "./.ax");
	cr_assert_eq(ax_config_int(c, "api.port"), 8080);
	cr_assert_eq(ax_config_duration_us(c, "worker.heartbeat"), 2000000);
	cr_assert_str_eq(ax_config_actor_addr(c, "time_detector", buf, 128),
	                 "inproc://ax/time_detector");
	ax_config_free(c);
}

Test(config, file_values_and_actor_addresses)
{
	ax_config *c;
	char       buf[128];
	write_cfg("database:\n  dsn: host=/tmp dbname=ax\n"
	          "worker: {slots: 16, heartbeat: 500ms}\n"
	          "actors:\n  queue: ipc:///tmp/q.ipc\n");
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(ax_config_str(c, "database.dsn"),
	                 "host=/tmp dbname=ax");
	cr_assert_eq(ax_config_int(c, "worker.slots"), 16);
	cr_assert_eq(ax_config_duration_us(c, "worker.heartbeat"), 500000);
	cr_assert_str_eq(ax_config_actor_addr(c, "queue", buf, 128),
	                 "ipc:///tmp/q.ipc");
	ax_config_free(c);
}

Test(config, environment_overrides_file)
{
	ax_config *c;
	write_cfg("worker:\n  slots: 16\nopenlineage:\n  url: http://a\n");
	setenv("AX_WORKER_SLOTS", "3", 1);
	setenv("AX_OPENLINEAGE_URL", "http://b:5000", 1);
	setenv("AX_DSN", "dbname=x", 1);
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_eq(ax_config_int(c, "worker.slots"), 3);
	cr_assert_str_eq(ax_config_str(c, "openlineage.url"), "http://b:5000");
	cr_assert_str_eq(ax_config_str(c, "database.dsn"), "dbname=x");
	ax_config_free(c);
}

struct bad_case {
	char text[128];
	char expect[128]; /* substring of the detail */
};

ParameterizedTestParameters(config, bad_input_names_key_and_place)
{
	static struct bad_case cases[] = {
		{ "worker:\n  slotz: 3\n",
		  ":2:3: unknown key 'worker.slotz'; "
		  "did you mean 'worker.slots'?" },
		{ "worker:\n  slots: many\n",
		  ":2:3: key 'worker.slots': 'many'"
		  " is not a non-negative integer" },
		{ "worker:\n  heartbeat: 5 parsecs\n",
		  "key 'worker.heartbeat'" },
		{ "log:\n  level: loud\n", "'loud' is not a log level" },
		{ "queue:\n  address: 127.0.0.1:1\n",
		  "must start with inproc://" },
		{ "worker: [1, 2]\n",
		  ":1:9: key 'worker': expected a single "
		  "value, not a list" },
		{ "- a\n- b\n", ":1:1: the configuration must be a mapping" },
		{ "a: [\n", "invalid YAML" },
		{ "actors:\n  q: http://x\n", "key 'actors.<name>'" },
		{ "worker:\n  run_as: \"ax task\"\n",
		  ":2:3: key 'worker.run_as': 'ax task' is not a name" },
		{ "worker:\n  run_as: [a, b]\n",
		  "key 'worker.run_as': expected a single value" },
		{ "worker:\n  run_as_allowed: [etl, \"x;y\"]\n",
		  ":2:19: key 'worker.run_as_allowed': 'etl, x;y' is not a "
		  "list of names" },
		{ "worker:\n  run_as_allowed: [etl, [x]]\n",
		  "key 'worker.run_as_allowed': items of the list must be "
		  "names" },
		{ "worker:\n  secrets_env: \"-x\"\n",
		  "key 'worker.secrets_env': '-x' is not a list of names" },
		{ "worker:\n  resources: {gpu: 0}\n",
		  ":2:14: worker.resources: the amount of 'gpu' must be a "
		  "whole number from 1 to 1000000000, got '0'" },
		{ "worker:\n  resources: {gpu: [1]}\n",
		  ":2:14: key 'worker.resources': write a mapping of names to "
		  "whole amounts, e.g. {gpu: 2}" },
		{ "worker:\n  resources: {cpu: 2}\n",
		  "worker.resources: 'cpu' is not a resource name" },
		{ "worker:\n  resources: gpu\n",
		  "worker.resources: 'gpu' is not name=amount" },
		{ "shaving:\n  level: 150\n",
		  ":2:3: key 'shaving.level': 150 is a percentage of "
		  "capacity: use 0..100" },
		{ "shaving:\n  pressure_hold: 101\n",
		  "key 'shaving.pressure_hold': 101 is a percentage" },
		/* beyond what the history's upkeep accepts: refused at load,
		 * by every program, not at axd's first hourly upkeep */
		{ "history:\n  hot_hours: 9000\n",
		  ":2:3: key 'history.hot_hours': 9000 is hours after a run's "
		  "end (a year at most): use 0..8760" },
		{ "history:\n  hot_hours: 4294967320\n",
		  "key 'history.hot_hours': 4294967320 is hours" },
		{ "history:\n  retention_days: 0\n",
		  ":2:3: key 'history.retention_days': 0 is days of history "
		  "kept (100 years at most): use 1..36500" },
		{ "shaving:\n  max_delay_p3: soon\n",
		  "key 'shaving.max_delay_p3'" },
		/* -1 (as many as the slots) is the only negative */
		{ "worker:\n  prefetch: -2\n",
		  ":2:3: key 'worker.prefetch': '-2' is not a non-negative "
		  "integer" },
		{ "worker:\n  prefetch: -1x\n",
		  "key 'worker.prefetch': '-1x' is not" },
	};
	return cr_make_param_array(struct bad_case, cases,
	                           sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *bc, config, bad_input_names_key_and_place)
{
	ax_config *c = (ax_config *) 1;
	write_cfg(bc->text);
	cr_assert_eq(ax_config_load(path, &c), AX_ECONFIG);
	cr_assert_null(c);
	cr_assert(strstr(ax_err_detail(), bc->expect) != NULL,
	          "detail '%s' lacks '%s'", ax_err_detail(), bc->expect);
	cr_assert(strstr(ax_err_detail(), path) != NULL ||
	          strstr(bc->expect, "key 'actors") != NULL);
}

Test(config, bad_environment_names_variable)
{
	ax_config *c;
	setenv("AX_WORKER_SLOTS", "-1", 1);
	cr_assert_eq(ax_config_load(NULL, &c), AX_ECONFIG);
	cr_assert(strstr(ax_err_detail(), "environment AX_WORKER_SLOTS") !=
	              NULL,
	          "%s", ax_err_detail());
}

Test(config, prefetch_minus_one_is_accepted)
{
	ax_config *c;
	write_cfg("worker:\n  prefetch: -1\n  slots: 6\n");
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_expect_eq(ax_config_int(c, "worker.prefetch"), -1);
	ax_config_free(c);
}

Test(config, missing_file)
{
	ax_config *c;
	cr_assert_eq(ax_config_load("/nonexistent/ax.yaml", &c), AX_ECONFIG);
	cr_assert(strstr(ax_err_detail(), "/nonexistent/ax.yaml") != NULL);
}

Test(suggest, closest_name_within_threshold)
{
	static const char *const names[] = { "retries", "timeout",
		                             "depends_on" };
	cr_assert_str_eq(ax_suggest("retrys", names, 3), "retries");
	cr_assert_str_eq(ax_suggest("dependson", names, 3), "depends_on");
	cr_assert_null(ax_suggest("zzzzzz", names, 3));
	cr_assert_eq(ax_edit_distance("kitten", "sitting"), 3);
}

Test(config, task_user_defaults)
{
	ax_config *c;
	cr_assert_eq(ax_config_load(NULL, &c), AX_OK);
	cr_assert_str_eq(ax_config_str(c, "worker.run_as"), "ax-task");
	cr_assert_str_eq(ax_config_str(c, "worker.run_as_allowed"), "");
	cr_assert_not(ax_config_has_name(c, "worker.run_as_allowed", "root"));
	cr_assert_str_eq(ax_config_str(c, "worker.secrets_dir"),
	                 "/etc/ax/secrets");
	ax_config_free(c);
}

/* worker.resources: a mapping in the file, "a=1, b=2" in the
 * environment; either way stored as "name=amount" pairs. */
Test(config, named_resources_from_mapping_and_environment)
{
	ax_config *c;
	write_cfg("worker:\n  resources: {gpu: 2, nvme.ssd: 1}\n");
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(ax_config_str(c, "worker.resources"),
	                 "gpu=2, nvme.ssd=1");
	ax_config_free(c);
	setenv("AX_WORKER_RESOURCES", "gpu=4", 1);
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(ax_config_str(c, "worker.resources"), "gpu=4");
	ax_config_free(c);
	setenv("AX_WORKER_RESOURCES", "gpu=four", 1);
	cr_assert_eq(ax_config_load(path, &c), AX_ECONFIG);
	cr_assert(strstr(ax_err_detail(), "AX_WORKER_RESOURCES") != NULL &&
	              strstr(ax_err_detail(), "got 'four'") != NULL,
	          "%s", ax_err_detail());
	unsetenv("AX_WORKER_RESOURCES");
	cr_assert_eq(ax_config_load(NULL, &c), AX_OK);
	cr_assert_str_eq(ax_config_str(c, "worker.resources"), "");
	ax_config_free(c);
}

Test(config, name_lists_from_yaml_list_string_and_environment)
{
	ax_config *c;
	write_cfg("worker:\n  run_as: root\n"
	          "  run_as_allowed: [etl, reports.team, ax-task]\n"
	          "  secrets_env: \"PG_PASS, API_TOKEN\"\n");
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(ax_config_str(c, "worker.run_as"), "root");
	cr_assert_str_eq(ax_config_str(c, "worker.run_as_allowed"),
	                 "etl, reports.team, ax-task");
	cr_assert(ax_config_has_name(c, "worker.run_as_allowed", "etl"));
	cr_assert(
	    ax_config_has_name(c, "worker.run_as_allowed", "reports.team"));
	cr_assert(ax_config_has_name(c, "worker.run_as_allowed", "ax-task"));
	/* whole names only: no prefixes, no substrings */
	cr_assert_not(ax_config_has_name(c, "worker.run_as_allowed", "et"));
	cr_assert_not(ax_config_has_name(c, "worker.run_as_allowed", "ax"));
	cr_assert_not(ax_config_has_name(c, "worker.run_as_allowed", "root"));
	cr_assert(ax_config_has_name(c, "worker.secrets_env", "API_TOKEN"));
	cr_assert_not(ax_config_has_name(c, "worker.secrets_env", "PG"));
	ax_config_free(c);

	setenv("AX_WORKER_RUN_AS_ALLOWED", "a b,c", 1);
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert(ax_config_has_name(c, "worker.run_as_allowed", "b"));
	cr_assert(ax_config_has_name(c, "worker.run_as_allowed", "c"));
	cr_assert_not(ax_config_has_name(c, "worker.run_as_allowed", "etl"));
	ax_config_free(c);
	write_cfg("worker:\n  run_as_allowed: []\n");
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(ax_config_str(c, "worker.run_as_allowed"), "a b,c");
	ax_config_free(c);
	unsetenv("AX_WORKER_RUN_AS_ALLOWED");
	cr_assert_eq(ax_config_load(path, &c), AX_OK, "%s", ax_err_detail());
	cr_assert_str_eq(ax_config_str(c, "worker.run_as_allowed"), "");
	ax_config_free(c);
}
