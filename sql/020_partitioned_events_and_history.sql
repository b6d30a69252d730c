-- 020: the event feed and the match history in partitions, so that retention drops whole
-- partitions instead of deleting rows (README, "Retention").
--
-- settlement_events is partitioned by event_id, its insert order. (seq, the place in the feed, is
-- handed out after commit by the sequencer of 004, so no row can be routed by it.) The history
-- tables, matches, match_players and replays, are partitioned alike by match_id, with the same
-- bounds, so that one slice of history is three partitions dropped together. A partition is
-- "<table>_p<lower bound>"; verdict_partitions lists them, per family ('events', 'history').
--
-- What partitioning costs the schema. PostgreSQL enforces a unique index on a partitioned table
-- only if it includes the partition key, so matches.room_id, settlement_events.room_id,
-- settlement_events.match_id, settlement_events.seq and replays.room_id are no longer unique in
-- the database. One settlement per room is still enforced by it: the receipt
-- (settlement_receipts, primary key room_id) is written in the same transaction as the match, its
-- players, its replay and its event, so a second settlement of a room fails on the receipt and
-- takes its history rows with it. seq stays unique because one sequencer at a time hands it out
-- (004). The foreign keys from receipts, events and replays to matches go too: history may be
-- dropped while the receipts stay, which is what makes them tombstones (021).
--
-- Existing rows stay where they are: each table becomes the first partition of its new parent
-- (the range up to the next id), and every id after that goes to partitions created ahead of the
-- rows (verdict_ensure_partitions). A DEFAULT partition takes any row that finds no partition, so
-- that a missing partition can never fail a settlement; the next verdict_ensure_partitions moves
-- such rows into a new partition of their own.

-- Moves `p_table` aside as the first partition of a new partitioned table of the same name,
-- created by `p_parent_ddl` (which must also create the parent's indexes, and name its CHECK
-- constraints as the table's are named, which attaching requires), covering the ids below
-- p_upper. Its primary key index becomes the parent's; the indexes p_indexes name are renamed
-- out of the parent's way first. Runs only inside this migration.
CREATE FUNCTION pg_temp.verdict_partition_existing(p_table text, p_upper bigint,
                                                   p_indexes text[], p_parent_ddl text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_index text;
BEGIN
  EXECUTE format('ALTER TABLE %I RENAME TO %I', p_table, p_table || '_p0');
  FOREACH v_index IN ARRAY p_indexes || (p_table || '_pkey') LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', v_index,
                   p_table || '_p0' || substr(v_index, length(p_table) + 1));
  END LOOP;
  EXECUTE p_parent_ddl;
  EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%s)',
                 p_table, p_table || '_p0', p_upper);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', p_table || '_default', p_table);
END
$$;

DO $$
DECLARE
  v_next_event bigint;
  v_next_match bigint;
