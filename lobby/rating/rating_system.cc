#include "lobby/rating/rating_system.h"

#include <cmath>

namespace verdict::rating {
namespace {

// Elo over two teams: each player of a team moves by round(K * (S - E)) from the team's average.
class TwoTeamElo final : public RatingSystem {
 public:
  explicit TwoTeamElo(SystemSpec spec) : spec_(std::move(spec)) {}
  const SystemSpec& spec() const override { return spec_; }
  Rating Initial() const override { return {spec_.parameters.at("initial_rating"), 0, 0}; }
  double Displayed(const Rating& r) const override { return r.value; }
  Status Accepts(const std::vector<size_t>& sizes) const override {
    if (sizes.size() != 2) return InvalidArgumentError("elo rates two teams");
    return Status::Ok();
  }
  std::vector<std::vector<Rating>> Rate(const std::vector<PlacedTeam>& teams) const override {
    const double k = spec_.parameters.at("k");
    double average[2] = {0, 0};
    for (int t = 0; t < 2; ++t) {
      for (const RatedPlayer& p : teams[t].players) average[t] += p.rating.value;
      average[t] /= static_cast<double>(teams[t].players.size());
    }
    std::vector<std::vector<Rating>> out(2);
    for (int t = 0; t < 2; ++t) {
      const double s = teams[t].rank == teams[1 - t].rank  ? 0.5
                       : teams[t].rank < teams[1 - t].rank ? 1.0
                                                           : 0.0;
      const double e = 1.0 / (1.0 + std::pow(10.0, (average[1 - t] - average[t]) / 400.0));
      const double delta = std::round(k * (s - e));
      for (const RatedPlayer& p : teams[t].players)
        out[t].push_back({p.rating.value + delta, 0, 0});
    }
    return out;
  }

 private:
  const SystemSpec spec_;
};

}  // namespace

Result<std::unique_ptr<RatingSystem>> MakeRatingSystem(const SystemSpec& spec) {
  if (spec.system != "elo") return InvalidArgumentError("unknown rating system " + spec.system);
  SystemSpec full = spec;
  full.parameters.try_emplace("k", 32);
  full.parameters.try_emplace("initial_rating", 1500);
  return std::unique_ptr<RatingSystem>(std::make_unique<TwoTeamElo>(std::move(full)));
}

Rating ApplyChange(const Rating& current, const Rating& before, const Rating& after) {
  if (current == before) return after;
  Rating moved = current;
  moved.value += after.value - before.value;
  if (before.deviation > 0) moved.deviation *= after.deviation / before.deviation;
  if (before.volatility > 0) moved.volatility *= after.volatility / before.volatility;
  return moved;
}

}  // namespace verdict::rating
