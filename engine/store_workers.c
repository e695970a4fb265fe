/*
 * store_workers.c - batched upsert of the workers table (see
 * store_workers.h).
 *
 * lease_expires_at is written on the database clock (the time of the
 * write plus the lease the queue gives): a later axd, maybe on another
 * host, compares it with now() to know how long the worker may still
 * run its tasks.
 */
#include "store_workers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

#define STMT "ax_workers_upsert"
#define SQL                                                                   \
	"INSERT INTO workers (id, worker_group, slots, used_slots, "          \
	"hostname, "                                                          \
	"pid, state, registered_at, last_heartbeat_at, lease_expires_at, "    \
	"load_x100, cpus, mem_total_kb, mem_available_kb, tasks_cpu_milli, "  \
	"tasks_rss_kb) "                                                      \
	"SELECT i, g, s, u, h, p, st, ax_ts(r), ax_ts(hb), "                  \
	"now() + (le - hb) * interval '1 microsecond', "                      \
	"ld, nc, mt, ma, tc, tr "                                             \
	"FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], "          \
	"$5::text[], $6::int[], $7::text[], $8::bigint[], $9::bigint[], "     \
	"$10::bigint[], $11::int[], $12::int[], $13::bigint[], "              \
	"$14::bigint[], $15::int[], $16::bigint[]) "                          \
	"AS t(i, g, s, u, h, p, st, r, hb, le, ld, nc, mt, ma, tc, tr) "      \
	"ON CONFLICT (id) DO UPDATE SET worker_group = "                      \
	"EXCLUDED.worker_group, "                                             \
	"slots = EXCLUDED.slots, used_slots = EXCLUDED.used_slots, "          \
	"hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, "                  \
	"state = EXCLUDED.state, registered_at = EXCLUDED.registered_at, "    \
	"last_heartbeat_at = EXCLUDED.last_heartbeat_at, "                    \
	"lease_expires_at = EXCLUDED.lease_expires_at, "                      \
	"load_x100 = coalesce(EXCLUDED.load_x100, workers.load_x100), "       \
	"cpus = coalesce(EXCLUDED.cpus, workers.cpus), "                      \
	"mem_total_kb = coalesce(EXCLUDED.mem_total_kb, "                     \
	"workers.mem_total_kb), "                                             \
	"mem_available_kb = coalesce(EXCLUDED.mem_available_kb, "             \
	"workers.mem_available_kb), "                                         \
	"tasks_cpu_milli = coalesce(EXCLUDED.tasks_cpu_milli, "               \
	"workers.tasks_cpu_milli), "                                          \
	"tasks_rss_kb = coalesce(EXCLUDED.tasks_rss_kb, "                     \
	"workers.tasks_rss_kb)"
#define NCOLS 16

static ax_err
check_row(const ax_store_worker_row *r, size_t i)
{
	static const char *const states[] = { "ACTIVE", "DRAINING", "LOST",
		                              "GONE" };
	int                      ok       = 0;
	if (r->id == NULL || *r->id == '\0')
		return ax_err_set(AX_EINVAL, "workers row %zu: empty id", i);
	if (r->worker_group == NULL || *r->worker_group == '\0')
		return ax_err_set(AX_EINVAL,
		                  "workers row %zu (%s): empty worker_group",
		                  i, r->id);
	if (r->has_usage &&
	    (r->load_x100 < 0 || r->cpus < 0 || r->tasks_cpu_milli < 0 ||
	     r->mem_total_kb < 0 || r->mem_available_kb < 0 ||
	     r->tasks_rss_kb < 0))
		return ax_err_set(AX_EINVAL,
		                  "workers row %zu (%s): negative usage", i,
		                  r->id);
	if (r->slots < 0 || r->used_slots < 0)
		return ax_err_set(AX_EINVAL,
		                  "workers row %zu (%s): negative slots", i,
		                  r->id);
	for (size_t k = 0; k < 4; k++)
		if (r->state != NULL && strcmp(r->state, states[k]) == 0)
			ok = 1;
	if (!ok)
		return ax_err_set(
		    AX_EINVAL,
		    "workers row %zu (%s): state '%s'; use ACTIVE, "
		    "DRAINING, LOST or GONE",
		    i, r->id, r->state ? r->state : "(null)");
	return AX_OK;
}

ax_err
ax_store_workers_upsert(ax_store *s, const ax_store_worker_row *rows, size_t n)
{
	ax_sqlarr   a[NCOLS] = { 0 };
	const char *p[NCOLS];
	ax_err      rv;

	if (n == 0)
		return AX_OK;
	if (n > AX_STORE_BATCH_MAX)
		return ax_store_batch_check(n, "workers upsert");
	for (size_t i = 0; i < n; i++)
		if ((rv = check_row(&rows[i], i)) != AX_OK)
			return rv;
	for (size_t i = 0; i < n; i++) {
		const ax_store_worker_row *r = &rows[i];
		ax_sqlarr_text(&a[0], r->id);
		ax_sqlarr_text(&a[1], r->worker_group);
		ax_sqlarr_int(&a[2], r->slots);
		ax_sqlarr_int(&a[3], r->used_slots);
		ax_sqlarr_text(&a[4], r->hostname);
		ax_sqlarr_int(&a[5], r->pid);
		ax_sqlarr_text(&a[6], r->state);
		ax_sqlarr_int(&a[7], r->registered_at_us);
		ax_sqlarr_int(&a[8], r->heartbeat_at_us);
		ax_sqlarr_int(&a[9], r->lease_expires_at_us);
		if (r->has_usage) {
			ax_sqlarr_int(&a[10], r->load_x100);
			ax_sqlarr_int(&a[11], r->cpus);
			ax_sqlarr_int(&a[12], r->mem_total_kb);
			ax_sqlarr_int(&a[13], r->mem_available_kb);
			ax_sqlarr_int(&a[14], r->tasks_cpu_milli);
			ax_sqlarr_int(&a[15], r->tasks_rss_kb);
		} else
			for (int k = 10; k < 16; k++)
				ax_sqlarr_text(&a[k], NULL);
	}
	if ((rv = ax_sqlarr_end_all(a, p, NCOLS)) == AX_OK &&
	    (rv = ax_store_prepare_once(s, STMT, SQL, NCOLS)) == AX_OK)
		rv = ax_store_write(s, STMT, NULL, NCOLS, p, NULL);
	ax_sqlarr_fini_all(a, NCOLS);
	return rv;
}
