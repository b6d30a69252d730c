// Process-crash durability (P1): a child process enqueues in a loop and reports each record only
// after Enqueue returned; the parent SIGKILLs it at random moments and, after every kill,
// reopens the outbox and checks that every reported record is there exactly once and that
// sequences never went backwards.
// What this cannot see: a SIGKILL leaves the page cache to the kernel, so a record written to the
// log but never fsynced survives it. This test passes with the log fsync switched off; its
// negative control therefore removes the write-ahead log altogether (records only in memory).
// The fsync itself is tested against simulated power cuts in outbox_power_loss_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "storage/outbox.h"
#include "tests/support/temp_dir.h"

namespace verdict::storage {
namespace {

struct CrashReport {
  int kills = 0;
  size_t reported = 0;              // records the children said were durable
  std::set<uint64_t> missing;       // reported rooms absent after some reopen
  std::set<uint64_t> duplicated;    // rooms stored more than once
  size_t sequence_regressions = 0;  // a child handed out a sequence not above all earlier ones
};

// Reads whatever `fd` has until `deadline` (or EOF when deadline is nullopt) into `buffer`.
void ReadUntil(int fd, std::string* buffer,
               std::optional<std::chrono::steady_clock::time_point> deadline) {
  char chunk[4096];
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      timeout_ms = static_cast<int>(left.count());
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) return;
    buffer->append(chunk, static_cast<size_t>(n));
  }
}

// Runs one child until a random moment after its first report, then SIGKILLs it. Returns the
// complete "room sequence" lines it wrote.
std::vector<std::pair<uint64_t, uint64_t>> RunChildAndKill(const std::string& dir,
                                                           uint64_t first_room, bool unsafe,
                                                           std::mt19937& rng) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const std::string room_arg = std::to_string(first_room);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl(VERDICT_OUTBOX_CRASH_CHILD, VERDICT_OUTBOX_CRASH_CHILD, dir.c_str(), room_arg.c_str(),
            unsafe ? "--unsafe-no-wal" : nullptr, nullptr);
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  // Wait (bounded) for the first report so every kill lands in the enqueue loop, not in open.
  const auto start = std::chrono::steady_clock::now();
  while (out.find('\n') == std::string::npos &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    ReadUntil(fds[0], &out, std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  }
  std::uniform_int_distribution<int> delay_ms(0, 60);
  ReadUntil(fds[0], &out,
            std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms(rng)));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child ended on its own (status " << status << ") instead of being killed";
  ReadUntil(fds[0], &out, std::nullopt);  // what it wrote before dying still counts
  ::close(fds[0]);

  std::vector<std::pair<uint64_t, uint64_t>> lines;
  const size_t complete = out.rfind('\n');
  if (complete == std::string::npos) return lines;
  std::istringstream in(out.substr(0, complete + 1));
  uint64_t room = 0, sequence = 0;
  while (in >> room >> sequence) lines.emplace_back(room, sequence);
  return lines;
}

CrashReport RunCrashCycles(int kills, bool unsafe) {
  testing::TempDir dir;
  std::mt19937 rng(20261129);
  CrashReport report;
  std::set<uint64_t> reported_rooms;
  uint64_t highest_sequence = 0;
  for (int k = 0; k < kills; ++k) {
    const auto lines =
        RunChildAndKill(dir.path(), 1 + static_cast<uint64_t>(k) * 10'000'000, unsafe, rng);
    ++report.kills;
    for (auto [room, sequence] : lines) {
      reported_rooms.insert(room);
      if (sequence <= highest_sequence) ++report.sequence_regressions;
      highest_sequence = std::max(highest_sequence, sequence);
    }
    auto opened = OpenOutbox(dir.path(), {});
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) break;
    std::map<uint64_t, int> stored;
    for (uint32_t s = 0; s < (*opened)->shard_count(); ++s) {
      auto records = (*opened)->ReadShard(s, 0, SIZE_MAX);
      EXPECT_TRUE(records.ok());
      if (!records.ok()) continue;
      for (const auto& r : *records) ++stored[r.result.room_id()];
    }
    for (uint64_t room : reported_rooms) {
      if (!stored.contains(room)) report.missing.insert(room);
    }
    for (auto [room, n] : stored) {
      if (n > 1) report.duplicated.insert(room);
    }
  }
  report.reported = reported_rooms.size();
  return report;
}

TEST(OutboxCrashTest, EveryReportedRecordSurvivesRandomKillsExactlyOnce) {
  const CrashReport report = RunCrashCycles(50, /*unsafe=*/false);
  EXPECT_EQ(report.kills, 50);
  EXPECT_GT(report.reported, 50u) << "children reported too little to test anything";
  EXPECT_TRUE(report.missing.empty()) << report.missing.size() << " reported records lost";
  EXPECT_TRUE(report.duplicated.empty()) << report.duplicated.size() << " rooms stored twice";
  EXPECT_EQ(report.sequence_regressions, 0u);
  std::printf("crash test: %d kills, %zu records reported durable, none lost\n", report.kills,
              report.reported);
}

// Negative control: without the write-ahead log, Enqueue acknowledges records that only sit
// in the process's memory. The same check must notice that they are gone after a kill. (A
// missing fsync is not enough to be caught here; see the file comment.)
TEST(OutboxCrashTest, NegativeControlWithoutWalIsCaught) {
  const CrashReport report = RunCrashCycles(5, /*unsafe=*/true);
  EXPECT_GT(report.reported, 0u);
  EXPECT_FALSE(report.missing.empty())
      << "the checker did not notice lost records with durability switched off";
}

}  // namespace
}  // namespace verdict::storage
