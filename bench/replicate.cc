// `verdict-bench replicate`: what the replicated tier costs and delivers, side by side in one
// run, on a three-member etcd cluster on loopback (started here unless --etcd names one):
//   local       producers push results through the real writer path (ResultChannel,
//               OutboxWriter, group commit) for --seconds: results stored per second;
//   replicated  the same, with a Replicator copying every stored result to etcd (batched
//               create-if-absent transactions on one connection): results stored per second, and
//               results replicated per second (all of them, divided by the time until the last
//               one was in etcd);
//   lag         one producer open loop at half the replicated rate: each result's time from push
//               to stored and from push to replicated (p50, p99);
//   drain       a backlog of --backlog results delivered to a lobby on PostgreSQL (in this
//               process): by the ordinary deliverer from the outbox, and by a rescue from etcd
//               (listing, scratch outbox, the same deliverer, deletes after the receipts).
// `verdict-bench replicate-outage`: a verdict-node replicating to an etcd that is away (a port
// nothing listens on) and delivering to a lobby that is away, fed --results results of
// --result-bytes each over its Unix ingest socket in batches of 128, every batch posted
// 1 + --retries times by --clients threads: with ?durability=replicated, then without. The node's
// resident memory after the posts (VmRSS) and at its peak (VmHWM), and its unreplicated gauge.
#include "bench/replicate.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

#include "bench/backlog.h"
#include "bench/metrics_page.h"
#include "bench/sample.h"
#include "delivery/deliverer.h"
#include "lobby/schema.h"
#include "lobby/settlement_store.h"
#include "node/outbox_writer.h"
#include "node/result_channel.h"
#include "proto/wire.h"
#include "replication/etcd_client.h"
#include "replication/keys.h"
#include "replication/replicator.h"
#include "replication/rescue.h"
#include "server/http_client.h"
#include "storage/outbox.h"

extern char** environ;

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr uint64_t kRunSpan = 10'000'000;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Three etcd members on loopback, each with its data under `root`; stopped when destroyed.
class LocalCluster {
 public:
  explicit LocalCluster(const std::string& root) {
    std::filesystem::create_directories(root);
    std::string initial, url = "etcd://";
    std::vector<std::pair<uint16_t, uint16_t>> ports;
    for (int i = 0; i < 3; ++i) {
      ports.emplace_back(FreePort(), FreePort());
      initial += (i ? "," : "") + Name(i) + "=http://127.0.0.1:" + std::to_string(ports[i].second);
      url += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(ports[i].first);
    }
    for (int i = 0; i < 3; ++i) {
      const std::string client = "http://127.0.0.1:" + std::to_string(ports[i].first);
      const std::string peer = "http://127.0.0.1:" + std::to_string(ports[i].second);
      std::vector<std::string> args = {"etcd",
                                       "--name",
                                       Name(i),
                                       "--data-dir",
                                       root + "/" + Name(i),
                                       "--listen-client-urls",
                                       client,
                                       "--advertise-client-urls",
                                       client,
                                       "--listen-peer-urls",
                                       peer,
                                       "--initial-advertise-peer-urls",
                                       peer,
                                       "--initial-cluster",
                                       initial,
                                       "--log-level",
                                       "warn"};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      const std::string log = root + "/" + Name(i) + ".log";
      posix_spawn_file_actions_t files;
      posix_spawn_file_actions_init(&files);
      posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&files, 1, 2);
      pid_t pid = -1;
      if (posix_spawnp(&pid, "etcd", &files, nullptr, argv.data(), environ) == 0) {
        pids_.push_back(pid);
      }
      posix_spawn_file_actions_destroy(&files);
    }
    url_ = url;
  }
  ~LocalCluster() {
    for (pid_t pid : pids_) ::kill(pid, SIGTERM);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  const std::string& url() const { return url_; }

 private:
  static std::string Name(int i) { return "m" + std::to_string(i); }
  std::vector<pid_t> pids_;
  std::string url_;
};

