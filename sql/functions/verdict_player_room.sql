-- The room a player is in: the room not released that seats the player, or 0 when the player is
-- free (GET /v1/players' in_battle_room). A player is busy exactly while such a room exists
-- (migration 005): allocation seats them (verdict_allocate refuses a busy player, under the
-- player's row lock), and a settlement (deleting the room with its seats) or a release (marking
-- the room released_at) frees them in its own transaction. At most one room not released seats a
-- player; the fault suite's invariants check it.
--
-- Reads by key whatever the statistics say (battle_rooms and its seats are queues, whose
-- statistics may say they are empty while thousands of rooms wait: verdict_settle_check): the
-- player's seats by the index on battle_room_seats (player_id), one entry for each room that
-- waits for its result and seats the player, and each seat's room by its key, in a scalar
-- subquery, which PostgreSQL runs once per seat. Joined as sets, the rooms were planned as a hash
-- of every room not released, read for each player; ordered by room, the seats were read in the
-- order of their primary key (room, player), all of them. No order is needed: one room at most.
CREATE OR REPLACE FUNCTION verdict_player_room(p_player_id text)
RETURNS bigint LANGUAGE sql STABLE STRICT AS $$
  SELECT coalesce((SELECT s.room_id FROM battle_room_seats s
                   WHERE s.player_id = p_player_id
                     AND (SELECT b.released_at IS NULL FROM battle_rooms b
                          WHERE b.room_id = s.room_id)
                   LIMIT 1), 0)
$$;
