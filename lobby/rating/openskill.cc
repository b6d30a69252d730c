#include "lobby/rating/openskill.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lobby/rating/checks.h"

namespace verdict::rating {
namespace {

// A team as the model sees it: the sums of its players' mu and sigma^2, and its rank.
struct TeamSums {
  double mu = 0;
  double sigma_sq = 0;
  uint32_t rank = 1;
};

// What the model says of one team: omega moves its mu, delta shrinks its variance (the paper's
// Omega_i and Delta_i).
struct TeamUpdate {
  double omega = 0;
  double delta = 0;
};

// Plackett-Luce, Algorithm 4 of Weng & Lin: with theta_s = mu_s / c and C_q the teams placed no
// better than q, the probability that team i comes first among C_q is
// exp(theta_i) / sum over s in C_q of exp(theta_s), and A_q is the number of teams sharing q's
// rank. Each sum is taken relative to its largest term, so that no exp overflows.
std::vector<TeamUpdate> PlackettLuce(const std::vector<TeamSums>& teams, double beta) {
  const size_t count = teams.size();
  double c_sq = 0;
  for (const auto& team : teams) c_sq += team.sigma_sq + beta * beta;
  const double c = std::sqrt(c_sq);

  std::vector<double> theta(count), largest(count), sum(count);
  std::vector<double> tied(count, 0);  // A_q
  for (size_t s = 0; s < count; ++s) theta[s] = teams[s].mu / c;
  for (size_t q = 0; q < count; ++q) {
    largest[q] = theta[q];
    for (size_t s = 0; s < count; ++s) {
      if (teams[s].rank >= teams[q].rank) largest[q] = std::max(largest[q], theta[s]);
      if (teams[s].rank == teams[q].rank) tied[q] += 1;
    }
    for (size_t s = 0; s < count; ++s) {
      if (teams[s].rank >= teams[q].rank) sum[q] += std::exp(theta[s] - largest[q]);
    }
  }

  std::vector<TeamUpdate> updates(count);
  for (size_t i = 0; i < count; ++i) {
    double omega = 0, delta = 0;
    for (size_t q = 0; q < count; ++q) {
      if (teams[q].rank > teams[i].rank) continue;
      const double share = std::exp(theta[i] - largest[q]) / sum[q];
      delta += share * (1 - share) / tied[q];
      omega += (q == i ? 1 - share : -share) / tied[q];
    }
    const double gamma = std::sqrt(teams[i].sigma_sq) / c;
    updates[i].omega = omega * (teams[i].sigma_sq / c);
    updates[i].delta = delta * (teams[i].sigma_sq / (c * c)) * gamma;
  }
  return updates;
}

// Bradley-Terry with full pairing, Algorithm 1 of Weng & Lin: every other team q compared with i
// through c_iq = sqrt(sigma_i^2 + sigma_q^2 + 2 beta^2).
std::vector<TeamUpdate> BradleyTerryFull(const std::vector<TeamSums>& teams, double beta) {
  std::vector<TeamUpdate> updates(teams.size());
  for (size_t i = 0; i < teams.size(); ++i) {
    for (size_t q = 0; q < teams.size(); ++q) {
      if (q == i) continue;
      const double c_iq = std::sqrt(teams[i].sigma_sq + teams[q].sigma_sq + 2 * beta * beta);
      const double p_iq = 1 / (1 + std::exp((teams[q].mu - teams[i].mu) / c_iq));
      const double score = teams[q].rank > teams[i].rank    ? 1.0
                           : teams[q].rank == teams[i].rank ? 0.5
                                                            : 0.0;
      const double eta = teams[i].sigma_sq / c_iq;
      const double gamma = std::sqrt(teams[i].sigma_sq) / c_iq;
      updates[i].omega += eta * (score - p_iq);
      updates[i].delta += gamma * eta / c_iq * p_iq * (1 - p_iq);
    }
  }
  return updates;
}

// openskill.py's _normalize into its default weight bounds [1, 2], for a team of two or more: the
// least contribution to 1, the greatest to 2, linearly; all equal, all 1 (openskill.py divides by
// 0.0001 when the range is 0). A team of one gets 1 (see openskill.h).
std::vector<double> ContributionWeights(const PlacedTeam& team) {
  std::vector<double> weights(team.players.size(), 1.0);
  if (team.players.size() < 2) return weights;
  double least = team.players[0].contribution, greatest = team.players[0].contribution;
  for (const auto& player : team.players) {
    least = std::min(least, player.contribution);
    greatest = std::max(greatest, player.contribution);
  }
  const double range = greatest - least == 0 ? 0.0001 : greatest - least;
  for (size_t j = 0; j < weights.size(); ++j) {
    weights[j] = (team.players[j].contribution - least) / range * (2.0 - 1.0) + 1.0;
  }
  return weights;
}

class OpenSkill final : public RatingSystem {
 public:
  OpenSkill(OpenSkillParameters parameters, SystemSpec spec)
      : parameters_(parameters), spec_(std::move(spec)) {}

