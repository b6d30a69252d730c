// The lobby's store by role: the records its calls take and return, and one small interface per
// kind of client, so that each consumer takes only what it uses (docs/design.md §5):
//   BatchSettler    settles rooms in one transaction: the settlement scheduler;
//   RoomStore       allocates, reads and releases rooms: the service and maintenance;
//   ReceiptStore    reads receipts: GET /v1/settlements/{room_id};
//   LadderStore     players, modes, ladders and imports: the ladder endpoints;
//   InactivityStore ages idle players' ratings: maintenance's inactivity pass;
//   FeedStore       numbers and reads the event feed: the event hub;
//   ReconcileStore  finds rooms and receipts left half done: `verdict-lobby reconcile`;
//   GovernanceStore takes a settled match back: the admin's void.
// lobby/pg_store.h implements them on PostgreSQL; tests/support/fake_store.h in memory. Every call
// answers Status: UNAVAILABLE for anything a retry may fix (the database away or not migrated
// yet), INTERNAL for an error the same call would meet again. Every call may block: call them
// from DB worker threads, never from I/O threads. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lobby/cancellation.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::lobby {

enum class AllocateStatus {
  kAllocated,
  kDuplicate,
  kRoomExists,
  kPlayerBusy,
  kRoomIdReused,
  kModeUnknown,   // the allocation's mode is not declared
  kShapeRefused,  // the mode does not accept a room of this shape
  kModeClosed,    // the mode is closed to new rooms
};
struct AllocateOutcome {
  AllocateStatus status = AllocateStatus::kAllocated;
  std::string busy_player;  // for kPlayerBusy
  std::string detail;       // for kModeUnknown and kShapeRefused: why
};

// What PUT /v1/modes/{mode} did (sql/functions/verdict_declare_mode.sql).
enum class DeclareStatus {
  kCreated,
  kUpdated,
  kUnchanged,
  kInUse,
  kSeedUnknown,        // seed_from names a mode not declared: nothing changed
  kSeedSystemDiffers,  // seed_from names a mode of another rating system: nothing changed
  kModeUnknown,        // a body that only opens or closes a mode names one not declared
};
struct DeclareOutcome {
  DeclareStatus status = DeclareStatus::kCreated;
  v1::Mode mode;  // as stored after the call (kInUse: the declaration that stays; the last three:
                  // none)
};

// What PUT /v1/players/{player_id}/ratings/{mode} did.
enum class ImportStatus { kImported, kPlayerBusy, kModeUnknown };
struct ImportOutcome {
  ImportStatus status = ImportStatus::kImported;
  v1::ModeRating rating;  // kImported: the player's rating in the mode now
};

// Where a page of a ladder starts: after the entry of this displayed rating and player (the
// ladder orders by displayed, then player id, both descending).
struct LadderCursor {
  double displayed = 0;
  std::string player_id;
};

enum class SettleStatus {
  kSettled,              // this call's transaction committed the settlement
  kDuplicate,            // already settled with the same outcome and fingerprint
  kRoomUnknown,          // never allocated, or allocated to another node
  kOutcomeConflict,      // settled before with the other outcome
  kIdempotencyMismatch,  // settled before with the same outcome, different payload
  kRosterMismatch,       // players differ from the allocated roster
  kBusy,                 // (not waiting for locks) another transaction holds the room: not tried
  kOriginalExpired,      // settled long ago: only the compact record of its settlement is left
};

// One room of a settlement call: a validated result, the node it is settled for, and the
// sha256 of its deterministic serialization.
struct SettleRequest {
  const v1::BattleResult* result = nullptr;
  std::string node_id;
  std::string fingerprint;
};

struct SettleOutcome {
  SettleStatus status = SettleStatus::kSettled;
  v1::SettlementReceipt receipt;  // for kSettled, kDuplicate and the two conflicts
};

// One event of the feed (sql/001_baseline.sql explains its order).
struct SettlementEvent {
  int64_t seq = 0;  // its place in the feed: the event_id clients see and resume from
  std::string node_id;
  std::string payload_json;  // the battle.settled object
};

