-- 001: the lobby's tables, as the pre-release migrations 001-023 left them (squashed: no database
-- outside this repository ran those). Numbered files hold only tables, indexes and data changes;
-- every function lives in sql/functions/, one file each, re-applied by `verdict-lobby migrate`
-- whenever its text changes (docs/lobby.md, "Running it against an existing PostgreSQL").
--
-- The constraints are the last line of defence: even if the settlement code were wrong, the
-- database itself refuses a second receipt for a room, and with it the match, players, replay and
-- event written in the same transaction.

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

-- Rooms allocated to a node and not yet settled; a settlement deletes its row. released_at is
-- when the room's players were released to play again while it waits for its result (pending
-- settlement, docs/operating.md); NULL while they are held.
CREATE TABLE battle_rooms (
  room_id      bigint PRIMARY KEY CHECK (room_id > 0),
  node_id      text   NOT NULL CHECK (node_id <> ''),
  allocated_at timestamptz NOT NULL DEFAULT now(),
  released_at  timestamptz
);
CREATE INDEX battle_rooms_allocated_at ON battle_rooms (allocated_at);

-- The roster of an allocated room, with the rating each player had at allocation: a room's Elo
-- is computed from those (the compensation rule of pending settlement, docs/operating.md).
CREATE TABLE battle_room_seats (
  room_id           bigint   NOT NULL REFERENCES battle_rooms ON DELETE CASCADE,
  player_id         bigint   NOT NULL REFERENCES players,
  team              smallint NOT NULL CHECK (team IN (1, 2)),
  elo_at_allocation integer,
  PRIMARY KEY (room_id, player_id)
);

-- The history: matches, match_players and replays, partitioned by match_id with the same bounds,
-- so that retention drops one slice of history as three partitions together (docs/operating.md,
-- "Retention"). A partition is "<table>_p<lower bound>"; verdict_partitions lists them.
--
-- What partitioning costs. PostgreSQL enforces a unique index on a partitioned table only if it
-- includes the partition key, so matches.room_id, replays.room_id and settlement_events' room_id,
-- match_id and seq are not unique in the database. One settlement per room is still enforced by
-- it: the receipt (settlement_receipts, primary key room_id) is written in the same transaction
-- as the match, its players, its replay and its event, so a second settlement of a room fails on
-- the receipt and takes its history rows with it. seq stays unique because one sequencer at a
-- time hands it out (verdict_sequence_events). There are no foreign keys from receipts, events or
-- replays to matches: history may be dropped while the receipts stay, which is what makes them
-- tombstones.
CREATE TABLE matches (
  match_id     bigint GENERATED ALWAYS AS IDENTITY,
  room_id      bigint   NOT NULL,
  node_id      text     NOT NULL,
  outcome      text     NOT NULL CHECK (outcome IN ('SETTLED', 'ABORTED')),
  winner_team  smallint NOT NULL CHECK (winner_team IN (0, 1, 2)),
  suspect      boolean  NOT NULL,
  abort_reason text     NOT NULL DEFAULT '',
  ended_at_ms  bigint   NOT NULL,
  settled_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (match_id)
) PARTITION BY RANGE (match_id);
CREATE INDEX matches_room ON matches (room_id);

