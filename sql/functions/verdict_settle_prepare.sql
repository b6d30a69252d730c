-- The first statement of a settlement (docs/design.md §5): locks the rooms and their players,
-- judges every room, and reads the ratings the rooms are rated from. The lobby computes the new
-- ratings from them (lobby/rating/) and writes them with verdict_settle_write, in the same
-- transaction, under these locks. Its parameter list is declared once more, in C++, for the
-- callers (lobby/settle_calls.h); a test checks the two agree.
--
-- Inputs are parallel arrays, one element per room (distinct room ids: the lobby refuses a
-- repeated room before calling): p_room_ids, p_node_ids, p_outcomes ('SETTLED' | 'ABORTED'),
-- p_fingerprints (sha256 of the result, 32 bytes); and the players of every room flattened, each
-- with its room: p_player_rooms, p_player_ids (text), p_teams; then p_wait.
--
-- Returns, first, one row per room in input order (player_id NULL): its status ('settle' |
-- 'duplicate' | 'room_unknown' | 'outcome_conflict' | 'idempotency_mismatch' | 'roster_mismatch'
-- | 'busy' | 'original_expired') and, for a status read from a receipt (duplicate and the two
-- conflicts), that receipt's match_id, outcome and settled_at_ms; for a 'settle' room, its mode,
-- the mode's declaration (system, model, parameters as JSON text, rated), and the match id and
-- settlement time verdict_settle_write is to record: the match ids are taken from the matches'
-- identity here, in room-id order, and the time is the call's, so that the lobby can build each
-- room's battle.settled event whole, in one place (lobby/settled_event.h). An id taken by a call
-- that then rolls back is skipped, as an identity's are. Then one row per
-- player of every 'settle' room, in room and player order: the player's rating in the room's mode
-- now (rating, deviation, volatility; NULL if the player has none yet) and the one the room is
-- rated from (rated_*: the rating recorded when the room was allocated, the compensation rule of
-- docs/design.md §8; NULL if the player had none then), and idle_since_ms, the time from which the
-- rating has not aged (its last match, or how far the inactivity pass aged it: migration 010; NULL
-- for none), from which the lobby ages it before it rates (RatingSystem::Idle). A room is visible
-- only to its own node.
--
-- p_wait: wait for each room's locks (under the caller's lock_timeout), as a batch of one does.
-- Without it a room whose advisory lock, row, or any of whose players' rows or their ratings in
-- the room's mode another session holds is left alone and answered 'busy', so that one stuck
-- room cannot hold up, or time out, the rooms batched with it; the lobby then settles that room
-- on its own.
--
-- Locks, in one global order so that overlapping batches from several lobby instances cannot
-- deadlock: the rooms' advisory locks in room-id order, then the rooms' rows, then the players'
-- rows in player-id order (the order verdict_allocate uses too), then their ratings' rows by mode
-- and player id. One player may be in two rooms of a call (a released room and the player's next
-- one): both are rated, in room order, each from the rating the one before left (the lobby does
-- that with the rows returned here).
--
-- The composition of four parts: verdict_settle_guard (locks and receipts),
-- verdict_settle_check (room and roster), verdict_settle_lock_players and
-- verdict_settle_lock_ratings.
CREATE OR REPLACE FUNCTION verdict_settle_prepare(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_fingerprints bytea[],
  p_player_rooms bigint[], p_player_ids text[], p_teams smallint[], p_wait boolean)
