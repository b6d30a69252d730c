-- Releases up to p_limit rooms allocated more than p_age ago and not released yet, oldest
-- first; returns how many (`serve --release-after`).
CREATE OR REPLACE FUNCTION verdict_release_rooms_older_than(p_age interval, p_limit integer)
RETURNS integer LANGUAGE sql AS $$
  SELECT count(*)::integer FROM (
    SELECT room_id FROM battle_rooms
    WHERE released_at IS NULL AND allocated_at < now() - p_age
    ORDER BY allocated_at, room_id LIMIT p_limit) due,
  LATERAL verdict_release_room(due.room_id) r WHERE r.status = 'released'
$$;
