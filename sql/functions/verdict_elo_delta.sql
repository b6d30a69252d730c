-- Elo change for one team: round(K * (S - E)), E = 1 / (1 + 10^((Rb - Ra) / 400)).
-- numeric rounding is half away from zero, so the two teams' changes are exact opposites.
CREATE OR REPLACE FUNCTION verdict_elo_delta(team_rating double precision, opponent_rating double precision,
                                  score double precision, k integer)
RETURNS integer LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT round((k * (score - 1.0 / (1.0 + power(10.0, (opponent_rating - team_rating) / 400.0))))
               ::numeric)::integer
$$;
