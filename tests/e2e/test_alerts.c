/*
 * test_alerts.c - alerts by impact end to end: the real axd and an
 * ax-worker on a throwaway PostgreSQL, a real Alertmanager (Debian's
 * prometheus-alertmanager on a free loopback port, temporary storage,
 * clustering off) whose webhook receiver is this test (tests/http_rx.h),
 * and axd's direct webhook to the same receiver:
 *  - a P0 task that fails after its last retry reaches the receiver
 *    through Alertmanager with impact, owner and reason labels; its
 *    first (retried) failure alerts nobody;
 *  - the direct webhook gets the same alert as plain JSON;
 *  - a P3 task that times out, then succeeds on its retry: the timeout
 *    fires and is resolved (endsAt) on both paths;
 *  - a P1 task RUNNING past alerts.stuck_after alerts as stuck once,
 *    and is resolved when it ends;
 *  - the leader's session terminated: AxSchedulerNoLease (LEASE_LOST),
 *    resolved once the axd leads again;
 *  - amtool accepts deploy/alertmanager/alertmanager.yml and routes P0 to
 *    the pager, P1 to the team, P2 and P3 to the daily digest.
 * Alertmanager's group_wait is 100 ms and group_interval 1 s here, so
 * the whole case takes about 20 s.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "e2e_harness.h"
#include "http_rx.h"

#define AM_BIN     "/usr/bin/prometheus-alertmanager"
#define AMTOOL_BIN "/usr/bin/amtool"

static ax_e2e    *e;
static ax_http_rx rx = AX_HTTP_RX_INIT;
static pid_t      am_pid;
static char       am_dir[64];

/* A loopback port nobody listens on now. */
static unsigned
free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t          n = sizeof(a);
	int                s = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr    = htonl(INADDR_LOOPBACK);
	cr_assert(s >= 0 && bind(s, (struct sockaddr *) &a, sizeof(a)) == 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *) &a, &n), 0);
	close(s);
	return ntohs(a.sin_port);
}

static int
port_open(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
		                 .sin_port   = htons((uint16_t) port) };
	int                s = socket(AF_INET, SOCK_STREAM, 0), ok;
	a.sin_addr.s_addr    = htonl(INADDR_LOOPBACK);
	ok = connect(s, (struct sockaddr *) &a, sizeof(a)) == 0;
	close(s);
	return ok;
}

/* Starts Alertmanager on port with one webhook receiver (hook). */
static void
am_start(unsigned port, const char *hook)
{
	char cfg[128], yml[1024], a_cfg[160], a_st[160], a_web[64], log[128];

	snprintf(am_dir, sizeof(am_dir), "/tmp/ax-am-XXXXXX");
	cr_assert_not_null(mkdtemp(am_dir));
	snprintf(cfg, sizeof(cfg), "%s/am.yml", am_dir);
	snprintf(yml, sizeof(yml),
	         "route:\n  receiver: rx\n  group_by: [alertname, dag, task]\n"
	         "  group_wait: 100ms\n  group_interval: 1s\n"
	         "  repeat_interval: 1h\n"
	         "receivers:\n  - name: rx\n    webhook_configs:\n"
	         "      - url: %s\n        send_resolved: true\n",
	         hook);
	FILE *f = fopen(cfg, "w");
	cr_assert_not_null(f);
	fputs(yml, f);
	fclose(f);
	snprintf(a_cfg, sizeof(a_cfg), "--config.file=%s", cfg);
	snprintf(a_st, sizeof(a_st), "--storage.path=%s/data", am_dir);
	snprintf(a_web, sizeof(a_web), "--web.listen-address=127.0.0.1:%u",
	         port);
	snprintf(log, sizeof(log), "%s/am.log", am_dir);
	am_pid = fork();
	cr_assert(am_pid >= 0);
	if (am_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(AM_BIN, AM_BIN, a_cfg, a_st, a_web,
		      "--cluster.listen-address=", "--log.level=info",
		      (char *) NULL);
		_exit(127);
	}
	int64_t end = ax_clock_mono_us() + 15 * AX_USEC_PER_SEC;
	while (!port_open(port) && ax_clock_mono_us() < end)
		ax_clock_sleep_us(50000);
	cr_assert(port_open(port), "Alertmanager did not listen on %u (%s)",
	          port, log);
}

