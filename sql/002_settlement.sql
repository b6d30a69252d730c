-- Allocation and settlement as functions, so the lobby (and pgbench, in the benchmark) does
-- each in one statement: one round trip plus COMMIT.

-- Elo change for one team: round(K * (S - E)), E = 1 / (1 + 10^((Rb - Ra) / 400)).
-- numeric rounding is half away from zero, so the two teams' changes are exact opposites.
CREATE FUNCTION verdict_elo_delta(team_rating double precision, opponent_rating double precision,
                                  score double precision, k integer)
RETURNS integer LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT round((k * (score - 1.0 / (1.0 + power(10.0, (opponent_rating - team_rating) / 400.0))))
               ::numeric)::integer
$$;

-- Allocates a room to a node with its roster. Returns one of
--   'allocated'   new room; players created if new and marked in battle
--   'duplicate'   the same room, node and roster were allocated before (idempotent retry)
--   'room_exists' the room id is taken by a different allocation, or was already settled
--   'player_busy' a player is in another room's battle (busy_player says which)
CREATE FUNCTION verdict_allocate(p_room_id bigint, p_node_id text, p_player_ids bigint[],
                                 p_teams smallint[])
RETURNS TABLE (status text, busy_player bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_busy bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(p_room_id);
  IF EXISTS (SELECT 1 FROM settlement_receipts WHERE room_id = p_room_id) THEN
    RETURN QUERY SELECT 'room_exists', 0::bigint;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id) THEN
    IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id AND node_id = p_node_id)
       AND (SELECT count(*) FROM battle_room_seats WHERE room_id = p_room_id)
           = cardinality(p_player_ids)
       AND NOT EXISTS (
         SELECT 1 FROM unnest(p_player_ids, p_teams) AS x(pid, team)
         LEFT JOIN battle_room_seats s
           ON s.room_id = p_room_id AND s.player_id = x.pid AND s.team = x.team
         WHERE s.player_id IS NULL) THEN
      RETURN QUERY SELECT 'duplicate', 0::bigint;
    ELSE
      RETURN QUERY SELECT 'room_exists', 0::bigint;
    END IF;
    RETURN;
  END IF;

  INSERT INTO players (player_id)
  SELECT pid FROM unnest(p_player_ids) AS pid ORDER BY pid
  ON CONFLICT (player_id) DO NOTHING;
  -- Lock the roster in player-id order, the order every transaction uses, so two rooms
  -- sharing players cannot deadlock.
  SELECT player_id INTO v_busy FROM (
    SELECT player_id, in_battle_room FROM players
    WHERE player_id = ANY (p_player_ids) ORDER BY player_id FOR UPDATE) locked
  WHERE in_battle_room <> 0 ORDER BY player_id LIMIT 1;
  IF FOUND THEN
    RETURN QUERY SELECT 'player_busy', v_busy;
    RETURN;
  END IF;

  INSERT INTO battle_rooms (room_id, node_id) VALUES (p_room_id, p_node_id);
  INSERT INTO battle_room_seats (room_id, player_id, team)
  SELECT p_room_id, pid, team FROM unnest(p_player_ids, p_teams) AS x(pid, team);
  UPDATE players SET in_battle_room = p_room_id WHERE player_id = ANY (p_player_ids);
  RETURN QUERY SELECT 'allocated', 0::bigint;
END
$$;

-- Settles one room, the whole of docs/design.md §5 in one transaction. Returns one row:
--   status: 'settled' | 'duplicate' | 'room_unknown' | 'outcome_conflict'
--           | 'idempotency_mismatch' | 'roster_mismatch'
--   match_id, outcome, settled_at_ms of the receipt (for settled, duplicate and conflicts),
--   event_id of the new settlement event (settled only).
-- A room is visible only to the node it was allocated to: another node's room, settled or
-- not, is 'room_unknown'.
-- p_unsafe_skip_guard is a test-only negative control: it skips the advisory lock, the
-- receipt check and the room row lock, and sleeps 500 ms between the checks and the writes to
-- widen the race it opens.
CREATE FUNCTION verdict_settle(
  p_room_id bigint, p_node_id text, p_outcome text, p_winner_team smallint,
  p_suspect boolean, p_ended_at_ms bigint, p_replay_path text, p_abort_reason text,
  p_fingerprint bytea, p_player_ids bigint[], p_teams smallint[], p_kills integer[],
  p_deaths integer[], p_assists integer[], p_scores bigint[], p_disconnected boolean[],
  p_k_factor integer, p_unsafe_skip_guard boolean)