// A page of the feed: the events after `after`, in order. `last` is how far the page
// covers the feed: every event with after < seq <= last that matched the query is in `events`,
// unless `trimmed_through` is above `after` (retention dropped some of them). `epoch` and `head`
// are the feed's as the page was read (verdict_feed, sql/001_baseline.sql): a head below `after`
// means the feed went back in time (a restore, a failover that lost commits).
struct FeedPage {
  int64_t after = 0;
  int64_t last = 0;
  std::vector<SettlementEvent> events;
  int64_t trimmed_through = 0;
  std::string epoch;
  int64_t head = 0;
};

// Where the feed stands (verdict_feed, sql/001_baseline.sql) for a reader: a cursor is valid in
// `epoch` from trimmed_through to head. For a node's token, head and oldest are of that node's
// own events (sql/functions/verdict_feed_state.sql).
struct FeedState {
  std::string epoch;
  int64_t head = 0;             // the newest place in the feed (a node's: its newest event's)
  int64_t trimmed_through = 0;  // places up to this may be gone
  int64_t oldest = 0;           // the oldest place retained above trimmed_through; 0: none
};

struct PendingRoom {
  uint64_t room_id = 0;
  std::string node_id;
  int64_t allocated_at_ms = 0;
  int64_t age_s = 0;
  int64_t released_at_ms = 0;  // 0 while its players are held
};

// An allocated room as the lobby holds it, for the admin actions on it (release, abort).
struct AllocatedRoom {
  uint64_t room_id = 0;
  std::string node_id;
  int64_t allocated_at_ms = 0;
  int64_t released_at_ms = 0;  // 0 while its players are held
  std::vector<v1::Seat> seats;
};

// What a release did (sql/functions/verdict_release_room.sql).
enum class ReleaseStatus {
  kReleased,     // released now, or before (then released_at_ms is the first release's)
  kRoomUnknown,  // not allocated, or settled already
  kBusy,         // (not waiting for locks) another transaction holds the room: nothing changed
};
struct ReleaseOutcome {
  ReleaseStatus status = ReleaseStatus::kReleased;
  int64_t released_at_ms = 0;
  uint32_t players_released = 0;
};

// A receipt without its settlement event (reconciliation).
struct ReceiptWithoutEvent {
  uint64_t room_id = 0;
  std::string node_id;
  uint64_t match_id = 0;
  int64_t settled_at_ms = 0;
};

// The one store call of the settlement scheduler (lobby/settlement_scheduler.h). Called from the
// threads that call SettlementScheduler::Settle, several at once.
class BatchSettler {
 public:
  virtual ~BatchSettler() = default;
  // Settles `requests` (distinct rooms, each validated) in one transaction, and returns one
  // outcome per request in the same order. kSettled only once the commit is known; a commit
  // whose outcome is unknown is resolved per room by reading the receipts (kSettled if this
  // call committed it), and a room without a receipt is then UNAVAILABLE. An outcome read from
  // a receipt written earlier (a duplicate, a conflict, an unknown commit resolved) is returned
  // only once a synchronous standby, if there is one, has the receipt; else UNAVAILABLE. A failed
  // call has changed nothing and fails every request alike: UNAVAILABLE if a retry may succeed
  // (the connection or server went away, a serialization failure or deadlock, a lock or
  // statement timeout, `cancel`, the server short of resources, a database not migrated yet),
  // INTERNAL if the database refused the settlement itself (a data exception, a check
  // violation): the same call would fail again. `wait`: wait for each room's lock (under the
  // lock timeout); otherwise a room another transaction holds is kBusy. `cancel` (may be null)
  // stops the statement from another thread.
  virtual std::vector<Result<SettleOutcome>> SettleBattles(
      const std::vector<SettleRequest>& requests, bool wait, Cancellation* cancel) = 0;
  // How many of those calls can run at once: the store's DB workers.
  virtual int workers() const = 0;
};

