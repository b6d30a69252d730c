// verdict-node's simulator playing the demo's mix of modes against the real lobby and PostgreSQL:
// a 5v5 on Elo, an 8-player free-for-all and a battle royale of 20 trios on OpenSkill. Every room
// settles once, in its mode, with every team placed; the placements the node's rooms voted on are
// all ones the lobby takes.
#include <gtest/gtest.h>

#include "tests/lobby/lobby_fixture.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace verdict::testing {
namespace {

using SimulatorEndToEndTest = LobbyFixture;

// The modes of scripts/lib/demo-run.sh: (mode, system, teams, team size).
struct DemoMode {
  const char* mode;
  const char* system;
  int teams;
  int team_size;
};
constexpr DemoMode kDemoModes[] = {{"ranked-5v5", "elo", 2, 5},
                                   {"ffa-8", "openskill", 8, 1},
                                   {"royale-trios", "openskill", 20, 3}};
constexpr int kRoomsPerMode = 8;

TEST_F(SimulatorEndToEndTest, MixedModesEachSettleInTheirModeWithEveryTeamPlaced) {
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  std::string simulate_modes;
  for (const DemoMode& m : kDemoModes) {
    const std::string teams = std::to_string(m.teams), size = std::to_string(m.team_size);
    const HttpResponse declared = HttpCall(
        lobby->port(), "PUT", std::string("/v1/modes/") + m.mode, JsonHeaders("admin-token"),
        std::string(R"({"rating": {"system": ")") + m.system + R"("}, "shape": {"min_teams": )" +
            teams + R"(, "max_teams": )" + teams + R"(, "min_team_size": )" + size +
            R"(, "max_team_size": )" + size + "}}");
    ASSERT_EQ(declared.status, 201) << declared.body;
    simulate_modes +=
        (simulate_modes.empty() ? "" : ",") + std::string(m.mode) + "=" + teams + "x" + size;
  }

  TempDir dir;
  const int rooms = kRoomsPerMode * static_cast<int>(std::size(kDemoModes));
  const CommandResult run = RunCommand(
      NodeRunArgs(dir.Sub("outbox"), lobby->port(),
                  {"--exit-when-drained", "--progress-ms", "500", "--admin-token", "admin-token",
                   "--simulate-rooms", std::to_string(rooms), "--simulate-rate", "50",
                   "--simulate-battle-ms", "200", "--simulate-modes", simulate_modes}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(
      run.out.find("rooms " + std::to_string(rooms) + "/" + std::to_string(rooms) + " finished"),
      std::string::npos)
      << run.out;

  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), std::to_string(rooms));
  EXPECT_EQ(Q("SELECT count(*) FROM battle_rooms"), "0") << "an allocated room has no receipt";
  EXPECT_EQ(Q("SELECT count(*) FROM players WHERE verdict_player_room(player_id) <> 0"), "0");
  for (const DemoMode& m : kDemoModes) {
    SCOPED_TRACE(m.mode);
    const std::string mode = std::string("'") + m.mode + "'";
    const std::string seats = std::to_string(m.teams * m.team_size);
    EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE mode = " + mode),
              std::to_string(kRoomsPerMode));
    // Each settled match places every team once, each rank within 1 to the number of teams,
    // and every player of a team at its team's rank.
    EXPECT_EQ(Q("SELECT count(*) FROM (SELECT m.match_id FROM matches m JOIN match_players p "
                "USING (match_id) WHERE m.mode = " +
                mode +
                " AND m.outcome = 'SETTLED' "
                "GROUP BY m.match_id HAVING count(DISTINCT p.team) <> " +
                std::to_string(m.teams) + " OR count(*) <> " + seats +
                " OR min(p.rank) < 1 OR max(p.rank) > " + std::to_string(m.teams) + ") bad"),
              "0");
    EXPECT_EQ(Q("SELECT count(*) FROM (SELECT 1 FROM matches m JOIN match_players p "
                "USING (match_id) WHERE m.mode = " +
                mode +
                " GROUP BY m.match_id, p.team "
                "HAVING count(DISTINCT p.rank) <> 1) bad"),
              "0");
    // Every player of a settled match has played one more game in the mode.
    EXPECT_EQ(Q("SELECT coalesce(sum(games), 0) FROM player_ratings JOIN modes USING (mode_id) "
                "WHERE mode = " +
                mode),
              Q("SELECT " + seats + " * count(*) FROM matches WHERE mode = " + mode +
                " AND outcome = 'SETTLED'"));
    const HttpResponse top =
        HttpCall(lobby->port(), "GET", std::string("/v1/modes/") + m.mode + "/leaderboard?limit=5",
                 {{"Authorization", "Bearer admin-token"}});
    EXPECT_EQ(top.status, 200) << top.body;
    EXPECT_NE(top.body.find("\"player_id\""), std::string::npos) << top.body;
  }
  EXPECT_EQ(Q("SELECT count(*) FROM matches WHERE mode = 'default'"), "0");
}

}  // namespace
}  // namespace verdict::testing
