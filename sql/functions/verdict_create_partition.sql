-- Creates the family's partitions for p_lower <= id < p_upper, moving into them the rows of the
-- DEFAULT partitions in that range. Called by verdict_ensure_partitions.
--
-- The family's tables are locked meanwhile (verdict_lock_partition_family), for the one moment
-- it takes: an insert that chose its partition before the new one existed would otherwise send
-- a row of the new range to the DEFAULT partition, whose constraint the attach has just
-- narrowed, and fail. After the lock, a writer sees the new partition.
CREATE OR REPLACE FUNCTION verdict_create_partition(p_family text, p_lower bigint, p_upper bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_name text;
  v_moved bigint;
BEGIN
  PERFORM verdict_lock_partition_family(p_family);
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    v_name := t.parent || '_p' || p_lower;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING CONSTRAINTS INCLUDING COMPRESSION)', v_name,
                   t.parent);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %s AND %I < %s RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved',
                   t.parent || '_default', t.key, p_lower, t.key, p_upper, v_name);
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_moved > 0 THEN
      RAISE WARNING 'moved % rows of % from its DEFAULT partition into %', v_moved, t.parent,
        v_name;
    END IF;
    IF t.parent = 'match_players' THEN
      EXECUTE format('ALTER TABLE %I ALTER COLUMN match_id SET (n_distinct = -0.1)', v_name);
    END IF;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', t.parent,
                   v_name, p_lower, p_upper);
  END LOOP;
  INSERT INTO verdict_partitions VALUES (p_family, p_lower, p_upper);
END
$$;
