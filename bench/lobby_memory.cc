// `verdict-bench lobby-memory`: what a burst of the largest valid settlement batches leaves in
// verdict-lobby's memory.
//   allocate  B batches' worth of rooms (R rooms of S seats each, every player new) through
//             POST /v1/rooms from a fresh verdict-lobby on a database of its own;
//   idle      the lobby's RSS once the allocations are done and it has been quiet for a second;
//   burst     the B batches (protobuf, R results of S players each) sent through
//             POST /v1/settlements:batch, C at a time; every item must settle. The RSS right
//             after the last answer, and the peak (VmHWM) during the burst;
//   settled   the RSS after the lobby has been idle for --settle-s seconds (its lowest sample).
// With --baseline-lobby another build's lobby runs the same way on a database of its own, for the
// figures side by side.
#include "bench/lobby_memory.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/sample.h"
#include "proto/wire.h"
#include "server/http_client.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kAdminToken[] = "bench-admin";
constexpr char kNodeToken[] = "bench-token";
constexpr char kNode[] = "bench-node";
constexpr int kAllocators = 4;  // threads allocating rooms
constexpr std::chrono::milliseconds kSampleEvery{100};

struct Run {
  std::string label;
  double idle_rss_mib = 0;
  double after_burst_rss_mib = 0;
  double peak_rss_mib = 0;
  double settled_rss_mib = 0;
  double burst_s = 0;
};

// Room `room`'s allocation: S players, each new (room * 1000 + seat), half on each team.
v1::RoomAllocation Allocation(uint64_t room, int seats) {
  v1::RoomAllocation a;
  a.set_room_id(room);
  a.set_node_id(kNode);
  for (int s = 0; s < seats; ++s) {
    v1::Seat* seat = a.add_seats();
    seat->set_player_id(std::to_string(room * 1000 + static_cast<uint64_t>(s)));
    seat->set_team(s < seats / 2 ? 1 : 2);
  }
  return a;
}

// Batch `b`'s body: its rooms' results, team 1 winning, in protobuf.
std::string BatchBody(int b, int rooms, int seats) {
  v1::SettlementBatch batch;
  for (int r = 0; r < rooms; ++r) {
    const uint64_t room = static_cast<uint64_t>(b) * rooms + r + 1;
    v1::BattleResult* result = batch.add_results();
    result->set_room_id(room);
    result->set_node_id(kNode);
    result->set_outcome(v1::SETTLED);
    result->set_winner_team(1);
    result->set_ended_at_ms(1'700'000'000'000);
    const v1::RoomAllocation allocation = Allocation(room, seats);
    for (const v1::Seat& seat : allocation.seats()) {
      v1::PlayerResult* p = result->add_players();
      p->set_player_id(seat.player_id());
      p->set_team(seat.team());
      p->set_kills(3);
      p->set_deaths(2);
      p->set_score(1000);
    }
  }
  return batch.SerializeAsString();
}

// Resets the peak RSS (VmHWM) of `pid` to its current RSS.
void ResetPeak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

server::ListenAddress AddressOf(const LobbyChild& lobby) {
  return server::ListenAddress::Parse("127.0.0.1:" + std::to_string(lobby.port)).value();
}

