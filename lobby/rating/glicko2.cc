#include "lobby/rating/glicko2.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <utility>

#include "lobby/rating/checks.h"
#include "lobby/rating/inactivity.h"
#include "lobby/rating/prediction.h"

namespace verdict::rating {
namespace {

// The Glicko-2 scale: mu = (r - kCentre) / kScale, phi = RD / kScale (step 2).
constexpr double kScale = 173.7178;
constexpr double kCentre = 1500;

// The bounds of step 5's iterations. The bracket search ends by k = ceil(tau / 2) (see
// NewVolatility), at most 5 for the largest tau a mode may declare. The Illinois iteration
// converges in a handful of rounds (six in the paper's example), but stalls when the root lies
// within rounding of one end of the bracket (ratings thousands of points apart, where f is all
// but flat); after kIllinoisSteps, bisection finishes from the bracket it holds, which halves
// its width each step: from the widest bracket of doubles (ln of the largest double, about 710,
// down to ln kMinUncertainty^2, about -28) to epsilon within 40 steps. Either bound reached is an
// error, never a longer wait.
constexpr int kMaxBracketSteps = 64;
constexpr int kIllinoisSteps = 50;
constexpr int kMaxIterations = kIllinoisSteps + 64;

// The rating after a period without information: the deviation grows by the volatility (step 6).
Rating Idle(const Rating& player) {
  const double phi = player.deviation / kScale;
  return Rating{.value = player.value,
                .deviation = kScale * std::sqrt(phi * phi + player.volatility * player.volatility),
                .volatility = player.volatility};
}

// Step 5: the new volatility, the root of f found by the Illinois algorithm; INTERNAL if either
// iteration reaches its bound.
Result<double> NewVolatility(double phi, double sigma, double v, double delta, double tau) {
  const double a = std::log(sigma * sigma);
  // e^x (delta^2 - phi^2 - v - e^x) / (2 d^2), as the product of two quotients of at most
  // delta^2 / d each: d^2 itself overflows for the largest x of a bracket (delta^2 up to 1e308).
  const auto f = [&](double x) {
    const double ex = std::exp(x);
    const double d = phi * phi + v + ex;
    return (ex / d) * ((delta * delta - phi * phi - v - ex) / d) / 2 - (x - a) / (tau * tau);
  };
  double A = a;
  double B;
  if (delta * delta > phi * phi + v) {
    B = std::log(delta * delta - phi * phi - v);
  } else {
    // Here delta^2 <= phi^2 + v, so the first term of f is at least
    // -e^x (phi^2 + v + e^x) / (2 (phi^2 + v + e^x)^2) > -1/2, and f(a - k tau) > k / tau - 1/2:
    // not negative once k >= tau / 2. In doubles that needs a - k tau to differ from a, which
    // holds for every tau above about 1e-14 (|a| <= 28) and so for every tau a mode may declare
    // (kMinGlicko2Tau); a tau of 1e-30 left a - k tau == a for 10^28 steps. kMaxBracketSteps ends
    // the search whatever the input.
    int k = 1;
    while (f(a - k * tau) < 0) {
      if (++k > kMaxBracketSteps) {
        return InternalError("glicko2 step 5: no bracket for the volatility within " +
                             std::to_string(kMaxBracketSteps) + " steps of tau");
      }
    }
    B = a - k * tau;
  }
  double fA = f(A), fB = f(B);
  // The root always lies between A and B.
  for (int i = 0; std::abs(B - A) > kGlicko2Epsilon; ++i) {
    if (i == kMaxIterations || !std::isfinite(fA) || !std::isfinite(fB)) {
      return InternalError("glicko2 step 5: the volatility did not converge within " +
                           std::to_string(kMaxIterations) + " iterations");
    }
    if (i >= kIllinoisSteps) {  // bisection
      const double M = A + (B - A) / 2;
      const double fM = f(M);
      if ((fM < 0) == (fA < 0)) {
        A = M;
        fA = fM;
      } else {
        B = M;
        fB = fM;
      }
      continue;
    }
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

double Glicko2G(double phi) {
  return 1 / std::sqrt(1 + 3 * phi * phi / (std::numbers::pi * std::numbers::pi));
}

double Glicko2ExpectedScore(const Rating& player, const Rating& opponent) {
  const double g = Glicko2G(opponent.deviation / kScale);
  return 1 / (1 + std::exp(-g * (player.value - opponent.value) / kScale));
}

Result<Rating> Glicko2RatingPeriod(const Rating& player, const std::vector<Glicko2Game>& games,
                                   double tau) {
  if (games.empty()) return Idle(player);
  const double mu = (player.value - kCentre) / kScale;
  const double phi = player.deviation / kScale;

  // Steps 3 and 4: 1 / v, and the sum of g (s - E) that Delta is v times.
  double information = 0;
  double surprise = 0;
  for (const auto& game : games) {
    const double g = Glicko2G(game.opponent.deviation / kScale);
    const double x = g * (mu - (game.opponent.value - kCentre) / kScale);
    const double expected = 1 / (1 + std::exp(-x));   // E
    const double unexpected = 1 / (1 + std::exp(x));  // 1 - E, without cancellation
    information += g * g * expected * unexpected;
    surprise += g * (game.score * unexpected - (1 - game.score) * expected);  // g (s - E)
  }
  // Every outcome was certain at double precision, or so nearly that v overflows.
  if (!(information > 0) || !std::isfinite(1 / information)) return Idle(player);
  const double v = 1 / information;
  const double delta = v * surprise;

  // An upset between ratings thousands of points apart makes delta^2 overflow, and step 5 cannot
  // be evaluated: the volatility stays, and steps 6 to 8 (where 1 / v is all but 0) still move
  // the rating.
  double sigma = player.volatility;
  if (std::isfinite(delta * delta)) {
    const auto new_sigma = NewVolatility(phi, player.volatility, v, delta, tau);
    if (!new_sigma.ok()) return new_sigma.status();
    sigma = *new_sigma;
  }
  // Steps 6 to 8.
  const double phi_star = std::sqrt(phi * phi + sigma * sigma);
  const double new_phi = 1 / std::sqrt(1 / (phi_star * phi_star) + 1 / v);
  const double new_mu = mu + new_phi * new_phi * surprise;
  return Rating{
      .value = kScale * new_mu + kCentre, .deviation = kScale * new_phi, .volatility = sigma};
}

namespace {

// The prediction of a match of the two players `a` and `b` (see glicko2.h).
Prediction PredictGlicko2(const Rating& a, const Rating& b) {
  const double phi_a = a.deviation / kScale;
  const double phi_b = b.deviation / kScale;
  const double x =
      Glicko2G(std::sqrt(phi_a * phi_a + phi_b * phi_b)) * (a.value - b.value) / kScale;
  // Each side from its own tail, so that neither is a difference 1 - p near 0.
  const std::vector<std::vector<double>> beats{{0, 1 / (1 + std::exp(-x))},
                                               {1 / (1 + std::exp(x)), 0}};
  Prediction prediction = internal::FromPairwise(beats);
  prediction.quality = internal::EvenOddsQuality(beats);
  return prediction;
}

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
    VERDICT_RETURN_IF_ERROR(internal::CheckBoundedRating(rating));
    VERDICT_RETURN_IF_ERROR(
        internal::CheckUncertainty("deviation", "a glicko2 RD", rating.deviation));
    return internal::CheckUncertainty("volatility", "a glicko2 volatility", rating.volatility);
  }

  Result<std::vector<std::vector<Rating>>> Rate(
      const std::vector<PlacedTeam>& teams) const override {
    if (!CheckRoom(*this, teams).ok()) return internal::Unchanged(teams);
    const Rating& first = teams[0].players[0].rating;
    const Rating& second = teams[1].players[0].rating;
    const double score = teams[0].rank < teams[1].rank    ? 1.0
                         : teams[0].rank == teams[1].rank ? 0.5
                                                          : 0.0;
    const auto first_after = Glicko2RatingPeriod(first, {{second, score}}, parameters_.tau);
    if (!first_after.ok()) return first_after.status();
    const auto second_after = Glicko2RatingPeriod(second, {{first, 1 - score}}, parameters_.tau);
    if (!second_after.ok()) return second_after.status();
    const auto rated = [](const RatedPlayer& player, const Rating& full) {
      constexpr internal::RatingShape kShape{.deviation = true, .volatility = true};
      return internal::Bounded(internal::MovedByShare(player.rating, full, player.share),
                               player.rating, kShape);
    };
    return std::vector<std::vector<Rating>>{{rated(teams[0].players[0], *first_after)},
                                            {rated(teams[1].players[0], *second_after)}};
  }

  Result<Prediction> Predict(const std::vector<std::vector<Rating>>& teams) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckProposal(*this, teams));
    return PredictGlicko2(teams[0][0], teams[1][0]);
  }

