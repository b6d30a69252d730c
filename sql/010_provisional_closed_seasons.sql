-- 010: provisional players, closed modes, seasons seeded from the one before, and ratings that age
-- (docs/modes.md, "Provisional players", "Closing a mode", "Seasons" and "Inactivity").
--
-- Provisional players. A mode may say how many games a player plays before it ranks
-- (modes.provisional_games, 0: none). A player's row says whether it is still provisional
-- (player_ratings.provisional), and how many games it still needs (provisional_left): the
-- settlement counts that down from the row alone, never reading the mode again, and an import
-- starts a new row at the mode's count. The ladder's index leads with the flag after the mode, so
-- a page of ranked players is one range of it, however many provisional players rate above them,
-- and a page with the provisional players merges the two ranges (lobby/pg_ladder.cc). One index
-- as before, one byte wider: a settlement writes no more index entries than it did.
--
-- Closed modes. A closed mode refuses new rooms (verdict_allocate answers 'mode_closed'); its
-- rooms already allocated still settle, and its ladder stays readable. Closing is not part of the
-- declaration: a mode in use may be closed and reopened.
--
-- Seasons. A mode may be seeded from an earlier one of the same system (seed_mode_id): a player
-- new to it starts from its last rating there, drawn toward seed_mean by seed_keep, its deviation
-- raised to at least seed_deviation. The seed is written when the player's first room of the mode
-- is allocated, under the player's lock (sql/functions/verdict_seed_ratings.sql). All four are
-- NULL for a mode without a seed.
--
-- Inactivity. A mode that declares tau_idle (OpenSkill) or period_days (Glicko-2) ages an idle
-- player's deviation (RatingSystem::Idle). A settlement ages the rating from its last match
-- before it rates; the maintenance's inactivity pass ages the ratings of idle players so that the
-- ladder shows it, and records how far it did (aged_through; NULL: the rating is as its last match
-- left it), so that neither ages the same days twice. A match sets it back to NULL.
--
-- Every new column has a default a mode or rating stored before it has: a mode declared again
-- unchanged compares unchanged, and every existing rating is ranked.
ALTER TABLE modes
  ADD COLUMN provisional_games integer NOT NULL DEFAULT 0
    CHECK (provisional_games BETWEEN 0 AND 1000000),
  ADD COLUMN closed boolean NOT NULL DEFAULT false,
  ADD COLUMN seed_mode_id integer REFERENCES modes (mode_id),
  ADD COLUMN seed_keep double precision CHECK (seed_keep BETWEEN 0 AND 1),
  ADD COLUMN seed_deviation double precision,
  ADD COLUMN seed_mean double precision,
  ADD CHECK ((seed_mode_id IS NULL) = (seed_keep IS NULL)
             AND (seed_mode_id IS NULL) = (seed_deviation IS NULL)
             AND (seed_mode_id IS NULL) = (seed_mean IS NULL));
ALTER TABLE player_ratings
  ADD COLUMN provisional_left integer NOT NULL DEFAULT 0 CHECK (provisional_left >= 0),
  ADD COLUMN provisional boolean NOT NULL DEFAULT false,
  ADD COLUMN aged_through timestamptz,
  ADD CHECK (provisional = (provisional_left > 0));
DROP INDEX player_ratings_ladder;
-- The ladder: a mode's ranked players, then its provisional ones, each best first, a page at a
-- time by the cursor (displayed, player_id), both descending so that one row comparison walks
-- the index.
CREATE INDEX player_ratings_ladder
  ON player_ratings (mode_id, provisional, displayed DESC, player_id DESC);
