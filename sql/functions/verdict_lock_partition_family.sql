-- Locks the family's tables for a change of its partitions (verdict_create_partition,
-- verdict_detach_old_partitions), in ACCESS EXCLUSIVE mode, at the parents, which covers their
-- partitions. Readers and settlements lock a parent before its partitions and keep their locks
-- to their commit, and they may go on to another table of the family; so a step that waited for
-- a partition (an attach needs the DEFAULT partition exclusively) or for a second parent while
-- holding the first would wait on a transaction that waits on it: a deadlock. The step waits
-- (under the caller's lock_timeout) for the first parent only, holding nothing yet; the others
-- it takes at once or not at all (55P03, lock_not_available), and the next pass tries again.
CREATE OR REPLACE FUNCTION verdict_lock_partition_family(p_family text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_wait text := '';
BEGIN
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE%s', t.parent, v_wait);
    v_wait := ' NOWAIT';
  END LOOP;
END
$$;
