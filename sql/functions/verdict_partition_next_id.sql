-- The next id the family's identity will hand out (settlement_events.event_id for events,
-- matches.match_id for history).
CREATE OR REPLACE FUNCTION verdict_partition_next_id(p_family text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_next bigint;
BEGIN
  EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM %s',
                 pg_get_serial_sequence(
                   CASE p_family WHEN 'events' THEN 'settlement_events' ELSE 'matches' END,
                   CASE p_family WHEN 'events' THEN 'event_id' ELSE 'match_id' END))
  INTO v_next;
  RETURN v_next;
END
$$;
