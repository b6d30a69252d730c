-- Releases the room's players (those whose in_battle_room is still this room) and marks it
-- pending. Returns one row: status 'released' (also when it was released before: the time is the
-- first release's), 'room_unknown' (not allocated, or settled already) or, without p_wait, 'busy'
-- (another transaction holds the room or one of its players: nothing changed); the release time;
-- and how many players this call freed.
--
-- The players are found through the room's seats (battle_room_seats' key), each read by its own
-- key: a release costs what the room holds, whatever the number of players (in_battle_room has no
-- index, and a scan of players for it took seconds at millions of players). Locks as a settlement
-- does: the room's advisory lock, its row, then its players in id order; without p_wait each is
-- taken only if free at once, so that one locked player cannot hold up the releases of other
-- rooms (`serve --release-after` releases room by room, passing over a busy one until its next
-- tick).
CREATE OR REPLACE FUNCTION verdict_release_room(p_room_id bigint, p_wait boolean DEFAULT true)
RETURNS TABLE (status text, released_at timestamptz, players_released integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_released timestamptz;
  v_held text[];      -- the room's players it still holds
  v_locked text[];    -- those this call locked
BEGIN
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(p_room_id);
    PERFORM 1 FROM battle_rooms b WHERE b.room_id = p_room_id FOR UPDATE;
  ELSE
    IF NOT pg_try_advisory_xact_lock(p_room_id) THEN
      RETURN QUERY SELECT 'busy', NULL::timestamptz, 0;
      RETURN;
    END IF;
    PERFORM 1 FROM battle_rooms b WHERE b.room_id = p_room_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM battle_rooms b WHERE b.room_id = p_room_id) THEN
      RETURN QUERY SELECT 'busy', NULL::timestamptz, 0;  -- the row is another session's
      RETURN;
    END IF;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM battle_rooms b WHERE b.room_id = p_room_id) THEN
    RETURN QUERY SELECT 'room_unknown', NULL::timestamptz, 0;
    RETURN;
  END IF;
  SELECT coalesce(array_agg(s.player_id ORDER BY s.player_id), '{}') INTO v_held
  FROM battle_room_seats s
  WHERE s.room_id = p_room_id
    AND (SELECT p.in_battle_room FROM players p WHERE p.player_id = s.player_id) = p_room_id;
  IF p_wait THEN
    PERFORM 1 FROM players p WHERE p.player_id = ANY (v_held) ORDER BY p.player_id FOR UPDATE;
  ELSE
    SELECT coalesce(array_agg(l.player_id), '{}') INTO v_locked FROM (
      SELECT p.player_id FROM players p WHERE p.player_id = ANY (v_held)
      ORDER BY p.player_id FOR UPDATE SKIP LOCKED) l;
    IF cardinality(v_locked) < cardinality(v_held) THEN
      RETURN QUERY SELECT 'busy', NULL::timestamptz, 0;
      RETURN;
    END IF;
  END IF;
  UPDATE battle_rooms b SET released_at = coalesce(b.released_at, clock_timestamp())
  WHERE b.room_id = p_room_id
  RETURNING b.released_at INTO v_released;
  -- Under the players' locks: still this room's (a settlement of it waits for the room's locks).
  UPDATE players p SET in_battle_room = 0
  WHERE p.player_id = ANY (v_held) AND p.in_battle_room = p_room_id;
  RETURN QUERY SELECT 'released', v_released, cardinality(v_held);
END
$$;
