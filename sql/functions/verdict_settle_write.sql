-- The second statement of a settlement (docs/design.md §5), in the transaction of
-- verdict_settle_prepare and under its locks: writes the rooms that statement judged 'settle',
-- with the ratings the lobby computed from what it read. Its parameter list is declared once more,
-- in C++ (lobby/settle_calls.h).
--
-- Inputs, parallel arrays:
--   one element per room written: p_room_ids, p_node_ids, p_outcomes, p_winner_teams (the team
--   placed first alone, 0 if none), p_suspects, p_ended_at_ms, p_replay_paths ('' for none),
--   p_abort_reasons, p_fingerprints, p_modes, p_match_ids (the ids verdict_settle_prepare took
--   for the rooms' matches), p_events: the room's battle.settled event, whole, as the JSON text
--   the lobby wrote (lobby/settled_event.h), stored as that text. Text, not json: a json
--   parameter is read as JSON on the way in, and again for each element; cast to json once, the
--   event is checked on its way into the table (the lobby sends this array in binary, so that its
--   quotes are neither escaped nor unescaped);
--   one element per player of those rooms, each with its room: p_player_rooms, p_player_ids,
--   p_teams, p_ranks (0 for an ABORTED room), p_kills, p_deaths, p_assists, p_scores,
--   p_disconnected, p_results ('win' | 'loss' | 'draw' | 'aborted'), and the player's rating in
--   the room's mode before this match and after it (p_ratings_before, p_ratings_after,
--   p_deviations_before, p_deviations_after, p_volatilities_before, p_volatilities_after: one
--   player in two rooms has the second room's before equal to the first's after);
--   one element per distinct (mode, player) of those rooms: p_rated_modes, p_rated_players,
--   p_final_ratings, p_final_deviations, p_final_volatilities, p_final_displayed (the rating the
--   player ends the call with), p_games, p_wins, p_losses, p_draws, p_placements (what the call
--   adds: the ranks placed, summed);
--   p_attempt_id, the caller's random id for this call, written into every receipt, and
--   p_settled_at_ms, the settlement time verdict_settle_prepare gave the call (the events carry
--   it).
-- One source row per target row: an UPDATE … FROM (or an upsert) with two source rows for one
-- target row applies only one of them, which one unpredictably.
--
-- Returns the number of rooms written.
--
-- The write never reads back what it writes. How PostgreSQL would read rows back depends on what
-- ANALYZE last said of them, and both ways of being wrong cost a full scan that grows with the
-- history (bench/RESULTS.md, "Reading back what was just written"). Everything is written from
-- the call's own arrays, in one statement.
CREATE OR REPLACE FUNCTION verdict_settle_write(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_winner_teams smallint[],
  p_suspects boolean[], p_ended_at_ms bigint[], p_replay_paths text[], p_abort_reasons text[],
  p_fingerprints bytea[], p_modes text[], p_match_ids bigint[], p_events text[],
  p_player_rooms bigint[], p_player_ids text[], p_teams smallint[], p_ranks smallint[],
  p_kills integer[], p_deaths integer[], p_assists integer[], p_scores bigint[],
  p_disconnected boolean[], p_results text[],
  p_ratings_before double precision[], p_ratings_after double precision[],
  p_deviations_before double precision[], p_deviations_after double precision[],
  p_volatilities_before double precision[], p_volatilities_after double precision[],
  p_rated_modes text[], p_rated_players text[], p_final_ratings double precision[],
  p_final_deviations double precision[], p_final_volatilities double precision[],
  p_final_displayed double precision[], p_games integer[], p_wins integer[], p_losses integer[],
  p_draws integer[], p_placements integer[],
  p_attempt_id bigint, p_settled_at_ms bigint)
RETURNS integer
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_now timestamptz := timestamptz 'epoch' + p_settled_at_ms * interval '1 millisecond';
  v_written integer;
