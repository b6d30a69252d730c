// --log-level: the level names are checked the same way on the command line and in a --config
// file, in both programs; a name spdlog does not know used to turn every log line off, error
// lines included, without a word.
#include "cli/log_level.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli/config_file.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace verdict::cli {
namespace {

using testing::ExitAndOutput;
using testing::RunToExit;
using testing::TempDir;

struct Parsed {
  std::string level = "info";
  std::string error;
};

// A program with --config and --log-level, given `args` and a config file holding `config`.
Parsed Parse(const std::string& config, std::vector<std::string> args) {
  TempDir dir;
  const std::string path = dir.Sub("test.conf");
  std::ofstream(path) << config;
  Parsed parsed;
  CLI::App app;
  AddConfigOption(app);
  AddLogLevelOption(app, &parsed.level);
  args.insert(args.begin(), {"program", "--config", path});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    parsed.error = e.what();
  }
  return parsed;
}

TEST(LogLevelTest, KnownNamesInAnyCaseAreTakenInLowerCase) {
  EXPECT_EQ(Parse("", {}).level, "info");
  for (const std::string name : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    EXPECT_EQ(Parse("", {"--log-level", name}).level, name);
  }
  EXPECT_EQ(Parse("", {"--log-level", "INFO"}).level, "info");
  EXPECT_EQ(Parse("", {"--log-level", "WARN"}).level, "warn");
  EXPECT_EQ(Parse("log-level = Debug\n", {}).level, "debug");
}

TEST(LogLevelTest, UnknownNamesAreParseErrorsOnTheCommandLineAndInTheConfigFile) {
  for (const std::string name : {"bogus", "verbose", "warning!", ""}) {
    SCOPED_TRACE(name);
    const Parsed flag = Parse("", {"--log-level", name});
    EXPECT_NE(flag.error, "");
    const Parsed file = Parse("log-level = " + name + "\n", {});
    EXPECT_NE(file.error, "");
  }
  EXPECT_NE(Parse("log-level = verbose\n", {}).error.find("verbose"), std::string::npos);
}

// Both programs, as an operator runs them: a usage error before anything else happens.
void ExpectUsageError(const ExitAndOutput& exit, const std::string& level) {
  EXPECT_NE(exit.code, 0);
  EXPECT_NE(exit.output.find("--log-level"), std::string::npos) << exit.output;
  EXPECT_NE(exit.output.find(level), std::string::npos) << exit.output;
}

TEST(LogLevelTest, BothProgramsRefuseAnUnknownLevelFromTheFlagOrTheConfigFile) {
  TempDir dir;
  const std::string conf = dir.Sub("verbose.conf");
  std::ofstream(conf) << "log-level = verbose\n";
  // `run` without a token, which stops right after parsing when the level is fine.
  const std::vector<std::string> run = {
      "run", "--node-id", "node-a", "--outbox", dir.Sub("outbox"), "--lobby", "http://127.0.0.1:1"};
  auto node = [&](std::vector<std::string> args) {
    args.insert(args.begin(), testing::NodeBinary());
    args.insert(args.end(), run.begin(), run.end());
    return RunToExit(args);
  };
  for (const std::string level : {"bogus", "verbose"}) {
    SCOPED_TRACE(level);
    ExpectUsageError(RunToExit({testing::LobbyBinary(), "--log-level", level, "migrate"}), level);
    ExpectUsageError(node({"--log-level", level}), level);
  }
  ExpectUsageError(RunToExit({testing::LobbyBinary(), "--config", conf, "migrate"}), "verbose");
  ExpectUsageError(node({"--config", conf}), "verbose");
  // The control: a known level in any case gets past parsing, to the missing token.
  const ExitAndOutput upper = node({"--log-level", "WARN"});
  EXPECT_EQ(upper.code, 1);
  EXPECT_NE(upper.output.find("--token or --lobby-token-file is required"), std::string::npos)
      << upper.output;
}

}  // namespace
}  // namespace verdict::cli
