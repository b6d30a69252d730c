// Room: one battle on a battle host — its seats, the players' votes on who won, and the one
// result it hands to the ResultChannel when it finishes. RoomTable keeps rooms by id and
// releases Finished ones after they have lingered for late clients; never one whose result is
// still waiting to enter a full channel, nor one being ticked.
// Thread-safety: every Room and RoomTable method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "node/result_channel.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

// Implemented by the battle host: tells the room's connected clients that the battle ended.
class BattleEndNotifier {
 public:
  virtual ~BattleEndNotifier() = default;
  virtual void NotifyBattleEnd(const v1::BattleResult& result) = 0;
};

// Implemented by the battle host: stores the replay and returns where it is.
class ReplayStore {
 public:
  virtual ~ReplayStore() = default;
  virtual Result<std::string> WriteReplay(const v1::BattleResult& result) = 0;
};

// What every room of a host shares. Pointers are not owned and must outlive the rooms.
struct RoomContext {
  std::string node_id;
  const Clock* clock = nullptr;           // null: the system clock
  BattleEndNotifier* notifier = nullptr;  // null: nobody to tell
  ReplayStore* replays = nullptr;         // null: no replays (empty replay_path)
  ResultChannel* results = nullptr;       // required
};

class Room {
 public:
  // Undecided this long after the first report, the plurality wins (marked suspect).
  static constexpr int64_t kFallbackMs = 10'000;
  // A Finished room stays this long for late clients before it is released, counted from when
  // its result was handed to the channel (Push returned), so a room is never released while
  // the thread that finished it still waits on a full channel.
  static constexpr int64_t kLingerMs = 30'000;

  enum class State { kPlaying, kFinished };

  // `allocation` is the roster the lobby accepted (room id, node, seats).
  Room(const v1::RoomAllocation& allocation, RoomContext context);

  uint64_t room_id() const { return room_id_; }

  // Seat changes. NOT_FOUND for a player without a seat, FAILED_PRECONDITION once finished.
  // A kicked seat stays kicked. Both may decide the room (the eligible seats change).
  Status SetOnline(uint64_t player_id, bool online);
  Status Kick(uint64_t player_id);
  Status RecordStats(uint64_t player_id, uint32_t kills, uint32_t deaths, uint32_t assists,
                     int64_t score);

  // A player's report of the winning team (0 = draw); a later report replaces an earlier one.
  // Only eligible seats (online, not kicked) count. As soon as one choice has strictly more
  // than half of the eligible seats, the room finishes with it. INVALID_ARGUMENT for a team
  // the room does not have; FAILED_PRECONDITION from a kicked seat or once finished.
  Status Report(uint64_t player_id, uint32_t winner_team);

  // Applies the fallback when due: ten seconds after the first report, an undecided room
  // finishes with the plurality (suspect), or aborted with "no_consensus" on a tie.
  void Tick();

  // Ends the battle now: by majority if there is one, else as the fallback would.
  void Finish();
  // Ends the battle now as aborted, with `reason`.
  void Abort(const std::string& reason);

  State state() const;
  // The result, once finished.
  std::optional<v1::BattleResult> result() const;
  // Finished, its result handed over, and that at least kLingerMs ago.
  bool Releasable() const;
  // When it finished, on the clock's monotonic reading (0 while playing).
  int64_t finished_monotonic_ms() const;

 private:
  struct Seat {
    uint32_t team = 0;
    bool online = true;
    bool kicked = false;
    std::optional<uint32_t> vote;
    uint32_t kills = 0, deaths = 0, assists = 0;
    int64_t score = 0;
  };
  struct Decision {
    v1::Outcome outcome = v1::SETTLED;
    uint32_t winner_team = 0;
    bool suspect = false;
    std::string abort_reason;
  };

  // Under mu_: the majority decision, if the eligible votes make one.
  std::optional<Decision> MajorityLocked() const;
  // Under mu_: the fallback decision (plurality, or no_consensus on a tie).
  Decision FallbackLocked() const;
  // Marks the room finished (once) and hands the result on. Called without mu_ held.
  void Conclude(std::optional<Decision> decision);

  const uint64_t room_id_;
  const RoomContext context_;
  const Clock* clock_;
  mutable std::mutex mu_;
  std::map<uint64_t, Seat> seats_;  // by player id
  State state_ = State::kPlaying;
  // Monotonic readings (see Clock): the fallback and the linger are waits, which a step of the
  // wall clock must not stretch or cut short.
  std::optional<int64_t> first_report_ms_;
  int64_t finished_ms_ = 0;
  std::optional<int64_t> handed_over_ms_;  // when Push returned
  std::optional<v1::BattleResult> result_;
};

class RoomTable {
 public:
  explicit RoomTable(const Clock* clock = nullptr);

  // Takes ownership. ALREADY_EXISTS if a room with that id is held.
  Result<Room*> Add(std::unique_ptr<Room> room);
  // Null if unknown or released. The pointer stays valid until ReleaseDue releases it.
  Room* Find(uint64_t room_id);
  // Ticks every playing room (fallbacks). A room being ticked is pinned: ReleaseDue on another
  // thread leaves it alone until its tick returns.
  void TickAll();
  // Releases rooms that are Releasable and not pinned; returns how many.
  size_t ReleaseDue();

  size_t playing() const;
  size_t finished() const;
  // How long the oldest still-held Finished room has been finished, in ms (0 if none).
  int64_t oldest_finished_dwell_ms() const;

 private:
  struct Entry {
    std::unique_ptr<Room> room;
    int pins = 0;  // TickAll calls in progress on it
  };
  void Unpin(uint64_t room_id);

  const Clock* clock_;
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> rooms_;
};

}  // namespace verdict::node
