#include "lobby/rating/inactivity.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace verdict::rating::internal {

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

}  // namespace verdict::rating::internal
