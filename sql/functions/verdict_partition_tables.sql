-- The tables of a family, and the column their partitions are ranges of.
CREATE OR REPLACE FUNCTION verdict_partition_tables(p_family text)
RETURNS TABLE (parent text, key text) LANGUAGE sql IMMUTABLE AS $$
  SELECT t.parent, t.key FROM (VALUES ('events', 'settlement_events', 'event_id'),
                        ('history', 'matches', 'match_id'),
                        ('history', 'match_players', 'match_id'),
                        ('history', 'replays', 'match_id')) t(family, parent, key)
  WHERE t.family = p_family
$$;
