// The rating systems behind lobby/rating/rating_system.h, checked against published reference
// values, each quoted with its source: the openskill implementations' test vectors, Glickman's
// worked example of Glicko-2, and the numbers the lobby's SQL Elo computes. Pure computation, no
// database: the whole binary runs in milliseconds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lobby/rating/elo.h"
#include "lobby/rating/glicko2.h"
#include "lobby/rating/openskill.h"
#include "lobby/rating/rating_system.h"

namespace verdict::rating {
namespace {

constexpr double kVectorTolerance = 1e-9;

SystemSpec Spec(std::string system, std::map<std::string, double> parameters = {},
                std::string model = {}) {
  SystemSpec spec;
  spec.system = std::move(system);
  spec.model = std::move(model);
  spec.parameters = std::move(parameters);
  return spec;
}

std::unique_ptr<RatingSystem> Make(const SystemSpec& spec) {
  auto system = MakeRatingSystem(spec);
  EXPECT_TRUE(system.ok()) << system.status().ToString();
  return system.ok() ? std::move(*system) : nullptr;
}

// What `system` rates `teams` to, expecting it to succeed (an empty answer if it does not).
std::vector<std::vector<Rating>> RateOk(const RatingSystem& system,
                                        const std::vector<PlacedTeam>& teams) {
  auto rated = system.Rate(teams);
  EXPECT_TRUE(rated.ok()) << rated.status().ToString();
  return rated.ok() ? std::move(*rated) : std::vector<std::vector<Rating>>();
}

// A team of players with these ratings (every share and contribution 1), placed `rank`.
PlacedTeam Team(const std::vector<Rating>& ratings, uint32_t rank) {
  PlacedTeam team;
  team.rank = rank;
  for (const auto& rating : ratings) team.players.push_back(RatedPlayer{.rating = rating});
  return team;
}

// The same, each player with its contribution (openskill.py's `weights`).
PlacedTeam ContributedTeam(const std::vector<Rating>& ratings,
                           const std::vector<double>& contributions, uint32_t rank) {
  PlacedTeam team = Team(ratings, rank);
  for (size_t j = 0; j < contributions.size(); ++j) {
    team.players[j].contribution = contributions[j];
  }
  return team;
}

// The same, each player with the share of the match it played.
PlacedTeam SharedTeam(const std::vector<Rating>& ratings, const std::vector<double>& shares,
                      uint32_t rank) {
  PlacedTeam team = Team(ratings, rank);
  for (size_t j = 0; j < shares.size(); ++j) team.players[j].share = shares[j];
  return team;
}

// `count` players of rating `rating`.
std::vector<Rating> Players(size_t count, Rating rating) {
  return std::vector<Rating>(count, rating);
}

Rating MuSigma(double mu, double sigma) { return Rating{.value = mu, .deviation = sigma}; }

// Teams of these sizes, all of `rating`, placed in input order 1, 2, 3, ... (the implementations'
// default when no ranks are given).
std::vector<PlacedTeam> InOrder(const std::vector<size_t>& sizes, Rating rating) {
  std::vector<PlacedTeam> teams;
  for (size_t i = 0; i < sizes.size(); ++i) {
    teams.push_back(Team(Players(sizes[i], rating), static_cast<uint32_t>(i + 1)));
  }
  return teams;
}

struct MuSigmaPair {
  double mu;
  double sigma;
};

// Rates `teams` and expects every player's (mu, sigma) to be `expected` to 1e-9.
void ExpectOpenSkill(const RatingSystem& system, const std::vector<PlacedTeam>& teams,
                     const std::vector<std::vector<MuSigmaPair>>& expected) {
  const auto rated = RateOk(system, teams);
  ASSERT_EQ(rated.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(rated[i].size(), expected[i].size()) << "team " << i;
    for (size_t j = 0; j < expected[i].size(); ++j) {
      EXPECT_NEAR(rated[i][j].value, expected[i][j].mu, kVectorTolerance)
          << "team " << i << " player " << j;
      EXPECT_NEAR(rated[i][j].deviation, expected[i][j].sigma, kVectorTolerance)
          << "team " << i << " player " << j;
    }
  }
}

const SystemSpec kPlackettLuce = Spec("openskill");
const SystemSpec kBradleyTerryFull = Spec("openskill", {}, "bradley_terry_full");
const Rating kDefaultOpenSkill = MuSigma(25, 25.0 / 3.0);

// openskill.js's rate() and openskill.py's models add their default tau = 25/300 to every sigma
// before rating; their model-level tests do not. Our default is tau = 0.
SystemSpec WithTau(SystemSpec spec, double tau) {
  spec.parameters["tau"] = tau;
  return spec;
}
constexpr double kImplementationsTau = 25.0 / 300.0;

// ---------------------------------------------------------------------------------------------
// OpenSkill, Plackett-Luce. The 2- to 5-player free-for-alls and the teams of 3, 1 and 2 are the
// vectors both implementations publish, identical in:
//   - philihp/openskill.js v5.0.1 (17bc0ff), src/models/__tests__/plackett-luce.test.ts,
//     tests '2p FFA' (line 15), '3p FFA' (23), '4p FFA' (32), '5p FFA' (42),
//     '3 teams different sized players' (53), unchanged since v1.4.0;
//   - OpenDebates/openskill.py v4.0.0 (894b85f), tests/models/test_plackett_luce.py,
//     test_plackett_luce, "# 2P FFA" (line 13) ... "# 3 Different Sized Teams" (line 55).
// openskill.py 6.2.0 (vivekjoshy/openskill.py) computes the same numbers with tau = 0.

TEST(OpenSkillPlackettLuceTest, TwoPlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(
      *Make(kPlackettLuce), InOrder({1, 1}, kDefaultOpenSkill),
      {{{27.63523138347365, 8.065506316323548}}, {{22.36476861652635, 8.065506316323548}}});
}

TEST(OpenSkillPlackettLuceTest, ThreePlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(*Make(kPlackettLuce), InOrder({1, 1, 1}, kDefaultOpenSkill),
                  {{{27.868876552746237, 8.204837030780652}},
                   {{25.717219138186557, 8.057829747583874}},
                   {{21.413904309067206, 8.057829747583874}}});
}

TEST(OpenSkillPlackettLuceTest, FourPlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(*Make(kPlackettLuce), InOrder({1, 1, 1, 1}, kDefaultOpenSkill),
                  {{{27.795084971874736, 8.263160757613477}},
                   {{26.552824984374855, 8.179213704945203}},
                   {{24.68943500312503, 8.083731307186588}},
                   {{20.96265504062538, 8.083731307186588}}});
}

TEST(OpenSkillPlackettLuceTest, FivePlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(*Make(kPlackettLuce), InOrder({1, 1, 1, 1, 1}, kDefaultOpenSkill),
                  {{{27.666666666666668, 8.290556877154474}},
                   {{26.833333333333332, 8.240145629781066}},
                   {{25.72222222222222, 8.179996679645559}},
                   {{24.055555555555557, 8.111796013701358}},
                   {{20.72222222222222, 8.111796013701358}}});
}

TEST(OpenSkillPlackettLuceTest, ThreeTeamsOfSizesThreeOneTwo) {
  const MuSigmaPair first{25.939870821784513, 8.247641552260456};
  const MuSigmaPair third{21.84646897330287, 8.213058173195341};
  ExpectOpenSkill(
      *Make(kPlackettLuce), InOrder({3, 1, 2}, kDefaultOpenSkill),
      {{first, first, first}, {{27.21366020491262, 8.274321317985242}}, {third, third}});
}

// Placements out of input order, from ratings other than the defaults: openskill.js v5.0.1,
// src/__tests__/rate.test.ts, 'accepts a rate ordering' (line 159), through rate() and so with its
// tau = 25/300.
TEST(OpenSkillPlackettLuceTest, PlacementsOutOfInputOrder) {
  const double sigma = 25.0 / 3.0;
  ExpectOpenSkill(*Make(WithTau(kPlackettLuce, kImplementationsTau)),
                  {Team({MuSigma(15, sigma)}, 1), Team({MuSigma(20, sigma)}, 3),
                   Team({MuSigma(25, sigma)}, 4), Team({MuSigma(30, sigma)}, 2)},
                  {{{18.131120980297805, 8.283536573151807}},
                   {{20.405169039419135, 8.107860440531121}},
                   {{20.65583040714804, 8.082574596348321}},
                   {{30.80787957313502, 8.155100416275928}}});
}

// Four players of different ratings: openskill.js v5.0.1, src/__tests__/rate.test.ts, 'rate
// accepts and runs a placket-luce model by default' (line 17), tau = 25/300 as rate() applies it.
TEST(OpenSkillPlackettLuceTest, FourPlayersOfDifferentRatings) {
  ExpectOpenSkill(*Make(WithTau(kPlackettLuce, kImplementationsTau)),
                  {Team({MuSigma(29.182, 4.782)}, 1), Team({MuSigma(27.174, 4.922)}, 2),
                   Team({MuSigma(16.672, 6.217)}, 3), Team({kDefaultOpenSkill}, 4)},
                  {{{30.210227447000438, 4.765617924939384}},
                   {{27.644725221915632, 4.883479590134575}},
                   {{17.4036218889969, 6.101259408259549}},
                   {{19.21460876538932, 7.854669920480409}}});
}

// openskill.py 6.2.0's fixture: vivekjoshy/openskill.py v6.2.0 (a758216),
// tests/models/weng_lin/test_plackett_luce.py, test_rate, against tests/models/data/
// plackettluce.json. The model there is PlackettLuce(mu, sigma) with the fixture's mu and sigma
// and the class's defaults beta = 25/6, kappa = 0.0001, tau = 25/300.
SystemSpec PythonFixturePlackettLuce() {
  return Spec("openskill", {{"mu", 20.35125162611535},
                            {"sigma", 8.33148112355601},
                            {"beta", 25.0 / 6.0},
                            {"tau", kImplementationsTau}});
}
const Rating kPythonFixturePlackettLuceRating = MuSigma(20.35125162611535, 8.33148112355601);

// test_rate, "results_ranks" (lines 325-333): four teams of 1, 2, 1, 2 placed 2, 1, 4, 3.
TEST(OpenSkillPlackettLuceTest, PythonFixtureRanks) {
  const Rating r = kPythonFixturePlackettLuceRating;
  const MuSigmaPair second{22.373451456616035, 8.258479912445537};
  const MuSigmaPair fourth{18.364835831043397, 8.112716571808326};
  ExpectOpenSkill(*Make(PythonFixturePlackettLuce()),
                  {Team({r}, 2), Team({r, r}, 1), Team({r}, 4), Team({r, r}, 3)},
                  {{{22.35555943890167, 8.265434830225024}},
                   {second, second},
                   {{18.311159777900297, 8.219170401234347}},
                   {fourth, fourth}});
}

// ---------------------------------------------------------------------------------------------
// OpenSkill, Bradley-Terry with full pairing. The same games, the vectors of:
//   - philihp/openskill.js v5.0.1, src/models/__tests__/bradley-terry-full.test.ts, '2p FFA'
//     (line 16), '3p FFA' (24), '4p FFA' (33), '5p FFA' (43), '3 teams different sized players'
//     (54);
//   - OpenDebates/openskill.py v4.0.0, tests/models/test_bradley_terry_full.py,
//     test_bradley_terry_full, "# 2P FFA" (line 14) ... "# 3 Different Sized Teams" (line 56).
// The two disagree in the last digits of one number (the team of two of the 3-1-2 game:
// 20.518164784802714 in openskill.js, ...718 in openskill.py), 4e-15 apart: both are within 1e-9.

TEST(OpenSkillBradleyTerryFullTest, TwoPlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(
      *Make(kBradleyTerryFull), InOrder({1, 1}, kDefaultOpenSkill),
      {{{27.63523138347365, 8.065506316323548}}, {{22.36476861652635, 8.065506316323548}}});
}

TEST(OpenSkillBradleyTerryFullTest, ThreePlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(*Make(kBradleyTerryFull), InOrder({1, 1, 1}, kDefaultOpenSkill),
                  {{{30.2704627669473, 7.788474807872566}},
                   {{25.0, 7.788474807872566}},
                   {{19.7295372330527, 7.788474807872566}}});
}

TEST(OpenSkillBradleyTerryFullTest, FourPlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(*Make(kBradleyTerryFull), InOrder({1, 1, 1, 1}, kDefaultOpenSkill),
                  {{{32.90569415042095, 7.5012190693964005}},
                   {{27.63523138347365, 7.5012190693964005}},
                   {{22.36476861652635, 7.5012190693964005}},
                   {{17.09430584957905, 7.5012190693964005}}});
}

TEST(OpenSkillBradleyTerryFullTest, FivePlayerFreeForAllFromDefaults) {
  ExpectOpenSkill(*Make(kBradleyTerryFull), InOrder({1, 1, 1, 1, 1}, kDefaultOpenSkill),
                  {{{35.5409255338946, 7.202515895247076}},
                   {{30.2704627669473, 7.202515895247076}},
                   {{25.0, 7.202515895247076}},
                   {{19.729537233052703, 7.202515895247076}},
                   {{14.4590744661054, 7.202515895247076}}});
}

TEST(OpenSkillBradleyTerryFullTest, ThreeTeamsOfSizesThreeOneTwo) {
  const MuSigmaPair first{25.992743915179297, 8.19709997489984};
  const MuSigmaPair third{20.518164784802714, 8.127515465304823};
  ExpectOpenSkill(
      *Make(kBradleyTerryFull), InOrder({3, 1, 2}, kDefaultOpenSkill),
      {{first, first, first}, {{28.48909130001799, 8.220848339985736}}, {third, third}});
}

// openskill.py 6.2.0's fixture: vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/
// test_bradley_terry_full.py, test_rate, against tests/models/data/bradleyterryfull.json;
// BradleyTerryFull(mu, sigma) with beta = 25/6, kappa = 0.0001, tau = 25/300.
SystemSpec PythonFixtureBradleyTerryFull() {
  return Spec("openskill",
              {{"mu", 16.03354781649136},
               {"sigma", 12.429396412128556},
               {"beta", 25.0 / 6.0},
               {"tau", kImplementationsTau}},
              "bradley_terry_full");
}
const Rating kPythonFixtureBradleyTerryRating = MuSigma(16.03354781649136, 12.429396412128556);

// test_rate, "results_ranks" (lines 328-336).
TEST(OpenSkillBradleyTerryFullTest, PythonFixtureRanks) {
  const Rating r = kPythonFixtureBradleyTerryRating;
  const MuSigmaPair second{23.594511753367236, 11.47082891120956};
  const MuSigmaPair fourth{10.625547676645233, 11.47082891120956};
  ExpectOpenSkill(*Make(PythonFixtureBradleyTerryFull()),
                  {Team({r}, 2), Team({r, r}, 1), Team({r}, 4), Team({r, r}, 3)},
                  {{{22.58458782319289, 11.44990951618401}},
                   {second, second},
                   {{7.329544012760081, 11.44990951618401}},
                   {fourth, fourth}});
}

// ---------------------------------------------------------------------------------------------
// Ties, as each model says: Plackett-Luce shares a place among the teams that tie (A_q),
// Bradley-Terry scores a tie 1/2.

// openskill.js v5.0.1, src/__tests__/rate.test.ts, 'allows ties' (line 194): ranks 1, 2, 2, via
// rate() with tau = 25/300. openskill.py 6.2.0 gives the same; 6.1.0-6.1.3 gave the tied teams
// other means (see TiedTeamsFollowPython620NotPython61).
TEST(OpenSkillTiesTest, PlackettLuceTieForSecond) {
  ExpectOpenSkill(*Make(WithTau(kPlackettLuce, kImplementationsTau)),
                  {Team({MuSigma(10, 8)}, 1), Team({MuSigma(5, 10)}, 2), Team({MuSigma(0, 12)}, 2)},
                  {{{11.942996666741225, 7.926888197620324}},
                   {{2.9381178546315034, 9.653804487570165}},
                   {{-1.4024317012198733, 11.323641575516767}}});
}

// openskill.js v5.0.1, src/__tests__/rate.test.ts, 'four-way-tie with newbies' (line 223).
TEST(OpenSkillTiesTest, PlackettLuceFourWayTieMovesNoMean) {
  ExpectOpenSkill(*Make(WithTau(kPlackettLuce, kImplementationsTau)),
                  {Team({kDefaultOpenSkill}, 1), Team({kDefaultOpenSkill}, 1),
                   Team({kDefaultOpenSkill}, 1), Team({kDefaultOpenSkill}, 1)},
                  {{{25, 8.263571791259416}},
                   {{25, 8.263571791259416}},
                   {{25, 8.263571791259416}},
                   {{25, 8.263571791259416}}});
}

// openskill.js v5.0.1, src/__tests__/rate.test.ts, 'accepts a score instead of rank' (line 285):
// three equal scores, a three-way tie.
TEST(OpenSkillTiesTest, PlackettLuceThreeWayTie) {
  ExpectOpenSkill(
      *Make(WithTau(kPlackettLuce, kImplementationsTau)),
      {Team({kDefaultOpenSkill}, 1), Team({kDefaultOpenSkill}, 1), Team({kDefaultOpenSkill}, 1)},
      {{{25, 8.205243377397993}}, {{25, 8.205243377397993}}, {{25, 8.205243377397993}}});
}

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_plackett_luce.py, test_rate,
// "# Test Ties" (lines 359-365): teams of 1, 2, 3 placed 1, 2, 1; fixture plackettluce.json
// "ties". openskill.py 6.1.0 to 6.1.3 counted a tied team's share as if it were the team's own
// (`if team_q.rank == team_i.rank`), and gave the tied teams 23.241111866333558 and
// 21.479966996534408; 6.2.0 (#176) returned to the paper's form, which openskill.js always had.
TEST(OpenSkillTiesTest, TiedTeamsFollowPython620NotPython61) {
  const Rating r = kPythonFixturePlackettLuceRating;
  const MuSigmaPair second{19.53956360838512, 8.268148437657915};
  const MuSigmaPair tied{19.87652320008089, 8.237522411103104};
  ExpectOpenSkill(*Make(PythonFixturePlackettLuce()),
                  {Team({r}, 1), Team({r, r}, 2), Team({r, r, r}, 1)},
                  {{{21.63766806988004, 8.310709773172306}}, {second, second}, {tied, tied, tied}});
}

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_bradley_terry_full.py, test_rate,
// "# Test Ties" (lines 362-368); fixture bradleyterryfull.json "ties".
TEST(OpenSkillTiesTest, BradleyTerryFullTiedTeams) {
  const Rating r = kPythonFixtureBradleyTerryRating;
  const MuSigmaPair second{9.40905558180175, 11.91450441624131};
  const MuSigmaPair tied{16.32270947771211, 11.999970481449761};
  ExpectOpenSkill(
      *Make(PythonFixtureBradleyTerryFull()), {Team({r}, 1), Team({r, r}, 2), Team({r, r, r}, 1)},
      {{{22.368878389960223, 12.064304058091345}}, {second, second}, {tied, tied, tied}});
}

// ---------------------------------------------------------------------------------------------
// tau: every sigma becomes sqrt(sigma^2 + tau^2) before the room is rated.

// OpenDebates/openskill.py v4.0.0, tests/test_rate.py, test_rate, "# Accepts a tau term" (line 6);
// the same vector in openskill.js v5.0.1, src/__tests__/rate.test.ts, 'accepts a tau term'
// (line 318).
TEST(OpenSkillTauTest, TauWidensSigmaBeforeTheUpdate) {
  ExpectOpenSkill(
      *Make(WithTau(kPlackettLuce, 0.3)), {Team({MuSigma(25, 3)}, 1), Team({MuSigma(25, 3)}, 2)},
      {{{25.624880438870754, 2.9879993738476953}}, {{24.375119561129246, 2.9879993738476953}}});
}

// openskill.js v5.0.1, src/__tests__/rate.test.ts, 'rate accepts and runs a placket-luce model
// with tau' (line 28): tau = 0.01 over four players of different ratings.
TEST(OpenSkillTauTest, SmallTauOverDifferentRatings) {
  ExpectOpenSkill(*Make(WithTau(kPlackettLuce, 0.01)),
                  {Team({MuSigma(29.182, 4.782)}, 1), Team({MuSigma(27.174, 4.922)}, 2),
                   Team({MuSigma(16.672, 6.217)}, 3), Team({kDefaultOpenSkill}, 4)},
                  {{{30.20997558824299, 4.764909330988368}},
                   {{27.64461002009721, 4.882799245921361}},
                   {{17.403587237635527, 6.100731158882956}},
                   {{19.21478808745494, 7.854267281042293}}});
}

// 100 solo players placed 1 to 100, every rating the default (issue 49: a winner of many teams
// under Bradley-Terry gains hundreds of points). Bradley-Terry counts each of the 99 pairs a
// player won as a win of its own, and this is what the implementations compute (openskill.py,
// openskill/models/weng_lin/bradley_terry_full.py, _compute: omega and delta summed over every
// other team, unscaled); the values are openskill.js 5.0.1's (npm), rate(Array.from({length: 100},
// () => [rating()]), {model: bradleyTerryFull, tau: 0}): first 285.8879069638908, second
// 280.61744419694355, 50th 27.63523138347366, 51st 22.36476861652636, last -235.88790696389083,
// every sigma at its kappa floor, 0.08333333333333334. Plackett-Luce reads the same placement as
// one ranking (rate() with {tau: 0}): first 25.73790243257493 (sigma 8.333303817183758),
// last 21.878913074367826 (8.322735402883591).
TEST(OpenSkillBradleyTerryFullTest, OneHundredTeamsMoveAsTheImplementationsDo) {
  const auto bradley_terry =
      RateOk(*Make(kBradleyTerryFull), InOrder(std::vector<size_t>(100, 1), kDefaultOpenSkill));
  ASSERT_EQ(bradley_terry.size(), 100u);
  EXPECT_NEAR(bradley_terry[0][0].value, 285.8879069638908, kVectorTolerance);
  EXPECT_NEAR(bradley_terry[1][0].value, 280.61744419694355, kVectorTolerance);
  EXPECT_NEAR(bradley_terry[49][0].value, 27.63523138347366, kVectorTolerance);
  EXPECT_NEAR(bradley_terry[50][0].value, 22.36476861652636, kVectorTolerance);
  EXPECT_NEAR(bradley_terry[99][0].value, -235.88790696389083, kVectorTolerance);
  for (const auto& team : bradley_terry) {
    EXPECT_NEAR(team[0].deviation, 0.08333333333333334, kVectorTolerance);
  }
  const auto plackett_luce =
      RateOk(*Make(kPlackettLuce), InOrder(std::vector<size_t>(100, 1), kDefaultOpenSkill));
  EXPECT_NEAR(plackett_luce[0][0].value, 25.73790243257493, kVectorTolerance);
  EXPECT_NEAR(plackett_luce[0][0].deviation, 8.333303817183758, kVectorTolerance);
  EXPECT_NEAR(plackett_luce[99][0].value, 21.878913074367826, kVectorTolerance);
  EXPECT_NEAR(plackett_luce[99][0].deviation, 8.322735402883591, kVectorTolerance);
}

// ---------------------------------------------------------------------------------------------
// Contribution weights, openskill.py 6.2.0's `weights` (rescaled to [1, 2] within each team).
// Published vectors exist only from openskill.py 6.0 on (openskill.js v5.0.1 ignored weights; its
// unreleased main branch replicates openskill.py's in src/__tests__/parity-plackett-luce.test.ts).

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_plackett_luce.py, test_rate,
// "# Test Weights" (lines 367-378), fixture plackettluce.json "weights": weights
// [[2, 0, 0], [1, 2], [0, 0, 1], [0, 1]].
TEST(OpenSkillWeightsTest, PlackettLucePythonFixtureWeights) {
  const Rating r = kPythonFixturePlackettLuceRating;
  ExpectOpenSkill(
      *Make(PythonFixturePlackettLuce()),
      {ContributedTeam({r, r, r}, {2, 0, 0}, 2), ContributedTeam({r, r}, {1, 2}, 1),
       ContributedTeam({r, r, r}, {0, 0, 1}, 4), ContributedTeam({r, r}, {0, 1}, 3)},
      {{{21.649872897994697, 8.146110527078056},
        {21.000562262055023, 8.239527864992827},
        {21.000562262055023, 8.239527864992827}},
       {{22.456685723244924, 8.309959046469814}, {24.562119820374498, 8.28796214707792}},
       {{16.789694067795875, 8.195623892204544},
        {16.789694067795875, 8.195623892204544},
        {18.570472846955614, 8.264041781691587}},
       {{21.158064451365576, 8.249053790497177}, {21.964877276615802, 8.165369233562995}}});
}

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_bradley_terry_full.py, test_rate,
// "# Test Weights" (lines 370-381), fixture bradleyterryfull.json "weights"; weights as above.
TEST(OpenSkillWeightsTest, BradleyTerryFullPythonFixtureWeights) {
  const Rating r = kPythonFixtureBradleyTerryRating;
  ExpectOpenSkill(
      *Make(PythonFixtureBradleyTerryFull()),
      {ContributedTeam({r, r, r}, {2, 0, 0}, 2), ContributedTeam({r, r}, {1, 2}, 1),
       ContributedTeam({r, r, r}, {0, 0, 1}, 4), ContributedTeam({r, r}, {0, 1}, 3)},
      {{{18.025653268906762, 11.187853119305666},
        {17.02960054269906, 11.825077104049601},
        {17.02960054269906, 11.825077104049601}},
       {{25.989955945165427, 11.821600475923185}, {35.9463640738395, 11.180502493645616}},
       {{6.609803175859515, 11.825077104049601},
        {6.609803175859515, 11.825077104049601},
        {11.321675496175438, 12.131143559677232}},
       {{14.504831602241435, 11.821600475923185}, {15.269189709366398, 12.129449233716796}}});
}

// Contributions below 1: philihp/openskill.js main (0bf4361, after v5.0.1),
// src/__tests__/rate.test.ts, 'applies weights for partial play' (line 297), weights
// [[0.9, 1], [1, 0.6]] through rate() (tau = 25/300); openskill.js's own output with openskill.py's
// rescaling, not a Python vector. openskill.js calls them partial play; they are contributions
// here: the 0.6 player of the losing team loses more than its teammate (see openskill.h).
TEST(OpenSkillWeightsTest, ContributionsBelowOne) {
  ExpectOpenSkill(
      *Make(WithTau(kPlackettLuce, kImplementationsTau)),
      {ContributedTeam({MuSigma(29.182, 4.782), MuSigma(27.174, 4.922)}, {0.9, 1}, 1),
       ContributedTeam({MuSigma(16.672, 6.217), kDefaultOpenSkill}, {1, 0.6}, 2)},
      {{{29.607340941337068, 4.755311788972862}, {28.075205565064074, 4.86272644246492}},
       {{16.31258521457155, 6.171900418676952}, {23.70858117648013, 8.111707446126035}}});
}

// Equal contributions within a team are none at all (openskill.js main, rate.test.ts, 'normalizes
// uniform within-team weights to a no-op', line 328); and a team of one has no other player to
// compare with, so its contribution changes nothing (our documented departure from openskill.py,
// which would rescale a lone weight to 2).
TEST(OpenSkillWeightsTest, EqualContributionsAndSoloContributionsChangeNothing) {
  const auto system = Make(kPlackettLuce);
  const Rating r = kDefaultOpenSkill;
  EXPECT_EQ(RateOk(*system, {ContributedTeam({r, r}, {0.83, 0.83}, 1), Team({r, r}, 2)}),
            RateOk(*system, {Team({r, r}, 1), Team({r, r}, 2)}));
  EXPECT_EQ(RateOk(*system, {ContributedTeam({r}, {0.4}, 1), Team({r}, 2), Team({r}, 3)}),
            RateOk(*system, {Team({r}, 1), Team({r}, 2), Team({r}, 3)}));
}

// ---------------------------------------------------------------------------------------------
// OpenSkill, Thurstone-Mosteller (full and part) and Bradley-Terry part: every game of openskill.py
// 6.2.0's fixtures but "balance" (not implemented here). The part models' vectors are
// openskill.py's alone (openskill.h).

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_thurstone_mosteller_full.py,
// test_rate, against tests/models/data/thurstonemostellerfull.json (openskill.h gives the
// parameters it was made with).
SystemSpec PythonFixtureThurstoneMostellerFull(std::map<std::string, double> parameters = {}) {
  parameters.insert({{"mu", 17.369819397619647},
                     {"sigma", 5.379790119094205},
                     {"beta", 25.0 / 6.0},
                     {"tau", kImplementationsTau}});
  return Spec("openskill", std::move(parameters), "thurstone_mosteller_full");
}
const Rating kPythonFixtureThurstoneMostellerFullRating =
    MuSigma(17.369819397619647, 5.379790119094205);

// "results_normal" (line 332): one player against a team of two, placed in input order.
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureNormal) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerFull()), {Team({r}, 1), Team({r, r}, 2)},
      {{{22.64925412780908, 5.105413295791267}},
       {{12.090384667430214, 4.987055119379737}, {12.090384667430214, 4.987055119379737}}});
}

