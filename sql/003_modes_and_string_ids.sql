-- 003: every game mode (docs/design.md §8). Player ids become strings, rooms of any number of
-- teams are placed, and each player has a rating per mode.
--
-- Player ids. A player id is 1 to 64 bytes of UTF-8, stored as text with the "C" collation: it is
-- compared, sorted and indexed byte by byte (the order the lobby locks players in, and C++'s
-- std::string order), whatever the database's locale. An integer id of an earlier build becomes
-- its decimal string, the rule the API applies to integers too: player 42 is player '42'.
--
-- Modes. A room's allocation names its mode; a mode names its rating system and parameters, its
-- room shapes, and whether it is rated. Each player has one rating per mode played
-- (player_ratings), which the settlement computes and writes in its own transaction. The ratings
-- and counts of the one global Elo move to the mode 'default', an Elo with K = 32.

-- Player ids as text, everywhere they are stored.
ALTER TABLE battle_room_seats DROP CONSTRAINT battle_room_seats_player_id_fkey;
ALTER TABLE players DROP CONSTRAINT players_player_id_check;
ALTER TABLE players ALTER COLUMN player_id TYPE text COLLATE "C" USING player_id::text;
ALTER TABLE players ADD CONSTRAINT players_player_id_check
  CHECK (octet_length(player_id) BETWEEN 1 AND 64);
ALTER TABLE battle_room_seats ALTER COLUMN player_id TYPE text COLLATE "C" USING player_id::text;
ALTER TABLE battle_room_seats ADD FOREIGN KEY (player_id) REFERENCES players;
ALTER TABLE match_players ALTER COLUMN player_id TYPE text COLLATE "C" USING player_id::text;

-- Modes, and the one every room had so far.
CREATE TABLE modes (
  mode          text COLLATE "C" PRIMARY KEY CHECK (mode ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
  system        text    NOT NULL CHECK (system IN ('elo', 'openskill', 'glicko2')),
  model         text    NOT NULL DEFAULT '',
  parameters    jsonb   NOT NULL,  -- every parameter, defaults filled in: {"k": 32, ...}
  rated         boolean NOT NULL DEFAULT true,
  min_teams     smallint NOT NULL DEFAULT 2   CHECK (min_teams >= 2),
  max_teams     smallint NOT NULL DEFAULT 100 CHECK (max_teams >= min_teams AND max_teams <= 100),
  min_team_size smallint NOT NULL DEFAULT 1   CHECK (min_team_size >= 1),
  max_team_size smallint NOT NULL DEFAULT 200 CHECK (max_team_size >= min_team_size),
  -- Set by the first room allocated in the mode; from then on the declaration is fixed.
  in_use        boolean NOT NULL DEFAULT false,
  declared_at   timestamptz NOT NULL DEFAULT now()
);
INSERT INTO modes (mode, system, parameters, in_use)
VALUES ('default', 'elo', '{"initial_rating": 1500, "k": 32}',
        EXISTS (SELECT 1 FROM battle_rooms) OR EXISTS (SELECT 1 FROM players WHERE games > 0));

-- A rating per player and mode: `rating`, `deviation` and `volatility` in the system's own
-- numbers (Elo: the rating; OpenSkill: mu, sigma; Glicko-2: r, RD, sigma), `displayed` the
-- conservative one the ladder orders by. A row is written only by a settlement or an import,
-- each under the player's row lock in players.
CREATE TABLE player_ratings (
  mode            text COLLATE "C" NOT NULL REFERENCES modes,
  player_id       text COLLATE "C" NOT NULL REFERENCES players,
  rating          double precision NOT NULL,
  deviation       double precision NOT NULL DEFAULT 0,
  volatility      double precision NOT NULL DEFAULT 0,
  displayed       double precision NOT NULL,
  games           integer NOT NULL DEFAULT 0 CHECK (games >= 0),
  wins            integer NOT NULL DEFAULT 0 CHECK (wins >= 0),
  losses          integer NOT NULL DEFAULT 0 CHECK (losses >= 0),
  draws           integer NOT NULL DEFAULT 0 CHECK (draws >= 0),
  placements      bigint  NOT NULL DEFAULT 0,  -- the sum of the ranks placed: their mean is this / games
  last_match_at   timestamptz,
  PRIMARY KEY (mode, player_id),
  CHECK (wins + losses + draws = games)
);
-- The ladder: a mode's players best first, a page at a time by the cursor (displayed, player_id),
-- both descending so that one row comparison walks the index.
CREATE INDEX player_ratings_ladder ON player_ratings (mode, displayed DESC, player_id DESC);
INSERT INTO player_ratings (mode, player_id, rating, displayed, games, wins, losses, draws)
SELECT 'default', player_id, elo, elo, games, wins, losses, draws FROM players
WHERE games > 0 OR elo <> 1500;
ALTER TABLE players DROP COLUMN elo, DROP COLUMN games, DROP COLUMN wins, DROP COLUMN losses,
  DROP COLUMN draws;

-- Rooms: their mode, teams 1 to 100, and each seat's rating in the mode at allocation (the
-- compensation rule of docs/design.md §8; NULL: the player was new to the mode).
ALTER TABLE battle_rooms ADD COLUMN mode text COLLATE "C" NOT NULL DEFAULT 'default' REFERENCES modes;
ALTER TABLE battle_room_seats DROP CONSTRAINT battle_room_seats_team_check;
ALTER TABLE battle_room_seats ADD CONSTRAINT battle_room_seats_team_check
  CHECK (team BETWEEN 1 AND 100);
