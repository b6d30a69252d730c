// What every system's Predict shares: the check of a proposed match, and a Prediction made from
// the probabilities that each team beats each other one. Used by the systems (elo.cc,
// glicko2.cc, openskill_prediction.cc) only. Plain functions: any thread.
#pragma once

#include <vector>

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating::internal {

// OK if `system` can predict `teams`: what CheckRoom asks of a room (Accepts() of the sizes, every
// rating passing CheckRating), with the same messages. INVALID_ARGUMENT otherwise.
Status CheckProposal(const RatingSystem& system, const std::vector<std::vector<Rating>>& teams);

// A prediction's `win` and `rank` from `beats`, where beats[i][j] (i != j) is the probability that
// team i beats team j: each team's mean over its opponents, normalized to sum to 1 (as
// openskill.py 6.2.0's predict_win does for more than two teams; for two, win is beats[0][1]
// and beats[1][0] up to rounding), ranked by it. `draw` and `quality` are left 0.
Prediction FromPairwise(const std::vector<std::vector<double>>& beats);

// The quality of a match whose system has no model of a draw (Elo, Glicko-2): the mean over
// pairs of teams of 1 - |beats[i][j] - beats[j][i]|, which for two teams is 2 min(p, 1 - p): 1 at
// even odds, toward 0 as one side becomes certain to win.
double EvenOddsQuality(const std::vector<std::vector<double>>& beats);

}  // namespace verdict::rating::internal
