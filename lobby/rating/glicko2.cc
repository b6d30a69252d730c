#include "lobby/rating/glicko2.h"

#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <utility>

#include "lobby/rating/checks.h"

namespace verdict::rating {
namespace {

// The Glicko-2 scale: mu = (r - kCentre) / kScale, phi = RD / kScale (step 2).
constexpr double kScale = 173.7178;
constexpr double kCentre = 1500;

// Step 5's iteration converges in a handful of rounds (six in the paper's example); the bound only
// ends it for input so far out that the function cannot be evaluated.
constexpr int kMaxIterations = 100;

double G(double phi) {
  return 1 / std::sqrt(1 + 3 * phi * phi / (std::numbers::pi * std::numbers::pi));
}

// The rating after a period without information: the deviation grows by the volatility (step 6).
Rating Idle(const Rating& player) {
  const double phi = player.deviation / kScale;
  return Rating{.value = player.value,
                .deviation = kScale * std::sqrt(phi * phi + player.volatility * player.volatility),
                .volatility = player.volatility};
}

// Step 5: the new volatility, the root of f found by the Illinois algorithm.
double NewVolatility(double phi, double sigma, double v, double delta, double tau) {
  const double a = std::log(sigma * sigma);
  const auto f = [&](double x) {
    const double ex = std::exp(x);
    const double d = phi * phi + v + ex;
    return ex * (delta * delta - phi * phi - v - ex) / (2 * d * d) - (x - a) / (tau * tau);
  };
  double A = a;
  double B;
  if (delta * delta > phi * phi + v) {
    B = std::log(delta * delta - phi * phi - v);
  } else {
    int k = 1;
    while (f(a - k * tau) < 0) ++k;
    B = a - k * tau;
  }
  double fA = f(A), fB = f(B);
  for (int i = 0; i < kMaxIterations && std::abs(B - A) > kGlicko2Epsilon; ++i) {
    const double C = A + (A - B) * fA / (fB - fA);
    const double fC = f(C);
    // <= rather than <: a C that is the root exactly ends the iteration instead of stalling it.
    if (fC * fB <= 0) {
      A = B;
      fA = fB;
    } else {
      fA /= 2;
    }
    B = C;
    fB = fC;
  }
  return std::exp(A / 2);
}

}  // namespace

Rating Glicko2RatingPeriod(const Rating& player, const std::vector<Glicko2Game>& games,
                           double tau) {
  if (games.empty()) return Idle(player);
  const double mu = (player.value - kCentre) / kScale;
  const double phi = player.deviation / kScale;

  // Steps 3 and 4: 1 / v, and the sum of g (s - E) that Delta is v times.
  double information = 0;
  double surprise = 0;
  for (const auto& game : games) {
    const double g = G(game.opponent.deviation / kScale);
    const double x = g * (mu - (game.opponent.value - kCentre) / kScale);
    const double expected = 1 / (1 + std::exp(-x));   // E
    const double unexpected = 1 / (1 + std::exp(x));  // 1 - E, without cancellation
    information += g * g * expected * unexpected;
    surprise += g * (game.score * unexpected - (1 - game.score) * expected);  // g (s - E)
  }
  if (!(information > 0)) return Idle(player);  // every outcome was certain at double precision
  const double v = 1 / information;
  const double delta = v * surprise;

  const double sigma = NewVolatility(phi, player.volatility, v, delta, tau);
  // Steps 6 to 8.
  const double phi_star = std::sqrt(phi * phi + sigma * sigma);
  const double new_phi = 1 / std::sqrt(1 / (phi_star * phi_star) + 1 / v);
  const double new_mu = mu + new_phi * new_phi * surprise;
  return Rating{
      .value = kScale * new_mu + kCentre, .deviation = kScale * new_phi, .volatility = sigma};
}

namespace {

class Glicko2 final : public RatingSystem {
 public:
  Glicko2(Glicko2Parameters parameters, SystemSpec spec)
      : parameters_(parameters), spec_(std::move(spec)) {}

  const SystemSpec& spec() const override { return spec_; }

  Rating Initial() const override {
    return Rating{.value = parameters_.initial_rating,
                  .deviation = parameters_.initial_deviation,
                  .volatility = parameters_.initial_volatility};
  }

  double Displayed(const Rating& rating) const override {
    return rating.value - 2 * rating.deviation;
  }

  Status Accepts(const std::vector<size_t>& team_sizes) const override {
    if (team_sizes.size() != 2) {
      return InvalidArgumentError("glicko2 rates two teams of one player, got " +
                                  std::to_string(team_sizes.size()) + " teams");
    }
    for (size_t t = 0; t < team_sizes.size(); ++t) {
      if (team_sizes[t] != 1) {
        return InvalidArgumentError("glicko2 rates two teams of one player, team " +
                                    std::to_string(t + 1) + " has " +
                                    std::to_string(team_sizes[t]));
      }
    }
    return Status::Ok();
  }

  Status CheckRating(const Rating& rating) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckFiniteRating(rating));
    if (!(rating.deviation > 0)) return InvalidArgumentError("deviation: a glicko2 RD must be > 0");
    if (!(rating.volatility > 0)) {
      return InvalidArgumentError("volatility: a glicko2 volatility must be > 0");
    }
    return Status::Ok();
  }

  std::vector<std::vector<Rating>> Rate(const std::vector<PlacedTeam>& teams) const override {
    if (!CheckRoom(*this, teams).ok()) return internal::Unchanged(teams);
    const Rating& first = teams[0].players[0].rating;
    const Rating& second = teams[1].players[0].rating;
    const double score = teams[0].rank < teams[1].rank    ? 1.0
                         : teams[0].rank == teams[1].rank ? 0.5
                                                          : 0.0;
    const Rating first_after = Glicko2RatingPeriod(first, {{second, score}}, parameters_.tau);
    const Rating second_after = Glicko2RatingPeriod(second, {{first, 1 - score}}, parameters_.tau);
    return {{internal::CheckedOr(*this, first_after, first)},
            {internal::CheckedOr(*this, second_after, second)}};
  }

 private:
  const Glicko2Parameters parameters_;
  const SystemSpec spec_;
};

}  // namespace

Result<std::unique_ptr<RatingSystem>> MakeGlicko2(const SystemSpec& spec) {
  VERDICT_RETURN_IF_ERROR(internal::CheckNoModel(spec));
  using internal::ParameterRange;
  Glicko2Parameters parameters;
  internal::ParameterReader reader(spec);
  reader.Read("tau", parameters.tau, ParameterRange::kPositive);
  reader.Read("initial_rating", parameters.initial_rating, ParameterRange::kFinite);
  reader.Read("initial_deviation", parameters.initial_deviation, ParameterRange::kPositive);
  reader.Read("initial_volatility", parameters.initial_volatility, ParameterRange::kPositive);
  auto filled = reader.Finish();
  if (!filled.ok()) return filled.status();
  return std::unique_ptr<RatingSystem>(std::make_unique<Glicko2>(parameters, std::move(*filled)));
}

}  // namespace verdict::rating
