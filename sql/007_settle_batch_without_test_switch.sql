-- 007: verdict_settle_batch without its test-only switch, in three parts.
--
-- Up to 006 the settlement carried its own negative control: p_unsafe_skip_guard skipped the
-- rooms' locks and the receipt check and slept 500 ms between the checks and the writes. It is
-- gone; the function is now the composition of three parts, each a statement set of 006:
--   verdict_settle_guard  the rooms' advisory locks in room-id order, the rooms' rows, and the
--                         verdicts the receipts decide (duplicate and the two conflicts) or
--                         the lock does ('busy');
--   verdict_settle_check  the verdicts of the other rooms: 'room_unknown', 'roster_mismatch' or
--                         'settle';
--   verdict_settle_write  the settlement of the rooms to settle, and the answer.
-- check and write rely on the guard having run in the same transaction: call
-- verdict_settle_batch. The negative-control tests compose check and write without the guard
-- in a function of their own (tests/sql/unguarded_settle.sql), which never ships.
-- verdict_settle_batch takes the arguments of 006 less the switch and answers as it did; 005
-- says what they mean. The one change: settled_at is the time the writing starts, after the
-- locks, where 006 took it before them.

DROP FUNCTION IF EXISTS verdict_settle_batch(
  bigint[], text[], text[], smallint[], boolean[], bigint[], text[], text[], bytea[], bigint[],
  bigint[], smallint[], integer[], integer[], integer[], bigint[], boolean[], integer, bigint,
  boolean, boolean);

-- One verdict per input room, in input order: 'busy' (p_wait false and another transaction
-- holds the room's lock), 'duplicate', 'outcome_conflict' or 'idempotency_mismatch' (the
-- room's receipt for that node decides), or NULL (the room is for verdict_settle_check). Locks,
-- in the global order of 005: the rooms' advisory locks in room-id order, then the rooms' rows.
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
      WHEN r.room_id IS NULL THEN NULL
      WHEN r.outcome <> x.outcome THEN 'outcome_conflict'
      WHEN r.fingerprint <> x.fingerprint THEN 'idempotency_mismatch'
      ELSE 'duplicate' END ORDER BY x.i)
  INTO v_verdicts
  FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_fingerprints)
         WITH ORDINALITY AS x(room_id, node_id, outcome, fingerprint, i)
  LEFT JOIN settlement_receipts r ON r.room_id = x.room_id AND r.node_id = x.node_id;
  RETURN v_verdicts;
END
$$;

-- p_verdicts with each NULL replaced by the room's own verdict: 'room_unknown' (no such room
-- for that node), 'settle' when the roster matches (the players given are distinct, as many as
-- the seats, and each is seated on the team given), 'roster_mismatch' otherwise.
CREATE OR REPLACE FUNCTION verdict_settle_check(
  p_verdicts text[], p_room_ids bigint[], p_node_ids text[], p_player_rooms bigint[],
  p_player_ids bigint[], p_teams smallint[])
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_verdicts text[];
BEGIN
  WITH given AS (
    SELECT room, pid, team FROM unnest(p_player_rooms, p_player_ids, p_teams) AS p(room, pid, team)),
  given_counts AS (
    SELECT room, count(*) AS n, count(DISTINCT pid) AS distinct_n FROM given GROUP BY room),
  seated AS (
    SELECT g.room, count(*) AS n FROM given g
    JOIN battle_room_seats s ON s.room_id = g.room AND s.player_id = g.pid AND s.team = g.team
    GROUP BY g.room),
  seats AS (
    SELECT s.room_id, count(*) AS n FROM battle_room_seats s
    WHERE s.room_id = ANY (p_room_ids) GROUP BY s.room_id)
  SELECT array_agg(CASE
      WHEN x.verdict IS NOT NULL THEN x.verdict
      WHEN b.room_id IS NULL THEN 'room_unknown'
      WHEN coalesce(gc.n, 0) = coalesce(gc.distinct_n, 0)
           AND coalesce(gc.n, 0) = coalesce(st.n, 0)
           AND coalesce(gc.n, 0) = coalesce(sd.n, 0) THEN 'settle'
      ELSE 'roster_mismatch' END ORDER BY x.i)
  INTO v_verdicts
  FROM unnest(p_room_ids, p_node_ids, p_verdicts) WITH ORDINALITY AS x(room_id, node_id, verdict, i)
  LEFT JOIN battle_rooms b ON b.room_id = x.room_id AND b.node_id = x.node_id
  LEFT JOIN given_counts gc ON gc.room = x.room_id
  LEFT JOIN seats st ON st.room_id = x.room_id
  LEFT JOIN seated sd ON sd.room = x.room_id;
  RETURN v_verdicts;
