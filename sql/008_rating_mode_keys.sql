-- 008: a player's ratings are keyed by an integer for the mode, not by the mode's name.
--
-- Both indexes of player_ratings began with the mode's text: the primary key (mode, player_id)
-- and the ladder (mode, displayed DESC, player_id DESC). Every step of every descent compared the
-- mode's text first, and read each later column through the text's variable length. A settlement
-- makes four such descents per player (the prepare's read, the upsert's check, its two index
-- inserts), and they were the largest part of what PostgreSQL spent per room beyond 4bed501's
-- settlement (bench/RESULTS.md, "A mode's ratings keyed by an integer"). Measured alone, 200,000
-- upserts with the ladder's index took 11 % less keyed by (integer, text).
--
-- modes.mode_id is handed out once per mode and never changes (a mode is never deleted or
-- renamed); player_ratings keeps it in place of the name. Queries by a mode's name join modes.
ALTER TABLE modes ADD COLUMN mode_id integer GENERATED ALWAYS AS IDENTITY UNIQUE;
ALTER TABLE player_ratings ADD COLUMN mode_id integer;
UPDATE player_ratings r SET mode_id = m.mode_id FROM modes m WHERE m.mode = r.mode;
ALTER TABLE player_ratings ALTER COLUMN mode_id SET NOT NULL,
  DROP CONSTRAINT player_ratings_pkey;
DROP INDEX player_ratings_ladder;
ALTER TABLE player_ratings DROP COLUMN mode, ADD PRIMARY KEY (mode_id, player_id);
-- The ladder: a mode's players best first, a page at a time by the cursor (displayed, player_id),
-- both descending so that one row comparison walks the index.
CREATE INDEX player_ratings_ladder ON player_ratings (mode_id, displayed DESC, player_id DESC);
