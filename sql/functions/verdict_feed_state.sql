-- Where the feed stands, as of one snapshot, for a subscription to be judged by (and a refused
-- one told): its epoch; its head; the trim mark, every event above which is kept; and the oldest
-- place kept above the mark (0: none). With p_node_id, the head and the oldest place are that
-- node's own events' (the head is never below the trim mark): a node's token sees the places of
-- its own events and the trim mark only, never how far the whole feed has grown
-- (docs/design.md §8, "What a node's token learns of the feed").
CREATE OR REPLACE FUNCTION verdict_feed_state(p_node_id text, OUT epoch text, OUT head bigint,
                                              OUT trimmed_through bigint, OUT oldest bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT f.epoch, f.trimmed_through INTO epoch, trimmed_through FROM verdict_feed f;
  IF p_node_id IS NULL THEN
    head := verdict_feed_head();
    SELECT coalesce(min(e.seq), 0) INTO oldest
    FROM settlement_events e WHERE e.seq > trimmed_through;
  ELSE
    SELECT greatest(trimmed_through, coalesce(max(e.seq), 0)) INTO head
    FROM settlement_events e WHERE e.node_id = p_node_id;
    SELECT coalesce(min(e.seq), 0) INTO oldest
    FROM settlement_events e WHERE e.node_id = p_node_id AND e.seq > trimmed_through;
  END IF;
END
$$;
