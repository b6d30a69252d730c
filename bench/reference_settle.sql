-- A frozen reference, kept as it was and not in step with the lobby's settlement: the
-- single-room settlement the lobby ran before batched settlement (verdict_settle of the
-- pre-release migrations 002 and 004, minus its test-only switch), created by `verdict-bench
-- drain` under its own name so that pgbench can measure the old design's one-room-per-transaction
-- ceiling in the same run as the batched drains. Never part of the lobby's schema; its positional
-- parameters are its own, not the lobby's settlement's (lobby/settle_calls.h). Its statements
-- are the old design's one room at a time, written against today's tables: player ids as text,
-- ratings in player_ratings (the mode 'default'), match players' ratings as rating_before and
-- rating_after, and Elo's formula inline.
CREATE OR REPLACE FUNCTION verdict_bench_settle_one(
  p_room_id bigint, p_node_id text, p_outcome text, p_winner_team smallint,
  p_suspect boolean, p_ended_at_ms bigint, p_replay_path text, p_abort_reason text,
  p_fingerprint bytea, p_player_ids text[], p_teams smallint[], p_kills integer[],
  p_deaths integer[], p_assists integer[], p_scores bigint[], p_disconnected boolean[],
  p_k_factor integer, p_attempt_id bigint DEFAULT 0)