class RoomStore {
 public:
  virtual ~RoomStore() = default;
  // Allocates a validated room (see RoomAllocation rules in the service), in its mode, which the
  // service has filled in (kDefaultMode when the request named none).
  virtual Result<AllocateOutcome> AllocateRoom(const v1::RoomAllocation& allocation) = 0;
  // The room as allocated (nullopt when it is not, or is settled already).
  virtual Result<std::optional<AllocatedRoom>> GetRoom(uint64_t room_id) = 0;
  // Releases the room's players and marks it pending (sql/functions/verdict_release_room.sql).
  virtual Result<ReleaseOutcome> ReleaseRoom(uint64_t room_id) = 0;
  // Releases up to `limit` rooms allocated more than `older_than_s` seconds ago that are not
  // released yet, oldest first, each in a statement of its own; a room another transaction holds
  // (its row, or one of its players') is passed over until the next call. Returns how many it
  // released.
  virtual Result<int> ReleaseRoomsOlderThan(int64_t older_than_s, int limit) = 0;
  // Seconds since the oldest room without a receipt was allocated (0 when there is none).
  virtual Result<double> OldestUnsettledAllocationAge() = 0;
};

class ReceiptStore {
 public:
  virtual ~ReceiptStore() = default;
  // The receipt of `room_id`; with a node_id, only if the room belongs to that node.
  virtual Result<std::optional<v1::SettlementReceipt>> GetReceipt(
      uint64_t room_id, const std::optional<std::string>& node_id) = 0;
  // Whether `room_id` was settled and its receipt has expired, leaving the compact record of
  // settled_rooms (sql/001_baseline.sql); with a node_id, only if the room belonged to that node.
  virtual Result<bool> ReceiptExpired(uint64_t room_id,
                                      const std::optional<std::string>& node_id) = 0;
};

// Modes and ladders (docs/lobby.md, "Modes and ladders").
class LadderStore {
 public:
  virtual ~LadderStore() = default;
  // The player with its rating in every mode it has one in; nullopt if no such player.
  virtual Result<std::optional<v1::Player>> GetPlayer(const std::string& player_id) = 0;
  // Declares `mode`, a declaration the caller checked and completed (lobby/modes.h).
  virtual Result<DeclareOutcome> DeclareMode(const v1::Mode& mode) = 0;
  // The mode as declared; nullopt if it is not.
  virtual Result<std::optional<v1::Mode>> GetMode(const std::string& mode) = 0;
  // Up to `limit` entries of the mode's ladder after `after` (from the top without), and the
  // cursor of the next page; nullopt if the mode is not declared. Provisional players (fewer
  // games than the mode's provisional_games) only with `include_provisional`, in the same order.
  virtual Result<std::optional<v1::Leaderboard>> GetLeaderboard(
      const std::string& mode, size_t limit, const std::optional<LadderCursor>& after,
      bool include_provisional) = 0;
  // Sets the player's rating in the mode (its counts stay), `displayed` its ladder value,
  // unless the player is in a room.
  virtual Result<ImportOutcome> ImportRating(const std::string& player_id, const std::string& mode,
                                             const v1::RatingImport& rating, double displayed) = 0;
};

// Where the inactivity pass resumes: after this player in the mode of this key (modes.mode_id),
// in key order; the default is the start.
struct AgingPlace {
  int32_t mode_id = 0;
  std::string player_id;
};

// What one InactivityStore::AgeIdleRatings call did.
struct AgingPass {
  int scanned = 0;  // the ratings looked at
  int aged = 0;     // those whose deviation grew
  AgingPlace next;  // where the next call resumes (the start, once it went round)
};

// The maintenance's inactivity pass (docs/modes.md, "Inactivity"): ages the ratings of idle
// players in the modes that declare aging (RatingSystem::Idle), so that the ladder shows it.
class InactivityStore {
 public:
  virtual ~InactivityStore() = default;
  // Looks at up to `limit` ratings from `from` on, in (mode key, player id) order, in small
  // batches each a short transaction of its own: each rating idle for at least one whole day
  // (OpenSkill) or rating period (Glicko-2) since its last match or its last aging, and below
  // its mode's initial deviation, grows by those whole days or periods, and records how far it
  // aged. A rating another transaction holds (a settlement) is passed over (SKIP LOCKED) until the
  // pass comes round again; it ages at its next match anyway.
  virtual Result<AgingPass> AgeIdleRatings(const AgingPlace& from, int limit) = 0;
};

