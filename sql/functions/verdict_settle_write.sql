-- The second statement of a settlement (docs/design.md §5), in the transaction of
-- verdict_settle_prepare and under its locks: writes the rooms that statement judged 'settle',
-- with the ratings the lobby computed from what it read. Its parameter list is declared once more,
-- in C++ (lobby/settle_calls.h).
--
-- Inputs, parallel arrays:
--   one element per room written: p_room_ids, p_node_ids, p_outcomes, p_winner_teams (the team
--   placed first alone, 0 if none), p_suspects, p_ended_at_ms, p_replay_paths ('' for none),
--   p_abort_reasons, p_fingerprints, p_modes, p_event_players: the "players" of the room's
--   battle.settled event as the JSON text the lobby wrote (lobby/event_players.h), stored as that
--   text. Text, not json: a json parameter is read as JSON on the way in, and again for each
--   element; the event it goes into is read as JSON once, and that checks it (the lobby sends
--   this array in binary, so that its quotes are neither escaped nor unescaped);
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
--   p_attempt_id, the caller's random id for this call, written into every receipt.
-- One source row per target row: an UPDATE … FROM (or an upsert) with two source rows for one
-- target row applies only one of them, which one unpredictably.
--
-- Returns one row per room written: its new match and settlement time.
--
-- The write never reads back what it writes. How PostgreSQL would read rows back depends on what
-- ANALYZE last said of them, and both ways of being wrong cost a full scan that grows with the
-- history (bench/RESULTS.md, "Reading back what was just written"). So the new matches' ids come
-- back from their insert, and everything else is written from the call's own arrays in one
-- statement.
CREATE OR REPLACE FUNCTION verdict_settle_write(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_winner_teams smallint[],
  p_suspects boolean[], p_ended_at_ms bigint[], p_replay_paths text[], p_abort_reasons text[],
  p_fingerprints bytea[], p_modes text[], p_event_players text[],
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
  p_attempt_id bigint)
RETURNS TABLE (room_id bigint, match_id bigint, settled_at_ms bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_now timestamptz := clock_timestamp();
  v_now_ms bigint := (extract(epoch FROM v_now) * 1000)::bigint;
  v_match_ids bigint[]; -- the new matches, in the same order as v_match_rooms
  v_match_rooms bigint[];
BEGIN
  IF cardinality(p_room_ids) IS NULL OR cardinality(p_room_ids) = 0 THEN
    RETURN;
  END IF;
  IF cardinality(p_event_players) IS DISTINCT FROM cardinality(p_room_ids) THEN
    RAISE EXCEPTION 'verdict_settle_write: % rooms but the players of %', cardinality(p_room_ids),
      coalesce(cardinality(p_event_players), 0);
  END IF;
  WITH inserted AS (
    INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, abort_reason,
                         ended_at_ms, settled_at, mode)
    SELECT x.room_id, x.node_id, x.outcome, x.winner_team, x.suspect, x.abort_reason,
           x.ended_at_ms, v_now, x.mode
    FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_abort_reasons,
                p_ended_at_ms, p_modes)
           AS x(room_id, node_id, outcome, winner_team, suspect, abort_reason, ended_at_ms, mode)
    ORDER BY x.room_id
    RETURNING matches.match_id, matches.room_id)
  SELECT array_agg(i.match_id), array_agg(i.room_id) INTO v_match_ids, v_match_rooms
  FROM inserted i;

  -- The rest in one statement: settled is each new match with its room's values from the call's
  -- arrays, seated each of its players with theirs, and every write takes from those.
  WITH settled AS (
    SELECT mm.match_id, x.room_id, x.node_id, x.outcome, x.winner_team, x.suspect,
           x.replay_path, x.fingerprint, x.mode, x.event_players
    FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id)
    JOIN ROWS FROM (unnest(p_room_ids), unnest(p_node_ids), unnest(p_outcomes),
                    unnest(p_winner_teams), unnest(p_suspects), unnest(p_replay_paths),
                    unnest(p_fingerprints), unnest(p_modes), unnest(p_event_players))
           AS x(room_id, node_id, outcome, winner_team, suspect, replay_path, fingerprint, mode,
                event_players)
      ON x.room_id = mm.room_id),
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
    INSERT INTO player_ratings AS r (mode_id, player_id, rating, deviation, volatility,
                                     displayed, games, wins, losses, draws, placements,
                                     last_match_at)
    SELECT md.mode_id, x.pid, x.rating, x.deviation, x.volatility, x.displayed, x.games, x.wins,
           x.losses, x.draws, x.placements, CASE WHEN x.games > 0 THEN v_now END
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
      last_match_at = coalesce(excluded.last_match_at, r.last_match_at)),
  replayed AS (
    INSERT INTO replays (match_id, room_id, path)
    SELECT m.match_id, m.room_id, m.replay_path FROM settled m WHERE m.replay_path <> ''),
  receipted AS (
    INSERT INTO settlement_receipts (room_id, node_id, outcome, match_id, fingerprint,
                                     settled_at, attempt_id)
    SELECT m.room_id, m.node_id, m.outcome, m.match_id, m.fingerprint, v_now, p_attempt_id
    FROM settled m)
  -- The event as jsonb would print it (migration 007): its members in jsonb's key order (shorter
  -- keys first, then by bytes), ", " and ": " between them; the players as the lobby laid them
  -- out the same way. The cast to json checks it is JSON.
  INSERT INTO settlement_events (room_id, node_id, match_id, payload)
  SELECT m.room_id, m.node_id, m.match_id,
         format('{"mode": %s, "type": "battle.settled", "outcome": %s, "players": %s, '
                '"room_id": "%s", "suspect": %s, "match_id": "%s", "winner_team": %s, '
                '"settled_at_ms": "%s"}',
                to_json(m.mode), to_json(m.outcome), m.event_players, m.room_id,
                to_json(m.suspect), m.match_id, m.winner_team, v_now_ms)::json
  FROM settled m
  ORDER BY m.room_id;

  DELETE FROM battle_rooms b WHERE b.room_id = ANY (v_match_rooms);

  RETURN QUERY
  SELECT mm.room_id, mm.match_id, v_now_ms
  FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id);
END
$$;
