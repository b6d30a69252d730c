-- Settles many rooms in one statement, and so in one commit: docs/design.md §5 for N rooms at
-- once, each statement set-based over all of them. The lobby calls it for the batch endpoint, for
-- concurrent single requests it coalesces, and for a single request alone (a batch of one): there
-- is one settlement path. Its parameter list is declared once more, in C++, for the callers
-- (lobby/settle_batch_call.h); a test checks the two agree.
--
-- Inputs are parallel arrays, one element per room (distinct room ids: the lobby refuses a
-- repeated room before calling):
--   p_room_ids, p_node_ids, p_outcomes ('SETTLED' | 'ABORTED'), p_winner_teams (0 for a draw),
--   p_suspects, p_ended_at_ms, p_replay_paths ('' for none), p_abort_reasons, p_fingerprints
--   (sha256 of the result, 32 bytes);
-- and the players of every room flattened into parallel arrays, p_player_rooms naming each one's
-- room:
--   p_player_rooms, p_player_ids, p_teams, p_kills, p_deaths, p_assists, p_scores,
--   p_disconnected;
-- then p_k_factor (the Elo K), p_attempt_id (the caller's random id for this call, written into
-- every receipt it writes) and p_wait.
--
-- Returns one row per room, in input order: room_id, status ('settled' | 'duplicate' |
-- 'room_unknown' | 'outcome_conflict' | 'idempotency_mismatch' | 'roster_mismatch' | 'busy' |
-- 'original_expired'), and the receipt's match_id, outcome, settled_at_ms (for settled,
-- duplicate and the conflicts). A room is visible only to its own node.
--
-- p_wait: wait for each room's locks (under the caller's lock_timeout), as a batch of one does.
-- Without it a room whose advisory lock, row, or any of whose players' rows another session holds
-- is left alone and answered 'busy', so that one stuck room cannot hold up, or time out, the rooms
-- batched with it; the lobby then settles that room on its own.
--
-- Locks, in one global order so that overlapping batches from several lobby instances cannot
-- deadlock: the rooms' advisory locks in room-id order, then the rooms' rows, then the players'
-- rows in player-id order (the order verdict_allocate uses too). The rooms settled together
-- never share a player: a roster must equal its room's seats, and a player is seated in one
-- unsettled room at a time (verdict_allocate refuses a busy player), so ratings computed from
-- the values read under the locks are each player's own.
--
-- The composition of four parts: verdict_settle_guard (locks and receipts),
-- verdict_settle_check (room and roster), verdict_settle_lock_players and verdict_settle_write.
-- check and write rely on the guard having run in the same transaction.
CREATE OR REPLACE FUNCTION verdict_settle_batch(
  p_room_ids bigint[], p_node_ids text[], p_outcomes text[], p_winner_teams smallint[],
  p_suspects boolean[], p_ended_at_ms bigint[], p_replay_paths text[], p_abort_reasons text[],
  p_fingerprints bytea[],
  p_player_rooms bigint[], p_player_ids bigint[], p_teams smallint[], p_kills integer[],
  p_deaths integer[], p_assists integer[], p_scores bigint[], p_disconnected boolean[],
  p_k_factor integer, p_attempt_id bigint, p_wait boolean)
RETURNS TABLE (room_id bigint, status text, match_id bigint, outcome text, settled_at_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_verdicts text[];
BEGIN
  v_verdicts := verdict_settle_guard(p_room_ids, p_node_ids, p_outcomes, p_fingerprints, p_wait);
  v_verdicts := verdict_settle_check(v_verdicts, p_room_ids, p_node_ids, p_player_rooms,
                                     p_player_ids, p_teams);
  v_verdicts := verdict_settle_lock_players(v_verdicts, p_room_ids, p_player_rooms,
                                            p_player_ids, p_wait);
  RETURN QUERY SELECT * FROM verdict_settle_write(
    p_room_ids, p_node_ids, p_outcomes, p_winner_teams, p_suspects, p_ended_at_ms,
    p_replay_paths, p_abort_reasons, p_fingerprints, p_player_rooms, p_player_ids, p_teams,
    p_kills, p_deaths, p_assists, p_scores, p_disconnected, p_k_factor, p_attempt_id, v_verdicts);
END
$$;
