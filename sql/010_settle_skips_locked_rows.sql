-- 010: a room whose row, or one of whose players' rows, another session holds is 'busy' in a
-- batch, as a room whose advisory lock another transaction holds has been since 005: the lobby
-- then tries that room on its own (waiting for it under the lock timeout), so only its item can
-- answer UNAVAILABLE, and the rest of the batch settles.
--
-- Up to 009 a batch skipped a room whose advisory lock was taken, but then waited for the rooms'
-- rows (FOR UPDATE in verdict_settle_guard) and the players' rows (FOR UPDATE in
-- verdict_settle_write). A row lock held elsewhere (an operator's open transaction, another
-- application updating a player) made the whole statement wait out the lock timeout and fail:
-- every room of the batch answered 503, and each retry of the stuck room took its batch-mates
-- down again. Now, when the call does not wait (p_wait false), both row locks are taken with
-- SKIP LOCKED, and a room whose row, or any of whose players, was not locked is 'busy'. SKIP
-- LOCKED waits for nothing, so it adds no deadlock; a call that waits (a room settled on its own)
-- takes the locks as before, in the global order: advisory locks, rooms' rows, players' rows,
-- each in id order.
--
-- The players are locked by verdict_settle_lock_players, between the check and the write, for
-- the rooms the check would settle; the write's own FOR UPDATE of those players then finds them
-- held by its own transaction and waits for nothing.

-- As 009's guard, but without p_wait a room whose row another session holds is 'busy'.
CREATE OR REPLACE FUNCTION verdict_settle_guard(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_fingerprints bytea[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_room bigint;
  v_busy bigint[] := '{}';  -- rooms another transaction holds (without p_wait)
  v_locked bigint[];        -- rooms whose rows this call locked (without p_wait)
  v_verdicts text[];
BEGIN
  FOR v_room IN SELECT r FROM unnest(p_room_ids) r ORDER BY r LOOP
    IF p_wait THEN
      PERFORM pg_advisory_xact_lock(v_room);
    ELSIF NOT pg_try_advisory_xact_lock(v_room) THEN
      v_busy := v_busy || v_room;
    END IF;
  END LOOP;
  IF p_wait THEN
    PERFORM 1 FROM battle_rooms b WHERE b.room_id = ANY (p_room_ids)
    ORDER BY b.room_id FOR UPDATE;
  ELSE
    SELECT coalesce(array_agg(l.room_id), '{}') INTO v_locked FROM (
      SELECT b.room_id FROM battle_rooms b WHERE b.room_id = ANY (p_room_ids)
        AND b.room_id <> ALL (v_busy)
      ORDER BY b.room_id FOR UPDATE SKIP LOCKED) l;
    -- A row that is there but was skipped is another session's.
    SELECT v_busy || coalesce(array_agg(b.room_id), '{}') INTO v_busy FROM battle_rooms b
    WHERE b.room_id = ANY (p_room_ids) AND b.room_id <> ALL (v_busy)
      AND b.room_id <> ALL (v_locked);
  END IF;

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

-- p_verdicts, with each 'settle' room whose players are not all locked by this call turned
-- 'busy' (without p_wait; with it, the verdicts as they are, and the write waits for the
-- players). The players are those given for the room, which the check found to be its seats.
CREATE OR REPLACE FUNCTION verdict_settle_lock_players(
  p_verdicts text[], p_room_ids bigint[], p_player_rooms bigint[], p_player_ids bigint[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_settle bigint[];  -- the rooms to settle
  v_locked bigint[];  -- their players this call locked
  v_busy bigint[];
BEGIN
  IF p_wait THEN
    RETURN p_verdicts;
  END IF;
  SELECT array_agg(p_room_ids[i]) INTO v_settle
  FROM generate_subscripts(p_room_ids, 1) i WHERE p_verdicts[i] = 'settle';
  IF v_settle IS NULL THEN
    RETURN p_verdicts;
  END IF;
  SELECT coalesce(array_agg(l.player_id), '{}') INTO v_locked FROM (
    SELECT p.player_id FROM players p WHERE p.player_id IN (
      SELECT x.pid FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
      WHERE x.room = ANY (v_settle))
    ORDER BY p.player_id FOR UPDATE SKIP LOCKED) l;
  -- Each room's players are distinct and its own, so all are locked when the counts agree.
  IF cardinality(v_locked) =
     (SELECT count(*) FROM unnest(p_player_rooms) AS r(room) WHERE r.room = ANY (v_settle)) THEN
    RETURN p_verdicts;
  END IF;
  SELECT array_agg(DISTINCT x.room) INTO v_busy
  FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
  WHERE x.room = ANY (v_settle) AND x.pid NOT IN (SELECT unnest(v_locked));
  RETURN (SELECT array_agg(CASE WHEN x.verdict = 'settle' AND x.room_id = ANY (v_busy)
                                THEN 'busy' ELSE x.verdict END ORDER BY x.i)
          FROM unnest(p_room_ids, p_verdicts) WITH ORDINALITY AS x(room_id, verdict, i));
END
$$;

-- 007's composition, with the players locked between the check and the write.
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
  v_verdicts := verdict_settle_lock_players(v_verdicts, p_room_ids, p_player_rooms,
                                            p_player_ids, p_wait);
  RETURN QUERY SELECT * FROM verdict_settle_write(
    p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_ended_at_ms,
    p_replay_paths, p_abort_reasons, p_fingerprints, p_player_rooms, p_player_ids, p_teams,
    p_kills, p_deaths, p_assists, p_scores, p_disconnected, p_k_factor, p_attempt_id, v_verdicts);
END
$$;
