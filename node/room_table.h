// Room: one battle on a battle host — its seats, the players' votes on how the teams placed, and
// the one result it hands to the ResultChannel when it finishes. RoomTable keeps a node's rooms by
// id, hands hosts RoomHandles to them (node/room.h), and releases Finished rooms after they have
// lingered for late clients. Rooms are shared: a room is freed only once the table has released
// it and no call on it (a host's, a tick, a handed-off finish) is still running.
// RoomFinisher runs the slow end of handed-off finishes (Finishing::kHandedOff) on a thread of
// its own.
// Internal to the node (BattleNode owns the table, the finisher and the channel); not installed.
// Thread-safety: every Room, RoomTable and RoomFinisher method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "node/room.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

class ResultChannel;

// Runs handed-off finishes one after another on its own thread, so that the call that decided
// a room returns at once while the finish waits on a full channel.
class RoomFinisher {
 public:
  RoomFinisher();
  ~RoomFinisher();  // Stop()
  RoomFinisher(const RoomFinisher&) = delete;
  RoomFinisher& operator=(const RoomFinisher&) = delete;

  // Queues `finish`; false once stopped (the caller runs it itself).
  bool Run(std::function<void()> finish);
  // Waits until nothing is queued or running, or until `deadline`; false on the deadline.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  // Refuses further work, runs what is queued, and joins. Idempotent.
  void Stop();
  // Finishes queued or running.
  size_t unfinished() const;

 private:
  void Loop();

  mutable Mutex mu_;
  CondVar changed_{&mu_};
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  size_t running_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// What every room of a host shares, and what it was given by AddRoom.
struct RoomContext {
  std::string node_id;
  const Clock* clock = nullptr;                 // null: the system clock; must outlive the room
  std::shared_ptr<BattleEndNotifier> notifier;  // null: nobody to tell
  std::shared_ptr<ReplayStore> replays;         // null: no replays (empty replay_path)
  ResultChannel* results = nullptr;             // required; must outlive the room's finish
  RoomFinisher* finisher = nullptr;             // null: finish on the calling thread
};

class Room : public std::enable_shared_from_this<Room> {
 public:
  using State = RoomState;

  // Undecided this long after the first report, the plurality placement wins (marked suspect).
  static constexpr int64_t kFallbackMs = 10'000;
  // A Finished room stays this long for late clients before it is released, counted from when
  // its result was handed to the channel (Push returned).
  static constexpr int64_t kLingerMs = 30'000;

  // A room for `allocation`, the roster the lobby accepted. INVALID_ARGUMENT unless the
  // allocation passes the lobby's own rules (wire::ValidateAllocation: a positive room id, 2 to
  // 200 seats on teams numbered 1 to T, 2 <= T <= 100, each with a seat, no player twice, a valid
  // node id) and names context.node_id; nothing the room could finish with would be settled
  // otherwise.
  static Result<std::shared_ptr<Room>> Create(const v1::RoomAllocation& allocation,
                                              RoomContext context);
  Room(const Room&) = delete;
  Room& operator=(const Room&) = delete;

  uint64_t room_id() const { return room_id_; }

  // As RoomHandle's (node/room.h).
  Status SetOnline(const std::string& player_id, bool online);
  Status Kick(const std::string& player_id);
  Status RecordStats(const std::string& player_id, uint32_t kills, uint32_t deaths,
                     uint32_t assists, int64_t score);
  Status ReportPlacements(const std::string& player_id, const std::vector<uint32_t>& ranks);
  Status Report(const std::string& player_id, uint32_t winner_team);
  Status Finish();
  Status Abort(const std::string& reason);

  // Applies the fallback when due: ten seconds after the first report, an undecided room
  // finishes with the plurality placement (suspect), or aborted with "no_consensus" on a tie. The
  // node's maintenance thread calls it every second.
  void Tick();

  State state() const;
  std::optional<v1::BattleResult> result() const;
  // Finished, its result handed over, and that at least kLingerMs ago.
  bool Releasable() const;
  // When it finished, on the clock's monotonic reading (0 while playing).
  int64_t finished_monotonic_ms() const;

