-- Detaches up to p_limit of the oldest partitions of `p_family` that are all older than
-- p_cutoff, the first half of dropping them: each is complete (its identity has handed out every
-- id of its range), its newest row (by id, the last written within a statement's time) was
-- created before p_cutoff, and, for events, every one of its events has its place in the feed
-- (an event without one has not been delivered to anybody yet). Detaching events raises the
-- feed's trim mark to the highest place they held. Returns the number of partitions detached.
--
-- Detaching locks the family's tables exclusively (PostgreSQL needs that while a DEFAULT
-- partition exists) for a catalog change only, a moment whatever the partitions hold. The
-- detached tables keep their names and are dropped afterwards, each in a transaction of its own
-- that locks nothing else (verdict_drop_detached_partition): the removal of their files, which
-- takes the file system time in proportion to their size, then holds up no settlement. It waits
-- for another session's partition maintenance to end: call it in a transaction of its own under
-- a short lock_timeout, and again while it returns p_limit.
CREATE OR REPLACE FUNCTION verdict_detach_old_partitions(p_family text, p_cutoff timestamptz,
                                                         p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_next bigint;
  v_newest_partition bigint;  -- the newest partition stays: rows arrive there next
  v_lowers bigint[];
  v_trim bigint;
  v_trimmed_at timestamptz;
  v_newest timestamptz;
  v_unsequenced boolean;
  v_top bigint;
  p record;
  t record;
BEGIN
  PERFORM verdict_partition_maintenance_lock(true);
  -- Checked once before the locks, so that a pass that detaches nothing blocks nothing, and
  -- again under them: a write in progress when they were asked for may have added to a
  -- partition.
  FOR i IN 1 .. 2 LOOP
    v_next := verdict_partition_next_id(p_family);
    SELECT max(lower_id) INTO v_newest_partition FROM verdict_partitions WHERE family = p_family;
    v_lowers := '{}';
    v_trim := 0;
    v_trimmed_at := NULL;
    FOR p IN SELECT lower_id, upper_id FROM verdict_partitions
             WHERE family = p_family AND lower_id < v_newest_partition AND upper_id <= v_next
             ORDER BY lower_id LIMIT p_limit LOOP
      IF p_family = 'events' THEN
        EXECUTE format('SELECT (SELECT created_at FROM %1$I ORDER BY event_id DESC LIMIT 1), '
                       'EXISTS (SELECT 1 FROM %1$I WHERE seq IS NULL), (SELECT max(seq) FROM %1$I)',
                       'settlement_events_p' || p.lower_id)
        INTO v_newest, v_unsequenced, v_top;
      ELSE
        EXECUTE format('SELECT settled_at FROM %I ORDER BY match_id DESC LIMIT 1',
                       'matches_p' || p.lower_id)
        INTO v_newest;
      END IF;
      EXIT WHEN v_newest >= p_cutoff OR coalesce(v_unsequenced, false);
      v_lowers := v_lowers || p.lower_id;
      v_trim := greatest(v_trim, coalesce(v_top, 0));
      v_trimmed_at := greatest(v_trimmed_at, v_newest);
    END LOOP;
    IF cardinality(v_lowers) = 0 THEN
      RETURN 0;
    END IF;
    IF i = 1 THEN
      -- The writes in progress finish, and none starts until this commits.
      PERFORM verdict_lock_partition_family(p_family);
    END IF;
  END LOOP;
  IF p_family = 'events' THEN
    UPDATE verdict_feed SET trimmed_through = greatest(trimmed_through, v_trim),
                            trimmed_at = greatest(trimmed_at, v_trimmed_at);
  END IF;
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    FOR i IN 1 .. cardinality(v_lowers) LOOP
      EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t.parent,
                     t.parent || '_p' || v_lowers[i]);
    END LOOP;
  END LOOP;
  DELETE FROM verdict_partitions WHERE family = p_family AND lower_id = ANY (v_lowers);
  RETURN cardinality(v_lowers);
END
$$;
