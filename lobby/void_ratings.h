// The rating step of a void (docs/design.md §5, "Voiding a match"): between the statements that
// read the affected history and ratings under the players' locks and those that write, what each
// player's rating and counts become, by the void's policy:
//   compensate  each player of the voided match gets the inverse of its change, applied to its
//               rating now by the compensation rule (rating::ApplyChange, before and after
//               swapped); later matches stand;
//   replay      the later matches of the affected set are rated again in match order, each from
//               the ratings the ones before it now leave, starting where each player stood before
//               its first match of the set: as if the voided match had never been played.
// Either way the voided match's players lose its counts. Called by the PostgreSQL store's void
// (lobby/void_transaction.h). Pure functions: any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "lobby/rating/rating_system.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

// One player's line of a match, as the history (match_players) holds it.
struct HistorySeat {
  uint64_t match_id = 0;
  std::string player_id;
  uint32_t team = 0;
  uint32_t rank = 0;      // its team's placement; 0 in an ABORTED match
  std::string result;     // "win", "loss", "draw" or "aborted"
  rating::Rating before;  // the player's rating in the mode before the match
  rating::Rating after;   // and after it
};

// A line of a later match that a replay rated again: its values before the void and now.
struct RevisedSeat {
  uint64_t match_id = 0;
  std::string player_id;
  rating::Rating old_before, old_after;
  rating::Rating before, after;
};

// What a void does to one player in the mode.
struct VoidedPlayer {
  std::string player_id;
  rating::Rating before;  // its rating when voided
  rating::Rating after;   // and after the void
  double displayed = 0;   // after's, as the ladder orders by
  // What the void takes off its counts: the voided match's game, win, loss or draw and rank.
  int games = 0, wins = 0, losses = 0, draws = 0;
  int64_t placements = 0;
};

struct VoidPlan {
  std::vector<VoidedPlayer> players;  // every player whose rating or counts move, by player id
  std::vector<RevisedSeat> revised;   // replay: the lines whose values changed, in match order
};

// What the void of the match whose lines are `voided` does, by `policy`, in a mode of `system`
// (`rated`: false for a casual mode, which moves no rating). `later`: for a replay, the lines of
// every later match of the affected set, in any order (empty for compensate). `current`: each
// affected player's rating now, by player id, read under its lock; a player without one is taken
// at system.Initial(). A later match that its system cannot rate (rating::CheckRoom, or a bounded
// iteration at its bound) keeps its players' ratings, as its settlement did. INVALID_ARGUMENT for
// lines that are not a match (no line of the voided match, or a team without a line).
Result<VoidPlan> PlanVoid(VoidPolicy policy, const rating::RatingSystem& system, bool rated,
                          const std::vector<HistorySeat>& voided,
                          const std::vector<HistorySeat>& later,
                          const std::map<std::string, rating::Rating>& current);

}  // namespace verdict::lobby
