-- Seeds the first ratings of a season (docs/modes.md, "Seasons"): in the transaction of the
-- verdict_allocate that seated room p_room_id in mode p_mode, under the players' locks it took,
-- the players named (each new to the mode: its seat recorded no rating) start from the rating the
-- lobby computed from their last one in the mode's seed (RatingSystem::ResetForSeason). Each gets
-- its player_ratings row in the mode, provisional as an import is (no games), and its seat the
-- same rating, so the room is rated from it and its change lands on it (the compensation rule of
-- docs/design.md §8). A player rated in the mode since the allocation read it cannot be: the
-- allocation holds its lock. Parallel arrays, one element per player. Returns how many it seeded.
CREATE OR REPLACE FUNCTION verdict_seed_ratings(
  p_room_id bigint, p_mode text, p_player_ids text[], p_ratings double precision[],
  p_deviations double precision[], p_volatilities double precision[],
  p_displayed double precision[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_seeded integer;
BEGIN
  WITH seeds AS (
    SELECT x.* FROM unnest(p_player_ids, p_ratings, p_deviations, p_volatilities, p_displayed)
      AS x(pid, rating, deviation, volatility, displayed)),
  rated AS (
    INSERT INTO player_ratings (mode_id, player_id, rating, deviation, volatility, displayed,
                                provisional_left, provisional)
    SELECT m.mode_id, s.pid, s.rating, s.deviation, s.volatility, s.displayed,
           m.provisional_games, m.provisional_games > 0
    FROM seeds s JOIN modes m ON m.mode = p_mode
    ON CONFLICT (mode_id, player_id) DO NOTHING
    RETURNING player_id, rating, deviation, volatility)
  UPDATE battle_room_seats t
  SET rating_at_allocation = r.rating, deviation_at_allocation = r.deviation,
      volatility_at_allocation = r.volatility
  FROM rated r
  WHERE t.room_id = p_room_id AND t.player_id = r.player_id
    AND t.rating_at_allocation IS NULL;
  GET DIAGNOSTICS v_seeded = ROW_COUNT;
  RETURN v_seeded;
END
$$;