// Calls `one(client, i)` for every i from 1 to `count` on `clients` threads, each with its own
// connection to the lobby (answers awaited up to `timeout`) and taking the next i, counting each
// in `done`. Stops at the first failure, and returns it.
Status OnClients(const LobbyChild& lobby, int clients, uint64_t count,
                 std::chrono::milliseconds timeout, std::atomic<uint64_t>& done,
                 const std::function<Status(server::BlockingHttpClient&, uint64_t)>& one) {
  std::atomic<uint64_t> next{1};
  std::atomic<bool> failed{false};
  Status failure;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      server::BlockingHttpClient client(AddressOf(lobby), timeout);
      for (uint64_t i = next++; i <= count && !failed; i = next++) {
        if (Status s = one(client, i); !s.ok()) {
          std::lock_guard lock(mu);
          if (!failed.exchange(true)) failure = s;
          return;
        }
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  return failure;
}

// What a reply says when it is not the one expected: its status and the start of its body.
std::string Shown(const Result<server::HttpReply>& reply) {
  return reply.ok() ? std::to_string(reply->status) + " " + reply->body.substr(0, 300)
                    : reply.status().ToString();
}

// Allocates every room of every batch, from kAllocators threads.
Status AllocateAll(const LobbyChild& lobby, const LobbyMemoryOptions& o) {
  std::atomic<uint64_t> done{0};
  Progress progress("allocating rooms", 0, done);
  return OnClients(
      lobby, kAllocators, static_cast<uint64_t>(o.batches) * o.rooms, std::chrono::seconds(30),
      done, [&](server::BlockingHttpClient& client, uint64_t room) {
        const std::string body =
            wire::EncodeBody(Allocation(room, o.seats), wire::BodyFormat::kJson).value();
        auto reply = client.Call({"POST", "/v1/rooms", "application/json", "application/json",
                                  std::string("Bearer ") + kAdminToken, body});
        if (reply.ok() && reply->status == 201) return Status::Ok();
        return UnavailableError("allocating room " + std::to_string(room) + ": " + Shown(reply));
      });
}

// Sends every batch, o.clients at a time; OK if every item of every batch settled.
Status SendBatches(const LobbyChild& lobby, const LobbyMemoryOptions& o) {
  std::atomic<uint64_t> done{0};
  Progress progress("settling batches", 0, done);
  return OnClients(
      lobby, o.clients, static_cast<uint64_t>(o.batches), std::chrono::minutes(5), done,
      [&](server::BlockingHttpClient& client, uint64_t i) {
        const int b = static_cast<int>(i - 1);
        auto reply = client.Call({"POST", "/v1/settlements:batch", "application/x-protobuf",
                                  "application/x-protobuf", std::string("Bearer ") + kNodeToken,
                                  BatchBody(b, o.rooms, o.seats)});
        v1::SettlementBatchReply items;
        const bool parsed = reply.ok() && reply->status == 200 &&
                            items.ParseFromString(reply->body) && items.items_size() == o.rooms;
        const bool settled =
            parsed && std::all_of(items.items().begin(), items.items().end(),
                                  [](const v1::SettlementItem& i) { return i.has_receipt(); });
        if (settled) return Status::Ok();
        return UnavailableError("batch " + std::to_string(b) + ": " + Shown(reply));
      });
}

Result<Run> MeasureOne(const LobbyMemoryOptions& o, const std::string& label,
                       const std::string& binary, const std::string& root) {
  const std::unique_ptr<ScratchDatabase> database = MigratedScratchDatabase(o.db, "lobby_memory");
  if (!database) return UnavailableError("no database for the " + label + " lobby");
  const std::string log = root + "/" + label + ".log";
  auto lobby = SpawnLobby(binary, database->conninfo(),
                          {"--node-token", std::string(kNode) + "=" + kNodeToken, "--admin-token",
                           kAdminToken, "--db-pool", std::to_string(o.db_pool)},
                          log);
  if (!lobby.ok()) return lobby.status();
  const auto stop = [&](const Status& why) {
    const Status stopped = StopChild(lobby->pid, "verdict-lobby");
    const Status& s = why.ok() ? stopped : why;
    return s.ok() ? s : Status(s.code(), s.message() + "; see " + log);
  };
  Run run{label};
  if (Status s = AllocateAll(*lobby, o); !s.ok()) return stop(s);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  run.idle_rss_mib = StatusMiB(lobby->pid, "VmRSS");
  ResetPeak(lobby->pid);
  const auto start = SteadyClock::now();
  if (Status s = SendBatches(*lobby, o); !s.ok()) return stop(s);
  run.burst_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
  run.after_burst_rss_mib = StatusMiB(lobby->pid, "VmRSS");
  run.peak_rss_mib = StatusMiB(lobby->pid, "VmHWM");
  run.settled_rss_mib = run.after_burst_rss_mib;
  const auto settle_until =
      SteadyClock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.settle_s * 1000));
  while (SteadyClock::now() < settle_until) {
    std::this_thread::sleep_for(kSampleEvery);
    run.settled_rss_mib = std::min(run.settled_rss_mib, StatusMiB(lobby->pid, "VmRSS"));
  }
  if (Status s = stop(Status::Ok()); !s.ok()) return s;
  return run;
}

}  // namespace

int RunLobbyMemory(const LobbyMemoryOptions& o) {
  const std::string root = TempRoot();
  std::fprintf(stderr,
               "lobby-memory: %d batches of %d rooms x %d seats, %d at a time, --db-pool %d\n",
               o.batches, o.rooms, o.seats, o.clients, o.db_pool);
  std::vector<std::pair<std::string, std::string>> lobbies = {
      {"this_build", LobbyBinary(o.lobby_binary)}};
  if (!o.baseline_lobby.empty()) lobbies.emplace_back("baseline", o.baseline_lobby);
  std::vector<Run> runs;
  for (const auto& [label, binary] : lobbies) {
    auto run = MeasureOne(o, label, binary, root);
    if (!run.ok()) {
      std::fprintf(stderr, "verdict-bench lobby-memory: %s\n", run.status().ToString().c_str());
      return 1;
    }
    runs.push_back(*run);
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);

  Report report("lobby_memory");
  report.Field("batches", o.batches);
  report.Field("rooms", o.rooms);
  report.Field("seats", o.seats);
  report.Field("clients", o.clients);
  report.Field("db_pool", o.db_pool);
  report.Field("settle_s", o.settle_s);
  report.Field("idle_rss_mib", runs[0].idle_rss_mib);
  report.Field("after_burst_rss_mib", runs[0].after_burst_rss_mib);
  report.Field("peak_rss_mib", runs[0].peak_rss_mib);
  report.Field("settled_rss_mib", runs[0].settled_rss_mib);
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-12s %10s %12s %10s %12s %9s\n", "lobby", "idle MiB", "after burst",
               "peak MiB", "settled MiB", "burst s");
  for (const Run& r : runs) {
    report.Row({{"lobby", r.label}}, {{"idle_rss_mib", r.idle_rss_mib},
                                      {"after_burst_rss_mib", r.after_burst_rss_mib},
                                      {"peak_rss_mib", r.peak_rss_mib},
                                      {"settled_rss_mib", r.settled_rss_mib},
                                      {"burst_s", r.burst_s}});
    std::fprintf(table, "%-12s %10.1f %12.1f %10.1f %12.1f %9.1f\n", r.label.c_str(),
                 r.idle_rss_mib, r.after_burst_rss_mib, r.peak_rss_mib, r.settled_rss_mib,
                 r.burst_s);
  }
  return report.Emit(o.output);
}

}  // namespace verdict::bench
