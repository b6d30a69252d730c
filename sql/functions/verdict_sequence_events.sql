-- The sequencer (sql/001_baseline.sql says why the feed needs one): numbers up to p_limit
-- committed events that have no place in the feed yet, oldest insert first, after the feed's head
-- (which trimming may have taken past every seq left in the table), and wakes every lobby's
-- reader (NOTIFY is only a hint: readers also poll). Returns how many it numbered, or -1 if
-- another sequencer holds the lock (it will number them). The lock uses the two-integer key
-- space, which never meets the rooms' bigint advisory locks.
CREATE OR REPLACE FUNCTION verdict_sequence_events(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_top bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(1987208291, 1) THEN  -- 'vrdc', 1: the event sequencer
    RETURN -1;
  END IF;
  -- A new statement, so a new snapshot: it sees the previous sequencer's commit. The head is read
  -- once, into a variable: inlined into the update it was evaluated again for every row.
  v_top := verdict_feed_head();
  WITH todo AS (SELECT event_id, row_number() OVER (ORDER BY event_id) AS n
                FROM settlement_events WHERE seq IS NULL ORDER BY event_id LIMIT p_limit)
  UPDATE settlement_events e SET seq = v_top + todo.n
  FROM todo WHERE e.event_id = todo.event_id;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM pg_notify('verdict_settlement_events', '');
  END IF;
  RETURN v_count;
END
$$;
