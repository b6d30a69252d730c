-- Allocates a room to a node with its roster, recording each player's rating with the seats (a
-- room's Elo is computed from them, verdict_settle_write). Returns one of
--   'allocated'      new room; players created if new and marked in battle
--   'duplicate'      the same room, node and roster were allocated before (idempotent retry)
--   'room_exists'    the room id is taken by a different allocation
--   'room_id_reused' the room id was settled before (it has a receipt or a compact record, read
--                    in one statement)
--   'player_busy'    a player is in another room's battle (busy_player says which)
CREATE OR REPLACE FUNCTION verdict_allocate(p_room_id bigint, p_node_id text,
                                            p_player_ids bigint[], p_teams smallint[])
RETURNS TABLE (status text, busy_player bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_busy bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(p_room_id);
  IF EXISTS (SELECT 1 FROM settlement_receipts WHERE room_id = p_room_id)
     OR EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = p_room_id) THEN
    RETURN QUERY SELECT 'room_id_reused', 0::bigint;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id) THEN
    IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id AND node_id = p_node_id)
       AND (SELECT count(*) FROM battle_room_seats WHERE room_id = p_room_id)
           = cardinality(p_player_ids)
       AND NOT EXISTS (
         SELECT 1 FROM unnest(p_player_ids, p_teams) AS x(pid, team)
         LEFT JOIN battle_room_seats s
           ON s.room_id = p_room_id AND s.player_id = x.pid AND s.team = x.team
         WHERE s.player_id IS NULL) THEN
      RETURN QUERY SELECT 'duplicate', 0::bigint;
    ELSE
      RETURN QUERY SELECT 'room_exists', 0::bigint;
    END IF;
    RETURN;
  END IF;

  INSERT INTO players (player_id)
  SELECT pid FROM unnest(p_player_ids) AS pid ORDER BY pid
  ON CONFLICT (player_id) DO NOTHING;
  -- Lock the roster in player-id order, the order every transaction uses, so two rooms
  -- sharing players cannot deadlock.
  SELECT player_id INTO v_busy FROM (
    SELECT player_id, in_battle_room FROM players
    WHERE player_id = ANY (p_player_ids) ORDER BY player_id FOR UPDATE) locked
  WHERE in_battle_room <> 0 ORDER BY player_id LIMIT 1;
  IF FOUND THEN
    RETURN QUERY SELECT 'player_busy', v_busy;
    RETURN;
  END IF;

  INSERT INTO battle_rooms (room_id, node_id) VALUES (p_room_id, p_node_id);
  INSERT INTO battle_room_seats (room_id, player_id, team, elo_at_allocation)
  SELECT p_room_id, x.pid, x.team, p.elo
  FROM unnest(p_player_ids, p_teams) AS x(pid, team) JOIN players p ON p.player_id = x.pid;
  UPDATE players SET in_battle_room = p_room_id WHERE player_id = ANY (p_player_ids);
  RETURN QUERY SELECT 'allocated', 0::bigint;
END
$$;
