/*
 * config.c - configuration keys, YAML file loading and AX_* overrides.
 *
 * The file is a YAML mapping; nested mappings make dotted keys
 * (database: {dsn: x} is database.dsn). Values are scalars; keys of type
 * `names` also take a YAML list of names (stored as "a, b"), keys of
 * type `amounts` a mapping of names to whole amounts ({gpu: 2, ssd: 1},
 * stored as "gpu=2, ssd=1", engine/resources.h). The table below is the
 * single list of keys: adding a key is adding a row.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "ax_config.h"
#include "clock.h"
#include "log.h"
#include "group_spec.h"
#include "resources.h"
#include "suggest.h"

typedef enum {
	CFG_STRING,
	CFG_INT,
	CFG_DURATION,
	CFG_BOOL,
	CFG_ADDRESS,
	CFG_LEVEL,
	CFG_NAME,    /* one name: letters, digits, '_', '.', '-' */
	CFG_NAMES,   /* names: a YAML list, or "a, b" */
	CFG_AMOUNTS, /* name -> amount: a YAML mapping, or "a=1, b=2" */
	CFG_LABELS,  /* key -> value: a YAML mapping, or "a=x, b=y" */
} cfg_type;

typedef struct {
	const char *key;
	cfg_type    type;
	const char *def;
	const char *help;
} cfg_key;

