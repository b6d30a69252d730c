-- Partition maintenance takes this lock (the two-integer key space, as the sequencer's does):
-- one session at a time creates and drops partitions. With p_wait it waits for the lock (under
-- the caller's lock_timeout); without, it answers false when another session holds it.
CREATE OR REPLACE FUNCTION verdict_partition_maintenance_lock(p_wait boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(1987208291, 2);  -- 'vrdc', 2: partition maintenance
    RETURN true;
  END IF;
  RETURN pg_try_advisory_xact_lock(1987208291, 2);
END
$$;