RETURNS TABLE (status text, match_id bigint, outcome text, settled_at_ms bigint,
               event_id bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_receipt settlement_receipts%ROWTYPE;
  v_match_id bigint;
  v_event_id bigint;
  v_now timestamptz := clock_timestamp();
  v_score1 double precision;
  v_delta1 integer := 0;
  v_delta2 integer := 0;
  v_avg1 double precision;
  v_avg2 double precision;
BEGIN
  IF NOT p_unsafe_skip_guard THEN
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
  ELSE
    PERFORM 1 FROM battle_rooms WHERE room_id = p_room_id AND node_id = p_node_id;
  END IF;
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

  IF p_unsafe_skip_guard THEN
    PERFORM pg_sleep(0.5);  -- checks done, nothing written yet: the window the guard closes
  END IF;

  -- Lock the players in id order (see verdict_allocate), then rate on the locked values.
  PERFORM 1 FROM players WHERE player_id = ANY (p_player_ids) ORDER BY player_id FOR UPDATE;
  IF p_outcome = 'SETTLED' THEN
    SELECT avg(p.elo) FILTER (WHERE x.team = 1), avg(p.elo) FILTER (WHERE x.team = 2)
    INTO v_avg1, v_avg2
    FROM unnest(p_player_ids, p_teams) AS x(pid, team) JOIN players p ON p.player_id = x.pid;
    v_score1 := CASE p_winner_team WHEN 1 THEN 1.0 WHEN 2 THEN 0.0 ELSE 0.5 END;
    v_delta1 := verdict_elo_delta(v_avg1, v_avg2, v_score1, p_k_factor);
    v_delta2 := verdict_elo_delta(v_avg2, v_avg1, 1.0 - v_score1, p_k_factor);
  END IF;

  INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, abort_reason,
                       ended_at_ms, settled_at)
  VALUES (p_room_id, p_node_id, p_outcome, p_winner_team, p_suspect, p_abort_reason,
          p_ended_at_ms, v_now)
  RETURNING match_id INTO v_match_id;

  INSERT INTO match_players (match_id, player_id, team, kills, deaths, assists, score,
                             disconnected, result, elo_before, elo_after)
  SELECT v_match_id, x.pid, x.team, x.kills, x.deaths, x.assists, x.score, x.disconnected,
         CASE WHEN p_outcome = 'ABORTED' THEN 'aborted'
              WHEN p_winner_team = 0 THEN 'draw'
              WHEN p_winner_team = x.team THEN 'win' ELSE 'loss' END,
         p.elo,
         p.elo + CASE x.team WHEN 1 THEN v_delta1 ELSE v_delta2 END
  FROM unnest(p_player_ids, p_teams, p_kills, p_deaths, p_assists, p_scores, p_disconnected)
         AS x(pid, team, kills, deaths, assists, score, disconnected)
  JOIN players p ON p.player_id = x.pid;

  UPDATE players p SET
    elo = mp.elo_after,
    games = p.games + CASE WHEN mp.result = 'aborted' THEN 0 ELSE 1 END,
    wins = p.wins + CASE WHEN mp.result = 'win' THEN 1 ELSE 0 END,
    losses = p.losses + CASE WHEN mp.result = 'loss' THEN 1 ELSE 0 END,
    draws = p.draws + CASE WHEN mp.result = 'draw' THEN 1 ELSE 0 END,
    in_battle_room = CASE WHEN p.in_battle_room = p_room_id THEN 0 ELSE p.in_battle_room END
  FROM match_players mp
  WHERE mp.match_id = v_match_id AND p.player_id = mp.player_id;

  IF p_replay_path <> '' THEN
    INSERT INTO replays (match_id, room_id, path) VALUES (v_match_id, p_room_id, p_replay_path);
  END IF;

  INSERT INTO settlement_events (room_id, match_id, payload)
  SELECT p_room_id, v_match_id, jsonb_build_object(
    'type', 'battle.settled',
    'room_id', p_room_id::text,
    'match_id', v_match_id::text,
    'outcome', p_outcome,
    'winner_team', p_winner_team,
    'suspect', p_suspect,
    'settled_at_ms', (extract(epoch FROM v_now) * 1000)::bigint::text,
    'players', (SELECT jsonb_agg(jsonb_build_object(
                  'player_id', player_id::text, 'team', team, 'result', result,
                  'elo_before', elo_before, 'elo_after', elo_after) ORDER BY player_id)
                FROM match_players WHERE match_id = v_match_id))
  RETURNING event_id INTO v_event_id;

  INSERT INTO settlement_receipts (room_id, node_id, outcome, match_id, fingerprint, settled_at)
  VALUES (p_room_id, p_node_id, p_outcome, v_match_id, p_fingerprint, v_now);

  DELETE FROM battle_rooms WHERE room_id = p_room_id;
  -- No NOTIFY here: a notifying transaction holds a database-wide lock through its commit,
  -- which would make every settlement wait for the previous one's WAL flush. The lobby
  -- notifies after the commit instead (docs/design.md §5: commit, then NOTIFY).

  RETURN QUERY SELECT 'settled', v_match_id, p_outcome,
                      (extract(epoch FROM v_now) * 1000)::bigint, v_event_id;
END
$$;