static const cfg_key cfg_keys[] = {
	{ "home", CFG_STRING, "./.ax",
	  "AX home: embedded PostgreSQL, logs, tokens" },
	{ "log.level", CFG_LEVEL, "info", "debug | info | warn | error" },
	{ "database.dsn", CFG_STRING, "",
	  "libpq connection string; empty = embedded PostgreSQL in home" },
	{ "database.pgbin", CFG_STRING, AX_PGBIN_DEFAULT,
	  "directory of initdb, pg_ctl, postgres (embedded cluster)" },
	{ "database.pool", CFG_INT, "4", "connections per process" },
	{ "scheduler.lease_ttl", CFG_DURATION, "10s",
	  "scheduler lease lifetime: a standby takes over at once when the "
	  "active axd's session ends (kill -9, crash), and after this when "
	  "the active axd hangs" },
	{ "scheduler.standby_poll", CFG_DURATION, "100ms",
	  "how often a standby axd tries to take the scheduler lease" },
	{ "scheduler.drain_timeout", CFG_DURATION, "10s",
	  "axd stop: time to finish the work in flight between actors" },
	{ "scheduler.batch_max", CFG_INT, "1000",
	  "largest batch an actor forwards in one message" },
	{ "scheduler.prepare_ahead", CFG_DURATION, "500ms",
	  "a scheduled run is created, admitted and queued this long before "
	  "its due instant; the queue releases it at the instant (0: off)" },
	{ "scheduler.fires_per_tick", CFG_INT, "4096",
	  "schedules and timers the time detector fires in one pass, and "
	  "about the runs it creates in one pass (catch-ups); more due at "
	  "once fire in the next passes, milliseconds later" },
	{ "scheduler.compiled_schedules", CFG_INT, "16384",
	  "compiled schedules axd keeps (about 300 bytes each); the others "
	  "are compiled again when they fire" },
	{ "scheduler.aging_interval", CFG_DURATION, "30s",
	  "waiting time that raises an instance's priority by one step" },
	{ "scheduler.starvation_after", CFG_DURATION, "10m",
	  "an instance waiting for admission longer than this counts as "
	  "starving (the ax_instances_starving gauge, per tier)" },
	/* Preemption (engine/preempt.h, actors/queue/queue_preempt.c):
	 * off by default, because it stops running work; an operator turns
	 * it on for groups whose low tiers mark their tasks preemptible. */
	{ "preemption.enabled", CFG_BOOL, "false",
	  "the queue may stop a running preemptible attempt of a lower tier "
	  "when an attempt of a higher tier cannot be placed in its group "
	  "(a capacity calendar with preempt stops work without it)" },
	{ "preemption.max_runtime", CFG_DURATION, "30m",
	  "never preempt an attempt that has run longer than this" },
	{ "preemption.grace", CFG_DURATION, "30s",
	  "a preempted attempt gets SIGTERM, then SIGKILL after this (its "
	  "task's own kill grace is not used: the winner waits for the "
	  "slot); also for one stopped by a capacity calendar with preempt" },
	{ "preemption.per_worker_per_minute", CFG_INT, "2",
	  "at most this many preemptions on one worker in any minute" },
	{ "preemption.window", CFG_DURATION, "10m",
	  "an instance preempted inside this window is preempted again only "
	  "for a winner at least two tiers above it" },
	{ "preemption.requeue_delay", CFG_DURATION, "60s",
	  "a preempted instance is due again after this delay plus a "
	  "jitter of up to preemption.requeue_jitter (then passes "
	  "preemption.recovery_rate)" },
	{ "preemption.requeue_jitter", CFG_DURATION, "60s",
	  "the largest jitter added to preemption.requeue_delay" },
	{ "preemption.recovery_rate", CFG_INT, "10",
	  "at most this many preempted instances become ready again in any "
	  "second once their delay is over; the others wait their turn, the "
	  "highest tier first, then the higher priority, then the earliest "
	  "due (0: no limit)" },
	{ "registry.cache_dags", CFG_INT, "10000",
	  "decoded DAG versions axd keeps beyond those in use; the others "
	  "are read from PostgreSQL on first use" },
	{ "queue.address", CFG_ADDRESS, "tcp://127.0.0.1:7710",
	  "where the queue service listens for workers" },
	{ "queue.dispatch_ahead", CFG_DURATION, "50ms",
	  "an attempt prepared ahead of its due instant is sent this long "
	  "before it to a worker that starts it at the instant itself (the "
	  "dispatch record and the reply leave the start's path; the slot "
	  "is taken that much sooner); at most half of queue.ack_timeout; "
	  "0: sent at the instant" },
	{ "queue.prefetch_wait", CFG_DURATION, "1s",
	  "a dispatch sent beyond a worker's free slots (worker.prefetch) "
	  "that has not started this long after its instant is taken back "
	  "at the worker's next heartbeat and queued again for any worker" },
	{ "queue.ack_timeout", CFG_DURATION, "2s",
	  "re-send an unacknowledged message after this long" },
	{ "queue.drain_hand_back", CFG_BOOL, "false",
	  "a draining worker hands its running attempts back" },
	/* A worker kills its tasks when it has had no answer for
	 * worker.lease, counted from the send time of its last answered
	 * request; the queue counts from receipt, so it must wait longer
	 * before handing the attempts elsewhere, or both would run. */
	{ "queue.lease_grace", CFG_DURATION, "2s",
	  "wait past a lapsed worker lease before its attempts go UNKNOWN "
	  "(the worker has fenced itself by then)" },
	{ "worker.id", CFG_STRING, "",
	  "worker id (stable across restarts); empty = hostname:pid" },
	{ "worker.group", CFG_STRING, "default", "worker group to join" },
	{ "worker.slots", CFG_INT, "4", "attempts run at once" },
	{ "worker.reserve_p0", CFG_INT, "0",
	  "of worker.slots, how many are kept for P0 work (lower tiers "
	  "never take them; at most worker.slots)" },
	{ "worker.cpu_milli", CFG_INT, "0",
	  "CPU this worker offers to tasks, millicores (1000 = one core); "
	  "0 = the machine's online CPUs" },
	{ "worker.memory_mb", CFG_INT, "0",
	  "memory this worker offers to tasks, MiB; 0 = the machine's "
	  "physical memory" },
	{ "worker.resources", CFG_AMOUNTS, "",
	  "named resources this worker offers to tasks, e.g. {gpu: 2} "
	  "(whole amounts; tasks declaring resources: {gpu: 1} are admitted "
	  "only where enough is free)" },
	{ "worker.labels", CFG_LABELS, "",
	  "labels of this worker, e.g. {gpu: a100, zone: east}: a task whose "
	  "worker_group is {labels: {...}} may run in a group whose every "
	  "live worker carries them" },
	{ "worker.server", CFG_ADDRESS, "tcp://127.0.0.1:7710",
	  "queue service address" },
	{ "worker.heartbeat", CFG_DURATION, "2s", "heartbeat interval" },
	{ "worker.lease", CFG_DURATION, "10s",
	  "lease lifetime; attempts go UNKNOWN after it lapses" },
	{ "worker.log_dir", CFG_STRING, "",
	  "attempt logs; empty = <home>/logs" },
	{ "worker.kill_grace", CFG_DURATION, "10s",
	  "SIGTERM to SIGKILL delay on timeout or kill" },
	{ "worker.start_spin", CFG_DURATION, "2ms",
	  "how long before the instant of a dispatch it holds the worker "
	  "stops sleeping and waits on the clock, so that a late wake-up "
	  "(a busy or virtual CPU) does not delay the start; at most 100ms; "
	  "0s: sleep to the instant" },
	{ "worker.prefetch", CFG_INT, "-1",
	  "how many dispatches held for a later instant the worker takes "
	  "beyond its free slots when every worker of its group is full for "
	  "that instant: each starts as a slot frees after its instant, "
	  "without a round trip to the queue, and the queue takes back "
	  "those not started queue.prefetch_wait after it (0: none; -1: as "
	  "many as worker.slots)" },
	{ "worker.cgroups", CFG_BOOL, "true",
	  "each task in a cgroup v2 of its own where the worker can make "
	  "one (killed whole with cgroup.kill)" },
	{ "worker.state_dir", CFG_STRING, "",
	  "records of running tasks, killed by the next start with the "
	  "same worker.id; empty = <home>/state/worker" },
	/* A worker started as root never runs user code as root unless
	 * told so: a DAG author's command would own the machine. */
	{ "worker.run_as", CFG_NAME, "ax-task",
	  "user the tasks run as when the worker runs as root (its groups, "
	  "its HOME); 'root' only when written here; a worker that is not "
	  "root runs tasks as itself" },
	{ "worker.run_as_allowed", CFG_NAMES, "",
	  "users a task may name in its run_as besides worker.run_as "
	  "(a list)" },
	{ "worker.secrets_dir", CFG_STRING, "/etc/ax/secrets",
	  "directory a task's env {from_file: PATH} may read from" },
	{ "worker.secrets_env", CFG_NAMES, "",
	  "worker environment variables a task's env {from_env: NAME} may "
	  "read (a list)" },
	{ "api.listen", CFG_STRING, "127.0.0.1", "API listen address" },
	{ "api.port", CFG_INT, "8080", "API port" },
	{ "api.tls_cert", CFG_STRING, "", "PEM certificate; enables TLS" },
	{ "api.tls_key", CFG_STRING, "", "PEM private key for tls_cert" },
	{ "api.max_body", CFG_INT, "1048576", "largest request body, bytes" },
	{ "api.timeout", CFG_DURATION, "30s",
	  "idle HTTP connection timeout (log follows are exempt)" },
	{ "api.header_timeout", CFG_DURATION, "10s",
	  "a request head (line and headers) must arrive within this of "
	  "the accept or the previous answer; else the connection is "
	  "dropped (slow clients)" },
	{ "api.max_header", CFG_INT, "16384",
	  "largest request line + headers, bytes (431 above)" },
	{ "api.max_connections", CFG_INT, "10000",
	  "open HTTP connections in all (ulimit -n is raised to fit)" },
	{ "api.max_connections_per_client", CFG_INT, "64",
	  "open HTTP connections per client address; 0 = no limit (behind "
	  "a proxy all clients share its address)" },
	{ "api.threads", CFG_INT, "0",
	  "event-loop threads; 0 = database.pool (never more)" },
	{ "api.statement_timeout", CFG_DURATION, "15s",
	  "longest SQL statement of an API request; 0 = the server's" },
	{ "events.pub", CFG_ADDRESS, "ipc:///tmp/ax-events.ipc",
	  "nng PUB socket for events (topic = type)" },
	{ "openlineage.url", CFG_STRING, "",
	  "OpenLineage endpoint; empty = disabled" },
	{ "openlineage.namespace", CFG_STRING, "ax",
	  "job namespace of OpenLineage events" },
	{ "openlineage.buffer", CFG_INT, "10000",
	  "events buffered for OpenLineage before drops" },
	{ "alerts.alertmanager_url", CFG_STRING, "",
	  "Alertmanager base URL (alerts POSTed to <url>/api/v2/alerts); "
	  "empty = off" },
	{ "alerts.webhook_url", CFG_STRING, "",
	  "URL that receives alerts as plain JSON POSTs; empty = off" },
	{ "alerts.link_url", CFG_STRING, "",
	  "ax-api base URL put into alerts as the explain link; empty = "
	  "none" },
	{ "alerts.buffer", CFG_INT, "1000",
	  "alerts queued per target while it is unreachable; when full the "
	  "oldest is dropped (counted)" },
	{ "alerts.attempts", CFG_INT, "5",
	  "POSTs per alert before it is dropped (retries on errors, 408, 429, "
	  "5xx)" },
	{ "alerts.backoff", CFG_DURATION, "100ms",
	  "first delay between POSTs of an alert; doubles, at most 5 s" },
	{ "alerts.timeout", CFG_DURATION, "5s",
	  "connect and answer time allowed per alert POST" },
	{ "alerts.stuck_after", CFG_DURATION, "6h",
	  "an instance READY, RUNNING or UNKNOWN this long without a change "
	  "alerts as stuck; 0 = no stuck check" },
	{ "alerts.stuck_check", CFG_DURATION, "1m",
	  "how often axd looks for stuck instances (one bounded query)" },
	{ "alerts.no_lease_after", CFG_DURATION, "30s",
	  "an axd that cannot take the scheduler lease this long (database "
	  "away) alerts; 0 = only a lost lease alerts" },
	{ "resources.overcommit", CFG_INT, "4",
	  "admit up to worker-group slots x this, so pulls find work" },
	{ "resources.default_group_slots", CFG_INT, "16",
	  "slots assumed for a worker group before its first report" },
	{ "resources.default_pool_slots", CFG_INT, "16",
	  "slots of a named pool that is not in the pools table" },
	{ "resources.group_cost", CFG_AMOUNTS, "",
	  "cost weight per worker group in percent, e.g. {gpu-cloud: 150} "
	  "(default 100): a task that may run in several groups goes where "
	  "cost x (100 + water level %) is lowest" },
	/* Peak shaving (engine/shaving.h): spreads a burst of low-tier work
	 * instead of landing it on the databases its tasks use at once. Too
	 * low a threshold or too long a delay makes low tiers late for
	 * nothing; P0 is never delayed. */
	{ "shaving.enabled", CFG_BOOL, "false",
	  "delay arriving instances of the lowest tier present in a worker "
	  "group while its backlog or water level passes a threshold" },
	{ "shaving.backlog", CFG_INT, "200",
	  "instances waiting for admission in a worker group that start "
	  "shaving (0: the backlog never does)" },
	{ "shaving.level", CFG_INT, "80",
	  "water level pushed for a pool or group, in percent, that starts "
	  "shaving (0: the level never does)" },
	{ "shaving.max_delay_p1", CFG_DURATION, "10s",
	  "largest delay of a shaved P1 instance (delays are jittered over "
	  "the upper half; 0: P1 is never shaved)" },
	{ "shaving.max_delay_p2", CFG_DURATION, "30s",
	  "largest delay of a shaved P2 instance (0: never shaved)" },
	{ "shaving.max_delay_p3", CFG_DURATION, "60s",
	  "largest delay of a shaved P3 instance (0: never shaved)" },
	/* A pushed water level at this level stops P1..P3 admissions of the
	 * pool or group until it falls or expires; P0 goes on within its
	 * reserve. Too low a value idles capacity the platform still has. */
	{ "shaving.pressure_hold", CFG_INT, "90",
	  "pushed water level, in percent, at which a pool or group admits "
	  "no P1..P3 instance (0: never; applies with shaving off too)" },
	{ "events.buffer", CFG_INT, "100000",
	  "events the emitter buffers while event_log is unreachable" },
	/* Platform teams keep six months of instance history for audit and
	 * capacity planning; older history fills the disk and lengthens the
	 * history's index scans, and leaves only through `axctl db maintain`
	 * / `axctl db archive`. Too short a setting deletes what an audit
	 * still needs (archive first to keep files). */
	{ "history.retention_days", CFG_INT, "180",
	  "`axctl db maintain` deletes finished runs (with instances and "
	  "attempts) older than this many days and detaches the event and "
	  "instance history months that ended before then; `axctl db "
	  "archive` writes them to files" },
	/* The pipeline's tables stay as small as the live runs and the last
	 * day's: a clear or re-run of an older run brings its rows back. 0
	 * moves a run as soon as it finishes (tests). */
	{ "history.hot_hours", CFG_INT, "24",
	  "hours after a run finished before its instances and attempts "
	  "move from the pipeline's tables to the month-partitioned history "
	  "(axd while it leads; `axctl db maintain`)" },
	{ "history.partitions_ahead", CFG_INT, "3",
	  "months of event_log and instance history partitions created "
	  "ahead of the current one" },
};

