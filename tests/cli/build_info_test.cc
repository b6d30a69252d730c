// Which build answered: `--version` on every program, the revision cmake/build_info.cmake takes
// from git (or says it cannot), and verdict_build_info with Prometheus' process metrics on the
// /metrics of a real node and a real lobby, about their own processes. Each case takes a second
// or two.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_database.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST(BuildInfoTest, EveryProgramPrintsItsVersionAndRevision) {
  const std::vector<std::pair<std::string, std::string>> programs = {
      {"verdict-node", NodeBinary()},
      {"verdict-lobby", LobbyBinary()},
      {"verdict-bench", VERDICT_BENCH_BINARY},
      {"verdict-node", NodeTestingBinary()},
      {"verdict-lobby", LobbyTestingBinary()}};
  const std::regex line(
      R"((verdict-[a-z]+) [0-9]+\.[0-9]+\.[0-9]+ \(revision ([0-9a-f]{12}(-dirty)?|unknown: built from a source tree without git)\)\n)");
  for (const auto& [name, binary] : programs) {
    SCOPED_TRACE(binary);
    const ExitAndOutput out = RunToExit({binary, "--version"});
    EXPECT_EQ(out.code, 0);
    EXPECT_TRUE(std::regex_match(out.output, line)) << out.output;
    EXPECT_EQ(out.output, VersionLine(name) + "\n");
  }
  // The revision is this tree's commit, when it is a git work tree.
  if (!*VERDICT_GIT) return;
  const CommandResult head =
      RunCommand({VERDICT_GIT, "-C", VERDICT_SOURCE_DIR, "rev-parse", "--short=12", "HEAD"});
  if (head.exit_code == 0) {
    EXPECT_EQ(std::string(ThisBuild().revision).substr(0, 12), head.out.substr(0, 12));
  }
}

// cmake/build_info.cmake run on `dir` as a build runs it; the revision it writes.
std::string RevisionOf(const std::string& dir, const std::string& given = "") {
  TempDir out;
  const std::string file = out.Sub("build_info.cc");
  std::vector<std::string> argv = {VERDICT_CMAKE, "-DSOURCE_DIR=" + dir, "-DOUTPUT=" + file,
                                   "-DVERSION=9.8.7"};
  if (!given.empty()) argv.push_back("-DREVISION=" + given);
  argv.insert(argv.end(), {"-P", VERDICT_BUILD_INFO_SCRIPT});
  const CommandResult run = RunCommand(argv);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  EXPECT_TRUE(std::regex_search(s, m, std::regex(R"re(\{"9\.8\.7", "([^"]*)", "([^"]*)"\})re")))
      << s;
  return m.size() > 2 ? m[1].str() + (m[2].str().empty() ? "" : " (" + m[2].str() + ")") : "";
}

// The cases that make git repositories need git.
#define VERDICT_NEED_GIT() \
  if (!*VERDICT_GIT) GTEST_SKIP() << "git is not installed"

// `git ARGS...` in `dir`, which must succeed.
void Git(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {VERDICT_GIT, "-C", dir, "-c", "user.name=t", "-c",
                             "user.email=t@example.com", "-c", "commit.gpgsign=false"});
  const CommandResult r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

TEST(BuildInfoTest, ATreeWithoutGitSaysItsRevisionIsUnknown) {
  TempDir tarball;
  std::ofstream(tarball.Sub("CMakeLists.txt")) << "project(x)\n";
  EXPECT_EQ(RevisionOf(tarball.path()), "unknown (built from a source tree without git)");
  // A packager who knows the revision gives it.
  EXPECT_EQ(RevisionOf(tarball.path(), "v9.8.7"), "v9.8.7");
}

TEST(BuildInfoTest, ATarballUnpackedInsideAnotherRepositoryIsNotNamedAfterThatRepository) {
  VERDICT_NEED_GIT();
  TempDir packaging;
  Git(packaging.path(), {"init", "-q"});
  std::ofstream(packaging.Sub("debian.rules")) << "rules\n";
  Git(packaging.path(), {"add", "."});
  Git(packaging.path(), {"commit", "-q", "-m", "packaging"});
  const std::string source = packaging.Sub("verdict-0.1.0");
  std::filesystem::create_directory(source);
  EXPECT_EQ(RevisionOf(source), "unknown (built from a source tree without git)");
  // The control: the repository's own top is named.
  EXPECT_TRUE(std::regex_match(RevisionOf(packaging.path()), std::regex("[0-9a-f]{12}")));
}

