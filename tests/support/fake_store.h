// FakeStore: every role of the lobby's store (lobby/settlement_store.h) in memory, for tests of
// the service and its consumers without a database. What is plain to do it does as the SQL does
// (sql/functions/): rooms are allocated, read, released and settled into receipts, checked in the
// same order (a reused id, an existing room, the mode, its shape, a busy player); modes are
// declared and fixed once in use; ratings are imported and read back, and ladders paged; each
// receipt writes its event, which the feed numbers. What it does not do: rate (a settlement moves
// no rating; the rating step has tests of its own), wait on locks (nothing is busy unless forced),
// or expire receipts unless told (Expire), or keep a history to void (every match is unknown to
// VoidMatch unless a status is forced).
//
// Beside that, a test scripts the answers it needs: Fail makes a call answer an error, Force makes
// every call that answers a kind of status answer the one given, changing nothing. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "lobby/settlement_store.h"

namespace verdict::testing {

class FakeStore final : public lobby::BatchSettler,
                        public lobby::RoomStore,
                        public lobby::ReceiptStore,
                        public lobby::LadderStore,
                        public lobby::FeedStore,
                        public lobby::ReconcileStore,
                        public lobby::GovernanceStore {
 public:
  // The calls of the roles, each by its name.
  enum class Call {
    kSettleBattles,
    kAllocateRoom,
    kGetRoom,
    kReleaseRoom,
    kReleaseRoomsOlderThan,
    kOldestUnsettledAllocationAge,
    kGetReceipt,
    kReceiptExpired,
    kGetPlayer,
    kDeclareMode,
    kGetMode,
    kGetLeaderboard,
    kImportRating,
    kSequenceEvents,
    kEventsAfter,
    kGetFeedState,
    kRoomsWithoutReceipt,
    kReceiptsWithoutEvent,
    kVoidMatch,
  };

  // Declares the default mode (lobby/modes.h), as the schema's migrations do.
  FakeStore();

  // Every later `call` answers `failure` (an UNAVAILABLE or INTERNAL error, say) and changes
  // nothing, until called again with Status::Ok().
  void Fail(Call call, Status failure);
  // SettleBattles answers `failure` for this room alone, and settles the others of its call (as a
  // commit of unknown fate does for a room it finds no receipt of), until called again with
  // Status::Ok().
  void FailRoom(uint64_t room_id, Status failure);
  // Every later call that answers this kind of status answers `status` and changes nothing, until
  // Unforce. The rest of the outcome is what such an answer carries: the first seat's player as
  // the busy one, kForcedDetail as the detail, a receipt (a conflict's of the other outcome), the
  // mode or the rating as given. A store that waits for locks is never busy: a forced kBusy
  // answers the settlements that do not wait, and those that do are settled as the fake does.
  // E: AllocateStatus, SettleStatus, ReleaseStatus, DeclareStatus, ImportStatus or VoidStatus.
  template <typename E>
  void Force(E status) {
    std::lock_guard lock(mu_);
    std::get<std::optional<E>>(forced_) = status;
  }
  void Unforce();

  // The room's receipt passes retention: only the record that it was settled, and how, is left.
  void Expire(uint64_t room_id);
  // The clock of allocations, releases, receipts and declarations.
  FakeClock& clock() { return clock_; }
  // How many times SettleBattles was called.
  int settle_calls() const;

  // BatchSettler.
  std::vector<Result<lobby::SettleOutcome>> SettleBattles(
      const std::vector<lobby::SettleRequest>& requests, bool wait,
      lobby::Cancellation* cancel) override;
  int workers() const override { return 4; }

  // RoomStore.
  Result<lobby::AllocateOutcome> AllocateRoom(const v1::RoomAllocation& allocation) override;
  Result<std::optional<lobby::AllocatedRoom>> GetRoom(uint64_t room_id) override;
  Result<lobby::ReleaseOutcome> ReleaseRoom(uint64_t room_id) override;
  Result<int> ReleaseRoomsOlderThan(int64_t older_than_s, int limit) override;
  Result<double> OldestUnsettledAllocationAge() override;

  // ReceiptStore.
  Result<std::optional<v1::SettlementReceipt>> GetReceipt(
      uint64_t room_id, const std::optional<std::string>& node_id) override;
  Result<bool> ReceiptExpired(uint64_t room_id, const std::optional<std::string>& node_id) override;

  // LadderStore.
  Result<std::optional<v1::Player>> GetPlayer(const std::string& player_id) override;
  Result<lobby::DeclareOutcome> DeclareMode(const v1::Mode& mode) override;
  Result<std::optional<v1::Mode>> GetMode(const std::string& mode) override;
  Result<std::optional<v1::Leaderboard>> GetLeaderboard(
      const std::string& mode, size_t limit, const std::optional<lobby::LadderCursor>& after,
      bool include_provisional) override;
  Result<lobby::ImportOutcome> ImportRating(const std::string& player_id, const std::string& mode,
                                            const v1::RatingImport& rating,
                                            double displayed) override;

  // FeedStore.
  Result<lobby::Sequenced> SequenceEvents(int limit) override;
  Result<lobby::FeedPage> EventsAfter(int64_t after, const std::optional<std::string>& node_id,
                                      size_t limit) override;
  Result<lobby::FeedState> GetFeedState(const std::optional<std::string>& node_id) override;

  // ReconcileStore.
  Result<std::vector<lobby::PendingRoom>> RoomsWithoutReceipt(int64_t older_than_s) override;
  Result<std::vector<lobby::ReceiptWithoutEvent>> ReceiptsWithoutEvent(
      int64_t older_than_s) override;

  // GovernanceStore.
  Result<lobby::VoidOutcome> VoidMatch(const lobby::VoidRequest& request) override;

  // The feed's epoch, in the lowercase hex a cursor carries.
  static constexpr char kEpoch[] = "0fa4e";
  // The detail of a forced kModeUnknown or kShapeRefused allocation.
  static constexpr char kForcedDetail[] = "the test refuses it";

 private:
  struct Receipt {
    v1::SettlementReceipt receipt;
    std::string node_id;
    std::string fingerprint;
  };
  // What is left of a receipt past retention.
  struct SettledRecord {
    std::string node_id;
    bool aborted = false;
  };

  // The failure Fail set for `call`, or OK.
  Status FailureOf(Call call) const;
  // The status calls that answer an E are forced to answer, if any.
  template <typename E>
  const std::optional<E>& ForcedOf() const {
    return std::get<std::optional<E>>(forced_);
  }
  // The outcome of one room of a settlement, settling it if it may be.
  lobby::SettleOutcome SettleOne(const lobby::SettleRequest& request);
  lobby::SettleOutcome ForcedOutcome(lobby::SettleStatus status,
                                     const lobby::SettleRequest& request);
  // The unreleased room that holds `player_id`, or 0.
  uint64_t RoomOf(const std::string& player_id) const;
  // Why `mode` refuses a room of `allocation`'s shape, or empty when it accepts it.
  static std::string ShapeRefusal(const v1::Mode& mode, const v1::RoomAllocation& allocation);

  mutable std::mutex mu_;
  FakeClock clock_;
  std::map<Call, Status> failures_;
  std::map<uint64_t, Status> room_failures_;
  // The status each kind of call is forced to answer, if any.
  std::tuple<std::optional<lobby::AllocateStatus>, std::optional<lobby::SettleStatus>,
             std::optional<lobby::ReleaseStatus>, std::optional<lobby::DeclareStatus>,
             std::optional<lobby::ImportStatus>, std::optional<lobby::VoidStatus>>
      forced_;
  int settle_calls_ = 0;
  uint64_t next_match_id_ = 1;

  std::map<uint64_t, lobby::AllocatedRoom> rooms_;
  std::map<uint64_t, std::string> room_modes_;
  std::map<uint64_t, Receipt> receipts_;
  std::map<uint64_t, SettledRecord> settled_records_;
  std::set<std::string> players_;
  std::map<std::string, v1::Mode> modes_;
  std::map<std::string, std::map<std::string, v1::ModeRating>> ratings_;  // by mode, then player
  std::vector<lobby::SettlementEvent> events_;  // in the order written; seq 0 until numbered
  int64_t head_ = 0;
};

}  // namespace verdict::testing
