-- The fourth part of verdict_settle_prepare: locks the ratings (player_ratings rows) that the
-- 'settle' rooms will rate from and write, each room's players in its mode, reads them in the
-- same probe, and returns the verdicts and the rows locked. The players' own rows are locked
-- already (verdict_settle_lock_players), and every settlement and import takes those first, so
-- the rating rows come last in the global lock order: by mode key, then player id. A rating row
-- is held elsewhere only by a session that does not go through the lobby (an operator fixing a
-- rating by hand); without this step the write's upsert waited for it and the lock timeout
-- failed the whole call.
--
-- p_seats are the seats of the rooms to settle (battle_room_seats, as verdict_settle_prepare
-- read them under the rooms' locks: the rooms' players, each with the rating the allocation
-- recorded); p_mode_ids is each room's mode key (modes.mode_id), parallel to p_room_ids. Returns
-- p_verdicts, with each 'settle' room a rating row of which another session holds turned 'busy',
-- and the rating rows locked: each one's values are the player's rating now, read under its
-- lock, so the caller reads no rating again. A player with no rating in the mode has no row
-- (and none in ratings); the players' locks keep its insert to this call.
--
-- With p_wait it waits for them (under the caller's lock_timeout): one probe by key a player.
-- Without, it takes what it can at once (SKIP LOCKED), and a row it could not take is held
-- elsewhere only if the row exists, which SKIP LOCKED does not tell. The seats tell it for most:
-- a player rated in the mode when the room was allocated has a row (none is ever deleted), so
-- the lock's one probe decides; one who was not (a new player, the drain's every player) is
-- looked for once without a lock, and only a row found is locked, a second probe for a player
-- rated between the allocation and now. (Trying all of them in one pass with NOWAIT instead
-- needs a subtransaction, whose lock the write's update then turns into a MultiXact for every
-- row.)
CREATE OR REPLACE FUNCTION verdict_settle_lock_ratings(
  p_verdicts text[], p_room_ids bigint[], p_mode_ids integer[], p_seats battle_room_seats[],
  p_wait boolean, OUT verdicts text[], OUT ratings player_ratings[])
LANGUAGE plpgsql AS $$
DECLARE
  v_mode integer;
  v_rated text[];    -- the players of the mode's rooms to settle who have a row to lock
  v_unrated text[];  -- those who had none at their room's allocation
  v_locked player_ratings[];  -- the rows this call locked
  v_held_modes integer[] := '{}';  -- (mode, player) rows that exist and another session holds
  v_held_players text[] := '{}';
  v_busy bigint[];    -- the rooms of those
BEGIN
  verdicts := p_verdicts;
  ratings := '{}';
  -- One mode at a time, usually one in all: each lock is then an index probe by its full key,
  -- as verdict_settle_lock_players takes the players'. A player in two rooms of the call is
  -- named twice; the index scan takes each key once.
  FOR v_mode IN
    SELECT DISTINCT r.mode_id
    FROM unnest(p_room_ids, p_mode_ids, p_verdicts) AS r(room, mode_id, verdict)
    WHERE r.verdict = 'settle'
    ORDER BY r.mode_id
  LOOP
    SELECT array_agg(s.player_id) FILTER (WHERE s.rating_at_allocation IS NOT NULL),
           array_agg(s.player_id) FILTER (WHERE s.rating_at_allocation IS NULL)
    INTO v_rated, v_unrated
    FROM unnest(p_seats) AS s
    JOIN unnest(p_room_ids, p_mode_ids, p_verdicts) AS r(room, mode_id, verdict)
      ON r.room = s.room_id
    WHERE r.verdict = 'settle' AND r.mode_id = v_mode;
    IF p_wait THEN
      SELECT array_agg(l.r) INTO v_locked FROM (
        SELECT r FROM player_ratings r
        WHERE r.mode_id = v_mode AND r.player_id = ANY (v_rated || v_unrated)
        ORDER BY r.player_id FOR UPDATE) l;
      ratings := ratings || coalesce(v_locked, '{}');
      CONTINUE;
    END IF;
    IF v_unrated IS NOT NULL THEN
      v_rated := v_rated || ARRAY(SELECT r.player_id FROM player_ratings r
                                  WHERE r.mode_id = v_mode AND r.player_id = ANY (v_unrated));
    END IF;
    CONTINUE WHEN coalesce(cardinality(v_rated), 0) = 0;  -- every player new to the mode
    SELECT coalesce(array_agg(l.r), '{}') INTO v_locked FROM (
      SELECT r FROM player_ratings r
      WHERE r.mode_id = v_mode AND r.player_id = ANY (v_rated)
      ORDER BY r.player_id FOR UPDATE SKIP LOCKED) l;
    ratings := ratings || v_locked;
    CONTINUE WHEN cardinality(v_locked) = cardinality(v_rated);  -- the common case
    -- A row not locked is held (or, were one ever deleted, gone: its room is then settled on
    -- its own, which waits for nothing). Found by a hashed anti-join against those locked; a
    -- player named twice is not held for that.
    SELECT v_held_modes || coalesce(array_agg(v_mode), '{}'),
           v_held_players || coalesce(array_agg(u.pid), '{}')
    INTO v_held_modes, v_held_players
    FROM unnest(v_rated) AS u(pid)
    WHERE NOT EXISTS (SELECT 1 FROM unnest(v_locked) AS l WHERE l.player_id = u.pid);
  END LOOP;
  IF p_wait OR cardinality(v_held_players) = 0 THEN
    RETURN;
  END IF;
  SELECT array_agg(DISTINCT s.room_id) INTO v_busy
  FROM unnest(p_seats) AS s
  JOIN unnest(p_room_ids, p_mode_ids, p_verdicts) AS r(room, mode_id, verdict) ON r.room = s.room_id
  JOIN unnest(v_held_modes, v_held_players) AS h(mode_id, pid)
    ON h.mode_id = r.mode_id AND h.pid = s.player_id
  WHERE r.verdict = 'settle';
  verdicts := (SELECT array_agg(CASE WHEN x.verdict = 'settle' AND x.room_id = ANY (v_busy)
                                     THEN 'busy' ELSE x.verdict END ORDER BY x.i)
               FROM unnest(p_room_ids, p_verdicts) WITH ORDINALITY AS x(room_id, verdict, i));
END
$$;
