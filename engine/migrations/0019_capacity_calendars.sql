-- capacity_calendars.sql - time sharing (issue 13): the capacity of a
-- pool or worker group by time of day in a time zone (engine/calendar.h
-- has the format), e.g. 1 GPU slot for batch work from 08:00 to 20:00
-- and 7 from 20:00 to 08:00. The name applies to the pool and to the
-- worker group of that name, as for pool_pressure. ax-api writes a row
-- with PUT /api/v1/pools/{name}/calendar (validated by the same parser
-- axd uses), its event pool.calendar_set (with the token's name) and the
-- NOTIFY ax_control {"op": "calendar"} in one statement; axd's resource
-- detector then reads the table again.
CREATE TABLE capacity_calendars (
	name       text        PRIMARY KEY
	                       CHECK (length(name) BETWEEN 1 AND 250),
	spec       jsonb       NOT NULL,
	set_by     text        NOT NULL DEFAULT ''
	                       CHECK (length(set_by) <= 250),
	token_id   bigint,
	updated_at timestamptz NOT NULL DEFAULT now()
);