#define N_KEYS       (sizeof(cfg_keys) / sizeof(cfg_keys[0]))
#define ACTOR_PREFIX "actors."

typedef struct cfg_extra {
	char             *key;
	char             *value;
	struct cfg_extra *next;
} cfg_extra;

struct ax_config {
	char      *values[N_KEYS]; /* owned; NULL = default */
	cfg_extra *actors;         /* actors.<name> addresses */
};

static const cfg_key *
find_key(const char *key, size_t *idx)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		if (strcmp(cfg_keys[i].key, key) == 0) {
			if (idx != NULL)
				*idx = i;
			return &cfg_keys[i];
		}
	}
	return NULL;
}

/* Length of the name at s (letters, digits, '_', '.', '-'; not starting
 * with '-'); 0 when there is none. */
static size_t
name_len(const char *s)
{
	size_t n = 0;
	while (isalnum((unsigned char) s[n]) || s[n] == '_' || s[n] == '.' ||
	       (s[n] == '-' && n > 0))
		n++;
	return n;
}

/* A list of names separated by commas and/or blanks ("" is empty). */
static ax_err
check_names(const cfg_key *k, const char *v)
{
	const char *p = v;
	for (;;) {
		size_t n;
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			return AX_OK;
		n = name_len(p);
		if (n == 0 || n > 64 ||
		    (p[n] != '\0' && p[n] != ' ' && p[n] != '\t' &&
		     p[n] != ','))
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': '%s' is not a list of names; write "
			    "[a, b] or \"a, b\" (letters, digits, '_', '.', "
			    "'-', up to 64 each)",
			    k->key, v);
		p += n;
	}
}

