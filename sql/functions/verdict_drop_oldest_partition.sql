-- Drops the oldest partition of `p_family` if all of it is older than p_cutoff: it is complete
-- (its identity has handed out every id of its range), its newest row (by id, the last written
-- within a statement's time) was created before p_cutoff, and, for events, every one of its
-- events has its place in the feed (an event without one has not been delivered to anybody
-- yet). Dropping events raises the feed's trim mark to the highest place they held. Returns the
-- lower bound of the partition dropped, or NULL if there is none to drop now. It waits for
-- another session's partition maintenance to end, and dropping a partition locks the family's
-- tables exclusively for a moment (PostgreSQL needs that to detach it while a DEFAULT partition
-- exists): call it in a transaction of its own under a short lock_timeout, and again while it
-- drops one.
CREATE OR REPLACE FUNCTION verdict_drop_oldest_partition(p_family text, p_cutoff timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_lower bigint;
  v_upper bigint;
  v_newest timestamptz;
  v_unsequenced boolean;
  v_top bigint;
  t record;
BEGIN
  PERFORM verdict_partition_maintenance_lock(true);
  SELECT lower_id, upper_id INTO v_lower, v_upper FROM verdict_partitions
  WHERE family = p_family ORDER BY lower_id LIMIT 1;
  -- The newest partition stays: rows arrive there next, and a family always has a partition.
  IF NOT FOUND OR v_upper > verdict_partition_next_id(p_family)
     OR v_upper = (SELECT max(upper_id) FROM verdict_partitions WHERE family = p_family) THEN
    RETURN NULL;
  END IF;
  -- Checked once before the locks, so that a pass that drops nothing blocks nothing, and again
  -- under them: a write in progress when they were asked for may have added to the partition.
  FOR i IN 1 .. 2 LOOP
    IF p_family = 'events' THEN
      EXECUTE format('SELECT (SELECT created_at FROM %1$I ORDER BY event_id DESC LIMIT 1), '
                     'EXISTS (SELECT 1 FROM %1$I WHERE seq IS NULL), (SELECT max(seq) FROM %1$I)',
                     'settlement_events_p' || v_lower)
      INTO v_newest, v_unsequenced, v_top;
    ELSE
      EXECUTE format('SELECT settled_at FROM %I ORDER BY match_id DESC LIMIT 1',
                     'matches_p' || v_lower)
      INTO v_newest;
    END IF;
    IF v_newest >= p_cutoff OR coalesce(v_unsequenced, false) THEN
      RETURN NULL;
    END IF;
    IF i = 1 THEN
      -- The writes in progress finish, and none starts until this commits.
      PERFORM verdict_lock_partition_family(p_family);
    END IF;
  END LOOP;
  IF p_family = 'events' THEN
    UPDATE verdict_feed SET trimmed_through = greatest(trimmed_through, coalesce(v_top, 0)),
                            trimmed_at = greatest(trimmed_at, v_newest);
  END IF;
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    EXECUTE format('DROP TABLE %I', t.parent || '_p' || v_lower);
  END LOOP;
  DELETE FROM verdict_partitions WHERE family = p_family AND lower_id = v_lower;
  RETURN v_lower;
END
$$;
