-- The last part of verdict_settle_batch: settles the rooms whose verdict is 'settle', and answers
-- every room (the arguments of verdict_settle_batch, with the verdicts in place of p_wait).
--
-- Elo. A room's change is computed from the ratings its players had when it was allocated
-- (battle_room_seats.elo_at_allocation) and added to their ratings now: a released player
-- (pending settlement, README) may have played other matches meanwhile; those changes stand, and
-- this room's change comes on top of them. Every match stays zero-sum, since both teams' changes
-- are computed from the same ratings. A seat without a recorded rating is rated on the current
-- one.
--
-- The write never reads back what it writes. How PostgreSQL would read rows back depends on what
-- ANALYZE last said of them, and both ways of being wrong cost a full scan that grows with the
-- history (bench/RESULTS.md, "Reading back what was just written"). So:
--   * the insert into match_players returns its rows, and the players' update and the events
--     take them from there in the same statement (a data-modifying WITH runs once, to
--     completion, whether or not the statement reads it);
--   * the new matches' values come from the call's own arrays, by the room ids the insert into
--     matches returned, for the match players, the events, the replays and the receipts, which
--     are written in that same statement.
-- A match without players still gets "players": null in its event.
CREATE OR REPLACE FUNCTION verdict_settle_write(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_winner_teams smallint[],
  p_suspects boolean[], p_ended_at_ms bigint[], p_replay_paths text[], p_abort_reasons text[],
  p_fingerprints bytea[],
  p_player_rooms bigint[], p_player_ids bigint[], p_teams smallint[], p_kills integer[],
  p_deaths integer[], p_assists integer[], p_scores bigint[], p_disconnected boolean[],
  p_k_factor integer, p_attempt_id bigint, p_verdicts text[])
