-- 006: an event's payload is compressed with lz4, not pglz.
--
-- A battle.settled event of a room of ten carries each player's rating before and after, about
-- 3 kB of jsonb: over PostgreSQL's 2 kB threshold, so every event is compressed as it is written.
-- With pglz that was the largest single difference in the database's CPU between this lobby's
-- drain and 4bed501's, whose events were under the threshold (bench/RESULTS.md, "The lobby's own
-- share of the drain"); lz4 does the same in a twentieth of the time, and a feed reader
-- decompresses it faster too. Rows already written keep pglz: both read alike.
--
-- New partitions copy the setting (verdict_create_partition: INCLUDING COMPRESSION). A server
-- built without lz4 keeps pglz: the lobby works the same, only slower.
DO $$
DECLARE
  t regclass;
BEGIN
  FOR t IN
    SELECT 'settlement_events'::regclass
    UNION ALL
    SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'settlement_events'::regclass
  LOOP
    EXECUTE format('ALTER TABLE %s ALTER COLUMN payload SET COMPRESSION lz4', t);
  END LOOP;
EXCEPTION WHEN feature_not_supported THEN
  RAISE WARNING 'this PostgreSQL has no lz4; settlement_events.payload stays compressed by pglz';
END
$$;
