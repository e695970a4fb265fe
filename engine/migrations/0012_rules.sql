-- 0012_rules.sql - Allow and Block rules (engine/rule.h has the format and
-- the precedence; docs/rules.md the operator's view).
--
-- spec is the rule as ax-api validated it with ax_rule_parse: the same
-- JSON the resource detector parses when it loads this table (at start and
-- whenever ax-api NOTIFYs ax_control with {"op": "rules"}, in the
-- transaction that changed a row). action and expires_at are copies kept
-- for listing and filtering; spec is the truth. A rule is deleted, not
-- updated: the event_log rows rule.created / rule.deleted (written in the
-- same transaction, with the token's name) are the history.

CREATE TABLE rules (
	id         bigserial   PRIMARY KEY,
	action     text        NOT NULL CHECK (action IN ('block', 'allow')),
	spec       jsonb       NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
	expires_at timestamptz,
	created_by text        NOT NULL DEFAULT ''
	                       CHECK (length(created_by) <= 250),
	token_id   bigint,
	created_at timestamptz NOT NULL DEFAULT now()
);
