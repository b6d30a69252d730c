// `verdict-bench latency`: what a player waits for once a match ends, at an ordinary load, beside
// the irreducible parts of the same path, in one run against one PostgreSQL (a database of the
// run's own):
//   rate     unless --rate gives it, the drain's maximum C (drain.h: a backlog of allocated rooms
//            emptied by deliverers of the same shards and batch into the same lobby), then the
//            load R = --load-fraction × C;
//   latency  a real verdict-lobby and verdict-node, each its own process, the node delivering to
//            the lobby. N results of allocated rooms are posted open loop to the node's Unix
//            socket (POST /v1/results, one result a request, from keep-alive connections that
//            each wait for their answer), result i due at i / R whatever the answers before it.
//            Each is timed from its due time, not its send, so that a sender held up is not
//            excused (no coordinated omission), to its battle.settled event on a subscriber of
//            the lobby's feed (/v1/events): the moment a game service can show the new rating;
//   floor    the same path's irreducible parts, each measured alone, one sample at a time:
//              append  the node's durable append: an outbox Enqueue of one result, its write and
//                      the log's fsync (the calls the node's writer makes for every batch);
//              settle  one room's settlement committed directly: the lobby's two statements as
//                      pgbench runs them (pgbench_settle.h), prepared, one room a transaction;
//              http    two loopback HTTP exchanges: GET /healthz to the node over its socket,
//                      then to the lobby over TCP, each on a connection kept alive.
//            The floor is the sum of the three medians: each part's typical cost, paid once by
//            every result. A sum of p99s would ask every part to be slow for the same result.
// Reported: p50, p99 and p99.9 of the latency, the floor and p99 / floor. To say what makes up
// the rest, each result's latency in three: due to the node's 201; the 201 to the start of its
// settlement's write in the lobby's transaction (the event's settled_at_ms, the database's clock
// in whole ms, on this host); and from there to the event on the feed. Beside them, over the
// posting, the node's and the lobby's own histograms: the node's log syncs, its delivery requests
// and their records, the lobby's rooms per transaction.
#include "bench/latency.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <utility>
#include <vector>

#include "bench/backlog.h"
#include "bench/drain.h"
#include "bench/feed.h"
#include "bench/metrics_page.h"
#include "bench/pgbench_settle.h"
#include "bench/sample.h"
#include "lobby/settlement_service.h"
#include "proto/wire.h"
#include "server/http_client.h"
#include "storage/outbox.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

