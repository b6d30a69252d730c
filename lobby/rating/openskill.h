// OpenSkill: the Weng-Lin Bayesian approximation (R. C. Weng and C.-J. Lin, "A Bayesian
// Approximation Method for Online Ranking", JMLR 12, 2011), system "openskill", as the openskill
// implementations compute it: openskill.py 6.2.0 (openskill/models/weng_lin/) and openskill.js
// 5.x (src/models/), whose published test vectors tests/lobby/rating_test.cc matches. Any number
// of teams of any size, placements with ties, an uncertainty per player. Made by
// MakeRatingSystem. Immutable once made: any thread.
//
// A rating is (mu, sigma) in Rating's value and deviation; the leaderboard shows mu - 3 sigma.
// A team's mu is the sum of its players' mu, its sigma^2 the sum of their sigma^2.
//
// Models (SystemSpec::model):
//   - "plackett_luce" (the default): Algorithm 4 of the paper, the whole placement at once; teams
//     that tie share their place (the paper's A_q).
//   - "bradley_terry_full": Algorithm 1, every pair of teams compared; a tie scores 1/2.
// In both, gamma = sqrt(team sigma^2) / c, the paper's and the implementations' default.
//
// Parameters: mu (25) and sigma (25/3) of a new player, beta (sigma / 2 of the given sigma: the
// spread of a performance), kappa (0.0001: the least a variance may shrink to, as a fraction),
// tau (0: when > 0, every player's sigma becomes sqrt(sigma^2 + tau^2) before the room is rated,
// as openskill.py and openskill.js do with theirs). The implementations' other options are left
// out: limit_sigma, balance and score margins (openskill.py 6.x) are off, as in the published
// vectors.
//
// Weights (partial play), as openskill.py 6.2.0 applies them: within each team the weights are
// rescaled linearly to [1, 2] (the team's least weight to 1, its greatest to 2; all equal: all 1),
// and a player's share of the team's change of mu, and of its shrink of variance, is multiplied
// by that weight where the team gained (omega >= 0) and divided by it where the team lost: the
// players who played most gain most and lose least. Only the differences within a team count,
// so a team whose players all played fully is rated as without weights. One deviation: a team of
// one player has nothing to compare its weight with and is rated at weight 1, where openskill.py
// rescales a lone weight to 2 (which would double a solo winner's gain because someone else
// left).
//
// Numerics: Plackett-Luce's exp(mu / c) terms are taken relative to the largest of each sum (a
// log-sum-exp), the same quotients without overflow for ratings far from 25; a rating whose
// arithmetic still leaves the range of doubles stays as it was, and one that would leave the
// bounds of rating_system.h stops at them. Closed forms only: no iteration.
//
// Many teams: Bradley-Terry compares every pair, and each pair moves mu by its own surprise, so a
// winner of 100 equal teams gains from 99 wins at once: +260.9 from 25 (openskill.js 5.0.1,
// rate() of 100 default ratings with bradleyTerryFull and tau 0: 285.8879069638908), while its
// sigma falls to the kappa floor (0.0833). That is the model as Weng and Lin state it and as the
// implementations compute it, and it is kept, to agree with them: bounding it would make a
// bradley_terry_full mode rate differently from every other implementation of the model.
// Plackett-Luce, the default, reads a placement as one ranking and moves the same winner far less
// (docs/modes.md gives both); a mode of many teams should use it.
//
// Predict (openskill_prediction.cc), for either model, as openskill.py 6.2.0 computes it: `win`
// is predict_win (for every pair Phi((mu_i - mu_j) / sqrt(2 beta^2 + sigma_i^2 + sigma_j^2)) over
// team sums, a team's mean over its opponents normalized), `rank` predict_rank's placements and
// `draw` predict_draw. `quality` is TrueSkill's match quality (Herbrich, Minka and Graepel, 2006)
// under the same beta, not the draw probability: predict_draw is at most 1/2 and falls as a room
// grows (its draw margin is set for a draw of probability 1 / players), so it could not compare a
// 1v1 with a 5v5, where TrueSkill's quality is 1 for any even match of exactly known ratings.
//
// Idle: a mode that declares tau_idle grows every idle player's sigma^2 by tau_idle^2 per day
// (fractions of a day included), at most to the mode's sigma; without it ratings do not age.
// ResetForSeason: the default of rating_system.h.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {

inline constexpr std::string_view kOpenSkillSystem = "openskill";
inline constexpr std::string_view kPlackettLuceModel = "plackett_luce";
inline constexpr std::string_view kBradleyTerryFullModel = "bradley_terry_full";

struct OpenSkillParameters {
  enum class Model { kPlackettLuce, kBradleyTerryFull };
  // Default: Plackett-Luce.
  Model model = Model::kPlackettLuce;
  // A new player's mu. Default: 25. Within +-kMaxRatingValue.
  double mu = 25;
  // A new player's sigma. Default: 25/3. From kMinUncertainty to kMaxUncertainty.
  double sigma = 25.0 / 3.0;
  // The spread of one performance. Default: sigma / 2 (of the sigma given). From kMinUncertainty
  // to kMaxUncertainty.
  double beta = 25.0 / 6.0;
  // The least fraction a player's variance keeps in one room. Default: 0.0001. Between 0 and 1.
  double kappa = 0.0001;
  // Added to every sigma (in quadrature) before a room is rated. Default: 0 (none). From 0 to
  // kMaxUncertainty.
  double tau = 0;
  // How much sigma an idle player gains per day, in quadrature (Idle). Default: none, no aging.
  // From 0 to kMaxUncertainty.
  std::optional<double> tau_idle;
};

// The "openskill" system `spec` names (model "plackett_luce", "bradley_terry_full" or empty;
// parameters "mu", "sigma", "beta", "kappa", "tau", "tau_idle"); INVALID_ARGUMENT naming the field
// otherwise.
Result<std::unique_ptr<RatingSystem>> MakeOpenSkill(const SystemSpec& spec,
                                                    Declaration declaration = Declaration::kNew);

}  // namespace verdict::rating
