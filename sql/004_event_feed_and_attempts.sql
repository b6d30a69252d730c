-- 004: the event feed in commit order, scoped by node, and receipts that name the attempt that
-- committed them. (005 replaces the settlement function to write the event's node and the
-- attempt id.)
--
-- Why a second number. settlement_events.event_id comes from an identity column, so it is
-- taken at INSERT, and transactions commit in any order: event 10 can become visible after
-- event 11. A reader that had passed 11 would never look back for 10. So each event gets a
-- place in the feed, `seq`, only once its transaction has committed, from a sequencer that
-- runs alone (verdict_sequence_events below). Clients see `seq` as the feed's event_id.
--
-- Why the cursor cannot skip an event (docs/design.md §3, Events). Sequencing is one short
-- transaction under an advisory lock that only one sequencer holds at a time; it gives the
-- committed events that have no seq yet the numbers max(seq)+1, max(seq)+2, … and commits
-- before the lock is released. Hence (1) seqs appear in the order they are numbered, each
-- sequencing transaction's numbers above all earlier ones; (2) any snapshot sees a gap-free
-- prefix 1..k of the feed, because a sequencer starts only after the previous one's commit is
-- visible; (3) an event whose settlement commits later is numbered by a later sequencer, so it
-- lands after every number already handed out instead of behind a cursor. A reader that has
-- delivered 1..k therefore only ever needs what is above k: `?after=k` resumes exactly.
-- A sequencer that fails rolls back whole and the next one renumbers from max(seq).

ALTER TABLE settlement_events
  ADD COLUMN seq bigint UNIQUE,
  ADD COLUMN node_id text;
-- What was committed before this migration keeps its old id as its place, so a client's saved
-- cursor stays valid. Events of settlements still running now are numbered after them.
UPDATE settlement_events e SET node_id = m.node_id, seq = e.event_id
FROM matches m WHERE m.match_id = e.match_id;
ALTER TABLE settlement_events ALTER COLUMN node_id SET NOT NULL;
-- The sequencer's work list, and a node's own events in feed order.
CREATE INDEX settlement_events_unsequenced ON settlement_events (event_id) WHERE seq IS NULL;
CREATE INDEX settlement_events_node_seq ON settlement_events (node_id, seq);

-- Which settlement attempt committed the receipt: a lobby that lost its connection during
-- COMMIT reads the receipt back and knows whether the commit was its own (duplicate = false).
ALTER TABLE settlement_receipts ADD COLUMN attempt_id bigint NOT NULL DEFAULT 0;

-- Numbers up to p_limit committed events that have no place in the feed yet, oldest insert
-- first, and wakes every lobby's reader (NOTIFY is only a hint: readers also poll). Returns how
-- many it numbered, or -1 if another sequencer holds the lock (it will number them). The lock
-- uses the two-integer key space, which never meets the rooms' bigint advisory locks.
CREATE FUNCTION verdict_sequence_events(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
BEGIN
  IF NOT pg_try_advisory_xact_lock(1987208291, 1) THEN  -- 'vrdc', 1: the event sequencer
    RETURN -1;
  END IF;
  -- A new statement, so a new snapshot: it sees the previous sequencer's commit.
  WITH base AS (SELECT coalesce(max(seq), 0) AS top FROM settlement_events),
       todo AS (SELECT event_id, row_number() OVER (ORDER BY event_id) AS n
                FROM settlement_events WHERE seq IS NULL ORDER BY event_id LIMIT p_limit)
  UPDATE settlement_events e SET seq = base.top + todo.n
  FROM base, todo WHERE e.event_id = todo.event_id;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM pg_notify('verdict_settlement_events', '');
  END IF;
  RETURN v_count;
END
$$;