// What FeedStore::SequenceEvents did.
struct Sequenced {
  int numbered = 0;     // 0 also when another lobby instance is numbering right now
  int backend_pid = 0;  // the session that ran it, and sent the NOTIFY if it numbered any
};

// The event feed (docs/events.md).
class FeedStore {
 public:
  virtual ~FeedStore() = default;
  // Gives committed events their place in the feed, at most `limit`
  // (sql/functions/verdict_sequence_events.sql).
  virtual Result<Sequenced> SequenceEvents(int limit) = 0;
  // The feed after `after`, at most `limit` events; with a node_id, only that node's events.
  // A page with fewer than `limit` events covers the feed up to its newest numbered event.
  virtual Result<FeedPage> EventsAfter(int64_t after, const std::optional<std::string>& node_id,
                                       size_t limit) = 0;
  // The feed's epoch, head and retained range, as of one moment; with a node_id, as that node's
  // token sees it (sql/functions/verdict_feed_state.sql).
  virtual Result<FeedState> GetFeedState(const std::optional<std::string>& node_id) = 0;
};

// How a void restores the ratings a match moved (docs/design.md §5, "Voiding a match").
enum class VoidPolicy {
  kReplay,      // as if the match had never been played: the later matches rated again
  kCompensate,  // each of its players given the inverse of its change, by the compensation rule
};

// A void of one settled match, named by its match id or by its room's id (exactly one of them).
struct VoidRequest {
  uint64_t match_id = 0;
  uint64_t room_id = 0;
  VoidPolicy policy = VoidPolicy::kReplay;
  std::string reason;  // not empty
  // The most later matches a replay may rate again; a void that would rate more is kTooLarge.
  // Default: 1,000 (`serve --void-replay-limit`).
  int replay_limit = 1000;
};

enum class VoidStatus {
  kVoided,        // this call voided the match
  kDuplicate,     // voided before: the first void's outcome, nothing changed
  kMatchUnknown,  // no such match in the history (never settled, or past retention)
  kNotVoidable,   // an ABORTED match: it moved no rating and counted no game
  kTooLarge,      // a replay over the limit: nothing changed
};
struct VoidOutcome {
  VoidStatus status = VoidStatus::kVoided;
  v1::MatchVoid voided;  // kVoided and kDuplicate: the void, as the first one made it
  // kTooLarge: how many later matches it would rate again; with `more_than`, more than that many
  // (the count stopped at its own bound).
  uint64_t would_replay = 0;
  bool more_than = false;
};

// Voids (docs/design.md §5, "Voiding a match").
class GovernanceStore {
 public:
  virtual ~GovernanceStore() = default;
  // Voids the match in one transaction: marks it voided, restores each affected player's rating
  // and counts by the policy, and writes a battle.voided event into the feed. A match voided
  // before (by any instance, with any policy) is kDuplicate with the first void, unchanged. Every
  // status but kVoided has changed nothing.
  virtual Result<VoidOutcome> VoidMatch(const VoidRequest& request) = 0;
};

// What `verdict-lobby reconcile` looks for.
class ReconcileStore {
 public:
  virtual ~ReconcileStore() = default;
  // Rooms allocated more than `older_than_s` seconds ago that have no receipt.
  virtual Result<std::vector<PendingRoom>> RoomsWithoutReceipt(int64_t older_than_s) = 0;
  // Receipts written more than `older_than_s` seconds ago whose settlement event is missing,
  // among those settled after the newest event retention dropped.
  virtual Result<std::vector<ReceiptWithoutEvent>> ReceiptsWithoutEvent(int64_t older_than_s) = 0;
};

}  // namespace verdict::lobby
