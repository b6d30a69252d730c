-- Test-only: the negative control of the settlement guard (P2). Replaces, in a test's database,
-- two parts of verdict_settle_prepare (sql/functions/): its guard, with one that takes no advisory
-- locks and no row locks on the rooms and reads no receipts (every room goes on to the check),
-- and the locking of the players between the check and the ratings' read, with 500 ms of sleep
-- there instead, to widen the race that opens. verdict_settle_prepare itself, its parameters, the
-- check and the write stay the live ones, so this file names none of the settlement's arguments.
-- Applied by the tests that show the damage is caught; never part of the lobby's migrations.
CREATE OR REPLACE FUNCTION verdict_settle_guard(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_fingerprints bytea[],
  p_wait boolean)
RETURNS TABLE (ord bigint, verdict text, match_id bigint, outcome text, settled_at_ms bigint)
LANGUAGE sql AS $$
  SELECT i, NULL::text, NULL::bigint, NULL::text, NULL::bigint
  FROM generate_series(1, cardinality(p_room_ids)) i
$$;

CREATE OR REPLACE FUNCTION verdict_settle_lock_players(
  p_verdicts text[], p_room_ids bigint[], p_player_rooms bigint[], p_player_ids text[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
BEGIN
  IF 'settle' = ANY (p_verdicts) THEN
    PERFORM pg_sleep(0.5);  -- checks done, nothing written yet: the window the guard closes
  END IF;
  RETURN p_verdicts;
END
$$;

-- CREATE OR REPLACE with another parameter list adds an overload instead of replacing, and the
-- live function goes on being called: the control would then test nothing. Refuse that here.
DO $$
BEGIN
  IF (SELECT count(*) FROM pg_proc
      WHERE proname IN ('verdict_settle_guard', 'verdict_settle_lock_players')) <> 2 THEN
    RAISE EXCEPTION 'unguarded_settle.sql added overloads instead of replacing the live functions';
  END IF;
END
$$;
