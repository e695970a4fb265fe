-- 0009_token_audit.sql - token lifecycle (expiry, last use, unique names)
-- and the caller of every control command.
--
-- api_tokens: a token may expire (expires_at; NULL never): from then on
-- ax-api refuses it with 401 "expired", as it refuses a revoked one.
-- last_used_at is when ax-api last accepted it, kept to the minute: ax-api
-- writes it only when it is NULL or older than 60 s, so a busy token costs
-- one UPDATE a minute, not one per request. A name names one live (not
-- revoked) token, so "alice" in the audit trail is one credential; an
-- empty name (tokens created before names were required) is exempt.
-- Older live tokens sharing a name get their id appended, newest keeps it.
--
-- control_command: token_name and token_role record who asked, as they
-- were when the request came (a later revoke or rename does not rewrite
-- history; token_id keeps the link). When axd settles a command it writes
-- an event_log row command.applied / command.rejected carrying them
-- (engine/store_commands.c), so the event log answers "who paused this
-- DAG and when".

ALTER TABLE api_tokens
	ADD COLUMN expires_at   timestamptz,
	ADD COLUMN last_used_at timestamptz;

UPDATE api_tokens t SET name = left(t.name, 229) || '-' || t.id
WHERE t.revoked_at IS NULL AND t.name <> ''
  AND EXISTS (SELECT 1 FROM api_tokens n
              WHERE n.name = t.name AND n.revoked_at IS NULL
                AND n.id > t.id);

CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name)
	WHERE revoked_at IS NULL AND name <> '';

ALTER TABLE control_command
	ADD COLUMN token_name text CHECK (length(token_name) <= 250),
	ADD COLUMN token_role text
	           CHECK (token_role IN ('viewer', 'operator', 'admin'));
