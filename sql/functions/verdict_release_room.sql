-- Releases the room's players (those whose in_battle_room is still this room) and marks it
-- pending. Returns one row: status 'released' (also when it was released before: the time is the
-- first release's) or 'room_unknown' (not allocated, or settled already), the release time, and
-- how many players this call freed. Locks as a settlement does: the room's advisory lock, its
-- row, then its players in id order.
CREATE OR REPLACE FUNCTION verdict_release_room(p_room_id bigint)
RETURNS TABLE (status text, released_at timestamptz, players_released integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_released timestamptz;
  v_count integer;
BEGIN
  PERFORM pg_advisory_xact_lock(p_room_id);
  UPDATE battle_rooms b SET released_at = coalesce(b.released_at, clock_timestamp())
  WHERE b.room_id = p_room_id
  RETURNING b.released_at INTO v_released;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'room_unknown', NULL::timestamptz, 0;
    RETURN;
  END IF;
  PERFORM 1 FROM players p WHERE p.in_battle_room = p_room_id ORDER BY p.player_id FOR UPDATE;
  UPDATE players p SET in_battle_room = 0 WHERE p.in_battle_room = p_room_id;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN QUERY SELECT 'released', v_released, v_count;
END
$$;
