-- 009: a settled match can be voided (docs/design.md §5, "Voiding a match").
--
-- A void is one transaction: its claim (match_voids, keyed by the match, so that a second void of
-- the match finds the first), the affected players' ratings restored by its policy, the values a
-- replay re-rated kept for audit, and a battle.voided event in the feed. The voided match stays in
-- the history; its match_voids row is what marks it.

-- A player's matches in match order: the replay's walk (verdict_void_affected) reads each affected
-- player's later matches here, once, instead of every later match of the mode.
CREATE INDEX match_players_player ON match_players (player_id, match_id);

-- One row per voided match: its claim, made first in the void's transaction. Not partitioned, and
-- kept when retention drops the match's history: a void is rare, and its record is what says why
-- a ladder moved.
CREATE TABLE match_voids (
  match_id         bigint PRIMARY KEY,
  room_id          bigint NOT NULL,
  mode             text COLLATE "C" NOT NULL,
  policy           text   NOT NULL CHECK (policy IN ('replay', 'compensate')),
  reason           text   NOT NULL CHECK (reason <> ''),
  voided_at        timestamptz NOT NULL DEFAULT now(),
  matches_replayed integer NOT NULL DEFAULT 0 CHECK (matches_replayed >= 0)
);
CREATE INDEX match_voids_room ON match_voids (room_id);

-- Each player a void moved: its rating in the mode before the void and after it, and its newest
-- match in the mode when it was voided (a compensation sits right after that match in the
-- player's chain of ratings).
CREATE TABLE match_void_players (
  match_id          bigint NOT NULL,
  player_id         text COLLATE "C" NOT NULL,
  after_match_id    bigint NOT NULL,
  rating_before     double precision NOT NULL,
  rating_after      double precision NOT NULL,
  deviation_before  double precision NOT NULL,
  deviation_after   double precision NOT NULL,
  volatility_before double precision NOT NULL,
  volatility_after  double precision NOT NULL,
  PRIMARY KEY (match_id, player_id)
);

-- A match a replay rated again: each player's values before the void, which match_players then
-- no longer holds, and the void that changed them.
CREATE TABLE match_rating_revisions (
  match_id          bigint NOT NULL,
  player_id         text COLLATE "C" NOT NULL,
  void_match_id     bigint NOT NULL,
  rating_before     double precision NOT NULL,
  rating_after      double precision NOT NULL,
  deviation_before  double precision NOT NULL,
  deviation_after   double precision NOT NULL,
  volatility_before double precision NOT NULL,
  volatility_after  double precision NOT NULL,
  revised_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (match_id, player_id, void_match_id)
);