// Waits until etcd answers a range; false after 30 s.
bool WaitForEtcd(const replication::EtcdOptions& etcd) {
  auto client = replication::EtcdClient::Create(etcd);
  if (!client.ok()) return false;
  for (int i = 0; i < 300; ++i) {
    if ((*client)->Range("probe", "", 1, true).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

struct IngestRun {
  double stored_per_s = 0;
  double replicated_per_s = 0;
  uint64_t stored = 0;
};

// The writer path for `seconds` with `producers` threads pushing as fast as they can, with a
// replicator when `etcd` is given.
IngestRun RunIngestPath(const std::string& dir, const replication::EtcdOptions* etcd,
                        double seconds, int producers, uint64_t base) {
  IngestRun run;
  auto outbox = storage::OpenOutbox(dir, {});
  if (!outbox.ok()) return run;
  std::atomic<uint64_t> stored{0}, replicated{0};
  std::unique_ptr<replication::Replicator> replicator;
  if (etcd) {
    replication::ReplicationOptions options;
    options.etcd = *etcd;
    replicator = std::make_unique<replication::Replicator>(
        **outbox, dir, kBacklogNode, options, nullptr,
        [&](const std::vector<replication::ReplicatedResult>& done) { replicated += done.size(); },
        [] {}, nullptr);
    if (!replicator->Start().ok()) return run;
  }
  node::ResultChannel channel(4096);
  node::OutboxWriter writer(
      channel, **outbox, {},
      [&](const std::vector<v1::BattleResult>& batch,
          const std::vector<storage::EnqueueResult>& outcomes) {
        stored += batch.size();
        if (replicator) replicator->Stored(batch, outcomes);
      },
      nullptr);
  writer.Start();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next{1};
  const auto start = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      while (!stop) channel.Push(ResultFor(base, next++)).IgnoreError();
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const uint64_t stored_in_window = stored.load();
  const double window = Seconds(SteadyClock::now() - start);
  stop = true;
  for (auto& t : threads) t.join();
  writer.Stop();
  run.stored = stored.load();
  run.stored_per_s = stored_in_window / window;
  if (replicator) {
    while (replicated < run.stored && Seconds(SteadyClock::now() - start) < 600) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    run.replicated_per_s = replicated / Seconds(SteadyClock::now() - start);
    replicator->Stop(SteadyClock::now());
  }
  return run;
}

struct LagRun {
  double rate = 0;
  double stored_p50_ms = 0, stored_p99_ms = 0;
  double replicated_p50_ms = 0, replicated_p99_ms = 0;
  uint64_t results = 0;
};

// One producer pushing at `rate` for `seconds`; each result's push → stored and push →
// replicated.
LagRun RunLag(const std::string& dir, const replication::EtcdOptions& etcd, double rate,
              double seconds, uint64_t base) {
  LagRun run;
  run.rate = rate;
  auto outbox = storage::OpenOutbox(dir, {});
  if (!outbox.ok()) return run;
  const uint64_t n = static_cast<uint64_t>(rate * seconds);
  std::vector<std::atomic<int64_t>> pushed_ns(n + 1);
  std::mutex mu;
  std::vector<double> to_stored, to_replicated;
  auto since_push_ms = [&](uint64_t room) {
    const int64_t now = SteadyClock::now().time_since_epoch().count();
    return (now - pushed_ns[room - base].load()) / 1e6;
  };
  replication::ReplicationOptions options;
  options.etcd = etcd;
  replication::Replicator replicator(
      **outbox, dir, kBacklogNode, options, nullptr,
      [&](const std::vector<replication::ReplicatedResult>& done) {
        std::lock_guard lock(mu);
        for (const auto& r : done) to_replicated.push_back(since_push_ms(r.room_id));
      },
      [] {}, nullptr);
  if (!replicator.Start().ok()) return run;
  node::ResultChannel channel(4096);
  node::OutboxWriter writer(
      channel, **outbox, {},
      [&](const std::vector<v1::BattleResult>& batch,
          const std::vector<storage::EnqueueResult>& outcomes) {
        {
          std::lock_guard lock(mu);
          for (const auto& r : batch) to_stored.push_back(since_push_ms(r.room_id()));
        }
        replicator.Stored(batch, outcomes);
      },
      nullptr);
  writer.Start();
  const auto start = SteadyClock::now();
  for (uint64_t i = 1; i <= n; ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration<double>((i - 1) / rate));
    pushed_ns[i].store(SteadyClock::now().time_since_epoch().count());
    channel.Push(ResultFor(base, i)).IgnoreError();
  }
  writer.Stop();
  for (int i = 0; i < 6000; ++i) {
    {
      std::lock_guard lock(mu);
      if (to_replicated.size() >= n) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  replicator.Stop(SteadyClock::now());
  std::lock_guard lock(mu);
  run.results = to_replicated.size();
  run.stored_p50_ms = Percentile(to_stored, 0.50);
  run.stored_p99_ms = Percentile(to_stored, 0.99);
  run.replicated_p50_ms = Percentile(to_replicated, 0.50);
  run.replicated_p99_ms = Percentile(to_replicated, 0.99);
  return run;
}

// The ordinary drain: the outbox holds the backlog, a deliverer empties it.
double OrdinaryDrainPerS(const std::string& conninfo, const std::string& dir,
                         const std::string& lobby_url, uint64_t base, uint64_t n) {
  AllocateRooms(conninfo, base, n);
  auto outbox = storage::OpenOutbox(dir, {});
  if (!outbox.ok()) return 0;
  for (uint64_t first = 1; first <= n; first += 1000) {
    std::vector<v1::BattleResult> results;
    for (uint64_t slot = first; slot <= std::min(n, first + 999); ++slot) {
      results.push_back(ResultFor(base, slot));
    }
    if (!(*outbox)->Enqueue(results).ok()) return 0;
  }
  delivery::DelivererOptions options;
  options.lobby_urls = {lobby_url};
  options.token = kBacklogToken;
  delivery::Deliverer deliverer(**outbox, options, nullptr);
  const auto start = SteadyClock::now();
  if (!deliverer.Start().ok()) return 0;
  while ((*outbox)->Stats()->records > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double elapsed = Seconds(SteadyClock::now() - start);
  deliverer.Stop();
  if (ReceiptsBetween(conninfo, base, n) < n)
    std::fprintf(stderr, "    warning: receipts missing\n");
  return n / elapsed;
}

// The rescue: etcd holds the backlog of a node that is gone; a rescue delivers and deletes it.
double RescueDrainPerS(const std::string& conninfo, const std::string& work_dir,
                       const std::string& lobby_url, const replication::EtcdOptions& etcd,
                       uint64_t base, uint64_t n) {
  AllocateRooms(conninfo, base, n);
  auto client = replication::EtcdClient::Create(etcd);
  if (!client.ok()) return 0;
  for (uint64_t first = 1; first <= n; first += 128) {
    std::vector<replication::KeyValue> kvs;
    for (uint64_t slot = first; slot <= std::min(n, first + 127); ++slot) {
      const v1::BattleResult r = ResultFor(base, slot);
      kvs.push_back(
          {replication::ResultKey(etcd.key_prefix, kBacklogNode, r.room_id(), r.ended_at_ms()),
           wire::DeterministicBytes(r), 0});
    }
    if (!(*client)->CreateIfAbsent(kvs).ok()) return 0;
  }
  replication::RescueOptions options;
  options.etcd = etcd;
  options.delivery.lobby_urls = {lobby_url};
  options.work_dir = work_dir;
  const auto start = SteadyClock::now();
  auto report = replication::RescueNode(kBacklogNode, kBacklogToken, options);
  const double elapsed = Seconds(SteadyClock::now() - start);
  if (!report.ok() || report->delivered < n) {
    std::fprintf(stderr, "    warning: the rescue delivered %llu of %llu\n",
                 report.ok() ? static_cast<unsigned long long>(report->delivered) : 0ULL,
                 static_cast<unsigned long long>(n));
  }
  if (ReceiptsBetween(conninfo, base, n) < n)
    std::fprintf(stderr, "    warning: receipts missing\n");
  return n / elapsed;
}

struct OutageRun {
  bool replicated = false;
  double baseline_rss_mib = 0;
  double rss_mib = 0;   // VmRSS once every post was answered
  double peak_mib = 0;  // VmHWM
  double unreplicated = 0;
  uint64_t items_stored = 0;   // items answered stored (201/200 in the batch reply)
  uint64_t items_refused = 0;  // items answered with a problem (503: not replicated yet)
  uint64_t posts_failed = 0;   // posts without a batch reply (timeouts, 503 to the whole post)
};

// Result `slot` of the outage run: 200 players, padded to about `bytes` with a replay path.
v1::BattleResult OutageResult(uint64_t slot, size_t bytes) {
  v1::BattleResult r;
  r.set_room_id(slot);
  r.set_outcome(v1::SETTLED);
  r.set_winner_team(1);
  r.set_ended_at_ms(1'700'000'000'000);
  for (uint32_t i = 1; i <= wire::kMaxPlayers; ++i) {
    v1::PlayerResult* p = r.add_players();
    p->set_player_id("player-" + std::to_string(i));
    p->set_team(i % 2 + 1);
    p->set_kills(i);
    p->set_score(100 * i);
  }
  const size_t base = wire::DeterministicBytes(r).size();
  if (bytes > base + 3) {
    r.set_replay_path(std::string(std::min(bytes - base - 3, wire::kMaxStringBytes), 'r'));
  }
  return r;
}

Result<OutageRun> MeasureOutage(const ReplicateOutageOptions& o, bool replicated,
                                const std::string& root) {
  const std::string dir = root + (replicated ? "/replicated" : "/stored");
  std::filesystem::create_directories(dir);
  const std::string socket = dir + "/ingest.sock";
  const std::string log = dir + "/node.log";
  auto spawned = SpawnReadyNode(
      {NodeBinary(o.node_binary), "run", "--node-id", "bench-outage", "--outbox", dir + "/outbox",
       "--lobby", "http://127.0.0.1:1", "--token", "t", "--ingest-listen", "unix:" + socket,
       "--replicate-to", "etcd://127.0.0.1:" + std::to_string(FreePort()), "--log-level", "error"},
      "unix:" + socket, log);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  auto stop = [&](Status why) {
    Status stopped = StopChild(pid, "verdict-node");
    return why.ok() ? stopped : Status(why.code(), why.message() + "; see " + log);
  };
  const auto address = server::ListenAddress::Parse("unix:" + socket).value();
  OutageRun run;
  run.replicated = replicated;
  run.baseline_rss_mib = StatusMiB(pid, "VmRSS");
  constexpr uint64_t kBatch = 128;
  const uint64_t batches = (o.results + kBatch - 1) / kBatch;
  const std::string target =
      replicated ? "/v1/results:batch?durability=replicated" : "/v1/results:batch";
  std::atomic<uint64_t> next{0}, stored{0}, refused{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&] {
      server::BlockingHttpClient client(address, std::chrono::seconds(30));
      for (uint64_t b; (b = next++) < batches;) {
        v1::SettlementBatch batch;
        for (uint64_t slot = b * kBatch + 1; slot <= std::min(o.results, (b + 1) * kBatch);
             ++slot) {
          *batch.add_results() = OutageResult(slot, o.result_bytes);
        }
        const std::string body = batch.SerializeAsString();
        for (int attempt = 0; attempt <= o.retries; ++attempt) {
          auto reply = client.Call({"POST", target, std::string(wire::kProtobufType),
                                    std::string(wire::kProtobufType), "", body});
          v1::StoredBatchReply items;
          if (!reply.ok() || reply->status != 200 || !items.ParseFromString(reply->body)) {
            ++failed;
            continue;
          }
          for (const auto& item : items.items()) ++(item.has_problem() ? refused : stored);
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  run.items_stored = stored;
  run.items_refused = refused;
  run.posts_failed = failed;
  run.rss_mib = StatusMiB(pid, "VmRSS");
  run.peak_mib = StatusMiB(pid, "VmHWM");
  server::BlockingHttpClient scrape(address, std::chrono::seconds(5));
  if (auto metrics = scrape.Call({"GET", "/metrics", "", "", "", ""}); metrics.ok()) {
    run.unreplicated = MetricValue(metrics->body, "verdict_node_replication_unreplicated_records");
  }
  if (Status s = stop(Status::Ok()); !s.ok()) return s;
  return run;
}

}  // namespace

int RunReplicateOutage(const ReplicateOutageOptions& o) {
  const std::string root = TempRoot();
  std::fprintf(stderr,
               "replicate-outage: %llu results of about %zu bytes, batches of 128 posted %d "
               "time(s) each by %d clients, etcd and the lobby away; files in %s\n",
               static_cast<unsigned long long>(o.results), o.result_bytes, 1 + o.retries, o.clients,
               root.c_str());
  std::vector<OutageRun> runs;
  for (bool replicated : {true, false}) {
    auto run = MeasureOutage(o, replicated, root);
    if (!run.ok()) {
      std::fprintf(stderr, "verdict-bench replicate-outage: %s\n", run.status().ToString().c_str());
      return 1;
    }
    runs.push_back(*run);
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  Report report("replicate_outage");
  report.Field("results", static_cast<double>(o.results));
  report.Field("result_bytes", static_cast<double>(o.result_bytes));
  report.Field("replicated_rss_mib", runs[0].rss_mib);
  report.Field("stored_rss_mib", runs[1].rss_mib);
  report.Field("replicated_unreplicated_gauge", runs[0].unreplicated);
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-24s %10s %10s %10s %12s %10s %10s %8s\n", "posts", "base MiB", "RSS MiB",
               "peak MiB", "unreplicated", "stored", "refused", "failed");
  for (const OutageRun& r : runs) {
    const char* name = r.replicated ? "durability=replicated" : "stored only";
    report.Row({{"durability", r.replicated ? "replicated" : "stored"}},
               {{"baseline_rss_mib", r.baseline_rss_mib},
                {"rss_mib", r.rss_mib},
                {"peak_rss_mib", r.peak_mib},
                {"unreplicated", r.unreplicated},
                {"items_stored", static_cast<double>(r.items_stored)},
                {"items_refused", static_cast<double>(r.items_refused)},
                {"posts_failed", static_cast<double>(r.posts_failed)}});
    std::fprintf(table, "%-24s %10.1f %10.1f %10.1f %12.0f %10llu %10llu %8llu\n", name,
                 r.baseline_rss_mib, r.rss_mib, r.peak_mib, r.unreplicated,
                 static_cast<unsigned long long>(r.items_stored),
                 static_cast<unsigned long long>(r.items_refused),
                 static_cast<unsigned long long>(r.posts_failed));
  }
  return report.Emit(o.output);
}

int RunReplicate(const ReplicateOptions& o) {
  const std::string root = TempRoot();
  std::unique_ptr<LocalCluster> cluster;
  replication::EtcdOptions etcd;
  const std::string url =
      o.etcd.empty() ? (cluster = std::make_unique<LocalCluster>(root + "/etcd"))->url() : o.etcd;
  if (Status s = replication::ParseEtcdUrl(url, &etcd); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  etcd.key_prefix = "bench/" + std::to_string(::getpid()) + "/";
  if (!WaitForEtcd(etcd)) {
    std::fprintf(stderr, "etcd at %s does not answer\n", url.c_str());
    return 1;
  }
  std::fprintf(stderr, "replicate: etcd at %s; files in %s\n", url.c_str(), root.c_str());
  uint64_t run = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count() %
                 100'000 * 10;
  Report report("replicate");
  std::FILE* table = o.output.json ? stderr : stdout;

  std::fprintf(stderr, "  local-only ingest, %d producers, %.0f s\n", o.producers, o.seconds);
  const IngestRun local =
      RunIngestPath(root + "/local", nullptr, o.seconds, o.producers, ++run * kRunSpan);
  std::fprintf(stderr, "  replicated ingest\n");
  etcd.key_prefix += "ingest/";
  const IngestRun replicated =
      RunIngestPath(root + "/replicated", &etcd, o.seconds, o.producers, ++run * kRunSpan);
  std::fprintf(table, "%-34s %12s\n", "path", "results/s");
  std::fprintf(table, "%-34s %12.0f\n", "local only: stored", local.stored_per_s);
  std::fprintf(table, "%-34s %12.0f\n", "replicating: stored", replicated.stored_per_s);
  std::fprintf(table, "%-34s %12.0f\n", "replicating: replicated", replicated.replicated_per_s);
  report.Field("local_per_s", local.stored_per_s);
  report.Field("replicating_stored_per_s", replicated.stored_per_s);
  report.Field("replicated_per_s", replicated.replicated_per_s);
  report.Field("replicated_vs_local", replicated.replicated_per_s / local.stored_per_s);

  const double half = replicated.replicated_per_s / 2;
  std::fprintf(stderr, "  lag at %.0f results/s\n", half);
  etcd.key_prefix += "lag/";
  const LagRun lag = RunLag(root + "/lag", etcd, half, o.seconds, ++run * kRunSpan);
  std::fprintf(table,
               "at %.0f results/s (half): push->stored p50 %.1f ms p99 %.1f ms; "
               "push->replicated p50 %.1f ms p99 %.1f ms (%llu results)\n",
               lag.rate, lag.stored_p50_ms, lag.stored_p99_ms, lag.replicated_p50_ms,
               lag.replicated_p99_ms, static_cast<unsigned long long>(lag.results));
  report.Field("lag_rate_per_s", lag.rate);
  report.Field("lag_stored_p99_ms", lag.stored_p99_ms);
  report.Field("lag_replicated_p50_ms", lag.replicated_p50_ms);
  report.Field("lag_replicated_p99_ms", lag.replicated_p99_ms);

  const std::string& conninfo = o.db;
  try {
    pqxx::connection check(conninfo);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "no PostgreSQL for the drain part (%s); skipped\n", e.what());
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
    return report.Emit(o.output);
  }
  if (auto migrated = lobby::Migrate({.conninfo = conninfo}); !migrated.ok()) {
    std::fprintf(stderr, "%s\n", migrated.status().ToString().c_str());
    return 1;
  }
  InProcessLobby lobby(conninfo, 8, 2);
  const std::string lobby_url = "http://127.0.0.1:" + std::to_string(lobby.port());
  std::fprintf(stderr, "  ordinary drain of %llu\n", static_cast<unsigned long long>(o.backlog));
  const double ordinary =
      OrdinaryDrainPerS(conninfo, root + "/drain", lobby_url, ++run * kRunSpan, o.backlog);
  std::fprintf(stderr, "  rescue of %llu\n", static_cast<unsigned long long>(o.backlog));
  etcd.key_prefix += "rescue/";
  const double rescue =
      RescueDrainPerS(conninfo, root + "/rescue", lobby_url, etcd, ++run * kRunSpan, o.backlog);
  std::fprintf(table, "drain of %llu results: ordinary %.0f/s, rescue from etcd %.0f/s (%.2fx)\n",
               static_cast<unsigned long long>(o.backlog), ordinary, rescue, rescue / ordinary);
  report.Field("ordinary_drain_per_s", ordinary);
  report.Field("rescue_drain_per_s", rescue);
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
