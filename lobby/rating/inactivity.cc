#include "lobby/rating/inactivity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace verdict::rating::internal {
namespace {

// A bound for a message, as written in the source: 1000000, not 1e+06.
std::string Bound(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.15g", value);
  return buffer;
}

}  // namespace

Status CheckIdle(const RatingSystem& system, const Rating& rating, double idle_days) {
  if (!(idle_days >= 0) || !std::isfinite(idle_days)) {
    return InvalidArgumentError("idle_days: must be a finite number >= 0");
  }
  if (Status status = system.CheckRating(rating); !status.ok()) {
    return InvalidArgumentError("rating: " + status.message());
  }
  return Status::Ok();
}

double AgedDeviation(double deviation, double added_variance, double cap) {
  // An added variance that overflows gives infinity, which the cap stops.
  const double grown = std::sqrt(deviation * deviation + added_variance);
  return std::max(deviation, std::min(grown, cap));
}

Status CheckSeasonReset(const RatingSystem& system, const Rating& rating, const SeasonReset& reset,
                        bool uses_deviation) {
  if (Status status = system.CheckRating(rating); !status.ok()) {
    return InvalidArgumentError("rating: " + status.message());
  }
  if (!(reset.keep >= 0 && reset.keep <= 1)) {
    return InvalidArgumentError("keep: must be a number from 0 to 1");
  }
  if (!(std::abs(reset.mean) <= kMaxRatingValue)) {
    return InvalidArgumentError("mean: must be a number from -" + Bound(kMaxRatingValue) + " to " +
                                Bound(kMaxRatingValue));
  }
  if (uses_deviation &&
      !(reset.deviation >= kMinUncertainty && reset.deviation <= kMaxUncertainty)) {
    return InvalidArgumentError("deviation: must be a number from " + Bound(kMinUncertainty) +
                                " to " + Bound(kMaxUncertainty));
  }
  return Status::Ok();
}

double ResetValue(double value, const SeasonReset& reset) {
  // Clamped to the two ends: the rounding of the arithmetic must not carry a value at a bound of
  // rating_system.h past it (keep 1 can give value + 1 ulp).
  const double moved = reset.mean + reset.keep * (value - reset.mean);
  return std::clamp(moved, std::min(value, reset.mean), std::max(value, reset.mean));
}

}  // namespace verdict::rating::internal
