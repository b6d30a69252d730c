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

struct Glicko2Parameters {
  // The system constant. Default: 0.5. From kMinGlicko2Tau to kMaxGlicko2Tau.
  double tau = 0.5;
  // A new player's r. Default: 1500. Within +-kMaxRatingValue.
  double initial_rating = 1500;
  // A new player's RD. Default: 350. From kMinUncertainty to kMaxUncertainty.
  double initial_deviation = 350;
  // A new player's sigma. Default: 0.06. From kMinUncertainty to kMaxUncertainty.
  double initial_volatility = 0.06;
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

// The "glicko2" system `spec` names (no model; parameters "tau", "initial_rating",
// "initial_deviation", "initial_volatility"); INVALID_ARGUMENT naming the field otherwise.
Result<std::unique_ptr<RatingSystem>> MakeGlicko2(const SystemSpec& spec,
                                                  Declaration declaration = Declaration::kNew);

}  // namespace verdict::rating
