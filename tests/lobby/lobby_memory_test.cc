// The lobby's memory under hostile bodies, measured on a real verdict-lobby process from
// /proc/PID/status: bodies built to make a parser allocate many times their size (JSON arrays
// nested a million deep, protobuf with two million empty results, JSON with a million empty
// objects) are refused before they are parsed, so sixteen of them at once keep the lobby's peak
// RSS under 256 MiB, and it gives the memory back afterwards: after each of three bursts its RSS
// comes back within 32 MiB of what it was before the first. Large valid batches give their
// memory back too, once the settlements go quiet.
#include <gtest/gtest.h>
#include <sys/types.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/lobby/lobby_fixture.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using LobbyMemoryTest = LobbyFixture;

constexpr size_t kBodyBytes = wire::kMaxBatchBodyBytes;
constexpr int kBodies = 16;
constexpr int64_t kMiB = 1 << 20;

// VmRSS or VmHWM of `pid`, in bytes.
int64_t StatusBytes(pid_t pid, const std::string& key) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return -1;
}

// Resets the peak RSS (VmHWM) of `pid` to its current RSS.
void ResetPeak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

struct Hostile {
  std::string content_type;
  std::string body;
};

// `{"results":[{"room_id":"1","players":[[[[…]]]]}]}`: one level per two bytes.
Hostile NestedJson() {
  const std::string head = R"({"results":[{"room_id":"1","players":)";
  const std::string tail = "}]}";
  const size_t depth = (kBodyBytes - head.size() - tail.size()) / 2;
  return {"application/json", head + std::string(depth, '[') + std::string(depth, ']') + tail};
}

// A SettlementBatch of empty results: two bytes each (field 1, length 0).
Hostile EmptyProtobufResults() {
  std::string body;
  body.reserve(kBodyBytes);
  while (body.size() + 2 <= kBodyBytes) body += std::string("\x0a\x00", 2);
  return {"application/x-protobuf", body};
}

// `{"results":[{},{},…]}`.
Hostile EmptyJsonResults() {
  std::string body = R"({"results":[{})";
  while (body.size() + 5 <= kBodyBytes) body += ",{}";
  return {"application/json", body + "]}"};
}

TEST_F(LobbyMemoryTest, HostileBodiesKeepThePeakBoundedAndTheMemoryIsGivenBack) {
  auto lobby = StartLobby({"--db-pool", "8"});
  ASSERT_NE(lobby, nullptr);
  // Warm up what a working lobby holds anyway: its connections, threads and buffers.
  for (uint64_t room = 1; room <= 8; ++room) {
    MustAllocate(lobby->port(), room);
    ASSERT_EQ(Settle(lobby->port(), MakeResult(room)).status, 200);
  }
  const std::vector<Hostile> kinds = {NestedJson(), EmptyProtobufResults(), EmptyJsonResults()};
  const int64_t idle = StatusBytes(lobby->pid(), "VmRSS");
  for (int burst = 1; burst <= 3; ++burst) {
    ResetPeak(lobby->pid());
    std::vector<int> statuses(kBodies);
    std::vector<std::thread> clients;
    for (int i = 0; i < kBodies; ++i) {
      clients.emplace_back([&, i] {
        const Hostile& h = kinds[i % kinds.size()];
        statuses[i] =
            HttpCall(lobby->port(), "POST", "/v1/settlements:batch",
                     {{"Content-Type", h.content_type}, {"Authorization", "Bearer token-a"}},
                     h.body, std::chrono::seconds(60))
                .status;
      });
    }
    for (auto& c : clients) c.join();
    const int64_t peak = StatusBytes(lobby->pid(), "VmHWM");
    // The last bodies are freed just after their answers go out.
    WaitUntil([&] { return StatusBytes(lobby->pid(), "VmRSS") < idle + 32 * kMiB; });
    const int64_t after = StatusBytes(lobby->pid(), "VmRSS");
    std::printf(
        "burst %d: lobby RSS %lld MiB idle, %lld MiB peak under %d hostile bodies of "
        "%zu MiB, %lld MiB after\n",
        burst, static_cast<long long>(idle / kMiB), static_cast<long long>(peak / kMiB), kBodies,
        kBodyBytes >> 20, static_cast<long long>(after / kMiB));
    for (int i = 0; i < kBodies; ++i) {
      EXPECT_TRUE(statuses[i] == 400 || statuses[i] == 413)
          << "burst " << burst << ", body " << i << ": " << statuses[i];
    }
    EXPECT_LT(peak, 256 * kMiB) << "burst " << burst;
    EXPECT_LT(after, idle + 32 * kMiB) << "burst " << burst;
  }
  // And it still settles.
  MustAllocate(lobby->port(), 9);
  EXPECT_EQ(Settle(lobby->port(), MakeResult(9)).status, 200);
}