static void
am_stop(void)
{
	char cmd[128];
	if (am_pid > 0) {
		kill(am_pid, SIGTERM);
		waitpid(am_pid, NULL, 0);
		am_pid = 0;
	}
	if (am_dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", am_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "test_alerts: cannot remove %s\n",
			        am_dir);
		am_dir[0] = '\0';
	}
}

static void
setup(void)
{
	e = NULL;
}

static void
teardown(void)
{
	ax_e2e_free(e);
	e = NULL;
	am_stop();
	ax_http_rx_reset(&rx);
}

TestSuite(alerts, .init = setup, .fini = teardown, .timeout = 120);

/* 1 when o's string member k equals want. */
static int str_is(json_t *o, const char *k, const char *want);

/* The alerts of the recorded bodies at path whose labels match
 * alertname, dag and status ("firing" / "resolved"): a new array of
 * copies (json_decref it). AM and AX's webhook both put a status on
 * each alert. */
static json_t *
alerts_at(const char *path, const char *alertname, const char *dag,
          const char *status)
{
	json_t *out = json_array();
	pthread_mutex_lock(&rx.mu);
	for (int i = 0; i < rx.nbody; i++) {
		if (strcmp(rx.path[i], path) != 0)
			continue;
		json_t *b = json_loads(rx.body[i], 0, NULL);
		size_t  k;
		json_t *a;
		json_array_foreach(json_object_get(b, "alerts"), k, a)
		{
			json_t *l      = json_object_get(a, "labels");
			int     dag_ok = dag[0] != '\0'
			        ? str_is(l, "dag", dag)
			        : json_object_get(l, "dag") == NULL;
			if (str_is(l, "alertname", alertname) && dag_ok &&
			    str_is(a, "status", status))
				json_array_append(out, a);
		}
		json_decref(b);
	}
	pthread_mutex_unlock(&rx.mu);
	return out;
}

/* Waits up to secs for an alert like alerts_at's; returns the first. */
static json_t *
wait_alert(const char *path, const char *alertname, const char *dag,
           const char *status, double secs)
{
	int64_t end = ax_clock_mono_us() + (int64_t) (secs * 1e6);
	for (;;) {
		json_t *arr = alerts_at(path, alertname, dag, status);
		if (json_array_size(arr) > 0) {
			json_t *a = json_incref(json_array_get(arr, 0));
			json_decref(arr);
			return a;
		}
		json_decref(arr);
		if (ax_clock_mono_us() > end)
			break;
		ax_clock_sleep_us(100000);
	}
	ax_e2e_dump(e);
	pthread_mutex_lock(&rx.mu);
	for (int i = 0; i < rx.nbody; i++)
		fprintf(stderr, "received %s: %s\n", rx.path[i], rx.body[i]);
	pthread_mutex_unlock(&rx.mu);
	cr_assert_fail("no %s %s alert for %s at %s within %.0f s", status,
	               alertname, dag, path, secs);
	return NULL;
}

/* 1 when o's string member k equals want. */
static int
str_is(json_t *o, const char *k, const char *want)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v != NULL && strcmp(v, want) == 0;
}

static const char *
lbl(json_t *a, const char *k)
{
	const char *v = json_string_value(
	    json_object_get(json_object_get(a, "labels"), k));
	return v != NULL ? v : "(none)";
}

