#include "proto/validation.h"

#include <limits>
#include <set>

#include "proto/wire.h"

namespace verdict::wire {
namespace {

constexpr uint32_t kMaxStat = std::numeric_limits<int32_t>::max();

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

Status CheckString(const std::string& s, const char* field) {
  if (s.size() > kMaxStringBytes) {
    return InvalidArgumentError(std::string(field) + " is longer than " +
                                std::to_string(kMaxStringBytes) + " bytes");
  }
  if (HasNul(s)) return InvalidArgumentError(std::string(field) + " contains a NUL byte");
  if (!IsValidUtf8(s)) return InvalidArgumentError(std::string(field) + " is not valid UTF-8");
  return Status::Ok();
}

}  // namespace

Status ValidateNodeId(const std::string& node_id) {
  if (node_id.empty()) return InvalidArgumentError("node_id is required");
  return CheckString(node_id, "node_id");
}

Status ValidatePlayerResult(const v1::PlayerResult& p) {
  if (p.player_id() == 0 ||
      p.player_id() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("player_id must be a positive 63-bit integer");
  }
  if (p.team() != 1 && p.team() != 2) {
    return InvalidArgumentError("team must be 1 or 2, got " + std::to_string(p.team()));
  }
  if (p.kills() > kMaxStat || p.deaths() > kMaxStat || p.assists() > kMaxStat) {
    return InvalidArgumentError("player statistics are out of range");
  }
  return Status::Ok();
}

Status ValidateAllocation(const v1::RoomAllocation& a) {
  if (a.room_id() == 0) return InvalidArgumentError("room_id must be a positive integer");
  if (a.room_id() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("room_id is out of range");
  }
  VERDICT_RETURN_IF_ERROR(ValidateNodeId(a.node_id()));
  if (a.seats_size() < 2 || static_cast<size_t>(a.seats_size()) > kMaxPlayers) {
    return InvalidArgumentError("a room needs between 2 and 100 seats");
  }
  std::set<uint64_t> players;
  int per_team[3] = {0, 0, 0};
  for (const auto& seat : a.seats()) {
    if (seat.player_id() == 0) return InvalidArgumentError("player_id must be positive");
    if (seat.player_id() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError("player_id is out of range");
    }
    if (seat.team() != 1 && seat.team() != 2) {
      return InvalidArgumentError("team must be 1 or 2, got " + std::to_string(seat.team()));
    }
    if (!players.insert(seat.player_id()).second) {
      return InvalidArgumentError("player " + std::to_string(seat.player_id()) + " has two seats");
    }
    ++per_team[seat.team()];
  }
  if (per_team[1] != per_team[2]) {
    return InvalidArgumentError("teams must be the same size, got " + std::to_string(per_team[1]) +
                                " and " + std::to_string(per_team[2]));
  }
  return Status::Ok();
}

Status ValidateResult(const v1::BattleResult& r) {
  if (r.room_id() == 0) return InvalidArgumentError("room_id must be a positive integer");
  if (r.room_id() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("room_id is out of range");
  }
  if (r.outcome() != v1::SETTLED && r.outcome() != v1::ABORTED) {
    return InvalidArgumentError("outcome must be SETTLED or ABORTED");
  }
  if (r.winner_team() > 2) return InvalidArgumentError("winner_team must be 0, 1 or 2");
  if (r.outcome() == v1::ABORTED && r.winner_team() != 0) {
    return InvalidArgumentError("an ABORTED result has winner_team 0");
  }
  if (r.ended_at_ms() < 0) return InvalidArgumentError("ended_at_ms must not be negative");
  VERDICT_RETURN_IF_ERROR(CheckString(r.node_id(), "node_id"));
  VERDICT_RETURN_IF_ERROR(CheckString(r.replay_path(), "replay_path"));
  VERDICT_RETURN_IF_ERROR(CheckString(r.abort_reason(), "abort_reason"));
  if (r.players_size() < 2 || static_cast<size_t>(r.players_size()) > kMaxPlayers) {
    return InvalidArgumentError("a result needs between 2 and 100 players");
  }
  std::set<uint64_t> seen;
  bool teams[3] = {false, false, false};
  for (const auto& p : r.players()) {
    VERDICT_RETURN_IF_ERROR(ValidatePlayerResult(p));
    if (!seen.insert(p.player_id()).second) {
      return InvalidArgumentError("player " + std::to_string(p.player_id()) + " appears twice");
    }
    teams[p.team()] = true;
  }
  if (!teams[1] || !teams[2]) return InvalidArgumentError("both teams need players");
  return Status::Ok();
}

}  // namespace verdict::wire
