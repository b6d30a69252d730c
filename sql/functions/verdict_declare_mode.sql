-- Declares a mode (PUT /v1/modes/{mode}, `serve --modes-file`): the declaration as the lobby
-- checked and completed it (every parameter with its default, every shape bound). Returns one
-- row: status 'created', 'updated', 'unchanged' or 'in_use' (a room was allocated in the mode, so
-- its declaration is fixed, and it differs: nothing changed), with the mode as stored after the
-- call. Under the mode row's lock, the lock the first allocation of the mode takes to mark it in
-- use (verdict_allocate): a declaration never changes under a room of its mode.
CREATE OR REPLACE FUNCTION verdict_declare_mode(
  p_mode text, p_system text, p_model text, p_parameters jsonb, p_rated boolean,
  p_min_teams smallint, p_max_teams smallint, p_min_team_size smallint, p_max_team_size smallint)
RETURNS TABLE (status text, mode text, system text, model text, parameters text, rated boolean,
               min_teams smallint, max_teams smallint, min_team_size smallint,
               max_team_size smallint, in_use boolean, declared_at_ms bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_old modes%ROWTYPE;
  v_status text;
BEGIN
  SELECT * INTO v_old FROM modes m WHERE m.mode = p_mode FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO modes (mode, system, model, parameters, rated, min_teams, max_teams,
                       min_team_size, max_team_size)
    VALUES (p_mode, p_system, p_model, p_parameters, p_rated, p_min_teams, p_max_teams,
            p_min_team_size, p_max_team_size)
    ON CONFLICT DO NOTHING;
    v_status := CASE WHEN FOUND THEN 'created' END;
    IF v_status IS NULL THEN  -- declared meanwhile by another session: judged as a change
      SELECT * INTO v_old FROM modes m WHERE m.mode = p_mode FOR UPDATE;
    END IF;
  END IF;
  IF v_status IS NULL THEN
    IF (v_old.system, v_old.model, v_old.parameters, v_old.rated, v_old.min_teams,
        v_old.max_teams, v_old.min_team_size, v_old.max_team_size)
       = (p_system, p_model, p_parameters, p_rated, p_min_teams, p_max_teams, p_min_team_size,
          p_max_team_size) THEN
      v_status := 'unchanged';
    ELSIF v_old.in_use THEN
      v_status := 'in_use';
    ELSE
      UPDATE modes m SET system = p_system, model = p_model, parameters = p_parameters,
                         rated = p_rated, min_teams = p_min_teams, max_teams = p_max_teams,
                         min_team_size = p_min_team_size, max_team_size = p_max_team_size,
                         declared_at = now()
      WHERE m.mode = p_mode;
      v_status := 'updated';
    END IF;
  END IF;
  RETURN QUERY
  SELECT v_status, m.mode, m.system, m.model, m.parameters::text, m.rated, m.min_teams,
         m.max_teams, m.min_team_size, m.max_team_size, m.in_use,
         (extract(epoch FROM m.declared_at) * 1000)::bigint
  FROM modes m WHERE m.mode = p_mode;
END
$$;