RETURNS TABLE (room_id bigint, status text, match_id bigint, outcome text, settled_at_ms bigint,
               mode text, system text, model text, parameters text, rated boolean,
               player_id text, rating double precision, deviation double precision,
               volatility double precision, rated_rating double precision,
               rated_deviation double precision, rated_volatility double precision,
               idle_since_ms bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_verdicts text[];
  v_match_ids bigint[];
  v_outcomes text[];
  v_settled_ms bigint[];
  v_modes text[];  -- each room's mode, as allocated
  v_mode_ids integer[];  -- and its key (modes.mode_id), which player_ratings is keyed by
  v_seats battle_room_seats[];  -- the seats of the rooms to settle
  v_ratings player_ratings[];  -- their players' ratings now, read under their locks
  v_new_rooms bigint[];  -- the index in p_room_ids of each room to settle, in room-id order
  v_new_match_ids bigint[];  -- and its new match's id
  v_now_ms bigint;
BEGIN
  SELECT array_agg(g.verdict ORDER BY g.ord), array_agg(g.match_id ORDER BY g.ord),
         array_agg(g.outcome ORDER BY g.ord), array_agg(g.settled_at_ms ORDER BY g.ord)
  INTO v_verdicts, v_match_ids, v_outcomes, v_settled_ms
  FROM verdict_settle_guard(p_room_ids, p_node_ids, p_outcomes, p_fingerprints, p_wait) g;
  -- Each room's mode, read by key right after the guard, which holds the rooms' rows: the mode
  -- the room was allocated in, whatever the rest of the call reads.
  SELECT array_agg(y.mode ORDER BY y.i),
         array_agg((SELECT m.mode_id FROM modes m WHERE m.mode = y.mode) ORDER BY y.i)
  INTO v_modes, v_mode_ids
  FROM (SELECT x.i, (SELECT b.mode FROM battle_rooms b WHERE b.room_id = x.room) AS mode
        FROM unnest(p_room_ids) WITH ORDINALITY AS x(room, i)
        OFFSET 0) y;
  v_verdicts := verdict_settle_check(v_verdicts, p_room_ids, p_node_ids, p_player_rooms,
                                     p_player_ids, p_teams);
  v_verdicts := verdict_settle_lock_players(v_verdicts, p_room_ids, p_player_rooms,
                                            p_player_ids, p_wait);
  -- The seats of the rooms to settle, which the check found to be the players given: read once,
  -- a room's in one range of the seats' key. The subquery behind OFFSET 0 is, like a scalar
  -- subquery, planned alone and run once per room, so it stays a probe by key whatever the
  -- statistics say (verdict_settle_check).
  SELECT array_agg(s.seat) INTO v_seats
  FROM unnest(p_room_ids, v_verdicts) AS x(room, verdict)
  CROSS JOIN LATERAL (SELECT t AS seat FROM battle_room_seats t WHERE t.room_id = x.room
                      OFFSET 0) s
  WHERE x.verdict = 'settle';
  SELECT l.verdicts, l.ratings INTO v_verdicts, v_ratings
  FROM verdict_settle_lock_ratings(v_verdicts, p_room_ids, v_mode_ids, v_seats, p_wait) l;

  -- The new matches' ids, taken in room-id order (the order verdict_settle_write inserts them):
  -- the subquery is sorted before its rows reach nextval, and OFFSET 0 keeps it apart.
  IF 'settle' = ANY (v_verdicts) THEN
    v_now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    SELECT array_agg(n.i), array_agg(n.match_id) INTO v_new_rooms, v_new_match_ids
    FROM (SELECT o.i, nextval(pg_get_serial_sequence('matches', 'match_id')::regclass) AS match_id
          FROM (SELECT x.i
                FROM unnest(p_room_ids, v_verdicts) WITH ORDINALITY AS x(room, verdict, i)
                WHERE x.verdict = 'settle'
                ORDER BY x.room
                OFFSET 0) o) n;
  END IF;

  -- The rooms, each with its mode's declaration, new match and time when it is to be settled (a
  -- mode in use is fixed: verdict_allocate).
  RETURN QUERY
  SELECT x.room_id, x.verdict, coalesce(x.match_id, nm.match_id), x.outcome,
         CASE WHEN x.verdict = 'settle' THEN v_now_ms ELSE x.settled_ms END, m.mode, m.system,
         m.model, m.parameters::text, m.rated, NULL::text, NULL::float8, NULL::float8,
         NULL::float8, NULL::float8, NULL::float8, NULL::float8, NULL::bigint
  FROM unnest(p_room_ids, v_verdicts, v_match_ids, v_outcomes, v_settled_ms, v_modes)
         WITH ORDINALITY AS x(room_id, verdict, match_id, outcome, settled_ms, mode, i)
  LEFT JOIN modes m ON x.verdict = 'settle' AND m.mode = x.mode
  LEFT JOIN unnest(v_new_rooms, v_new_match_ids) AS nm(i, match_id) ON nm.i = x.i
  ORDER BY x.i;
  IF 'settle' <> ALL (v_verdicts) THEN
    RETURN;
  END IF;
  -- The players from the seats read above, each with the rating row its lock read, so each is
  -- the rating every earlier settlement left: nothing is read from the tables again.
  RETURN QUERY
  SELECT s.room_id, 'settle', NULL::bigint, NULL::text, NULL::bigint, NULL::text, NULL::text,
         NULL::text, NULL::text, NULL::boolean, s.player_id, n.rating, n.deviation, n.volatility,
         s.rating_at_allocation, s.deviation_at_allocation, s.volatility_at_allocation,
         (extract(epoch FROM coalesce(n.aged_through, n.last_match_at)) * 1000)::bigint
  FROM unnest(v_seats) AS s
  JOIN unnest(p_room_ids, v_mode_ids, v_verdicts) AS rm(room, mode_id, verdict)
    ON rm.room = s.room_id
  LEFT JOIN unnest(v_ratings) AS n ON n.mode_id = rm.mode_id AND n.player_id = s.player_id
  WHERE rm.verdict = 'settle'
  ORDER BY s.room_id, s.player_id COLLATE "C";
END
$$;