  const SystemSpec& spec() const override { return spec_; }

  Rating Initial() const override {
    return Rating{.value = parameters_.mu, .deviation = parameters_.sigma};
  }

  double Displayed(const Rating& rating) const override {
    return rating.value - 3 * rating.deviation;
  }

  Status Accepts(const std::vector<size_t>& team_sizes) const override {
    return internal::CheckAnyTeams(kOpenSkillSystem, team_sizes);
  }

  Status CheckRating(const Rating& rating) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckBoundedRating(rating));
    return internal::CheckUncertainty("deviation", "an openskill sigma", rating.deviation);
  }

  Result<std::vector<std::vector<Rating>>> Rate(
      const std::vector<PlacedTeam>& teams) const override {
    if (!CheckRoom(*this, teams).ok()) return internal::Unchanged(teams);
    const double tau_sq = parameters_.tau * parameters_.tau;
    // Each player's sigma as the room rates it: with tau added in quadrature when tau > 0.
    std::vector<std::vector<double>> sigma(teams.size());
    std::vector<TeamSums> sums(teams.size());
    for (size_t i = 0; i < teams.size(); ++i) {
      sums[i].rank = teams[i].rank;
      for (const auto& player : teams[i].players) {
        const double s = parameters_.tau > 0
                             ? std::sqrt(player.rating.deviation * player.rating.deviation + tau_sq)
                             : player.rating.deviation;
        sigma[i].push_back(s);
        sums[i].mu += player.rating.value;
        sums[i].sigma_sq += s * s;
      }
    }
    const std::vector<TeamUpdate> updates =
        parameters_.model == OpenSkillParameters::Model::kPlackettLuce
            ? PlackettLuce(sums, parameters_.beta)
            : BradleyTerryFull(sums, parameters_.beta);

    std::vector<std::vector<Rating>> rated(teams.size());
    for (size_t i = 0; i < teams.size(); ++i) {
      const std::vector<double> weights = ContributionWeights(teams[i]);
      for (size_t j = 0; j < teams[i].players.size(); ++j) {
        const RatedPlayer& player = teams[i].players[j];
        const Rating full =
            AsFullPlayer(player.rating, sigma[i][j], sums[i].sigma_sq, updates[i], weights[j]);
        rated[i].push_back(
            internal::Bounded(internal::MovedByShare(player.rating, full, player.share),
                              player.rating, {.deviation = true}));
      }
    }
    return rated;
  }

 private:
  // The rating a player of `before`, whose sigma the room rates from is `sigma` (tau added), ends
  // the room with as a full player of its team: its part of the team's `update`, in proportion to
  // its variance, weighted by its contribution `weight`.
  Rating AsFullPlayer(const Rating& before, double sigma, double team_sigma_sq,
                      const TeamUpdate& update, double weight) const {
    // As openskill.py: the weight multiplies a gain and divides a loss.
    const bool gained = update.omega >= 0;
    const double ratio = sigma * sigma / team_sigma_sq;
    const auto part_of = [&](double x) { return gained ? ratio * x * weight : ratio * x / weight; };
    Rating after = before;
    after.value = before.value + part_of(update.omega);
    after.deviation = sigma * std::sqrt(std::max(1 - part_of(update.delta), parameters_.kappa));
    return after;
  }

  const OpenSkillParameters parameters_;
  const SystemSpec spec_;
};

}  // namespace

Result<std::unique_ptr<RatingSystem>> MakeOpenSkill(const SystemSpec& spec,
                                                    Declaration declaration) {
  OpenSkillParameters parameters;
  SystemSpec named = spec;
  if (spec.model.empty() || spec.model == kPlackettLuceModel) {
    parameters.model = OpenSkillParameters::Model::kPlackettLuce;
    named.model = kPlackettLuceModel;
  } else if (spec.model == kBradleyTerryFullModel) {
    parameters.model = OpenSkillParameters::Model::kBradleyTerryFull;
  } else {
    return InvalidArgumentError("model: openskill has no model \"" + spec.model + "\" (it has " +
                                std::string(kPlackettLuceModel) + ", " +
                                std::string(kBradleyTerryFullModel) + ")");
  }
  internal::ParameterReader reader(named, declaration);
  reader.Read("mu", parameters.mu, internal::kRatingValueRange);
  reader.Read("sigma", parameters.sigma, internal::kUncertaintyRange);
  parameters.beta = parameters.sigma / 2;
  reader.Read("beta", parameters.beta, internal::kUncertaintyRange);
  reader.Read("kappa", parameters.kappa,
              {.least = 0, .most = 1, .least_excluded = true, .most_excluded = true});
  reader.Read("tau", parameters.tau, {.least = 0, .most = kMaxUncertainty});
  auto filled = reader.Finish();
  if (!filled.ok()) return filled.status();
  return std::unique_ptr<RatingSystem>(std::make_unique<OpenSkill>(parameters, std::move(*filled)));
}

}  // namespace verdict::rating
