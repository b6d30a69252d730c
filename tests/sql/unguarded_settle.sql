-- Test-only: the negative control of the settlement guard (P2). Replaces verdict_settle_batch
-- in a test's database with the same settlement minus verdict_settle_guard: no advisory locks,
-- no row locks on the rooms, no receipt check, and 500 ms of sleep between the checks and the
-- writes to widen the race that opens. Applied by the tests that show the damage is caught;
-- never part of the lobby's migrations.
CREATE OR REPLACE FUNCTION verdict_settle_batch(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_winner_teams smallint[],
  p_suspects boolean[], p_ended_at_ms bigint[], p_replay_paths text[], p_abort_reasons text[],
  p_fingerprints bytea[],
  p_player_rooms bigint[], p_player_ids bigint[], p_teams smallint[], p_kills integer[],
  p_deaths integer[], p_assists integer[], p_scores bigint[], p_disconnected boolean[],
  p_k_factor integer, p_attempt_id bigint, p_wait boolean)
RETURNS TABLE (room_id bigint, status text, match_id bigint, outcome text, settled_at_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_verdicts text[];
BEGIN
  v_verdicts := verdict_settle_check(array_fill(NULL::text, ARRAY[cardinality(p_room_ids)]),
                                     p_room_ids, p_node_ids, p_player_rooms, p_player_ids,
                                     p_teams);
  IF 'settle' = ANY (v_verdicts) THEN
    PERFORM pg_sleep(0.5);  -- checks done, nothing written yet: the window the guard closes
  END IF;
  RETURN QUERY SELECT * FROM verdict_settle_write(
    p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_ended_at_ms,
    p_replay_paths, p_abort_reasons, p_fingerprints, p_player_rooms, p_player_ids, p_teams,
    p_kills, p_deaths, p_assists, p_scores, p_disconnected, p_k_factor, p_attempt_id, v_verdicts);
END
$$;
