// Elo for rooms of any shape: system "elo". For two teams it is team Elo on the teams' mean
// ratings, rounded as PostgreSQL rounds (below); for more it compares every pair of teams. Made by
// MakeRatingSystem. Immutable once made: any thread.
//
// The rating of a team is the average of its players' ratings. Team i of T is compared with every
// other team j by their placements: S_ij = 1 for a better rank, 1/2 for the same, 0 for a worse,
// against the expectation E_ij = 1 / (1 + 10^((R_j - R_i) / 400)). The team's change is
//
//   Delta_i = K / (T - 1) * sum over j != i of (S_ij - E_ij),
//
// so each pair moves by K (S - E) scaled by 1 / (T - 1), and the teams' changes sum to zero. Each
// player of team i moves by Delta_i * n_mean / n_i (n_i the team's size, n_mean the room's mean
// team size): the room's player changes sum to zero before rounding whatever the team sizes, and
// with equal sizes the factor is 1. Two teams: Delta = K (S - E), today's formula.
//
// No player moves by more than K in one room. |Delta_i| is at most K, but the size factor is not
// bounded: a solo player against 199 has n_mean / n_i = 100, and a win at even odds would move it
// by 16 * 100 = 1600 points, the odds of 10,000 to 1 from one coin flip. So when the largest
// player change c_max of a room exceeds K, every player's change is multiplied by K / c_max: the
// room still sums to zero before rounding, the largest change is K (the most a 1v1 can move a
// player; after rounding the 1 v 199 below adds 32 points, within the rounding bound), and the
// others keep their proportions (1 vs 199 at even odds, the solo winner: +32, each of the 199:
// 8.04 * 32 / 1600 = 0.16, which rounds to 0). Teams of equal size never need it.
//
// Rounding: each player's change is rounded to a whole number, half away from zero, the way the
// settlement's SQL rounds: PostgreSQL casts K (S - E) from double precision to numeric at 15
// significant digits, then rounds. So ratings stay whole numbers, and a change that is a half in
// exact arithmetic rounds away from zero even when the double lies just below it (K = 33, 400
// points apart, a draw: 13.5, computed as 13.499999999999998, moves by 14 as today).
//
// The rounding residue (the sum of a room's player changes, zero before rounding, scaled or not) is
// a whole number of points:
//   - zero for two teams of equal size: the two changes are opposite to the digits kept, and
//     rounding half away from zero is symmetric;
//   - for T teams of n players each, n times the sum of the T rounded team changes: at most
//     n * floor(T / 2) points;
//   - in general, every player's rounding moves at most half a point: at most N / 2 points for N
//     players.
//
// Partial play: a player of share s (RatedPlayer::share) moves by round(s c), where c is the
// unrounded change above, the one its teammates who played all of it get; the team ratings, and
// so every other player's change, are as if it had played all of it. So share 0 moves nothing
// and a player who left half way gains and loses half. A room with shares below 1 sums to zero
// only before them: a share is less of this player's result counted, not points handed to the
// others (who played the same match whoever left it).
//
// Predict: the teams' ratings as Rate takes them (their players' mean), and each pair's expected
// score E_ij. A team's `win` is its mean E_ij over its opponents, normalized to sum to 1, which
// for two teams is E itself: Elo has no separate probability of a win, its expected score counting
// a draw as half of one, so `draw` is 0. `quality` is the mean over pairs of 1 - |E_ij - E_ji|
// (2 min(E, 1 - E) for two teams): 1 at even ratings, 0.5 at 190.8 points apart (E = 0.75).
//
// Idle: unchanged (an Elo rating has no uncertainty to grow). ResetForSeason: the value drawn
// toward the mean and rounded half away from zero to a whole number; no deviation.
#pragma once

#include <memory>
#include <string_view>

#include "common/status.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {

inline constexpr std::string_view kEloSystem = "elo";

// The largest K a mode may declare: a room then moves a player by at most 1,000 points, and a
// rating far from the bounds of rating_system.h stays clear of them.
inline constexpr double kMaxEloK = 1000;

struct EloParameters {
  // The change of a pair's result, K in K (S - E): the most one room moves a player. Default: 32.
  // Must be > 0 and <= kMaxEloK.
  double k = 32;
  // The rating of a player new to the mode. Default: 1500. Must be a whole number within
  // +-kMaxRatingValue.
  double initial_rating = 1500;
};

// A change of `unrounded` points rounded to a whole number as the settlement's SQL rounds it:
// double precision cast to numeric (15 significant digits), then half away from zero.
double RoundEloChange(double unrounded);

// The "elo" system `spec` names (no model; parameters "k" and "initial_rating");
// INVALID_ARGUMENT naming the field otherwise.
Result<std::unique_ptr<RatingSystem>> MakeElo(const SystemSpec& spec,
                                              Declaration declaration = Declaration::kNew);

}  // namespace verdict::rating
