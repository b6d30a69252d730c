-- 021: a feed that says where it starts and which history it belongs to, and retention that
-- drops whole partitions (README, "The event feed" and "Retention").
--
-- verdict_feed holds, in its one row:
--   epoch            a random name for this feed's history, made with the schema. A cursor means
--                    something only in its epoch: after a backup is restored, the places after
--                    the backup are handed out again to other events, so the restore procedure
--                    runs `verdict-lobby new-epoch`, and subscribers that name the old epoch are
--                    refused (EPOCH_CHANGED) instead of resuming at a place that now holds
--                    another event.
--   trimmed_through  every event with seq <= trimmed_through may be gone; every event above it
--                    is kept. Raised when a partition of events is dropped, to the highest seq it
--                    held. A cursor below it is refused (CURSOR_TRIMMED), ?after=0 included, so a
--                    subscriber never silently starts at whatever is left.
--   trimmed_at       the newest creation time of the events dropped: receipts settled after it
--                    must still have their event (reconciliation).
-- The feed's head is the highest seq, or trimmed_through if every event is gone: places are
-- never handed out twice, even after everything was trimmed.
CREATE TABLE verdict_feed (
  one             boolean PRIMARY KEY DEFAULT true CHECK (one),
  epoch           text    NOT NULL CHECK (epoch <> ''),
  trimmed_through bigint  NOT NULL DEFAULT 0 CHECK (trimmed_through >= 0),
  trimmed_at      timestamptz
);

-- A new random epoch: 16 hex digits.
CREATE FUNCTION verdict_new_epoch()
RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT left(replace(gen_random_uuid()::text, '-', ''), 16)
$$;

INSERT INTO verdict_feed (epoch) VALUES (verdict_new_epoch());

-- The newest place in the feed.
CREATE FUNCTION verdict_feed_head()
RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT greatest((SELECT coalesce(max(seq), 0) FROM settlement_events),
                  (SELECT trimmed_through FROM verdict_feed))
$$;

-- 004's sequencer, numbering after the feed's head (which trimming may have taken past every
-- seq left in the table).
CREATE OR REPLACE FUNCTION verdict_sequence_events(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
BEGIN
  IF NOT pg_try_advisory_xact_lock(1987208291, 1) THEN  -- 'vrdc', 1: the event sequencer
    RETURN -1;
  END IF;
  -- A new statement, so a new snapshot: it sees the previous sequencer's commit.
  WITH base AS (SELECT verdict_feed_head() AS top),
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

-- Drops the oldest partition of `p_family` if all of it is older than p_cutoff: it is complete
-- (its identity has handed out every id of its range), its newest row (by id, the last written
-- within a statement's time) was created before p_cutoff, and, for events, every one of its
-- events has its place in the feed (an event without one has not been delivered to anybody
-- yet). Dropping events raises the feed's trim mark to the highest place they held. Returns the
-- lower bound of the partition dropped, or NULL if there is none to drop now. It waits for
-- another session's partition maintenance to end, and dropping a partition locks the family's
-- tables exclusively for a moment (PostgreSQL needs that to detach it while a DEFAULT partition
-- exists): call it in a transaction of its own under a short lock_timeout, and again while it
-- drops one.
CREATE FUNCTION verdict_drop_oldest_partition(p_family text, p_cutoff timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_lower bigint;
  v_upper bigint;
  v_newest timestamptz;
  v_unsequenced boolean;
  v_top bigint;
  t record;
BEGIN
  PERFORM verdict_partition_maintenance_lock(true);
  SELECT lower_id, upper_id INTO v_lower, v_upper FROM verdict_partitions
  WHERE family = p_family ORDER BY lower_id LIMIT 1;
  -- The newest partition stays: rows arrive there next, and a family always has a partition.
  IF NOT FOUND OR v_upper > verdict_partition_next_id(p_family)
     OR v_upper = (SELECT max(upper_id) FROM verdict_partitions WHERE family = p_family) THEN
    RETURN NULL;
  END IF;
  -- Checked once before the locks, so that a pass that drops nothing blocks nothing, and again
  -- under them: a write in progress when they were asked for may have added to the partition.
  FOR i IN 1 .. 2 LOOP
    IF p_family = 'events' THEN
      EXECUTE format('SELECT (SELECT created_at FROM %1$I ORDER BY event_id DESC LIMIT 1), '
                     'EXISTS (SELECT 1 FROM %1$I WHERE seq IS NULL), (SELECT max(seq) FROM %1$I)',
                     'settlement_events_p' || v_lower)
      INTO v_newest, v_unsequenced, v_top;
    ELSE
      EXECUTE format('SELECT settled_at FROM %I ORDER BY match_id DESC LIMIT 1',
                     'matches_p' || v_lower)
      INTO v_newest;
    END IF;
    IF v_newest >= p_cutoff OR coalesce(v_unsequenced, false) THEN
      RETURN NULL;
    END IF;
    IF i = 1 THEN
      -- The writes in progress finish, and none starts until this commits.
      PERFORM verdict_lock_partition_family(p_family);
    END IF;
  END LOOP;
  IF p_family = 'events' THEN
    UPDATE verdict_feed SET trimmed_through = greatest(trimmed_through, coalesce(v_top, 0)),
                            trimmed_at = greatest(trimmed_at, v_newest);
  END IF;
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    EXECUTE format('DROP TABLE %I', t.parent || '_p' || v_lower);
  END LOOP;
  DELETE FROM verdict_partitions WHERE family = p_family AND lower_id = v_lower;
  RETURN v_lower;
END
$$;
