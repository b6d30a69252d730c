// What every rating system checks, in one place: the parameters of its SystemSpec (each name it
// knows with its default and range; a name it does not know or a value out of range refused as
// INVALID_ARGUMENT naming the field, "parameters.k"), the shape of a room, the numbers of a
// rating, and the guard on what Rate returns. Used by the systems (elo.cc, openskill.cc,
// glicko2.cc) only. Plain functions and values: any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating::internal {

// The values a parameter may take. Every range excludes NaN and the infinities.
enum class ParameterRange {
  kFinite,
  kPositive,     // > 0
  kNonNegative,  // >= 0
  kOpenUnit,     // strictly between 0 and 1
  kWhole,        // a whole number
};

// Reads the parameters of one spec: one Read per parameter the system has, then Finish.
class ParameterReader {
 public:
  explicit ParameterReader(const SystemSpec& spec);

  // Sets `value`, which holds the parameter's default, to parameter `name` of the spec if the
  // spec gives it. A value out of `range` is kept for Finish to refuse.
  void Read(std::string_view name, double& value, ParameterRange range);

  // The spec with every parameter read, defaults filled in; INVALID_ARGUMENT naming
  // "parameters.<name>" for the first parameter read out of its range, else for the first
  // parameter of the spec that no Read asked for (with the names the system has).
  Result<SystemSpec> Finish() const;

 private:
  const SystemSpec& spec_;
  SystemSpec filled_;
  std::vector<std::string> read_;
  Status first_error_;
};

// OK if the spec names no model: `system` has none. INVALID_ARGUMENT naming "model" otherwise.
Status CheckNoModel(const SystemSpec& spec);

// OK if `team_sizes` has at least two teams and no empty one: the shapes Elo and OpenSkill rate.
// INVALID_ARGUMENT saying which team is empty otherwise.
Status CheckAnyTeams(std::string_view system, const std::vector<size_t>& team_sizes);

// OK if every rating number is finite and the deviation and volatility are not negative;
// INVALID_ARGUMENT naming the field otherwise. What every system requires of a rating.
Status CheckFiniteRating(const Rating& rating);

// `computed` if it passes `system.CheckRating`, else `before`: the guard that keeps a rating whose
// arithmetic left the range of doubles (ratings far outside any ladder) where it was.
Rating CheckedOr(const RatingSystem& system, const Rating& computed, const Rating& before);

// The ratings of `teams` as they are: what Rate answers for a room it cannot rate.
std::vector<std::vector<Rating>> Unchanged(const std::vector<PlacedTeam>& teams);

}  // namespace verdict::rating::internal