-- Written only by the settlement, in the transaction that inserts their match and after locking
-- every one of their players FOR UPDATE, so foreign keys to matches and players could never fail;
-- there are none, since each ran a referential-integrity query per row (about a sixth of
-- PostgreSQL's CPU in the drain profile, bench/RESULTS.md).
CREATE TABLE match_players (
  match_id     bigint   NOT NULL,
  player_id    bigint   NOT NULL,
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
) PARTITION BY RANGE (match_id);
-- Ten players a match, whatever ANALYZE sampled: a match has about ten players, right at the
-- 10 % of rows below which ANALYZE records distinct values as a fixed number instead of a
-- fraction of the table, and then the planner goes on believing each match_id has hundreds of
-- rows as the history grows (bench/RESULTS.md, "Reading back what was just written").
-- verdict_create_partition sets it on each new partition too.
ALTER TABLE match_players ALTER COLUMN match_id SET (n_distinct = -0.1);

CREATE TABLE replays (
  match_id bigint NOT NULL,
  room_id  bigint NOT NULL,
  path     text   NOT NULL CHECK (path <> ''),
  PRIMARY KEY (match_id)
) PARTITION BY RANGE (match_id);

-- battle.settled events, partitioned by event_id, their insert order.
--
-- Why a second number. event_id comes from an identity column, so it is taken at INSERT, and
-- transactions commit in any order: event 10 can become visible after event 11. A reader that
-- had passed 11 would never look back for 10. So each event gets a place in the feed, `seq`,
-- only once its transaction has committed, from a sequencer that runs alone
-- (verdict_sequence_events). Clients see `seq` as the feed's event_id; no row can be routed to a
-- partition by it.
--
-- Why the cursor cannot skip an event (docs/design.md §3, Events). Sequencing is one short
-- transaction under an advisory lock that only one sequencer holds at a time; it gives the
-- committed events that have no seq yet the numbers max(seq)+1, max(seq)+2, … and commits
-- before the lock is released. Hence (1) seqs appear in the order they are numbered, each
-- sequencing transaction's numbers above all earlier ones; (2) any snapshot sees a gap-free
-- prefix 1..k of the feed, because a sequencer starts only after the previous one's commit is
-- visible; (3) an event whose settlement commits later is numbered by a later sequencer, so it
-- lands after every number already handed out instead of behind a cursor. A reader that has
-- delivered 1..k therefore only ever needs what is above k: `?after=k` resumes exactly.
-- A sequencer that fails rolls back whole and the next one renumbers from max(seq).
CREATE TABLE settlement_events (
  event_id   bigint GENERATED ALWAYS AS IDENTITY,
  room_id    bigint NOT NULL,
  match_id   bigint NOT NULL,
  payload    jsonb  NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  seq        bigint,  -- its place in the feed, numbered after commit
  node_id    text   NOT NULL,
  PRIMARY KEY (event_id)
) PARTITION BY RANGE (event_id);
-- The sequencer's work list, the feed in order, a node's own events in feed order, and a room's
-- event (reconciliation).
CREATE INDEX settlement_events_unsequenced ON settlement_events (event_id) WHERE seq IS NULL;
CREATE INDEX settlement_events_seq ON settlement_events (seq);
CREATE INDEX settlement_events_node_seq ON settlement_events (node_id, seq);
CREATE INDEX settlement_events_room ON settlement_events (room_id);

-- The partitions of each family ('events': settlement_events; 'history': matches, match_players,
-- replays). Every id goes to a partition created ahead of the rows (verdict_ensure_partitions);
-- a DEFAULT partition takes any row that finds none, so that a missing partition can never fail
-- a settlement, and the next verdict_ensure_partitions moves such rows into a partition of their
-- own. The first partition of each table, "_p0" (lower bound MINVALUE, named 0), ends at id 1.
CREATE TABLE verdict_partitions (
  family   text   NOT NULL CHECK (family IN ('events', 'history')),
  lower_id bigint NOT NULL,  -- the partition holds lower_id <= id < upper_id
  upper_id bigint NOT NULL CHECK (upper_id > lower_id),
  PRIMARY KEY (family, lower_id)
);
CREATE TABLE settlement_events_p0 PARTITION OF settlement_events FOR VALUES FROM (MINVALUE) TO (1);
CREATE TABLE matches_p0 PARTITION OF matches FOR VALUES FROM (MINVALUE) TO (1);
CREATE TABLE match_players_p0 PARTITION OF match_players FOR VALUES FROM (MINVALUE) TO (1);
ALTER TABLE match_players_p0 ALTER COLUMN match_id SET (n_distinct = -0.1);
CREATE TABLE replays_p0 PARTITION OF replays FOR VALUES FROM (MINVALUE) TO (1);
CREATE TABLE settlement_events_default PARTITION OF settlement_events DEFAULT;
CREATE TABLE matches_default PARTITION OF matches DEFAULT;
CREATE TABLE match_players_default PARTITION OF match_players DEFAULT;
CREATE TABLE replays_default PARTITION OF replays DEFAULT;
INSERT INTO verdict_partitions VALUES ('events', 0, 1), ('history', 0, 1);

-- The durable answer to "was this room settled?". Written in the settlement transaction; the
-- lobby replies 2xx only after it commits. attempt_id names the settlement attempt that committed
-- it: a lobby that lost its connection during COMMIT reads the receipt back and knows whether the
-- commit was its own (duplicate = false). A receipt outlives the room's history: a redelivery
-- after the history is dropped is still answered from it, duplicate with the original match_id.
CREATE TABLE settlement_receipts (
  room_id     bigint PRIMARY KEY,
  node_id     text   NOT NULL,
  outcome     text   NOT NULL CHECK (outcome IN ('SETTLED', 'ABORTED')),
  match_id    bigint NOT NULL UNIQUE,
  fingerprint bytea  NOT NULL CHECK (length(fingerprint) = 32),  -- sha256 of the result
  settled_at  timestamptz NOT NULL DEFAULT now(),
  attempt_id  bigint NOT NULL DEFAULT 0
);

-- When a receipt expires (verdict_expire_receipts), settled_rooms keeps a compact record that the
-- room was settled: its id and a 32-bit tag of its node (so that another node's room stays
-- indistinguishable from one never allocated: ROOM_UNKNOWN). A redelivery of such a room is
-- answered 'original_expired' (410 ORIGINAL_EXPIRED), never a second settlement, and its id is
-- never allocated again ('room_id_reused', 409 ROOM_ID_REUSED). A room has a receipt or a record,
-- never both: one statement moves it from the one to the other.
CREATE TABLE settled_rooms (
  room_id  bigint  PRIMARY KEY,
  node_tag integer NOT NULL  -- verdict_node_tag(node_id)
) WITH (fillfactor = 100);  -- written once, in room order, never updated

-- The feed's one row:
--   epoch            a random name for this feed's history, made with the schema. A cursor means
--                    something only in its epoch: after a backup is restored, the places after
--                    the backup are handed out again to other events, so the restore procedure
--                    runs `verdict-lobby new-epoch`, and subscribers that name the old epoch are
--                    refused (EPOCH_CHANGED) instead of resuming at a place that now holds
--                    another event.
--   trimmed_through  every event with seq <= trimmed_through may be gone; every event above it
--                    is kept. Raised when a partition of events is dropped, to the highest seq it
--                    held. A cursor below it is refused (CURSOR_TRIMMED), ?after=0 included, so a
--                    subscriber never silently starts at whatever is left.
--   trimmed_at       the newest creation time of the events dropped: receipts settled after it
--                    must still have their event (reconciliation).
-- The feed's head is the highest seq, or trimmed_through if every event is gone: places are
-- never handed out twice, even after everything was trimmed (verdict_feed_head).
CREATE TABLE verdict_feed (
  one             boolean PRIMARY KEY DEFAULT true CHECK (one),
  epoch           text    NOT NULL CHECK (epoch <> ''),
  trimmed_through bigint  NOT NULL DEFAULT 0 CHECK (trimmed_through >= 0),
  trimmed_at      timestamptz
);
-- The first epoch. (The functions are created after the numbered migrations, so this cannot
-- call verdict_new_epoch(); its 16 hex digits are made the same way.)
INSERT INTO verdict_feed (epoch) VALUES (left(replace(gen_random_uuid()::text, '-', ''), 16));