// Large valid batches (256 rooms of 200 players, two at once) leave the memory they used in
// glibc's per-thread arenas and in libpq's buffers, each kept at its largest for as long as its
// thread or connection lives: the lobby stayed some hundreds of MiB above idle after them, more
// with each DB worker. Once the settlements have gone quiet the lobby is back near its idle size.
TEST_F(LobbyMemoryTest, LargeBatchesGiveTheirMemoryBackOnceTheSettlementsGoQuiet) {
  constexpr int kBatches = 2;
  constexpr uint64_t kRooms = 256, kSeats = 200;
  auto lobby = StartLobby({"--db-pool", "8"});
  ASSERT_NE(lobby, nullptr);
  std::vector<std::vector<v1::BattleResult>> batches(kBatches);
  std::vector<std::thread> allocators;
  std::atomic<int> refused{0};
  for (int b = 0; b < kBatches; ++b) {
    for (uint64_t r = 1; r <= kRooms; ++r) {
      const uint64_t room = b * kRooms + r;
      batches[b].push_back(ResultOf(MakeAllocation(room, "node-a", room * 1000, kSeats), 1));
    }
    allocators.emplace_back([&, b] {
      for (const v1::BattleResult& result : batches[b]) {
        const auto a = MakeAllocation(result.room_id(), "node-a", result.room_id() * 1000, kSeats);
        if (AllocateRoster(lobby->port(), a).status != 201) ++refused;
      }
    });
  }
  for (auto& t : allocators) t.join();
  ASSERT_EQ(refused, 0);
  const int64_t idle = StatusBytes(lobby->pid(), "VmRSS");

  std::vector<HttpResponse> replies(kBatches);
  std::vector<std::thread> senders;
  for (int b = 0; b < kBatches; ++b) {
    senders.emplace_back([&, b] {
      v1::SettlementBatch batch;
      for (const auto& r : batches[b]) *batch.add_results() = r;
      replies[b] = HttpCall(
          lobby->port(), "POST", "/v1/settlements:batch",
          {{"Content-Type", "application/x-protobuf"}, {"Authorization", "Bearer token-a"}},
          batch.SerializeAsString(), std::chrono::seconds(120));
    });
  }
  for (auto& t : senders) t.join();
  const int64_t after_burst = StatusBytes(lobby->pid(), "VmRSS");
  for (int b = 0; b < kBatches; ++b) ASSERT_EQ(replies[b].status, 200) << replies[b].body;
  EXPECT_EQ(Q("SELECT count(*) FROM settlement_receipts"), std::to_string(kBatches * kRooms));

  WaitUntil([&] { return StatusBytes(lobby->pid(), "VmRSS") < idle + 32 * kMiB; });
  const int64_t settled = StatusBytes(lobby->pid(), "VmRSS");
  std::printf(
      "lobby RSS %lld MiB idle, %lld MiB after %d batches of %llu rooms x %llu, "
      "%lld MiB once quiet\n",
      static_cast<long long>(idle / kMiB), static_cast<long long>(after_burst / kMiB), kBatches,
      static_cast<unsigned long long>(kRooms), static_cast<unsigned long long>(kSeats),
      static_cast<long long>(settled / kMiB));
  EXPECT_LT(settled, idle + 32 * kMiB);
}

}  // namespace
}  // namespace verdict::testing