// Each part of a run settles rooms of its own, base + 1 …, on the run's database; every part
// seats the same players (ResultFor), free again once the part before has settled its rooms.
constexpr uint64_t kRunSpan = 10'000'000;
constexpr uint64_t kDrainBase = 1 * kRunSpan;
constexpr uint64_t kFloorBase = 2 * kRunSpan;
constexpr uint64_t kLatencyBase = 3 * kRunSpan;
// A run whose feed brings no event of it for this long fails (a result refused, a stuck lobby).
constexpr std::chrono::milliseconds kFeedStall{30'000};
constexpr std::chrono::seconds kCallTimeout{30};
// The senders' start, after the threads are up.
constexpr std::chrono::milliseconds kStartAfter{50};

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The median, p99 and p99.9 of a set of samples in ms, and how many there were.
struct Spread {
  double p50 = 0;
  double p99 = 0;
  double p999 = 0;
  size_t samples = 0;
};

Spread SpreadOf(const std::vector<double>& ms) {
  return {Percentile(ms, 0.50), Percentile(ms, 0.99), Percentile(ms, 0.999), ms.size()};
}

// A child process that is stopped (SIGTERM, then reaped) when the run is over, however it ends.
class ChildProcess {
 public:
  ChildProcess(pid_t pid, std::string what) : pid_(pid), what_(std::move(what)) {}
  ~ChildProcess() { Stop().IgnoreError(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // OK if it exited with status 0 (StopChild), or was stopped before.
  Status Stop() {
    const pid_t pid = std::exchange(pid_, -1);
    return pid > 0 ? StopChild(pid, what_) : Status::Ok();
  }

 private:
  pid_t pid_;
  std::string what_;
};

// The node's durable append: `samples` results one at a time, each an Enqueue (its write, then the
// log's fsync) on a fresh outbox of `shards` shards in `dir`.
Result<std::vector<double>> TimeDurableAppends(const std::string& dir, uint32_t shards,
                                               uint64_t samples) {
  auto outbox = storage::OpenOutbox(dir, {.shard_count = shards});
  if (!outbox.ok()) return outbox.status();
  std::vector<double> ms;
  for (uint64_t slot = 1; slot <= samples; ++slot) {
    const v1::BattleResult result = ResultFor(kFloorBase, slot);
    const auto start = SteadyClock::now();
    auto stored = (*outbox)->Enqueue({&result, 1});
    if (!stored.ok()) return stored.status();
    ms.push_back(Ms(SteadyClock::now() - start));
  }
  return ms;
}

// One room's settlement committed directly, `samples` times: the lobby's two statements for one
// room (BenchSettleStatements), prepared once, in a transaction a room, on rooms allocated first.
Result<std::vector<double>> TimeDirectSettlements(const std::string& conninfo, uint64_t samples) {
  AllocateRooms(conninfo, kFloorBase, samples);
  std::vector<double> ms;
  try {
    pqxx::connection conn(conninfo);
    const BenchSettle statements = BenchSettleStatements(kFloorBase, 1, "$1::bigint");
    conn.prepare("floor_settle_prepare", statements.prepare);
    conn.prepare("floor_settle_write", statements.write);
    for (uint64_t call = 0; call < samples; ++call) {
      const auto start = SteadyClock::now();
      pqxx::work tx(conn);
      tx.exec_prepared("floor_settle_prepare", static_cast<int64_t>(call));
      tx.exec_prepared("floor_settle_write", static_cast<int64_t>(call));
      tx.commit();
      ms.push_back(Ms(SteadyClock::now() - start));
    }
  } catch (const std::exception& e) {
    return UnavailableError(std::string("settling directly: ") + e.what());
  }
  if (const uint64_t settled = ReceiptsBetween(conninfo, kFloorBase, samples); settled < samples) {
    return InternalError("settling directly: " + std::to_string(settled) + " receipts for " +
                         std::to_string(samples) + " rooms");
  }
  return ms;
}

// Two loopback HTTP exchanges a sample: GET /healthz to the node over its Unix socket, then to the
// lobby over TCP, each on a connection kept alive (opened by a first round that is not counted).
Result<std::vector<double>> TimeLoopbackExchanges(const server::ListenAddress& node,
                                                  const server::ListenAddress& lobby,
                                                  uint64_t samples) {
  server::BlockingHttpClient to_node(node, kCallTimeout), to_lobby(lobby, kCallTimeout);
  const server::HttpRequest health{"GET", "/healthz", "", "", "", ""};
  std::vector<double> ms;
  for (uint64_t round = 0; round <= samples; ++round) {
    const auto start = SteadyClock::now();
    for (server::BlockingHttpClient* client : {&to_node, &to_lobby}) {
      auto reply = client->Call(health);
      if (!reply.ok()) return reply.status();
      if (reply->status != 200) {
        return UnavailableError("GET /healthz answered " + std::to_string(reply->status));
      }
    }
    if (round > 0) ms.push_back(Ms(SteadyClock::now() - start));
  }
  return ms;
}

// When result i (room kLatencyBase + i + 1) is due, and when it got where.
struct Timeline {
  Timeline(uint64_t n, TimePoint start, double rate)
      : start(start),
        rate(rate),
        wall_ahead(std::chrono::system_clock::now().time_since_epoch() -
                   SteadyClock::now().time_since_epoch()),
        sent(n),
        stored(n),
        written(n),
        committed(n),
        sequenced(n),
        settled(n) {}
  TimePoint Due(uint64_t i) const {
    return start + std::chrono::duration_cast<SteadyClock::duration>(
                       std::chrono::duration<double>(static_cast<double>(i) / rate));
  }
  // A wall-clock time in ms since the epoch (the database's clock, on this host) on this clock.
  TimePoint FromWallMs(double ms) const {
    return TimePoint(std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double, std::milli>(ms) - wall_ahead));
  }
  const TimePoint start;
  const double rate;  // results due per second
  // How far the wall clock reads ahead of this one.
  const std::chrono::nanoseconds wall_ahead;
  std::vector<TimePoint> sent;    // its POST began (written by its sender)
  std::vector<TimePoint> stored;  // the node answered it stored (by its sender)
  // Its settlement's write began in the lobby's transaction: the event's settled_at_ms, the
  // database's clock in whole ms (by the feed's reader).
  std::vector<TimePoint> written;
  // Where the server tracks commit timestamps: when its settlement's transaction committed, and
  // when the sequencer's transaction that gave its event a place in the feed did (read after the
  // run; unset where they are not tracked).
  std::vector<TimePoint> committed;
  std::vector<TimePoint> sequenced;
  std::vector<TimePoint> settled;  // its battle.settled event arrived (by the feed's reader)
};

// Posts every result of `timeline` to the node at `node`, each at its due time, from `clients`
// keep-alive connections that each wait for their answer (as a battle host waits for "stored").
// A connection that is still waiting when its next result comes due sends it late; the lateness
// counts against the result. The first failure, if any: the posting stops there.
Status PostOpenLoop(const server::ListenAddress& node, int clients, Timeline& timeline) {
  const uint64_t n = timeline.sent.size();
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex failure_mu;
  Status failure;
  std::vector<std::thread> senders;
  for (int c = 0; c < clients; ++c) {
    senders.emplace_back([&] {
      server::BlockingHttpClient client(node, kCallTimeout);
      for (uint64_t i; !failed && (i = next++) < n;) {
        const std::string body = wire::DeterministicBytes(ResultFor(kLatencyBase, i + 1));
        std::this_thread::sleep_until(timeline.Due(i));
        timeline.sent[i] = SteadyClock::now();
        auto reply = client.Call({"POST", "/v1/results", std::string(wire::kProtobufType),
                                  std::string(wire::kProtobufType), "", body});
        if (reply.ok() && reply->status / 100 == 2) {
          timeline.stored[i] = SteadyClock::now();
          continue;
        }
        std::lock_guard lock(failure_mu);
        if (failed.exchange(true)) return;
        failure = reply.ok() ? UnavailableError("room " + std::to_string(kLatencyBase + i + 1) +
                                                ": the node answered " +
                                                std::to_string(reply->status) + " " + reply->body)
                             : reply.status();
      }
    });
  }
  for (std::thread& sender : senders) sender.join();
  return failure;
}

// Reads the feed until every result of `timeline` has its event (others' events are passed
// over), counting them in `settled`.
Status FollowFeed(FeedReader& feed, Timeline& timeline, std::atomic<uint64_t>& settled) {
  const uint64_t n = timeline.settled.size();
  while (settled < n) {
    auto message = feed.Next(kFeedStall);
    const TimePoint now = SteadyClock::now();
    if (!message.ok()) {
      return UnavailableError(message.status().message() + ", " + std::to_string(n - settled) +
                              " of " + std::to_string(n) + " results without their event");
    }
    const uint64_t room = EventNumber(*message, "room_id");
    if (room <= kLatencyBase || room > kLatencyBase + n) continue;
    const uint64_t i = room - kLatencyBase - 1;
    if (timeline.settled[i] != TimePoint{}) continue;
    timeline.settled[i] = now;
    timeline.written[i] = timeline.FromWallMs(EventNumber(*message, "settled_at_ms"));
    ++settled;
  }
  return Status::Ok();
}

// Where the server tracks commit timestamps (track_commit_timestamp = on), when each result's
// settlement committed (the transaction that wrote its match) and when its event was numbered in
// the feed (the sequencer's transaction, the last to write the event's row), into `timeline`.
// False, leaving them unset, where the server does not track them.
bool ReadCommitTimes(const std::string& conninfo, Timeline& timeline) {
  const uint64_t n = timeline.committed.size();
  pqxx::connection conn(conninfo);
  pqxx::nontransaction tx(conn);
  if (tx.exec1("SHOW track_commit_timestamp")[0].as<std::string>() != "on") return false;
  const pqxx::result rows = tx.exec_params(
      "SELECT m.room_id, extract(epoch FROM pg_xact_commit_timestamp(m.xmin)) * 1000, "
      "extract(epoch FROM pg_xact_commit_timestamp(e.xmin)) * 1000 "
      "FROM matches m JOIN settlement_events e ON e.match_id = m.match_id "
      "WHERE m.room_id BETWEEN $1 AND $2",
      kLatencyBase + 1, kLatencyBase + n);
  for (const auto& row : rows) {
    if (row[1].is_null() || row[2].is_null()) continue;  // committed before tracking began
    const uint64_t i = row[0].as<uint64_t>() - kLatencyBase - 1;
    timeline.committed[i] = timeline.FromWallMs(row[1].as<double>());
    timeline.sequenced[i] = timeline.FromWallMs(row[2].as<double>());
  }
  return true;
}

// The feed's newest event now (the subscriber starts after it, and sees only what comes next).
uint64_t FeedHead(const std::string& conninfo) {
  pqxx::connection conn(conninfo);
  pqxx::nontransaction tx(conn);
  return tx.exec1("SELECT verdict_feed_head()")[0].as<uint64_t>();
}

// The page GET /metrics answers at `at`; empty if it cannot be read.
std::string Scrape(const server::ListenAddress& at) {
  server::BlockingHttpClient client(at, kCallTimeout);
  auto page = client.Call({"GET", "/metrics", "", "", "", ""});
  return page.ok() && page->status == 200 ? page->body : "";
}

// The CPU a span of the run used, in cores (CPU seconds a second): the host's busy time, and of
// it the load generator (this process), the node, the lobby, PostgreSQL's processes, and the
// rest (whatever else runs on the host).
struct CpuUse {
  double seconds = 0;  // the span's length
  double host = 0;
  double bench = 0;
  double node = 0;
  double lobby = 0;
  double postgres = 0;
  double rest = 0;
};

// The CPU time used so far, by the host and by each process of the run.
struct CpuReading {
  TimePoint at;
  HostCpu host;
  double bench = 0;
  double node = 0;
  double lobby = 0;
  std::map<pid_t, double> postgres;  // by the server's processes (pg_stat_activity)
};

// The CPU time of the processes of the server at `conninfo`: its backends, background workers
// and auxiliary processes, as pg_stat_activity lists them (a process that ended is not counted).
std::map<pid_t, double> PostgresCpu(const std::string& conninfo) {
  std::map<pid_t, double> cpu;
  pqxx::connection conn(conninfo);
  pqxx::nontransaction tx(conn);
  for (const auto& row : tx.exec("SELECT pid FROM pg_stat_activity")) {
    const pid_t pid = row[0].as<pid_t>();
    if (const double seconds = ProcessCpuSeconds(pid); seconds >= 0) cpu[pid] = seconds;
  }
  return cpu;
}

CpuReading ReadCpu(const std::string& conninfo, pid_t node, pid_t lobby) {
  CpuReading reading{SteadyClock::now(),       HostCpuNow(),
                     CpuSeconds(RUSAGE_SELF),  ProcessCpuSeconds(node),
                     ProcessCpuSeconds(lobby), PostgresCpu(conninfo)};
  return reading;
}

CpuUse CpuBetween(const CpuReading& from, const CpuReading& to) {
  const double seconds = std::chrono::duration<double>(to.at - from.at).count();
  CpuUse use;
  use.seconds = seconds;
  use.host = (to.host.busy_s - from.host.busy_s) / seconds;
  use.bench = (to.bench - from.bench) / seconds;
  use.node = (to.node - from.node) / seconds;
  use.lobby = (to.lobby - from.lobby) / seconds;
  for (const auto& [pid, cpu] : to.postgres) {
    const auto before = from.postgres.find(pid);
    use.postgres += (cpu - (before == from.postgres.end() ? 0 : before->second)) / seconds;
  }
  use.rest = use.host - use.bench - use.node - use.lobby - use.postgres;
  return use;
}

// What the node's and the lobby's own metrics say of the posting (their gains over it).
struct Profile {
  double sync_p50_ms = 0;  // the node's log syncs (verdict_node_outbox_write_seconds)
  double sync_p99_ms = 0;
  double attempt_p50_ms = 0;  // the node's delivery requests, sent to answered
  double attempt_p99_ms = 0;
  double records_per_request = 0;  // of its batch requests
  // The lobby's single-room settlement requests (POST /v1/settlements), read to answered: its
  // histogram leaves batch requests out, so it has these only at --batch 1.
  double settle_requests = 0;
  double settle_p50_ms = 0;
  double settle_p99_ms = 0;
  double rooms_per_transaction = 0;
};

Profile ProfileOf(const std::string& node_before, const std::string& node_after,
                  const std::string& lobby_before, const std::string& lobby_after) {
  const auto node = [&](const char* name, double fraction) {
    return HistogramQuantileMs(node_before, node_after, name, fraction);
  };
  const auto lobby = [&](const char* name, double fraction) {
    return HistogramQuantileMs(lobby_before, lobby_after, name, fraction);
  };
  return {node("verdict_node_outbox_write_seconds", 0.50),
          node("verdict_node_outbox_write_seconds", 0.99),
          node("verdict_node_delivery_attempt_seconds", 0.50),
          node("verdict_node_delivery_attempt_seconds", 0.99),
          HistogramMean(node_before, node_after, "verdict_node_delivery_batch_records"),
          MetricValue(lobby_after, "verdict_lobby_settle_seconds_count") -
              MetricValue(lobby_before, "verdict_lobby_settle_seconds_count"),
          lobby("verdict_lobby_settle_seconds", 0.50),
          lobby("verdict_lobby_settle_seconds", 0.99),
          HistogramMean(lobby_before, lobby_after, "verdict_lobby_settle_batch_rooms")};
}

struct Measured {
  double drain_max_per_s = 0;  // 0 when --rate gave the rate
  double rate_per_s = 0;       // results due per second
  double sent_per_s = 0;       // as sent: the results over the time from the start to the last
  Spread latency;              // due -> battle.settled on the feed
  Spread to_stored;            // due -> the node's 201
  Spread stored_to_write;      // the 201 -> the settlement's write began in the lobby
  Spread write_to_event;       // the write began -> battle.settled
  // Its parts, where the server tracks commit timestamps (no samples where it does not).
  Spread write_to_commit;       // the write began -> the settlement committed
  Spread commit_to_sequenced;   // the settlement committed -> the sequencer numbered its event
  Spread sequenced_to_event;    // numbered -> battle.settled on the subscriber
  Spread send_lag;              // due -> sent: the load generator's own lateness
  Spread append, settle, http;  // the floor's parts
  Profile profile;
  CpuUse cpu;        // over the posting
  CpuUse drain_cpu;  // over the drain (its outbox filled, then emptied)
  double floor_ms() const { return append.p50 + settle.p50 + http.p50; }
};

// The floor's three parts, each alone; the node (at `node`) and the lobby idle.
Status MeasureFloor(const LatencyOptions& o, const std::string& conninfo, const std::string& root,
                    const server::ListenAddress& node, const server::ListenAddress& lobby,
                    Measured& m) {
  std::fprintf(stderr, "latency: the floor, %llu samples of each part\n",
               static_cast<unsigned long long>(o.floor_samples));
  auto append = TimeDurableAppends(root + "/append", o.shards, o.floor_samples);
  if (!append.ok()) return append.status();
  auto settle = TimeDirectSettlements(conninfo, o.floor_samples);
  if (!settle.ok()) return settle.status();
  auto http = TimeLoopbackExchanges(node, lobby, o.floor_samples);
  if (!http.ok()) return http.status();
  m.append = SpreadOf(*append);
  m.settle = SpreadOf(*settle);
  m.http = SpreadOf(*http);
  return Status::Ok();
}

// Every result of `timeline` posted to the node at `node` from `clients` connections, and followed
// on `feed` until each has its event.
Status PostAndFollow(const server::ListenAddress& node, int clients, FeedReader& feed,
                     Timeline& timeline) {
  std::atomic<uint64_t> settled{0};
  Status followed, posted;
  const double seconds = timeline.sent.size() / timeline.rate;
  Progress progress("posting (results settled)", seconds, settled);
  std::thread follower([&] { followed = FollowFeed(feed, timeline, settled); });
  posted = PostOpenLoop(node, clients, timeline);
  follower.join();
  return posted.ok() ? followed : posted;
}

// The latency of each result of `timeline`, its parts and the senders' lateness into `m`.
void SpreadsOf(const Timeline& timeline, Measured& m) {
  std::vector<double> latency, to_stored, stored_to_write, write_to_event, send_lag;
  TimePoint last_sent = timeline.start;
  for (uint64_t i = 0; i < timeline.sent.size(); ++i) {
    const TimePoint due = timeline.Due(i);
    latency.push_back(Ms(timeline.settled[i] - due));
    to_stored.push_back(Ms(timeline.stored[i] - due));
    stored_to_write.push_back(Ms(timeline.written[i] - timeline.stored[i]));
    write_to_event.push_back(Ms(timeline.settled[i] - timeline.written[i]));
    send_lag.push_back(Ms(timeline.sent[i] - due));
    last_sent = std::max(last_sent, timeline.sent[i]);
  }
  m.sent_per_s =
      timeline.sent.size() / std::chrono::duration<double>(last_sent - timeline.start).count();
  m.latency = SpreadOf(latency);
  m.to_stored = SpreadOf(to_stored);
  m.stored_to_write = SpreadOf(stored_to_write);
  m.write_to_event = SpreadOf(write_to_event);
  m.send_lag = SpreadOf(send_lag);
  std::vector<double> write_to_commit, commit_to_sequenced, sequenced_to_event;
  for (uint64_t i = 0; i < timeline.sent.size(); ++i) {
    if (timeline.committed[i] == TimePoint{}) continue;
    write_to_commit.push_back(Ms(timeline.committed[i] - timeline.written[i]));
    commit_to_sequenced.push_back(Ms(timeline.sequenced[i] - timeline.committed[i]));
    sequenced_to_event.push_back(Ms(timeline.settled[i] - timeline.sequenced[i]));
  }
  m.write_to_commit = SpreadOf(write_to_commit);
  m.commit_to_sequenced = SpreadOf(commit_to_sequenced);
  m.sequenced_to_event = SpreadOf(sequenced_to_event);
}

// The results posted open loop at m.rate_per_s to the node at `node` (process `node_pid`) and
// followed on the feed of the lobby at `lobby` (`lobby_port`, process `lobby_pid`); the latencies,
// the profile and the CPU into `m`.
Status MeasureLatency(const LatencyOptions& o, const std::string& conninfo, uint16_t lobby_port,
                      pid_t lobby_pid, pid_t node_pid, const server::ListenAddress& node,
                      const server::ListenAddress& lobby, Measured& m) {
  AllocateRooms(conninfo, kLatencyBase, o.results);
  auto feed =
      FeedReader::Open(lobby_port, kBacklogToken, FeedHead(conninfo), o.subscriber_quick_ack);
  if (!feed.ok()) return feed.status();
  std::fprintf(stderr, "latency: %llu results open loop at %.0f/s from %d connections\n",
               static_cast<unsigned long long>(o.results), m.rate_per_s, o.clients);
  const std::string node_before = Scrape(node), lobby_before = Scrape(lobby);
  const CpuReading cpu_before = ReadCpu(conninfo, node_pid, lobby_pid);
  Timeline timeline(o.results, SteadyClock::now() + kStartAfter, m.rate_per_s);
  VERDICT_RETURN_IF_ERROR(PostAndFollow(node, o.clients, **feed, timeline));
  m.cpu = CpuBetween(cpu_before, ReadCpu(conninfo, node_pid, lobby_pid));
  m.profile = ProfileOf(node_before, Scrape(node), lobby_before, Scrape(lobby));
  if (!ReadCommitTimes(conninfo, timeline)) {
    std::fprintf(stderr,
                 "latency: the server does not track commit timestamps "
                 "(track_commit_timestamp): no split at the commits\n");
  }
  SpreadsOf(timeline, m);
  return Status::Ok();
}

// The whole run: the lobby, the drain's maximum (unless --rate), the node, the floor, the latency.
Result<Measured> Measure(const LatencyOptions& o, const std::string& conninfo,
                         const std::string& root) {
  std::vector<std::string> lobby_args = {"--node-token",
                                         std::string(kBacklogNode) + "=" + kBacklogToken};
  if (o.lobby_coalesce_ms >= 0) {
    lobby_args.insert(lobby_args.end(),
                      {"--coalesce-wait-ms", std::to_string(o.lobby_coalesce_ms)});
  }
  auto spawned_lobby =
      SpawnLobby(LobbyBinary(o.lobby_binary), conninfo, lobby_args, root + "/lobby.log");
  if (!spawned_lobby.ok()) return spawned_lobby.status();
  ChildProcess lobby_process(spawned_lobby->pid, "verdict-lobby");
  const std::string lobby_host_port = "127.0.0.1:" + std::to_string(spawned_lobby->port);
  Measured m;
  m.rate_per_s = o.rate;
  if (m.rate_per_s <= 0) {
    std::fprintf(stderr, "latency: the drain's maximum, %llu results, %u shards, batch %zu\n",
                 static_cast<unsigned long long>(o.backlog), o.shards, o.batch);
    AllocateRooms(conninfo, kDrainBase, o.backlog);
    // The deliverers run in this process (no node process: pid -1 reads no CPU).
    const CpuReading cpu_before = ReadCpu(conninfo, -1, spawned_lobby->pid);
    m.drain_max_per_s = DrainAllocated(conninfo, root + "/drain", o.shards, o.batch, kDrainBase,
                                       o.backlog, "http://" + lobby_host_port);
    m.drain_cpu = CpuBetween(cpu_before, ReadCpu(conninfo, -1, spawned_lobby->pid));
    if (m.drain_max_per_s <= 0) {
      return UnavailableError("the drain did not run; see " + root + "/lobby.log");
    }
    m.rate_per_s = m.drain_max_per_s * o.load_fraction;
  }
  const std::string ingest = "unix:" + root + "/ingest.sock";
  auto spawned_node =
      SpawnReadyNode({NodeBinary(o.node_binary), "run", "--node-id", kBacklogNode, "--outbox",
                      root + "/outbox", "--lobby", "http://" + lobby_host_port, "--token",
                      kBacklogToken, "--shards", std::to_string(o.shards), "--batch",
                      std::to_string(o.batch), "--ingest-listen", ingest, "--log-level", "error"},
                     ingest, root + "/node.log");
  if (!spawned_node.ok()) return spawned_node.status();
  ChildProcess node_process(*spawned_node, "verdict-node");
  const auto node = server::ListenAddress::Parse(ingest);
  const auto lobby = server::ListenAddress::Parse(lobby_host_port);
  if (!node.ok()) return node.status();
  if (!lobby.ok()) return lobby.status();
  VERDICT_RETURN_IF_ERROR(MeasureFloor(o, conninfo, root, *node, *lobby, m));
  VERDICT_RETURN_IF_ERROR(MeasureLatency(o, conninfo, spawned_lobby->port, spawned_lobby->pid,
                                         *spawned_node, *node, *lobby, m));
  VERDICT_RETURN_IF_ERROR(node_process.Stop());
  VERDICT_RETURN_IF_ERROR(lobby_process.Stop());
  return m;
}

// One line of the table: a distribution's p50, p99 and p99.9.
void PrintSpread(FILE* table, const char* name, const Spread& s) {
  std::fprintf(table, "%-46s %9.2f %9.2f %9.2f\n", name, s.p50, s.p99, s.p999);
}

// What the table and the JSON say beyond the measurements themselves.
struct Derived {
  double floor_ms = 0;
  double p99_over_floor = 0;
  double coalesce_ms = 0;  // the lobby's group-commit wait, as given or its default
  // CPU time a result, in ms, by PostgreSQL and by the lobby: the same work for a result drained
  // from a backlog as for one posted live (the drain's figures are 0 with --rate).
  double pg_ms = 0;
  double lobby_ms = 0;
  double drain_pg_ms = 0;
  double drain_lobby_ms = 0;
};

Derived DerivedOf(const LatencyOptions& o, const Measured& m) {
  const auto per_result_ms = [](const CpuUse& use, double cores, double results) {
    return results > 0 ? cores * use.seconds / results * 1000 : 0;
  };
  Derived d;
  d.floor_ms = m.floor_ms();
  d.p99_over_floor = d.floor_ms > 0 ? m.latency.p99 / d.floor_ms : 0;
  d.coalesce_ms =
      o.lobby_coalesce_ms >= 0
          ? o.lobby_coalesce_ms
          : std::chrono::duration<double, std::milli>(lobby::SchedulerOptions{}.coalesce_wait)
                .count();
  d.pg_ms = per_result_ms(m.cpu, m.cpu.postgres, o.results);
  d.lobby_ms = per_result_ms(m.cpu, m.cpu.lobby, o.results);
  if (m.drain_max_per_s > 0) {
    d.drain_pg_ms = per_result_ms(m.drain_cpu, m.drain_cpu.postgres, o.backlog);
    d.drain_lobby_ms = per_result_ms(m.drain_cpu, m.drain_cpu.lobby, o.backlog);
  }
  return d;
}

// The latency, its parts and the floor, one distribution a line.
void PrintSpreads(FILE* table, const Measured& m, const Derived& d) {
  std::fprintf(table, "%-46s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "p99.9 ms");
  PrintSpread(table, "due -> battle.settled on the feed", m.latency);
  PrintSpread(table, "  due -> stored (the node's 201)", m.to_stored);
  PrintSpread(table, "  stored -> the lobby's write began (+-1 ms)", m.stored_to_write);
  PrintSpread(table, "  the write began -> battle.settled (+-1 ms)", m.write_to_event);
  if (m.write_to_commit.samples > 0) {
    PrintSpread(table, "    the write began -> committed (+-1 ms)", m.write_to_commit);
    PrintSpread(table, "    committed -> numbered in the feed", m.commit_to_sequenced);
    PrintSpread(table, "    numbered -> on the subscriber", m.sequenced_to_event);
  }
  PrintSpread(table, "  due -> sent (the load's own lateness)", m.send_lag);
  std::fprintf(table, "floor, each part alone:\n");
  PrintSpread(table, "  durable append (outbox Enqueue, fsync)", m.append);
  PrintSpread(table, "  one room's settlement committed directly", m.settle);
  PrintSpread(table, "  two loopback HTTP exchanges", m.http);
  std::fprintf(table, "%-46s %9.2f\n", "  floor (the sum of the medians)", d.floor_ms);
  std::fprintf(table, "\np99 / floor: %.2f (target <= 3)\n", d.p99_over_floor);
}

// The programs' own histograms and the CPU over the posting.
void PrintProfile(FILE* table, const Measured& m, const Derived& d) {
  const Profile& p = m.profile;
  std::fprintf(table,
               "over the posting (histogram buckets' upper bounds): the node's log syncs p50 %.1f, "
               "p99 %.1f ms; its delivery requests p50 %.1f, p99 %.1f ms, %.1f records a batch "
               "request; the lobby's transactions %.1f rooms each (group-commit wait %.1f ms)\n",
               p.sync_p50_ms, p.sync_p99_ms, p.attempt_p50_ms, p.attempt_p99_ms,
               p.records_per_request, p.rooms_per_transaction, d.coalesce_ms);
  if (p.settle_requests > 0) {
    std::fprintf(table, "the lobby's single-room settlement requests: p50 %.1f, p99 %.1f ms\n",
                 p.settle_p50_ms, p.settle_p99_ms);
  }
  std::fprintf(table,
               "CPU over the posting, in cores: the host %.2f of %u busy; the load %.2f, the node "
               "%.2f, the lobby %.2f, PostgreSQL %.2f, the rest of the host %.2f\n",
               m.cpu.host, std::thread::hardware_concurrency(), m.cpu.bench, m.cpu.node,
               m.cpu.lobby, m.cpu.postgres, m.cpu.rest);
  if (m.drain_max_per_s > 0) {
    std::fprintf(table,
                 "CPU a result, in ms: PostgreSQL %.2f posted against %.2f drained, the lobby "
                 "%.2f against %.2f\n",
                 d.pg_ms, d.drain_pg_ms, d.lobby_ms, d.drain_lobby_ms);
  }
}

void PrintTable(FILE* table, const LatencyOptions& o, const Measured& m, const Derived& d) {
  if (m.drain_max_per_s > 0) {
    std::fprintf(table,
                 "\ndrain maximum %.0f results/s; posted at %.2f of it: %.0f/s due, %.0f/s sent\n",
                 m.drain_max_per_s, o.load_fraction, m.rate_per_s, m.sent_per_s);
  } else {
    std::fprintf(table, "\nposted at --rate: %.0f/s due, %.0f/s sent\n", m.rate_per_s,
                 m.sent_per_s);
  }
  std::fprintf(table, "%llu results, %u shards, batch %zu, %d connections%s\n\n",
               static_cast<unsigned long long>(o.results), o.shards, o.batch, o.clients,
               o.subscriber_quick_ack ? ", the subscriber acknowledging at once" : "");
  PrintSpreads(table, m, d);
  PrintProfile(table, m, d);
}

// The headline figures, the profile's, and a row a distribution.
Report ReportOf(const LatencyOptions& o, const Measured& m, const Derived& d) {
  const Profile& p = m.profile;
  Report report("latency");
  for (const auto& [name, value] : std::initializer_list<std::pair<const char*, double>>{
           {"results", static_cast<double>(o.results)},
           {"rate_per_s", m.rate_per_s},
           {"sent_per_s", m.sent_per_s},
           {"shards", static_cast<double>(o.shards)},
           {"batch", static_cast<double>(o.batch)},
           {"clients", static_cast<double>(o.clients)},
           {"lobby_coalesce_ms", d.coalesce_ms},
           {"subscriber_quick_ack", o.subscriber_quick_ack ? 1.0 : 0.0},
           {"p50_ms", m.latency.p50},
           {"p99_ms", m.latency.p99},
           {"p999_ms", m.latency.p999},
           {"floor_ms", d.floor_ms},
           {"floor_append_p50_ms", m.append.p50},
           {"floor_settle_p50_ms", m.settle.p50},
           {"floor_http_p50_ms", m.http.p50},
           {"p99_over_floor", d.p99_over_floor},
           {"node_sync_p50_ms", p.sync_p50_ms},
           {"node_sync_p99_ms", p.sync_p99_ms},
           {"delivery_attempt_p50_ms", p.attempt_p50_ms},
           {"delivery_attempt_p99_ms", p.attempt_p99_ms},
           {"delivery_records_per_request", p.records_per_request},
           {"lobby_rooms_per_transaction", p.rooms_per_transaction},
           {"cpu_host_cores", m.cpu.host},
           {"cpu_load_cores", m.cpu.bench},
           {"cpu_node_cores", m.cpu.node},
           {"cpu_lobby_cores", m.cpu.lobby},
           {"cpu_postgres_cores", m.cpu.postgres},
           {"cpu_rest_cores", m.cpu.rest},
           {"postgres_cpu_ms_per_result", d.pg_ms},
           {"lobby_cpu_ms_per_result", d.lobby_ms}}) {
    report.Field(name, value);
  }
  if (m.drain_max_per_s > 0) {
    report.Field("load_fraction", o.load_fraction);
    report.Field("drain_max_per_s", m.drain_max_per_s);
    report.Field("drain_postgres_cpu_ms_per_result", d.drain_pg_ms);
    report.Field("drain_lobby_cpu_ms_per_result", d.drain_lobby_ms);
  }
  if (p.settle_requests > 0) {
    report.Field("lobby_settle_p50_ms", p.settle_p50_ms);
    report.Field("lobby_settle_p99_ms", p.settle_p99_ms);
  }
  for (const auto& [part, s] : {std::pair<const char*, const Spread&>{"latency", m.latency},
                                {"to_stored", m.to_stored},
                                {"stored_to_write", m.stored_to_write},
                                {"write_to_event", m.write_to_event},
                                {"write_to_commit", m.write_to_commit},
                                {"commit_to_sequenced", m.commit_to_sequenced},
                                {"sequenced_to_event", m.sequenced_to_event},
                                {"send_lag", m.send_lag},
                                {"floor_append", m.append},
                                {"floor_settle", m.settle},
                                {"floor_http", m.http}}) {
    if (s.samples == 0) continue;  // commit times the server does not track
    report.Row({{"part", part}}, {{"p50_ms", s.p50},
                                  {"p99_ms", s.p99},
                                  {"p999_ms", s.p999},
                                  {"samples", static_cast<double>(s.samples)}});
  }
  return report;
}

int Summarize(const LatencyOptions& o, const Measured& m) {
  const Derived d = DerivedOf(o, m);
  PrintTable(o.output.json ? stderr : stdout, o, m, d);
  return ReportOf(o, m, d).Emit(o.output);
}

}  // namespace

int RunLatency(const LatencyOptions& o) {
  const std::unique_ptr<ScratchDatabase> database = MigratedScratchDatabase(o.db, "latency");
  if (!database) return 1;
  const std::string root = TempRoot();
  const Result<Measured> measured = Measure(o, database->conninfo(), root);
  if (!measured.ok()) {
    // The processes' logs stay, for the reason.
    std::fprintf(stderr, "verdict-bench latency: %s (files in %s)\n",
                 measured.status().ToString().c_str(), root.c_str());
    return 1;
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  return Summarize(o, *measured);
}

}  // namespace verdict::bench
