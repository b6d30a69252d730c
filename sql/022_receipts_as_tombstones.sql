-- 022: receipts are the tombstones that keep "at most one settlement per room" (P2) after
-- retention (README, "Retention").
--
-- A receipt outlives the room's history: a redelivery after the history is dropped is still
-- answered from it, duplicate with the original match_id. When the receipt itself expires
-- (verdict_expire_receipts), settled_rooms keeps a compact record that the room was settled: its
-- id and a 32-bit tag of its node (so that another node's room stays indistinguishable from one
-- never allocated: ROOM_UNKNOWN). A redelivery of such a room is answered 'original_expired'
-- (410 ORIGINAL_EXPIRED), never a second settlement, and its id is never allocated again
-- ('room_id_reused', 409 ROOM_ID_REUSED). A room has a receipt or a record, never both: one
-- statement moves it from the one to the other.
CREATE TABLE settled_rooms (
  room_id  bigint  PRIMARY KEY,
  node_tag integer NOT NULL  -- verdict_node_tag(node_id)
) WITH (fillfactor = 100);  -- written once, in room order, never updated

-- The first 32 bits of the sha256 of the node's id: a room of another node matches it only by a
-- one-in-four-billion chance, and then is answered as expired instead of unknown.
CREATE FUNCTION verdict_node_tag(p_node_id text)
RETURNS integer LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ('x' || left(encode(sha256(convert_to(p_node_id, 'UTF8')), 'hex'), 8))::bit(32)::integer
$$;

