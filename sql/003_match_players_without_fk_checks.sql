-- match_players rows are written only by verdict_settle, in the transaction that inserts their
-- match (match_id comes from its RETURNING) and after locking every one of their players FOR
-- UPDATE (player_id comes from a join with players). Their two foreign keys could therefore
-- never fail, yet each ran a referential-integrity query per row: 20 per ten-player settlement,
-- about a sixth of PostgreSQL's CPU in the drain profile (bench/RESULTS.md). Dropping them
-- raised the settlement rate by 7-16 %. The per-match foreign keys (replays, events, receipts)
-- stay: one check each.
ALTER TABLE match_players
  DROP CONSTRAINT IF EXISTS match_players_match_id_fkey,
  DROP CONSTRAINT IF EXISTS match_players_player_id_fkey;
