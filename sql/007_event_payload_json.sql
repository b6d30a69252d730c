-- 007: an event's payload is stored as json, the text the feed serves, not as jsonb.
--
-- The settlement wrote each battle.settled event as jsonb: PostgreSQL parsed the lobby's text of
-- the players (about 2.5 kB a room of ten), built a jsonb value from it, sorted every object's
-- keys and wrote the binary form; the feed then printed that back to text for each reader. Nothing
-- queries inside a payload: it is written once and served as text. As json the write only checks
-- the text is JSON and stores it; the feed copies it out. Building 20,000 events took 1.37 s as
-- jsonb and 0.63 s as json on the bench machine (bench/RESULTS.md, "The event as the text it is
-- served as").
--
-- The feed serves the same bytes as before: the write lays each payload out as jsonb printed it
-- (members in jsonb's key order, ", " and ": " between them, numbers as jsonb writes a double),
-- and a test holds every stored payload equal to its jsonb text (BatchSettlementTest). Rows
-- already written are rewritten here, once, as their jsonb text; the table is locked while they
-- are. New partitions copy the column (verdict_create_partition: LIKE the parent).
--
-- A change of type drops the column's compression back to the server's default, in the parent
-- and in every partition, and SET COMPRESSION does not reach partitions from the parent: so each
-- table is set to lz4 again, as migration 006 did.
ALTER TABLE settlement_events ALTER COLUMN payload TYPE json USING payload::json;
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