BEGIN
  -- The next id of each identity: the legacy partitions end there.
  v_next_event := greatest(
    coalesce(pg_sequence_last_value(pg_get_serial_sequence('settlement_events', 'event_id')::regclass), 0),
    (SELECT coalesce(max(event_id), 0) FROM settlement_events)) + 1;
  v_next_match := greatest(
    coalesce(pg_sequence_last_value(pg_get_serial_sequence('matches', 'match_id')::regclass), 0),
    (SELECT coalesce(max(match_id), 0) FROM matches)) + 1;

  ALTER TABLE settlement_receipts DROP CONSTRAINT settlement_receipts_match_id_fkey;
  ALTER TABLE settlement_events
    DROP CONSTRAINT settlement_events_match_id_fkey,
    DROP CONSTRAINT settlement_events_room_id_key,
    DROP CONSTRAINT settlement_events_match_id_key,
    DROP CONSTRAINT settlement_events_seq_key,
    ALTER COLUMN event_id DROP IDENTITY;
  ALTER TABLE replays
    DROP CONSTRAINT replays_match_id_fkey,
    DROP CONSTRAINT replays_room_id_key;
  ALTER TABLE matches
    DROP CONSTRAINT matches_room_id_key,
    ALTER COLUMN match_id DROP IDENTITY;

  PERFORM pg_temp.verdict_partition_existing('settlement_events', v_next_event,
    ARRAY['settlement_events_unsequenced', 'settlement_events_node_seq'], format($ddl$
    CREATE TABLE settlement_events (
      event_id   bigint GENERATED ALWAYS AS IDENTITY (START %s),
      room_id    bigint NOT NULL,
      match_id   bigint NOT NULL,
      payload    jsonb  NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      seq        bigint,  -- its place in the feed, numbered after commit (004)
      node_id    text   NOT NULL,
      PRIMARY KEY (event_id)
    ) PARTITION BY RANGE (event_id);
    -- The sequencer's work list, the feed in order, a node's own events in feed order, and a
    -- room's event (reconciliation).
    CREATE INDEX settlement_events_unsequenced ON settlement_events (event_id) WHERE seq IS NULL;
    CREATE INDEX settlement_events_seq ON settlement_events (seq);
    CREATE INDEX settlement_events_node_seq ON settlement_events (node_id, seq);
    CREATE INDEX settlement_events_room ON settlement_events (room_id);
    $ddl$, v_next_event));

  PERFORM pg_temp.verdict_partition_existing('matches', v_next_match, '{}',
    format($ddl$
    CREATE TABLE matches (
      match_id     bigint GENERATED ALWAYS AS IDENTITY (START %s),
      room_id      bigint   NOT NULL,
      node_id      text     NOT NULL,
      outcome      text     NOT NULL
        CONSTRAINT matches_outcome_check CHECK (outcome IN ('SETTLED', 'ABORTED')),
      winner_team  smallint NOT NULL
        CONSTRAINT matches_winner_team_check CHECK (winner_team IN (0, 1, 2)),
      suspect      boolean  NOT NULL,
      abort_reason text     NOT NULL DEFAULT '',
      ended_at_ms  bigint   NOT NULL,
      settled_at   timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (match_id)
    ) PARTITION BY RANGE (match_id);
    CREATE INDEX matches_room ON matches (room_id);
    $ddl$, v_next_match));

  PERFORM pg_temp.verdict_partition_existing('match_players', v_next_match, '{}', $ddl$
    CREATE TABLE match_players (
      match_id     bigint   NOT NULL,
      player_id    bigint   NOT NULL,
      team         smallint NOT NULL CONSTRAINT match_players_team_check CHECK (team IN (1, 2)),
      kills        integer  NOT NULL CONSTRAINT match_players_kills_check CHECK (kills >= 0),
      deaths       integer  NOT NULL CONSTRAINT match_players_deaths_check CHECK (deaths >= 0),
      assists      integer  NOT NULL CONSTRAINT match_players_assists_check CHECK (assists >= 0),
      score        bigint   NOT NULL,
      disconnected boolean  NOT NULL,
      result       text     NOT NULL CONSTRAINT match_players_result_check
                              CHECK (result IN ('win', 'loss', 'draw', 'aborted')),
      elo_before   integer  NOT NULL,
      elo_after    integer  NOT NULL,
      PRIMARY KEY (match_id, player_id),
      CONSTRAINT match_players_check CHECK (result <> 'aborted' OR elo_after = elo_before)
    ) PARTITION BY RANGE (match_id);
    -- As 009 says of the table before: ten players a match, whatever ANALYZE sampled.
    ALTER TABLE match_players ALTER COLUMN match_id SET (n_distinct = -0.1);
    $ddl$);

  PERFORM pg_temp.verdict_partition_existing('replays', v_next_match, '{}', $ddl$
    CREATE TABLE replays (
      match_id bigint NOT NULL,
      room_id  bigint NOT NULL,
      path     text   NOT NULL CONSTRAINT replays_path_check CHECK (path <> ''),
      PRIMARY KEY (match_id)
    ) PARTITION BY RANGE (match_id);
    $ddl$);

  CREATE TABLE verdict_partitions (
    family   text   NOT NULL CHECK (family IN ('events', 'history')),
    lower_id bigint NOT NULL,  -- the partition holds lower_id <= id < upper_id
    upper_id bigint NOT NULL CHECK (upper_id > lower_id),
    PRIMARY KEY (family, lower_id)
  );
  -- The legacy partitions' lower bound is MINVALUE; 0 names them (_p0).
  INSERT INTO verdict_partitions VALUES ('events', 0, v_next_event), ('history', 0, v_next_match);
END
$$;

-- The tables of a family, and the column their partitions are ranges of.
CREATE FUNCTION verdict_partition_tables(p_family text)
RETURNS TABLE (parent text, key text) LANGUAGE sql IMMUTABLE AS $$
  SELECT t.parent, t.key FROM (VALUES ('events', 'settlement_events', 'event_id'),
                        ('history', 'matches', 'match_id'),
                        ('history', 'match_players', 'match_id'),
                        ('history', 'replays', 'match_id')) t(family, parent, key)
  WHERE t.family = p_family
$$;

-- The next id the family's identity will hand out (settlement_events.event_id for events,
-- matches.match_id for history).
CREATE FUNCTION verdict_partition_next_id(p_family text)
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

