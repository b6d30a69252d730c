#include "lobby/rating/checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace verdict::rating::internal {
namespace {

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

// What `range` asks of a value, for the message; empty if `value` is in it.
std::string_view Violation(double value, ParameterRange range) {
  if (!std::isfinite(value)) return "must be a finite number";
  switch (range) {
    case ParameterRange::kFinite:
      return {};
    case ParameterRange::kPositive:
      return value > 0 ? std::string_view() : "must be > 0";
    case ParameterRange::kNonNegative:
      return value >= 0 ? std::string_view() : "must be >= 0";
    case ParameterRange::kOpenUnit:
      return value > 0 && value < 1 ? std::string_view() : "must be > 0 and < 1";
    case ParameterRange::kWhole:
      return value == std::trunc(value) ? std::string_view() : "must be a whole number";
  }
  return {};
}

}  // namespace

ParameterReader::ParameterReader(const SystemSpec& spec) : spec_(spec) {
  filled_.system = spec.system;
  filled_.model = spec.model;
}

void ParameterReader::Read(std::string_view name, double& value, ParameterRange range) {
  read_.emplace_back(name);
  const auto given = spec_.parameters.find(std::string(name));
  if (given != spec_.parameters.end()) value = given->second;
  filled_.parameters[std::string(name)] = value;
  if (const auto violation = Violation(value, range); !violation.empty() && first_error_.ok()) {
    first_error_ = InvalidArgumentError("parameters." + std::string(name) + ": " + spec_.system +
                                        "'s " + std::string(name) + " " + std::string(violation) +
                                        ", got " + Number(value));
  }
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

Status CheckFiniteRating(const Rating& rating) {
  if (!std::isfinite(rating.value)) return InvalidArgumentError("value: must be a finite number");
  if (!std::isfinite(rating.deviation) || rating.deviation < 0) {
    return InvalidArgumentError("deviation: must be a finite number >= 0");
  }
  if (!std::isfinite(rating.volatility) || rating.volatility < 0) {
    return InvalidArgumentError("volatility: must be a finite number >= 0");
  }
  return Status::Ok();
}

Rating CheckedOr(const RatingSystem& system, const Rating& computed, const Rating& before) {
  return system.CheckRating(computed).ok() ? computed : before;
}

std::vector<std::vector<Rating>> Unchanged(const std::vector<PlacedTeam>& teams) {
  std::vector<std::vector<Rating>> ratings(teams.size());
  for (size_t t = 0; t < teams.size(); ++t) {
    for (const auto& player : teams[t].players) ratings[t].push_back(player.rating);
  }
  return ratings;
}

}  // namespace verdict::rating::internal
