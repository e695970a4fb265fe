-- 0007_control_commands.sql - durable control: every state-changing API
-- request (submit, trigger, backfill, pause, unpause, kill, clear, mark)
-- is one row, written in the request's transaction.
--
-- ax-api inserts the row (status pending) together with whatever the
-- request writes itself, then NOTIFYs ax_control only to wake axd. axd's
-- control thread forwards every pending row, in id order, when it starts,
-- after its LISTEN connection comes back, and on each notification; the
-- actor that carries the command out sets status applied (with result,
-- e.g. {"run_id": N}) or rejected (with a reason a user can act on) in
-- the transaction of the effect, only while the row is still pending, so
-- a command sent while no axd listens is applied at the next start, and
-- a command forwarded twice is applied once.
--
-- Idempotency-Key: (token_id, idempotency_key) is unique; request_sha256
-- is the hash of the request (method, path, query, body) and response /
-- response_status the first answer, which a repeat with the same key and
-- the same request gets again without a second effect.

CREATE TABLE control_command (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind            text        NOT NULL
	                CHECK (kind IN ('submit', 'trigger', 'backfill',
	                                'pause', 'unpause', 'kill', 'clear',
	                                'mark')),
	body            jsonb       NOT NULL DEFAULT '{}',
	token_id        bigint      REFERENCES api_tokens (id)
	                ON DELETE SET NULL,
	actor           text        CHECK (length(actor) <= 300),
	idempotency_key text        CHECK (length(idempotency_key)
	                                   BETWEEN 1 AND 255),
	request_sha256  text        CHECK (request_sha256 ~ '^[0-9a-f]{64}$'),
	response_status int,
	response        jsonb,
	status          text        NOT NULL DEFAULT 'pending'
	                CHECK (status IN ('pending', 'applied', 'rejected')),
	result          jsonb,
	reason          text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	applied_at      timestamptz,
	applied_epoch   bigint,
	CHECK ((status = 'pending') = (applied_at IS NULL)),
	CHECK (status <> 'rejected' OR reason IS NOT NULL)
);

-- one first answer per key and token (a NULL token: API without auth)
CREATE UNIQUE INDEX control_command_idem
	ON control_command (coalesce(token_id, 0), idempotency_key)
	WHERE idempotency_key IS NOT NULL;

-- axd reads only what is pending: a small, hot partial index
CREATE INDEX control_command_pending
	ON control_command (id) WHERE status = 'pending';
