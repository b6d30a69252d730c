-- The newest place in the feed.
CREATE OR REPLACE FUNCTION verdict_feed_head()
RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT greatest((SELECT coalesce(max(seq), 0) FROM settlement_events),
                  (SELECT trimmed_through FROM verdict_feed))
$$;