  Result<Rating> Idle(const Rating& rating, double idle_days) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckIdle(*this, rating, idle_days));
    // A stored mode's parameters are taken as stored (Declaration::kStored): a period that is not
    // positive ages nobody rather than dividing by it, and the cap is kept within the bounds.
    if (!(parameters_.period_days > 0)) return rating;
    const double periods = std::floor(idle_days / parameters_.period_days);
    // n periods of step 6 at once: RD^2 + n (173.7178 sigma)^2 is 173.7178^2 (phi^2 + n sigma^2).
    const double sigma = kScale * rating.volatility;
    Rating aged = rating;
    aged.deviation = internal::AgedDeviation(
        rating.deviation, periods * sigma * sigma,
        std::clamp(parameters_.initial_deviation, kMinUncertainty, kMaxUncertainty));
    return aged;
  }

 private:
  const Glicko2Parameters parameters_;
  const SystemSpec spec_;
};

}  // namespace

Result<std::unique_ptr<RatingSystem>> MakeGlicko2(const SystemSpec& spec, Declaration declaration) {
  VERDICT_RETURN_IF_ERROR(internal::CheckNoModel(spec));
  Glicko2Parameters parameters;
  internal::ParameterReader reader(spec, declaration);
  reader.Read("tau", parameters.tau, {.least = kMinGlicko2Tau, .most = kMaxGlicko2Tau});
  reader.Read("initial_rating", parameters.initial_rating, internal::kRatingValueRange);
  reader.Read("initial_deviation", parameters.initial_deviation, internal::kUncertaintyRange);
  reader.Read("initial_volatility", parameters.initial_volatility, internal::kUncertaintyRange);
  reader.ReadIfGiven("period_days", parameters.period_days,
                     {.least = 0, .most = kMaxGlicko2PeriodDays, .least_excluded = true});
  auto filled = reader.Finish();
  if (!filled.ok()) return filled.status();
  return std::unique_ptr<RatingSystem>(std::make_unique<Glicko2>(parameters, std::move(*filled)));
}

}  // namespace verdict::rating
