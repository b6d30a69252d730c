-- The second statement of a settlement (docs/design.md §5), in the transaction of
-- verdict_settle_prepare and under its locks: writes the rooms that statement judged 'settle',
-- with the ratings the lobby computed from what it read. Its parameter list is declared once more,
-- in C++ (lobby/pg/settle_calls.h).
--
-- Inputs, parallel arrays:
--   one element per room written: p_room_ids, p_node_ids, p_outcomes, p_winner_teams (0 for a
--   draw), p_suspects, p_ended_at_ms, p_replay_paths ('' for none), p_abort_reasons,
--   p_fingerprints;
--   one element per player of those rooms, each with its room: p_player_rooms, p_player_ids,
--   p_teams, p_kills, p_deaths, p_assists, p_scores, p_disconnected, p_results ('win' | 'loss' |
--   'draw' | 'aborted'), p_elo_before and p_elo_after (the player's rating before this match and
--   after it: one player in two rooms has the second room's before equal to the first's after);
--   one element per distinct player of those rooms: p_rated_players, p_final_elo (the rating the
--   player ends the call with), p_games, p_wins, p_losses, p_draws (what the call adds);
--   p_attempt_id, the caller's random id for this call, written into every receipt.
-- One row per player in players means one update each: an UPDATE … FROM with two source rows for
-- one target row applies only one of them, which one unpredictably.
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
  p_fingerprints bytea[],
  p_player_rooms bigint[], p_player_ids bigint[], p_teams smallint[], p_kills integer[],
  p_deaths integer[], p_assists integer[], p_scores bigint[], p_disconnected boolean[],
  p_results text[], p_elo_before integer[], p_elo_after integer[],
  p_rated_players bigint[], p_final_elo integer[], p_games integer[], p_wins integer[],
  p_losses integer[], p_draws integer[],
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
  WITH inserted AS (
    INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, abort_reason,
                         ended_at_ms, settled_at)
    SELECT x.room_id, x.node_id, x.outcome, x.winner_team, x.suspect, x.abort_reason,
           x.ended_at_ms, v_now
    FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_abort_reasons,
                p_ended_at_ms)
           AS x(room_id, node_id, outcome, winner_team, suspect, abort_reason, ended_at_ms)
    ORDER BY x.room_id
    RETURNING matches.match_id, matches.room_id)
  SELECT array_agg(i.match_id), array_agg(i.room_id) INTO v_match_ids, v_match_rooms
  FROM inserted i;

  -- The rest in one statement: settled is each new match with its room's values from the call's
  -- arrays, seated each of its players with theirs, and every write takes from those.
  WITH settled AS (
    SELECT mm.match_id, x.room_id, x.node_id, x.outcome, x.winner_team, x.suspect,
           x.replay_path, x.fingerprint
    FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id)
    JOIN unnest(p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_replay_paths,
                p_fingerprints)
           AS x(room_id, node_id, outcome, winner_team, suspect, replay_path, fingerprint)
      ON x.room_id = mm.room_id),
  seated AS (
    SELECT m.match_id, x.*
    FROM unnest(p_player_rooms, p_player_ids, p_teams, p_kills, p_deaths, p_assists, p_scores,
                p_disconnected, p_results, p_elo_before, p_elo_after)
           AS x(room, pid, team, kills, deaths, assists, score, disconnected, result, elo_before,
                elo_after)
    JOIN settled m ON m.room_id = x.room),
  recorded AS (
    INSERT INTO match_players (match_id, player_id, team, kills, deaths, assists, score,
                               disconnected, result, elo_before, elo_after)
    SELECT s.match_id, s.pid, s.team, s.kills, s.deaths, s.assists, s.score, s.disconnected,
           s.result, s.elo_before, s.elo_after
    FROM seated s),
  updated AS (
    UPDATE players p SET
      elo = r.elo,
      games = p.games + r.games,
      wins = p.wins + r.wins,
      losses = p.losses + r.losses,
      draws = p.draws + r.draws,
      in_battle_room = CASE WHEN p.in_battle_room = ANY (v_match_rooms) THEN 0
                            ELSE p.in_battle_room END
    FROM unnest(p_rated_players, p_final_elo, p_games, p_wins, p_losses, p_draws)
           AS r(player_id, elo, games, wins, losses, draws)
    WHERE p.player_id = r.player_id),
  replayed AS (
    INSERT INTO replays (match_id, room_id, path)
    SELECT m.match_id, m.room_id, m.replay_path FROM settled m WHERE m.replay_path <> ''),
  receipted AS (
    INSERT INTO settlement_receipts (room_id, node_id, outcome, match_id, fingerprint,
                                     settled_at, attempt_id)
    SELECT m.room_id, m.node_id, m.outcome, m.match_id, m.fingerprint, v_now, p_attempt_id
    FROM settled m)
  INSERT INTO settlement_events (room_id, node_id, match_id, payload)
  SELECT m.room_id, m.node_id, m.match_id, jsonb_build_object(
    'type', 'battle.settled',
    'room_id', m.room_id::text,
    'match_id', m.match_id::text,
    'outcome', m.outcome,
    'winner_team', m.winner_team,
    'suspect', m.suspect,
    'settled_at_ms', v_now_ms::text,
    'players', s.players)
  FROM settled m
  LEFT JOIN (
    SELECT s.match_id, jsonb_agg(jsonb_build_object(
             'player_id', s.pid::text, 'team', s.team, 'result', s.result,
             'elo_before', s.elo_before, 'elo_after', s.elo_after) ORDER BY s.pid) AS players
    FROM seated s GROUP BY s.match_id) s ON s.match_id = m.match_id
  ORDER BY m.room_id;

  DELETE FROM battle_rooms b WHERE b.room_id = ANY (v_match_rooms);

  RETURN QUERY
  SELECT mm.room_id, mm.match_id, v_now_ms
  FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id);
END
$$;
