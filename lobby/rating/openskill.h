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
//   - "thurstone_mosteller_full": Algorithm 3, every pair of teams compared through the normal
//     distribution with a draw margin epsilon (the paper's V, W and, for a tie, V~, W~).
//   - "bradley_terry_part" and "thurstone_mosteller_part": Algorithm 2 and its Thurstone-Mosteller
//     counterpart as openskill.py 6.2.0 computes them: with the teams in placement order (ties in
//     input order), each compared with the window_size teams on either side of it, and its omega
//     and delta the mean over those comparisons. openskill.py's Thurstone-Mosteller part model
//     takes c_iq as twice the full model's, and it is kept. With three or more teams,
//     openskill.js's part models rate otherwise: only openskill.py is the reference for them.
// In every model, gamma = sqrt(team sigma^2) / c (c_iq for the pairwise ones), the paper's and
// the implementations' default.
//
// Parameters: mu (25) and sigma (25/3) of a new player, beta (sigma / 2 of the given sigma: the
// spread of a performance), kappa (0.0001: the least a variance may shrink to, as a fraction),
// tau (0: when > 0, every player's sigma becomes sqrt(sigma^2 + tau^2) before the room is rated,
// as openskill.py and openskill.js do with theirs), epsilon (0.1: the Thurstone-Mosteller draw
// margin), window_size (4: how many neighbours a part model compares), limit_sigma (0: when 1,
// no sigma ends a room above the sigma it started with, tau included). Balance and score margins
// (openskill.py 6.x) are left out.
//
// openskill.py 6.2.0's fixtures (tests/models/data/*.json), which tests/lobby/rating_test.cc
// matches, were made by models built with only mu and sigma given: so beta = 25/6 (not sigma / 2),
// kappa = 0.0001, epsilon = 0.1, window_size = 4 and tau = 25/300, openskill.py's default, where
// ours is 0. Its rate() also takes a tau, and falls back to the model's when given 0 (`tau if tau
// else self.tau`): a call rate(..., tau=0) on a default openskill.py model rates with 25/300. And
// its rate(limit_sigma=True) sets the flag on the model for every later call: the fixture's "ties"
// and "weights" games, generated after its "limit_sigma" one, were rated with limit_sigma on (no
// sigma in them would have risen, so it changes none of their numbers, nor those of the
// "limit_sigma" game itself). Its "margins" game starts every team at the same rating, where a
// margin, which divides the difference of the teams' means, moves nothing: it tests the
// contribution weights and a tie, not margins.
//
// Partial play (RatedPlayer::share): a player of share s ends the room s of the way from its
// rating to the rating the model gives it as a full player (its mu by s of the change, its sigma
// by s of the change of variance; checks.h, MovedByShare), and every other player of the room is
// rated as if it had played all of it. So share 0 leaves the rating untouched (tau not added
// either: the player took no part), and a player who left half way gains half of a win and loses
// half of a loss. The team's strength is still the sum over its whole roster: the placement is the
// roster's, and a share tempers only what the room teaches about the one player.
//
// Contribution weights (RatedPlayer::contribution), openskill.py 6.2.0's `weights`: within each
// team they are rescaled linearly to [1, 2] (the team's least to 1, its greatest to 2; all equal:
// all 1), and a player's part of the team's change of mu, and of its shrink of variance, is
// multiplied by that weight where the team gained (omega >= 0; > 0 in the Thurstone-Mosteller
// part model, as there) and divided by it where the team lost. Only the differences within a team
// count. One deviation: a team of one player has nothing to compare its contribution with and is
// rated at weight 1, where openskill.py rescales a lone weight to 2 (which would double a solo
// winner's gain because someone else's weight was given). They are not a share: a player of the
// least contribution in a losing team loses twice as much as its teammate of the greatest. The
// contribution weights act within the full player's rating; the share then applies to it.
//
// Numerics: Plackett-Luce's exp(mu / c) terms are taken relative to the largest of each sum (a
// log-sum-exp), the same quotients without overflow for ratings far from 25; the normal
// distribution's tails are taken with erfc, and V, W, V~ and W~ fall back where their quotients
// are not representable as openskill.py's do (at the same thresholds); a rating whose
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
#include <string_view>

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {

inline constexpr std::string_view kOpenSkillSystem = "openskill";
inline constexpr std::string_view kPlackettLuceModel = "plackett_luce";
inline constexpr std::string_view kBradleyTerryFullModel = "bradley_terry_full";
inline constexpr std::string_view kBradleyTerryPartModel = "bradley_terry_part";
inline constexpr std::string_view kThurstoneMostellerFullModel = "thurstone_mosteller_full";
inline constexpr std::string_view kThurstoneMostellerPartModel = "thurstone_mosteller_part";

// The largest window_size a part model may declare: any window at least the number of teams less
// one compares every pair, so a larger one means nothing more.
inline constexpr double kMaxOpenSkillWindow = 1000;

struct OpenSkillParameters {
  enum class Model {
    kPlackettLuce,
    kBradleyTerryFull,
    kBradleyTerryPart,
    kThurstoneMostellerFull,
    kThurstoneMostellerPart,
  };
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
  // The Thurstone-Mosteller models' draw margin, in mu's units. Default: 0.1. From
  // kMinUncertainty to kMaxUncertainty. Only those models have it.
  double epsilon = 0.1;
  // How many teams on either side of a team, in placement order, a part model compares it with.
  // Default: 4. A whole number from 1 to kMaxOpenSkillWindow. Only the part models have it.
  double window_size = 4;
  // 1: no player's sigma ends a room above the sigma it started it with. Default: 0. 0 or 1. A
  // mode's spec names it only if its declaration gives it (checks.h, ReadIfGiven).
  double limit_sigma = 0;
  // How much sigma an idle player gains per day, in quadrature (Idle). Default: 0, no aging. From
  // 0 to kMaxUncertainty. A mode's spec names it only if its declaration gives it.
  double tau_idle = 0;
};

// The "openskill" system `spec` names (model "plackett_luce", "bradley_terry_full",
// "bradley_terry_part", "thurstone_mosteller_full", "thurstone_mosteller_part" or empty;
// parameters "mu", "sigma", "beta", "kappa", "tau", "limit_sigma", "tau_idle", "epsilon" for the
// Thurstone-Mosteller models, "window_size" for the part models); INVALID_ARGUMENT naming the
// field otherwise ("model", "parameters.epsilon").
Result<std::unique_ptr<RatingSystem>> MakeOpenSkill(const SystemSpec& spec,
                                                    Declaration declaration = Declaration::kNew);

}  // namespace verdict::rating