/* Integer keys with a range narrower than "non-negative", checked at
 * load so that every program reading the file (axd, axctl, the worker)
 * refuses the same value, naming it, before anything runs. */
static const struct {
	const char *key, *what;
	int64_t     lo, hi;
} int_ranges[] = {
	{ "shaving.level", "a percentage of capacity", 0, 100 },
	{ "shaving.pressure_hold", "a percentage of capacity", 0, 100 },
	/* engine/history.c: ax_history_hot_cutoff, ax_history_cutoff */
	{ "history.hot_hours", "hours after a run's end (a year at most)", 0,
	  8760 },
	{ "history.retention_days", "days of history kept (100 years at most)",
	  1, 36500 },
};

static ax_err
check_value(const cfg_key *k, const char *v)
{
	int64_t d;
	char   *end;

	switch (k->type) {
	case CFG_STRING:
		return AX_OK;
	case CFG_INT:
		errno = 0;
		d     = strtoll(v, &end, 10);
		/* -1 stands for worker.slots in worker.prefetch */
		if (d == -1 && strcmp(k->key, "worker.prefetch") == 0 &&
		    errno == 0 && end != v && *end == '\0')
			return AX_OK;
		if (errno != 0 || end == v || *end != '\0' || d < 0)
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': '%s' is not a non-negative integer",
			    k->key, v);
		for (size_t i = 0;
		     i < sizeof(int_ranges) / sizeof(int_ranges[0]); i++)
			if (strcmp(k->key, int_ranges[i].key) == 0 &&
			    (d < int_ranges[i].lo || d > int_ranges[i].hi))
				return ax_err_set(
				    AX_ECONFIG,
				    "key '%s': %s is %s: use "
				    "%lld..%lld",
				    k->key, v, int_ranges[i].what,
				    (long long) int_ranges[i].lo,
				    (long long) int_ranges[i].hi);
		return AX_OK;
	case CFG_DURATION:
		if (ax_duration_parse(v, &d) != AX_OK)
			return ax_err_set(AX_ECONFIG, "key '%s': %s", k->key,
			                  ax_err_detail());
		return AX_OK;
	case CFG_BOOL:
		if (strcmp(v, "true") && strcmp(v, "false") &&
		    strcmp(v, "yes") && strcmp(v, "no") && strcmp(v, "on") &&
		    strcmp(v, "off") && strcmp(v, "1") && strcmp(v, "0"))
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': '%s' is not a boolean; write true or "
			    "false",
			    k->key, v);
		return AX_OK;
	case CFG_ADDRESS:
		if (strncmp(v, "inproc://", 9) && strncmp(v, "ipc://", 6) &&
		    strncmp(v, "tcp://", 6))
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': address '%s' must start with "
			    "inproc://, ipc:// or tcp://",
			    k->key, v);
		return AX_OK;
	case CFG_NAME:
		if (name_len(v) == 0 || name_len(v) > 64 ||
		    v[name_len(v)] != '\0')
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': '%s' is not a name (letters, digits, "
			    "'_', '.', '-', up to 64)",
			    k->key, v);
		return AX_OK;
	case CFG_NAMES:
		return check_names(k, v);
	case CFG_AMOUNTS: {
		ax_res_set set;
		return ax_res_parse(v, k->key, &set);
	}
	case CFG_LABELS: {
		ax_label lab[AX_LABELS_MAX];
		size_t   n;
		if (ax_labels_parse(v, k->key, lab, AX_LABELS_MAX, &n) !=
		    AX_OK)
			return ax_err_set(AX_ECONFIG, "key %s",
			                  ax_err_detail());
		return AX_OK;
	}
	case CFG_LEVEL:
		if (ax_log_level_parse(v) < 0)
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': '%s' is not a log level; use debug, "
			    "info, warn or error",
			    k->key, v);
		return AX_OK;
	}
	return AX_OK;
}

