#include "lobby/rating/prediction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace verdict::rating::internal {

Status CheckProposal(const RatingSystem& system, const std::vector<std::vector<Rating>>& teams) {
  // A room of the proposed teams, every rank and weight valid, so that CheckRoom judges exactly
  // what Rate would: one validation of a room.
  std::vector<PlacedTeam> room(teams.size());
  for (size_t t = 0; t < teams.size(); ++t) {
    for (const Rating& rating : teams[t]) room[t].players.push_back(RatedPlayer{.rating = rating});
  }
  return CheckRoom(system, room);
}

namespace {

// Placements by `win`, highest first; equal values share a placement and the next is skipped
// (competition ranking, as openskill.py's predict_rank). Ties are compared exactly: teams of the
// same ratings get the same arithmetic, so the same probability.
std::vector<uint32_t> PlacementsByWin(const std::vector<double>& win) {
  std::vector<size_t> order(win.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return win[a] > win[b]; });
  std::vector<uint32_t> rank(win.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const bool tied = k > 0 && win[order[k]] == win[order[k - 1]];
    rank[order[k]] = tied ? rank[order[k - 1]] : static_cast<uint32_t>(k + 1);
  }
  return rank;
}

}  // namespace

Prediction FromPairwise(const std::vector<std::vector<double>>& beats) {
  const size_t count = beats.size();
  Prediction prediction;
  prediction.win.assign(count, 0);
  double total = 0;
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = 0; j < count; ++j) {
      if (j != i) prediction.win[i] += beats[i][j];
    }
    prediction.win[i] /= static_cast<double>(count - 1);
    total += prediction.win[i];
  }
  // total is count / 2 in exact arithmetic (beats[i][j] + beats[j][i] = 1); dividing by the
  // computed one makes the rounded probabilities sum to 1.
  for (double& win : prediction.win) win /= total;
  prediction.rank = PlacementsByWin(prediction.win);
  return prediction;
}

double EvenOddsQuality(const std::vector<std::vector<double>>& beats) {
  double sum = 0;
  size_t pairs = 0;
  for (size_t i = 0; i < beats.size(); ++i) {
    for (size_t j = i + 1; j < beats.size(); ++j) {
      sum += 1 - std::abs(beats[i][j] - beats[j][i]);
      ++pairs;
    }
  }
  return std::clamp(sum / static_cast<double>(pairs), 0.0, 1.0);
}

}  // namespace verdict::rating::internal
