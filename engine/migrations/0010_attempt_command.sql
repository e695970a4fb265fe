-- 0010_attempt_command.sql - the command each attempt ran, as rendered.
--
-- The renderer writes every template value into a bash command quoted
-- as one shell word (engine/shell_quote.h); the exact text handed to the
-- worker is kept here when the attempt is dispatched, so that
-- `GET /api/v1/instances/{id}` and `axctl instance show` print the
-- command exactly as it was executed. NULL for attempts dispatched
-- before this column existed, and for those never dispatched.

ALTER TABLE attempts ADD COLUMN command text;
