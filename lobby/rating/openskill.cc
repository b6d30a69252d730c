#include "lobby/rating/openskill.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numbers>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "lobby/rating/checks.h"
#include "lobby/rating/inactivity.h"
#include "lobby/rating/openskill_prediction.h"
#include "lobby/rating/prediction.h"

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

// The standard normal distribution, and the paper's V, W (a win by x with draw margin t) and V~,
// W~ (a tie). Where a quotient's denominator is below what a double resolves, each falls back as
// openskill.py's does, at the same thresholds, so that the two agree there too.
double NormalPdf(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); }
double NormalCdf(double x) { return std::erfc(-x / std::numbers::sqrt2) / 2; }
constexpr double kResolvable = std::numeric_limits<double>::epsilon();

double V(double x, double t) {
  const double xt = x - t;
  const double denominator = NormalCdf(xt);
  return denominator < kResolvable ? -xt : NormalPdf(xt) / denominator;
}

double W(double x, double t) {
  const double xt = x - t;
  if (NormalCdf(xt) < kResolvable) return x < 0 ? 1 : 0;
  const double v = V(x, t);
  return v * (v + xt);
}

double VTie(double x, double t) {
  const double xx = std::abs(x);
  const double b = NormalCdf(t - xx) - NormalCdf(-t - xx);
  if (b < 1e-5) return x < 0 ? -x - t : -x + t;
  const double a = NormalPdf(-t - xx) - NormalPdf(t - xx);
  return (x < 0 ? -a : a) / b;
}

double WTie(double x, double t) {
  const double xx = std::abs(x);
  const double b = NormalCdf(t - xx) - NormalCdf(-t - xx);
  if (b < kResolvable) return 1;
  const double vt = VTie(x, t);
  return ((t - xx) * NormalPdf(t - xx) + (t + xx) * NormalPdf(-t - xx)) / b + vt * vt;
}

// What one comparison of team i with team q through c_iq adds to i's omega and delta.
// Bradley-Terry, Algorithm 1: i beats q with probability 1 / (1 + exp((mu_q - mu_i) / c_iq)),
// and a tie scores 1/2.
TeamUpdate BradleyTerryPair(const TeamSums& i, const TeamSums& q, double c_iq) {
  const double p_iq = 1 / (1 + std::exp((q.mu - i.mu) / c_iq));
  const double score = q.rank > i.rank ? 1.0 : q.rank == i.rank ? 0.5 : 0.0;
  const double eta = i.sigma_sq / c_iq;
  const double gamma = std::sqrt(i.sigma_sq) / c_iq;
  return {.omega = eta * (score - p_iq), .delta = gamma * eta / c_iq * p_iq * (1 - p_iq)};
}

// Thurstone-Mosteller, Algorithm 3: the normal distribution, with draw margin epsilon.
TeamUpdate ThurstoneMostellerPair(const TeamSums& i, const TeamSums& q, double c_iq,
                                  double epsilon) {
  const double x = (i.mu - q.mu) / c_iq;
  const double t = epsilon / c_iq;
  const double eta = i.sigma_sq / c_iq;
  const double gamma = std::sqrt(i.sigma_sq) / c_iq;
  if (q.rank > i.rank) return {.omega = eta * V(x, t), .delta = gamma * eta / c_iq * W(x, t)};
  if (q.rank < i.rank) return {.omega = -eta * V(-x, t), .delta = gamma * eta / c_iq * W(-x, t)};
  return {.omega = eta * VTie(x, t), .delta = gamma * eta / c_iq * WTie(x, t)};
}

bool IsThurstoneMosteller(OpenSkillParameters::Model model) {
  return model == OpenSkillParameters::Model::kThurstoneMostellerFull ||
         model == OpenSkillParameters::Model::kThurstoneMostellerPart;
}

bool IsPart(OpenSkillParameters::Model model) {
  return model == OpenSkillParameters::Model::kBradleyTerryPart ||
         model == OpenSkillParameters::Model::kThurstoneMostellerPart;
}