static ax_err
set_actor(ax_config *cfg, const char *key, const char *value)
{
	static const cfg_key addr = { "actors.<name>", CFG_ADDRESS, "", "" };
	cfg_extra           *e;
	ax_err               rv;

	if (key[strlen(ACTOR_PREFIX)] == '\0' ||
	    strchr(key + strlen(ACTOR_PREFIX), '.') != NULL)
		return ax_err_set(
		    AX_ECONFIG,
		    "key '%s': write actors.<actor name>: <address>", key);
	if ((rv = check_value(&addr, value)) != AX_OK)
		return rv;
	for (e = cfg->actors; e != NULL; e = e->next) {
		if (strcmp(e->key, key) == 0) {
			char *v = strdup(value);
			if (v == NULL)
				return AX_ENOMEM;
			free(e->value);
			e->value = v;
			return AX_OK;
		}
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return AX_ENOMEM;
	e->key   = strdup(key);
	e->value = strdup(value);
	if (e->key == NULL || e->value == NULL) {
		free(e->key);
		free(e->value);
		free(e);
		return AX_ENOMEM;
	}
	e->next     = cfg->actors;
	cfg->actors = e;
	return AX_OK;
}

ax_err
ax_config_set(ax_config *cfg, const char *key, const char *value)
{
	const cfg_key *k;
	size_t         idx;
	char          *v;
	ax_err         rv;

	if (strncmp(key, ACTOR_PREFIX, strlen(ACTOR_PREFIX)) == 0)
		return set_actor(cfg, key, value);
	if ((k = find_key(key, &idx)) == NULL) {
		const char *names[N_KEYS];
		const char *s;
		for (size_t i = 0; i < N_KEYS; i++)
			names[i] = cfg_keys[i].key;
		s = ax_suggest(key, names, N_KEYS);
		return ax_err_set(AX_ECONFIG, "unknown key '%s'%s%s%s", key,
		                  s ? "; did you mean '" : "", s ? s : "",
		                  s ? "'?" : "");
	}
	if ((rv = check_value(k, value)) != AX_OK)
		return rv;
	if ((v = strdup(value)) == NULL)
		return AX_ENOMEM;
	free(cfg->values[idx]);
	cfg->values[idx] = v;
	return AX_OK;
}

static ax_err
at_node(const char *path, const yaml_node_t *n, ax_err rv)
{
	char detail[900];
	snprintf(detail, sizeof(detail), "%s", ax_err_detail());
	return ax_err_set(rv, "%s:%zu:%zu: %s", path, n->start_mark.line + 1,
	                  n->start_mark.column + 1, detail);
}

static int
is_list_key(const char *key)
{
	const cfg_key *k = find_key(key, NULL);
	return k != NULL && k->type == CFG_NAMES;
}

static int
is_amounts_key(const char *key)
{
	const cfg_key *k = find_key(key, NULL);
	return k != NULL && (k->type == CFG_AMOUNTS || k->type == CFG_LABELS);
}

/* Sets an amounts key from a YAML mapping of scalars ("a=1, b=2"). */
static ax_err
set_amounts(ax_config *cfg, yaml_document_t *doc, yaml_node_t *map,
            const char *key)
{
	size_t len = 1;
	char  *buf;
	ax_err rv;

	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(doc, p->value);
		if (kn == NULL || vn == NULL || kn->type != YAML_SCALAR_NODE ||
		    vn->type != YAML_SCALAR_NODE)
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': write a mapping of names to %s", key,
			    find_key(key, NULL)->type == CFG_LABELS
			        ? "plain values, e.g. {gpu: a100}"
			        : "whole amounts, e.g. {gpu: 2}");
		len += kn->data.scalar.length + vn->data.scalar.length + 3;
	}
	if ((buf = calloc(1, len)) == NULL)
		return AX_ENOMEM;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(doc, p->value);
		if (p != map->data.mapping.pairs.start)
			strcat(buf, ", ");
		strcat(buf, (const char *) kn->data.scalar.value);
		strcat(buf, "=");
		strcat(buf, (const char *) vn->data.scalar.value);
	}
	rv = ax_config_set(cfg, key, buf);
	free(buf);
	return rv;
}

