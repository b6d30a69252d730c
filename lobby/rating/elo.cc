#include "lobby/rating/elo.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "lobby/rating/checks.h"
#include "lobby/rating/inactivity.h"
#include "lobby/rating/prediction.h"

namespace verdict::rating {

double RoundEloChange(double unrounded) {
  // PostgreSQL's float8 -> numeric cast prints the double with DBL_DIG (15) significant digits and
  // reads the decimal back exactly; a decimal of at most 15 digits read back as a double is a half
  // exactly when the decimal is, so std::round (half away from zero) then rounds as numeric does.
  char decimal[32];
  std::snprintf(decimal, sizeof decimal, "%.15g", unrounded);
  return std::round(std::strtod(decimal, nullptr));
}

namespace {

// The expected score of a team rated `rating` against one rated `opponent`,
// 1 / (1 + 10^((opponent - rating) / 400)); the formula Rate's E_ij is.
double ExpectedScore(double rating, double opponent) {
  return 1.0 / (1.0 + std::pow(10.0, (opponent - rating) / 400.0));
}

// The prediction of teams of these ratings (see elo.h): every pair by its expected scores.
Prediction PredictElo(const std::vector<std::vector<Rating>>& teams) {
  std::vector<double> team_rating(teams.size());
  for (size_t i = 0; i < teams.size(); ++i) {
    for (const Rating& rating : teams[i]) team_rating[i] += rating.value;
    team_rating[i] /= static_cast<double>(teams[i].size());
  }
  std::vector<std::vector<double>> beats(teams.size(), std::vector<double>(teams.size()));
  for (size_t i = 0; i < teams.size(); ++i) {
    for (size_t j = 0; j < teams.size(); ++j) {
      if (j != i) beats[i][j] = ExpectedScore(team_rating[i], team_rating[j]);
    }
  }
  Prediction prediction = internal::FromPairwise(beats);
  prediction.quality = internal::EvenOddsQuality(beats);
  return prediction;
}

class Elo final : public RatingSystem {
 public:
  Elo(EloParameters parameters, SystemSpec spec)
      : parameters_(parameters), spec_(std::move(spec)) {}

  const SystemSpec& spec() const override { return spec_; }

  Rating Initial() const override { return Rating{.value = parameters_.initial_rating}; }

  bool ReportsIntegerElo() const override { return true; }

  double Displayed(const Rating& rating) const override { return rating.value; }

  Status Accepts(const std::vector<size_t>& team_sizes) const override {
    return internal::CheckAnyTeams(kEloSystem, team_sizes);
  }

  Status CheckRating(const Rating& rating) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckBoundedRating(rating));
    if (rating.value != std::trunc(rating.value)) {
      return InvalidArgumentError("value: an elo rating is a whole number");
    }
    return Status::Ok();
  }

  Result<std::vector<std::vector<Rating>>> Rate(
      const std::vector<PlacedTeam>& teams) const override {
    if (!CheckRoom(*this, teams).ok()) return internal::Unchanged(teams);
    const size_t team_count = teams.size();
    size_t player_count = 0;
    std::vector<double> team_rating(team_count);
    for (size_t i = 0; i < team_count; ++i) {
      double sum = 0;
      for (const auto& player : teams[i].players) sum += player.rating.value;
      team_rating[i] = sum / static_cast<double>(teams[i].players.size());
      player_count += teams[i].players.size();
    }

    // Each player's unrounded change, by team.
    std::vector<double> player_change(team_count);
    double largest = 0;
    for (size_t i = 0; i < team_count; ++i) {
      // Each direction of a pair computed from its own side: team i's expectation against j is
      // its own formula, not 1 - E_ji, so that two teams' changes are opposite to the digit.
      double surprise = 0;  // sum over j != i of (S_ij - E_ij)
      for (size_t j = 0; j < team_count; ++j) {
        if (j == i) continue;
        const double score = teams[i].rank < teams[j].rank    ? 1.0
                             : teams[i].rank == teams[j].rank ? 0.5
                                                              : 0.0;
        surprise += score - 1.0 / (1.0 + std::pow(10.0, (team_rating[j] - team_rating[i]) / 400.0));
      }
      const double team_change = parameters_.k / static_cast<double>(team_count - 1) * surprise;
      // n_mean / n_i, computed as N / (T n_i): exactly 1 when every team has n_i players.
      const double size_factor = static_cast<double>(player_count) /
                                 static_cast<double>(team_count * teams[i].players.size());
      player_change[i] = team_change * size_factor;
      largest = std::max(largest, std::abs(player_change[i]));
    }
    // No player moves by more than K (see elo.h): the whole room scaled down together, so that it
    // still sums to zero. Only unequal team sizes can need it; equal ones are left exactly as
    // they were computed.
    const double scale = largest > parameters_.k ? parameters_.k / largest : 1.0;

    std::vector<std::vector<Rating>> rated(team_count);
    for (size_t i = 0; i < team_count; ++i) {
      for (const auto& player : teams[i].players) {
        // A part-time player's share of its change, rounded as a whole one is (see elo.h).
        Rating after = player.rating;
        after.value += RoundEloChange(player.share * (player_change[i] * scale));
        rated[i].push_back(internal::Bounded(after, player.rating, {}));
      }
    }
    return rated;
  }

  Result<Prediction> Predict(const std::vector<std::vector<Rating>>& teams) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckProposal(*this, teams));
    return PredictElo(teams);
  }

  Result<Rating> ResetForSeason(const Rating& rating, const SeasonReset& reset) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckSeasonReset(*this, rating, reset, false));
    // Half away from zero, as a room's change rounds; within the bounds, whose ends are whole.
    return Rating{.value = std::round(internal::ResetValue(rating.value, reset))};
  }

 private:
  const EloParameters parameters_;
  const SystemSpec spec_;
};

}  // namespace

Result<std::unique_ptr<RatingSystem>> MakeElo(const SystemSpec& spec, Declaration declaration) {
  VERDICT_RETURN_IF_ERROR(internal::CheckNoModel(spec));
  using internal::ParameterRange;
  EloParameters parameters;
  internal::ParameterReader reader(spec, declaration);
  reader.Read("k", parameters.k, {.least = 0, .most = kMaxEloK, .least_excluded = true});
  ParameterRange whole_rating = internal::kRatingValueRange;
  whole_rating.whole = true;
  reader.Read("initial_rating", parameters.initial_rating, whole_rating);
  auto filled = reader.Finish();
  if (!filled.ok()) return filled.status();
  return std::unique_ptr<RatingSystem>(std::make_unique<Elo>(parameters, std::move(*filled)));
}

}  // namespace verdict::rating
