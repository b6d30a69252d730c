-- Drops one table that verdict_detach_old_partitions detached, the oldest, and returns its name,
-- or NULL if there is none. A detached table is one named as a partition of a family's table
-- (`matches_p5000`) that is no longer a partition: verdict_create_partition makes and attaches
-- its tables in one transaction, so no other session ever sees one unattached. The drop locks
-- that table only, and its commit removes the table's files. Those a pass detached, and those a
-- pass that ended between detaching and dropping left behind, go the same way. Call it in a
-- transaction of its own, and again while it returns a name.
CREATE OR REPLACE FUNCTION verdict_drop_detached_partition()
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v_name text;
BEGIN
  SELECT c.relname INTO v_name
  FROM pg_class c
  JOIN (SELECT parent FROM verdict_partition_tables('events')
        UNION ALL SELECT parent FROM verdict_partition_tables('history')) t
    ON c.relname ~ ('^' || t.parent || '_p[0-9]+$')
  WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
    AND NOT c.relispartition
  ORDER BY substring(c.relname FROM '_p([0-9]+)$')::bigint, c.relname
  LIMIT 1;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- IF EXISTS: a concurrent pass may have dropped it while this one waited for its lock.
  EXECUTE format('DROP TABLE IF EXISTS %I', v_name);
  RETURN v_name;
END
$$;
