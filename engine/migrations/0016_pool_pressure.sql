-- pool_pressure.sql - water levels pushed by the platform per pool or
-- worker group (DESIGN.md 6b): usage AX cannot see itself, such as a YARN
-- queue's or a Kubernetes namespace's, with an expiry.
--
-- ax-api writes a row with PUT /api/v1/pools/{name}/pressure (one row per
-- name: a new push replaces the old), its event pool.pressure_set (with the
-- token's name) and the NOTIFY ax_control {"op": "pressure"} in one
-- statement; axd's resource detector then reads the rows that have not
-- expired. level is a fraction of capacity, 0..1; the name applies to the
-- pool and to the worker group of that name. An expired row is ignored; it
-- stays until the next push or a DELETE, so GET still shows the last one.
CREATE TABLE pool_pressure (
	name       text        PRIMARY KEY
	                       CHECK (length(name) BETWEEN 1 AND 250),
	level      double precision NOT NULL
	                       CHECK (level >= 0 AND level <= 1),
	expires_at timestamptz NOT NULL,
	set_by     text        NOT NULL DEFAULT ''
	                       CHECK (length(set_by) <= 250),
	token_id   bigint,
	updated_at timestamptz NOT NULL DEFAULT now()
);