RETURNS TABLE (status text, match_id bigint, outcome text, settled_at_ms bigint,
               event_id bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_receipt settlement_receipts%ROWTYPE;
  v_match_id bigint;
  v_event_id bigint;
  v_now timestamptz := clock_timestamp();
  v_mode integer := (SELECT mode_id FROM modes WHERE mode = 'default');
  v_score1 double precision;
  v_delta1 double precision := 0;
  v_delta2 double precision := 0;
  v_avg1 double precision;
  v_avg2 double precision;
BEGIN
  PERFORM pg_advisory_xact_lock(p_room_id);
  SELECT * INTO v_receipt FROM settlement_receipts
  WHERE room_id = p_room_id AND node_id = p_node_id;
  IF FOUND THEN
    RETURN QUERY SELECT
      CASE WHEN v_receipt.outcome <> p_outcome THEN 'outcome_conflict'
           WHEN v_receipt.fingerprint <> p_fingerprint THEN 'idempotency_mismatch'
           ELSE 'duplicate' END,
      v_receipt.match_id, v_receipt.outcome,
      (extract(epoch FROM v_receipt.settled_at) * 1000)::bigint, 0::bigint;
    RETURN;
  END IF;
  PERFORM 1 FROM battle_rooms WHERE room_id = p_room_id AND node_id = p_node_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'room_unknown', 0::bigint, ''::text, 0::bigint, 0::bigint;
    RETURN;
  END IF;

  IF cardinality(p_player_ids) <> (SELECT count(*) FROM battle_room_seats WHERE room_id = p_room_id)
     OR cardinality(p_player_ids) <> (SELECT count(DISTINCT pid) FROM unnest(p_player_ids) pid)
     OR EXISTS (
       SELECT 1 FROM unnest(p_player_ids, p_teams) AS x(pid, team)
       LEFT JOIN battle_room_seats s
         ON s.room_id = p_room_id AND s.player_id = x.pid AND s.team = x.team
       WHERE s.player_id IS NULL) THEN
    RETURN QUERY SELECT 'roster_mismatch', 0::bigint, ''::text, 0::bigint, 0::bigint;
    RETURN;
  END IF;

  -- Lock the players in id order (see verdict_allocate), then rate on the locked values.
  PERFORM 1 FROM players WHERE player_id = ANY (p_player_ids) ORDER BY player_id FOR UPDATE;
  INSERT INTO player_ratings (mode_id, player_id, rating, displayed)
  SELECT v_mode, pid, 1500, 1500 FROM unnest(p_player_ids) pid ORDER BY pid
  ON CONFLICT (mode_id, player_id) DO NOTHING;
  IF p_outcome = 'SETTLED' THEN
    SELECT avg(r.rating) FILTER (WHERE x.team = 1), avg(r.rating) FILTER (WHERE x.team = 2)
    INTO v_avg1, v_avg2
    FROM unnest(p_player_ids, p_teams) AS x(pid, team)
    JOIN player_ratings r ON r.mode_id = v_mode AND r.player_id = x.pid;
    v_score1 := CASE p_winner_team WHEN 1 THEN 1.0 WHEN 2 THEN 0.0 ELSE 0.5 END;
    v_delta1 := round(p_k_factor * (v_score1 - 1.0 / (1.0 + power(10.0, (v_avg2 - v_avg1) / 400.0))));
    v_delta2 := -v_delta1;
  END IF;

  INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, abort_reason,
                       ended_at_ms, settled_at)
  VALUES (p_room_id, p_node_id, p_outcome, p_winner_team, p_suspect, p_abort_reason,
          p_ended_at_ms, v_now)
  RETURNING match_id INTO v_match_id;

  INSERT INTO match_players (match_id, player_id, team, rank, kills, deaths, assists, score,
                             disconnected, result, rating_before, rating_after)
  SELECT v_match_id, x.pid, x.team,
         CASE WHEN p_winner_team = 0 OR p_winner_team = x.team THEN 1 ELSE 2 END,
         x.kills, x.deaths, x.assists, x.score, x.disconnected,
         CASE WHEN p_outcome = 'ABORTED' THEN 'aborted'
              WHEN p_winner_team = 0 THEN 'draw'
              WHEN p_winner_team = x.team THEN 'win' ELSE 'loss' END,
         r.rating,
         r.rating + CASE x.team WHEN 1 THEN v_delta1 ELSE v_delta2 END
  FROM unnest(p_player_ids, p_teams, p_kills, p_deaths, p_assists, p_scores, p_disconnected)
         AS x(pid, team, kills, deaths, assists, score, disconnected)
  JOIN player_ratings r ON r.mode_id = v_mode AND r.player_id = x.pid;

  UPDATE player_ratings r SET
    rating = mp.rating_after,
    displayed = mp.rating_after,
    games = r.games + CASE WHEN mp.result = 'aborted' THEN 0 ELSE 1 END,
    wins = r.wins + CASE WHEN mp.result = 'win' THEN 1 ELSE 0 END,
    losses = r.losses + CASE WHEN mp.result = 'loss' THEN 1 ELSE 0 END,
    draws = r.draws + CASE WHEN mp.result = 'draw' THEN 1 ELSE 0 END,
    last_match_at = v_now
  FROM match_players mp
  WHERE mp.match_id = v_match_id AND r.mode_id = v_mode AND r.player_id = mp.player_id;

  IF p_replay_path <> '' THEN
    INSERT INTO replays (match_id, room_id, path) VALUES (v_match_id, p_room_id, p_replay_path);
  END IF;

  INSERT INTO settlement_events (room_id, node_id, match_id, payload)
  SELECT p_room_id, p_node_id, v_match_id, jsonb_build_object(
    'type', 'battle.settled',
    'room_id', p_room_id::text,
    'match_id', v_match_id::text,
    'outcome', p_outcome,
    'winner_team', p_winner_team,
    'suspect', p_suspect,
    'settled_at_ms', (extract(epoch FROM v_now) * 1000)::bigint::text,
    'players', (SELECT jsonb_agg(jsonb_build_object(
                  'player_id', player_id, 'team', team, 'result', result,
                  'elo_before', round(rating_before)::integer,
                  'elo_after', round(rating_after)::integer) ORDER BY player_id)
                FROM match_players WHERE match_id = v_match_id))
  RETURNING event_id INTO v_event_id;

  INSERT INTO settlement_receipts (room_id, node_id, outcome, match_id, fingerprint, settled_at,
                                   attempt_id)
  VALUES (p_room_id, p_node_id, p_outcome, v_match_id, p_fingerprint, v_now, p_attempt_id);

  DELETE FROM battle_rooms WHERE room_id = p_room_id;
  -- No NOTIFY here: a notifying transaction holds a database-wide lock through its commit,
  -- which would make every settlement wait for the previous one's WAL flush. The lobby
  -- notifies after the commit instead (docs/design.md §5: commit, then NOTIFY).

  RETURN QUERY SELECT 'settled', v_match_id, p_outcome,
                      (extract(epoch FROM v_now) * 1000)::bigint, v_event_id;
END
$$;
