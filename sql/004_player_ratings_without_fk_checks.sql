-- 004: player_ratings without its two foreign keys, as match_players lost its own before it.
--
-- A player_ratings row is written only by a settlement (verdict_settle_write), under the row
-- locks the same transaction took on the players (verdict_settle_lock_players), in the mode of a
-- room whose allocation checked the mode under the mode row's lock (verdict_allocate); or by an
-- import (verdict_import_rating), which checks the mode and creates and locks the player first.
-- Neither players nor modes are ever deleted. The two keys could therefore never fail, yet each
-- ran a referential-integrity query per row at the end of the write: two for every player of
-- every settled room, 41 ms of a batch of 192 rooms (bench/RESULTS.md, "The drain since
-- 4bed501"). The primary key (mode, player_id) and the ladder's index stay.
ALTER TABLE player_ratings
  DROP CONSTRAINT IF EXISTS player_ratings_mode_fkey,
  DROP CONSTRAINT IF EXISTS player_ratings_player_id_fkey;
