-- Carries a player's rating over from an earlier system into a mode (PUT
-- /v1/players/{player_id}/ratings/{mode}): the rating, checked by the mode's system, and its
-- displayed value. Returns one row: status 'imported', 'player_busy' (the player is in a room:
-- the room is rated from the rating it was allocated with, and the import would be lost or
-- counted twice) or 'mode_unknown'; and the player's rating in the mode after the call. Under the
-- player's row lock, the lock every settlement takes before it reads or writes a rating; a new
-- player is created. A rating new to the mode is provisional for the mode's provisional_games (an
-- import counts no game); one there before keeps its counts, and so its provisional state.
CREATE OR REPLACE FUNCTION verdict_import_rating(
  p_player_id text, p_mode text, p_rating double precision, p_deviation double precision,
  p_volatility double precision, p_displayed double precision)
RETURNS TABLE (status text, rating double precision, deviation double precision,
               volatility double precision, displayed double precision, games integer,
               wins integer, losses integer, draws integer, placements bigint,
               last_match_at_ms bigint, provisional boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_mode_id integer;
  v_provisional_games integer;
BEGIN
  SELECT m.mode_id, m.provisional_games INTO v_mode_id, v_provisional_games
  FROM modes m WHERE m.mode = p_mode;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'mode_unknown', NULL::float8, NULL::float8, NULL::float8, NULL::float8,
                        NULL::integer, NULL::integer, NULL::integer, NULL::integer,
                        NULL::bigint, NULL::bigint, NULL::boolean;
    RETURN;
  END IF;
  INSERT INTO players (player_id) VALUES (p_player_id) ON CONFLICT (player_id) DO NOTHING;
  PERFORM 1 FROM players p WHERE p.player_id = p_player_id FOR UPDATE;
  IF verdict_player_room(p_player_id) <> 0 THEN
    RETURN QUERY SELECT 'player_busy', NULL::float8, NULL::float8, NULL::float8, NULL::float8,
                        NULL::integer, NULL::integer, NULL::integer, NULL::integer,
                        NULL::bigint, NULL::bigint, NULL::boolean;
    RETURN;
  END IF;
  RETURN QUERY
  INSERT INTO player_ratings AS r (mode_id, player_id, rating, deviation, volatility, displayed,
                                   provisional_left, provisional)
  VALUES (v_mode_id, p_player_id, p_rating, p_deviation, p_volatility, p_displayed,
          v_provisional_games, v_provisional_games > 0)
  ON CONFLICT (mode_id, player_id) DO UPDATE SET
    rating = excluded.rating, deviation = excluded.deviation, volatility = excluded.volatility,
    displayed = excluded.displayed
  RETURNING 'imported', r.rating, r.deviation, r.volatility, r.displayed, r.games, r.wins,
            r.losses, r.draws, r.placements,
            coalesce((extract(epoch FROM r.last_match_at) * 1000)::bigint, 0), r.provisional;
END
$$;
