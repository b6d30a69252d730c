// RatingSystem: the one seam between a settlement and the mathematics of a rating system. The
// settlement hands it a room's teams as placed, each player with the rating the room is rated from,
// and gets back every player's new rating; nothing else of the lobby is known here (no database, no
// wire types). A system is one file beside this one (elo.cc, openskill.cc, glicko2.cc) with its
// tests; adding one means adding it to the list of known systems (rating_system.cc). Pure
// functions of their inputs: any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace verdict::rating {

// The bounds every rating of every system lies within, in the system's own numbers: what an
// import must meet and what Rate returns (a rating it would move beyond stops at the bound).
// Far beyond any ladder (an Elo 1,000,000 is 2,500 steps of ten-to-one odds above 0), they keep
// every number exact where it must be (an Elo rating is a whole number, exact in a double and in
// the API's 32-bit `elo`), every displayed rating finite, and every system's arithmetic within
// the range its iterations are proven for.
inline constexpr double kMaxRatingValue = 1e6;
// A deviation or volatility a system uses is between these; one it does not use is 0.
inline constexpr double kMinUncertainty = 1e-6;
inline constexpr double kMaxUncertainty = 1e6;

// `value` within +-kMaxRatingValue (NaN: 0): what is safe to convert to a 32-bit integer. Every
// rating the lobby stores is within the bounds; a row stored before they were kept may not be,
// and is shown at the bound rather than wrapped.
double WithinRatingBounds(double value);

// A player's rating in one mode, in the system's own numbers.
struct Rating {
  double value = 0;       // Elo's rating, OpenSkill's mu, Glicko-2's r (on the Glicko scale)
  double deviation = 0;   // OpenSkill's sigma, Glicko-2's RD; 0 for Elo
  double volatility = 0;  // Glicko-2's sigma; 0 for the others
  bool operator==(const Rating&) const = default;
};

// One player of a room to be rated.
struct RatedPlayer {
  // The rating the room is rated from (the player's rating at allocation).
  Rating rating;
  // The part of the match the player played, in [0, 1]. Every system moves a player of share s by
  // s of the change it would make had the player played all of it (the value by s of its change,
  // each uncertainty by s of its change of variance; MovedByShare in checks.h), and rates
  // everyone else exactly as if the player had: 0 leaves the rating as it was, and a part-time
  // player moves less than a full teammate, up or down. Default: 1, all of it.
  double share = 1.0;
  // OpenSkill only: the player's contribution to the team's performance relative to its
  // teammates, openskill.py's `weights` (lobby/rating/openskill.h), finite and >= 0. Other
  // systems ignore it. Default: 1; equal contributions within a team are none.
  double contribution = 1.0;
};

// One team of a room, as placed: rank 1 is best, equal ranks tie.
struct PlacedTeam {
  std::vector<RatedPlayer> players;
  uint32_t rank = 1;
};

// What a mode's declaration says of its rating system: the system's name, its variant (one of
// OpenSkill's models, "plackett_luce", "thurstone_mosteller_full", ... (openskill.h); empty: the
// system's default) and its numeric parameters by name. A parameter left out takes the system's
// default.
struct SystemSpec {
  std::string system;  // one of KnownSystems()
  std::string model;
  std::map<std::string, double> parameters;
  bool operator==(const SystemSpec&) const = default;
};

// What a system predicts of a proposed match (RatingSystem::Predict), for a matchmaker choosing
// among rooms. Each system's header says how it computes each number.
struct Prediction {
  // Per team, in input order: the probability that it comes first. Sums to 1.
  std::vector<double> win;
  // The probability of a draw; 0 for a system that has no model of one (Elo and Glicko-2 count a
  // draw as half a win in their expected score).
  double draw = 0;
  // Per team, in input order: its predicted placement by `win`, 1 the likeliest winner; teams of
  // equal `win` share a placement and the next is skipped (1, 1, 3), as openskill.py's
  // predict_rank places them.
  std::vector<uint32_t> rank;
  // In [0, 1]: 1 a match as even as the system can know one, toward 0 a foregone one.
  double quality = 0;
};

// A season's soft reset (RatingSystem::ResetForSeason): every rating drawn toward `mean`, keeping
// `keep` of its distance from it, value' = mean + keep (value - mean), and its deviation raised to
// at least `deviation`: a new season starts from ratings that still order the players but trust
// the order less.
struct SeasonReset {
  // What the values are drawn toward, usually the mode's Initial().value. Within
  // +-kMaxRatingValue.
  double mean = 0;
  // The fraction of each value's distance from `mean` that it keeps: 1 leaves it, 0 puts every
  // player at `mean`. From 0 to 1.
  double keep = 1;
  // The least deviation a rating has after the reset, where the system has one (OpenSkill's
  // sigma, Glicko-2's RD; Elo ignores it): a deviation already above it stays. From
  // kMinUncertainty to kMaxUncertainty where used.
  double deviation = kMinUncertainty;
};

class RatingSystem {
 public:
  virtual ~RatingSystem() = default;

  // The spec this system was made from, with every parameter it uses, defaults included: what a
  // mode stores and shows.
  virtual const SystemSpec& spec() const = 0;

  // The rating of a player new to the mode.
  virtual Rating Initial() const = 0;

  // Whether the system's ratings are whole Elo points, which the battle.settled event then also
  // reports as the integers elo_before and elo_after (what its readers from before modes read).
  // Default: false.
  virtual bool ReportsIntegerElo() const { return false; }

