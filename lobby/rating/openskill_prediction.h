// OpenSkill's predictions (RatingSystem::Predict of the "openskill" system, openskill.h says what
// it computes): kept beside the system's rating step rather than in it, the formulas being
// separate from Rate's. Used by openskill.cc only. Plain functions: any thread.
#pragma once

#include <vector>

#include "lobby/rating/rating_system.h"

namespace verdict::rating::internal {

// The prediction of a match between `teams` (each at least one rating, at least two teams, every
// rating passing the system's CheckRating) under performance spread `beta`.
Prediction PredictWengLin(const std::vector<std::vector<Rating>>& teams, double beta);

}  // namespace verdict::rating::internal
