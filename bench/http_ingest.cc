#include "bench/http_ingest.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/sample.h"
#include "node/battle_node.h"
#include "proto/wire.h"
#include "server/http_client.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
// Room ids of client c start at (c + 1) * this, so no two requests share a room.
constexpr uint64_t kRoomsPerClient = 1'000'000'000;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double>& samples, int percent) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() * percent / 100];
}

}  // namespace

HttpIngestRun RunHttpIngest(const IngestOptions& o, const std::string& dir, int clients,
                            size_t batch, double rate, bool http_alone) {
  std::filesystem::create_directories(dir);
  const v1::BattleResult proto = PaddedResult(o.size);
  node::NodeOptions options;
  options.node_id = proto.node_id();
  options.outbox_dir = dir + "/outbox";
  options.lobby_urls = {"http://127.0.0.1:1"};  // no lobby: this measures ingest alone
  options.token = "bench";
  const std::string socket = "unix:" + dir + "/ingest.sock";
  options.ingest.listen = {socket};
  options.ingest.unsafe_answer_before_durable_for_test = http_alone;
  auto node = node::BattleNode::Start(options);
  if (!node.ok()) {
    std::fprintf(stderr, "http ingest: %s\n", node.status().ToString().c_str());
    return {};
  }
  const auto to = server::ListenAddress::Parse(socket).value();
  const std::string path = batch == 1 ? "/v1/results" : "/v1/results:batch";
  std::atomic<uint64_t> answered{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::vector<double> latencies_ms;
  const auto start = SteadyClock::now();
  const auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(o.seconds));
  // Open loop: client c sends its k-th request at start + (k + c / clients) * interval.
  const auto interval = rate > 0 ? std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(clients * batch / rate))
                                 : SteadyClock::duration::zero();
  {
    char label[64];
    std::snprintf(label, sizeof(label), "http ingest, %d clients x %zu", clients, batch);
    Progress progress(label, o.seconds, answered);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        server::BlockingHttpClient client(to, std::chrono::seconds(30));
        std::vector<double> mine;
        v1::BattleResult result = proto;
        v1::SettlementBatch many;
        uint64_t room = (c + 1) * kRoomsPerClient;
        for (uint64_t k = 0;; ++k) {
          auto due = SteadyClock::now();
          if (rate > 0) {
            due = start + interval * k + interval * c / clients;
            std::this_thread::sleep_until(due);
          }
          if (due >= deadline) break;
          std::string body;
          if (batch == 1) {
            result.set_room_id(++room);
            body = wire::DeterministicBytes(result);
          } else {
            many.clear_results();
            for (size_t i = 0; i < batch; ++i) {
              result.set_room_id(++room);
              *many.add_results() = result;
            }
            body = wire::DeterministicBytes(many);
          }
          auto reply = client.Call({"POST", path, std::string(wire::kProtobufType),
                                    std::string(wire::kProtobufType), "", std::move(body)});
          if (!reply.ok() || reply->status / 100 != 2) {
            if (!failed.exchange(true)) {
              std::fprintf(stderr, "http ingest: %s\n",
                           reply.ok() ? (std::to_string(reply->status) + " " + reply->body).c_str()
                                      : reply.status().ToString().c_str());
            }
            break;
          }
          mine.push_back(Ms(SteadyClock::now() - due));
          answered += batch;
        }
        std::lock_guard lock(mu);
        latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
      });
    }
    for (auto& t : threads) t.join();
  }
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  (*node)->Shutdown();
  HttpIngestRun run;
  run.per_s = failed ? 0 : answered.load() / elapsed;
  run.p50_ms = Percentile(latencies_ms, 50);
  run.p99_ms = Percentile(latencies_ms, 99);
  return run;
}

}  // namespace verdict::bench
