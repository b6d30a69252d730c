-- The second part of verdict_settle_prepare's judgement, after verdict_settle_guard: the verdicts of the rooms the guard left open (NULL in
-- p_verdicts): 'room_unknown' (not allocated to that node), 'roster_mismatch' (the players given
-- are not the room's seats, each on its team) or 'settle'. The others pass through.
--
-- Reads seats and rooms by key, whatever the statistics say. battle_rooms and battle_room_seats
-- are queues: a room's rows live from its allocation to its settlement. When autovacuum analyzes
-- them while few rooms wait, PostgreSQL records them as (nearly) empty, and goes on believing it
-- while a backlog of thousands of rooms is allocated and drained, until the next analyze. A check
-- that joined the call's players to the seats as sets chose, on such statistics, a nested loop
-- over a full scan of the seats' index, some 65,000 entries of rooms settled earlier: 100 ms for
-- a call of 64 rooms, where reading the same rows by key takes about 1.3 ms (bench/RESULTS.md,
-- "The roster check's plan").
--
-- Here each read of the two tables is a scalar subquery that names its key from the call's own
-- values: a room by id, and a room's seats, in player order, by room. PostgreSQL runs a scalar
-- subquery once per outer row (it never turns one into a join, or into a hashed scan of the
-- whole table as it may an EXISTS), and the cheap way to run it is an index probe, so the
-- statement stays linear in the call whatever the tables' statistics. A room's roster is then
-- compared with its seats as one sorted array of players and one of their teams: one probe per
-- room rather than one per player.
CREATE OR REPLACE FUNCTION verdict_settle_check(
  p_verdicts text[], p_room_ids bigint[], p_node_ids text[], p_player_rooms bigint[],
  p_player_ids text[], p_teams smallint[])
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  v_verdicts text[];
BEGIN
  WITH given AS (
    -- Each room's roster as given: its players in id order (byte order, as the seats' column
    -- sorts), and their teams in the same order.
    SELECT p.room, array_agg(p.pid COLLATE "C" ORDER BY p.pid COLLATE "C", p.team) AS pids,
           array_agg(p.team ORDER BY p.pid COLLATE "C", p.team) AS teams
    FROM unnest(p_player_rooms, p_player_ids, p_teams) AS p(room, pid, team)
    GROUP BY p.room)
  SELECT array_agg(CASE
      WHEN x.verdict IS NOT NULL THEN x.verdict
      WHEN NOT coalesce((SELECT b.node_id = x.node_id FROM battle_rooms b
                         WHERE b.room_id = x.room_id), false) THEN 'room_unknown'
      -- The roster matches when it is the room's seats exactly: the same players (so each
      -- given once, and as many as the seats), each on the team given.
      WHEN (coalesce(g.pids, '{}'), coalesce(g.teams, '{}')) = (
             SELECT coalesce(array_agg(s.player_id ORDER BY s.player_id), '{}'),
                    coalesce(array_agg(s.team ORDER BY s.player_id), '{}')
             FROM battle_room_seats s WHERE s.room_id = x.room_id) THEN 'settle'
      ELSE 'roster_mismatch' END ORDER BY x.i)
  INTO v_verdicts
  FROM unnest(p_room_ids, p_node_ids, p_verdicts) WITH ORDINALITY AS x(room_id, node_id, verdict, i)
  LEFT JOIN given g ON g.room = x.room_id;
  RETURN v_verdicts;
END
$$;
