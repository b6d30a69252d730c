// RatingSystem::Predict of every system, checked against published reference values, each quoted
// with its source: openskill.py 6.2.0's documentation and tests (and its output where they give
// only a property), TrueSkill's match-quality vectors, Glickman's worked example of Glicko-2, and
// Elo's expected score worked by hand. Pure computation, no database.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lobby/rating/glicko2.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {
namespace {

std::unique_ptr<RatingSystem> Make(std::string system,
                                   std::map<std::string, double> parameters = {}) {
  auto made = MakeRatingSystem(SystemSpec{std::move(system), "", std::move(parameters)});
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

// What `system` predicts of `teams`, expecting it to succeed (an empty prediction if it does not).
Prediction PredictOk(const RatingSystem& system, const std::vector<std::vector<Rating>>& teams) {
  auto predicted = system.Predict(teams);
  EXPECT_TRUE(predicted.ok()) << predicted.status().ToString();
  return predicted.ok() ? std::move(*predicted) : Prediction{};
}

Rating MuSigma(double mu, double sigma) { return Rating{.value = mu, .deviation = sigma}; }
Rating Elo(double value) { return Rating{.value = value}; }
Rating Glicko(double r, double rd, double volatility = 0.06) {
  return Rating{.value = r, .deviation = rd, .volatility = volatility};
}

double Sum(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum;
}

const Rating kDefault = MuSigma(25, 25.0 / 3.0);

// ---------------------------------------------------------------------------------------------
// OpenSkill: openskill.py 6.2.0 (vivekjoshy/openskill.py, tag v6.2.0), whose predict_win,
// predict_draw and predict_rank are the same in every model.

// docs/source/manual.rst, "Predicting Winners": predict_win([[p1], [p2]]) of model.rating() and
// model.rating(mu=33.564, sigma=1.123) prints "[0.2021226121041832, 0.7978773878958167]".
TEST(OpenSkillPredictTest, PredictWinAsTheManualPrints) {
  for (const std::string model : {"plackett_luce", "bradley_terry_full"}) {
    auto made = MakeRatingSystem(SystemSpec{"openskill", model, {}});
    ASSERT_TRUE(made.ok());
    const Prediction predicted = PredictOk(**made, {{kDefault}, {MuSigma(33.564, 1.123)}});
    ASSERT_EQ(predicted.win.size(), 2u);
    EXPECT_NEAR(predicted.win[0], 0.2021226121041832, 1e-12) << model;
    EXPECT_NEAR(predicted.win[1], 0.7978773878958167, 1e-12) << model;
    EXPECT_EQ(predicted.rank, (std::vector<uint32_t>{2, 1})) << model;
  }
}

// tests/models/weng_lin/test_plackett_luce.py, test_predict_draw: a1 = rating(), a2 = (32.444,
// 1.123), b1 = (35.881, 0.0001), b2 = (25.188, 0.00001); "pytest.approx(0.1919967, 0.0001)" for
// [[a1, a2], [b1, b2]], "pytest.approx(0.0603735, 0.0001)" for [[a1, a2], [b1, b2], [a1], [a2],
// [b1]], and "pytest.approx(0.5)" (relative 1e-6) for [[b1], [b1]]: one player against itself.
// At full precision openskill.py 6.2.0 gives 0.1919967298043005 and 0.06037355052649751.
TEST(OpenSkillPredictTest, PredictDrawAsTestPredictDraw) {
  const auto system = Make("openskill");
  const Rating a1 = kDefault, a2 = MuSigma(32.444, 1.123);
  const Rating b1 = MuSigma(35.881, 0.0001), b2 = MuSigma(25.188, 0.00001);
  const double two = PredictOk(*system, {{a1, a2}, {b1, b2}}).draw;
  EXPECT_NEAR(two, 0.1919967, 0.1919967 * 0.0001);
  EXPECT_NEAR(two, 0.1919967298043005, 1e-12);
  const double five = PredictOk(*system, {{a1, a2}, {b1, b2}, {a1}, {a2}, {b1}}).draw;
  EXPECT_NEAR(five, 0.0603735, 0.0603735 * 0.0001);
  EXPECT_NEAR(five, 0.06037355052649751, 1e-12);
  EXPECT_NEAR(PredictOk(*system, {{b1}, {b1}}).draw, 0.5, 0.5e-6);
}

// test_predict_win and test_predict_5p_impostor: a1 = rating(), a2 = (32.444, 5.123), b1 =
// (73.381, 1.421), b2 = (25.188, 6.211); the win probabilities of [team_1, team_2, [a2], [a1],
// [b1]] and of [team_1, team_2] sum to 1 ("pytest.approx(1, 0.0001)"), and of [[a1], [a1], [a1],
// [a2], [a1]] the fourth is the largest. openskill.js 5.0.1, src/__tests__/predict-win.test.ts,
// "predicts win outcome for two teams", agrees on the two teams: 0.0008308945674377 and
// 0.9991691054325622 to 7 decimals ("toBeCloseTo(..., 7)").
TEST(OpenSkillPredictTest, PredictWinAsTestPredictWin) {
  const auto system = Make("openskill");
  const Rating a1 = kDefault, a2 = MuSigma(32.444, 5.123);
  const Rating b1 = MuSigma(73.381, 1.421), b2 = MuSigma(25.188, 6.211);
  const std::vector<Rating> team_1{a1, a2}, team_2{b1, b2};
  EXPECT_NEAR(Sum(PredictOk(*system, {team_1, team_2, {a2}, {a1}, {b1}}).win), 1, 0.0001);
  const Prediction two = PredictOk(*system, {team_1, team_2});
  EXPECT_NEAR(Sum(two.win), 1, 0.0001);
  EXPECT_NEAR(two.win[0], 0.0008308945674377, 0.5e-7);
  EXPECT_NEAR(two.win[1], 0.9991691054325622, 0.5e-7);
  const Prediction impostor = PredictOk(*system, {{a1}, {a1}, {a1}, {a2}, {a1}});
  for (size_t t : {0, 1, 2, 4}) EXPECT_GT(impostor.win[3], impostor.win[t]) << t;
  EXPECT_EQ(impostor.rank, (std::vector<uint32_t>{2, 2, 2, 1, 2}));
}

// Four teams is where the implementations part: openskill.js 5.0.1's predictWin divides by
// sqrt(n beta^2 + ...) for n teams and publishes, "4 players of varying skill" (mu 1, 2, 3, 4,
// sigma 0.1), 0.20281164759988402, 0.2341964232088598, 0.2658035767911402, 0.297188352400116.
// openskill.py 6.2.0 takes 2 beta^2 for every pair and gives 0.18420221980528928,
// 0.22786446154550788, 0.27213553845449207, 0.31579778019471066 (predict_win of the same teams),
// and predict_rank places them 4, 3, 2, 1. The lobby follows openskill.py.
TEST(OpenSkillPredictTest, FourTeamsFollowOpenSkillPyNotOpenSkillJs) {
  const auto system = Make("openskill");
  const Prediction predicted = PredictOk(
      *system, {{MuSigma(1, 0.1)}, {MuSigma(2, 0.1)}, {MuSigma(3, 0.1)}, {MuSigma(4, 0.1)}});
  const std::vector<double> python{0.18420221980528928, 0.22786446154550788, 0.27213553845449207,
                                   0.31579778019471066};
  const std::vector<double> javascript{0.20281164759988402, 0.2341964232088598, 0.2658035767911402,
                                       0.297188352400116};
  ASSERT_EQ(predicted.win.size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_NEAR(predicted.win[t], python[t], 1e-12) << t;
    // At least 0.006 from it: far beyond openskill.js's own tolerance (toBeCloseTo(..., 7)).
    EXPECT_GT(std::abs(predicted.win[t] - javascript[t]), 0.006) << t;
  }
  EXPECT_EQ(predicted.rank, (std::vector<uint32_t>{4, 3, 2, 1}));
}

// test_predict_rank: a1, a2, a3 = (34, 0.25), (32, 0.25), (30, 0.25), b1, b2, b3 = (24, 0.5),
// (22, 0.5), (20, 0.5), teams [a1, b1], [a2, b2], [a3, b3]; the rank probabilities sum to 1
// ("pytest.approx(1)"), also for three identical teams. openskill.py 6.2.0's predict_rank gives
// [(1, 0.5534144483738971), (2, 0.33333333333333337), (3, 0.1132522182927697)] and, for
// [team_1] * 3, (1, 0.3333333333333333) three times: identical teams share first place.
TEST(OpenSkillPredictTest, PredictRankAsTestPredictRank) {
  const auto system = Make("openskill");
  const std::vector<Rating> team_1{MuSigma(34, 0.25), MuSigma(24, 0.5)};
  const std::vector<Rating> team_2{MuSigma(32, 0.25), MuSigma(22, 0.5)};
  const std::vector<Rating> team_3{MuSigma(30, 0.25), MuSigma(20, 0.5)};
  const Prediction ranked = PredictOk(*system, {team_1, team_2, team_3});
  EXPECT_NEAR(Sum(ranked.win), 1, 1e-12);
  EXPECT_EQ(ranked.rank, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_NEAR(ranked.win[0], 0.5534144483738971, 1e-12);
  EXPECT_NEAR(ranked.win[1], 0.33333333333333337, 1e-12);
  EXPECT_NEAR(ranked.win[2], 0.1132522182927697, 1e-12);
  const Prediction identical = PredictOk(*system, {team_1, team_1, team_1});
  EXPECT_NEAR(Sum(identical.win), 1, 1e-12);
  EXPECT_EQ(identical.rank, (std::vector<uint32_t>{1, 1, 1}));
  for (double win : identical.win) EXPECT_NEAR(win, 1.0 / 3.0, 1e-15);
}

// The quality is TrueSkill's (openskill.h says why). moserware/Skills,
// UnitTests/TrueSkill/TrueSkillCalculatorTests.cs, whose match qualities "came from the online
// calculator" of Microsoft Research, asserted to 0.0005 (AssertMatchQuality), all under TrueSkill's
// defaults, which are OpenSkill's (mu 25, sigma 25/3, beta 25/6).
TEST(OpenSkillPredictTest, QualityAsTrueSkillsCalculator) {
  const auto system = Make("openskill");
  struct Case {
    const char* test;
    std::vector<std::vector<Rating>> teams;
    double quality;
  };
  const std::vector<Case> cases{
      {"TwoPlayerTestNotDrawn", {{kDefault}, {kDefault}}, 0.447},
      {"OneOnOneMassiveUpsetDrawTest", {{kDefault}, {MuSigma(50, 12.5)}}, 0.110},
      {"TwoOnTwoSimpleTest", {{kDefault, kDefault}, {kDefault, kDefault}}, 0.447},
      {"TwoOnTwoUnbalancedDrawTest",
       {{MuSigma(15, 8), MuSigma(20, 6)}, {MuSigma(25, 4), MuSigma(30, 3)}},
       0.214},
      {"TwoOnTwoUpsetTest",
       {{MuSigma(20, 8), MuSigma(25, 6)}, {MuSigma(35, 7), MuSigma(40, 5)}},
       0.084},
      {"FourOnFourSimpleTest",
       {{kDefault, kDefault, kDefault, kDefault}, {kDefault, kDefault, kDefault, kDefault}},
       0.447},
      {"OneOnTwoSimpleTest", {{kDefault}, {kDefault, kDefault}}, 0.135},
      {"OneOnTwoSomewhatBalanced", {{MuSigma(40, 6)}, {MuSigma(20, 7), MuSigma(25, 8)}}, 0.478},
      {"ThreeTeamsOfOneNotDrawn", {{kDefault}, {kDefault}, {kDefault}}, 0.200},
      {"FourTeamsOfOneNotDrawn", {{kDefault}, {kDefault}, {kDefault}, {kDefault}}, 0.089},
      {"FiveTeamsOfOneNotDrawn", std::vector<std::vector<Rating>>(5, {kDefault}), 0.040},
      {"EightTeamsOfOneDrawn", std::vector<std::vector<Rating>>(8, {kDefault}), 0.004},
  };
  for (const Case& c : cases) {
    EXPECT_NEAR(PredictOk(*system, c.teams).quality, c.quality, 0.0005) << c.test;
  }
}

// The same two-on-two upset at full precision: skillratings (docs.rs),
// trueskill::match_quality_two_teams, example: players (20, 8), (25, 6) against (35, 7), (40, 5),
// "assert!((quality - 0.084_108_145_418_343_24).abs() < f64::EPSILON)".
TEST(OpenSkillPredictTest, QualityAtFullPrecision) {
  const auto system = Make("openskill");
  const Prediction predicted =
      PredictOk(*system, {{MuSigma(20, 8), MuSigma(25, 6)}, {MuSigma(35, 7), MuSigma(40, 5)}});
  EXPECT_NEAR(predicted.quality, 0.08410814541834324, 1e-12);
}

// The team order does not matter to the quality (any basis of differences gives it), and an even
// match of all but exactly known ratings is all but 1.
TEST(OpenSkillPredictTest, QualityIgnoresTeamOrderAndReachesOne) {
  const auto system = Make("openskill");
  const std::vector<Rating> strong{MuSigma(30, 2)}, middle{MuSigma(25, 4), MuSigma(20, 1)};
  const std::vector<Rating> weak{MuSigma(10, 3)};
  const double quality = PredictOk(*system, {strong, middle, weak}).quality;
  EXPECT_NEAR(PredictOk(*system, {weak, strong, middle}).quality, quality, 1e-12);
  EXPECT_NEAR(PredictOk(*system, {middle, weak, strong}).quality, quality, 1e-12);
  const Rating known = MuSigma(25, 1e-6);
  EXPECT_NEAR(PredictOk(*system, {{known, known}, {known, known}, {known, known}}).quality, 1,
              1e-9);
}

// What Rate would refuse, Predict refuses, naming the team and player as CheckRoom does.
TEST(PredictTest, RefusesWhatRateWould) {
  const auto openskill = Make("openskill");
  EXPECT_EQ(openskill->Predict({{kDefault}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(openskill->Predict({{kDefault}, {}}).status().code(), StatusCode::kInvalidArgument);
  const auto zero_sigma = openskill->Predict({{kDefault}, {MuSigma(25, 0)}});
  EXPECT_EQ(zero_sigma.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero_sigma.status().message().find("team 2, player 0"), std::string::npos)
      << zero_sigma.status().ToString();
  const auto elo = Make("elo");
  EXPECT_EQ(elo->Predict({{Elo(1500.5)}, {Elo(1500)}}).status().code(),
            StatusCode::kInvalidArgument);
  const auto glicko2 = Make("glicko2");
  EXPECT_EQ(glicko2->Predict({{Glicko(1500, 200)}, {Glicko(1500, 200)}, {Glicko(1500, 200)}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(glicko2->Predict({{Glicko(1500, 200), Glicko(1500, 200)}, {Glicko(1500, 200)}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Elo: the expected score 1 / (1 + 10^((Rb - Ra) / 400)), worked by hand.

// 1600 against 1400: 1 / (1 + 10^-0.5) = 1 / 1.3162278 = 0.7597469; 2000 against 1600:
// 1 / (1 + 10^-1) = 10 / 11. The quality is 2 min(E, 1 - E): 0.4805061 and 2 / 11.
TEST(EloPredictTest, TwoTeamsAreTheExpectedScore) {
  const auto system = Make("elo");
  const Prediction near = PredictOk(*system, {{Elo(1600)}, {Elo(1400)}});
  EXPECT_NEAR(near.win[0], 0.7597469266479578, 1e-12);
  EXPECT_NEAR(near.win[1], 0.2402530733520422, 1e-12);
  EXPECT_NEAR(near.quality, 0.4805061467040843, 1e-12);
  EXPECT_EQ(near.draw, 0);
  EXPECT_EQ(near.rank, (std::vector<uint32_t>{1, 2}));
  const Prediction far = PredictOk(*system, {{Elo(1600)}, {Elo(2000)}});
  EXPECT_NEAR(far.win[1], 10.0 / 11.0, 1e-12);
  EXPECT_NEAR(far.quality, 2.0 / 11.0, 1e-12);
  EXPECT_EQ(far.rank, (std::vector<uint32_t>{2, 1}));
  // A team is its players' mean, as Rate takes it: 1400 and 1600 are a 1500.
  const Prediction even = PredictOk(*system, {{Elo(1400), Elo(1600)}, {Elo(1500)}});
  EXPECT_EQ(even.win, (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(even.quality, 1);
  EXPECT_EQ(even.rank, (std::vector<uint32_t>{1, 1}));
}

// 1700, 1500, 1300: E(200) = 0.7597469, E(400) = 0.9090909. Means over opponents:
// (0.7597469 + 0.9090909) / 2 = 0.8344189, (0.2402531 + 0.7597469) / 2 = 0.5,
// (0.0909091 + 0.2402531) / 2 = 0.1655811, summing to 1.5; normalized 0.5562793, 1/3, 0.1103874.
// Quality: the mean of 1 - |E - (1 - E)| over the three pairs, (0.4805061 + 0.1818182 +
// 0.4805061) / 3 = 0.3809435.
TEST(EloPredictTest, ManyTeamsByPairs) {
  const auto system = Make("elo");
  const Prediction predicted = PredictOk(*system, {{Elo(1700)}, {Elo(1500)}, {Elo(1300)}});
  const double e200 = 1 / (1 + std::pow(10.0, -0.5)), e400 = 1 / (1 + std::pow(10.0, -1.0));
  EXPECT_NEAR(predicted.win[0], (e200 + e400) / 3, 1e-12);
  EXPECT_NEAR(predicted.win[0], 0.5562793, 1e-7);
  EXPECT_NEAR(predicted.win[1], 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(predicted.win[2], 0.1103874, 1e-7);
  EXPECT_NEAR(predicted.quality, 0.3809435, 1e-7);
  EXPECT_EQ(predicted.rank, (std::vector<uint32_t>{1, 2, 3}));
}

// ---------------------------------------------------------------------------------------------
// Glicko-2: Mark E. Glickman, "Example of the Glicko-2 system" (glicko.net/glicko/glicko2.pdf),
// the table of step 3 for the player 1500/200 against 1400/30, 1550/100 and 1700/300:
// g(phi_j) = 0.9955, 0.9531, 0.7242 and E(mu, mu_j, phi_j) = 0.639, 0.432, 0.303.

struct GlickmanOpponent {
  Rating rating;
  double g;
  double expected;
};
const std::vector<GlickmanOpponent> kGlickmanOpponents{
    {Glicko(1400, 30), 0.9955, 0.639},
    {Glicko(1550, 100), 0.9531, 0.432},
    {Glicko(1700, 300), 0.7242, 0.303},
};
constexpr double kGlicko2ScaleOfPaper = 173.7178;

TEST(Glicko2PredictTest, StepThreeAsGlickmansExample) {
  const Rating player = Glicko(1500, 200);
  for (const GlickmanOpponent& opponent : kGlickmanOpponents) {
    EXPECT_NEAR(Glicko2G(opponent.rating.deviation / kGlicko2ScaleOfPaper), opponent.g, 0.00005)
        << opponent.rating.value;
    EXPECT_NEAR(Glicko2ExpectedScore(player, opponent.rating), opponent.expected, 0.0005)
        << opponent.rating.value;
  }
}

// Predict counts both players' deviations, g(sqrt(phi_a^2 + phi_b^2)) (Glickman's expected
// outcome of a game between two rated players, as he gave it to FICS: "1/(1 + 10^(-(r1-r2)
// f(sqrt(s1^2 + s2^2))/400))"): a player whose own RD is negligible is predicted as step 3's E.
TEST(Glicko2PredictTest, NegligibleOwnDeviationIsStepThreesExpectation) {
  const auto system = Make("glicko2");
  const Rating certain = Glicko(1500, kMinUncertainty);
  for (const GlickmanOpponent& opponent : kGlickmanOpponents) {
    const Prediction predicted = PredictOk(*system, {{certain}, {opponent.rating}});
    EXPECT_NEAR(predicted.win[0], opponent.expected, 0.0005) << opponent.rating.value;
    EXPECT_NEAR(predicted.win[0] + predicted.win[1], 1, 1e-15);
    EXPECT_EQ(predicted.draw, 0);
  }
}

// By hand, 1400/80 against 1500/150: phi = sqrt(80^2 + 150^2) / 173.7178 = 170 / 173.7178 =
// 0.978599; g = 1 / sqrt(1 + 3 (0.957656) / pi^2) = 0.880078; x = 0.880078 (-100 / 173.7178) =
// -0.506614; E = 1 / (1 + e^0.506614) = 0.375988; quality 2 E = 0.751975. Even players: 1/2.
TEST(Glicko2PredictTest, BothDeviationsByHand) {
  const auto system = Make("glicko2");
  const Prediction predicted = PredictOk(*system, {{Glicko(1400, 80)}, {Glicko(1500, 150)}});
  EXPECT_NEAR(predicted.win[0], 0.375988, 0.000001);
  EXPECT_NEAR(predicted.win[1], 0.624012, 0.000001);
  EXPECT_NEAR(predicted.quality, 0.751975, 0.000002);
  EXPECT_EQ(predicted.rank, (std::vector<uint32_t>{2, 1}));
  const Prediction even = PredictOk(*system, {{Glicko(1500, 50)}, {Glicko(1500, 300)}});
  EXPECT_EQ(even.win, (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(even.quality, 1);
}

// Ratings at the bounds stay finite: a certain win, quality 0.
TEST(PredictTest, RatingsAtTheBoundsStayFinite) {
  const auto elo = Make("elo");
  const Prediction elo_far = PredictOk(*elo, {{Elo(kMaxRatingValue)}, {Elo(-kMaxRatingValue)}});
  EXPECT_EQ(elo_far.win, (std::vector<double>{1, 0}));
  EXPECT_EQ(elo_far.quality, 0);
  const auto glicko2 = Make("glicko2");
  const Prediction glicko_far = PredictOk(
      *glicko2, {{Glicko(-kMaxRatingValue, 30)}, {Glicko(kMaxRatingValue, kMaxUncertainty)}});
  EXPECT_EQ(glicko_far.win[0] + glicko_far.win[1], 1);
  const auto openskill = Make("openskill");
  const Prediction skill_far = PredictOk(
      *openskill, {{MuSigma(kMaxRatingValue, kMaxUncertainty)}, {MuSigma(-kMaxRatingValue, 1)}});
  for (double number : {skill_far.win[0], skill_far.win[1], skill_far.draw, skill_far.quality}) {
    EXPECT_TRUE(std::isfinite(number));
  }
  EXPECT_GE(skill_far.quality, 0);
  EXPECT_LE(skill_far.quality, 1);
}

}  // namespace
}  // namespace verdict::rating