// "results_ranks" (line 340): teams of 1, 2, 1, 2 placed 2, 1, 4, 3.
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureRanks) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerFull()),
      {Team({r}, 2), Team({r, r}, 1), Team({r}, 4), Team({r, r}, 3)},
      {{{24.742920978542813, 4.703892673813669}},
       {{19.91742257235955, 4.97447451720664}, {19.91742257235955, 4.97447451720664}},
       {{14.297181388007196, 4.929870018015774}},
       {{10.521752651569031, 4.654743459534082}, {10.521752651569031, 4.654743459534082}}});
}

// "results_scores" (line 348): scores 1 and 2: the team of two wins.
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureScores) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerFull()), {Team({r}, 2), Team({r, r}, 1)},
      {{{17.04349567799341, 5.314344458972826}},
       {{17.696143117245885, 5.2867266632571965}, {17.696143117245885, 5.2867266632571965}}});
}

// "results_margins" (line 353): five teams of two, scores 10, 5, 5, 2, 1 (placed 1, 2, 2, 4, 5),
// weights [[1, 2], [2, 1], [1, 2], [3, 1], [1, 2]], margin 2. The margin moves nothing here: it
// divides the difference of the teams' means, and every team starts equal (openskill.py 6.2.0 gives
// these numbers for any margin, and so did its code before #191). So this checks the contribution
// weights and the tie, not a margin.
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureMarginsGame) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerFull()),
      {ContributedTeam({r, r}, {1, 2}, 1), ContributedTeam({r, r}, {2, 1}, 2),
       ContributedTeam({r, r}, {1, 2}, 2), ContributedTeam({r, r}, {3, 1}, 4),
       ContributedTeam({r, r}, {1, 2}, 5)},
      {{{24.949642339569337, 4.48677916139593}, {32.52946528151903, 3.3635231999089066}},
       {{21.159730868594494, 2.969185991040329}, {19.26477513310707, 4.345408589496402}},
       {{19.26477513310707, 4.345408589496402}, {21.159730868594494, 2.969185991040329}},
       {{15.474863662132224, 4.953800228768054}, {13.5799079266448, 4.48677916139593}},
       {{9.789996455669957, 4.48677916139593}, {13.579907926644802, 4.953800228768054}}});
}

