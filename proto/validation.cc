#include "proto/validation.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string_view>

namespace verdict::wire {
namespace {

constexpr uint32_t kMaxStat = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxModeNameBytes = 64;

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

Status CheckString(const std::string& s, const char* field) {
  if (s.size() > kMaxStringBytes) {
    return InvalidArgumentError(std::string(field) + " is longer than " +
                                std::to_string(kMaxStringBytes) + " bytes");
  }
  if (HasNul(s)) return InvalidArgumentError(std::string(field) + " contains a NUL byte");
  if (!IsValidUtf8(s)) return InvalidArgumentError(std::string(field) + " is not valid UTF-8");
  return Status::Ok();
}

Status CheckRoomId(uint64_t room_id) {
  if (room_id == 0) return InvalidArgumentError("room_id must be a positive integer");
  if (room_id > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("room_id is out of range");
  }
  return Status::Ok();
}

// "players[3]: " or "seats[0]: ".
std::string At(const char* what, int i) {
  return std::string(what) + "[" + std::to_string(i) + "]: ";
}

// The teams of a roster (`team_of(i)` for i < n, what[i] naming each): numbered 1 to T with at
// least one member each, 2 <= T <= kMaxTeams. Returns T, or 0 after setting `error`.
template <typename TeamOf>
uint32_t CountTeams(int n, TeamOf team_of, const char* what, Status* error) {
  uint32_t teams = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t team = team_of(i);
    if (team == 0 || team > kMaxTeams) {
      *error = InvalidArgumentError(At(what, i) + "team must be between 1 and " +
                                    std::to_string(kMaxTeams) + ", got " + std::to_string(team));
      return 0;
    }
    teams = std::max(teams, team);
  }
  std::vector<bool> seated(teams + 1, false);
  for (int i = 0; i < n; ++i) seated[team_of(i)] = true;
  for (uint32_t t = 1; t <= teams; ++t) {
    if (!seated[t]) {
      *error =
          InvalidArgumentError("team " + std::to_string(t) + " is empty: teams are numbered 1 to " +
                               std::to_string(teams) + ", each with a player");
      return 0;
    }
  }
  if (teams < 2) {
    *error = InvalidArgumentError(std::string(what) + ": a room needs at least two teams");
    return 0;
  }
  return teams;
}

// A SETTLED result's placement of its `teams` teams.
Status CheckPlacements(const v1::BattleResult& r, uint32_t teams) {
  if (r.placements_size() == 0) {
    if (teams != 2) {
      return InvalidArgumentError("placements: a room of " + std::to_string(teams) +
                                  " teams is placed by placements, one rank per team "
                                  "(winner_team is for two teams)");
    }
    if (r.winner_team() > 2) {
      return InvalidArgumentError("winner_team must be 0 (a draw), 1 or 2, got " +
                                  std::to_string(r.winner_team()));
    }
    if (!r.has_winner_team()) {
      return InvalidArgumentError(
          "winner_team: a SETTLED result names its placements or its winner_team (0 for a "
          "draw); a result naming neither has no winner, and is not a draw");
    }
    return Status::Ok();
  }
  // Even winner_team 0: a draw beside placements that name a winner contradicts them.
  if (r.has_winner_team()) {
    return InvalidArgumentError("winner_team and placements are both given; give one");
  }
  if (static_cast<uint32_t>(r.placements_size()) != teams) {
    return InvalidArgumentError("placements: " + std::to_string(r.placements_size()) +
                                " given for " + std::to_string(teams) +
                                " teams: every team is ranked exactly once");
  }
  std::vector<bool> ranked(teams + 1, false);
  uint32_t best = std::numeric_limits<uint32_t>::max();
  for (int i = 0; i < r.placements_size(); ++i) {
    const v1::TeamPlacement& p = r.placements(i);
    if (p.team() == 0 || p.team() > teams) {
      return InvalidArgumentError(At("placements", i) + "team " + std::to_string(p.team()) +
                                  " is not a team of the room (1 to " + std::to_string(teams) +
                                  ")");
    }
    if (ranked[p.team()]) {
      return InvalidArgumentError(At("placements", i) + "team " + std::to_string(p.team()) +
                                  " is ranked twice");
    }
    ranked[p.team()] = true;
    if (p.rank() == 0 || p.rank() > teams) {
      return InvalidArgumentError(At("placements", i) + "rank must be between 1 and " +
                                  std::to_string(teams) + ", got " + std::to_string(p.rank()));
    }
    best = std::min(best, p.rank());
  }
  // Rank 1 is the winners' (a win in the players' counts and the event): placements that give it
  // to nobody would be rated by their order yet counted as a loss for everyone.
  if (best != 1) {
    return InvalidArgumentError("placements: no team has rank 1; the best team's rank is 1, " +
                                std::string("got ") + std::to_string(best));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateNodeId(const std::string& node_id) {
  if (node_id.empty()) return InvalidArgumentError("node_id is required");
  return CheckString(node_id, "node_id");
}

Status ValidatePlayerId(std::string_view id) {
  if (id.empty()) return InvalidArgumentError("player_id is required (1 to 64 bytes of UTF-8)");
  if (id.size() > kMaxPlayerIdBytes) {
    return InvalidArgumentError("player_id is " + std::to_string(id.size()) +
                                " bytes, more than the 64 a player id may have");
  }
  if (HasNul(id)) return InvalidArgumentError("player_id contains a NUL byte");
  if (!IsValidUtf8(id)) return InvalidArgumentError("player_id is not valid UTF-8");
  return Status::Ok();
}

Status ValidateModeName(std::string_view mode) {
  const auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  if (mode.empty() || mode.size() > kMaxModeNameBytes ||
      !std::all_of(mode.begin(), mode.end(), allowed) || mode.front() == '.' ||
      mode.front() == '_' || mode.front() == '-') {
    return InvalidArgumentError(
        "mode must be 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with "
        "a letter or a digit, got \"" +
        ValidUtf8(mode.substr(0, kMaxModeNameBytes)) + "\"");
  }
  return Status::Ok();
}

Status ValidatePlayerResult(const v1::PlayerResult& p) {
  VERDICT_RETURN_IF_ERROR(ValidatePlayerId(p.player_id()));
  if (p.kills() > kMaxStat || p.deaths() > kMaxStat || p.assists() > kMaxStat) {
    return InvalidArgumentError("player statistics are out of range");
  }
  if (p.has_share() && !(p.share() >= 0.0 && p.share() <= 1.0)) {
    return InvalidArgumentError("share must be between 0 and 1 (the share of the battle played)");
  }
  return Status::Ok();
}

Status ValidateAllocation(const v1::RoomAllocation& a) {
  VERDICT_RETURN_IF_ERROR(CheckRoomId(a.room_id()));
  VERDICT_RETURN_IF_ERROR(ValidateNodeId(a.node_id()));
  if (!a.mode().empty()) VERDICT_RETURN_IF_ERROR(ValidateModeName(a.mode()));
  if (a.seats_size() < 2 || static_cast<size_t>(a.seats_size()) > kMaxPlayers) {
    return InvalidArgumentError("seats: a room needs between 2 and " + std::to_string(kMaxPlayers) +
                                " seats, got " + std::to_string(a.seats_size()));
  }
  std::set<std::string_view> players;
  for (int i = 0; i < a.seats_size(); ++i) {
    const v1::Seat& seat = a.seats(i);
    if (Status id = ValidatePlayerId(seat.player_id()); !id.ok()) {
      return InvalidArgumentError(At("seats", i) + id.message());
    }
    if (!players.insert(seat.player_id()).second) {
      return InvalidArgumentError(At("seats", i) + "player " + seat.player_id() + " has two seats");
    }
  }
  Status teams;
  CountTeams(
      a.seats_size(), [&a](int i) { return a.seats(i).team(); }, "seats", &teams);
  return teams;
}

Status ValidateResult(const v1::BattleResult& r) {
  VERDICT_RETURN_IF_ERROR(CheckRoomId(r.room_id()));
  if (r.outcome() != v1::SETTLED && r.outcome() != v1::ABORTED) {
    return InvalidArgumentError("outcome must be SETTLED or ABORTED");
  }
  if (r.ended_at_ms() < 0) return InvalidArgumentError("ended_at_ms must not be negative");
  VERDICT_RETURN_IF_ERROR(CheckString(r.node_id(), "node_id"));
  VERDICT_RETURN_IF_ERROR(CheckString(r.replay_path(), "replay_path"));
  VERDICT_RETURN_IF_ERROR(CheckString(r.abort_reason(), "abort_reason"));
  if (r.players_size() < 2 || static_cast<size_t>(r.players_size()) > kMaxPlayers) {
    return InvalidArgumentError("players: a result needs between 2 and " +
                                std::to_string(kMaxPlayers) + " players, got " +
                                std::to_string(r.players_size()));
  }
  std::set<std::string_view> seen;
  for (int i = 0; i < r.players_size(); ++i) {
    const v1::PlayerResult& p = r.players(i);
    if (Status valid = ValidatePlayerResult(p); !valid.ok()) {
      return InvalidArgumentError(At("players", i) + valid.message());
    }
    if (!seen.insert(p.player_id()).second) {
      return InvalidArgumentError(At("players", i) + "player " + p.player_id() + " appears twice");
    }
  }
  Status shape;
  const uint32_t teams = CountTeams(
      r.players_size(), [&r](int i) { return r.players(i).team(); }, "players", &shape);
  VERDICT_RETURN_IF_ERROR(shape);
  if (r.outcome() == v1::ABORTED) {
    if (r.winner_team() != 0 || r.placements_size() > 0) {
      return InvalidArgumentError(
          "an ABORTED result places no team (no winner_team, no placements)");
    }
    return Status::Ok();
  }
  return CheckPlacements(r, teams);
}

std::vector<uint32_t> RanksOf(const v1::BattleResult& r) {
  if (r.outcome() != v1::SETTLED) return {};
  if (r.placements_size() > 0) {
    std::vector<uint32_t> ranks(r.placements_size(), 0);
    for (const v1::TeamPlacement& p : r.placements()) {
      if (p.team() >= 1 && p.team() <= ranks.size()) ranks[p.team() - 1] = p.rank();
    }
    return ranks;
  }
  switch (r.winner_team()) {
    case 1:
      return {1, 2};
    case 2:
      return {2, 1};
    default:
      return {1, 1};
  }
}

}  // namespace verdict::wire
