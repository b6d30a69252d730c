// `verdict-bench drain --baseline-lobby BINARY`: the same recovery drain through this build's
// verdict-lobby and through another build's (an older commit, or a throwaway build with one
// suspect switched off), alternating, so that a regression shows as a ratio measured in one run on
// one machine. Each drain gets a database of its own, made by that binary's own `migrate`, and a
// lobby process of that binary; its rooms are allocated through the lobby's HTTP API
// (POST /v1/rooms, which every build serves), and the results go as integer player ids, which
// every build reads. The node side is this build's deliverer in both, so only the lobby differs;
// with --baseline-node each side is its own build's verdict-node process instead (enqueue, then
// run), as an operator would run them, and the ratio covers the node too.
#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <thread>
#include <variant>

#include "bench/backlog.h"
#include "bench/drain.h"
#include "bench/report.h"
#include "bench/sample.h"
#include "common/host_port.h"
#include "delivery/http_client.h"

namespace verdict::bench {
namespace {

constexpr char kAdminToken[] = "bench-admin";
constexpr int kAllocators = 4;  // concurrent POST /v1/rooms clients

// Runs `args` to its end with its output in `log`; OK if it exited 0.
Status RunToEnd(const std::vector<std::string>& args, const std::string& log) {
  auto pid = SpawnWithLog(args, log);
  if (!pid.ok()) return pid.status();
  int status = 0;
  if (::waitpid(*pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return InternalError(args[0] + " " + args.back() + " failed; see " + log);
  }
  return Status::Ok();
}

// The JSON allocation of room base + slot, seated as ResultFor seats it, with integer ids.
std::string AllocationJson(uint64_t base, uint64_t slot) {
  const v1::BattleResult r = ResultFor(base, slot);
  std::string body = "{\"room_id\":\"" + std::to_string(r.room_id()) + "\",\"node_id\":\"" +
                     r.node_id() + "\",\"seats\":[";
  for (const v1::PlayerResult& p : r.players()) {
    body += (&p == &r.players(0) ? "" : ",") + std::string("{\"player_id\":") + p.player_id() +
            ",\"team\":" + std::to_string(p.team()) + "}";
  }
  return body + "]}";
}

// Allocates rooms base + 1 … base + n through the lobby's API; the first refusal, if any.
Status AllocateOverHttp(uint16_t port, uint64_t base, uint64_t n) {
  const HttpUrl url{.host = "127.0.0.1", .port = port};
  std::atomic<uint64_t> next{1};
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kAllocators; ++t) {
    threads.emplace_back([&] {
      delivery::BlockingHttpClient client;
      for (uint64_t slot = next++; slot <= n && !failed; slot = next++) {
        const delivery::HttpOutcome outcome =
            client.Post(url, {.target = "/v1/rooms",
                              .bearer_token = kAdminToken,
                              .authorization = "",
                              .content_type = "application/json",
                              .accept = "application/json",
                              .body = AllocationJson(base, slot)});
        const auto* reply = std::get_if<delivery::HttpResponse>(&outcome);
        if (reply && reply->status / 100 == 2) continue;
        std::lock_guard lock(failure_mu);
        failed = true;
        failure = "allocating room " + std::to_string(base + slot) + ": " +
                  (reply ? std::to_string(reply->status) + " " + reply->body
                         : std::get<delivery::HttpError>(outcome).message);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failed ? UnavailableError(failure) : Status::Ok();
}

// The results of rooms base + 1 … base + n as `verdict-node enqueue` reads them, one JSON object a
// line, each as ResultFor makes it and with integer player ids: every build's node reads these.
void WriteResultsJson(const std::string& path, uint64_t base, uint64_t n) {
  std::ofstream out(path);
  for (uint64_t slot = 1; slot <= n; ++slot) {
    const v1::BattleResult r = ResultFor(base, slot);
    out << "{\"room_id\":\"" << r.room_id() << "\",\"node_id\":\"" << r.node_id()
        << "\",\"outcome\":\"SETTLED\",\"winner_team\":" << r.winner_team() << ",\"ended_at_ms\":\""
        << r.ended_at_ms() << "\",\"replay_path\":\"" << r.replay_path() << "\",\"players\":[";
    for (const v1::PlayerResult& p : r.players()) {
      out << (&p == &r.players(0) ? "" : ",") << "{\"player_id\":" << p.player_id()
          << ",\"team\":" << p.team() << ",\"kills\":" << p.kills() << ",\"score\":" << p.score()
          << "}";
    }
    out << "]}\n";
  }
}

// The drain through a verdict-node process of `node`: its `enqueue` fills an outbox with the
// results of rooms base + 1 … base + n while nothing delivers, then its `run` delivers them to
// `lobby_url`, timed from the start of `run` to the last receipt. Results per second.
Result<double> DrainWithNode(const std::string& node, const std::string& conninfo,
                             const std::string& dir, uint32_t shards, size_t batch, uint64_t base,
                             uint64_t n, const std::string& lobby_url) {
  const std::string outbox = dir + "/outbox", results = dir + "/results.jsonl";
  WriteResultsJson(results, base, n);
  VERDICT_RETURN_IF_ERROR(
      RunToEnd({node, "enqueue", "--outbox", outbox, "--shards", std::to_string(shards), results},
               dir + "/enqueue.log"));
  std::fprintf(stderr, "  verdict-node run, %u shards, batch %zu: %llu results\n", shards, batch,
               static_cast<unsigned long long>(n));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto pid = SpawnWithLog(
      {node, "run", "--node-id", kBacklogNode, "--outbox", outbox, "--lobby", lobby_url, "--token",
       kBacklogToken, "--shards", std::to_string(shards), "--batch", std::to_string(batch)},
      dir + "/node.log");
  if (!pid.ok()) return pid.status();
  // Until every room has its receipt; a drain that stops moving for a minute (results
  // dead-lettered, a node that died) is a failed run, not a slow one.
  uint64_t settled = 0;
  auto moved = start;
  Status failed;
  while (settled < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const uint64_t now_settled = ReceiptsBetween(conninfo, base, n);
    if (now_settled > settled) moved = Clock::now();
    settled = now_settled;
    if (Clock::now() - moved > std::chrono::minutes(1)) {
      failed = UnavailableError("the drain stopped at " + std::to_string(settled) + " of " +
                                std::to_string(n) + " receipts; see " + dir + "/node.log");
      break;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const Status stopped = StopChild(*pid, "verdict-node");
  VERDICT_RETURN_IF_ERROR(failed);
  VERDICT_RETURN_IF_ERROR(stopped);
  std::filesystem::remove_all(outbox);
  return n / elapsed;
}

// One drain through `binary`: a fresh database it migrates, the lobby, the rooms, the drain, by
// this build's deliverers or, if `node` is given, by a verdict-node process of that binary.
// Results per second.
Result<double> DrainThrough(const DrainOptions& o, const std::string& binary,
                            const std::string& node, const std::string& label,
                            const std::string& root, uint32_t shards, size_t batch) {
  ScratchDatabase database(o.db, "compare");
  const std::string conninfo = database.conninfo();
  const std::string dir = root + "/" + label;
  std::filesystem::create_directories(dir);
  VERDICT_RETURN_IF_ERROR(RunToEnd({binary, "--db", conninfo, "migrate"}, dir + "/migrate.log"));
  auto lobby =
      SpawnLobby(binary, conninfo,
                 {"--node-token", std::string(kBacklogNode) + "=" + kBacklogToken, "--admin-token",
                  kAdminToken, "--db-pool", std::to_string(o.lobby_db_pool)},
                 dir + "/lobby.log");
  if (!lobby.ok()) return lobby.status();
  constexpr uint64_t kBase = 1'000'000;
  std::fprintf(stderr, "  %s: allocating %llu rooms over HTTP\n", label.c_str(),
               static_cast<unsigned long long>(o.backlog));
  Status allocated = AllocateOverHttp(lobby->port, kBase, o.backlog);
  double per_s = 0;
  if (allocated.ok()) {
    SettleDatabaseAsAfterOutage(conninfo);  // as the in-process drains do
    const std::string url = "http://127.0.0.1:" + std::to_string(lobby->port);
    if (node.empty()) {
      per_s = DrainAllocated(conninfo, dir + "/outbox", shards, batch, kBase, o.backlog, url);
    } else {
      auto drained = DrainWithNode(node, conninfo, dir, shards, batch, kBase, o.backlog, url);
      if (drained.ok()) {
        per_s = *drained;
      } else {
        allocated = drained.status();
      }
    }
  }
  const Status stopped = StopChild(lobby->pid, label + " lobby");
  VERDICT_RETURN_IF_ERROR(allocated);
  if (per_s <= 0) return UnavailableError(label + ": the drain did not run; see " + dir);
  if (!stopped.ok()) return stopped;
  std::filesystem::remove_all(dir + "/outbox");
  return per_s;
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

}  // namespace

int RunLobbyComparison(const DrainOptions& o) {
  const std::string current = LobbyBinary(o.lobby_binary);
  // Each build's own node, or (empty) this build's deliverers in this process for both.
  const std::string current_node = o.baseline_node.empty() ? "" : NodeBinary(o.node_binary);
  const uint32_t shards = HeadlineShards(o);
  const size_t batch = *std::max_element(o.batches.begin(), o.batches.end());
  const std::string root = TempRoot();
  std::fprintf(stderr,
               "drain through two lobbies: backlog %llu, %u shards, batch %zu, %d rounds\n"
               "  this build: %s\n  baseline:   %s\n  nodes:      %s\n  files in %s\n",
               static_cast<unsigned long long>(o.backlog), shards, batch, o.rounds, current.c_str(),
               o.baseline_lobby.c_str(),
               o.baseline_node.empty()
                   ? "this build's deliverers in front of both"
                   : (current_node + " (this build), " + o.baseline_node + " (baseline)").c_str(),
               root.c_str());
  Report report("drain_compare");
  std::vector<double> ours, theirs;
  for (int round = 1; round <= o.rounds; ++round) {
    // Alternate which goes first, so that neither always drains on a machine just warmed or
    // just tired by the other.
    const bool baseline_first = round % 2 == 1;
    for (int i = 0; i < 2; ++i) {
      const bool baseline = (i == 0) == baseline_first;
      const std::string label = (baseline ? "baseline-" : "current-") + std::to_string(round);
      const auto drain = [&]() -> Result<double> {
        try {
          return DrainThrough(o, baseline ? o.baseline_lobby : current,
                              baseline ? o.baseline_node : current_node, label, root, shards,
                              batch);
        } catch (const std::exception& e) {  // the database, from libpqxx
          return UnavailableError(label + ": " + e.what());
        }
      };
      const Result<double> per_s = drain();
      if (!per_s.ok()) {
        std::fprintf(stderr, "%s\n", per_s.status().ToString().c_str());
        return 1;
      }
      std::fprintf(stderr, "  %s: %.0f results/s\n", label.c_str(), *per_s);
      (baseline ? theirs : ours).push_back(*per_s);
      report.Row({{"lobby", baseline ? "baseline" : "current"}}, {{"round", double(round)},
                                                                  {"shards", double(shards)},
                                                                  {"batch", double(batch)},
                                                                  {"per_s", *per_s}});
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  const double ratio = Mean(theirs) > 0 ? Mean(ours) / Mean(theirs) : 0;
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-10s %6s %8s %12s\n", "lobby", "round", "shards", "results/s");
  for (size_t r = 0; r < ours.size(); ++r) {
    std::fprintf(table, "%-10s %6zu %8u %12.0f\n%-10s %6zu %8u %12.0f\n", "current", r + 1, shards,
                 ours[r], "baseline", r + 1, shards, theirs[r]);
  }
  std::fprintf(table, "\nthis build's %s at %.2fx the baseline's (means of %d rounds)\n",
               o.baseline_node.empty() ? "lobby drains" : "node and lobby drain", ratio, o.rounds);
  report.Field("current_per_s", Mean(ours));
  report.Field("baseline_per_s", Mean(theirs));
  report.Field("ratio", ratio);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
