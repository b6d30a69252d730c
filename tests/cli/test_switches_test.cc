// The negative controls' --unsafe-* switches exist only in the -testing builds of the programs
// (verdict_add_testing_program): the shipped verdict-lobby and verdict-node refuse every one of
// them as an argument they do not know, while the -testing builds take the ones they have.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;

// `serve` with a --listen that fails right after the command line is parsed: a program that
// takes `test_switch` then stops on the listen address, before touching a database.
std::vector<std::string> LobbyServe(const std::string& program, const std::string& test_switch) {
  return {program, "serve", "--listen", "no-port-here", test_switch};
}

// `retain` with a window that fails right after the command line is parsed, before it touches a
// database.
std::vector<std::string> LobbyRetain(const std::string& program, const std::string& test_switch) {
  return {program, "retain", "--events-older-than", "soon", test_switch};
}

// `run` without a token, which fails right after the command line is parsed.
std::vector<std::string> NodeRun(const std::string& program, const std::string& test_switch,
                                 const TempDir& dir) {
  return {program,           "run",     "--node-id",          "node-a",   "--outbox",
          dir.Sub("outbox"), "--lobby", "http://127.0.0.1:1", test_switch};
}

void ExpectRefused(const ExitAndOutput& exit, const std::string& test_switch) {
  EXPECT_NE(exit.code, 0);
  EXPECT_NE(exit.output.find("was not expected: " + test_switch), std::string::npos) << exit.output;
}

void ExpectTaken(const ExitAndOutput& exit, const std::string& next_error) {
  EXPECT_EQ(exit.code, 1);
  EXPECT_EQ(exit.output.find("not expected"), std::string::npos) << exit.output;
  EXPECT_NE(exit.output.find(next_error), std::string::npos) << exit.output;
}

TEST(TestSwitches, ShippedLobbyRefusesThem) {
  for (const std::string s : {"--unsafe-skip-settle-guard", "--unsafe-release-before-commit"}) {
    SCOPED_TRACE(s);
    ExpectRefused(RunToExit(LobbyServe(LobbyBinary(), s)), s);
  }
  ExpectRefused(RunToExit(LobbyRetain(LobbyBinary(), "--unsafe-expire-receipts-without-records")),
                "--unsafe-expire-receipts-without-records");
}

TEST(TestSwitches, ShippedNodeRefusesThem) {
  TempDir dir;
  for (const std::string s :
       {"--unsafe-ack-before-send", "--unsafe-drop-failed-batches", "--unsafe-ack-whole-batch"}) {
    SCOPED_TRACE(s);
    ExpectRefused(RunToExit(NodeRun(NodeBinary(), s, dir)), s);
  }
}

// The other side, so that the tests above cannot pass on a misspelt switch: the -testing builds
// parse the same command lines and stop only at the error that follows parsing.
TEST(TestSwitches, TestingBuildsTakeThem) {
  ExpectTaken(RunToExit(LobbyServe(LobbyTestingBinary(), "--unsafe-release-before-commit")),
              "--listen wants HOST:PORT");
  ExpectTaken(
      RunToExit(LobbyRetain(LobbyTestingBinary(), "--unsafe-expire-receipts-without-records")),
      "--events-older-than: 'soon' is not a duration");
  TempDir dir;
  for (const std::string s :
       {"--unsafe-ack-before-send", "--unsafe-drop-failed-batches", "--unsafe-ack-whole-batch"}) {
    SCOPED_TRACE(s);
    ExpectTaken(RunToExit(NodeRun(NodeTestingBinary(), s, dir)),
                "--token or --lobby-token-file is required");
  }
}

// The settlement guard's control is no switch of any build: it is test-only SQL
// (tests/sql/unguarded_settle.sql).
TEST(TestSwitches, NoBuildSkipsTheSettlementGuard) {
  ExpectRefused(RunToExit(LobbyServe(LobbyTestingBinary(), "--unsafe-skip-settle-guard")),
                "--unsafe-skip-settle-guard");
}

}  // namespace
}  // namespace verdict::testing
