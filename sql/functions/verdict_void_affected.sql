-- The later matches a `replay` void of p_match_id rates again (docs/design.md §5, "Voiding a
-- match"), in match order: every match of the mode p_mode after p_match_id that shares a player
-- with the voided match or with a match of the set before it. At most p_cap + 1 of them: a set of
-- p_cap + 1 says the whole set is larger than p_cap.
--
-- A player joins the set at the first match of it that seats the player, and from then on every
-- later match of the player in the mode is in the set. So the set is walked in match order from a
-- list of candidates: each player's matches after the one it joined at, read once by
-- match_players (player_id, match_id) when it joins, and only as many as the set can still take.
-- Each match taken from the front of the list brings its players that are new; no match is read
-- twice, and nothing beyond the cap is read. Without locks it reads the history as of each
-- statement; under the players' locks (the void's second walk) the set cannot grow.
CREATE OR REPLACE FUNCTION verdict_void_affected(p_match_id bigint, p_mode text, p_cap integer)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
  v_seen jsonb := '{}';            -- the set's players, as keys: a lookup is a binary search
  v_new text[];                    -- the players the match just taken brings
  v_candidates bigint[] := '{}';   -- later matches of the set's players, not taken yet, in order
  v_set bigint[] := '{}';
  v_match bigint := p_match_id;
BEGIN
  IF p_cap IS NULL OR p_cap < 0 THEN
    RAISE EXCEPTION 'verdict_void_affected: a cap of % matches', p_cap;
  END IF;
  SELECT array_agg(mp.player_id) INTO v_new FROM match_players mp WHERE mp.match_id = p_match_id;
  LOOP
    IF v_new IS NOT NULL THEN
      v_seen := v_seen || (SELECT jsonb_object_agg(n, true) FROM unnest(v_new) n);
      v_candidates := ARRAY(
        SELECT DISTINCT c.match_id FROM (
          SELECT unnest(v_candidates) AS match_id
          UNION ALL
          SELECT l.match_id FROM unnest(v_new) AS n(pid)
          CROSS JOIN LATERAL (
            SELECT mp.match_id FROM match_players mp JOIN matches x ON x.match_id = mp.match_id
            WHERE mp.player_id = n.pid AND mp.match_id > v_match AND x.mode = p_mode
            ORDER BY mp.match_id LIMIT p_cap + 1 - cardinality(v_set)) l) c
        ORDER BY c.match_id LIMIT p_cap + 1 - cardinality(v_set));
    END IF;
    EXIT WHEN cardinality(v_candidates) = 0 OR cardinality(v_set) > p_cap;
    v_match := v_candidates[1];
    v_candidates := v_candidates[2:];
    v_set := v_set || v_match;
    SELECT array_agg(mp.player_id) INTO v_new FROM match_players mp
    WHERE mp.match_id = v_match AND NOT v_seen ? mp.player_id;
  END LOOP;
  RETURN v_set;
END
$$;
