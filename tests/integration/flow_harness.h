/*
 * flow_harness.h - the fixture shared by the flow actors' integration
 * tests: test_admission.c (the resource detector) and test_flow.c (the
 * instance generator, renderer, hooks, result handler and event
 * emitter).
 *
 * flow_setup starts a throwaway PostgreSQL, migrates it, loads the DAG
 * flow.test (tasks a, r, t, u in Asia/Shanghai) into the store and the
 * registry, makes one run of it (run_id at logical_us), and an actor
 * system (sys) with ctx for the actors a test adds; flow_start starts
 * it and the client (cli) the tests send with. Capture actors record
 * what reaches them: commands (cap_cmd, cap_count, wait_count) and
 * events (cap_events*, wait_events). flow_teardown frees everything.
 */
#ifndef AX_TEST_FLOW_HARNESS_H
#define AX_TEST_FLOW_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "actor.h"
#include "commands.pb-c.h"
#include "config.h"
#include "dag_registry.h"
#include "pg_harness.h"
#include "pipeline.h"
#include "store.h"

extern const char      *DAG_YAML;
extern ax_test_pg      *pg;
extern ax_store        *db;
extern ax_config       *cfg;
extern ax_dag_registry *reg;
extern ax_dag_entry    *entry;
extern ax_pipeline_ctx  ctx;
extern ax_actor_system *sys;
extern ax_actor_client *cli;
extern int64_t          dag_id, version_id, run_id, logical_us;

void flow_setup(void);
void flow_start(void);
void flow_teardown(void);

/* An actor named name that records what it receives. */
void add_capture(ax_actor_system *into, const char *name);
/* The k-th (0-based) command of kind to dest, or NULL; free it. */
Ax__Command *cap_cmd(const char *dest, Ax__Command__BodyCase kind, size_t k);
size_t       cap_count(const char *dest, Ax__Command__BodyCase kind);
/* Events captured with this type (and reason when not NULL) whose
 * payload contains needle (when not NULL). */
size_t cap_events_with(const char *type, const char *reason,
                       const char *needle);
size_t cap_events(const char *type, const char *reason);
/* Wait up to 5 s for n of them (1: reached). */
int wait_events(const char *type, const char *reason, size_t n);
int wait_count(const char *dest, Ax__Command__BodyCase kind, size_t n);
/* Wait up to 10 s for component_stats (comp, key) to read want. */
int wait_comp_stat(const char *comp, const char *key, int64_t want);

/* The one int64 of sql (asserted). */
int64_t q64(const char *sql);

/* Sends cmds[0..n) to dest as one envelope; send1 one command. */
void send_cmds(const char *dest, Ax__Command **cmds, size_t n);
void send1(const char *dest, Ax__Command *c);
/* An InstanceRef of task in the test run (strings static). */
Ax__InstanceRef ref_of(const char *task, int shard);

#endif /* AX_TEST_FLOW_HARNESS_H */
