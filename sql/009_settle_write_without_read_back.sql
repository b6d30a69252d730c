-- 009: the settlement never reads back what it writes, and match_players.match_id's statistics
-- scale with the table.
--
-- 007's write inserted each room's match players, then updated the players from a join of the
-- new matches with match_players, and built each event from a subquery on match_players. How
-- PostgreSQL read those rows back depended on what ANALYZE last said of match_players.match_id.
-- A match has about ten players, so the column's distinct values sit right at the 10 % of rows
-- below which ANALYZE records them as a fixed number instead of a fraction of the table. When it
-- did, the planner went on believing each match_id had hundreds of rows as the history grew:
-- the write updated the players through a hash join over a full scan of match_players, in
-- about a third of the calls of one benchmark run (one call of 64 rooms took 17 ms at 160,000
-- match players), and the single-room settlement before batching scanned all of players for
-- each room (bench/RESULTS.md, "Reading back what was just written"). Both costs grow with the
-- history.
--
-- A fresh database has the same trouble the other way round: while matches and
-- settlement_receipts are small, PostgreSQL reads them by a full scan filtered on the call's
-- array, which it prices as nearly free, and in the first 20,000 rooms of a benchmark run on a
-- fresh database it did so in half the calls (302 scans of matches, 154 of the receipts).
--
-- So the write never reads back what it writes:
--   * the insert into match_players returns its rows, and the players' update and the events
--     take them from there in the same statement (a data-modifying WITH runs once, to
--     completion, whether or not the statement reads it);
--   * the new matches' values come from the call's own arrays, by the room ids the insert into
--     matches returned, for the match players, the events, the replays and the receipts, which
--     are written in that same statement;
--   * the guard reads each room's receipt by its key, a scalar subquery, as 008 reads rooms and
--     seats, instead of joining the receipts as a set.
-- The answers and every row written are those of 007: the events' players are the same objects
-- in the same order, and a match without players still gets "players": null. And
-- match_players.match_id is declared to have a tenth as many distinct values as the table has
-- rows (ten players a match), so that any other query by match (match history, reports) is
-- planned on a number that grows with the table.
ALTER TABLE match_players ALTER COLUMN match_id SET (n_distinct = -0.1);
ANALYZE match_players;

-- The verdicts the receipts decide, as 007's guard: the same locks in the same order, and each
-- room's receipt read by its key (a scalar subquery, as 008 reads rooms and seats) rather than
-- joined as a set, which on a small settlement_receipts was a hash join over a full scan.
CREATE OR REPLACE FUNCTION verdict_settle_guard(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_fingerprints bytea[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_room bigint;
  v_busy bigint[] := '{}';  -- rooms whose lock another transaction holds (without p_wait)
  v_verdicts text[];
BEGIN
  FOR v_room IN SELECT r FROM unnest(p_room_ids) r ORDER BY r LOOP
    IF p_wait THEN
      PERFORM pg_advisory_xact_lock(v_room);
    ELSIF NOT pg_try_advisory_xact_lock(v_room) THEN
      v_busy := v_busy || v_room;
    END IF;
  END LOOP;
  PERFORM 1 FROM battle_rooms b WHERE b.room_id = ANY (p_room_ids)
    AND b.room_id <> ALL (v_busy)
  ORDER BY b.room_id FOR UPDATE;

  SELECT array_agg(CASE
      WHEN x.room_id = ANY (v_busy) THEN 'busy'
      ELSE (SELECT CASE WHEN r.outcome <> x.outcome THEN 'outcome_conflict'
                        WHEN r.fingerprint <> x.fingerprint THEN 'idempotency_mismatch'
                        ELSE 'duplicate' END
            FROM settlement_receipts r
            WHERE r.room_id = x.room_id AND r.node_id = x.node_id) END ORDER BY x.i)
  INTO v_verdicts
  FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_fingerprints)
         WITH ORDINALITY AS x(room_id, node_id, outcome, fingerprint, i);
  RETURN v_verdicts;
END
$$;

-- Settles the rooms whose verdict is 'settle', as 007's write does, and answers as it does.
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
    -- the events. Elo per room from its teams' average ratings (verdict_elo_delta), as a single
    -- room does: the averages are window aggregates over each room's own players, so the
    -- statement stays linear in the batch.
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
        SELECT x.room, x.pid, x.team, x.kills, x.deaths, x.assists, x.score, x.disconnected,
               p.elo,
               avg(p.elo) FILTER (WHERE x.team = 1) OVER (PARTITION BY x.room) AS avg1,
               avg(p.elo) FILTER (WHERE x.team = 2) OVER (PARTITION BY x.room) AS avg2
        FROM unnest(p_player_rooms, p_player_ids, p_teams, p_kills, p_deaths, p_assists,
                    p_scores, p_disconnected)
               AS x(room, pid, team, kills, deaths, assists, score, disconnected)
        JOIN players p ON p.player_id = x.pid
        WHERE x.room = ANY (v_settle)) s
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