/* Sets a list key from a YAML sequence of scalars (joined by ", "). */
static ax_err
set_list(ax_config *cfg, yaml_document_t *doc, yaml_node_t *seq,
         const char *key)
{
	size_t len = 1;
	char  *buf;
	ax_err rv;

	for (yaml_node_item_t *i = seq->data.sequence.items.start;
	     i < seq->data.sequence.items.top; i++) {
		yaml_node_t *e = yaml_document_get_node(doc, *i);
		if (e == NULL || e->type != YAML_SCALAR_NODE)
			return ax_err_set(
			    AX_ECONFIG,
			    "key '%s': items of the list must be "
			    "names, not lists or mappings",
			    key);
		len += e->data.scalar.length + 2;
	}
	if ((buf = calloc(1, len)) == NULL)
		return AX_ENOMEM;
	for (yaml_node_item_t *i = seq->data.sequence.items.start;
	     i < seq->data.sequence.items.top; i++) {
		yaml_node_t *e = yaml_document_get_node(doc, *i);
		if (i != seq->data.sequence.items.start)
			strcat(buf, ", ");
		strcat(buf, (const char *) e->data.scalar.value);
	}
	rv = ax_config_set(cfg, key, buf);
	free(buf);
	return rv;
}

/* Walks a mapping node, setting prefix.key for every scalar leaf (and
 * list keys from sequences). */