// "results_limit_sigma" (line 364): teams of 1, 2, 3 placed 2, 1, 3, limit_sigma.
// No sigma here would have risen: the flag changes none of these numbers
// (OpenSkillLimitSigmaTest checks what it does).
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureLimitSigma) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(*Make(PythonFixtureThurstoneMostellerFull({{"limit_sigma", 1}})),
                  {Team({r}, 2), Team({r, r}, 1), Team({r, r, r}, 3)},
                  {{{24.439837648240836, 5.097619302832102}},
                   {{21.52900161729248, 5.073466074339694}, {21.52900161729248, 5.073466074339694}},
                   {{6.140618927325626, 4.725957788249715},
                    {6.140618927325626, 4.725957788249715},
                    {6.140618927325626, 4.725957788249715}}});
}

// "results_ties" (line 374): teams of 1, 2, 3 placed 1, 2, 1.
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureTies) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerFull()),
      {Team({r}, 1), Team({r, r}, 2), Team({r, r, r}, 1)},
      {{{29.3305463246164, 4.860405772327232}},
       {{11.673700042291802, 4.910478681463609}, {11.673700042291802, 4.910478681463609}},
       {{11.105211825950738, 4.877671631940031},
        {11.105211825950738, 4.877671631940031},
        {11.105211825950738, 4.877671631940031}}});
}

// "results_weights" (line 383): teams of 3, 2, 3, 2 placed 2, 1, 4, 3, weights [[2, 0, 0], [1, 2],
// [0, 0, 1], [0, 1]].
TEST(OpenSkillThurstoneMostellerFullTest, PythonFixtureWeights) {
  const Rating r = kPythonFixtureThurstoneMostellerFullRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerFull()),
      {ContributedTeam({r, r, r}, {2, 0, 0}, 2), ContributedTeam({r, r}, {1, 2}, 1),
       ContributedTeam({r, r, r}, {0, 0, 1}, 4), ContributedTeam({r, r}, {0, 1}, 3)},
      {{{16.466138095448585, 5.1287217832339795},
        {15.562456793277523, 4.863999186851225},
        {15.562456793277523, 4.863999186851225}},
       {{26.930492133200257, 4.725015325817237}, {36.49116486878087, 3.9626321414518735}},
       {{8.0952911269604, 4.6776882463763805},
        {8.0952911269604, 4.6776882463763805},
        {12.732555262290024, 5.041321924864341}},
       {{18.891037537040408, 4.8761944947985265}, {20.412255676461168, 4.31340461031177}}});
}

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_thurstone_mosteller_part.py,
// test_rate, against tests/models/data/thurstonemostellerpart.json (openskill.h gives the
// parameters it was made with).
SystemSpec PythonFixtureThurstoneMostellerPart(std::map<std::string, double> parameters = {}) {
  parameters.insert({{"mu", 26.469640334617008},
                     {"sigma", 7.974532802151592},
                     {"beta", 25.0 / 6.0},
                     {"tau", kImplementationsTau}});
  return Spec("openskill", std::move(parameters), "thurstone_mosteller_part");
}
const Rating kPythonFixtureThurstoneMostellerPartRating =
    MuSigma(26.469640334617008, 7.974532802151592);

// "results_normal" (line 337): one player against a team of two, placed in input order.
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureNormal) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart()), {Team({r}, 1), Team({r, r}, 2)},
      {{{29.50521154123705, 7.916012842128793}},
       {{23.434069127996967, 7.891463730090605}, {23.434069127996967, 7.891463730090605}}});
}

// "results_ranks" (line 345): teams of 1, 2, 1, 2 placed 2, 1, 4, 3.
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureRanks) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart()),
      {Team({r}, 2), Team({r, r}, 1), Team({r}, 4), Team({r, r}, 3)},
      {{{27.91178106308775, 7.9190101914124975}},
       {{27.441111340399758, 7.930801109129218}, {27.441111340399758, 7.930801109129218}},
       {{25.33000132176046, 7.928540160592034}},
       {{25.195667613220063, 7.9173241864045165}, {25.195667613220063, 7.9173241864045165}}});
}

// "results_scores" (line 353): scores 1 and 2: the team of two wins.
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureScores) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart()), {Team({r}, 2), Team({r, r}, 1)},
      {{{25.760284981357852, 7.944579240968348}},
       {{27.178995687876164, 7.931957619853589}, {27.178995687876164, 7.931957619853589}}});
}

// "results_margins" (line 358): five teams of two, scores 10, 5, 5, 2, 1 (placed 1, 2, 2, 4, 5),
// weights [[1, 2], [2, 1], [1, 2], [3, 1], [1, 2]], margin 2. The margin moves nothing here: it
// divides the difference of the teams' means, and every team starts equal (openskill.py 6.2.0 gives
// these numbers for any margin, and so did its code before #191). So this checks the contribution
// weights and the tie, not a margin.
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureMarginsGame) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart()),
      {ContributedTeam({r, r}, {1, 2}, 1), ContributedTeam({r, r}, {2, 1}, 2),
       ContributedTeam({r, r}, {1, 2}, 2), ContributedTeam({r, r}, {3, 1}, 4),
       ContributedTeam({r, r}, {1, 2}, 5)},
      {{{27.96534264544695, 7.928487581587607}, {29.461044956276893, 7.881732855517346}},
       {{27.21749149003198, 7.868375374287526}, {26.843565912324493, 7.921851074330119}},
       {{26.843565912324493, 7.921851074330119}, {27.21749149003198, 7.868375374287526}},
       {{26.095714756909523, 7.951761854722042}, {25.721789179202037, 7.928487581587607}},
       {{24.973938023787067, 7.928487581587607}, {25.721789179202037, 7.951761854722042}}});
}

// "results_limit_sigma" (line 369): teams of 1, 2, 3 placed 2, 1, 3, limit_sigma.
// No sigma here would have risen: the flag changes none of these numbers
// (OpenSkillLimitSigmaTest checks what it does).
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureLimitSigma) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart({{"limit_sigma", 1}})),
      {Team({r}, 2), Team({r, r}, 1), Team({r, r, r}, 3)},
      {{{27.975386377266542, 7.9377235327380635}},
       {{27.921611900458238, 7.932817201096874}, {27.921611900458238, 7.932817201096874}},
       {{23.511922726126244, 7.911402997928463},
        {23.511922726126244, 7.911402997928463},
        {23.511922726126244, 7.911402997928463}}});
}

// "results_ties" (line 379): teams of 1, 2, 3 placed 1, 2, 1.
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureTies) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart()),
      {Team({r}, 1), Team({r, r}, 2), Team({r, r, r}, 1)},
      {{{29.44309461220982, 7.919695615857688}},
       {{24.603904695758974, 7.9209068622595575}, {24.603904695758974, 7.9209068622595575}},
       {{25.361921695882234, 7.91508954685688},
        {25.361921695882234, 7.91508954685688},
        {25.361921695882234, 7.91508954685688}}});
}

