/*
 * bench_timers.c - `axctl bench --scenario timers`: time to arm N
 * schedules and the RSS of axd holding them.
 *
 * One DAG with a monthly cron loaded normally, then cloned N-1 times
 * with one INSERT ... SELECT generate_series per table (a million YAML
 * submissions would take an hour). Clone g fires monthly, `S M H D * ?`
 * with S, M, H, D taken from k = g mod --timer-specs (g by default:
 * distinct for the first 2,419,200), so by default the wheel holds N
 * distinct deadlines and no two schedules share a compiled cron: the
 * worst case for memory. axd starts twice: first over the bare versions
 * (it writes every schedules row), then again (nothing to write: an
 * ordinary restart). Each start prints the time from exec to every
 * schedule armed (the time detector's "loader pass complete" line) and
 * axd's RSS once it is stable for 5 s; the peak RSS (VmHWM) is the
 * reported rss_mb.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_run.h"
#include "clock.h"

/*
 * Waits until axd's log holds needle (appended after offset); returns the
 * seconds since t0, or -1 when axd died or deadline passed.
 */
static double
wait_log(ax_bench *b, const char *needle, long offset, int64_t t0,
         int64_t deadline)
{
	char line[4096];

	while (ax_clock_mono_us() < deadline) {
		FILE *f   = fopen(b->st.axd.log_path, "r");
		int   hit = 0;
		if (f != NULL) {
			if (fseek(f, offset, SEEK_SET) == 0)
				while (!hit && fgets(line, sizeof(line), f))
					hit = strstr(line, needle) != NULL;
			fclose(f);
		}
		if (hit)
			return (double) (ax_clock_mono_us() - t0) / 1e6;
		if (ax_bench_children_dead(b))
			return -1;
		ax_clock_sleep_us(100 * AX_USEC_PER_MSEC);
	}
	fprintf(stderr, "axctl bench: no '%s' in %s in time\n", needle,
	        b->st.axd.log_path);
	return -1;
}

static long
file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (long) sb.st_size : 0;
}

/* One start of axd over the timers: time to all armed, stable RSS. */
static int
timers_start(ax_bench *b, const char *what)
{
	char    log[PATH_MAX + 32];
	double  armed, last = -1, cur;
	int     stable = 0;
	long    off;
	int64_t t0;

	snprintf(log, sizeof(log), "%s/logs/axd.log", b->h.home);
	off = file_size(log);
	t0  = ax_clock_mono_us();
	if (ax_bench_start_stack(b, 0)) {
		ax_bench_stop_stack(b);
		return 1;
	}
	armed = wait_log(b, "loader pass complete", off, t0,
	                 t0 + 900 * AX_USEC_PER_SEC);
	if (armed < 0) {
		ax_bench_stop_stack(b);
		return 1;
	}
	/* then until the RSS is flat (the registry warms up meanwhile) */
	for (int s = 0; s < 300 && stable < 5; s++) {
		if (ax_bench_children_dead(b)) {
			ax_bench_stop_stack(b);
			return 1;
		}
		ax_clock_sleep_us(AX_USEC_PER_SEC);
		cur    = ax_bench_rss_mb(b->st.axd.pid, "VmRSS:");
		stable = (last > 0 && cur >= 0 && cur < last * 1.01 &&
		          cur > last * 0.99)
		    ? stable + 1
		    : 0;
		last   = cur;
	}
	fprintf(stderr,
	        "timers: %s: %d schedules armed %.1f s after axd started; "
	        "axd RSS %.1f MB, peak %.1f MB\n",
	        what, b->o.timers, armed, last,
	        ax_bench_rss_mb(b->st.axd.pid, "VmHWM:"));
	ax_bench_stop_stack(b);
	return 0;
}