 private:
  // How the teams placed: team t's rank at index t - 1 (wire::RanksOf's form). Votes compare
  // whole placements.
  using Placement = std::vector<uint32_t>;
  struct Seat {
    uint32_t team = 0;
    bool online = true;
    bool kicked = false;
    std::optional<Placement> vote;
    uint32_t kills = 0, deaths = 0, assists = 0;
    int64_t score = 0;
  };
  struct Decision {
    v1::Outcome outcome = v1::SETTLED;
    Placement placement;  // SETTLED only
    bool suspect = false;
    std::string abort_reason;
  };

  Room(const v1::RoomAllocation& allocation, RoomContext context);

  // Records the vote of `player_id` for the placement `stated` says (its winner_team or its
  // placements, nothing else set), if the lobby would take a result of this room that says it,
  // and finishes the room if that makes a majority.
  Status Vote(const std::string& player_id, const v1::BattleResult& stated) EXCLUDES(mu_);
  // The majority decision, if the eligible votes make one.
  std::optional<Decision> MajorityLocked() const REQUIRES(mu_);
  // The fallback decision (plurality, or no_consensus on a tie).
  Decision FallbackLocked() const REQUIRES(mu_);
  // The room's id, node and players as they stand: a result that does not yet say how it ended.
  v1::BattleResult RosterLocked() const REQUIRES(mu_);
  // The result of `decision` as it stands (no replay yet).
  v1::BattleResult ResultLocked(const Decision& decision) const REQUIRES(mu_);
  // Marks the room finished (once) and hands its result on, here or through the finisher.
  // FAILED_PRECONDITION if the node no longer takes results, INVALID_ARGUMENT if the result
  // would be refused (the room then plays on).
  Status Conclude(const Decision& decision) EXCLUDES(mu_);
  // The slow end of a finish: the notifier, the replay, and Push, which waits while the channel
  // is full. The Push's refusal if the node shut down meanwhile.
  Status HandOver(v1::BattleResult result);

  const uint64_t room_id_;
  const RoomContext context_;
  const Clock* clock_;
  mutable Mutex mu_;
  std::map<std::string, Seat> seats_ GUARDED_BY(mu_);  // by player id
  State state_ GUARDED_BY(mu_) = State::kPlaying;
  // Monotonic readings (see Clock): the fallback and the linger are waits, which a step of the
  // wall clock must not stretch or cut short.
  std::optional<int64_t> first_report_ms_ GUARDED_BY(mu_);
  int64_t finished_ms_ GUARDED_BY(mu_) = 0;
  std::optional<int64_t> handed_over_ms_ GUARDED_BY(mu_);  // when Push returned
  std::optional<v1::BattleResult> result_ GUARDED_BY(mu_);
};

class RoomTable {
 public:
  explicit RoomTable(const Clock* clock = nullptr);

  // Creates the room (Room::Create's checks) and holds it. INVALID_ARGUMENT as for Create,
  // ALREADY_EXISTS if a room with that id is held.
  Result<RoomHandle> Add(const v1::RoomAllocation& allocation, RoomContext context);
  // A handle to the room; one that answers NOT_FOUND if the id is unknown or released.
  RoomHandle Find(uint64_t room_id) const;
  // Ticks every playing room (fallbacks), outside the table's lock.
  void TickAll();
  // Releases rooms that are Releasable; returns how many. A call still running on one keeps it
  // alive until it returns; its handles answer NOT_FOUND from now on.
  size_t ReleaseDue();

  size_t playing() const;
  size_t finished() const;
  // How long the oldest still-held Finished room has been finished, in ms (0 if none).
  int64_t oldest_finished_dwell_ms() const;

 private:
  const Clock* clock_;
  mutable Mutex mu_;
  std::map<uint64_t, std::shared_ptr<Room>> rooms_ GUARDED_BY(mu_);
};

}  // namespace verdict::node
