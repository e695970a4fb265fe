-- 0004_component_stats.sql - counters that a long-running process (axd)
-- keeps in memory and publishes cheaply for other processes (ax-api's
-- /metrics): one row per (component, key), upserted every few seconds by
-- the owner. First user: the event emitter's sinks, component
-- 'event_sink.<sink>' (event_log, pub, openlineage), keys 'delivered',
-- 'retries', 'dropped.<reason>'. Values are the owner's counters since it
-- started (a restart resets them, like any Prometheus counter).

CREATE TABLE component_stats (
	component  text        NOT NULL,
	key        text        NOT NULL,
	value      bigint      NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (component, key)
);
