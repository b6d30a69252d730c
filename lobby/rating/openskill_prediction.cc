#include "lobby/rating/openskill_prediction.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "lobby/rating/prediction.h"

namespace verdict::rating::internal {
namespace {

// A team as a prediction sees it: the sums of its players' mu and sigma^2, and its size.
struct TeamSums {
  double mu = 0;
  double sigma_sq = 0;
  double players = 0;
};

std::vector<TeamSums> Sum(const std::vector<std::vector<Rating>>& teams) {
  std::vector<TeamSums> sums(teams.size());
  for (size_t t = 0; t < teams.size(); ++t) {
    for (const Rating& rating : teams[t]) {
      sums[t].mu += rating.value;
      sums[t].sigma_sq += rating.deviation * rating.deviation;
    }
    sums[t].players = static_cast<double>(teams[t].size());
  }
  return sums;
}

// The standard normal distribution function, openskill.py's phi_major.
double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// The bound of NormalQuantile's iteration: six steps reach double precision (below).
constexpr int kQuantileSteps = 16;

// The standard normal quantile of `probability` in [1/2, 3/4], openskill.py's phi_major_inverse
// where predict_draw takes it. Newton's method from 0: the distribution function is concave on
// x >= 0, so each tangent meets p at or below the quantile and the steps climb to it, doubling
// the digits each step; from 0 to the quantile of 3/4 (0.674) that is six steps to double
// precision. kQuantileSteps ends it whatever rounding does between two neighbouring doubles.
double NormalQuantile(double probability) {
  double x = 0;
  for (int step = 0; step < kQuantileSteps; ++step) {
    const double density = std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
    const double next = x + (probability - NormalCdf(x)) / density;
    if (next == x) break;
    x = next;
  }
  return x;
}

// openskill.py 6.2.0's predict_draw: a draw margin that a total of N players makes a draw of
// probability 1/N, margin = sqrt(N) beta Phi^-1((1 + 1/N) / 2), and the mean over pairs of teams
// of the probability that their performance difference falls within it.
double DrawProbability(const std::vector<TeamSums>& sums, double beta) {
  double players = 0;
  for (const TeamSums& team : sums) players += team.players;
  const double margin = std::sqrt(players) * beta * NormalQuantile((1 + 1 / players) / 2);
  double sum = 0;
  double pairs = 0;
  for (size_t i = 0; i < sums.size(); ++i) {
    for (size_t j = i + 1; j < sums.size(); ++j) {
      const double c = std::sqrt(2 * beta * beta + sums[i].sigma_sq + sums[j].sigma_sq);
      const double difference = sums[i].mu - sums[j].mu;
      sum += NormalCdf((margin - difference) / c) - NormalCdf((-difference - margin) / c);
      pairs += 1;
    }
  }
  return sum / pairs;
}

// TrueSkill's match quality (Herbrich, Minka and Graepel, "TrueSkill: A Bayesian Skill Rating
// System", NIPS 2006; the matrix form of Moserware's "Computing Your Skill"): the density of the
// teams' performance differences at "all equal", relative to what it would be were every rating
// exactly known and equal,
//
//   sqrt(det B / det C) exp(-m' C^-1 m / 2),  B = beta^2 A'A,  C = B + A' Sigma A,  m = A' mu,
//
// A taking the differences of consecutive teams (any basis of differences gives the same value).
// Consecutive differences make B and C tridiagonal: difference d shares team d + 1 with the next,
// so the entry between them is -beta^2 n_{d+1} in B and -(beta^2 n_{d+1} + sigma^2_{d+1}) in C.
// Their LDL' pivots give both determinants (as sums of logarithms: no product overflows) and
// m' C^-1 m as the sum of y_d^2 / pivot_d, y solving L y = m. For two teams this is
// sqrt(n beta^2 / c^2) exp(-(mu_1 - mu_2)^2 / (2 c^2)), c^2 = n beta^2 + sigma^2_1 + sigma^2_2.
double TrueSkillQuality(const std::vector<TeamSums>& sums, double beta) {
  const double beta_sq = beta * beta;
  double log_ratio = 0;  // ln det B - ln det C
  double mahalanobis = 0;
  double previous_b_pivot = 0, previous_c_pivot = 0, previous_y = 0;
  for (size_t d = 0; d + 1 < sums.size(); ++d) {
    const TeamSums& upper = sums[d];
    const TeamSums& lower = sums[d + 1];
    double b_pivot = beta_sq * (upper.players + lower.players);
    double c_pivot = b_pivot + upper.sigma_sq + lower.sigma_sq;
    double y = upper.mu - lower.mu;
    if (d > 0) {
      const double b_off = -beta_sq * upper.players;
      const double c_off = b_off - upper.sigma_sq;
      b_pivot -= b_off * b_off / previous_b_pivot;
      c_pivot -= c_off * c_off / previous_c_pivot;
      y -= c_off / previous_c_pivot * previous_y;
    }
    log_ratio += std::log(b_pivot) - std::log(c_pivot);
    mahalanobis += y * y / c_pivot;
    previous_b_pivot = b_pivot;
    previous_c_pivot = c_pivot;
    previous_y = y;
  }
  return std::clamp(std::exp(log_ratio / 2 - mahalanobis / 2), 0.0, 1.0);
}

}  // namespace

Prediction PredictWengLin(const std::vector<std::vector<Rating>>& teams, double given_beta) {
  // A mode stored with a negative beta (Declaration::kStored) is rated by beta^2 alone; so is it
  // predicted, its draw margin included.
  const double beta = std::abs(given_beta);
  const std::vector<TeamSums> sums = Sum(teams);
  // openskill.py 6.2.0's predict_win and predict_rank: Phi((mu_i - mu_j) / c_ij) with
  // c_ij^2 = 2 beta^2 + sigma^2_i + sigma^2_j. openskill.js 5.0.1's predictWin takes n beta^2 for n
  // teams instead of 2 beta^2, and so disagrees from three teams on; this follows openskill.py,
  // whose pair of teams is the same whatever else is in the room.
  std::vector<std::vector<double>> beats(sums.size(), std::vector<double>(sums.size()));
  for (size_t i = 0; i < sums.size(); ++i) {
    for (size_t j = 0; j < sums.size(); ++j) {
      if (j == i) continue;
      const double c = std::sqrt(2 * beta * beta + sums[i].sigma_sq + sums[j].sigma_sq);
      beats[i][j] = NormalCdf((sums[i].mu - sums[j].mu) / c);
    }
  }
  Prediction prediction = FromPairwise(beats);
  prediction.draw = DrawProbability(sums, beta);
  prediction.quality = TrueSkillQuality(sums, beta);
  return prediction;
}

}  // namespace verdict::rating::internal
