// RatingSystem::Idle and RatingSystem::ResetForSeason of every system: Glicko-2's aging checked
// against Glickman's step 6, the rest worked by hand. Pure computation, no database.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lobby/rating/glicko2.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {
namespace {

Result<std::unique_ptr<RatingSystem>> MakeSpec(std::string system,
                                               std::map<std::string, double> parameters) {
  return MakeRatingSystem(SystemSpec{std::move(system), "", std::move(parameters)});
}

std::unique_ptr<RatingSystem> Make(std::string system,
                                   std::map<std::string, double> parameters = {}) {
  auto made = MakeSpec(std::move(system), std::move(parameters));
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

Rating IdleOk(const RatingSystem& system, const Rating& rating, double days) {
  auto aged = system.Idle(rating, days);
  EXPECT_TRUE(aged.ok()) << aged.status().ToString();
  return aged.ok() ? *aged : Rating{};
}

Rating ResetOk(const RatingSystem& system, const Rating& rating, const SeasonReset& reset) {
  auto reset_rating = system.ResetForSeason(rating, reset);
  EXPECT_TRUE(reset_rating.ok()) << reset_rating.status().ToString();
  if (!reset_rating.ok()) return Rating{};
  EXPECT_TRUE(system.CheckRating(*reset_rating).ok());
  return *reset_rating;
}

// The first words of a refusal's message: the field it names.
void ExpectRefusedNaming(const Result<Rating>& result, const std::string& field) {
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << field;
  EXPECT_EQ(result.status().message().rfind(field + ":", 0), 0u) << result.status().ToString();
}

Rating Glicko(double r, double rd, double volatility = 0.06) {
  return Rating{.value = r, .deviation = rd, .volatility = volatility};
}
Rating MuSigma(double mu, double sigma) { return Rating{.value = mu, .deviation = sigma}; }

// ---------------------------------------------------------------------------------------------
// Idle.

// Glickman, "Example of the Glicko-2 system", step 6, applied period by period: a player who does
// not compete keeps r and sigma, and phi' = sqrt(phi^2 + sigma^2), phi = RD / 173.7178. RD 50,
// volatility 0.06: after one period 173.7178 sqrt(0.287823^2 + 0.0036) = 51.0749, after 120
// sqrt(0.082842 + 120 (0.0036)) = 124.6469; RD 200 after one period 200.2714 (the paper's own
// phi* of 1.152862, its step 6).
TEST(IdleTest, Glicko2AgesByStepSixPerWholePeriod) {
  const auto system = Make("glicko2", {{"period_days", 1}});
  const Rating rd50 = Glicko(1500, 50);
  EXPECT_NEAR(IdleOk(*system, rd50, 1).deviation, 51.0749, 0.00005);
  const Rating after_120 = IdleOk(*system, rd50, 120);
  EXPECT_NEAR(after_120.deviation, 124.6469, 0.00005);
  EXPECT_EQ(after_120.value, 1500);
  EXPECT_EQ(after_120.volatility, 0.06);
  EXPECT_NEAR(IdleOk(*system, Glicko(1500, 200), 1).deviation, 200.2714, 0.00005);
  // The same as the rating period without games, one at a time.
  Rating stepped = rd50;
  for (int period = 0; period < 120; ++period)
    stepped = Glicko2RatingPeriod(stepped, {}, 0.5).value();
  EXPECT_NEAR(after_120.deviation, stepped.deviation, 1e-9);
}

// Only whole periods count: a week's period ages 13 days as one period and 6 days not at all.
TEST(IdleTest, Glicko2CountsWholePeriods) {
  const auto system = Make("glicko2", {{"period_days", 7}});
  const Rating rd50 = Glicko(1500, 50);
  EXPECT_EQ(IdleOk(*system, rd50, 6), rd50);
  EXPECT_NEAR(IdleOk(*system, rd50, 13).deviation, 51.0749, 0.00005);
  EXPECT_NEAR(IdleOk(*system, rd50, 7 * 120).deviation, 124.6469, 0.00005);
}

// The deviation grows to a new player's and no further; one already beyond it stays.
TEST(IdleTest, AgingStopsAtTheInitialDeviation) {
  const auto glicko2 = Make("glicko2", {{"period_days", 1}, {"initial_deviation", 300}});
  EXPECT_EQ(IdleOk(*glicko2, Glicko(1500, 50), 1e6).deviation, 300);
  EXPECT_EQ(IdleOk(*glicko2, Glicko(1500, 320), 10).deviation, 320);
  EXPECT_EQ(IdleOk(*glicko2, Glicko(1500, 50), std::numeric_limits<double>::max()).deviation, 300);
  const auto openskill = Make("openskill", {{"tau_idle", 1}});
  EXPECT_NEAR(IdleOk(*openskill, MuSigma(30, 2), 1e9).deviation, 25.0 / 3.0, 1e-12);
  EXPECT_EQ(IdleOk(*openskill, MuSigma(30, 9), 10).deviation, 9);
}

// OpenSkill adds tau_idle^2 to sigma^2 per day: sigma 2, tau_idle 0.5, 12 days:
// sqrt(4 + 12 (0.25)) = sqrt(7) = 2.6457513; half a day: sqrt(4.125) = 2.0310096.
TEST(IdleTest, OpenSkillAddsTauIdleSquaredPerDay) {
  const auto system = Make("openskill", {{"tau_idle", 0.5}});
  const Rating aged = IdleOk(*system, MuSigma(30, 2), 12);
  EXPECT_NEAR(aged.deviation, std::sqrt(7.0), 1e-12);
  EXPECT_NEAR(aged.deviation, 2.6457513, 1e-7);
  EXPECT_EQ(aged.value, 30);
  EXPECT_NEAR(IdleOk(*system, MuSigma(30, 2), 0.5).deviation, 2.0310096, 1e-7);
}

// Elo has no uncertainty, and a mode that declares no aging does not age.
TEST(IdleTest, NothingAgesWithoutAParameterOrADeviation) {
  EXPECT_EQ(IdleOk(*Make("elo"), Rating{.value = 1500}, 400), Rating{.value = 1500});
  EXPECT_EQ(IdleOk(*Make("glicko2"), Glicko(1500, 50), 400), Glicko(1500, 50));
  EXPECT_EQ(IdleOk(*Make("openskill"), MuSigma(30, 2), 400), MuSigma(30, 2));
  EXPECT_EQ(IdleOk(*Make("openskill", {{"tau_idle", 0.5}}), MuSigma(30, 2), 0), MuSigma(30, 2));
}

TEST(IdleTest, RefusesBadDaysAndRatings) {
  const auto system = Make("glicko2", {{"period_days", 1}});
  for (double days :
       {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    ExpectRefusedNaming(system->Idle(Glicko(1500, 50), days), "idle_days");
  }
  ExpectRefusedNaming(system->Idle(Glicko(1500, 0), 1), "rating");
  ExpectRefusedNaming(Make("elo")->Idle(Rating{.value = 1500.5}, 1), "rating");
}

// The aging parameters: a period of 0 or beyond ten years is refused by name, as a negative
// tau_idle; a mode that gives neither keeps the spec it had (they are listed only when given).
TEST(IdleTest, AgingParametersAreCheckedAndListedOnlyWhenGiven) {
  for (double days : {0.0, -1.0, 3650.5, std::numeric_limits<double>::infinity()}) {
    const auto made = MakeSpec("glicko2", {{"period_days", days}});
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument) << days;
    EXPECT_EQ(made.status().message().rfind("parameters.period_days:", 0), 0u)
        << made.status().ToString();
  }
  EXPECT_TRUE(MakeSpec("glicko2", {{"period_days", kMaxGlicko2PeriodDays}}).ok());
  const auto negative = MakeSpec("openskill", {{"tau_idle", -0.1}});
  EXPECT_EQ(negative.status().message().rfind("parameters.tau_idle:", 0), 0u)
      << negative.status().ToString();
  EXPECT_EQ(Make("glicko2")->spec().parameters.count("period_days"), 0u);
  EXPECT_EQ(Make("openskill")->spec().parameters.count("tau_idle"), 0u);
  EXPECT_EQ(Make("glicko2", {{"period_days", 7}})->spec().parameters.at("period_days"), 7);
  EXPECT_EQ(Make("openskill", {{"tau_idle", 0.2}})->spec().parameters.at("tau_idle"), 0.2);
  // Elo has neither.
  EXPECT_EQ(MakeSpec("elo", {{"period_days", 7}}).status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// ResetForSeason: value' = mean + keep (value - mean), the deviation raised to the stated one.

// Elo, mean 1500, keep 1/2: 1800 -> 1650; 1601 -> 1550.5 -> 1551 and 1399 -> 1449.5 -> 1450
// (half away from zero, as a room's change rounds); keep 0 puts everyone at the mean, keep 1
// changes nothing. The deviation asked for is ignored.
TEST(SeasonResetTest, EloDrawsTowardTheMeanInWholePoints) {
  const auto system = Make("elo");
  const SeasonReset half{.mean = 1500, .keep = 0.5, .deviation = 100};
  EXPECT_EQ(ResetOk(*system, Rating{.value = 1800}, half), Rating{.value = 1650});
  EXPECT_EQ(ResetOk(*system, Rating{.value = 1601}, half), Rating{.value = 1551});
  EXPECT_EQ(ResetOk(*system, Rating{.value = 1399}, half), Rating{.value = 1450});
  EXPECT_EQ(ResetOk(*system, Rating{.value = 1800}, {.mean = 1500, .keep = 0}).value, 1500);
  EXPECT_EQ(ResetOk(*system, Rating{.value = 1800}, {.mean = 1500, .keep = 1}).value, 1800);
}

// OpenSkill, mean 25, keep 0.6, sigma at least 4: (40, 2) -> 25 + 0.6 (15) = 34 with sigma 4;
// (10, 6) -> 25 - 0.6 (15) = 16, its sigma of 6 kept.
TEST(SeasonResetTest, OpenSkillMovesMuAndRaisesSigma) {
  const auto system = Make("openskill");
  const SeasonReset reset{.mean = 25, .keep = 0.6, .deviation = 4};
  const Rating high = ResetOk(*system, MuSigma(40, 2), reset);
  EXPECT_NEAR(high.value, 34, 1e-12);
  EXPECT_EQ(high.deviation, 4);
  const Rating low = ResetOk(*system, MuSigma(10, 6), reset);
  EXPECT_NEAR(low.value, 16, 1e-12);
  EXPECT_EQ(low.deviation, 6);
}

// Glicko-2, mean 1500, keep 3/4, RD at least 150: 1800/60/0.05 -> 1500 + 0.75 (300) = 1725,
// RD 150, the volatility kept.
TEST(SeasonResetTest, Glicko2KeepsTheVolatility) {
  const auto system = Make("glicko2");
  EXPECT_EQ(
      ResetOk(*system, Glicko(1800, 60, 0.05), {.mean = 1500, .keep = 0.75, .deviation = 150}),
      Glicko(1725, 150, 0.05));
}

// Ratings at the bounds stay within them (keep 1 cannot round past a bound).
TEST(SeasonResetTest, ResultsAtTheBoundsPassCheckRating) {
  const auto system = Make("openskill");
  for (double keep : {0.0, 0.1, 0.3, 0.7, 0.999999, 1.0}) {
    const Rating top = ResetOk(*system, MuSigma(kMaxRatingValue, kMaxUncertainty),
                               {.mean = -kMaxRatingValue, .keep = keep, .deviation = 1});
    EXPECT_LE(top.value, kMaxRatingValue) << keep;
    ResetOk(*system, MuSigma(-kMaxRatingValue, 1),
            {.mean = 0.1, .keep = keep, .deviation = kMaxUncertainty});
  }
}

TEST(SeasonResetTest, RefusesEachBadFieldByName) {
  const auto openskill = Make("openskill");
  const Rating rating = MuSigma(30, 2);
  for (double keep : {-0.1, 1.1, std::numeric_limits<double>::quiet_NaN()}) {
    ExpectRefusedNaming(
        openskill->ResetForSeason(rating, {.mean = 25, .keep = keep, .deviation = 4}), "keep");
    ExpectRefusedNaming(
        Make("elo")->ResetForSeason(Rating{.value = 1500}, {.mean = 1500, .keep = keep}), "keep");
  }
  ExpectRefusedNaming(openskill->ResetForSeason(rating, {.mean = 2e6, .keep = 0.5, .deviation = 4}),
                      "mean");
  ExpectRefusedNaming(openskill->ResetForSeason(rating, {.mean = 25, .keep = 0.5, .deviation = 0}),
                      "deviation");
  ExpectRefusedNaming(
      openskill->ResetForSeason(MuSigma(30, 0), {.mean = 25, .keep = 0.5, .deviation = 4}),
      "rating");
  // Elo has no deviation to ask for: a 0 is fine.
  EXPECT_TRUE(
      Make("elo")
          ->ResetForSeason(Rating{.value = 1500}, {.mean = 1500, .keep = 0.5, .deviation = 0})
          .ok());
}

}  // namespace
}  // namespace verdict::rating
