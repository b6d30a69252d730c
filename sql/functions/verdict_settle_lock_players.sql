-- The third part of verdict_settle_batch: p_verdicts, with each 'settle' room whose players are
-- not all locked by this call turned 'busy' (without p_wait; with it, the verdicts as they are,
-- and the write waits for the players). The players are those given for the room, which the check
-- found to be its seats. SKIP LOCKED waits for nothing, so it adds no deadlock; the write's own
-- FOR UPDATE of these players then finds them held by its own transaction.
CREATE OR REPLACE FUNCTION verdict_settle_lock_players(
  p_verdicts text[], p_room_ids bigint[], p_player_rooms bigint[], p_player_ids bigint[],
  p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_settle bigint[];  -- the rooms to settle
  v_locked bigint[];  -- their players this call locked
  v_busy bigint[];
BEGIN
  IF p_wait THEN
    RETURN p_verdicts;
  END IF;
  SELECT array_agg(p_room_ids[i]) INTO v_settle
  FROM generate_subscripts(p_room_ids, 1) i WHERE p_verdicts[i] = 'settle';
  IF v_settle IS NULL THEN
    RETURN p_verdicts;
  END IF;
  SELECT coalesce(array_agg(l.player_id), '{}') INTO v_locked FROM (
    SELECT p.player_id FROM players p WHERE p.player_id IN (
      SELECT x.pid FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
      WHERE x.room = ANY (v_settle))
    ORDER BY p.player_id FOR UPDATE SKIP LOCKED) l;
  -- Each room's players are distinct and its own, so all are locked when the counts agree.
  IF cardinality(v_locked) =
     (SELECT count(*) FROM unnest(p_player_rooms) AS r(room) WHERE r.room = ANY (v_settle)) THEN
    RETURN p_verdicts;
  END IF;
  SELECT array_agg(DISTINCT x.room) INTO v_busy
  FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
  WHERE x.room = ANY (v_settle) AND x.pid NOT IN (SELECT unnest(v_locked));
  RETURN (SELECT array_agg(CASE WHEN x.verdict = 'settle' AND x.room_id = ANY (v_busy)
                                THEN 'busy' ELSE x.verdict END ORDER BY x.i)
          FROM unnest(p_room_ids, p_verdicts) WITH ORDINALITY AS x(room_id, verdict, i));
END
$$;
