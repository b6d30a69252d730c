// What a battle host sees of its rooms: the interfaces it implements for them (telling clients
// the battle ended, storing the replay), how a room finishes, and RoomHandle, through which it
// feeds a room what happens in the battle. BattleNode::AddRoom creates rooms and hands out
// handles; the node owns the rooms, and releases a finished one after it has lingered for late
// clients. A handle never dangles: once its room is released (or the node is gone) every call
// answers NOT_FOUND.
// Thread-safety: handles may be copied and used from any thread; calls on one room are
// serialized by the room.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "verdict/common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

// Implemented by the battle host: tells the room's connected clients that the battle ended.
// Called once per room, when it finishes, on the thread that finishes it (see Finishing).
class BattleEndNotifier {
 public:
  virtual ~BattleEndNotifier() = default;
  virtual void NotifyBattleEnd(const v1::BattleResult& result) = 0;
};

// Implemented by the battle host: stores the replay and returns where it is. Called once per
// room, after the notifier. A failure, or a path that is not valid UTF-8 (or is over 4096
// bytes), leaves the result's replay_path empty, with a warning; the result still goes out.
class ReplayStore {
 public:
  virtual ~ReplayStore() = default;
  virtual Result<std::string> WriteReplay(const v1::BattleResult& result) = 0;
};

// Where a room's finish does its slow part: telling the clients, writing the replay, and handing
// the result to the node's bounded result channel, which WAITS while the channel is full, that
// is for as long as the outbox cannot write (a full disk: P6, results wait, they are never
// dropped).
enum class Finishing {
  // On the thread of the call that decided the room: ReportPlacements, Report, SetOnline, Kick,
  // Finish or Abort (or the node's maintenance thread, for the ten-second fallback). That call
  // may block, for as long as the disk is full; when it returns OK the result is in the channel.
  // For hosts that call rooms from worker threads.
  kOnCallingThread,
  // On the node's finishing thread: the call returns at once, and the result waits in memory
  // (in the room) while the channel is full, exactly as a blocked caller's would. For hosts that
  // call rooms from an event loop, which must never block. BattleNode::Ready() says when the outbox
  // is failing and results are held back.
  kHandedOff,
};

// How BattleNode::AddRoom sets up a room.
struct RoomOptions {
  // Told when the battle ends; null: nobody to tell. The room shares ownership, so the notifier
  // lives as long as a room may call it, whatever order the host's objects are destroyed in.
  // Default: none.
  std::shared_ptr<BattleEndNotifier> notifier;
  // Stores the replay; null: no replays (empty replay_path). Shared the same way. Default: none.
  std::shared_ptr<ReplayStore> replays;
  // Default: Finishing::kOnCallingThread.
  Finishing finishing = Finishing::kOnCallingThread;
};

enum class RoomState { kPlaying, kFinished };

class Room;  // node/room_table.h

// A host's reference to one of its rooms. Every call answers NOT_FOUND once the room has been
// released (30 s after it finished, see Room::kLingerMs), or when the handle refers to no room
// (default-constructed, or from FindRoom of an unknown id). Cheap to copy.
class RoomHandle {
 public:
  RoomHandle() = default;

  // The room's id (0 for a handle that refers to no room).
  uint64_t room_id() const { return room_id_; }
  // True while the room is held (not yet released). Another thread may release it right after.
  bool held() const;

  // Seat changes. NOT_FOUND for a player without a seat, FAILED_PRECONDITION once finished. A
  // kicked seat stays kicked. Both may decide the room (the eligible seats change), and then
  // finish it: see Finishing for where that happens and whether the call may block.
  Status SetOnline(const std::string& player_id, bool online);
  Status Kick(const std::string& player_id);
  // A player's statistics so far; INVALID_ARGUMENT for counts the lobby would refuse (over
  // 2^31 - 1).
  Status RecordStats(const std::string& player_id, uint32_t kills, uint32_t deaths,
                     uint32_t assists, int64_t score);
  // A player's report of where the teams placed: `ranks[t - 1]` is team t's rank, 1 the best,
  // equal ranks a tie ({1, 1} is a draw of two teams); a later report replaces an earlier one.
  // Only eligible seats (online, not kicked) count. As soon as one placement, the whole of it,
  // is reported by strictly more than half of the eligible seats, the room finishes with it (see
  // Finishing: this call may block). The result says the placement with `winner_team` where that
  // can (two teams: {1, 2} is 1, {2, 1} is 2, {1, 1} is 0, as before placements), else with
  // `placements`.
  // INVALID_ARGUMENT, and the seat's earlier vote stands, for a placement the lobby would refuse
  // (its own check, proto/validation.h): not one rank for each team of the room, or a rank
  // outside 1 to the number of teams. NOT_FOUND for a player without a seat. FAILED_PRECONDITION
  // from a kicked seat, once finished, or once the node is shutting down (the room then stays
  // playing and nothing is stored: the result would be lost).
  Status ReportPlacements(const std::string& player_id, const std::vector<uint32_t>& ranks);
  // The two-team shorthand of ReportPlacements: `winner_team` 1 reports {1, 2}, 2 reports
  // {2, 1}, 0 (a draw) reports {1, 1}; the same vote, and the same result. INVALID_ARGUMENT for
  // another team, and in a room of more than two teams (they report placements); otherwise as
  // ReportPlacements.
  Status Report(const std::string& player_id, uint32_t winner_team);
  // Ends the battle now: by majority if there is one, else as the fallback would (the plurality
  // placement, suspect; a tie, or no report at all, aborts with "no_consensus"). OK at once if
  // already finished. FAILED_PRECONDITION once the node is shutting down, as for Report. May block
  // (Finishing).
  Status Finish();
  // Ends the battle now as aborted, with `reason` (valid UTF-8, at most 4096 bytes, else
  // INVALID_ARGUMENT and the room plays on). OK at once if already finished.
  // FAILED_PRECONDITION once the node is shutting down. May block (Finishing).
  Status Abort(const std::string& reason);

  Result<RoomState> state() const;
  // The result once finished (its replay_path once the replay is written); nullopt while
  // playing, or once released.
  std::optional<v1::BattleResult> result() const;

 private:
  friend class RoomTable;
  RoomHandle(uint64_t room_id, std::weak_ptr<Room> room);
  // The room, kept alive for the call; NOT_FOUND once released.
  Result<std::shared_ptr<Room>> Lock() const;

  uint64_t room_id_ = 0;
  std::weak_ptr<Room> room_;
};

}  // namespace verdict::node
