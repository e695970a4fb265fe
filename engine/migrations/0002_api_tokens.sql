-- 0002_api_tokens.sql - bearer tokens of the HTTP API (ax-api).
--
-- A token is shown once when created (`axctl token create`,
-- `axctl standalone`) and only its SHA-256 (hex) is stored, so a leaked
-- database dump does not leak usable tokens. Roles are ordered
-- viewer < operator < admin; every API route names the least role it
-- needs. A revoked token (revoked_at set) is refused like an unknown one.

CREATE TABLE api_tokens (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name       text NOT NULL DEFAULT ''
	           CHECK (length(name) <= 250),
	role       text NOT NULL
	           CHECK (role IN ('viewer', 'operator', 'admin')),
	hash       text NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
	created_at timestamptz NOT NULL DEFAULT now(),
	revoked_at timestamptz
);
