-- Declares a mode (PUT /v1/modes/{mode}, `serve --modes-file`): the declaration as the lobby
-- checked and completed it (every parameter with its default, every shape bound, the provisional
-- games, the seed and its soft reset: p_seed_mode NULL for none, and then the three numbers NULL
-- too), and whether the mode is closed (p_closed: NULL leaves it as it is). Returns one row:
-- status 'created', 'updated', 'unchanged', 'in_use' (a room was allocated in the mode, so its
-- declaration is fixed, and it differs: nothing changed), 'seed_unknown' (p_seed_mode is not
-- declared), 'seed_system_differs' (it rates by another system) or 'mode_unknown' (p_system NULL,
-- which says only whether the mode is closed, names a mode not declared), with the mode as stored
-- after the call (none for the last three). Under the mode row's lock, the lock the first
-- allocation of the mode takes to mark it in use (verdict_allocate): a declaration never changes
-- under a room of its mode. Closing changes no declaration: a mode in use may be closed and
-- reopened.
--
-- A changed provisional_games (only while the mode is not in use: then every rating in it is an
-- import, with no games) sets each of its ratings' provisional state again, in the same
-- statement: a mode's imports are best declared after their mode, not before.
CREATE OR REPLACE FUNCTION verdict_declare_mode(
  p_mode text, p_system text, p_model text, p_parameters jsonb, p_rated boolean,
  p_min_teams smallint, p_max_teams smallint, p_min_team_size smallint, p_max_team_size smallint,
  p_provisional_games integer, p_closed boolean, p_seed_mode text, p_seed_keep double precision,
  p_seed_deviation double precision, p_seed_mean double precision)
RETURNS TABLE (status text, mode text, system text, model text, parameters text, rated boolean,
               min_teams smallint, max_teams smallint, min_team_size smallint,
               max_team_size smallint, in_use boolean, declared_at_ms bigint,
               provisional_games integer, closed boolean, seed_mode text,
               seed_keep double precision, seed_deviation double precision,
               seed_mean double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_old modes%ROWTYPE;
  v_seed modes%ROWTYPE;
  v_status text;
BEGIN
  IF p_seed_mode IS NOT NULL THEN
    SELECT * INTO v_seed FROM modes m WHERE m.mode = p_seed_mode;
    IF NOT FOUND THEN
      v_status := 'seed_unknown';
    ELSIF v_seed.system <> p_system THEN
      v_status := 'seed_system_differs';
    END IF;
    IF v_status IS NOT NULL THEN
      RETURN QUERY SELECT v_status, p_mode, NULL::text, NULL::text, NULL::text, NULL::boolean,
                          NULL::smallint, NULL::smallint, NULL::smallint, NULL::smallint,
                          NULL::boolean, NULL::bigint, NULL::integer, NULL::boolean, NULL::text,
                          NULL::float8, NULL::float8, NULL::float8;
      RETURN;
    END IF;
  END IF;
  SELECT * INTO v_old FROM modes m WHERE m.mode = p_mode FOR UPDATE;
  IF NOT FOUND AND p_system IS NULL THEN
    RETURN QUERY SELECT 'mode_unknown', p_mode, NULL::text, NULL::text, NULL::text, NULL::boolean,
                        NULL::smallint, NULL::smallint, NULL::smallint, NULL::smallint,
                        NULL::boolean, NULL::bigint, NULL::integer, NULL::boolean, NULL::text,
                        NULL::float8, NULL::float8, NULL::float8;
    RETURN;
  END IF;
  IF NOT FOUND THEN
    INSERT INTO modes (mode, system, model, parameters, rated, min_teams, max_teams,
                       min_team_size, max_team_size, provisional_games, closed, seed_mode_id,
                       seed_keep, seed_deviation, seed_mean)
    VALUES (p_mode, p_system, p_model, p_parameters, p_rated, p_min_teams, p_max_teams,
            p_min_team_size, p_max_team_size, p_provisional_games, coalesce(p_closed, false),
            v_seed.mode_id, p_seed_keep, p_seed_deviation, p_seed_mean)
    ON CONFLICT DO NOTHING;
    v_status := CASE WHEN FOUND THEN 'created' END;
    IF v_status IS NULL THEN  -- declared meanwhile by another session: judged as a change
      SELECT * INTO v_old FROM modes m WHERE m.mode = p_mode FOR UPDATE;
    END IF;
  END IF;
  IF v_status IS NULL THEN
    IF p_system IS NULL
       OR (v_old.system, v_old.model, v_old.parameters, v_old.rated, v_old.min_teams,
           v_old.max_teams, v_old.min_team_size, v_old.max_team_size, v_old.provisional_games,
           v_old.seed_mode_id, v_old.seed_keep, v_old.seed_deviation, v_old.seed_mean)
          IS NOT DISTINCT FROM
          (p_system, p_model, p_parameters, p_rated, p_min_teams, p_max_teams, p_min_team_size,
           p_max_team_size, p_provisional_games, v_seed.mode_id, p_seed_keep, p_seed_deviation,
           p_seed_mean) THEN
      IF p_closed IS NULL OR p_closed = v_old.closed THEN
        v_status := 'unchanged';
      ELSE
        UPDATE modes m SET closed = p_closed WHERE m.mode = p_mode;
        v_status := 'updated';
      END IF;
    ELSIF v_old.in_use THEN
      v_status := 'in_use';
    ELSE
      UPDATE modes m SET system = p_system, model = p_model, parameters = p_parameters,
                         rated = p_rated, min_teams = p_min_teams, max_teams = p_max_teams,
                         min_team_size = p_min_team_size, max_team_size = p_max_team_size,
                         provisional_games = p_provisional_games,
                         closed = coalesce(p_closed, m.closed), seed_mode_id = v_seed.mode_id,
                         seed_keep = p_seed_keep, seed_deviation = p_seed_deviation,
                         seed_mean = p_seed_mean, declared_at = now()
      WHERE m.mode = p_mode;
      IF v_old.provisional_games <> p_provisional_games THEN
        UPDATE player_ratings r
        SET provisional_left = greatest(p_provisional_games - r.games, 0),
            provisional = p_provisional_games > r.games
        WHERE r.mode_id = v_old.mode_id;
      END IF;
      v_status := 'updated';
    END IF;
  END IF;
  RETURN QUERY
  SELECT v_status, m.mode, m.system, m.model, m.parameters::text, m.rated, m.min_teams,
         m.max_teams, m.min_team_size, m.max_team_size, m.in_use,
         (extract(epoch FROM m.declared_at) * 1000)::bigint, m.provisional_games, m.closed,
         s.mode, m.seed_keep, m.seed_deviation, m.seed_mean
  FROM modes m LEFT JOIN modes s ON s.mode_id = m.seed_mode_id
  WHERE m.mode = p_mode;
END
$$;