// The four pairwise models. Full: every other team, summed. Part: the window_size teams on either
// side in placement order (ties in input order, as openskill.py's stable sort leaves them), the
// mean over them. The teams are visited in placement order in both, as openskill.py sums them.
std::vector<TeamUpdate> Pairwise(const std::vector<TeamSums>& teams,
                                 const OpenSkillParameters& parameters) {
  const size_t count = teams.size();
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return teams[a].rank < teams[b].rank; });
  const bool thurstone = IsThurstoneMosteller(parameters.model);
  const bool part = IsPart(parameters.model);
  // A mode stored under wider ranges may hold any finite window (Declaration::kStored): brought
  // within the range, it converts to a size.
  const auto window =
      static_cast<size_t>(std::clamp(std::floor(parameters.window_size), 1.0, kMaxOpenSkillWindow));
  const double beta_sq = parameters.beta * parameters.beta;

  std::vector<TeamUpdate> updates(count);
  for (size_t a = 0; a < count; ++a) {
    const TeamSums& team = teams[order[a]];
    const size_t first = part && a > window ? a - window : 0;
    const size_t last = part ? std::min(count, a + window + 1) : count;
    TeamUpdate sum;
    for (size_t b = first; b < last; ++b) {
      if (b == a) continue;
      const TeamSums& other = teams[order[b]];
      double c_iq = std::sqrt(team.sigma_sq + other.sigma_sq + 2 * beta_sq);
      // openskill.py's Thurstone-Mosteller part model doubles c_iq (see openskill.h).
      if (thurstone && part) c_iq *= 2;
      const TeamUpdate pair = thurstone
                                  ? ThurstoneMostellerPair(team, other, c_iq, parameters.epsilon)
                                  : BradleyTerryPair(team, other, c_iq);
      sum.omega += pair.omega;
      sum.delta += pair.delta;
    }
    const double compared = static_cast<double>(last - first - 1);
    if (part && compared > 0) sum = {.omega = sum.omega / compared, .delta = sum.delta / compared};
    updates[order[a]] = sum;
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

  Result<Prediction> Predict(const std::vector<std::vector<Rating>>& teams) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckProposal(*this, teams));
    return internal::PredictWengLin(teams, parameters_.beta);
  }

  Result<Rating> Idle(const Rating& rating, double idle_days) const override {
    VERDICT_RETURN_IF_ERROR(internal::CheckIdle(*this, rating, idle_days));
    if (parameters_.tau_idle == 0) return rating;
    Rating aged = rating;
    // The cap kept within the bounds for a mode stored with a sigma beyond them.
    aged.deviation = internal::AgedDeviation(
        rating.deviation, idle_days * parameters_.tau_idle * parameters_.tau_idle,
        std::clamp(parameters_.sigma, kMinUncertainty, kMaxUncertainty));
    return aged;
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
            : Pairwise(sums, parameters_);

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
    // As openskill.py: the weight multiplies a gain and divides a loss; its Thurstone-Mosteller
    // part model counts an omega of exactly 0 as a loss.
    const bool gained = update.omega > 0 ||
                        (update.omega == 0 &&
                         parameters_.model != OpenSkillParameters::Model::kThurstoneMostellerPart);
    const double ratio = sigma * sigma / team_sigma_sq;
    const auto part_of = [&](double x) { return gained ? ratio * x * weight : ratio * x / weight; };
    Rating after = before;
    after.value = before.value + part_of(update.omega);
    after.deviation = sigma * std::sqrt(std::max(1 - part_of(update.delta), parameters_.kappa));
    if (parameters_.limit_sigma == 1) after.deviation = std::min(after.deviation, before.deviation);
    return after;
  }

  const OpenSkillParameters parameters_;
  const SystemSpec spec_;
};

}  // namespace

namespace {

// Every model by its name; the first is the default.
struct NamedModel {
  std::string_view name;
  OpenSkillParameters::Model model;
};
constexpr NamedModel kModels[] = {
    {kPlackettLuceModel, OpenSkillParameters::Model::kPlackettLuce},
    {kBradleyTerryFullModel, OpenSkillParameters::Model::kBradleyTerryFull},
    {kBradleyTerryPartModel, OpenSkillParameters::Model::kBradleyTerryPart},
    {kThurstoneMostellerFullModel, OpenSkillParameters::Model::kThurstoneMostellerFull},
    {kThurstoneMostellerPartModel, OpenSkillParameters::Model::kThurstoneMostellerPart},
};

// The model `spec` names, its name filled in where the spec leaves it empty.
Status ReadModel(SystemSpec& spec, OpenSkillParameters& parameters) {
  if (spec.model.empty()) spec.model = kModels[0].name;
  std::string known;
  for (const NamedModel& named : kModels) {
    if (spec.model == named.name) {
      parameters.model = named.model;
      return Status::Ok();
    }
    known += (known.empty() ? "" : ", ") + std::string(named.name);
  }
  return InvalidArgumentError("model: openskill has no model \"" + spec.model + "\" (it has " +
                              known + ")");
}

}  // namespace

Result<std::unique_ptr<RatingSystem>> MakeOpenSkill(const SystemSpec& spec,
                                                    Declaration declaration) {
  OpenSkillParameters parameters;
  SystemSpec named = spec;
  VERDICT_RETURN_IF_ERROR(ReadModel(named, parameters));
  internal::ParameterReader reader(named, declaration);
  reader.Read("mu", parameters.mu, internal::kRatingValueRange);
  reader.Read("sigma", parameters.sigma, internal::kUncertaintyRange);
  parameters.beta = parameters.sigma / 2;
  reader.Read("beta", parameters.beta, internal::kUncertaintyRange);
  reader.Read("kappa", parameters.kappa,
              {.least = 0, .most = 1, .least_excluded = true, .most_excluded = true});
  reader.Read("tau", parameters.tau, {.least = 0, .most = kMaxUncertainty});
  if (IsThurstoneMosteller(parameters.model)) {
    reader.Read("epsilon", parameters.epsilon, internal::kUncertaintyRange);
  }
  if (IsPart(parameters.model)) {
    reader.Read("window_size", parameters.window_size,
                {.least = 1, .most = kMaxOpenSkillWindow, .whole = true});
  }
  reader.ReadIfGiven("limit_sigma", parameters.limit_sigma, {.least = 0, .most = 1, .whole = true});
  reader.ReadIfGiven("tau_idle", parameters.tau_idle, {.least = 0, .most = kMaxUncertainty});
  auto filled = reader.Finish();
  if (!filled.ok()) return filled.status();
  return std::unique_ptr<RatingSystem>(std::make_unique<OpenSkill>(parameters, std::move(*filled)));
}

}  // namespace verdict::rating