-- Partition maintenance takes this lock (the two-integer key space, as the sequencer's in 004):
-- one session at a time creates and drops partitions. With p_wait it waits for the lock (under
-- the caller's lock_timeout); without, it answers false when another session holds it.
CREATE FUNCTION verdict_partition_maintenance_lock(p_wait boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(1987208291, 2);  -- 'vrdc', 2: partition maintenance
    RETURN true;
  END IF;
  RETURN pg_try_advisory_xact_lock(1987208291, 2);
END
$$;

-- Makes sure the partitions of `p_family` reach p_ahead partitions of p_size ids beyond the next
-- id, so that rows arrive in partitions made before them, and moves rows that landed in the
-- DEFAULT partition (no partition was ready for them) into partitions of their own. New
-- partitions are created apart and attached (verdict_create_partition), holding up writes for
-- that moment only, and only when a partition is due. Returns the number of partitions created,
-- or -1 if another session is maintaining partitions right now (it will). Call it in a
-- transaction of its own.
CREATE FUNCTION verdict_ensure_partitions(p_family text, p_size bigint, p_ahead integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_top bigint;     -- where the partitions end
  v_target bigint;  -- where they must reach
  v_stray bigint;   -- the highest id in the DEFAULT partitions
  v_max bigint;
  v_created integer := 0;
  t record;
BEGIN
  IF p_size < 1 OR p_ahead < 1 THEN
    RAISE EXCEPTION 'partition size and partitions ahead must be positive';
  END IF;
  IF NOT verdict_partition_maintenance_lock(false) THEN
    RETURN -1;
  END IF;
  SELECT max(upper_id) INTO v_top FROM verdict_partitions WHERE family = p_family;
  v_stray := 0;
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    EXECUTE format('SELECT max(%I) FROM %I', t.key, t.parent || '_default') INTO v_max;
    v_stray := greatest(v_stray, coalesce(v_max, 0));
  END LOOP;
  v_target := greatest(verdict_partition_next_id(p_family), v_stray + 1) + p_size * p_ahead;
  WHILE v_top < v_target LOOP
    PERFORM verdict_create_partition(p_family, v_top, v_top + p_size);
    v_top := v_top + p_size;
    v_created := v_created + 1;
  END LOOP;
  RETURN v_created;
END
$$;

-- Locks the family's tables for a change of its partitions (verdict_create_partition,
-- verdict_drop_oldest_partition), in ACCESS EXCLUSIVE mode, at the parents, which covers their
-- partitions. Readers and settlements lock a parent before its partitions and keep their locks
-- to their commit, and they may go on to another table of the family; so a step that waited for
-- a partition (an attach needs the DEFAULT partition exclusively) or for a second parent while
-- holding the first would wait on a transaction that waits on it: a deadlock. The step waits
-- (under the caller's lock_timeout) for the first parent only, holding nothing yet; the others
-- it takes at once or not at all (55P03, lock_not_available), and the next pass tries again.
CREATE FUNCTION verdict_lock_partition_family(p_family text)
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

-- Creates the family's partitions for p_lower <= id < p_upper, moving into them the rows of the
-- DEFAULT partitions in that range. Called by verdict_ensure_partitions.
--
-- The family's tables are locked meanwhile (verdict_lock_partition_family), for the one moment
-- it takes: an insert that chose its partition before the new one existed would otherwise send
-- a row of the new range to the DEFAULT partition, whose constraint the attach has just
-- narrowed, and fail. After the lock, a writer sees the new partition.
CREATE FUNCTION verdict_create_partition(p_family text, p_lower bigint, p_upper bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_name text;
  v_moved bigint;
BEGIN
  PERFORM verdict_lock_partition_family(p_family);
  FOR t IN SELECT * FROM verdict_partition_tables(p_family) LOOP
    v_name := t.parent || '_p' || p_lower;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING CONSTRAINTS)', v_name, t.parent);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %s AND %I < %s RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved',
                   t.parent || '_default', t.key, p_lower, t.key, p_upper, v_name);
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_moved > 0 THEN
      RAISE WARNING 'moved % rows of % from its DEFAULT partition into %', v_moved, t.parent,
        v_name;
    END IF;
    IF t.parent = 'match_players' THEN
      EXECUTE format('ALTER TABLE %I ALTER COLUMN match_id SET (n_distinct = -0.1)', v_name);
    END IF;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', t.parent,
                   v_name, p_lower, p_upper);
  END LOOP;
  INSERT INTO verdict_partitions VALUES (p_family, p_lower, p_upper);
END
$$;
