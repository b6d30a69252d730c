#include "lobby/void_ratings.h"

#include <algorithm>
#include <tuple>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"

namespace verdict::lobby {
namespace {

// The rating of `player` in `ratings`, or the system's initial one.
rating::Rating RatingOf(const std::map<std::string, rating::Rating>& ratings,
                        const std::string& player, const rating::RatingSystem& system) {
  const auto found = ratings.find(player);
  return found == ratings.end() ? system.Initial() : found->second;
}

// The voided match's counts, taken off each of its players.
VoidedPlayer CountsOff(const HistorySeat& seat) {
  VoidedPlayer player;
  player.player_id = seat.player_id;
  if (seat.result == "aborted") return player;
  player.games = 1;
  player.wins = seat.result == "win";
  player.losses = seat.result == "loss";
  player.draws = seat.result == "draw";
  player.placements = seat.rank;
  return player;
}

// The new ratings of one match's lines (`seats`, all of one match), each player rated from
// `from` (by player id), in the order of `seats`. A match its system cannot rate, or one of a
// casual mode or ABORTED, leaves every rating as it was.
Result<std::vector<rating::Rating>> RateMatch(const rating::RatingSystem& system, bool rated,
                                              const std::vector<const HistorySeat*>& seats,
                                              const std::map<std::string, rating::Rating>& from) {
  std::vector<rating::Rating> before;
  uint32_t teams = 0;
  for (const HistorySeat* s : seats) {
    before.push_back(RatingOf(from, s->player_id, system));
    teams = std::max(teams, s->team);
  }
  const bool aborted = seats.empty() || seats.front()->result == "aborted";
  if (!rated || aborted) return before;
  std::vector<rating::PlacedTeam> placed(teams);
  std::vector<std::pair<size_t, size_t>> place;  // each line's (team, index in the team)
  for (size_t i = 0; i < seats.size(); ++i) {
    const HistorySeat& s = *seats[i];
    if (s.team == 0)
      return InvalidArgumentError("a line of match " + std::to_string(s.match_id) + " has no team");
    rating::PlacedTeam& team = placed[s.team - 1];
    team.rank = s.rank;
    place.emplace_back(s.team - 1, team.players.size());
    team.players.push_back({before[i], 1.0});
  }
  for (uint32_t t = 0; t < teams; ++t) {
    if (placed[t].players.empty()) {
      return InvalidArgumentError("match " + std::to_string(seats.front()->match_id) +
                                  " has no line of team " + std::to_string(t + 1));
    }
  }
  const uint64_t match = seats.front()->match_id;
  if (Status ok = rating::CheckRoom(system, placed); !ok.ok()) {
    spdlog::error("match={}: not rated again, its ratings kept: {}", match, ok.message());
    return before;
  }
  auto rate = system.Rate(placed);
  if (!rate.ok()) {
    spdlog::error("match={}: not rated again, its ratings kept: {}", match,
                  rate.status().ToString());
    return before;
  }
  std::vector<rating::Rating> after;
  for (const auto& [team, k] : place) after.push_back((*rate)[team][k]);
  return after;
}

// The lines of `seats` grouped by match, in match order, each match's lines in player order.
std::vector<std::vector<const HistorySeat*>> ByMatch(const std::vector<HistorySeat>& seats) {
  std::vector<const HistorySeat*> sorted;
  for (const HistorySeat& s : seats) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](const HistorySeat* a, const HistorySeat* b) {
    return std::tie(a->match_id, a->player_id) < std::tie(b->match_id, b->player_id);
  });
  std::vector<std::vector<const HistorySeat*>> matches;
  for (const HistorySeat* s : sorted) {
    if (matches.empty() || matches.back().front()->match_id != s->match_id) matches.emplace_back();
    matches.back().push_back(s);
  }
  return matches;
}

}  // namespace

Result<VoidPlan> PlanVoid(VoidPolicy policy, const rating::RatingSystem& system, bool rated,
                          const std::vector<HistorySeat>& voided,
                          const std::vector<HistorySeat>& later,
                          const std::map<std::string, rating::Rating>& current) {
  if (voided.empty()) return InvalidArgumentError("the voided match has no line");
  // Per player: where the void's history starts it (its rating before its first line of the set),
  // where that history ended before the void (`was`), and where it ends now (`now`).
  std::map<std::string, rating::Rating> was, now;
  std::map<std::string, VoidedPlayer> players;
  for (const HistorySeat& s : voided) {
    was[s.player_id] = s.after;
    now[s.player_id] = s.before;
    players[s.player_id] = CountsOff(s);
  }
  VoidPlan plan;
  if (policy == VoidPolicy::kReplay) {
    std::vector<std::vector<const HistorySeat*>> matches = ByMatch(later);
    // The negative control of the chain's invariant (tests/lobby/void_test.cc): a replay that
    // forgets the last match of its set.
    if (!matches.empty() && CheckFailpoint("void.replay_forget_one") == FailAction::kError) {
      matches.pop_back();
    }
    for (const auto& match : matches) {
      // A player first met here joins the history with the rating it had before this match, which
      // nothing in the set changed.
      for (const HistorySeat* s : match) now.try_emplace(s->player_id, s->before);
      auto after = RateMatch(system, rated, match, now);
      if (!after.ok()) return after.status();
      for (size_t i = 0; i < match.size(); ++i) {
        const HistorySeat& s = *match[i];
        const rating::Rating before = now[s.player_id];
        const rating::Rating& rated_after = (*after)[i];
        if (!(before == s.before && rated_after == s.after)) {
          plan.revised.push_back({s.match_id, s.player_id, s.before, s.after, before, rated_after});
        }
        was[s.player_id] = s.after;
        now[s.player_id] = rated_after;
      }
    }
  }
  // Each player's rating now moves by what the void changed at the end of its history: exactly
  // that end's new rating, unless something outside the history (an import) moved it since.
  for (const auto& [player, end] : now) {
    const rating::Rating at = RatingOf(current, player, system);
    const rating::Rating moved = rating::ApplyChange(at, was[player], end);
    auto [entry, added] = players.try_emplace(player);
    if (added) {
      if (moved == at) {
        players.erase(entry);
        continue;
      }
      entry->second.player_id = player;
    }
    entry->second.before = at;
    entry->second.after = moved;
    entry->second.displayed = system.Displayed(moved);
  }
  for (auto& [player, p] : players) plan.players.push_back(std::move(p));
  return plan;
}

}  // namespace verdict::lobby