TEST(BuildInfoTest, AGitTreeIsNamedByItsCommitAndDirtyWhileATrackedFileDiffers) {
  VERDICT_NEED_GIT();
  TempDir tree;
  Git(tree.path(), {"init", "-q"});
  std::ofstream(tree.Sub("a.cc")) << "int a;\n";
  Git(tree.path(), {"add", "a.cc"});
  Git(tree.path(), {"commit", "-q", "-m", "a"});
  const CommandResult head = RunCommand({VERDICT_GIT, "-C", tree.path(), "rev-parse", "HEAD"});
  ASSERT_EQ(head.exit_code, 0);
  EXPECT_EQ(RevisionOf(tree.path()), head.out.substr(0, 12));
  std::ofstream(tree.Sub("untracked.txt")) << "not part of the build's sources\n";
  EXPECT_EQ(RevisionOf(tree.path()), head.out.substr(0, 12));
  std::ofstream(tree.Sub("a.cc")) << "int a = 1;\n";
  EXPECT_EQ(RevisionOf(tree.path()), head.out.substr(0, 12) + "-dirty");
}

// /metrics of a running program, and the process it describes.
struct Scrape {
  std::string text;
  pid_t pid;
};

double Value(const std::string& text, const std::string& series) {
  return MetricValue(text, series, -1);
}

// Entries of /proc/PID/fd.
double OpenFdsOf(pid_t pid) {
  double n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// The resident set of `pid` in bytes, from /proc/PID/statm (pages).
double RssOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  double size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<double>(getpagesize());
}

// What both endpoints must say about the process `pid` started between `before` and `after`.
void ExpectProcessMetricsOf(const std::string& text, pid_t pid, double before, double after) {
  const std::string build = std::string("verdict_build_info{version=\"") + ThisBuild().version +
                            "\",revision=\"" + ThisBuild().revision + "\"}";
  EXPECT_EQ(Value(text, build), 1) << text;
  // The kernel gives the boot time in whole seconds, and the start in clock ticks after it.
  const double start = Value(text, "process_start_time_seconds");
  EXPECT_GE(start, before - 1.02);
  EXPECT_LE(start, after + 0.02);
  const double rss = Value(text, "process_resident_memory_bytes");
  EXPECT_NEAR(rss, RssOf(pid), 16 << 20);
  EXPECT_GE(Value(text, "process_virtual_memory_bytes"), rss);
  const double fds = Value(text, "process_open_fds");
  EXPECT_NEAR(fds, OpenFdsOf(pid), 4);  // the scrape's own connection comes and goes
  EXPECT_GE(Value(text, "process_max_fds"), fds);
  EXPECT_GE(Value(text, "process_cpu_seconds_total"), 0);  // present (absent reads -1)
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
}

TEST(BuildInfoTest, TheNodesMetricsSayWhichBuildAndProcessAnswer) {
  TempDir dir;
  const double before = Now();
  auto node = ChildProcess::Start(
      {NodeBinary(), "run", "--node-id", "node-a", "--outbox", dir.Sub("outbox"), "--lobby",
       "http://127.0.0.1:1", "--token", "token-a", "--metrics-listen", "127.0.0.1:0"},
      {}, dir.Sub("node.log"));
  const double after = Now();
  uint16_t port = 0;
  ASSERT_TRUE(WaitUntil([&] {
    std::ifstream in(dir.Sub("node.log"));
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("metrics on port ")) port = std::stoi(line.substr(16));
    }
    return port != 0 || !node->Running();
  }));
  ASSERT_NE(port, 0);
  const HttpResponse metrics = HttpCall(port, "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  ExpectProcessMetricsOf(metrics.body, node->pid(), before, after);
}

TEST(BuildInfoTest, TheLobbysMetricsSayWhichBuildAndProcessAnswer) {
  VERDICT_NEED_DATABASE();
  TestDatabase db;
  ASSERT_EQ(RunCommand({LobbyBinary(), "--db", db.conninfo(), "migrate"}).exit_code, 0);
  const double before = Now();
  auto lobby = LobbyProcess::Start(db.conninfo());
  ASSERT_NE(lobby, nullptr);
  const double after = Now();
  const HttpResponse metrics = HttpCall(lobby->port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  ExpectProcessMetricsOf(metrics.body, lobby->pid(), before, after);
}

}  // namespace
}  // namespace verdict::testing
