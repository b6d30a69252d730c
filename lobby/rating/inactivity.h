// What a rating does between matches, the parts every system shares: the checks of
// RatingSystem::Idle and RatingSystem::ResetForSeason and the growth of a deviation with time.
// Used by the systems (rating_system.cc, openskill.cc, glicko2.cc) only. Plain functions: any
// thread.
#pragma once

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating::internal {

// OK if `system` can age `rating` by `idle_days`: the days a finite number >= 0, the rating
// passing the system's CheckRating. INVALID_ARGUMENT naming "idle_days" or "rating" otherwise.
Status CheckIdle(const RatingSystem& system, const Rating& rating, double idle_days);

// A deviation after time added `added_variance` to its square: sqrt(deviation^2 + added), no
// higher than `cap` (a new player's deviation: idling never makes a player less known than one
// who never played), and never lower than `deviation` (one imported above the cap stays).
double AgedDeviation(double deviation, double added_variance, double cap);

// OK if `system` can reset `rating` by `reset`: the rating passing CheckRating, reset.keep in
// [0, 1], reset.mean within +-kMaxRatingValue, and, when `uses_deviation`, reset.deviation from
// kMinUncertainty to kMaxUncertainty. INVALID_ARGUMENT naming the field otherwise.
Status CheckSeasonReset(const RatingSystem& system, const Rating& rating, const SeasonReset& reset,
                        bool uses_deviation);

// mean + keep (value - mean), kept between `value` and `mean`: within the bounds whenever they
// are.
double ResetValue(double value, const SeasonReset& reset);

}  // namespace verdict::rating::internal