  // The conservative rating a leaderboard orders by: Elo's rating, OpenSkill's mu - 3 sigma,
  // Glicko-2's r - 2 RD.
  virtual double Displayed(const Rating& rating) const = 0;

  // OK if the system can rate a room whose teams have these sizes (in team order, each at least 1,
  // at least two teams); INVALID_ARGUMENT saying why not (Glicko-2 rates two teams of one).
  virtual Status Accepts(const std::vector<size_t>& team_sizes) const = 0;

  // OK if the system can rate from `rating`: what an imported rating must be, and what every
  // rating Rate returns is. Finite numbers within the bounds above (a value within
  // +-kMaxRatingValue, a deviation and volatility from 0 to kMaxUncertainty); Elo's value a whole
  // number, OpenSkill's and Glicko-2's deviation and Glicko-2's volatility at least
  // kMinUncertainty. INVALID_ARGUMENT naming the field ("deviation") and the bound otherwise.
  virtual Status CheckRating(const Rating& rating) const;

  // Every player's new rating, in the input's order (one vector per team, one rating per player).
  // Requires CheckRoom(*this, teams) to be OK (Accepts() of the team sizes, every rank between 1
  // and the number of teams, every share in [0, 1], every contribution finite and >= 0, every
  // rating passing CheckRating). A room that does not meet them is a caller's bug: it is answered
  // with every rating unchanged, never with a crash. From a room that meets them, every rating
  // returned passes CheckRating. Every iteration has a bound: INTERNAL naming the iteration if one
  // ends at its bound without converging (a bug: every parameter's range is one its iterations are
  // proven to converge in).
  virtual Result<std::vector<std::vector<Rating>>> Rate(
      const std::vector<PlacedTeam>& teams) const = 0;

  // What the system predicts of a match between `teams` (each team its players' ratings, in input
  // order), placements unknown. INVALID_ARGUMENT for what Rate could not rate, as CheckRoom says
  // it: sizes Accepts() refuses, or a rating failing CheckRating (naming the team, 1-based, and the
  // player, 0-based). Closed forms: no iteration without a bound.
  virtual Result<Prediction> Predict(const std::vector<std::vector<Rating>>& teams) const = 0;

  // `rating` after `idle_days` days without a rated match: the value and volatility stay, and the
  // deviation grows as the system says time adds to it, never beyond a new player's (Initial())
  // and never down (one already beyond it stays). Meant for the rating as the player's last match
  // left it with the whole time since, not applied day by day: a Glicko-2 period counts only
  // whole (see glicko2.h), and every growth is from the rating given. Unchanged for Elo (the
  // default: no deviation) and for a mode that declares no aging. INVALID_ARGUMENT naming
  // "idle_days" for a number of days that is negative or not finite, or "rating" for a rating
  // failing CheckRating.
  virtual Result<Rating> Idle(const Rating& rating, double idle_days) const;

  // `rating` after the season's soft reset `reset`; the result passes CheckRating. Default: the
  // value moved, the deviation raised, the volatility kept (OpenSkill, Glicko-2); Elo also rounds
  // the value to a whole number. INVALID_ARGUMENT naming the field of `reset` ("keep") out of its
  // range, or "rating" for a rating failing CheckRating.
  virtual Result<Rating> ResetForSeason(const Rating& rating, const SeasonReset& reset) const;
};

// OK if `teams` meets what `system.Rate` requires; INVALID_ARGUMENT naming the team (1-based, in
// input order) and player (0-based) otherwise. The settlement checks a room with it before Rate.
Status CheckRoom(const RatingSystem& system, const std::vector<PlacedTeam>& teams);

// Which parameters MakeRatingSystem takes.
enum class Declaration {
  // A mode being declared: every parameter within the range its system's arithmetic is proven for
  // (docs/modes.md, "Rating systems").
  kNew,
  // A mode declared before, as the database stores it: every finite value is taken, so that a mode
  // declared under wider ranges still settles. Its iterations are bounded all the same: a room they
  // cannot rate is recorded unchanged (Rate's INTERNAL), never a hang.
  kStored,
};

// The names of the systems MakeRatingSystem makes, in one list: "elo, openskill, glicko2".
std::string KnownSystems();

// The system `spec` names, with its parameters; INVALID_ARGUMENT naming the field for an unknown
// system, model or parameter, or a value out of range (a negative K, a zero sigma, ...; for
// kStored, only a value that is not finite).
Result<std::unique_ptr<RatingSystem>> MakeRatingSystem(const SystemSpec& spec,
                                                       Declaration declaration = Declaration::kNew);

// The compensation rule (docs/modes.md, "The compensation rule"): a room rated from ratings
// `before` (the players' ratings at allocation) that moved a player to `after` moves the player's
// `current` rating by the same change. The value moves by the difference after - before. The
// deviation and the volatility are uncertainties, and a room changes one in two ways, each
// applied to the current one as it acts on a variance:
//   - a room that shrank it (after < before: what the match taught) scales the current variance
//     by the same factor, current'^2 = current^2 * after^2 / before^2;
//   - a room that grew it (after > before: uncertainty a system adds before it rates, OpenSkill's
//     tau, or a Glicko-2 volatility that rose) adds the same variance,
//     current'^2 = current^2 + (after^2 - before^2).
// So a late room never moves an uncertainty further than it moved its own: never below 0, never
// up by more than it added, whatever the current one. The result is kept within
// [kMinUncertainty, kMaxUncertainty]. A number `before` does not have (0: Elo's deviation) is
// after's. With current == before the result is `after` exactly.
Rating ApplyChange(const Rating& current, const Rating& before, const Rating& after);

}  // namespace verdict::rating
