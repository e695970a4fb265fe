/*
 * fuzz_dag_yaml.c - libFuzzer target for the DAG YAML loader and the
 * validator behind it (and so the renderer's check mode, cron and time
 * zone parsing). Any input must give AX_OK or recorded errors: never a
 * crash, a leak, an unbounded allocation or a long run.
 *
 * Run: build with the `fuzz` feature (clang), then
 *   build/tests/fuzz/fuzz_dag_yaml -max_total_time=20 [CORPUS_DIR]
 * The seed corpus is tests/fuzz/corpus_dag_yaml (the examples and more).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dag.h"
#include "dag_validate.h"
#include "dag_yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ax_dagset    *set;
	ax_dag_limits lim = ax_dag_limits_default();

	/* smaller limits keep each run short; the checks are the same */
	lim.max_file_bytes  = 64 * 1024;
	lim.max_tasks       = 200;
	lim.max_alias_nodes = 2000;
	if (ax_dagset_new(&lim, &set) != AX_OK)
		return 0;
	ax_dag_yaml_load_buf(set, "fuzz.yaml", (const char *) data, size);
	ax_dagset_validate(set);
	for (size_t i = 0; i < set->n_dags; i++) {
		json_t *j = ax_dag_to_json(set->dags[i]);
		json_decref(j);
	}
	FILE *f = fopen("/dev/null", "w");
	if (f != NULL) {
		ax_dagset_print_diags(set, f);
		fclose(f);
	}
	ax_dagset_free(set);
	return 0;
}
