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

// The values a parameter may take: the interval from `least` to `most`, without an end where
// that end is excluded, of whole numbers only where `whole`. Every range excludes NaN and the
// infinities. Each system gives every parameter the range its arithmetic is proven for.
struct ParameterRange {
  double least = 0;
  double most = 0;
  bool least_excluded = false;
  bool most_excluded = false;
  bool whole = false;
};

// The ranges of a parameter that is a rating's value (an initial rating, OpenSkill's mu) or an
// uncertainty (a sigma, a beta, an initial deviation or volatility): the bounds every rating is
// kept within (rating_system.h), so that every rating a system starts from passes CheckRating.
inline constexpr ParameterRange kRatingValueRange{.least = -kMaxRatingValue,
                                                  .most = kMaxRatingValue};
inline constexpr ParameterRange kUncertaintyRange{.least = kMinUncertainty,
                                                  .most = kMaxUncertainty};

// Reads the parameters of one spec: one Read per parameter the system has, then Finish.
class ParameterReader {
 public:
  // `declaration` kStored takes every finite value, whatever its range.
  ParameterReader(const SystemSpec& spec, Declaration declaration);

  // Sets `value`, which holds the parameter's default, to parameter `name` of the spec if the
  // spec gives it. A value out of `range` (kStored: a value that is not finite) is kept for Finish
  // to refuse.
  void Read(std::string_view name, double& value, const ParameterRange& range);

  // As Read, for a parameter added to a system after modes were declared with it: only a value
  // the spec gives is read and checked, and only then does the filled spec name it, so that a mode
  // declared before it existed declares the same parameters today (a mode in use may not change
  // its declaration). Not given, `value` keeps the default the caller set, which need not be in
  // `range` (0 for "none").
  void ReadIfGiven(std::string_view name, double& value, const ParameterRange& range);

  // The spec with every parameter read, defaults filled in; INVALID_ARGUMENT naming
  // "parameters.<name>" for the first parameter read out of its range, else for the first
  // parameter of the spec that no Read asked for (with the names the system has).
  Result<SystemSpec> Finish() const;

 private:
  // Keeps the first parameter out of its range for Finish.
  void Check(std::string_view name, double value, const ParameterRange& range);

  const SystemSpec& spec_;
  const Declaration declaration_;
  SystemSpec filled_;
  std::vector<std::string> read_;
  Status first_error_;
};

// OK if the spec names no model: `system` has none. INVALID_ARGUMENT naming "model" otherwise.
Status CheckNoModel(const SystemSpec& spec);

// OK if `team_sizes` has at least two teams and no empty one: the shapes Elo and OpenSkill rate.
// INVALID_ARGUMENT saying which team is empty otherwise.
Status CheckAnyTeams(std::string_view system, const std::vector<size_t>& team_sizes);

// OK if every rating number is finite and within the bounds every system keeps its ratings in
// (rating_system.h): the value within +-kMaxRatingValue, the deviation and volatility from 0 to
// kMaxUncertainty; INVALID_ARGUMENT naming the field and the bound otherwise. What every system
// requires of a rating; a system that uses a deviation or volatility also wants it at least
// kMinUncertainty (CheckUncertainty).
Status CheckBoundedRating(const Rating& rating);

// OK if `value` (the rating's `field`, "deviation" or "volatility") is at least kMinUncertainty;
// INVALID_ARGUMENT naming the field otherwise. `what` names it in the system's terms ("an openskill
// sigma").
Status CheckUncertainty(std::string_view field, std::string_view what, double value);

// Which numbers of a Rating a system uses, for Bounded.
struct RatingShape {
  bool deviation = false;
  bool volatility = false;
};

// `computed` brought within the bounds of a rating: the value clamped to +-kMaxRatingValue, and
// the deviation and volatility `shape` says the system uses clamped to [kMinUncertainty,
// kMaxUncertainty]; `before` if a number of `computed` is not finite (its arithmetic left the
// range of doubles). The guard on every rating a system's Rate returns.
Rating Bounded(const Rating& computed, const Rating& before, RatingShape shape);

// The rating a player of `share` (RatedPlayer::share, in [0, 1]) ends the room with, where
// `full` is the rating it would end it with had it played all of it: the value moved by share of
// the change, and each uncertainty by share of its change of variance,
// sqrt(before^2 + share (full^2 - before^2)). Variances rather than deviations because they are
// what a match adds to and takes from (OpenSkill's tau adds one, an update scales one), and a
// weighted mean of two variances lies between them: never below the smaller uncertainty, never
// above the larger. Share 1: `full` exactly; 0: `before` exactly.
Rating MovedByShare(const Rating& before, const Rating& full, double share);

// The ratings of `teams` as they are: what Rate answers for a room it cannot rate.
std::vector<std::vector<Rating>> Unchanged(const std::vector<PlacedTeam>& teams);

}  // namespace verdict::rating::internal
