// Glicko-2 (Mark E. Glickman, "Example of the Glicko-2 system", glicko.net/glicko/glicko2.pdf):
// system "glicko2", for rooms of two players, one per team; each match is one rating period. The
// rating-period function is here so that it can be checked against the paper's worked example.
// Made by MakeRatingSystem. Immutable once made: any thread.
//
// A rating is (r, RD, sigma) on the Glicko scale in Rating's value, deviation and volatility; the
// leaderboard shows r - 2 RD. The period is computed on the Glicko-2 scale
// (mu = (r - 1500) / 173.7178, phi = RD / 173.7178), steps 1 to 8 of the paper, the new
// volatility found with the Illinois iteration of step 5 to epsilon = 0.000001.
//
// Parameters: tau (0.5: the system constant, how far volatility may move), and a new player's
// initial_rating (1500), initial_deviation (350) and initial_volatility (0.06).
//
// Partial play: a player of share s (RatedPlayer::share) ends the room s of the way from its
// rating to the one the rating period gives it (r by s of the change, RD and volatility by s of
// their change of variance; checks.h, MovedByShare); its opponent is rated as if it had played
// all of it. Share 0 leaves the rating as it was, the RD not widened either: the player took no
// part. Glickman's system has no partial games; scaling the period's result is a reading
// that keeps the period itself (and its worked example) exact.
//
// Predict (two players): the probability that a beats b, Glickman's expected outcome of a game
// between two rated players, 1 / (1 + exp(-g(sqrt(phi_a^2 + phi_b^2)) (mu_a - mu_b))): step 3's
// E with both players' uncertainty, which the rating step gives only the opponent's (its
// player's is in phi itself). Symmetric: the two sum to 1. Glicko-2 has no model of a draw, a
// draw being half a win in E: `draw` is 0, and `quality` is 2 min(p, 1 - p), 1 at even odds.
//
// Idle: a mode that declares period_days (days, > 0 and <= kMaxGlicko2PeriodDays) ages a player
// by step 6 once for each whole period idle, phi' = sqrt(phi^2 + sigma^2) per period: after n
// periods sqrt(phi^2 + n sigma^2) (the volatility does not move without games), at most the
// initial_deviation. Without period_days the rating does not age. ResetForSeason: the default
// of rating_system.h, the volatility kept.
//
// Numerics: E (1 - E) and s - E are computed from the two logistic tails, which the textbook
// difference 1 - E loses for ratings thousands of points apart; a rating whose arithmetic still
// leaves the range of doubles stays as it was, and one that would leave the bounds of
// rating_system.h stops at them.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {

inline constexpr std::string_view kGlicko2System = "glicko2";

// The range of tau a mode may declare. Glickman suggests 0.3 to 1.2; the range is wider, and
// within it step 5's iteration is proven to end (glicko2.cc, NewVolatility): up to 10 its bracket
// search ends within 5 steps. The floor is a choice, not a limit of the arithmetic: a - k tau stays
// distinct from a (|a| <= 28 for the volatilities a rating may have) down to a tau of about 1e-14,
// below which the search could not move (1e-30 never ended); a tau under 0.01 would hold every
// volatility all but fixed, which no mode needs.
inline constexpr double kMinGlicko2Tau = 0.01;
inline constexpr double kMaxGlicko2Tau = 10;

// The longest rating period an idle player may be aged by: ten years. A longer one would never
// age anybody within a ladder's life.
inline constexpr double kMaxGlicko2PeriodDays = 3650;

struct Glicko2Parameters {
  // The system constant. Default: 0.5. From kMinGlicko2Tau to kMaxGlicko2Tau.
  double tau = 0.5;
  // A new player's r. Default: 1500. Within +-kMaxRatingValue.
  double initial_rating = 1500;
  // A new player's RD. Default: 350. From kMinUncertainty to kMaxUncertainty.
  double initial_deviation = 350;
  // A new player's sigma. Default: 0.06. From kMinUncertainty to kMaxUncertainty.
  double initial_volatility = 0.06;
  // The days of one rating period for aging an idle player (Idle). Default: 0, none: no aging.
  // Given, over 0 and at most kMaxGlicko2PeriodDays.
  double period_days = 0;
};

// One game of a rating period: the opponent's rating at the start of the period and the score
// (1 a win, 1/2 a draw, 0 a loss).
struct Glicko2Game {
  Rating opponent;
  double score = 0;
};

// The tolerance of step 5's iteration, the paper's epsilon.
inline constexpr double kGlicko2Epsilon = 0.000001;

// The player's rating after one rating period with these games, system constant `tau`
// (Glickman's steps 1-8). No games: only the deviation grows, to sqrt(phi^2 + sigma^2) (step 6).
// Meant for `player` and every opponent passing the system's CheckRating and tau within
// [kMinGlicko2Tau, kMaxGlicko2Tau], where it converges; whatever the input, step 5's two
// iterations are bounded, and INTERNAL says which one reached its bound.
Result<Rating> Glicko2RatingPeriod(const Rating& player, const std::vector<Glicko2Game>& games,
                                   double tau);

// Glickman's g(phi) = 1 / sqrt(1 + 3 phi^2 / pi^2), phi on the Glicko-2 scale: how much a
// deviation discounts a rating difference (step 3).
double Glicko2G(double phi);

// Step 3's E: the score `player` is expected to take from `opponent`,
// 1 / (1 + exp(-g(phi_opponent) (mu - mu_opponent))).
double Glicko2ExpectedScore(const Rating& player, const Rating& opponent);

// The "glicko2" system `spec` names (no model; parameters "tau", "initial_rating",
// "initial_deviation", "initial_volatility", "period_days"); INVALID_ARGUMENT naming the field
// otherwise.
Result<std::unique_ptr<RatingSystem>> MakeGlicko2(const SystemSpec& spec,
                                                  Declaration declaration = Declaration::kNew);

}  // namespace verdict::rating