END
$$;

-- Settles the rooms whose verdict is 'settle' (docs/design.md §5, as 006 did) and answers one row per
-- input room, in input order, as verdict_settle_batch does.
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

    -- Elo per room from its teams' average ratings (verdict_elo_delta), as a single room does:
    -- the averages are window aggregates over each room's own players, and each player finds
    -- its new match by the room's unique key, so the statement stays linear in the batch.
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
      SELECT x.room, x.pid, x.team, x.kills, x.deaths, x.assists, x.score, x.disconnected, p.elo,
             avg(p.elo) FILTER (WHERE x.team = 1) OVER (PARTITION BY x.room) AS avg1,
             avg(p.elo) FILTER (WHERE x.team = 2) OVER (PARTITION BY x.room) AS avg2
      FROM unnest(p_player_rooms, p_player_ids, p_teams, p_kills, p_deaths, p_assists, p_scores,
                  p_disconnected)
             AS x(room, pid, team, kills, deaths, assists, score, disconnected)
      JOIN players p ON p.player_id = x.pid
      WHERE x.room = ANY (v_settle)) s
    JOIN matches m ON m.room_id = s.room AND m.match_id = ANY (v_match_ids);

    UPDATE players p SET
      elo = mp.elo_after,
      games = p.games + CASE WHEN mp.result = 'aborted' THEN 0 ELSE 1 END,
      wins = p.wins + CASE WHEN mp.result = 'win' THEN 1 ELSE 0 END,
      losses = p.losses + CASE WHEN mp.result = 'loss' THEN 1 ELSE 0 END,
      draws = p.draws + CASE WHEN mp.result = 'draw' THEN 1 ELSE 0 END,
      in_battle_room = CASE WHEN p.in_battle_room = mm.room_id THEN 0 ELSE p.in_battle_room END
    FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id)
    JOIN match_players mp ON mp.match_id = mm.match_id
    WHERE p.player_id = mp.player_id;

    INSERT INTO replays (match_id, room_id, path)
    SELECT mm.match_id, mm.room_id, x.path
    FROM unnest(v_match_rooms, v_match_ids) AS mm(room_id, match_id)
    JOIN unnest(p_room_ids, p_replay_paths) AS x(room_id, path) ON x.room_id = mm.room_id
    WHERE x.path <> '';

    INSERT INTO settlement_events (room_id, node_id, match_id, payload)
    SELECT m.room_id, m.node_id, m.match_id, jsonb_build_object(
      'type', 'battle.settled',
      'room_id', m.room_id::text,
      'match_id', m.match_id::text,
      'outcome', m.outcome,
      'winner_team', m.winner_team,
      'suspect', m.suspect,
      'settled_at_ms', v_now_ms::text,
      'players', (SELECT jsonb_agg(jsonb_build_object(
                    'player_id', mp.player_id::text, 'team', mp.team, 'result', mp.result,
                    'elo_before', mp.elo_before, 'elo_after', mp.elo_after)
                    ORDER BY mp.player_id)
                  FROM match_players mp WHERE mp.match_id = m.match_id))
    FROM matches m WHERE m.match_id = ANY (v_match_ids)
    ORDER BY m.room_id;

    INSERT INTO settlement_receipts (room_id, node_id, outcome, match_id, fingerprint,
                                     settled_at, attempt_id)
    SELECT m.room_id, m.node_id, m.outcome, m.match_id, x.fingerprint, v_now, p_attempt_id
    FROM matches m
    JOIN unnest(p_room_ids, p_fingerprints) AS x(room_id, fingerprint) ON x.room_id = m.room_id
    WHERE m.match_id = ANY (v_match_ids);

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
  v_verdicts := verdict_settle_guard(p_room_ids, p_node_ids, p_outcomes, p_fingerprints, p_wait);
  v_verdicts := verdict_settle_check(v_verdicts, p_room_ids, p_node_ids, p_player_rooms,
                                     p_player_ids, p_teams);
  RETURN QUERY SELECT * FROM verdict_settle_write(
    p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_ended_at_ms,
    p_replay_paths, p_abort_reasons, p_fingerprints, p_player_rooms, p_player_ids, p_teams,
    p_kills, p_deaths, p_assists, p_scores, p_disconnected, p_k_factor, p_attempt_id, v_verdicts);
END
$$;