-- Expires up to p_limit receipts settled before p_cutoff, in match order (the order they were
-- written, within a statement's time), each replaced by its compact record in the same
-- statement. Returns how many it expired; a batch at a time keeps each transaction short, and the
-- caller repeats while a batch comes back full. The receipts' match_id index gives the order, and
-- the walk stops at the first receipt that is not old enough, so a pass costs what it expires.
CREATE FUNCTION verdict_expire_receipts(p_cutoff timestamptz, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_rooms bigint[] := '{}';
  v_room bigint;
  v_settled_at timestamptz;
  v_count integer;
BEGIN
  FOR v_room, v_settled_at IN
    SELECT room_id, settled_at FROM settlement_receipts ORDER BY match_id
  LOOP
    EXIT WHEN v_settled_at >= p_cutoff OR cardinality(v_rooms) >= p_limit;
    v_rooms := v_rooms || v_room;
  END LOOP;
  WITH gone AS (
    DELETE FROM settlement_receipts r WHERE r.room_id = ANY (v_rooms)
    RETURNING r.room_id, r.node_id)
  INSERT INTO settled_rooms (room_id, node_tag)
  SELECT g.room_id, verdict_node_tag(g.node_id) FROM gone g ORDER BY g.room_id
  ON CONFLICT (room_id) DO NOTHING;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END
$$;

-- 010's guard (rooms whose advisory lock or row another session holds are 'busy' when the call
-- does not wait), with the compact records: a room without a receipt for the node but with its
-- record is 'original_expired'. Receipt and record are read in one statement, so in one
-- snapshot: a receipt being expired meanwhile is seen as the one or as the other, never as
-- neither.
CREATE OR REPLACE FUNCTION verdict_settle_guard(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_fingerprints bytea[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_room bigint;
  v_busy bigint[] := '{}';  -- rooms another transaction holds (without p_wait)
  v_locked bigint[];        -- rooms whose rows this call locked (without p_wait)
  v_verdicts text[];
BEGIN
  FOR v_room IN SELECT r FROM unnest(p_room_ids) r ORDER BY r LOOP
    IF p_wait THEN
      PERFORM pg_advisory_xact_lock(v_room);
    ELSIF NOT pg_try_advisory_xact_lock(v_room) THEN
      v_busy := v_busy || v_room;
    END IF;
  END LOOP;
  IF p_wait THEN
    PERFORM 1 FROM battle_rooms b WHERE b.room_id = ANY (p_room_ids)
    ORDER BY b.room_id FOR UPDATE;
  ELSE
    SELECT coalesce(array_agg(l.room_id), '{}') INTO v_locked FROM (
      SELECT b.room_id FROM battle_rooms b WHERE b.room_id = ANY (p_room_ids)
        AND b.room_id <> ALL (v_busy)
      ORDER BY b.room_id FOR UPDATE SKIP LOCKED) l;
    -- A row that is there but was skipped is another session's.
    SELECT v_busy || coalesce(array_agg(b.room_id), '{}') INTO v_busy FROM battle_rooms b
    WHERE b.room_id = ANY (p_room_ids) AND b.room_id <> ALL (v_busy)
      AND b.room_id <> ALL (v_locked);
  END IF;

  SELECT array_agg(CASE
      WHEN x.room_id = ANY (v_busy) THEN 'busy'
      ELSE coalesce(
        (SELECT CASE WHEN r.outcome <> x.outcome THEN 'outcome_conflict'
                     WHEN r.fingerprint <> x.fingerprint THEN 'idempotency_mismatch'
                     ELSE 'duplicate' END
         FROM settlement_receipts r
         WHERE r.room_id = x.room_id AND r.node_id = x.node_id),
        (SELECT 'original_expired' FROM settled_rooms s
         WHERE s.room_id = x.room_id AND s.node_tag = verdict_node_tag(x.node_id))) END
      ORDER BY x.i)
  INTO v_verdicts
  FROM unnest(p_room_ids, p_node_ids, p_outcomes, p_fingerprints)
         WITH ORDINALITY AS x(room_id, node_id, outcome, fingerprint, i);
  RETURN v_verdicts;
END
$$;

-- The ratings the players had when their room was allocated: a room's Elo is computed from them
-- (023). NULL for rooms allocated before this migration, which are rated on current ratings.
ALTER TABLE battle_room_seats ADD COLUMN elo_at_allocation integer;

-- 002's allocation, answering 'room_id_reused' for a room id that was ever settled (it has a
-- receipt or a compact record; read in one statement), where 002 answered 'room_exists', and
-- recording each player's rating with the seats.
CREATE OR REPLACE FUNCTION verdict_allocate(p_room_id bigint, p_node_id text,
                                            p_player_ids bigint[], p_teams smallint[])
RETURNS TABLE (status text, busy_player bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_busy bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(p_room_id);
  IF EXISTS (SELECT 1 FROM settlement_receipts WHERE room_id = p_room_id)
     OR EXISTS (SELECT 1 FROM settled_rooms WHERE room_id = p_room_id) THEN
    RETURN QUERY SELECT 'room_id_reused', 0::bigint;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id) THEN
    IF EXISTS (SELECT 1 FROM battle_rooms WHERE room_id = p_room_id AND node_id = p_node_id)
       AND (SELECT count(*) FROM battle_room_seats WHERE room_id = p_room_id)
           = cardinality(p_player_ids)
       AND NOT EXISTS (
         SELECT 1 FROM unnest(p_player_ids, p_teams) AS x(pid, team)
         LEFT JOIN battle_room_seats s
           ON s.room_id = p_room_id AND s.player_id = x.pid AND s.team = x.team
         WHERE s.player_id IS NULL) THEN
      RETURN QUERY SELECT 'duplicate', 0::bigint;
    ELSE
      RETURN QUERY SELECT 'room_exists', 0::bigint;
    END IF;
    RETURN;
  END IF;

  INSERT INTO players (player_id)
  SELECT pid FROM unnest(p_player_ids) AS pid ORDER BY pid
  ON CONFLICT (player_id) DO NOTHING;
  -- Lock the roster in player-id order, the order every transaction uses, so two rooms
  -- sharing players cannot deadlock.
  SELECT player_id INTO v_busy FROM (
    SELECT player_id, in_battle_room FROM players
    WHERE player_id = ANY (p_player_ids) ORDER BY player_id FOR UPDATE) locked
  WHERE in_battle_room <> 0 ORDER BY player_id LIMIT 1;
  IF FOUND THEN
    RETURN QUERY SELECT 'player_busy', v_busy;
    RETURN;
  END IF;

  INSERT INTO battle_rooms (room_id, node_id) VALUES (p_room_id, p_node_id);
  INSERT INTO battle_room_seats (room_id, player_id, team, elo_at_allocation)
  SELECT p_room_id, x.pid, x.team, p.elo
  FROM unnest(p_player_ids, p_teams) AS x(pid, team) JOIN players p ON p.player_id = x.pid;
  UPDATE players SET in_battle_room = p_room_id WHERE player_id = ANY (p_player_ids);
  RETURN QUERY SELECT 'allocated', 0::bigint;
END
$$;