static ax_err
load_mapping(ax_config *cfg, yaml_document_t *doc, yaml_node_t *map,
             const char *prefix, const char *path, int depth)
{
	yaml_node_pair_t *p;

	if (depth > 8)
		return at_node(
		    path, map,
		    ax_err_set(AX_ECONFIG, "configuration nested too deep"));
	for (p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(doc, p->value);
		char         key[256];
		ax_err       rv;

		if (kn == NULL || vn == NULL || kn->type != YAML_SCALAR_NODE)
			return at_node(path, map,
			               ax_err_set(AX_ECONFIG,
			                          "keys must be plain names"));
		snprintf(key, sizeof(key), "%s%s%s", prefix,
		         *prefix ? "." : "", (char *) kn->data.scalar.value);
		if (vn->type == YAML_MAPPING_NODE && is_amounts_key(key)) {
			if ((rv = set_amounts(cfg, doc, vn, key)) != AX_OK)
				return at_node(path, vn, rv);
			continue;
		}
		if (vn->type == YAML_MAPPING_NODE) {
			rv = load_mapping(cfg, doc, vn, key, path, depth + 1);
			if (rv != AX_OK)
				return rv;
			continue;
		}
		if (vn->type == YAML_SEQUENCE_NODE && is_list_key(key)) {
			if ((rv = set_list(cfg, doc, vn, key)) != AX_OK)
				return at_node(path, vn, rv);
			continue;
		}
		if (vn->type != YAML_SCALAR_NODE)
			return at_node(
			    path, vn,
			    ax_err_set(
			        AX_ECONFIG,
			        "key '%s': expected a single value, not a "
			        "list",
			        key));
		rv = ax_config_set(cfg, key,
		                   (const char *) vn->data.scalar.value);
		if (rv != AX_OK)
			return at_node(path, kn, rv);
	}
	return AX_OK;
}

static ax_err
load_file(ax_config *cfg, const char *path)
{
	FILE           *f;
	yaml_parser_t   parser;
	yaml_document_t doc;
	yaml_node_t    *root;
	ax_err          rv = AX_OK;

	if ((f = fopen(path, "r")) == NULL)
		return ax_err_set(AX_ECONFIG,
		                  "cannot read configuration file %s: %s",
		                  path, strerror(errno));
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &doc)) {
		rv = ax_err_set(AX_ECONFIG, "%s:%zu:%zu: invalid YAML: %s",
		                path, parser.problem_mark.line + 1,
		                parser.problem_mark.column + 1,
		                parser.problem ? parser.problem
		                               : "syntax error");
		yaml_parser_delete(&parser);
		fclose(f);
		return rv;
	}
	root = yaml_document_get_root_node(&doc);
	if (root != NULL) {
		if (root->type == YAML_MAPPING_NODE)
			rv = load_mapping(cfg, &doc, root, "", path, 0);
		else if (root->type != YAML_SCALAR_NODE ||
		         root->data.scalar.length != 0)
			rv = at_node(
			    path, root,
			    ax_err_set(
			        AX_ECONFIG,
			        "the configuration must be a mapping of "
			        "keys"));
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	fclose(f);
	return rv;
}

/* AX_ + key upper-cased with '.' -> '_' (database.dsn -> AX_DATABASE_DSN). */
static void
env_name(const char *key, char *buf, size_t len)
{
	size_t o = (size_t) snprintf(buf, len, "AX_");
	for (const char *p = key; *p && o + 1 < len; p++)
		buf[o++] =
		    *p == '.' ? '_' : (char) toupper((unsigned char) *p);
	buf[o] = '\0';
}