// "results_weights" (line 388): teams of 3, 2, 3, 2 placed 2, 1, 4, 3, weights [[2, 0, 0], [1, 2],
// [0, 0, 1], [0, 1]].
TEST(OpenSkillThurstoneMostellerPartTest, PythonFixtureWeights) {
  const Rating r = kPythonFixtureThurstoneMostellerPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureThurstoneMostellerPart()),
      {ContributedTeam({r, r, r}, {2, 0, 0}, 2), ContributedTeam({r, r}, {1, 2}, 1),
       ContributedTeam({r, r, r}, {0, 0, 1}, 4), ContributedTeam({r, r}, {0, 1}, 3)},
      {{{26.427517800681336, 7.956025338955594},
        {26.385395266745665, 7.937037264065903},
        {26.385395266745665, 7.937037264065903}},
       {{28.431266290509193, 7.931947363860401}, {30.392892246401377, 7.888691913686816}},
       {{24.59126431443039, 7.930267851061856},
        {24.59126431443039, 7.930267851061856},
        {25.530452324523697, 7.952649434201831}},
       {{26.470635466782785, 7.937473829418651}, {26.471630598948565, 7.8998014993021055}}});
}

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_bradley_terry_part.py, test_rate,
// against tests/models/data/bradleyterrypart.json (openskill.h gives the parameters it was made
// with).
SystemSpec PythonFixtureBradleyTerryPart(std::map<std::string, double> parameters = {}) {
  parameters.insert({{"mu", 8.954715133403496},
                     {"sigma", 5.848503823078021},
                     {"beta", 25.0 / 6.0},
                     {"tau", kImplementationsTau}});
  return Spec("openskill", std::move(parameters), "bradley_terry_part");
}
const Rating kPythonFixtureBradleyTerryPartRating = MuSigma(8.954715133403496, 5.848503823078021);

// "results_normal" (line 329): one player against a team of two, placed in input order.
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureNormal) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(*Make(PythonFixtureBradleyTerryPart()), {Team({r}, 1), Team({r, r}, 2)},
                  {{{10.946230734590799, 5.769748517601138}},
                   {{6.963199532216194, 5.73655963735044}, {6.963199532216194, 5.73655963735044}}});
}

// "results_ranks" (line 337): teams of 1, 2, 1, 2 placed 2, 1, 4, 3.
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureRanks) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureBradleyTerryPart()),
      {Team({r}, 2), Team({r, r}, 1), Team({r}, 4), Team({r, r}, 3)},
      {{{9.870790808603847, 5.749148172476351}},
       {{10.008429504961542, 5.743144340247091}, {10.008429504961542, 5.743144340247091}},
       {{7.774882207356119, 5.749148172476351}},
       {{8.164758012692479, 5.743144340247091}, {8.164758012692479, 5.743144340247091}}});
}

// "results_scores" (line 345): scores 1 and 2: the team of two wins.
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureScores) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(*Make(PythonFixtureBradleyTerryPart()), {Team({r}, 2), Team({r, r}, 1)},
                  {{{8.02711934882737, 5.769748517601138}},
                   {{9.882310917979623, 5.73655963735044}, {9.882310917979623, 5.73655963735044}}});
}

// "results_margins" (line 350): five teams of two, scores 10, 5, 5, 2, 1 (placed 1, 2, 2, 4, 5),
// weights [[1, 2], [2, 1], [1, 2], [3, 1], [1, 2]], margin 2. The margin moves nothing here: it
// divides the difference of the teams' means, and every team starts equal (openskill.py 6.2.0 gives
// these numbers for any margin, and so did its code before #191). So this checks the contribution
// weights and the tie, not a margin.
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureMarginsGame) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureBradleyTerryPart()),
      {ContributedTeam({r, r}, {1, 2}, 1), ContributedTeam({r, r}, {2, 1}, 2),
       ContributedTeam({r, r}, {1, 2}, 2), ContributedTeam({r, r}, {3, 1}, 4),
       ContributedTeam({r, r}, {1, 2}, 5)},
      {{{10.260666678925377, 5.756291149080297}, {11.566618224447257, 5.6619638088703494}},
       {{9.607690906164436, 5.6619638088703494}, {9.281203019783966, 5.756291149080297}},
       {{9.281203019783966, 5.756291149080297}, {9.607690906164436, 5.6619638088703494}},
       {{8.628227247023027, 5.80287985426128}, {8.301739360642557, 5.756291149080297}},
       {{7.648763587881616, 5.756291149080297}, {8.301739360642557, 5.80287985426128}}});
}

// "results_limit_sigma" (line 361): teams of 1, 2, 3 placed 2, 1, 3, limit_sigma.
// No sigma here would have risen: the flag changes none of these numbers
// (OpenSkillLimitSigmaTest checks what it does).
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureLimitSigma) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureBradleyTerryPart({{"limit_sigma", 1}})),
      {Team({r}, 2), Team({r, r}, 1), Team({r, r, r}, 3)},
      {{{9.53168513913054, 5.788305447884618}},
       {{10.195020992403235, 5.7608622734328305}, {10.195020992403235, 5.7608622734328305}},
       {{7.137439268676715, 5.773109870367607},
        {7.137439268676715, 5.773109870367607},
        {7.137439268676715, 5.773109870367607}}});
}

// "results_ties" (line 371): teams of 1, 2, 3 placed 1, 2, 1.
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureTies) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(
      *Make(PythonFixtureBradleyTerryPart()), {Team({r}, 1), Team({r, r}, 2), Team({r, r, r}, 1)},
      {{{10.338265059251315, 5.788305447884618}},
       {{7.543004512196137, 5.7608622734328305}, {7.543004512196137, 5.7608622734328305}},
       {{8.982875828763039, 5.773109870367607},
        {8.982875828763039, 5.773109870367607},
        {8.982875828763039, 5.773109870367607}}});
}

// "results_weights" (line 380): teams of 3, 2, 3, 2 placed 2, 1, 4, 3, weights [[2, 0, 0], [1, 2],
// [0, 0, 1], [0, 1]].
TEST(OpenSkillBradleyTerryPartTest, PythonFixtureWeights) {
  const Rating r = kPythonFixtureBradleyTerryPartRating;
  ExpectOpenSkill(*Make(PythonFixtureBradleyTerryPart()),
                  {ContributedTeam({r, r, r}, {2, 0, 0}, 2), ContributedTeam({r, r}, {1, 2}, 1),
                   ContributedTeam({r, r, r}, {0, 0, 1}, 4), ContributedTeam({r, r}, {0, 1}, 3)},
                  {{{9.210108112704093, 5.697702786410324},
                    {9.082411623053794, 5.773896364469605},
                    {9.082411623053794, 5.773896364469605}},
                   {{10.42537627085969, 5.7754881866116}, {11.896037408315884, 5.700928536157741}},
                   {{7.551304590738987, 5.773896364469605},
                    {7.551304590738987, 5.773896364469605},
                    {8.253009862071242, 5.8116185628720505}},
                   {{8.759768048961513, 5.7754881866116}, {8.857241591182506, 5.812409363022052}}});
}
// The fixtures' games have at most five teams, which a window of 4 compares all with all. Seven
// solo players of different ratings (mu 20 + 2k, sigma 6 + k/2 for k = 0..6) placed 3, 1, 7, 2, 5,
// 4, 6 with window_size 2 compare only neighbours in placement order. Not a published vector:
// openskill.py 6.2.0's output (the v6.2.0 tag, run from source), BradleyTerryPart(window_size=2,
// tau=0.0).rate(teams, ranks=[3, 1, 7, 2, 5, 4, 6]) and ThurstoneMostellerPart the same (tau given
// to the model, since rate(tau=0) would fall back to 25/300).
TEST(OpenSkillPartWindowTest, WindowComparesNeighboursInPlacementOrder) {
  std::vector<PlacedTeam> room;
  const uint32_t ranks[] = {3, 1, 7, 2, 5, 4, 6};
  for (int k = 0; k < 7; ++k) room.push_back(Team({MuSigma(20 + 2 * k, 6 + 0.5 * k)}, ranks[k]));
  const auto solo = [](std::vector<MuSigmaPair> players) {
    std::vector<std::vector<MuSigmaPair>> teams;
    for (const auto& player : players) teams.push_back({player});
    return teams;
  };
  ExpectOpenSkill(*Make(Spec("openskill", {{"window_size", 2}}, "bradley_terry_part")), room,
                  solo({{20.362266052099873, 5.896240340825047},
                        {23.972659194841466, 6.335401079958628},
                        {22.490214964843908, 6.852580686548794},
                        {26.51173557977775, 7.265513672814448},
                        {27.75307322641568, 7.744794412975476},
                        {29.474049477212752, 8.202440331623528},
                        {30.52176365232129, 8.659551681493985}}));
  ExpectOpenSkill(*Make(Spec("openskill", {{"window_size", 2}}, "thurstone_mosteller_part")), room,
                  solo({{20.23924915013125, 5.963691553807627},
                        {23.57391964348474, 6.446698731678521},
                        {22.71093113598719, 6.954749672852626},
                        {26.45150222102119, 7.423026583084354},
                        {27.823704631872804, 7.913732372300547},
                        {29.620168960316594, 8.39555964176047},
                        {30.906332465605605, 8.890290341752324}}));
  // A window of 6 compares every pair: the mean of the full model's comparisons.
  ExpectOpenSkill(*Make(Spec("openskill", {{"window_size", 6}}, "bradley_terry_part")), room,
                  solo({{20.918876622554556, 5.899142988883506},
                        {24.134435551753715, 6.363017681378645},
                        {22.094015230483496, 6.822856998540777},
                        {27.463211230566465, 7.280144883621318},
                        {26.8122848952449, 7.73642574924845},
                        {29.369093339152208, 8.193137898830054},
                        {29.094674958359082, 8.65149817878056}}));
}

// ---------------------------------------------------------------------------------------------
// limit_sigma: no sigma ends a room above the sigma it started with.

const std::vector<std::string> kOpenSkillModels{"plackett_luce", "bradley_terry_full",
                                                "bradley_terry_part", "thurstone_mosteller_full",
                                                "thurstone_mosteller_part"};

// vivekjoshy/openskill.py v6.2.0, tests/models/weng_lin/test_<model>.py, test_rate_errors,
// "# Prevents sigma from rising" (test_plackett_luce.py line 449, test_thurstone_mosteller_full.py
// line 458, ...): (40, 3) beats (-20, 3) with tau = 0.3 and limit_sigma, and "assert winner.sigma
// <= a.sigma" and "loser.sigma <= b.sigma". Without the flag both end above 3 (tau adds more than
// so certain a result takes away), which shows the flag is what holds them; mu is the same either
// way.
TEST(OpenSkillLimitSigmaTest, SigmaNeverRisesAboveWhereItStarted) {
  for (const std::string& model : kOpenSkillModels) {
    const std::vector<PlacedTeam> room{Team({MuSigma(40, 3)}, 1), Team({MuSigma(-20, 3)}, 2)};
    const auto limited =
        RateOk(*Make(Spec("openskill", {{"tau", 0.3}, {"limit_sigma", 1}}, model)), room);
    const auto free = RateOk(*Make(Spec("openskill", {{"tau", 0.3}}, model)), room);
    for (size_t t = 0; t < 2; ++t) {
      EXPECT_LE(limited[t][0].deviation, 3) << model;
      EXPECT_GT(free[t][0].deviation, 3) << model;
      EXPECT_EQ(limited[t][0].value, free[t][0].value) << model;
    }
  }
}

// Ratings far from any ladder neither overflow nor turn into NaN: Plackett-Luce's exp(mu / c)
// would overflow at mu = 1e5 without its log-sum-exp.
TEST(OpenSkillTest, RatingsFarFromTheScaleStayFinite) {
  for (const std::string& model : kOpenSkillModels) {
    const auto system = Make(Spec("openskill", {}, model));
    const auto rated = RateOk(*system, {Team({MuSigma(1e5, 8)}, 2), Team({MuSigma(-1e5, 8)}, 1),
                                        Team({MuSigma(25, 1e-3)}, 3)});
    for (const auto& team : rated) {
      for (const auto& rating : team) {
        EXPECT_TRUE(system->CheckRating(rating).ok()) << model << ": " << rating.value;
      }
    }
    // The favourite that lost falls, the outsider that won rises.
    EXPECT_LT(rated[0][0].value, 1e5) << model;
    EXPECT_GT(rated[1][0].value, -1e5) << model;
  }
}

TEST(OpenSkillTest, DisplayedIsMuMinusThreeSigma) {
  const auto system = Make(kPlackettLuce);
  EXPECT_DOUBLE_EQ(system->Displayed(MuSigma(25, 25.0 / 3.0)), 0);
  EXPECT_DOUBLE_EQ(system->Displayed(MuSigma(30, 2)), 24);
  EXPECT_EQ(system->Initial(), MuSigma(25, 25.0 / 3.0));
}

// ---------------------------------------------------------------------------------------------
// Glicko-2: Mark E. Glickman, "Example of the Glicko-2 system" (glicko.net/glicko/glicko2.pdf),
// the worked example: "Suppose a player rated 1500 competes against players rated 1400, 1550 and
// 1700, winning the first game and losing the next two. Assume the 1500-rated player's rating
// deviation is 200, and his opponents' are 30, 100 and 300, respectively. Assume the 1500 player
// has volatility sigma = 0.06, and the system constant tau is 0.5."

