#include "lobby/rating/checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace verdict::rating::internal {
namespace {

// A value given, in the fewest digits that read back as it: 1e-30, not 1.0000000000000001e-30.
std::string Number(double value) {
  char buffer[32];
  for (const char* format : {"%.15g", "%.16g", "%.17g"}) {
    std::snprintf(buffer, sizeof buffer, format, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

// A bound, as written in the source: 0.01, not 0.010000000000000000208.
std::string Bound(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.15g", value);
  return buffer;
}

// What `range` asks of a value, for the message: "must be > 0 and <= 1000"; empty if `value` is
// in it.
std::string Violation(double value, const ParameterRange& range) {
  const bool above = range.least_excluded ? value > range.least : value >= range.least;
  const bool below = range.most_excluded ? value < range.most : value <= range.most;
  if (std::isfinite(value) && above && below && (!range.whole || value == std::trunc(value))) {
    return {};
  }
  return std::string("must be ") + (range.whole ? "a whole number " : "a number ") +
         (range.least_excluded ? "> " : ">= ") + Bound(range.least) +
         (range.most_excluded ? " and < " : " and <= ") + Bound(range.most);
}

}  // namespace

ParameterReader::ParameterReader(const SystemSpec& spec, Declaration declaration)
    : spec_(spec), declaration_(declaration) {
  filled_.system = spec.system;
  filled_.model = spec.model;
}

void ParameterReader::Read(std::string_view name, double& value, const ParameterRange& range) {
  read_.emplace_back(name);
  const auto given = spec_.parameters.find(std::string(name));
  if (given != spec_.parameters.end()) value = given->second;
  filled_.parameters[std::string(name)] = value;
  Check(name, value, range);
}

void ParameterReader::Check(std::string_view name, double value, const ParameterRange& range) {
  const ParameterRange any_finite{.least = -std::numeric_limits<double>::max(),
                                  .most = std::numeric_limits<double>::max()};
  const ParameterRange& within = declaration_ == Declaration::kNew ? range : any_finite;
  if (const auto violation = Violation(value, within); !violation.empty() && first_error_.ok()) {
    first_error_ =
        InvalidArgumentError("parameters." + std::string(name) + ": " + spec_.system + "'s " +
                             std::string(name) + " " + violation + ", got " + Number(value));
  }
}

void ParameterReader::ReadIfGiven(std::string_view name, double& value,
                                  const ParameterRange& range) {
  read_.emplace_back(name);
  const auto given = spec_.parameters.find(std::string(name));
  if (given == spec_.parameters.end()) return;
  value = given->second;
  filled_.parameters[std::string(name)] = value;
  Check(name, value, range);
}

Result<SystemSpec> ParameterReader::Finish() const {
  if (!first_error_.ok()) return first_error_;
  for (const auto& [name, value] : spec_.parameters) {
    if (std::find(read_.begin(), read_.end(), name) != read_.end()) continue;
    std::string known;
    for (const auto& read : read_) known += (known.empty() ? "" : ", ") + read;
    return InvalidArgumentError("parameters." + name + ": " + spec_.system +
                                " has no such parameter (it has " + known + ")");
  }
  return filled_;
}

Status CheckNoModel(const SystemSpec& spec) {
  if (spec.model.empty()) return Status::Ok();
  return InvalidArgumentError("model: " + spec.system + " has no models, got \"" + spec.model +
                              "\"");
}

Status CheckAnyTeams(std::string_view system, const std::vector<size_t>& team_sizes) {
  if (team_sizes.size() < 2) {
    return InvalidArgumentError(std::string(system) + " rates at least two teams");
  }
  for (size_t t = 0; t < team_sizes.size(); ++t) {
    if (team_sizes[t] == 0) {
      return InvalidArgumentError("team " + std::to_string(t + 1) + " has no players");
    }
  }
  return Status::Ok();
}

Status CheckBoundedRating(const Rating& rating) {
  if (!(std::abs(rating.value) <= kMaxRatingValue)) {
    return InvalidArgumentError("value: must be a number from -" + Bound(kMaxRatingValue) + " to " +
                                Bound(kMaxRatingValue));
  }
  if (!(rating.deviation >= 0 && rating.deviation <= kMaxUncertainty)) {
    return InvalidArgumentError("deviation: must be a number from 0 to " + Bound(kMaxUncertainty));
  }
  if (!(rating.volatility >= 0 && rating.volatility <= kMaxUncertainty)) {
    return InvalidArgumentError("volatility: must be a number from 0 to " + Bound(kMaxUncertainty));
  }
  return Status::Ok();
}

Status CheckUncertainty(std::string_view field, std::string_view what, double value) {
  if (value >= kMinUncertainty) return Status::Ok();
  return InvalidArgumentError(std::string(field) + ": " + std::string(what) +
                              " must be >= " + Bound(kMinUncertainty));
}

Rating Bounded(const Rating& computed, const Rating& before, RatingShape shape) {
  if (!std::isfinite(computed.value) || !std::isfinite(computed.deviation) ||
      !std::isfinite(computed.volatility)) {
    return before;
  }
  Rating bounded = computed;
  bounded.value = std::clamp(computed.value, -kMaxRatingValue, kMaxRatingValue);
  if (shape.deviation) {
    bounded.deviation = std::clamp(computed.deviation, kMinUncertainty, kMaxUncertainty);
  }
  if (shape.volatility) {
    bounded.volatility = std::clamp(computed.volatility, kMinUncertainty, kMaxUncertainty);
  }
  return bounded;
}

namespace {

double MovedVariance(double before, double full, double share) {
  return std::sqrt(std::max(0.0, before * before + share * (full * full - before * before)));
}

}  // namespace

Rating MovedByShare(const Rating& before, const Rating& full, double share) {
  if (share >= 1) return full;
  if (share <= 0) return before;
  return Rating{.value = before.value + share * (full.value - before.value),
                .deviation = MovedVariance(before.deviation, full.deviation, share),
                .volatility = MovedVariance(before.volatility, full.volatility, share)};
}

std::vector<std::vector<Rating>> Unchanged(const std::vector<PlacedTeam>& teams) {
  std::vector<std::vector<Rating>> ratings(teams.size());
  for (size_t t = 0; t < teams.size(); ++t) {
    for (const auto& player : teams[t].players) ratings[t].push_back(player.rating);
  }
  return ratings;
}

}  // namespace verdict::rating::internal
