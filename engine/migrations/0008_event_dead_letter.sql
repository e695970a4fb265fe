-- 0008_event_dead_letter.sql - events that event_log refused.
--
-- The event emitter writes event_log in batches. When PostgreSQL refuses a
-- batch for its content (SQLSTATE class 22 data exception, 23 integrity,
-- 54 program limit: an invalid UTF-8 byte, a \u0000 in a payload, a
-- timestamp out of range), the emitter isolates the rows it refuses and
-- writes the rest; each refused event is kept here, with the envelope as
-- it arrived (the ax.Event protobuf, proto/events.proto) and PostgreSQL's
-- error, and counted (component_stats 'event_sink.event_log' /
-- 'dead_lettered', ax_events_dead_lettered_total on ax-api's /metrics).
-- An operator reads, repairs and deletes rows here; nothing in AX reads
-- them back. A database outage is not a refusal: nothing lands here then.

CREATE TABLE event_dead_letter (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id   uuid,            -- the envelope's id; NULL when not a uuid
	envelope   bytea NOT NULL,  -- the ax.Event as the emitter received it
	error      text NOT NULL,   -- why event_log refused it
	created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX event_dead_letter_created_idx
	ON event_dead_letter USING brin (created_at);