const std::vector<Glicko2Game> kGlickmanGames{
    {Rating{.value = 1400, .deviation = 30, .volatility = 0.06}, 1},
    {Rating{.value = 1550, .deviation = 100, .volatility = 0.06}, 0},
    {Rating{.value = 1700, .deviation = 300, .volatility = 0.06}, 0},
};
const Rating kGlickmanPlayer{.value = 1500, .deviation = 200, .volatility = 0.06};
constexpr double kGlicko2Scale = 173.7178;

// The paper prints, step 5: "sigma' = 0.05999"; step 7: "mu' = ... = -0.2069" and
// "phi' = ... = 0.8722"; step 8: "r' = 173.7178 x -0.2069 + 1500 = 1464.06" and
// "RD' = 173.7178 x 0.8722 = 151.52". It carries every intermediate at four decimals, so its
// step 7 (the Glicko-2 scale) is matched to half a unit of its last digit, and its step 5 and 8,
// which it computes from those rounded figures (173.7178 x -0.2069 + 1500 = 1464.0574), to one
// unit: full precision gives r' = 1464.0507 and sigma' = 0.0599960 (see the next test).
TEST(Glicko2Test, GlickmansWorkedExample) {
  const Rating after = Glicko2RatingPeriod(kGlickmanPlayer, kGlickmanGames, 0.5).value();
  EXPECT_NEAR((after.value - 1500) / kGlicko2Scale, -0.2069, 0.00005);
  EXPECT_NEAR(after.deviation / kGlicko2Scale, 0.8722, 0.00005);
  EXPECT_NEAR(after.value, 1464.06, 0.01);
  EXPECT_NEAR(after.deviation, 151.52, 0.01);
  EXPECT_NEAR(after.volatility, 0.05999, 0.00001);
}

// The same example at full precision, as an independent implementation publishes it:
// jlouis/erl-glicko2, src/glicko2.erl, glicko_test(): "within(0.059995984286488495, SigmaP)",
// "within(1464.0506705393013, R1)", "within(151.51652412385727, RD1)". It finds sigma' with
// Ridders' method rather than Illinois, to the same epsilon on ln(sigma^2): the two roots agree
// to well within 1e-6.
TEST(Glicko2Test, GlickmansExampleAtFullPrecision) {
  const Rating after = Glicko2RatingPeriod(kGlickmanPlayer, kGlickmanGames, 0.5).value();
  EXPECT_NEAR(after.value, 1464.0506705393013, 1e-6);
  EXPECT_NEAR(after.deviation, 151.51652412385727, 1e-6);
  EXPECT_NEAR(after.volatility, 0.059995984286488495, 1e-6);
}

// The paper, step 6 and its note on a player who does not compete: "the player's rating and
// volatility parameters remain the same, but the new RD' = 173.7178 sqrt(phi^2 + sigma^2)".
// For 1500/200/0.06: 173.7178 * sqrt(1.15130^2 + 0.06^2) = 173.7178 * 1.152862 = 200.2714 (by
// hand; 1.152862 is the paper's own phi* of step 6).
TEST(Glicko2Test, PeriodWithoutGamesOnlyWidensTheDeviation) {
  const Rating after = Glicko2RatingPeriod(kGlickmanPlayer, {}, 0.5).value();
  EXPECT_EQ(after.value, 1500);
  EXPECT_EQ(after.volatility, 0.06);
  EXPECT_NEAR(after.deviation, 200.2714, 0.00005);
}

// The system rates a room of two single players as one period each, against the other's rating
// from before the match, the rank deciding the score.
TEST(Glicko2Test, RoomIsOneRatingPeriodPerPlayer) {
  const auto system = Make(Spec("glicko2"));
  const Rating a{.value = 1500, .deviation = 200, .volatility = 0.06};
  const Rating b{.value = 1400, .deviation = 30, .volatility = 0.06};
  const auto won = RateOk(*system, {Team({a}, 1), Team({b}, 2)});
  EXPECT_EQ(won[0][0], Glicko2RatingPeriod(a, {{b, 1}}, 0.5).value());
  EXPECT_EQ(won[1][0], Glicko2RatingPeriod(b, {{a, 0}}, 0.5).value());
  const auto lost = RateOk(*system, {Team({a}, 2), Team({b}, 1)});
  EXPECT_EQ(lost[0][0], Glicko2RatingPeriod(a, {{b, 0}}, 0.5).value());
  const auto drew = RateOk(*system, {Team({a}, 1), Team({b}, 1)});
  EXPECT_EQ(drew[0][0], Glicko2RatingPeriod(a, {{b, 0.5}}, 0.5).value());
  EXPECT_EQ(drew[1][0], Glicko2RatingPeriod(b, {{a, 0.5}}, 0.5).value());
  // The winner rises, the loser falls, both deviations shrink.
  EXPECT_GT(won[0][0].value, a.value);
  EXPECT_LT(won[1][0].value, b.value);
  EXPECT_LT(won[0][0].deviation, a.deviation);
}

TEST(Glicko2Test, AcceptsOnlyTwoTeamsOfOne) {
  const auto system = Make(Spec("glicko2"));
  EXPECT_TRUE(system->Accepts({1, 1}).ok());
  for (const std::vector<size_t>& sizes :
       std::vector<std::vector<size_t>>{{1}, {1, 1, 1}, {2, 1}, {1, 2}, {2, 2}, {}, {1, 0}}) {
    const Status status = system->Accepts(sizes);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << sizes.size();
    EXPECT_NE(status.message().find("two teams of one player"), std::string::npos)
        << status.message();
  }
}

// Ratings thousands of points apart: the textbook 1 - E is 0 there, and v = 1 / 0.
TEST(Glicko2Test, RatingsFarApartStayFinite) {
  const auto system = Make(Spec("glicko2"));
  const Rating strong{.value = 1e5, .deviation = 50, .volatility = 0.06};
  const Rating weak{.value = 0, .deviation = 50, .volatility = 0.06};
  for (const uint32_t strong_rank : {1u, 2u}) {
    const auto rated =
        RateOk(*system, {Team({strong}, strong_rank), Team({weak}, 3 - strong_rank)});
    EXPECT_TRUE(system->CheckRating(rated[0][0]).ok()) << rated[0][0].value;
    EXPECT_TRUE(system->CheckRating(rated[1][0]).ok()) << rated[1][0].value;
  }
  // The upset still moves both: E rounds to 1, but 1 - E is taken from its own tail.
  const auto upset = RateOk(*system, {Team({strong}, 2), Team({weak}, 1)});
  EXPECT_LT(upset[0][0].value, strong.value);
  EXPECT_GT(upset[1][0].value, weak.value);
}

TEST(Glicko2Test, DisplayedIsRatingMinusTwoDeviations) {
  const auto system = Make(Spec("glicko2"));
  EXPECT_DOUBLE_EQ(system->Displayed(Rating{.value = 1850, .deviation = 50, .volatility = 0.06}),
                   1750);
  EXPECT_EQ(system->Initial(), (Rating{.value = 1500, .deviation = 350, .volatility = 0.06}));
}

// Step 5's iterations end whatever they are given: a tau of 1e-30 (which a mode can no longer
// declare) spun for ever in the bracket search, since a - k tau rounds to a for 10^28 values of
// k. Called directly, the period now answers INTERNAL naming the iteration.
TEST(Glicko2Test, StepFiveIsBoundedForAnyInput) {
  const Rating player{.value = 1500, .deviation = 350, .volatility = 0.06};
  const auto after = Glicko2RatingPeriod(player, {{player, 1}}, 1e-30);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kInternal);
  EXPECT_NE(after.status().message().find("glicko2 step 5"), std::string::npos)
      << after.status().message();
  // Smaller still (tau^2 is 0, and f is not a number): it ends too, one way or the other.
  for (const double tau : {1e-300, 4.9e-324}) {
    Glicko2RatingPeriod(player, {{player, 1}}, tau).status().IgnoreError();
  }
  // Numbers no rating may have still end, with an error or a rating.
  const double huge = std::numeric_limits<double>::max();
  const double tiny = std::numeric_limits<double>::denorm_min();
  for (const double volatility : {tiny, 1e-300, 1e300, huge}) {
    for (const double deviation : {tiny, 1.0, huge}) {
      const Rating odd{.value = 1500, .deviation = deviation, .volatility = volatility};
      Glicko2RatingPeriod(odd, {{odd, 1}}, 0.5).status().IgnoreError();
      Glicko2RatingPeriod(odd, {{odd, 0.5}}, 10).status().IgnoreError();
    }
  }
}

// Within the ranges a mode may declare and a rating may have, every room is rated: the proof of
// glicko2.cc's bracket search, and the Illinois iteration's bound, checked over both ends of
// every range and random points between.
TEST(Glicko2Test, EveryRoomWithinTheRangesIsRated) {
  std::mt19937 random(49);
  const auto log_uniform = [&](double least, double most) {
    return std::exp(
        std::uniform_real_distribution<double>(std::log(least), std::log(most))(random));
  };
  std::uniform_real_distribution<double> value(-kMaxRatingValue, kMaxRatingValue);
  std::uniform_int_distribution<int> rank(1, 2);
  std::vector<double> taus{kMinGlicko2Tau, 0.5, kMaxGlicko2Tau};
  for (int room = 0; room < 3000; ++room) {
    const double tau = room < 300 ? taus[room % 3] : log_uniform(kMinGlicko2Tau, kMaxGlicko2Tau);
    const auto system = Make(Spec("glicko2", {{"tau", tau}}));
    const auto player = [&] {
      // Mostly ratings near each other, where the arithmetic is hardest, sometimes anywhere.
      return Rating{.value = room % 4 == 0 ? value(random) : 1500 + value(random) / 1000,
                    .deviation = log_uniform(kMinUncertainty, kMaxUncertainty),
                    .volatility = log_uniform(kMinUncertainty, kMaxUncertainty)};
    };
    const std::vector<PlacedTeam> teams{Team({player()}, static_cast<uint32_t>(rank(random))),
                                        Team({player()}, static_cast<uint32_t>(rank(random)))};
    const auto rated = system->Rate(teams);
    ASSERT_TRUE(rated.ok()) << "room " << room << ": " << rated.status().ToString() << " tau "
                            << tau << " " << teams[0].players[0].rating.value << "/"
                            << teams[0].players[0].rating.deviation << "/"
                            << teams[0].players[0].rating.volatility << " rank " << teams[0].rank
                            << " vs " << teams[1].players[0].rating.value << "/"
                            << teams[1].players[0].rating.deviation << "/"
                            << teams[1].players[0].rating.volatility << " rank " << teams[1].rank;
    for (const auto& team : *rated) EXPECT_TRUE(system->CheckRating(team[0]).ok());
  }
}

// ---------------------------------------------------------------------------------------------
// Elo.

// A rating change as today's SQL computes it, written here independently of elo.cc: the double
// printed at 15 significant digits (PostgreSQL's float8 -> numeric), then rounded half away from
// zero.
double TodaysRoundedChange(double change) {
  std::ostringstream decimal;
  decimal << std::setprecision(15) << change;
  const double exact = std::stod(decimal.str());
  return exact < 0 ? -std::floor(-exact + 0.5) : std::floor(exact + 0.5);
}

// Today's two-team Elo (design.md §5 step 5): E = 1 / (1 + 10^((Rb - Ra) / 400)),
// round(K (S - E)) for each player of the team.
double TodaysTwoTeamChange(double team, double opponent, double score, double k) {
  return TodaysRoundedChange(k * (score - 1.0 / (1.0 + std::pow(10.0, (opponent - team) / 400.0))));
}

std::vector<Rating> EloPlayers(const std::vector<double>& values) {
  std::vector<Rating> ratings;
  for (double value : values) ratings.push_back(Rating{.value = value});
  return ratings;
}

