-- The first part of verdict_settle_batch: the rooms' locks, and the verdicts the receipts decide.
-- One verdict per input room, in input order: 'busy' (p_wait false and another transaction holds
-- the room's advisory lock or its row), 'duplicate', 'outcome_conflict' or
-- 'idempotency_mismatch' (the room's receipt for that node decides), 'original_expired' (no
-- receipt for the node, but the room's compact record), or NULL (the room is for
-- verdict_settle_check). Receipt and record are read in one statement, so in one snapshot: a
-- receipt being expired meanwhile is seen as the one or as the other, never as neither; each
-- receipt is read by its key (a scalar subquery), which on a small settlement_receipts a join
-- would turn into a full scan. Locks, in the global order of verdict_settle_batch: the rooms'
-- advisory locks in room-id order, then the rooms' rows (SKIP LOCKED when the call does not
-- wait).
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
      ELSE coalesce(
        (SELECT CASE WHEN r.outcome <> x.outcome THEN 'outcome_conflict'
                     WHEN r.fingerprint <> x.fingerprint THEN 'idempotency_mismatch'
                     ELSE 'duplicate' END
         FROM settlement_receipts r
         WHERE r.room_id = x.room_id AND r.node_id = x.node_id),
        (SELECT 'original_expired' FROM settled_rooms s
         WHERE s.room_id = x.room_id AND s.node_tag = verdict_node_tag(x.node_id))) END
      ORDER BY x.i)
  INTO v_verdicts
  FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_fingerprints)
         WITH ORDINALITY AS x(room_id, node_id, outcome, fingerprint, i);
  RETURN v_verdicts;
END
$$;