Test(alerts, through_alertmanager_and_the_webhook_by_impact)
{
	unsigned rxport, amport = free_port();
	char     hook[96], yaml[10240], extra[512], at[32], reason[64];

	struct MHD_Daemon *d = ax_http_rx_start(&rx, &rxport);
	snprintf(hook, sizeof(hook), "http://127.0.0.1:%u/am", rxport);
	am_start(amport, hook);
	snprintf(extra, sizeof(extra),
	         "alerts:\n  alertmanager_url: http://127.0.0.1:%u\n"
	         "  webhook_url: http://127.0.0.1:%u/direct\n"
	         "  link_url: http://ax.example:8080\n"
	         "  stuck_after: 2s\n  stuck_check: 300ms\n",
	         amport, rxport);
	e = ax_e2e_new(1, extra);
	snprintf(yaml, sizeof(yaml),
	         "kind: DAG\nname: al.fail\nimpact: P0\nowner: team-pay\n"
	         "schedule: {at: \"%s\"}\ntasks:\n"
	         "  - name: load\n    command: \"exit 3\"\n"
	         "    retries: {count: 1, delay: 1s}\n"
	         "---\n"
	         "kind: DAG\nname: al.slow\nimpact: P3\nowner: team-bi\n"
	         "schedule: {at: \"%s\"}\ntasks:\n"
	         "  - name: t\n"
	         "    command: \"test -f %s/slow.mark || { touch "
	         "%s/slow.mark; sleep 30; }\"\n"
	         "    timeout: 1s\n    retries: {count: 1, delay: 1s}\n"
	         "---\n"
	         "kind: DAG\nname: al.stuck\nimpact: P1\nowner: team-ops\n"
	         "schedule: {at: \"%s\"}\ntasks:\n"
	         "  - {name: long, command: \"sleep 4\"}\n",
	         ax_e2e_at(2, at, sizeof(at)), at, e->st.home, e->st.home, at);
	ax_e2e_load(e, "alerts", NULL, yaml);
	ax_e2e_start_axd(e);
	ax_e2e_start_workers(e);

	/* P0, last attempt failed: through Alertmanager */
	json_t *a = wait_alert("/am", "AxTaskFailed", "al.fail", "firing", 40);
	ax_e2e_text(e, reason, sizeof(reason),
	            "SELECT coalesce(nullif(e.reason, ''), 'FAILED') FROM "
	            "event_log e JOIN dags d ON d.id = e.dag_id WHERE d.name "
	            "= 'al.fail' AND e.type = 'instance.failed' ORDER BY e.id "
	            "DESC LIMIT 1");
	cr_assert_str_eq(lbl(a, "impact"), "P0");
	cr_assert_str_eq(lbl(a, "severity"), "critical");
	cr_assert_str_eq(lbl(a, "owner"), "team-pay");
	cr_assert_str_eq(lbl(a, "task"), "load");
	cr_assert_str_eq(lbl(a, "reason"), reason);
	cr_assert_not_null(
	    strstr(json_string_value(json_object_get(
	               json_object_get(a, "annotations"), "explain")),
	           "axctl explain instance "));
	json_decref(a);
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(*) FROM attempts a JOIN "
	                        "task_instances t ON t.id = a.instance_id "
	                        "JOIN dags d ON d.id = t.dag_id WHERE d.name "
	                        "= 'al.fail'"),
	             2, "two attempts: the alert came after the last");

	/* the direct webhook: the same alert, once (attempt 1 was retried) */
	a = wait_alert("/direct", "AxTaskFailed", "al.fail", "firing", 10);
	cr_assert_str_eq(lbl(a, "impact"), "P0");
	cr_assert_str_eq(lbl(a, "owner"), "team-pay");
	cr_assert_str_eq(lbl(a, "reason"), reason);
	const char *gen =
	    json_string_value(json_object_get(a, "generatorURL"));
	cr_assert(gen != NULL &&
	              strncmp(gen, "http://ax.example:8080/api/v1/instances/",
	                      40) == 0,
	          "generatorURL %s", gen ? gen : "(none)");
	json_decref(a);
	json_t *all =
	    alerts_at("/direct", "AxTaskFailed", "al.fail", "firing");
	cr_assert_eq(json_array_size(all), 1,
	             "one alert: the retried attempt paged nobody");
	json_decref(all);

	/* P3 timeout, then success on the retry: fired, then resolved */
	a = wait_alert("/direct", "AxTaskTimeout", "al.slow", "firing", 30);
	cr_assert_str_eq(lbl(a, "impact"), "P3");
	cr_assert_str_eq(lbl(a, "severity"), "info");
	cr_assert_str_eq(lbl(a, "owner"), "team-bi");
	cr_assert_str_eq(lbl(a, "reason"), "TIMEOUT_EXEC");
	json_decref(a);
	a = wait_alert("/direct", "AxTaskTimeout", "al.slow", "resolved", 30);
	cr_assert_not_null(json_object_get(a, "endsAt"));
	json_decref(a);
	a = wait_alert("/am", "AxTaskTimeout", "al.slow", "resolved", 30);
	cr_assert_str_eq(lbl(a, "owner"), "team-bi");
	json_decref(a);

	/* RUNNING past alerts.stuck_after (2 s): stuck, resolved once it
	 * has ended */
	a = wait_alert("/direct", "AxInstanceStuck", "al.stuck", "firing", 20);
	cr_assert_str_eq(lbl(a, "reason"), "STUCK_RUNNING");
	cr_assert_str_eq(lbl(a, "impact"), "P1");
	cr_assert_str_eq(lbl(a, "owner"), "team-ops");
	cr_assert_str_eq(lbl(a, "task"), "long");
	json_decref(a);
	a = wait_alert("/direct", "AxInstanceStuck", "al.stuck", "resolved",
	               20);
	json_decref(a);
	all = alerts_at("/direct", "AxInstanceStuck", "al.stuck", "firing");
	cr_assert_eq(json_array_size(all), 1, "alerted once, not per check");
	json_decref(all);

	/* the leader session ends (as when PostgreSQL drops it): the axd
	 * alerts LEASE_LOST, takes the lease again and resolves it */
	cr_assert_eq(ax_e2e_int(e,
	                        "SELECT count(pg_terminate_backend(pid)) FROM "
	                        "pg_locks WHERE locktype = 'advisory' AND "
	                        "classid = 1096315747::oid AND objid = "
	                        "1751475200::oid"),
	             1, "the leader session");
	a = wait_alert("/direct", "AxSchedulerNoLease", "", "firing", 20);
	cr_assert_str_eq(lbl(a, "reason"), "LEASE_LOST");
	cr_assert_str_eq(lbl(a, "impact"), "P0");
	cr_assert_str_neq(lbl(a, "instance"), "(none)");
	json_decref(a);
	a = wait_alert("/direct", "AxSchedulerNoLease", "", "resolved", 20);
	json_decref(a);

	teardown();
	MHD_stop_daemon(d);
}