double Average(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

// The value sql/functions/verdict_elo_delta.sql returns, evaluated on PostgreSQL 15.18 as
// `SELECT verdict_elo_delta(team, opponent, score, k)`, for the teams' average ratings.
struct SqlEloCase {
  std::vector<double> team;
  std::vector<double> opponent;
  double score;  // of `team`: 1 won, 0.5 drew, 0 lost
  double k;
  double sql_change;  // what verdict_elo_delta returned for `team`
};

TEST(EloTest, TwoTeamsMoveExactlyAsTodaysSql) {
  const std::vector<SqlEloCase> cases{
      {{1500}, {1500}, 1, 32, 16},
      {{1600, 1600}, {1400, 1400}, 1, 32, 8},
      {{1400}, {1600}, 0, 32, -8},
      // 33 (1/2 - 1/11) = 13.5 exactly, 13.499999999999998 in double: numeric rounds it to 14.
      {{1500}, {1900}, 0.5, 33, 14},
      {{1900}, {1500}, 0.5, 33, -14},
      {{1613, 1614, 1613, 1614}, {1498, 1498, 1498, 1499}, 0, 32, -21},  // 1613.5 vs 1498.25
      {{1200}, {2100}, 1, 32, 32},
      {{1500, 1500, 1500}, {1520, 1520, 1520}, 0.5, 32, 1},
      {{1700, 1750, 1750}, {1650, 1650, 1650}, 1, 24, 9},
  };
  for (const auto& c : cases) {
    const auto system = Make(Spec("elo", {{"k", c.k}}));
    const uint32_t team_rank = c.score == 1 ? 1 : c.score == 0 ? 2 : 1;
    const uint32_t opponent_rank = c.score == 1 ? 2 : 1;
    const auto rated = RateOk(*system, {Team(EloPlayers(c.team), team_rank),
                                        Team(EloPlayers(c.opponent), opponent_rank)});
    for (size_t j = 0; j < c.team.size(); ++j) {
      EXPECT_EQ(rated[0][j].value - c.team[j], c.sql_change)
          << c.team[0] << " vs " << c.opponent[0] << " k=" << c.k;
    }
    for (size_t j = 0; j < c.opponent.size(); ++j) {
      EXPECT_EQ(rated[1][j].value - c.opponent[j], -c.sql_change)
          << c.team[0] << " vs " << c.opponent[0] << " k=" << c.k;
    }
  }
}

// By hand: equal teams, the winner's expectation is 1/2, so K = 32 moves 16 points; 200 points
// apart, E = 1 / (1 + 10^-0.5) = 0.759747, and a win moves 32 * 0.240253 = 7.688, rounded 8.
TEST(EloTest, HandComputedTwoTeamCases) {
  const auto system = Make(Spec("elo"));
  auto rated =
      RateOk(*system, {Team(EloPlayers({1500, 1500}), 1), Team(EloPlayers({1500, 1500}), 2)});
  EXPECT_EQ(rated[0][0].value, 1516);
  EXPECT_EQ(rated[1][1].value, 1484);
  rated = RateOk(*system, {Team(EloPlayers({1700, 1500}), 1), Team(EloPlayers({1400, 1400}), 2)});
  EXPECT_EQ(rated[0][0].value, 1708);
  EXPECT_EQ(rated[0][1].value, 1508);
  EXPECT_EQ(rated[1][0].value, 1392);
  // Two against one: n_mean = 1.5, so the pair moves 7.688 * 1.5 / 2 = 5.77, rounded 6, and the
  // one -7.688 * 1.5 / 1 = -11.53, rounded -12: the room still sums to zero.
  rated = RateOk(*system, {Team(EloPlayers({1700, 1500}), 1), Team(EloPlayers({1400}), 2)});
  EXPECT_EQ(rated[0][0].value, 1706);
  EXPECT_EQ(rated[0][1].value, 1506);
  EXPECT_EQ(rated[1][0].value, 1388);
  rated = RateOk(*system, {Team(EloPlayers({1500}), 1), Team(EloPlayers({1500}), 1)});
  EXPECT_EQ(rated[0][0].value, 1500);
  EXPECT_EQ(rated[1][0].value, 1500);
}

// Many two-team rooms of equal sizes against the formula written above: the same change for
// every player, opposite for the two teams (a zero residue).
TEST(EloTest, TwoEqualTeamsAgreeWithTodaysFormulaAndSumToZero) {
  std::mt19937 random(39);
  std::uniform_int_distribution<int> rating(900, 2600);
  std::uniform_int_distribution<int> size(1, 8);
  std::uniform_int_distribution<int> outcome(0, 2);
  for (int room = 0; room < 2000; ++room) {
    const int n = size(random);
    std::vector<double> a, b;
    for (int j = 0; j < n; ++j) {
      a.push_back(rating(random));
      b.push_back(rating(random));
    }
    const int result = outcome(random);  // 0: team 1 won, 1: team 2 won, 2: a draw
    const double score = result == 0 ? 1 : result == 1 ? 0 : 0.5;
    const double k = room % 2 == 0 ? 32 : 1 + room % 50;
    const auto system = Make(Spec("elo", {{"k", k}}));
    const auto rated = RateOk(*system, {Team(EloPlayers(a), result == 1 ? 2 : 1),
                                        Team(EloPlayers(b), result == 0 ? 2 : 1)});
    const double expected_a = TodaysTwoTeamChange(Average(a), Average(b), score, k);
    const double expected_b = TodaysTwoTeamChange(Average(b), Average(a), 1 - score, k);
    ASSERT_EQ(expected_a, -expected_b);
    for (int j = 0; j < n; ++j) {
      ASSERT_EQ(rated[0][j].value - a[j], expected_a) << "room " << room;
      ASSERT_EQ(rated[1][j].value - b[j], expected_b) << "room " << room;
    }
  }
}

// Three teams of 1500, placed 1, 2, 3, K = 32: each pair moves K/2 (S - 1/2), so the first gains
// 16 (1/2 + 1/2), the second 16 (-1/2 + 1/2) = 0, the third loses 16 (by hand).
TEST(EloTest, ThreeTeamsArePairedAndScaledByOneOverTMinusOne) {
  const auto system = Make(Spec("elo"));
  const auto rated =
      RateOk(*system, {Team(EloPlayers({1500, 1500}), 1), Team(EloPlayers({1500, 1500}), 2),
                       Team(EloPlayers({1500, 1500}), 3)});
  EXPECT_EQ(rated[0][0].value, 1516);
  EXPECT_EQ(rated[1][0].value, 1500);
  EXPECT_EQ(rated[2][1].value, 1484);
}

// Pairwise against a direct evaluation of Delta_i = K / (T - 1) sum_j (S_ij - E_ij), for four
// teams of different ratings and a tie.
TEST(EloTest, ManyTeamsMatchThePairwiseFormula) {
  const std::vector<std::vector<double>> ratings{
      {1620, 1580}, {1500, 1450}, {1400, 1390}, {1700, 1710}};
  const std::vector<uint32_t> ranks{2, 1, 4, 2};
  const double k = 32;
  std::vector<PlacedTeam> teams;
  for (size_t i = 0; i < ratings.size(); ++i)
    teams.push_back(Team(EloPlayers(ratings[i]), ranks[i]));
  const auto rated = RateOk(*Make(Spec("elo")), teams);
  for (size_t i = 0; i < ratings.size(); ++i) {
    double sum = 0;
    for (size_t j = 0; j < ratings.size(); ++j) {
      if (j == i) continue;
      const double s = ranks[i] < ranks[j] ? 1 : ranks[i] == ranks[j] ? 0.5 : 0;
      sum += s - 1 / (1 + std::pow(10.0, (Average(ratings[j]) - Average(ratings[i])) / 400));
    }
    const double expected = TodaysRoundedChange(k / 3 * sum);
    for (size_t j = 0; j < ratings[i].size(); ++j) {
      EXPECT_EQ(rated[i][j].value - ratings[i][j], expected) << "team " << i;
    }
  }
}

// Placements that tie count half a win each way: 1500 x 3 placed 1, 1, 3 gives the tied teams
// K/2 (0 + 1/2) = 8 and the last K/2 (-1/2 - 1/2) = -16 (by hand).
TEST(EloTest, TiedPlacementsAreHalfAWin) {
  const auto rated = RateOk(
      *Make(Spec("elo")),
      {Team(EloPlayers({1500}), 1), Team(EloPlayers({1500}), 1), Team(EloPlayers({1500}), 3)});
  EXPECT_EQ(rated[0][0].value, 1508);
  EXPECT_EQ(rated[1][0].value, 1508);
  EXPECT_EQ(rated[2][0].value, 1484);
}

// 1 v 4 of equal average, the solo player winning: the teams move +16 and -16, n_mean = 2.5, so
// the solo player would gain 16 * 2.5 / 1 = 40 and each of the four lose 16 * 2.5 / 4 = 10, which
// sums to zero. 40 is more than K = 32, so the room is scaled by 32 / 40 (by hand): +32 and -8,
// still summing to zero.
TEST(EloTest, UnequalTeamsSumToZeroAcrossPlayers) {
  const auto rated = RateOk(*Make(Spec("elo")), {Team(EloPlayers({1500}), 1),
                                                 Team(EloPlayers({1400, 1600, 1450, 1550}), 2)});
  EXPECT_EQ(rated[0][0].value, 1532);
  EXPECT_EQ(rated[1][0].value, 1392);
  EXPECT_EQ(rated[1][3].value, 1542);
}

// One solo player against 199 of its rating, winning at even odds: the zero-sum factor
// n_mean / n_i is 100 for the solo player, and would move it by 16 * 100 = 1600 from one coin
// flip (issue 49). The room is scaled so that no player moves by more than K (elo.h): +32 for
// the solo player, and 8.04 * 32 / 1600 = 0.16 for each of the 199, which rounds to 0 (by hand).
// Losing, the solo player falls by K as well.
TEST(EloTest, NoPlayerMovesByMoreThanKWhateverTheTeamSizes) {
  const std::vector<Rating> crowd = EloPlayers(std::vector<double>(199, 1500));
  const auto won = RateOk(*Make(Spec("elo")), {Team(EloPlayers({1500}), 1), Team(crowd, 2)});
  EXPECT_EQ(won[0][0].value, 1532);
  for (const Rating& r : won[1]) EXPECT_EQ(r.value, 1500);
  const auto lost = RateOk(*Make(Spec("elo")), {Team(EloPlayers({1500}), 2), Team(crowd, 1)});
  EXPECT_EQ(lost[0][0].value, 1468);
  // The bound holds for every shape: no player of any room moves by more than K.
  std::mt19937 random(7);
  std::uniform_int_distribution<int> rating(0, 3000);
  std::uniform_int_distribution<int> team_count(2, 8);
  std::uniform_int_distribution<int> size(1, 30);
  for (int room = 0; room < 300; ++room) {
    const int t = team_count(random);
    std::vector<PlacedTeam> teams;
    for (int i = 0; i < t; ++i) {
      std::vector<double> values(size(random));
      for (auto& value : values) value = rating(random);
      std::uniform_int_distribution<int> rank(1, t);
      teams.push_back(Team(EloPlayers(values), static_cast<uint32_t>(rank(random))));
    }
    const auto rated = RateOk(*Make(Spec("elo")), teams);
    for (size_t i = 0; i < teams.size(); ++i) {
      for (size_t j = 0; j < teams[i].players.size(); ++j) {
        EXPECT_LE(std::abs(rated[i][j].value - teams[i].players[j].rating.value), 32)
            << "room " << room;
      }
    }
  }
}

// Unequal sizes sum to zero before rounding; after it, by at most half a point per player. Large
// K makes the unrounded changes large, so the bound is all rounding can leave.
TEST(EloTest, RoundingResidueIsWithinHalfAPointPerPlayer) {
  std::mt19937 random(3);
  std::uniform_int_distribution<int> rating(1000, 2200);
  std::uniform_int_distribution<int> team_count(2, 12);
  std::uniform_int_distribution<int> size(1, 6);
  for (int room = 0; room < 500; ++room) {
    const int t = team_count(random);
    std::vector<PlacedTeam> teams;
    std::vector<std::vector<double>> before;
    size_t players = 0;
    for (int i = 0; i < t; ++i) {
      std::vector<double> values(size(random));
      for (auto& value : values) value = rating(random);
      std::uniform_int_distribution<int> rank(1, t);
      teams.push_back(Team(EloPlayers(values), static_cast<uint32_t>(rank(random))));
      before.push_back(values);
      players += values.size();
    }
    const auto rated = RateOk(*Make(Spec("elo", {{"k", 1000}})), teams);
    double residue = 0;
    for (size_t i = 0; i < teams.size(); ++i) {
      for (size_t j = 0; j < before[i].size(); ++j) residue += rated[i][j].value - before[i][j];
    }
    EXPECT_LE(std::abs(residue), static_cast<double>(players) / 2) << "room " << room;
  }
}

TEST(EloTest, DisplayedIsTheRating) {
  const auto system = Make(Spec("elo", {{"initial_rating", 1200}}));
  EXPECT_EQ(system->Displayed(Rating{.value = 1834}), 1834);
  EXPECT_EQ(system->Initial(), Rating{.value = 1200});
}

// ---------------------------------------------------------------------------------------------
// Partial play (RatedPlayer::share), in every system: a player of share s ends the room s of the
// way to the rating it would have as a full player (checks.h, MovedByShare), and everyone else is
// rated as if it had played all of it. These are properties of that rule, not published vectors:
// no implementation publishes partial play in this sense (openskill.py's weights are
// contributions, above; Elo and Glicko-2 have none).

// Every system and model, with a room where the player wins, loses, ties, plays solo or in a team.
struct ShareCase {
  std::string name;
  SystemSpec spec;
  Rating rating;   // every player's
  bool solo_only;  // Glicko-2
};

std::vector<ShareCase> ShareCases() {
  const Rating elo{.value = 1500};
  const Rating glicko{.value = 1500, .deviation = 200, .volatility = 0.06};
  std::vector<ShareCase> cases{{"elo", Spec("elo"), elo, false},
                               {"glicko2", Spec("glicko2"), glicko, true}};
  for (const std::string& model : kOpenSkillModels) {
    cases.push_back({model, Spec("openskill", {}, model), kDefaultOpenSkill, false});
    cases.push_back({model + " with tau", Spec("openskill", {{"tau", kImplementationsTau}}, model),
                     kDefaultOpenSkill, false});
  }
  return cases;
}

// Rooms where player 0 of team 0 has `share`, placed `rank` of two: solo, or beside a full
// teammate.
std::vector<PlacedTeam> ShareRoom(const ShareCase& c, double share, uint32_t rank, bool solo) {
  const std::vector<Rating> players(solo ? 1 : 2, c.rating);
  return {SharedTeam(players, {share}, rank), Team(players, rank == 1 ? 2 : 1)};
}

TEST(PartialPlayTest, ShareZeroLeavesTheRatingUnchanged) {
  for (const ShareCase& c : ShareCases()) {
    for (bool solo : {true, false}) {
      if (!solo && c.solo_only) continue;
      for (uint32_t rank : {1u, 2u}) {
        const auto rated = RateOk(*Make(c.spec), ShareRoom(c, 0, rank, solo));
        EXPECT_EQ(rated[0][0], c.rating)
            << c.name << (solo ? " solo" : " team") << " rank " << rank;
      }
    }
    // A tie too (Elo and Bradley-Terry score it 1/2, Thurstone-Mosteller through V~ and W~).
    const std::vector<Rating> one{c.rating};
    EXPECT_EQ(RateOk(*Make(c.spec), {SharedTeam(one, {0}, 1), Team(one, 1)})[0][0], c.rating)
        << c.name;
  }
}

// A half share gains less on a win and loses less on a loss than a full player in its place: its
// teammate in a team, the same player at share 1 when solo. OpenSkill's sigma shrinks less too.
TEST(PartialPlayTest, HalfShareMovesLessThanFullOnAWinAndOnALoss) {
  for (const ShareCase& c : ShareCases()) {
    for (bool solo : {true, false}) {
      if (!solo && c.solo_only) continue;
      for (uint32_t rank : {1u, 2u}) {
        const std::string what =
            c.name + (solo ? " solo" : " team") + " rank " + std::to_string(rank);
        const auto system = Make(c.spec);
        const auto half = RateOk(*system, ShareRoom(c, 0.5, rank, solo));
        const Rating full = solo ? RateOk(*system, ShareRoom(c, 1, rank, solo))[0][0] : half[0][1];
        const double half_move = half[0][0].value - c.rating.value;
        const double full_move = full.value - c.rating.value;
        EXPECT_EQ(half_move > 0, full_move > 0) << what;
        EXPECT_NE(half_move, 0) << what;
        EXPECT_LT(std::abs(half_move), std::abs(full_move)) << what;
        if (c.spec.system == "openskill" && !c.spec.parameters.count("tau")) {
          EXPECT_GT(half[0][0].deviation, full.deviation) << what;
          EXPECT_LT(half[0][0].deviation, c.rating.deviation) << what;
        }
      }
    }
  }
}

// Everyone but the part-time player is rated exactly as if it had played the whole match, and it
// moves by the formula: value by s of the change, each uncertainty by s of its change of variance.
TEST(PartialPlayTest, OthersAreRatedAsIfItPlayedAllAndItMovesByTheFormula) {
  constexpr double kShare = 0.3;
  for (const ShareCase& c : ShareCases()) {
    for (bool solo : {true, false}) {
      if (!solo && c.solo_only) continue;
      const auto system = Make(c.spec);
      const auto part = RateOk(*system, ShareRoom(c, kShare, 2, solo));
      const auto all = RateOk(*system, ShareRoom(c, 1, 2, solo));
      for (size_t t = 0; t < all.size(); ++t) {
        for (size_t p = 0; p < all[t].size(); ++p) {
          if (t == 0 && p == 0) continue;
          EXPECT_EQ(part[t][p], all[t][p]) << c.name << " team " << t << " player " << p;
        }
      }
      const Rating& before = c.rating;
      const Rating& full = all[0][0];
      const auto variance = [&](double b, double f) {
        return std::sqrt(b * b + kShare * (f * f - b * b));
      };
      const double value = before.value + kShare * (full.value - before.value);
      // Elo rounds the part-time change as it rounds every change.
      EXPECT_NEAR(part[0][0].value, c.spec.system == "elo" ? std::round(value) : value, 1e-12)
          << c.name;
      EXPECT_NEAR(part[0][0].deviation, variance(before.deviation, full.deviation), 1e-12)
          << c.name;
      EXPECT_NEAR(part[0][0].volatility, variance(before.volatility, full.volatility), 1e-12)
          << c.name;
    }
  }
}

// Elo by hand: 1500 beats 1500, so each full player gains K (1 - 1/2) = 16, a half-share winner
// round(8) = 8, a quarter-share one round(4) = 4; the loser, who played all of it, loses 16
// whoever left the winning side.
TEST(PartialPlayTest, EloHalfShareGainsHalfThePoints) {
  const auto system = Make(Spec("elo"));
  const std::vector<Rating> one{Rating{.value = 1500}};
  EXPECT_EQ(RateOk(*system, {SharedTeam(one, {0.5}, 1), Team(one, 2)}),
            (std::vector<std::vector<Rating>>{{Rating{.value = 1508}}, {Rating{.value = 1484}}}));
  EXPECT_EQ(RateOk(*system, {SharedTeam(one, {0.25}, 2), Team(one, 1)})[0][0],
            Rating{.value = 1496});
}

// Contributions are openskill.py's and OpenSkill's alone: Elo and Glicko-2 ignore them.
TEST(PartialPlayTest, ContributionsAreIgnoredOutsideOpenSkill) {
  const auto elo = Make(Spec("elo"));
  const std::vector<Rating> pair{Rating{.value = 1500}, Rating{.value = 1600}};
  EXPECT_EQ(RateOk(*elo, {ContributedTeam(pair, {0.2, 3}, 1), Team(EloPlayers({1550, 1550}), 2)}),
            RateOk(*elo, {Team(pair, 1), Team(EloPlayers({1550, 1550}), 2)}));
  const auto glicko2 = Make(Spec("glicko2"));
  const std::vector<Rating> one{Rating{.value = 1500, .deviation = 200, .volatility = 0.06}};
  EXPECT_EQ(RateOk(*glicko2, {ContributedTeam(one, {5}, 1), Team(one, 2)}),
            RateOk(*glicko2, {Team(one, 1), Team(one, 2)}));
}

// ---------------------------------------------------------------------------------------------
// MakeRatingSystem.

TEST(MakeRatingSystemTest, SpecListsEveryParameterWithDefaults) {
  EXPECT_EQ(Make(Spec("elo"))->spec(), (Spec("elo", {{"k", 32}, {"initial_rating", 1500}})));
  EXPECT_EQ(
      Make(Spec("openskill"))->spec(),
      (Spec(
          "openskill",
          {{"mu", 25}, {"sigma", 25.0 / 3.0}, {"beta", 25.0 / 6.0}, {"kappa", 0.0001}, {"tau", 0}},
          "plackett_luce")));
  EXPECT_EQ(Make(Spec("glicko2"))->spec(), (Spec("glicko2", {{"tau", 0.5},
                                                             {"initial_rating", 1500},
                                                             {"initial_deviation", 350},
                                                             {"initial_volatility", 0.06}})));
  // beta defaults to half the sigma given; given parameters are kept.
  const auto spec =
      Make(Spec("openskill", {{"sigma", 10}, {"tau", 0.1}}, "bradley_terry_full"))->spec();
  EXPECT_EQ(spec.model, "bradley_terry_full");
  EXPECT_EQ(spec.parameters.at("beta"), 5);
  EXPECT_EQ(spec.parameters.at("tau"), 0.1);
  EXPECT_EQ(spec.parameters.at("mu"), 25);
  // A spec made from a system's own spec() makes the same system.
  EXPECT_EQ(Make(spec)->spec(), spec);
  // Each model lists the parameters it has: epsilon for Thurstone-Mosteller, window_size for the
  // part models. limit_sigma is listed only when given, so that a mode declared before it existed
  // declares the same parameters (a mode in use may not change).
  const std::map<std::string, double> common{
      {"mu", 25}, {"sigma", 25.0 / 3.0}, {"beta", 25.0 / 6.0}, {"kappa", 0.0001}, {"tau", 0}};
  const auto with = [&](std::map<std::string, double> more) {
    more.insert(common.begin(), common.end());
    return more;
  };
  EXPECT_EQ(Make(Spec("openskill", {}, "thurstone_mosteller_full"))->spec().parameters,
            with({{"epsilon", 0.1}}));
  EXPECT_EQ(Make(Spec("openskill", {}, "thurstone_mosteller_part"))->spec().parameters,
            with({{"epsilon", 0.1}, {"window_size", 4}}));
  EXPECT_EQ(Make(Spec("openskill", {}, "bradley_terry_part"))->spec().parameters,
            with({{"window_size", 4}}));
  EXPECT_EQ(Make(Spec("openskill", {{"limit_sigma", 0}}))->spec().parameters,
            with({{"limit_sigma", 0}}));
}

TEST(MakeRatingSystemTest, RefusesEachBadFieldByName) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    SystemSpec spec;
    std::string field;  // the message starts with it
  };
  const std::vector<Case> cases{
      {Spec("trueskill"), "system:"},
      {Spec(""), "system:"},
      {Spec("elo", {}, "plackett_luce"), "model:"},
      {Spec("glicko2", {}, "x"), "model:"},
      {Spec("openskill", {}, "thurstone_mosteller"), "model:"},
      {Spec("openskill", {{"epsilon", 0.1}}), "parameters.epsilon:"},
      {Spec("openskill", {{"epsilon", 0.1}}, "bradley_terry_part"), "parameters.epsilon:"},
      {Spec("openskill", {{"window_size", 4}}, "thurstone_mosteller_full"),
       "parameters.window_size:"},
      {Spec("openskill", {{"epsilon", 0}}, "thurstone_mosteller_full"), "parameters.epsilon:"},
      {Spec("openskill", {{"epsilon", nan}}, "thurstone_mosteller_part"), "parameters.epsilon:"},
      {Spec("openskill", {{"window_size", 0}}, "bradley_terry_part"), "parameters.window_size:"},
      {Spec("openskill", {{"window_size", 1.5}}, "bradley_terry_part"), "parameters.window_size:"},
      {Spec("openskill", {{"window_size", 1001}}, "thurstone_mosteller_part"),
       "parameters.window_size:"},
      {Spec("openskill", {{"limit_sigma", 2}}), "parameters.limit_sigma:"},
      {Spec("openskill", {{"limit_sigma", 0.5}}, "bradley_terry_full"), "parameters.limit_sigma:"},
      {Spec("elo", {{"K", 32}}), "parameters.K:"},
      {Spec("openskill", {{"z", 3}}), "parameters.z:"},
      {Spec("glicko2", {{"k", 32}}), "parameters.k:"},
      {Spec("elo", {{"k", 0}}), "parameters.k:"},
      {Spec("elo", {{"k", -32}}), "parameters.k:"},
      {Spec("elo", {{"k", nan}}), "parameters.k:"},
      {Spec("elo", {{"k", inf}}), "parameters.k:"},
      {Spec("elo", {{"initial_rating", 1500.5}}), "parameters.initial_rating:"},
      {Spec("openskill", {{"mu", inf}}), "parameters.mu:"},
      {Spec("openskill", {{"sigma", 0}}), "parameters.sigma:"},
      {Spec("openskill", {{"sigma", -1}}), "parameters.sigma:"},
      {Spec("openskill", {{"beta", 0}}), "parameters.beta:"},
      {Spec("openskill", {{"kappa", 0}}), "parameters.kappa:"},
      {Spec("openskill", {{"kappa", 1}}), "parameters.kappa:"},
      {Spec("openskill", {{"tau", -0.1}}), "parameters.tau:"},
      {Spec("openskill", {{"tau", nan}}), "parameters.tau:"},
      {Spec("glicko2", {{"tau", 0}}), "parameters.tau:"},
      {Spec("glicko2", {{"initial_rating", nan}}), "parameters.initial_rating:"},
      {Spec("glicko2", {{"initial_deviation", 0}}), "parameters.initial_deviation:"},
      {Spec("glicko2", {{"initial_volatility", -0.06}}), "parameters.initial_volatility:"},
      // Beyond the ranges the systems' arithmetic is proven for (issue 49): a glicko2 tau of
      // 1e-30 made every room spin for ever in step 5.
      {Spec("glicko2", {{"tau", 1e-30}}), "parameters.tau:"},
      {Spec("glicko2", {{"tau", 0.009}}), "parameters.tau:"},
      {Spec("glicko2", {{"tau", 11}}), "parameters.tau:"},
      {Spec("glicko2", {{"initial_rating", 1e7}}), "parameters.initial_rating:"},
      {Spec("glicko2", {{"initial_deviation", 1e-300}}), "parameters.initial_deviation:"},
      {Spec("glicko2", {{"initial_volatility", 1e300}}), "parameters.initial_volatility:"},
      {Spec("elo", {{"k", 1001}}), "parameters.k:"},
      {Spec("elo", {{"initial_rating", 3e9}}), "parameters.initial_rating:"},
      {Spec("openskill", {{"mu", -1e7}}), "parameters.mu:"},
      {Spec("openskill", {{"sigma", 1e308}}), "parameters.sigma:"},
      {Spec("openskill", {{"sigma", 1e-300}}), "parameters.sigma:"},
      {Spec("openskill", {{"beta", 1e-300}}), "parameters.beta:"},
      {Spec("openskill", {{"tau", 1e7}}), "parameters.tau:"},
  };
  for (const auto& c : cases) {
    const auto system = MakeRatingSystem(c.spec);
    ASSERT_FALSE(system.ok()) << c.field;
    EXPECT_EQ(system.status().code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(system.status().message().rfind(c.field, 0), 0u)
        << "want " << c.field << ", got " << system.status().message();
  }
  // A value out of range is answered with the range.
  EXPECT_EQ(MakeRatingSystem(Spec("glicko2", {{"tau", 1e-30}})).status().message(),
            "parameters.tau: glicko2's tau must be a number >= 0.01 and <= 10, got 1e-30");
  EXPECT_EQ(MakeRatingSystem(Spec("elo", {{"k", 0}})).status().message(),
            "parameters.k: elo's k must be a number > 0 and <= 1000, got 0");
  // Each end of each range is accepted.
  for (const SystemSpec& spec :
       {Spec("glicko2", {{"tau", 0.01}, {"initial_volatility", 1e-6}, {"initial_rating", -1e6}}),
        Spec("glicko2", {{"tau", 10}, {"initial_volatility", 1e6}, {"initial_deviation", 1e6}}),
        Spec("elo", {{"k", 1000}, {"initial_rating", 1e6}}),
        Spec("openskill", {{"sigma", 1e-6}, {"beta", 1e6}, {"tau", 1e6}, {"mu", -1e6}}),
        Spec("openskill", {{"epsilon", 1e-6}, {"window_size", 1}, {"limit_sigma", 0}},
             "thurstone_mosteller_part"),
        Spec("openskill", {{"epsilon", 1e6}, {"window_size", 1000}, {"limit_sigma", 1}},
             "thurstone_mosteller_part")}) {
    EXPECT_TRUE(MakeRatingSystem(spec).ok()) << spec.system;
  }
  // An unknown parameter is answered with the ones the system has.
  EXPECT_NE(MakeRatingSystem(Spec("elo", {{"K", 32}})).status().message().find("k, initial_rating"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The seam's shared rules.

TEST(ApplyChangeTest, CurrentEqualToBeforeGivesAfterExactly) {
  // 25 * (3.3 / 25) is not 3.3 in doubles, nor 25 + (3.3 - 25): the rule must not compute them.
  const Rating before{.value = 25, .deviation = 25, .volatility = 25};
  const Rating after{.value = 3.3, .deviation = 3.3, .volatility = 3.3};
  ASSERT_NE(25 * (3.3 / 25), 3.3);
  ASSERT_NE(25 + (3.3 - 25), 3.3);
  EXPECT_EQ(ApplyChange(before, before, after), after);
}

TEST(ApplyChangeTest, MovesValueByDifferenceAndUncertaintyByRatio) {
  const Rating before{.value = 25, .deviation = 8, .volatility = 0.06};
  const Rating after{.value = 27, .deviation = 6, .volatility = 0.03};
  const Rating current{.value = 30, .deviation = 4, .volatility = 0.08};
  const Rating moved = ApplyChange(current, before, after);
  EXPECT_DOUBLE_EQ(moved.value, 32);
  EXPECT_DOUBLE_EQ(moved.deviation, 3);
  EXPECT_DOUBLE_EQ(moved.volatility, 0.04);
}

// A room that added uncertainty (OpenSkill's tau) adds the same variance to the current sigma,
// never a multiple of it (issue 49): a player imported at sigma 0.01 and allocated a room, then
// imported at sigma 8 before the room's late win. The room, rated from 0.01 with tau 0.0833, took
// sigma to about 0.0839: the old ratio rule multiplied 8 by 8.39, to 67.1. Now
// 8^2 + (after^2 - 0.01^2): just above 8, never more than sqrt(8^2 + tau^2).
TEST(ApplyChangeTest, AGrowthOfUncertaintyAddsItsVarianceNotARatio) {
  const auto system = Make(Spec("openskill", {{"tau", 0.0833}}));
  const Rating before = MuSigma(25, 0.01);
  const auto rated = RateOk(*system, {Team({before}, 1), Team({kDefaultOpenSkill}, 2)});
  const Rating after = rated[0][0];
  ASSERT_GT(after.deviation, 8 * before.deviation) << "the room grew sigma many times over";
  const Rating moved = ApplyChange(MuSigma(30, 8), before, after);
  EXPECT_DOUBLE_EQ(moved.value, 30 + (after.value - 25));
  EXPECT_DOUBLE_EQ(moved.deviation, std::sqrt(64 + (after.deviation * after.deviation - 1e-4)));
  EXPECT_GT(moved.deviation, 8);
  EXPECT_LE(moved.deviation, std::sqrt(64 + 0.0833 * 0.0833));
}

// Whatever the three ratings, a late room's uncertainty stays within bounds: a shrink never takes
// it below 0 (or the floor), a growth never adds more variance than the room added.
TEST(ApplyChangeTest, TheUncertaintyAppliedIsBounded) {
  for (const double current : {kMinUncertainty, 1e-3, 8.0, kMaxUncertainty}) {
    for (const double before : {kMinUncertainty, 1e-3, 8.0, kMaxUncertainty}) {
      for (const double after : {kMinUncertainty, 1e-3, 8.0, kMaxUncertainty}) {
        const double moved =
            ApplyChange(MuSigma(0, current), MuSigma(1, before), MuSigma(2, after)).deviation;
        EXPECT_GE(moved, kMinUncertainty);
        EXPECT_LE(moved, kMaxUncertainty);
        if (after <= before) {
          EXPECT_LE(moved, current * (1 + 1e-12));
        } else {
          EXPECT_LE(moved * moved, (current * current + after * after) * (1 + 1e-12));
        }
      }
    }
  }
  EXPECT_EQ(ApplyChange(Rating{.value = 9e5}, Rating{.value = 0}, Rating{.value = 5e5}).value,
            kMaxRatingValue);
}

TEST(ApplyChangeTest, NoUncertaintyBeforeTakesAfters) {
  const Rating before{.value = 1500};
  const Rating after{.value = 1516};
  EXPECT_EQ(ApplyChange(Rating{.value = 1530}, before, after), Rating{.value = 1546});
  const Rating with_deviation{.value = 25, .deviation = 7};
  EXPECT_EQ(ApplyChange(Rating{.value = 20, .deviation = 3}, Rating{.value = 24}, with_deviation),
            (Rating{.value = 21, .deviation = 7}));
}

TEST(CheckRoomTest, RefusesWhatRateCannotRate) {
  const auto system = Make(Spec("openskill"));
  const Rating r = kDefaultOpenSkill;
  EXPECT_TRUE(CheckRoom(*system, {Team({r}, 1), Team({r, r}, 2)}).ok());
  const auto message = [&](const std::vector<PlacedTeam>& teams) {
    const Status status = CheckRoom(*system, teams);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    return status.message();
  };
  EXPECT_NE(message({Team({r}, 1)}).find("at least two teams"), std::string::npos);
  EXPECT_NE(message({Team({r}, 1), Team({}, 2)}).find("team 2 has no players"), std::string::npos);
  EXPECT_NE(message({Team({r}, 1), Team({r}, 3)}).find("team 2: rank 3"), std::string::npos);
  EXPECT_NE(message({Team({r}, 0), Team({r}, 1)}).find("team 1: rank 0"), std::string::npos);
  EXPECT_NE(
      message({Team({r}, 1), SharedTeam({r, r}, {1, 1.5}, 2)}).find("team 2, player 1: share"),
      std::string::npos);
  EXPECT_NE(message({Team({r}, 1), SharedTeam({r}, {std::nan("")}, 2)}).find("share"),
            std::string::npos);
  EXPECT_NE(message({Team({r}, 1), SharedTeam({r}, {-0.1}, 2)}).find("share"), std::string::npos);
  EXPECT_NE(message({ContributedTeam({r, r}, {1, -1}, 1), Team({r}, 2)})
                .find("team 1, player 1: contribution"),
            std::string::npos);
  EXPECT_NE(
      message({ContributedTeam({r}, {std::numeric_limits<double>::infinity()}, 1), Team({r}, 2)})
          .find("contribution"),
      std::string::npos);
  EXPECT_NE(
      message({Team({r}, 1), Team({MuSigma(25, 0)}, 2)}).find("team 2, player 0: rating deviation"),
      std::string::npos);
  EXPECT_NE(message({Team({MuSigma(std::nan(""), 8)}, 1), Team({r}, 2)}).find("rating value"),
            std::string::npos);
  EXPECT_FALSE(CheckRoom(*Make(Spec("elo")),
                         {Team({Rating{.value = 1500.5}}, 1), Team({Rating{.value = 1500}}, 2)})
                   .ok());
  EXPECT_FALSE(CheckRoom(*Make(Spec("glicko2")),
                         {Team({Rating{.value = 1500, .deviation = 350}}, 1),
                          Team({Rating{.value = 1500, .deviation = 350, .volatility = 0.06}}, 2)})
                   .ok());
}

// What an import must be (issue 49): an Elo of 3e9 showed as an int32 wrapped, 1e308 as 0, and an
// OpenSkill sigma of 1e308 made the displayed rating -Infinity. Every system keeps its ratings
// within the bounds, and Rate never leaves them.
TEST(CheckRatingTest, RatingsBeyondTheBoundsAreRefused) {
  const auto elo = Make(Spec("elo"));
  const auto openskill = Make(Spec("openskill"));
  const auto glicko2 = Make(Spec("glicko2"));
  const auto refused = [](const RatingSystem& system, const Rating& rating, std::string field) {
    const Status status = system.CheckRating(rating);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << system.spec().system;
    EXPECT_EQ(status.message().rfind(field + ":", 0), 0u) << status.message();
  };
  refused(*elo, Rating{.value = 3e9}, "value");
  refused(*elo, Rating{.value = 1e308}, "value");
  refused(*elo, Rating{.value = -1e6 - 1}, "value");
  EXPECT_TRUE(elo->CheckRating(Rating{.value = 1e6}).ok());
  EXPECT_TRUE(elo->CheckRating(Rating{.value = -1e6}).ok());
  refused(*openskill, MuSigma(25, 1e308), "deviation");
  refused(*openskill, MuSigma(25, 1e-300), "deviation");
  refused(*openskill, MuSigma(1e308, 8), "value");
  EXPECT_TRUE(openskill->CheckRating(MuSigma(25, kMinUncertainty)).ok());
  EXPECT_TRUE(openskill->CheckRating(MuSigma(25, kMaxUncertainty)).ok());
  EXPECT_TRUE(std::isfinite(openskill->Displayed(MuSigma(-kMaxRatingValue, kMaxUncertainty))));
  refused(*glicko2, Rating{.value = 1500, .deviation = 350, .volatility = 1e300}, "volatility");
  refused(*glicko2, Rating{.value = 1500, .deviation = 1e-9, .volatility = 0.06}, "deviation");
  // A room at the bounds stays within them.
  const auto at_edge = RateOk(*elo, {Team(EloPlayers({1e6}), 1), Team(EloPlayers({-1e6}), 2)});
  EXPECT_TRUE(elo->CheckRating(at_edge[0][0]).ok());
  const auto upset = RateOk(*elo, {Team(EloPlayers({1e6}), 2), Team(EloPlayers({1e6 - 1}), 1)});
  EXPECT_EQ(upset[1][0].value, 1e6);
  const auto sharp = RateOk(*openskill, {Team({MuSigma(25, kMinUncertainty)}, 1),
                                         Team({MuSigma(25, kMinUncertainty)}, 2)});
  EXPECT_TRUE(openskill->CheckRating(sharp[0][0]).ok());
  EXPECT_TRUE(openskill->CheckRating(sharp[1][0]).ok());
}

// A room Rate cannot rate is a caller's bug, answered with the ratings as they were.
TEST(CheckRoomTest, RateAnswersAnUncheckedRoomUnchanged) {
  const Rating g{.value = 1500, .deviation = 350, .volatility = 0.06};
  const std::vector<PlacedTeam> three{Team({g}, 1), Team({g}, 2), Team({g}, 3)};
  EXPECT_EQ(RateOk(*Make(Spec("glicko2")), three),
            (std::vector<std::vector<Rating>>{{g}, {g}, {g}}));
  const std::vector<PlacedTeam> bad_rank{Team({Rating{.value = 1500}}, 1),
                                         Team({Rating{.value = 1500}}, 7)};
  EXPECT_EQ(RateOk(*Make(Spec("elo")), bad_rank),
            (std::vector<std::vector<Rating>>{{Rating{.value = 1500}}, {Rating{.value = 1500}}}));
}

}  // namespace
}  // namespace verdict::rating
