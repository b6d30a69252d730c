-- verdict lobby schema. The constraints are the last line of defence: even if the settlement
-- code were wrong, the database itself refuses a second match, receipt or event for a room.

CREATE TABLE players (
  player_id      bigint  PRIMARY KEY CHECK (player_id > 0),
  elo            integer NOT NULL DEFAULT 1500,
  games          integer NOT NULL DEFAULT 0 CHECK (games >= 0),
  wins           integer NOT NULL DEFAULT 0 CHECK (wins >= 0),
  losses         integer NOT NULL DEFAULT 0 CHECK (losses >= 0),
  draws          integer NOT NULL DEFAULT 0 CHECK (draws >= 0),
  in_battle_room bigint  NOT NULL DEFAULT 0 CHECK (in_battle_room >= 0),  -- 0 when free
  created_at     timestamptz NOT NULL DEFAULT now(),
  CHECK (wins + losses + draws = games)
);

-- Rooms allocated to a node and not yet settled; a settlement deletes its row.
CREATE TABLE battle_rooms (
  room_id      bigint PRIMARY KEY CHECK (room_id > 0),
  node_id      text   NOT NULL CHECK (node_id <> ''),
  allocated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX battle_rooms_allocated_at ON battle_rooms (allocated_at);

-- The roster of an allocated room.
CREATE TABLE battle_room_seats (
  room_id   bigint   NOT NULL REFERENCES battle_rooms ON DELETE CASCADE,
  player_id bigint   NOT NULL REFERENCES players,
  team      smallint NOT NULL CHECK (team IN (1, 2)),
  PRIMARY KEY (room_id, player_id)
);

CREATE TABLE matches (
  match_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  room_id      bigint   NOT NULL UNIQUE,
  node_id      text     NOT NULL,
  outcome      text     NOT NULL CHECK (outcome IN ('SETTLED', 'ABORTED')),
  winner_team  smallint NOT NULL CHECK (winner_team IN (0, 1, 2)),
  suspect      boolean  NOT NULL,
  abort_reason text     NOT NULL DEFAULT '',
  ended_at_ms  bigint   NOT NULL,
  settled_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE match_players (
  match_id     bigint   NOT NULL REFERENCES matches,
  player_id    bigint   NOT NULL REFERENCES players,
  team         smallint NOT NULL CHECK (team IN (1, 2)),
  kills        integer  NOT NULL CHECK (kills >= 0),
  deaths       integer  NOT NULL CHECK (deaths >= 0),
  assists      integer  NOT NULL CHECK (assists >= 0),
  score        bigint   NOT NULL,
  disconnected boolean  NOT NULL,
  result       text     NOT NULL CHECK (result IN ('win', 'loss', 'draw', 'aborted')),
  elo_before   integer  NOT NULL,
  elo_after    integer  NOT NULL,
  PRIMARY KEY (match_id, player_id),
  CHECK (result <> 'aborted' OR elo_after = elo_before)
);

CREATE TABLE replays (
  match_id bigint PRIMARY KEY REFERENCES matches,
  room_id  bigint NOT NULL UNIQUE,
  path     text   NOT NULL CHECK (path <> '')
);

-- battle.settled events, in commit-independent id order; subscribers resume with ?after=.
CREATE TABLE settlement_events (
  event_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  room_id    bigint NOT NULL UNIQUE,
  match_id   bigint NOT NULL UNIQUE REFERENCES matches,
  payload    jsonb  NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The durable answer to "was this room settled?". Written in the settlement transaction;
-- the lobby replies 2xx only after it commits.
CREATE TABLE settlement_receipts (
  room_id     bigint PRIMARY KEY,
  node_id     text   NOT NULL,
  outcome     text   NOT NULL CHECK (outcome IN ('SETTLED', 'ABORTED')),
  match_id    bigint NOT NULL UNIQUE REFERENCES matches,
  fingerprint bytea  NOT NULL CHECK (length(fingerprint) = 32),  -- sha256 of the result
  settled_at  timestamptz NOT NULL DEFAULT now()
);
