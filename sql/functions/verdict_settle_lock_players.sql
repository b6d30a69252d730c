-- The third part of verdict_settle_prepare: locks the players of every 'settle' room, in player-id
-- order (the global lock order of verdict_settle_prepare), and returns p_verdicts. With p_wait it
-- waits for them (under the caller's lock_timeout). Without, it takes what it can at once (SKIP
-- LOCKED waits for nothing, so it adds no deadlock) and turns each 'settle' room whose players are
-- not all locked by this call 'busy'. The players are those given for the room, which the check
-- found to be its seats; their ratings are read under these locks, and written under them.
CREATE OR REPLACE FUNCTION verdict_settle_lock_players(
  p_verdicts text[], p_room_ids bigint[], p_player_rooms bigint[], p_player_ids text[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_players text[];   -- the players of the rooms to settle
  v_locked text[];    -- those this call locked
  v_busy bigint[];
BEGIN
  -- Joined to their rooms' verdicts, not filtered by `room = ANY (rooms to settle)`: that
  -- compared every player with every room, in each statement that read them.
  SELECT array_agg(x.pid) INTO v_players
  FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
  JOIN unnest(p_room_ids, p_verdicts) AS r(room, verdict) ON r.room = x.room
  WHERE r.verdict = 'settle';
  IF v_players IS NULL THEN
    RETURN p_verdicts;
  END IF;
  IF p_wait THEN
    PERFORM 1 FROM players p WHERE p.player_id = ANY (v_players)
    ORDER BY p.player_id FOR UPDATE;
    RETURN p_verdicts;
  END IF;
  SELECT coalesce(array_agg(l.player_id), '{}') INTO v_locked FROM (
    SELECT p.player_id FROM players p WHERE p.player_id = ANY (v_players)
    ORDER BY p.player_id FOR UPDATE SKIP LOCKED) l;
  -- A player may be in two rooms of the call (a released room and the player's next one), so
  -- every room's players are all locked exactly when no player of any is missing: when this call
  -- locked as many players as those rooms name, nobody is busy (the common case, decided in one
  -- pass). Otherwise the rooms of the missing players, by a hashed anti-join: a per-row
  -- `<> ALL (v_locked)` compared every player with every locked one.
  IF cardinality(v_locked) = (SELECT count(DISTINCT pid) FROM unnest(v_players) pid) THEN
    RETURN p_verdicts;
  END IF;
  SELECT array_agg(DISTINCT x.room) INTO v_busy
  FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
  JOIN unnest(p_room_ids, p_verdicts) AS r(room, verdict) ON r.room = x.room
  WHERE r.verdict = 'settle'
    AND NOT EXISTS (SELECT 1 FROM unnest(v_locked) AS l(pid) WHERE l.pid = x.pid);
  IF v_busy IS NULL THEN
    RETURN p_verdicts;
  END IF;
  RETURN (SELECT array_agg(CASE WHEN x.verdict = 'settle' AND x.room_id = ANY (v_busy)
                                THEN 'busy' ELSE x.verdict END ORDER BY x.i)
          FROM unnest(p_room_ids, p_verdicts) WITH ORDINALITY AS x(room_id, verdict, i));
END
$$;