int
ax_bench_run_timers(ax_bench *b)
{
	char    dir[PATH_MAX + 32], path[PATH_MAX + 64], q[4096];
	FILE   *f;
	int64_t t0;

	if (b->o.timer_specs > 0)
		fprintf(stderr,
		        "timers: arming %d monthly schedules over %d distinct "
		        "instants\n",
		        b->o.timers, b->o.timer_specs);
	else
		fprintf(stderr,
		        "timers: arming %d schedules, each monthly at its own "
		        "instant\n",
		        b->o.timers);
	snprintf(dir, sizeof(dir), "%s/bench-timers", b->h.home);
	snprintf(path, sizeof(path), "%s/timer.yaml", dir);
	if (ax_bench_fresh_tables(b))
		return 1;
	if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
	    (f = fopen(path, "w")) == NULL)
		return ax_bench_fail(
		    "write",
		    ax_err_set(AX_EIO, "%s: %s", path, strerror(errno)));
	fputs("kind: DAG\nname: bench.timer.0000000\n"
	      "schedule: {cron: \"0 0 0 1 * ?\", timezone: UTC}\n"
	      "tasks:\n  - {name: t, type: noop, command: \"/bin/true\"}\n",
	      f);
	fclose(f);
	if (ax_stack_load_dags(dir, b->h.w.dsn) != 0)
		return 1;
	t0 = ax_clock_mono_us();
	/* clone g: cron "S M H D * ?" from k = g mod --timer-specs (g when
	 * 0), in the YAML and the JSON */
	snprintf(
	    q, sizeof(q),
	    "BEGIN;"
	    "INSERT INTO dags (name) SELECT 'bench.timer.' || "
	    "lpad(g::text, 7, '0') FROM generate_series(1, %d) g;"
	    "INSERT INTO dag_versions (dag_id, version, content_hash, yaml, "
	    "definition, source) SELECT d.id, 1, "
	    "encode(sha256(convert_to(d.name, 'UTF8')), 'hex'), "
	    "replace(replace(v.yaml, 'bench.timer.0000000', d.name), "
	    "'0 0 0 1 * ?', c.cron), "
	    "jsonb_set(jsonb_set(v.definition, '{name}', to_jsonb(d.name)), "
	    "'{schedule,cron}', to_jsonb(c.cron)), 'bench' "
	    "FROM dags d CROSS JOIN LATERAL (SELECT substr(d.name, 13)::int "
	    "%% %d AS g) n CROSS JOIN LATERAL (SELECT format('%%s %%s %%s %%s "
	    "* ?', "
	    "n.g %% 60, n.g / 60 %% 60, n.g / 3600 %% 24, "
	    "1 + n.g / 86400 %% 28) AS cron) c, "
	    "dag_versions v JOIN dags d0 ON d0.active_version_id "
	    "= v.id AND d0.name = 'bench.timer.0000000' "
	    "WHERE d.active_version_id IS NULL;"
	    "UPDATE dags d SET active_version_id = v.id FROM dag_versions v "
	    "WHERE v.dag_id = d.id AND d.active_version_id IS NULL;"
	    "COMMIT;",
	    b->o.timers - 1,
	    b->o.timer_specs > 0 ? b->o.timer_specs : b->o.timers);
	if (ax_bench_sql(b, q))
		return 1;
	fprintf(stderr,
	        "timers: %d DAGs inserted in %.1f s (%.0f distinct crons); "
	        "starting axd\n",
	        b->o.timers, (double) (ax_clock_mono_us() - t0) / 1e6,
	        ax_bench_sql_num(b,
	                         "SELECT count(DISTINCT schedule_expr) FROM "
	                         "dag_versions"));
	b->log_level = "info"; /* the time detector's pass line */
	if (timers_start(b, "first start (writes every schedules row)") ||
	    timers_start(b, "restart"))
		return 1;
	fprintf(stderr,
	        "timers: %.0f schedules rows, %.0f distinct next fire "
	        "instants\n",
	        ax_bench_sql_num(b, "SELECT count(*) FROM schedules"),
	        ax_bench_sql_num(b,
	                         "SELECT count(DISTINCT next_fire_at) FROM "
	                         "schedules"));
	return 0;
}
