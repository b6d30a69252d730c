-- 002: (1) a room's compact record keeps the outcome it was settled with, so that a result that
-- conflicts with it is refused alike before and after its receipt expires (409
-- OUTCOME_CONFLICT, never 410 ORIGINAL_EXPIRED, which a node takes for delivered): a late SETTLED
-- result of a room an operator aborted stays a conflict an operator sees in the dead letters
-- (docs/design.md §8). Records written before this migration did not keep it; they are taken
-- for SETTLED, the outcome nearly every room has.
ALTER TABLE settled_rooms ADD COLUMN aborted boolean NOT NULL DEFAULT false;

-- (2) The rooms `serve --release-after` finds due: those not released yet, oldest first. A partial
-- index, so that rooms released and still waiting for their results are never walked over.
CREATE INDEX battle_rooms_due_for_release ON battle_rooms (allocated_at, room_id)
  WHERE released_at IS NULL;
