-- Releases the room's players and marks the room pending: its seats stay (the room is still
-- settled from them), but a released room no longer holds its players (verdict_player_room).
-- Returns one row: status 'released' (also when it was released before: the time is the first
-- release's), 'room_unknown' (not allocated, or settled already) or, without p_wait, 'busy'
-- (another transaction holds the room: nothing changed); the release time; and how many players
-- this call freed (the room's seats the first time, 0 after).
--
-- A release writes the room's row alone: no row of players, which records nothing of the room
-- (migration 005), so a release costs what the room holds whatever the number of players, and a
-- player's row locked elsewhere holds up nothing. Locks as a settlement begins: the room's
-- advisory lock, then its row; without p_wait each is taken only if free at once, so that one
-- room held elsewhere cannot hold up the releases of other rooms (`serve --release-after`
-- releases room by room, passing over a busy one until its next tick).
CREATE OR REPLACE FUNCTION verdict_release_room(p_room_id bigint, p_wait boolean DEFAULT true)
RETURNS TABLE (status text, released_at timestamptz, players_released integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_before timestamptz;  -- the room's earlier release, if any
  v_released timestamptz;
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
  SELECT b.released_at INTO v_before FROM battle_rooms b WHERE b.room_id = p_room_id;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'room_unknown', NULL::timestamptz, 0;
    RETURN;
  END IF;
  UPDATE battle_rooms b SET released_at = coalesce(b.released_at, clock_timestamp())
  WHERE b.room_id = p_room_id
  RETURNING b.released_at INTO v_released;
  RETURN QUERY SELECT 'released', v_released,
    CASE WHEN v_before IS NULL
         THEN (SELECT count(*) FROM battle_room_seats s WHERE s.room_id = p_room_id)::integer
         ELSE 0 END;
END
$$;