BEGIN
  IF cardinality(p_room_ids) IS NULL OR cardinality(p_room_ids) = 0 THEN
    RETURN 0;
  END IF;
  IF cardinality(p_events) IS DISTINCT FROM cardinality(p_room_ids)
     OR cardinality(p_match_ids) IS DISTINCT FROM cardinality(p_room_ids) THEN
    RAISE EXCEPTION 'verdict_settle_write: % rooms but % match ids and % events',
      cardinality(p_room_ids), coalesce(cardinality(p_match_ids), 0),
      coalesce(cardinality(p_events), 0);
  END IF;
  -- settled is each new match with its room's values from the call's arrays, seated each of its
  -- players with theirs, and every write takes from those.
  WITH settled AS (
    SELECT x.*
    FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_ended_at_ms,
                p_replay_paths, p_abort_reasons, p_fingerprints, p_modes, p_match_ids, p_events)
           AS x(room_id, node_id, outcome, winner_team, suspect, ended_at_ms, replay_path,
                abort_reason, fingerprint, mode, match_id, event)),
  matched AS (
    -- The ids verdict_settle_prepare took from the identity, in room-id order as it took them.
    INSERT INTO matches (match_id, room_id, node_id, outcome, winner_team, suspect, abort_reason,
                         ended_at_ms, settled_at, mode)
    OVERRIDING SYSTEM VALUE
    SELECT m.match_id, m.room_id, m.node_id, m.outcome, m.winner_team, m.suspect, m.abort_reason,
           m.ended_at_ms, v_now, m.mode
    FROM settled m
    ORDER BY m.room_id),
  seated AS (
    SELECT m.match_id, m.mode, x.*
    FROM unnest(p_player_rooms, p_player_ids, p_teams, p_ranks, p_kills, p_deaths, p_assists,
                p_scores, p_disconnected, p_results, p_ratings_before, p_ratings_after,
                p_deviations_before, p_deviations_after, p_volatilities_before,
                p_volatilities_after)
           AS x(room, pid, team, rank, kills, deaths, assists, score, disconnected, result,
                rating_before, rating_after, deviation_before, deviation_after, volatility_before,
                volatility_after)
    JOIN settled m ON m.room_id = x.room),
  recorded AS (
    INSERT INTO match_players (match_id, player_id, team, rank, kills, deaths, assists, score,
                               disconnected, result, rating_before, rating_after,
                               deviation_before, deviation_after, volatility_before,
                               volatility_after)
    SELECT s.match_id, s.pid, s.team, s.rank, s.kills, s.deaths, s.assists, s.score,
           s.disconnected, s.result, s.rating_before, s.rating_after, s.deviation_before,
           s.deviation_after, s.volatility_before, s.volatility_after
    FROM seated s),
  rated AS (
    -- A player new to the mode is provisional for the mode's provisional_games, less those
    -- played now; one rated before counts down what its row still needs (migration 010).
    INSERT INTO player_ratings AS r (mode_id, player_id, rating, deviation, volatility,
                                     displayed, games, wins, losses, draws, placements,
                                     last_match_at, provisional_left, provisional)
    SELECT md.mode_id, x.pid, x.rating, x.deviation, x.volatility, x.displayed, x.games, x.wins,
           x.losses, x.draws, x.placements, CASE WHEN x.games > 0 THEN v_now END,
           greatest(md.provisional_games - x.games, 0), md.provisional_games > x.games
    FROM unnest(p_rated_modes, p_rated_players, p_final_ratings, p_final_deviations,
                p_final_volatilities, p_final_displayed, p_games, p_wins, p_losses, p_draws,
                p_placements)
           AS x(mode, pid, rating, deviation, volatility, displayed, games, wins, losses, draws,
                placements)
    JOIN modes md ON md.mode = x.mode
    ON CONFLICT (mode_id, player_id) DO UPDATE SET
      rating = excluded.rating,
      deviation = excluded.deviation,
      volatility = excluded.volatility,
      displayed = excluded.displayed,
      games = r.games + excluded.games,
      wins = r.wins + excluded.wins,
      losses = r.losses + excluded.losses,
      draws = r.draws + excluded.draws,
      placements = r.placements + excluded.placements,
      last_match_at = coalesce(excluded.last_match_at, r.last_match_at),
      provisional_left = greatest(r.provisional_left - excluded.games, 0),
      provisional = r.provisional_left > excluded.games,
      -- A match played: the rating ages from it again (the lobby aged it before it rated).
      aged_through = CASE WHEN excluded.games > 0 THEN NULL ELSE r.aged_through END),
  replayed AS (
    INSERT INTO replays (match_id, room_id, path)
    SELECT m.match_id, m.room_id, m.replay_path FROM settled m WHERE m.replay_path <> ''),
  receipted AS (
    INSERT INTO settlement_receipts (room_id, node_id, outcome, match_id, fingerprint,
                                     settled_at, attempt_id)
    SELECT m.room_id, m.node_id, m.outcome, m.match_id, m.fingerprint, v_now, p_attempt_id
    FROM settled m)
  -- The events as the lobby built them; the cast to json checks each is JSON.
  INSERT INTO settlement_events (room_id, node_id, match_id, payload)
  SELECT m.room_id, m.node_id, m.match_id, m.event::json
  FROM settled m
  ORDER BY m.room_id;
  GET DIAGNOSTICS v_written = ROW_COUNT;

  DELETE FROM battle_rooms b WHERE b.room_id = ANY (p_room_ids);
  RETURN v_written;
END
$$;
