-- Expires up to p_limit receipts settled before p_cutoff, in match order (the order they were
-- written, within a statement's time), each replaced by its compact record in the same
-- statement, with the outcome it was settled with. Returns how many it expired; a batch at a time keeps each transaction short, and the
-- caller repeats while a batch comes back full. The receipts' match_id index gives the order, and
-- the walk stops at the first receipt that is not old enough, so a pass costs what it expires.
CREATE OR REPLACE FUNCTION verdict_expire_receipts(p_cutoff timestamptz, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_rooms bigint[] := '{}';
  v_room bigint;
  v_settled_at timestamptz;
  v_count integer;
BEGIN
  FOR v_room, v_settled_at IN
    SELECT room_id, settled_at FROM settlement_receipts ORDER BY match_id
  LOOP
    EXIT WHEN v_settled_at >= p_cutoff OR cardinality(v_rooms) >= p_limit;
    v_rooms := v_rooms || v_room;
  END LOOP;
  WITH gone AS (
    DELETE FROM settlement_receipts r WHERE r.room_id = ANY (v_rooms)
    RETURNING r.room_id, r.node_id, r.outcome)
  INSERT INTO settled_rooms (room_id, node_tag, aborted)
  SELECT g.room_id, verdict_node_tag(g.node_id), g.outcome = 'ABORTED' FROM gone g
  ORDER BY g.room_id
  ON CONFLICT (room_id) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END
$$;