/* Runs cmd (through sh) and returns its output (first line) in out. */
static int
run(const char *cmd, char *out, size_t n)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	out[0] = '\0';
	if (fgets(out, (int) n, p) != NULL)
		out[strcspn(out, "\n")] = '\0';
	while (fgetc(p) != EOF)
		;
	return pclose(p);
}

Test(alerts, shipped_route_pages_p0_and_digests_p2_p3)
{
	const char              *yml = getenv("AX_ALERTMANAGER_YML");
	char                     cmd[1024], out[256];
	static const char *const want[][2] = {
		{ "P0", "pager" },
		{ "P1", "team" },
		{ "P2", "digest" },
		{ "P3", "digest" },
	};

	cr_assert_not_null(yml, "AX_ALERTMANAGER_YML is not set");
	snprintf(cmd, sizeof(cmd), AMTOOL_BIN " check-config '%s' 2>&1", yml);
	cr_assert_eq(run(cmd, out, sizeof(out)), 0, "amtool check-config: %s",
	             out);
	for (size_t i = 0; i < 4; i++) {
		snprintf(cmd, sizeof(cmd),
		         AMTOOL_BIN " config routes test --config.file='%s' "
		                    "alertname=AxTaskFailed impact=%s dag=d "
		                    "2>/dev/null",
		         yml, want[i][0]);
		cr_assert_eq(run(cmd, out, sizeof(out)), 0);
		cr_assert_str_eq(out, want[i][1], "impact %s", want[i][0]);
	}
}