ALTER TABLE battle_room_seats RENAME COLUMN elo_at_allocation TO rating_at_allocation;
ALTER TABLE battle_room_seats ALTER COLUMN rating_at_allocation TYPE double precision;
ALTER TABLE battle_room_seats ADD COLUMN deviation_at_allocation double precision,
  ADD COLUMN volatility_at_allocation double precision;

-- The history: each match's mode, and each player's placement and rating before and after, in the
-- system's numbers. winner_team is the team placed first alone (0: a tie for first).
ALTER TABLE matches ADD COLUMN mode text COLLATE "C" NOT NULL DEFAULT 'default';
ALTER TABLE matches DROP CONSTRAINT matches_winner_team_check;
ALTER TABLE matches ADD CONSTRAINT matches_winner_team_check CHECK (winner_team BETWEEN 0 AND 100);
ALTER TABLE match_players DROP CONSTRAINT match_players_team_check;
ALTER TABLE match_players ADD CONSTRAINT match_players_team_check CHECK (team BETWEEN 1 AND 100);
ALTER TABLE match_players DROP CONSTRAINT match_players_check;
ALTER TABLE match_players RENAME COLUMN elo_before TO rating_before;
ALTER TABLE match_players RENAME COLUMN elo_after TO rating_after;
ALTER TABLE match_players ALTER COLUMN rating_before TYPE double precision,
  ALTER COLUMN rating_after TYPE double precision;
ALTER TABLE match_players ADD COLUMN rank smallint NOT NULL DEFAULT 0,  -- 0: an ABORTED match
  ADD COLUMN deviation_before double precision NOT NULL DEFAULT 0,
  ADD COLUMN deviation_after double precision NOT NULL DEFAULT 0,
  ADD COLUMN volatility_before double precision NOT NULL DEFAULT 0,
  ADD COLUMN volatility_after double precision NOT NULL DEFAULT 0;
UPDATE match_players SET rank = CASE result WHEN 'win' THEN 1 WHEN 'draw' THEN 1
                                            WHEN 'loss' THEN 2 ELSE 0 END;
ALTER TABLE match_players ADD CONSTRAINT match_players_aborted_moves_nothing
  CHECK (result <> 'aborted' OR (rating_after = rating_before AND
                                 deviation_after = deviation_before AND
                                 volatility_after = volatility_before));
