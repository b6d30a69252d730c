#include "lobby/rating/rating_system.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lobby/rating/checks.h"
#include "lobby/rating/elo.h"
#include "lobby/rating/glicko2.h"
#include "lobby/rating/inactivity.h"
#include "lobby/rating/openskill.h"

namespace verdict::rating {

double WithinRatingBounds(double value) {
  return std::isnan(value) ? 0 : std::clamp(value, -kMaxRatingValue, kMaxRatingValue);
}

Status RatingSystem::CheckRating(const Rating& rating) const {
  return internal::CheckBoundedRating(rating);
}

Result<Rating> RatingSystem::Idle(const Rating& rating, double idle_days) const {
  VERDICT_RETURN_IF_ERROR(internal::CheckIdle(*this, rating, idle_days));
  return rating;
}

Result<Rating> RatingSystem::ResetForSeason(const Rating& rating, const SeasonReset& reset) const {
  // A system uses a deviation exactly when its new players have one: Elo's Initial() has 0,
  // OpenSkill's and Glicko-2's at least kMinUncertainty.
  const bool uses_deviation = Initial().deviation > 0;
  VERDICT_RETURN_IF_ERROR(internal::CheckSeasonReset(*this, rating, reset, uses_deviation));
  Rating reset_rating = rating;
  reset_rating.value = internal::ResetValue(rating.value, reset);
  if (uses_deviation) reset_rating.deviation = std::max(rating.deviation, reset.deviation);
  VERDICT_RETURN_IF_ERROR(CheckRating(reset_rating));
  return reset_rating;
}

Status CheckRoom(const RatingSystem& system, const std::vector<PlacedTeam>& teams) {
  std::vector<size_t> sizes;
  sizes.reserve(teams.size());
  for (const auto& team : teams) sizes.push_back(team.players.size());
  VERDICT_RETURN_IF_ERROR(system.Accepts(sizes));
  // The messages are built only for a room that fails: this runs before every Rate.
  const auto team = [](size_t t) { return "team " + std::to_string(t + 1); };
  for (size_t t = 0; t < teams.size(); ++t) {
    if (teams[t].rank < 1 || teams[t].rank > teams.size()) {
      return InvalidArgumentError(team(t) + ": rank " + std::to_string(teams[t].rank) +
                                  " is not between 1 and " + std::to_string(teams.size()));
    }
    for (size_t p = 0; p < teams[t].players.size(); ++p) {
      const auto& player = teams[t].players[p];
      if (!(player.share >= 0 && player.share <= 1)) {
        return InvalidArgumentError(team(t) + ", player " + std::to_string(p) +
                                    ": share must be between 0 and 1");
      }
      if (!(player.contribution >= 0 && std::isfinite(player.contribution))) {
        return InvalidArgumentError(team(t) + ", player " + std::to_string(p) +
                                    ": contribution must be a finite number >= 0");
      }
      if (Status status = system.CheckRating(player.rating); !status.ok()) {
        return InvalidArgumentError(team(t) + ", player " + std::to_string(p) + ": rating " +
                                    status.message());
      }
    }
  }
  return Status::Ok();
}

namespace {

// Every system the lobby has, by name: the one list of them.
struct KnownSystem {
  std::string_view name;
  Result<std::unique_ptr<RatingSystem>> (*make)(const SystemSpec&, Declaration);
};
constexpr KnownSystem kSystems[] = {
    {kEloSystem, MakeElo},
    {kOpenSkillSystem, MakeOpenSkill},
    {kGlicko2System, MakeGlicko2},
};

}  // namespace

std::string KnownSystems() {
  std::string names;
  for (const KnownSystem& known : kSystems) {
    if (!names.empty()) names += ", ";
    names += known.name;
  }
  return names;
}

Result<std::unique_ptr<RatingSystem>> MakeRatingSystem(const SystemSpec& spec,
                                                       Declaration declaration) {
  for (const KnownSystem& known : kSystems) {
    if (spec.system == known.name) return known.make(spec, declaration);
  }
  return InvalidArgumentError("system: unknown rating system \"" + spec.system +
                              "\" (known: " + KnownSystems() + ")");
}

namespace {

// The uncertainty rule of ApplyChange, on variances: a shrink scales the current one, a growth
// adds to it; after's where before has none.
double MoveUncertainty(double current, double before, double after) {
  if (!(before > 0)) return after;
  const double variance = after < before ? current * current * ((after * after) / (before * before))
                                         : current * current + (after * after - before * before);
  return std::clamp(std::sqrt(variance), kMinUncertainty, kMaxUncertainty);
}

}  // namespace

Rating ApplyChange(const Rating& current, const Rating& before, const Rating& after) {
  if (current == before) return after;
  return Rating{
      .value = std::clamp(current.value + (after.value - before.value), -kMaxRatingValue,
                          kMaxRatingValue),
      .deviation = MoveUncertainty(current.deviation, before.deviation, after.deviation),
      .volatility = MoveUncertainty(current.volatility, before.volatility, after.volatility),
  };
}

}  // namespace verdict::rating
