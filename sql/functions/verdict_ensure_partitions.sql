-- Makes sure the partitions of `p_family` reach p_ahead partitions of p_size ids beyond the next
-- id, so that rows arrive in partitions made before them, and moves rows that landed in the
-- DEFAULT partition (no partition was ready for them) into partitions of their own. New
-- partitions are created apart and attached (verdict_create_partition), holding up writes for
-- that moment only, and only when a partition is due. Returns the number of partitions created,
-- or -1 if another session is maintaining partitions right now (it will). Call it in a
-- transaction of its own.
CREATE OR REPLACE FUNCTION verdict_ensure_partitions(p_family text, p_size bigint, p_ahead integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_top bigint;     -- where the partitions end
  v_target bigint;  -- where they must reach
  v_stray bigint;   -- the highest id in the DEFAULT partitions
  v_max bigint;
  v_created integer := 0;
  t record;
BEGIN
  IF p_size < 1 OR p_ahead < 1 THEN
    RAISE EXCEPTION 'partition size and partitions ahead must be positive';
  END IF;
  IF NOT verdict_partition_maintenance_lock(false) THEN
    RETURN -1;
  END IF;
  SELECT max(upper_id) INTO v_top FROM verdict_partitions WHERE family = p_family;
  v_stray := 0;
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    EXECUTE format('SELECT max(%I) FROM %I', t.key, t.parent || '_default') INTO v_max;
    v_stray := greatest(v_stray, coalesce(v_max, 0));
  END LOOP;
  v_target := greatest(verdict_partition_next_id(p_family), v_stray + 1) + p_size * p_ahead;
  WHILE v_top < v_target LOOP
    PERFORM verdict_create_partition(p_family, v_top, v_top + p_size);
    v_top := v_top + p_size;
    v_created := v_created + 1;
  END LOOP;
  RETURN v_created;
END
$$;
