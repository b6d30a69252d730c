-- Allocates a room to a node with its roster in a mode, recording each player's rating in the
-- mode with the seats (a room is rated from those, verdict_settle_prepare). Returns one of
--   'allocated'      new room; players created if new, and seated (busy: verdict_player_room)
--   'duplicate'      the same room, node, mode and roster were allocated before (idempotent retry)
--   'room_exists'    the room id is taken by a different allocation
--   'room_id_reused' the room id was settled before (it has a receipt or a compact record, read
--                    in one statement)
--   'player_busy'    a room not released seats a player (busy_player says which)
--   'mode_unknown'   no mode of that name is declared
--   'mode_closed'    the mode is closed to new rooms (PUT /v1/modes/{mode} with "closed": true)
--   'shape_refused'  the mode does not accept a room of this shape (detail says why)
-- The roster is valid (proto/validation.h: teams 1 to T, each seated, each player once). The
-- first room of a mode marks it in use, under the mode row's lock, before its shape is read: a
-- declaration that changes (PUT /v1/modes) does so before any room of it exists, never under one.
CREATE OR REPLACE FUNCTION verdict_allocate(p_room_id bigint, p_node_id text, p_mode text,
                                            p_player_ids text[], p_teams smallint[])
RETURNS TABLE (status text, busy_player text, detail text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_busy text;
  v_mode modes%ROWTYPE;
  v_teams integer;
  v_smallest integer;
  v_largest integer;
BEGIN
  PERFORM pg_advisory_xact_lock(p_room_id);
  IF EXISTS (SELECT 1 FROM settlement_receipts WHERE room_id = p_room_id)
     OR EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = p_room_id) THEN
    RETURN QUERY SELECT 'room_id_reused', NULL::text, NULL::text;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id) THEN
    IF EXISTS (SELECT 1 FROM battle_rooms
               WHERE room_id = p_room_id AND node_id = p_node_id AND mode = p_mode)
       AND (SELECT count(*) FROM battle_room_seats WHERE room_id = p_room_id)
           = cardinality(p_player_ids)
       AND NOT EXISTS (
         SELECT 1 FROM unnest(p_player_ids, p_teams) AS x(pid, team)
         LEFT JOIN battle_room_seats s
           ON s.room_id = p_room_id AND s.player_id = x.pid AND s.team = x.team
         WHERE s.player_id IS NULL) THEN
      RETURN QUERY SELECT 'duplicate', NULL::text, NULL::text;
    ELSE
      RETURN QUERY SELECT 'room_exists', NULL::text, NULL::text;
    END IF;
    RETURN;
  END IF;

  -- A closed mode is not marked: its refusal changes nothing. A mode closed while this waited
  -- for the row's lock is read closed by the next statement.
  UPDATE modes m SET in_use = true WHERE m.mode = p_mode AND NOT m.in_use AND NOT m.closed;
  SELECT * INTO v_mode FROM modes m WHERE m.mode = p_mode;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'mode_unknown', NULL::text, format('mode %s is not declared', p_mode);
    RETURN;
  END IF;
  IF v_mode.closed THEN
    RETURN QUERY SELECT 'mode_closed', NULL::text,
                        format('mode %s is closed to new rooms; its ladder stays readable', p_mode);
    RETURN;
  END IF;
  SELECT count(*), min(n), max(n) INTO v_teams, v_smallest, v_largest
  FROM (SELECT count(*) AS n FROM unnest(p_teams) t GROUP BY t) sizes;
  IF v_teams NOT BETWEEN v_mode.min_teams AND v_mode.max_teams
     OR v_smallest < v_mode.min_team_size OR v_largest > v_mode.max_team_size THEN
    RETURN QUERY SELECT 'shape_refused', NULL::text, format(
      'mode %s accepts %s to %s teams of %s to %s players; this room has %s teams of %s to %s',
      p_mode, v_mode.min_teams, v_mode.max_teams, v_mode.min_team_size, v_mode.max_team_size,
      v_teams, v_smallest, v_largest);
    RETURN;
  END IF;

  INSERT INTO players (player_id)
  SELECT pid FROM unnest(p_player_ids) AS pid ORDER BY pid
  ON CONFLICT (player_id) DO NOTHING;
  -- Lock the roster in player-id order, the order every transaction uses, so two rooms
  -- sharing players cannot deadlock; then, in a statement of its own (so a snapshot taken after
  -- the locks: an allocation that held one of them has committed its seats), look for a player a
  -- room not released still seats.
  PERFORM 1 FROM players WHERE player_id = ANY (p_player_ids) ORDER BY player_id FOR UPDATE;
  SELECT x.pid INTO v_busy FROM unnest(p_player_ids) AS x(pid)
  WHERE verdict_player_room(x.pid) <> 0 ORDER BY x.pid LIMIT 1;
  IF FOUND THEN
    RETURN QUERY SELECT 'player_busy', v_busy, NULL::text;
    RETURN;
  END IF;

  INSERT INTO battle_rooms (room_id, node_id, mode) VALUES (p_room_id, p_node_id, p_mode);
  INSERT INTO battle_room_seats (room_id, player_id, team, rating_at_allocation,
                                 deviation_at_allocation, volatility_at_allocation)
  SELECT p_room_id, x.pid, x.team, r.rating, r.deviation, r.volatility
  FROM unnest(p_player_ids, p_teams) AS x(pid, team)
  LEFT JOIN player_ratings r ON r.mode_id = v_mode.mode_id AND r.player_id = x.pid;
  RETURN QUERY SELECT 'allocated', NULL::text, NULL::text;
END
$$;
