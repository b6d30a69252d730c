-- The first part of verdict_settle_prepare: the rooms' locks, and the verdicts the receipts
-- decide. One row per input room, in input order (ord): its verdict, and for a verdict read from
-- a receipt, that receipt's match, outcome and settlement time. The verdict is 'busy' (p_wait
-- false and another transaction holds the room's advisory lock or its row), 'duplicate',
-- 'outcome_conflict' or 'idempotency_mismatch' (the room's receipt for that node decides),
-- 'original_expired' or 'outcome_conflict' (no receipt for the node, but the room's compact
-- record, with the same outcome or the other), or NULL (the room is for verdict_settle_check).
--
-- Receipt and record are read in one statement, so in one snapshot: a receipt being expired
-- meanwhile (retention takes no room locks) is seen as the one or as the other, never as neither,
-- and the answer to a duplicate is the receipt this statement read, never a second read that may
-- find it gone. Each is read by its key (a scalar subquery), which on a small settlement_receipts
-- a join would turn into a full scan. Locks, in the global order of verdict_settle_prepare: the
-- rooms' advisory locks in room-id order, then the rooms' rows (SKIP LOCKED when the call does not
-- wait).
CREATE OR REPLACE FUNCTION verdict_settle_guard(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_fingerprints bytea[],
  p_wait boolean)
RETURNS TABLE (ord bigint, verdict text, match_id bigint, outcome text, settled_at_ms bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_room bigint;
  v_busy bigint[] := '{}';  -- rooms another transaction holds (without p_wait)
  v_locked bigint[];        -- rooms whose rows this call locked (without p_wait)
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

  -- Each room's receipt for its node (a whole row) and compact record, as scalar subqueries:
  -- one index probe each, whatever the tables' statistics; OFFSET 0 keeps the planner from
  -- pulling the subquery up, which would run them once per reference.
  RETURN QUERY
  SELECT x.i,
         CASE WHEN x.busy THEN 'busy'
              WHEN (x.receipt).match_id IS NOT NULL THEN
                CASE WHEN (x.receipt).outcome <> x.outcome THEN 'outcome_conflict'
                     WHEN (x.receipt).fingerprint <> x.fingerprint THEN 'idempotency_mismatch'
                     ELSE 'duplicate' END
              WHEN x.record_aborted IS NOT NULL THEN
                CASE WHEN x.record_aborted <> (x.outcome = 'ABORTED') THEN 'outcome_conflict'
                     ELSE 'original_expired' END
         END,
         (x.receipt).match_id,
         CASE WHEN (x.receipt).match_id IS NOT NULL THEN (x.receipt).outcome
              WHEN x.record_aborted THEN 'ABORTED'
              WHEN NOT x.record_aborted THEN 'SETTLED' END,
         (extract(epoch FROM (x.receipt).settled_at) * 1000)::bigint
  FROM (
    SELECT u.i, u.outcome, u.fingerprint, u.room_id = ANY (v_busy) AS busy,
           CASE WHEN u.room_id <> ALL (v_busy) THEN
             (SELECT r FROM settlement_receipts r
              WHERE r.room_id = u.room_id AND r.node_id = u.node_id) END AS receipt,
           CASE WHEN u.room_id <> ALL (v_busy) THEN
             (SELECT s.aborted FROM settled_rooms s
              WHERE s.room_id = u.room_id AND s.node_tag = verdict_node_tag(u.node_id)) END
             AS record_aborted
    FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_fingerprints)
           WITH ORDINALITY AS u(room_id, node_id, outcome, fingerprint, i)
    OFFSET 0) x
  ORDER BY x.i;
END
$$;
