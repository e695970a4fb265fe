-- 0014_pool_reserve_p0.sql - a named pool can keep part of its slots for
-- P0 instances (tiers, DESIGN.md 6b).
--
-- The resource detector reads pools once at start: P0 instances may use
-- all of a pool's slots, P1..P3 instances at most slots - reserve_p0, so
-- that critical links find their capacity when lower tiers fill the
-- pool. The constraint's name is the message an operator sees when a
-- reserve is out of range.
ALTER TABLE pools ADD COLUMN reserve_p0 integer NOT NULL DEFAULT 0;
ALTER TABLE pools ADD CONSTRAINT
	"pools.reserve_p0 must be 0..slots: lower it or raise slots"
	CHECK (reserve_p0 >= 0 AND reserve_p0 <= slots);
