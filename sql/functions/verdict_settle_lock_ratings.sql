-- The fourth part of verdict_settle_prepare: locks the ratings (player_ratings rows) that the
-- 'settle' rooms will rate from and write, each room's players in its mode, and returns
-- p_verdicts. The players' own rows are locked already (verdict_settle_lock_players), and every
-- settlement and import takes those first, so the rating rows come last in the global lock order:
-- by mode key, then player id. A rating row is held elsewhere only by a session that does not go
-- through the lobby (an operator fixing a rating by hand); without this step the write's upsert
-- waited for it and the lock timeout failed the whole call.
--
-- With p_wait it waits for them (under the caller's lock_timeout). Without, it takes what it can
-- at once (SKIP LOCKED) and turns each 'settle' room with a rating row this call could not lock
-- 'busy': the rest of the call goes on, and the lobby settles that room on its own. A player with
-- no rating yet in a mode has no row to lock; the players' locks keep its insert to this call.
--
-- p_mode_ids is each room's mode key (modes.mode_id), parallel to p_room_ids.
CREATE OR REPLACE FUNCTION verdict_settle_lock_ratings(
  p_verdicts text[], p_room_ids bigint[], p_mode_ids integer[], p_player_rooms bigint[],
  p_player_ids text[], p_wait boolean)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_mode integer;
  v_players text[];  -- the players of the mode's rooms to settle
  v_locked text[];   -- those of them whose row this call locked
  v_held_modes integer[] := '{}';  -- (mode, player) rows that exist and another session holds
  v_held_players text[] := '{}';
  v_busy bigint[];    -- the rooms of those
BEGIN
  -- One mode at a time, usually one in all: each lock is then an index probe by its full key,
  -- as verdict_settle_lock_players takes the players'.
  FOR v_mode IN
    SELECT DISTINCT r.mode_id
    FROM unnest(p_room_ids, p_mode_ids, p_verdicts) AS r(room, mode_id, verdict)
    WHERE r.verdict = 'settle'
    ORDER BY r.mode_id
  LOOP
    SELECT array_agg(DISTINCT x.pid) INTO v_players
    FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
    JOIN unnest(p_room_ids, p_mode_ids, p_verdicts) AS r(room, mode_id, verdict)
      ON r.room = x.room
    WHERE r.verdict = 'settle' AND r.mode_id = v_mode;
    IF p_wait THEN
      PERFORM 1 FROM player_ratings r WHERE r.mode_id = v_mode AND r.player_id = ANY (v_players)
      ORDER BY r.player_id FOR UPDATE;
      CONTINUE;
    END IF;
    SELECT coalesce(array_agg(l.player_id), '{}') INTO v_locked FROM (
      SELECT r.player_id FROM player_ratings r
      WHERE r.mode_id = v_mode AND r.player_id = ANY (v_players)
      ORDER BY r.player_id FOR UPDATE SKIP LOCKED) l;
    CONTINUE WHEN cardinality(v_locked) = cardinality(v_players);  -- the common case
    -- Those not locked are new to the mode (no row) or held. Only they are probed, each by its
    -- key (a scalar subquery, never a scan of the ratings whatever their statistics), after a
    -- hashed anti-join against those locked.
    SELECT v_held_modes || coalesce(array_agg(v_mode), '{}'),
           v_held_players || coalesce(array_agg(x.pid), '{}')
    INTO v_held_modes, v_held_players
    FROM (SELECT u.pid FROM unnest(v_players) AS u(pid)
          WHERE NOT EXISTS (SELECT 1 FROM unnest(v_locked) AS l(pid) WHERE l.pid = u.pid)
          OFFSET 0) x
    WHERE (SELECT true FROM player_ratings r WHERE r.mode_id = v_mode AND r.player_id = x.pid);
  END LOOP;
  IF p_wait OR cardinality(v_held_players) = 0 THEN
    RETURN p_verdicts;
  END IF;
  SELECT array_agg(DISTINCT x.room) INTO v_busy
  FROM unnest(p_player_rooms, p_player_ids) AS x(room, pid)
  JOIN unnest(p_room_ids, p_mode_ids, p_verdicts) AS r(room, mode_id, verdict) ON r.room = x.room
  JOIN unnest(v_held_modes, v_held_players) AS h(mode_id, pid)
    ON h.mode_id = r.mode_id AND h.pid = x.pid
  WHERE r.verdict = 'settle';
  RETURN (SELECT array_agg(CASE WHEN x.verdict = 'settle' AND x.room_id = ANY (v_busy)
                                THEN 'busy' ELSE x.verdict END ORDER BY x.i)
          FROM unnest(p_room_ids, p_verdicts) WITH ORDINALITY AS x(room_id, verdict, i));
END
$$;
