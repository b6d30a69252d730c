// --config FILE: keys route to the program or the running subcommand, flags win, and a bad file
// is a clear error naming its line.
#include "cli/config_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace verdict::cli {
namespace {

struct Parsed {
  std::string db = "unset";
  std::string listen = "unset";
  std::vector<std::string> tokens;
  int pool = 8;
  bool unsafe = false;
  std::string error;
  std::string ran;
};

// A small two-subcommand program shaped like verdict-lobby.
Parsed Parse(const std::string& config_text, std::vector<std::string> args) {
  verdict::testing::TempDir dir;
  const std::string path = dir.Sub("test.conf");
  std::ofstream(path) << config_text;
  Parsed parsed;
  CLI::App app;
  app.require_subcommand(1);
  app.fallthrough();
  AddConfigOption(app);
  app.add_option("--db", parsed.db);
  CLI::App* migrate = app.add_subcommand("migrate");
  CLI::App* serve = app.add_subcommand("serve");
  serve->add_option("--listen", parsed.listen)->required();
  serve->add_option("--node-token", parsed.tokens);
  serve->add_option("--db-pool", parsed.pool)->check(CLI::Range(1, 512));
  serve->add_flag("--unsafe", parsed.unsafe);
  args.insert(args.begin(), {"prog", "--config", path});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    parsed.error = e.what();
  }
  if (migrate->parsed()) parsed.ran = "migrate";
  if (serve->parsed()) parsed.ran = "serve";
  return parsed;
}

TEST(ConfigFile, KeysReachTheProgramAndTheRunningSubcommand) {
  const Parsed p = Parse(
      "# lobby\n"
      "db = host=/run/postgresql dbname=verdict\n"
      "listen = \"0.0.0.0:8080\"\n"
      "\n"
      "node-token = a=one   # first node\n"
      "node-token = b=two\n"
      "db-pool = 3\n"
      "unsafe = true\n",
      {"serve"});
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.ran, "serve");
  EXPECT_EQ(p.db, "host=/run/postgresql dbname=verdict");
  EXPECT_EQ(p.listen, "0.0.0.0:8080");
  EXPECT_EQ(p.tokens, (std::vector<std::string>{"a=one", "b=two"}));
  EXPECT_EQ(p.pool, 3);
  EXPECT_TRUE(p.unsafe);
}

TEST(ConfigFile, FlagsOnTheCommandLineWin) {
  const Parsed p =
      Parse("db = from-file\nlisten = file:1\ndb-pool = 3\nnode-token = a=file\n",
            {"serve", "--db-pool", "5", "--db", "from-flag", "--node-token", "z=flag"});
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.db, "from-flag");
  EXPECT_EQ(p.pool, 5);
  EXPECT_EQ(p.listen, "file:1");
  EXPECT_EQ(p.tokens, (std::vector<std::string>{"z=flag"}));
}

TEST(ConfigFile, KeysOfAnotherSubcommandAreSkippedNotApplied) {
  // One file serves `migrate` (ExecStartPre) and `serve` (ExecStart).
  const Parsed p = Parse("db = d\nlisten = x:1\ndb-pool = 3\n", {"migrate"});
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.ran, "migrate");
  EXPECT_EQ(p.db, "d");
  EXPECT_EQ(p.pool, 8);
}

TEST(ConfigFile, ARequiredFlagMayComeFromTheFile) {
  EXPECT_EQ(Parse("listen = a:1\n", {"serve"}).error, "");
  EXPECT_NE(Parse("db = d\n", {"serve"}).error, "");  // and its absence is still an error
}

TEST(ConfigFile, BadFilesAreClearErrors) {
  const Parsed unknown = Parse("db = d\nlisen = x:1\n", {"serve"});
  EXPECT_NE(unknown.error.find("test.conf:2: unknown key 'lisen'"), std::string::npos)
      << unknown.error;
  const Parsed no_equals = Parse("listen x:1\n", {"serve"});
  EXPECT_NE(no_equals.error.find("test.conf:1: expected 'key = value'"), std::string::npos)
      << no_equals.error;
  const Parsed out_of_range = Parse("listen = a:1\ndb-pool = 0\n", {"serve"});
  EXPECT_NE(out_of_range.error.find("--db-pool"), std::string::npos) << out_of_range.error;
  const Parsed binary = Parse(std::string("listen = a:1\n\0\x01\xff = \x02\n", 20), {"serve"});
  EXPECT_NE(binary.error, "");
}

TEST(ConfigFile, AMissingFileIsAnError) {
  CLI::App app;
  AddConfigOption(app);
  const char* argv[] = {"prog", "--config", "/nonexistent/verdict.conf"};
  EXPECT_THROW(app.parse(3, argv), CLI::FileError);
}

}  // namespace
}  // namespace verdict::cli