static ax_err
load_env(ax_config *cfg)
{
	const char *dsn = getenv("AX_DSN");
	ax_err      rv;

	if (dsn != NULL && (rv = ax_config_set(cfg, "database.dsn", dsn)))
		return ax_err_set(rv, "environment AX_DSN: %s",
		                  ax_err_detail());
	for (size_t i = 0; i < N_KEYS; i++) {
		char        name[128];
		const char *v;
		env_name(cfg_keys[i].key, name, sizeof(name));
		if ((v = getenv(name)) == NULL)
			continue;
		if ((rv = ax_config_set(cfg, cfg_keys[i].key, v)) != AX_OK) {
			char detail[900];
			snprintf(detail, sizeof(detail), "%s",
			         ax_err_detail());
			return ax_err_set(rv, "environment %s: %s", name,
			                  detail);
		}
	}
	return AX_OK;
}

ax_err
ax_config_load(const char *path, ax_config **out)
{
	ax_config *cfg;
	ax_err     rv;

	*out = NULL;
	if ((cfg = calloc(1, sizeof(*cfg))) == NULL)
		return AX_ENOMEM;
	if ((path != NULL && (rv = load_file(cfg, path)) != AX_OK) ||
	    (rv = load_env(cfg)) != AX_OK) {
		ax_config_free(cfg);
		return rv;
	}
	*out = cfg;
	return AX_OK;
}

void
ax_config_free(ax_config *cfg)
{
	if (cfg == NULL)
		return;
	for (size_t i = 0; i < N_KEYS; i++)
		free(cfg->values[i]);
	while (cfg->actors != NULL) {
		cfg_extra *e = cfg->actors;
		cfg->actors  = e->next;
		free(e->key);
		free(e->value);
		free(e);
	}
	free(cfg);
}

const char *
ax_config_str(const ax_config *cfg, const char *key)
{
	size_t         idx;
	const cfg_key *k = find_key(key, &idx);

	if (k == NULL) {
		ax_log_error("config",
		             "unknown configuration key '%s' read "
		             "by the program",
		             key);
		return "";
	}
	if (cfg != NULL && cfg->values[idx] != NULL)
		return cfg->values[idx];
	return k->def;
}

int64_t
ax_config_int(const ax_config *cfg, const char *key)
{
	return strtoll(ax_config_str(cfg, key), NULL, 10);
}

int64_t
ax_config_duration_us(const ax_config *cfg, const char *key)
{
	int64_t us = 0;
	if (ax_duration_parse(ax_config_str(cfg, key), &us) != AX_OK)
		return 0;
	return us;
}

int
ax_config_bool(const ax_config *cfg, const char *key)
{
	const char *v = ax_config_str(cfg, key);
	return strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 ||
	    strcmp(v, "on") == 0 || strcmp(v, "1") == 0;
}

int
ax_names_has(const char *list, const char *name)
{
	const char *p  = list != NULL ? list : "";
	size_t      nl = strlen(name);

	for (;;) {
		size_t n;
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0' || (n = name_len(p)) == 0)
			return 0;
		if (n == nl && strncmp(p, name, n) == 0)
			return 1;
		p += n;
	}
}

int
ax_config_has_name(const ax_config *cfg, const char *key, const char *name)
{
	return ax_names_has(ax_config_str(cfg, key), name);
}

const char *
ax_config_actor_addr(const ax_config *cfg, const char *name, char *buf,
                     size_t len)
{
	char key[160];
	snprintf(key, sizeof(key), ACTOR_PREFIX "%s", name);
	for (cfg_extra *e = cfg ? cfg->actors : NULL; e; e = e->next) {
		if (strcmp(e->key, key) == 0) {
			snprintf(buf, len, "%s", e->value);
			return buf;
		}
	}
	snprintf(buf, len, "inproc://ax/%s", name);
	return buf;
}

void
ax_config_describe(void *file)
{
	static const char *const types[] = { "string", "int",     "duration",
		                             "bool",   "address", "level",
		                             "name",   "names",   "amounts",
		                             "labels" };
	FILE                    *f       = file;
	for (size_t i = 0; i < N_KEYS; i++) {
		char env[128];
		env_name(cfg_keys[i].key, env, sizeof(env));
		fprintf(f, "  %-24s %-8s default '%s' (env %s)\n      %s\n",
		        cfg_keys[i].key, types[cfg_keys[i].type],
		        cfg_keys[i].def, env, cfg_keys[i].help);
	}
	fprintf(f, "  %-24s %-8s default inproc://ax/<name>\n",
	        "actors.<name>", "address");
}