RETURNS TABLE (room_id bigint, status text, match_id bigint, outcome text, settled_at_ms bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_now timestamptz := clock_timestamp();
  v_now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  v_settle bigint[];    -- the rooms this call settles
  v_match_ids bigint[]; -- their new matches, in the same order as v_match_rooms
  v_match_rooms bigint[];
BEGIN
  SELECT array_agg(p_room_ids[i]) INTO v_settle
  FROM generate_subscripts(p_room_ids, 1) i WHERE p_verdicts[i] = 'settle';

  IF v_settle IS NOT NULL THEN
    -- Lock the players in id order, then rate on the locked values.
    PERFORM 1 FROM players p WHERE p.player_id IN (
      SELECT pid FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
      WHERE x.room = ANY (v_settle))
    ORDER BY p.player_id FOR UPDATE;

    -- From here on every statement works on this call's own new matches, by match_id.
    WITH inserted AS (
      INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, abort_reason,
                           ended_at_ms, settled_at)
      SELECT x.room_id, x.node_id, x.outcome, x.winner_team, x.suspect, x.abort_reason,
             x.ended_at_ms, v_now
      FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects,
                  p_abort_reasons, p_ended_at_ms)
             AS x(room_id, node_id, outcome, winner_team, suspect, abort_reason, ended_at_ms)
      WHERE x.room_id = ANY (v_settle)
      ORDER BY x.room_id
      RETURNING matches.match_id, matches.room_id)
    SELECT array_agg(i.match_id), array_agg(i.room_id) INTO v_match_ids, v_match_rooms
    FROM inserted i;

    -- The rest of the settlement in one statement, which reads back nothing it writes:
    -- settled is each new match with its room's values from the call's arrays, and every write
    -- takes from it; the rows written to match_players are returned to the players' update and
    -- the events. Elo per room from its teams' average ratings at allocation (verdict_elo_delta),
    -- each player's change added to the current rating (elo_before): the averages are window
    -- aggregates over each room's own players, so the statement stays linear in the batch.
    WITH settled AS (
      SELECT mm.match_id, x.room_id, x.node_id, x.outcome, x.winner_team, x.suspect,
             x.replay_path, x.fingerprint
      FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id)
      JOIN unnest(p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_replay_paths,
                  p_fingerprints)
             AS x(room_id, node_id, outcome, winner_team, suspect, replay_path, fingerprint)
        ON x.room_id = mm.room_id),
    rated AS (
      INSERT INTO match_players (match_id, player_id, team, kills, deaths, assists, score,
                                 disconnected, result, elo_before, elo_after)
      SELECT m.match_id, s.pid, s.team, s.kills, s.deaths, s.assists, s.score, s.disconnected,
             CASE WHEN m.outcome = 'ABORTED' THEN 'aborted'
                  WHEN m.winner_team = 0 THEN 'draw'
                  WHEN m.winner_team = s.team THEN 'win' ELSE 'loss' END,
             s.elo,
             s.elo + CASE WHEN m.outcome <> 'SETTLED' THEN 0
                          WHEN s.team = 1 THEN verdict_elo_delta(s.avg1, s.avg2,
                            CASE m.winner_team WHEN 1 THEN 1.0 WHEN 2 THEN 0.0 ELSE 0.5 END,
                            p_k_factor)
                          ELSE verdict_elo_delta(s.avg2, s.avg1,
                            CASE m.winner_team WHEN 1 THEN 0.0 WHEN 2 THEN 1.0 ELSE 0.5 END,
                            p_k_factor) END
      FROM (
        SELECT r.*,
               avg(r.rated) FILTER (WHERE r.team = 1) OVER (PARTITION BY r.room) AS avg1,
               avg(r.rated) FILTER (WHERE r.team = 2) OVER (PARTITION BY r.room) AS avg2
        FROM (
          -- Each player's current rating (elo), and the one the room is rated on (rated): the
          -- rating recorded at allocation, read by the seat's key.
          SELECT x.room, x.pid, x.team, x.kills, x.deaths, x.assists, x.score, x.disconnected,
                 p.elo,
                 coalesce((SELECT bs.elo_at_allocation FROM battle_room_seats bs
                           WHERE bs.room_id = x.room AND bs.player_id = x.pid), p.elo) AS rated
          FROM unnest(p_player_rooms, p_player_ids, p_teams, p_kills, p_deaths, p_assists,
                      p_scores, p_disconnected)
                 AS x(room, pid, team, kills, deaths, assists, score, disconnected)
          JOIN players p ON p.player_id = x.pid
          WHERE x.room = ANY (v_settle)) r) s
      JOIN settled m ON m.room_id = s.room
      RETURNING match_players.match_id, match_players.player_id, match_players.team,
                match_players.result, match_players.elo_before, match_players.elo_after),
    updated AS (
      UPDATE players p SET
        elo = r.elo_after,
        games = p.games + CASE WHEN r.result = 'aborted' THEN 0 ELSE 1 END,
        wins = p.wins + CASE WHEN r.result = 'win' THEN 1 ELSE 0 END,
        losses = p.losses + CASE WHEN r.result = 'loss' THEN 1 ELSE 0 END,
        draws = p.draws + CASE WHEN r.result = 'draw' THEN 1 ELSE 0 END,
        in_battle_room = CASE WHEN p.in_battle_room = mm.room_id THEN 0 ELSE p.in_battle_room END
      FROM rated r
      JOIN settled mm ON mm.match_id = r.match_id
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
      'players', r.players)
    FROM settled m
    LEFT JOIN (
      SELECT r.match_id, jsonb_agg(jsonb_build_object(
               'player_id', r.player_id::text, 'team', r.team, 'result', r.result,
               'elo_before', r.elo_before, 'elo_after', r.elo_after) ORDER BY r.player_id) AS players
      FROM rated r GROUP BY r.match_id) r ON r.match_id = m.match_id
    ORDER BY m.room_id;

    DELETE FROM battle_rooms b WHERE b.room_id = ANY (v_settle);
  END IF;

  RETURN QUERY
  SELECT x.room_id,
         CASE WHEN p_verdicts[x.i] = 'settle' THEN 'settled' ELSE p_verdicts[x.i] END,
         coalesce(r.match_id, 0), coalesce(r.outcome, ''),
         coalesce((extract(epoch FROM r.settled_at) * 1000)::bigint, 0)
  FROM unnest(p_room_ids, p_node_ids) WITH ORDINALITY AS x(room_id, node_id, i)
  LEFT JOIN LATERAL (
    SELECT * FROM settlement_receipts r
    WHERE r.room_id = x.room_id AND r.node_id = x.node_id
      AND p_verdicts[x.i] IN ('settle', 'duplicate', 'outcome_conflict', 'idempotency_mismatch')
    ORDER BY r.match_id = ANY (coalesce(v_match_ids, '{}')) DESC LIMIT 1) r ON true
  ORDER BY x.i;
END
$$;
