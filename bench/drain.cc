// `verdict-bench drain`: how fast a backlog empties once the lobby is back, side by side in
// one run against one PostgreSQL:
//   verdict   the outbox is filled with N results for allocated rooms while no deliverer
//             runs (the lobby is unreachable), then the deliverers start and the time until
//             the outbox is empty gives the drain rate C, for each shard count;
//   serial    the design verdict replaces: one file per result, one deliverer sending one
//             request at a time over a keep-alive connection, deleting each file after a 2xx;
//   ceiling   pgbench running the lobby's own settlement transaction (verdict_settle_prepare
//             and verdict_settle_write; bench/pgbench_settle.h) against the same database, at a
//             fixed concurrency: what PostgreSQL itself can commit, one room per call (the
//             single-room ceiling) and the largest batch per call (the batch ceiling);
//   reference pgbench running the single-room settlement the lobby ran before batched
//             settlement (bench/reference_settle.sql, one room per transaction): the old
//             design's ceiling, which batching is measured against.
// Each verdict run is repeated for every `--batch` size (records per request); at batch 1 it is
// also run against a second lobby that does not coalesce, to measure group commit alone.
// The lobby runs in this process (verdict::lobby on a free port), like a lobby next to the
// database.
#include "bench/drain.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <thread>
#include <variant>

#include "bench/backlog.h"
#include "bench/latency_proxy.h"
#include "bench/metrics_page.h"
#include "bench/pgbench_settle.h"
#include "common/host_port.h"
#include "delivery/deliverer.h"
#include "delivery/http_client.h"
#include "lobby/event_hub.h"
#include "lobby/http_server.h"
#include "lobby/schema.h"
#include "lobby/settlement_service.h"
#include "lobby/settlement_store.h"
#include "proto/wire.h"
#include "storage/outbox.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr const char* kNode = kBacklogNode;
constexpr const char* kToken = kBacklogToken;
constexpr uint64_t kRunSpan = 10'000'000;  // room ids per run: run k uses k * span + 1 …
// How long the serial deliverer waits before sending a result again after a failure.
constexpr std::chrono::milliseconds kSerialRetryPause{100};

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Row {
  std::string mode;
  uint32_t shards = 0;
  size_t batch = 1;  // records per request (verdict), rooms per call (pgbench)
  double per_s = 0;
  double p99_ms = 0;
  double empty_after_s = 0;      // time until the outbox was empty
  double predicted_empty_s = 0;  // N / (C - R), for runs that kept producing
  double coalesce_ms = 0;        // the lobby's group-commit wait
};

// How a drain's backlog is made.
struct BacklogKind {
  BacklogShape shape;        // its rooms
  bool allocate = true;      // allocate its rooms first (in SQL, by this build's schema)
  bool integer_ids = false;  // players as integer ids (legacy_player_id), as a lobby from before
                             // string ids reads them; a lobby of this build reads the same players
};

// The result for room base + slot, as BacklogKind says.
v1::BattleResult BacklogResult(uint64_t base, uint64_t slot, const BacklogKind& kind) {
  v1::BattleResult r = ResultFor(base, slot, kind.shape);
  if (kind.integer_ids) {
    for (v1::PlayerResult& p : *r.mutable_players()) {
      p.set_legacy_player_id(std::stoull(p.player_id()));
      p.clear_player_id();
    }
  }
  return r;
}

// Fills an outbox with `n` results while nothing delivers, then times the deliverers until
// the outbox is empty. With `produce_rate` > 0 new results keep arriving at that rate while
// it drains (up to n more, pre-allocated), as on a host whose battles go on.
Row RunVerdict(const std::string& conninfo, const std::string& dir, uint32_t shards, size_t batch,
               uint64_t base, uint64_t n, const std::string& lobby_url, double produce_rate = 0,
               const BacklogKind& kind = {}) {
  const char* mode = produce_rate > 0 ? "verdict_producing" : "verdict";
  std::fprintf(stderr, "  verdict, %u shard%s, batch %zu%s: %sfilling %llu results\n", shards,
               shards == 1 ? "" : "s", batch, produce_rate > 0 ? ", producing meanwhile" : "",
               kind.allocate ? "allocating and " : "", static_cast<unsigned long long>(n));
  const uint64_t extra = produce_rate > 0 ? n : 0;
  if (kind.allocate) AllocateRooms(conninfo, base, n + extra, kind.shape);
  auto outbox = storage::OpenOutbox(dir, {.shard_count = shards});
  if (!outbox.ok()) {
    std::fprintf(stderr, "outbox: %s\n", outbox.status().ToString().c_str());
    return {mode, shards, batch};
  }
  for (uint64_t first = 1; first <= n; first += 1000) {
    std::vector<v1::BattleResult> results;
    for (uint64_t slot = first; slot <= std::min(n, first + 999); ++slot) {
      results.push_back(BacklogResult(base, slot, kind));
    }
    if (!(*outbox)->Enqueue(results).ok()) return {mode, shards, batch};
  }
  // The backlog built up during an outage: by the time the lobby is back the node has long
  // flushed it to disk. Closing the outbox flushes its memtables, so that the drain does not
  // pay for flushing what was just written.
  outbox->reset();
  outbox = storage::OpenOutbox(dir, {.shard_count = shards});
  if (!outbox.ok()) {
    std::fprintf(stderr, "outbox: %s\n", outbox.status().ToString().c_str());
    return {mode, shards, batch};
  }
  metrics::Registry registry;
  delivery::DelivererOptions options;
  options.lobby_urls = {lobby_url};
  options.token = kToken;
  options.batch = batch;
  delivery::Deliverer deliverer(**outbox, options, &registry);
  const auto start = SteadyClock::now();
  if (!deliverer.Start().ok()) return {mode, shards, batch};
  std::atomic<bool> drained{false};
  std::atomic<uint64_t> produced{0};
  std::thread producer([&] {
    if (produce_rate <= 0) return;
    while (!drained && produced < extra) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const auto due = static_cast<uint64_t>(Seconds(SteadyClock::now() - start) * produce_rate);
      std::vector<v1::BattleResult> results;
      uint64_t next = produced;
      while (next < std::min(due, extra)) results.push_back(BacklogResult(base, n + ++next, kind));
      // Counted once stored: the drain waits for every result produced to be resolved.
      if (!results.empty() && (*outbox)->Enqueue(results).ok()) {
        produced = next;
        deliverer.Wake();
      }
    }
  });
  auto last_print = start;
  // Waits on the deliverers' own count of records resolved: a counter read, where the outbox's
  // Stats() would seek every shard's head past the tombstones of the drain, every 10 ms (a tenth
  // of this process's CPU).
  for (;;) {
    const uint64_t resolved = deliverer.resolved();
    const uint64_t total = n + produced.load();
    if (resolved >= total) break;
    const uint64_t left = total - resolved;
    if (SteadyClock::now() - last_print > std::chrono::seconds(2)) {
      last_print = SteadyClock::now();
      std::fprintf(stderr, "    %llu left after %.0f s\n", static_cast<unsigned long long>(left),
                   Seconds(last_print - start));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double elapsed = Seconds(SteadyClock::now() - start);
  drained = true;
  producer.join();
  // A result the producer enqueued as the outbox emptied is delivered too, before the deliverers
  // stop: every result produced is settled (or its room would stay allocated, its players busy).
  while ((*outbox)->Stats()->records > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  deliverer.Stop();
  const uint64_t settled = n + produced;
  // The rooms allocated for results the run never produced would hold their players, whom the
  // next run seats again (backlog.h): released, as a host's lost rooms are.
  if (kind.allocate && settled < n + extra)
    ReleaseRooms(conninfo, base + settled + 1, base + n + extra);
  const uint64_t receipts = ReceiptsBetween(conninfo, base, n + extra);
  if (receipts < settled) {
    std::fprintf(stderr, "    warning: %llu receipts for %llu results\n",
                 static_cast<unsigned long long>(receipts),
                 static_cast<unsigned long long>(settled));
  }
  Row row{mode, shards, batch, settled / elapsed,
          HistogramQuantileMs("", registry.RenderText(), "verdict_node_delivery_attempt_seconds",
                              0.99)};
  row.empty_after_s = elapsed;
  return row;
}

// One file per result, one request at a time over one keep-alive connection (the node's own HTTP
// client): the design verdict replaces.
Row RunSerial(const std::string& conninfo, const std::string& dir, uint64_t base, uint64_t n,
              uint16_t port) {
  std::fprintf(stderr, "  serial file-per-result deliverer: %llu results\n",
               static_cast<unsigned long long>(n));
  AllocateRooms(conninfo, base, n);
  std::filesystem::create_directories(dir);
  for (uint64_t slot = 1; slot <= n; ++slot) {
    char name[32];
    std::snprintf(name, sizeof(name), "/%012llu.pb", static_cast<unsigned long long>(slot));
    std::ofstream(dir + name, std::ios::binary) << wire::DeterministicBytes(ResultFor(base, slot));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  delivery::HttpConnectionOptions options;
  options.user_agent = "verdict-bench";
  delivery::BlockingHttpClient client(options);
  const HttpUrl lobby{"127.0.0.1", port, false};
  std::vector<double> latencies;
  const auto start = SteadyClock::now();
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (;;) {
      delivery::HttpRequest request;
      request.target = "/v1/settlements";
      request.bearer_token = kToken;
      request.content_type = wire::kProtobufType;
      request.body = body;
      const auto sent = SteadyClock::now();
      const delivery::HttpOutcome outcome = client.Post(lobby, std::move(request));
      if (const auto* res = std::get_if<delivery::HttpResponse>(&outcome)) {
        latencies.push_back(Seconds(SteadyClock::now() - sent) * 1000);
        if (res->status / 100 == 2) break;
        // A final refusal (a room AllocateRooms could not allocate) is given up, as the node
        // dead-letters it; retried, the run would never end.
        if (res->status / 100 == 4 && res->status != 429) break;
      }
      std::this_thread::sleep_for(kSerialRetryPause);
    }
    std::filesystem::remove(file);
    ::fsync(dir_fd);
  }
  const double elapsed = Seconds(SteadyClock::now() - start);
  ::close(dir_fd);
  std::sort(latencies.begin(), latencies.end());
  return {"serial", 1, 1, n / elapsed,
          latencies.empty() ? 0 : latencies[latencies.size() * 99 / 100]};
}

// A pgbench ceiling (bench/pgbench_settle.h) as a row of the drain's table.
Row PgbenchRow(const std::string& conninfo, const std::string& dir, uint64_t base, uint64_t n,
               uint32_t clients, size_t batch,
               PgbenchStatement statement = PgbenchStatement::kBatch) {
  const bool reference = statement == PgbenchStatement::kReference;
  Row row{reference ? "pgbench_reference" : "pgbench", clients, reference ? 1 : batch};
  row.per_s = RunPgbench(conninfo, dir, base, n, clients, batch, statement);
  if (row.per_s > 0) row.p99_ms = NAN;  // pgbench reports an average, not a p99
  return row;
}

// What the drain chart draws: one line per batch size, the baselines as horizontal levels.
struct Chart {
  std::map<size_t, std::vector<const Row*>> lines;     // batch -> the plain drains, by shard count
  std::vector<uint32_t> shard_counts;                  // in the order measured
  std::vector<std::pair<double, std::string>> levels;  // horizontal lines
  double top = 1;                                      // the largest rate
};

Chart ChartOf(const std::vector<Row>& rows) {
  Chart c;
  for (const Row& r : rows) {
    if (r.mode == "verdict") {
      c.lines[r.batch].push_back(&r);
      if (std::find(c.shard_counts.begin(), c.shard_counts.end(), r.shards) ==
          c.shard_counts.end()) {
        c.shard_counts.push_back(r.shards);
      }
    }
    if (r.mode == "serial") c.levels.emplace_back(r.per_s, "serial file-per-result");
    if (r.mode == "pgbench_reference") {
      c.levels.emplace_back(r.per_s, "pgbench, the single-room design");
    }
    if (r.mode == "pgbench") {
      c.levels.emplace_back(r.per_s, "pgbench, " + std::to_string(r.batch) + " room" +
                                         (r.batch == 1 ? "" : "s") + " per call");
    }
    c.top = std::max(c.top, r.per_s);
  }
  return c;
}

// Drain rate against shard count, one line per batch size, with the serial design and the
// PostgreSQL ceilings as horizontal lines; shard counts are spaced evenly (they are usually
// powers of a base).
bool WriteSvg(const std::string& path, const std::vector<Row>& rows, double rtt_ms) {
  const auto [lines, shard_counts, levels, largest] = ChartOf(rows);
  const double top = largest * 1.15;
  constexpr double kW = 640, kH = 400, kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
  const auto x = [&](uint32_t shards) {
    const size_t i =
        std::find(shard_counts.begin(), shard_counts.end(), shards) - shard_counts.begin();
    return shard_counts.size() < 2 ? kLeft + (kW - kLeft - kRight) / 2
                                   : kLeft + i * (kW - kLeft - kRight) / (shard_counts.size() - 1);
  };
  const auto y = [&](double v) { return kH - kBottom - v / top * (kH - kTop - kBottom); };
  std::ofstream svg(path);
  if (!svg) return false;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">"
      << "Backlog drain rate by shard count and batch (added round trip " << rtt_ms
      << " ms)</text>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << y(0) << "\" x2=\"" << kW - kRight << "\" y2=\""
      << y(0) << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << y(0) << "\" x2=\"" << kLeft << "\" y2=\"" << kTop
      << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << kW / 2 << "\" y=\"" << kH - 12
      << "\" text-anchor=\"middle\">outbox shards</text>\n"
      << "<text x=\"16\" y=\"" << kH / 2 << "\" transform=\"rotate(-90 16 " << kH / 2
      << ")\" text-anchor=\"middle\">results per second</text>\n";
  for (int t = 0; t <= 4; ++t) {
    const double v = top * t / 5;
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << y(v) + 4 << "\" text-anchor=\"end\">"
        << static_cast<long>(v) << "</text>\n";
  }
  for (uint32_t shards : shard_counts) {
    svg << "<text x=\"" << x(shards) << "\" y=\"" << y(0) + 16 << "\" text-anchor=\"middle\">"
        << shards << "</text>\n";
  }
  for (const auto& [v, label] : levels) {
    if (v <= 0) continue;
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << y(v) << "\" x2=\"" << kW - kRight << "\" y2=\""
        << y(v) << "\" stroke=\"#909090\" stroke-dasharray=\"6 4\"/>\n"
        << "<text x=\"" << kW - kRight << "\" y=\"" << y(v) - 5
        << "\" text-anchor=\"end\" fill=\"#606060\">" << label << " " << static_cast<long>(v)
        << "/s</text>\n";
  }
  static constexpr const char* kColors[] = {"#2060c0", "#c06020", "#20a040", "#a020a0", "#a0a020"};
  size_t line = 0;
  for (const auto& [batch, points] : lines) {
    const char* color = kColors[line % std::size(kColors)];
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (const Row* r : points) svg << x(r->shards) << "," << y(r->per_s) << " ";
    svg << "\"/>\n";
    for (const Row* r : points) {
      svg << "<circle cx=\"" << x(r->shards) << "\" cy=\"" << y(r->per_s) << "\" r=\"4\" fill=\""
          << color << "\"/>\n"
          << "<text x=\"" << x(r->shards) + 6 << "\" y=\"" << y(r->per_s) - 8 << "\" fill=\""
          << color << "\">" << static_cast<long>(r->per_s) << "</text>\n";
    }
    svg << "<text x=\"" << kLeft + 10 << "\" y=\"" << kTop + 14 * (line + 1) << "\" fill=\""
        << color << "\">batch " << batch << "</text>\n";
    ++line;
  }
  svg << "</svg>\n";
  return static_cast<bool>(svg);
}

// A lobby in this process and the URL a node reaches it at: through a latency proxy when a round
// trip is asked for.
struct LobbyEndpoint {
  LobbyEndpoint(const std::string& conninfo, int pool, double coalesce, double rtt_ms)
      : lobby(conninfo, pool, coalesce), coalesce_ms(coalesce) {
    port = lobby.port();
    if (port != 0 && rtt_ms > 0) {
      proxy = std::make_unique<LatencyProxy>(
          port, std::chrono::microseconds(static_cast<int64_t>(rtt_ms * 1000)));
      port = proxy->Start();
    }
    url = "http://127.0.0.1:" + std::to_string(port);
  }
  InProcessLobby lobby;
  double coalesce_ms;
  std::unique_ptr<LatencyProxy> proxy;
  uint16_t port = 0;
  std::string url;
};

// The number of a bench invocation's first run: each run settles its own range of room ids
// (run * kRunSpan + 1 …), so one database serves them all, and invocations one after another
// start far apart.
uint64_t FirstRun() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() %
         100'000 * 10;
}

// Every drain the options ask for, then the batch ceiling, the serial design and the other pgbench
// ceilings; one row each.
std::vector<Row> RunAll(const DrainOptions& o, const std::string& conninfo, const std::string& root,
                        const LobbyEndpoint& lobby, const LobbyEndpoint* uncoalesced) {
  uint64_t run = FirstRun();
  std::vector<Row> rows;
  const auto drain = [&](const std::string& dir, uint32_t shards, size_t batch,
                         const LobbyEndpoint& to, double produce_rate = 0) {
    Row row =
        RunVerdict(conninfo, dir, shards, batch, ++run * kRunSpan, o.backlog, to.url, produce_rate);
    row.coalesce_ms = to.coalesce_ms;
    return row;
  };
  for (size_t batch : o.batches) {
    for (uint32_t shards : o.shards) {
      const std::string dir =
          root + "/verdict-" + std::to_string(batch) + "-" + std::to_string(shards);
      rows.push_back(drain(dir, shards, batch, lobby));
      const double c = rows.back().per_s;
      if (batch == 1 && uncoalesced) {
        std::fprintf(stderr, "  ... against a lobby that does not coalesce\n");
        rows.push_back(drain(dir + "-uncoalesced", shards, batch, *uncoalesced));
        rows.back().mode = "verdict_uncoalesced";
      }
      if (o.produce_rate > 0) {
        // Same shard count while new results keep arriving: the measured time to empty against
        // the N / (C - R) predicted from the drain rate C just measured.
        rows.push_back(drain(dir + "-producing", shards, batch, lobby, o.produce_rate));
        rows.back().predicted_empty_s =
            c > o.produce_rate ? o.backlog / (c - o.produce_rate) : INFINITY;
      }
    }
  }
  // The batch ceiling right after the drains it is compared with, so that the machine (and the
  // database, grown by the same runs) is as near as one run can make it to theirs.
  const size_t largest = *std::max_element(o.batches.begin(), o.batches.end());
  if (largest > 1) {
    rows.push_back(PgbenchRow(conninfo, root + "/pgbench-batch", ++run * kRunSpan, o.backlog,
                              o.pg_concurrency, largest));
    // More rounds of the pair, alternating: the headline ratio is of the medians.
    for (int round = 2; round <= o.ceiling_rounds; ++round) {
      std::fprintf(stderr, "  round %d of %d of the headline drain and the batch ceiling\n", round,
                   o.ceiling_rounds);
      const std::string suffix = "-round-" + std::to_string(round);
      rows.push_back(
          drain(root + "/verdict-headline" + suffix, HeadlineShards(o), HeadlineBatch(o), lobby));
      rows.push_back(PgbenchRow(conninfo, root + "/pgbench-batch" + suffix, ++run * kRunSpan,
                                o.backlog, o.pg_concurrency, largest));
    }
  }
  rows.push_back(
      RunSerial(conninfo, root + "/serial", ++run * kRunSpan, o.serial_backlog, lobby.port));
  rows.back().coalesce_ms = lobby.coalesce_ms;
  rows.push_back(
      PgbenchRow(conninfo, root + "/pgbench", ++run * kRunSpan, o.backlog, o.pg_concurrency, 1));
  rows.push_back(PgbenchRow(conninfo, root + "/pgbench-reference", ++run * kRunSpan, o.backlog,
                            o.pg_concurrency, 1, PgbenchStatement::kReference));
  return rows;
}

// A drain of `--modes`: its mode, and what it measured.
struct ModeRow {
  std::string spec;  // as given, "20x3:openskill"
  BacklogShape shape;
  Row row;
};

// "TxS:SYSTEM" as a shape in a mode named after it ("bench-openskill-20x3"), and the mode's
// declaration; nullopt if it is not of that form.
std::optional<std::pair<BacklogShape, v1::Mode>> ParseModeSpec(const std::string& spec) {
  unsigned teams = 0, size = 0;
  char system[32] = {};
  int used = 0;
  if (std::sscanf(spec.c_str(), "%ux%u:%31[a-z0-9_]%n", &teams, &size, system, &used) != 3 ||
      used != static_cast<int>(spec.size()) || teams < 2 || size < 1) {
    return std::nullopt;
  }
  BacklogShape shape{.mode = "bench-" + std::string(system) + "-" + std::to_string(teams) + "x" +
                             std::to_string(size),
                     .teams = teams,
                     .size = size};
  v1::Mode mode;
  mode.set_mode(shape.mode);
  mode.mutable_rating()->set_system(system);
  return std::make_pair(shape, mode);
}

// A drain of each mode of `--modes` at the headline shards and the largest batch.
std::vector<ModeRow> RunModes(const DrainOptions& o, const std::string& conninfo,
                              const std::string& root, InProcessLobby& lobby,
                              const std::string& url, uint32_t shards, size_t batch) {
  uint64_t run = FirstRun();
  std::vector<ModeRow> rows;
  for (const std::string& spec : o.modes) {
    const auto parsed = ParseModeSpec(spec);
    if (!parsed) {
      std::fprintf(stderr, "--modes: %s is not TEAMSxSIZE:SYSTEM (20x3:openskill)\n", spec.c_str());
      return {};
    }
    if (Status declared = lobby.Declare(parsed->second); !declared.ok()) {
      std::fprintf(stderr, "--modes %s: %s\n", spec.c_str(), declared.ToString().c_str());
      return {};
    }
    std::fprintf(stderr, "  mode %s (%u teams of %u, %s)\n", parsed->first.mode.c_str(),
                 parsed->first.teams, parsed->first.size, parsed->second.rating().system().c_str());
    const Row row = RunVerdict(conninfo, root + "/" + parsed->first.mode, shards, batch,
                               ++run * kRunSpan, o.backlog, url, 0, {.shape = parsed->first});
    if (row.per_s <= 0) return {};
    rows.push_back({spec, parsed->first, row});
  }
  return rows;
}

// The table of `--modes`: rooms/s and player results/s of each, and each against the first.
int SummarizeModes(const DrainOptions& o, const std::vector<ModeRow>& rows) {
  if (rows.size() != o.modes.size()) return 1;
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-16s %6s %8s %10s %16s %8s %12s %12s\n", "mode", "batch", "shards",
               "rooms/s", "player results/s", "p99 ms", "rooms vs 1st", "players vs 1st");
  Report report("drain_modes");
  const double first_rooms = rows.front().row.per_s;
  const double first_players = first_rooms * rows.front().shape.seats();
  for (const ModeRow& m : rows) {
    const double players = m.row.per_s * m.shape.seats();
    std::fprintf(table, "%-16s %6zu %8u %10.0f %16.0f %8.1f %12.2f %12.2f\n", m.spec.c_str(),
                 m.row.batch, m.row.shards, m.row.per_s, players, m.row.p99_ms,
                 m.row.per_s / first_rooms, players / first_players);
    report.Row({{"mode", m.shape.mode}, {"spec", m.spec}},
               {{"shards", double(m.row.shards)},
                {"batch", double(m.row.batch)},
                {"seats", double(m.shape.seats())},
                {"rooms_per_s", m.row.per_s},
                {"player_results_per_s", players},
                {"p99_ms", m.row.p99_ms},
                {"rooms_vs_first", m.row.per_s / first_rooms},
                {"players_vs_first", players / first_players}});
  }
  report.Field("backlog", static_cast<double>(o.backlog));
  return report.Emit(o.output);
}

// One line of the table: the design, its batch and shards, the rate, the p99, the time to empty.
void PrintRow(FILE* table, const Row& r) {
  const char* label = r.mode == "verdict"               ? "verdict deliverers"
                      : r.mode == "verdict_uncoalesced" ? "  ... lobby not coalescing"
                      : r.mode == "verdict_producing"   ? "  ... while producing"
                      : r.mode == "serial"              ? "serial, file per result"
                      : r.mode == "pgbench_reference"   ? "pgbench single-room design"
                                                        : "pgbench settlement transaction";
  std::string empty;
  if (r.empty_after_s > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f s", r.empty_after_s);
    empty = buf;
    if (r.mode == "verdict_producing") {
      std::snprintf(buf, sizeof(buf), " (N/(C-R) %.1f s)", r.predicted_empty_s);
      empty += buf;
    }
  }
  char p99[32] = "-";
  if (!std::isnan(r.p99_ms)) std::snprintf(p99, sizeof(p99), "%.1f", r.p99_ms);
  std::fprintf(table, "%-30s %6zu %8u %12.0f %10s %12s\n", label, r.batch, r.shards, r.per_s, p99,
               empty.c_str());
}

// The median of `v` (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The table (stdout, or stderr under --json), the headline ratios, the report and the chart.
int Summarize(const DrainOptions& o, const std::vector<Row>& rows) {
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-30s %6s %8s %12s %10s %12s\n", "design", "batch", "shards", "results/s",
               "p99 ms", "empty after");
  // The headline compares 16 shards (or the most measured) at the deliverer's default batch (or
  // the largest measured).
  const uint32_t headline_shards = HeadlineShards(o);
  const size_t headline_batch = HeadlineBatch(o);
  double serial = 0, pg = 0, pg_reference = 0, coalesced = 0, uncoalesced = 0;
  std::vector<double> pg_batches, headlines;  // one a round (--ceiling-rounds)
  Report report("drain");
  for (const Row& r : rows) {
    PrintRow(table, r);
    std::map<std::string, double> values = {{"shards", double(r.shards)},
                                            {"batch", double(r.batch)},
                                            {"per_s", r.per_s},
                                            {"p99_ms", r.p99_ms},
                                            {"coalesce_ms", r.coalesce_ms}};
    if (r.empty_after_s > 0) values["empty_after_s"] = r.empty_after_s;
    if (r.mode == "verdict_producing") values["predicted_empty_s"] = r.predicted_empty_s;
    report.Row({{"mode", r.mode}}, values);
    if (r.mode == "serial") serial = r.per_s;
    if (r.mode == "pgbench" && r.batch == 1) pg = r.per_s;
    if (r.mode == "pgbench" && r.batch > 1) pg_batches.push_back(r.per_s);
    if (r.mode == "pgbench_reference") pg_reference = r.per_s;
    if (r.shards != headline_shards) continue;
    if (r.mode == "verdict" && r.batch == headline_batch) headlines.push_back(r.per_s);
    if (r.mode == "verdict" && r.batch == 1) coalesced = r.per_s;
    if (r.mode == "verdict_uncoalesced") uncoalesced = r.per_s;
  }
  const double pg_batch = Median(pg_batches), headline = Median(headlines);
  report.Field("backlog", static_cast<double>(o.backlog));
  report.Field("pg_ceiling_per_s", pg);
  if (pg_batch > 0) report.Field("pg_batch_ceiling_per_s", pg_batch);
  report.Field("pg_reference_ceiling_per_s", pg_reference);
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  if (headlines.size() > 1) {
    std::fprintf(table, "\nthe medians of %zu rounds: verdict %.0f/s, the batch ceiling %.0f/s\n",
                 headlines.size(), headline, pg_batch);
  }
  if (headline > 0) {
    std::fprintf(table,
                 "\nat %u shards, batch %zu, verdict drains at %.2fx the single-room design's "
                 "PostgreSQL ceiling, %.2fx the batch statement's with one room, %.2fx its batch "
                 "ceiling and %.1fx the serial design\n",
                 headline_shards, headline_batch, ratio(headline, pg_reference),
                 ratio(headline, pg), ratio(headline, pg_batch), ratio(headline, serial));
  }
  if (coalesced > 0 && uncoalesced > 0) {
    std::fprintf(table, "at %u shards, batch 1, the lobby's group commit gives %.2fx\n",
                 headline_shards, ratio(coalesced, uncoalesced));
    report.Field("coalescing_gain", ratio(coalesced, uncoalesced));
  }
  if (!o.svg.empty()) {
    if (!WriteSvg(o.svg, rows, o.rtt_ms)) {
      std::fprintf(stderr, "cannot write %s\n", o.svg.c_str());
      return 1;
    }
    std::fprintf(stderr, "chart written to %s\n", o.svg.c_str());
  }
  return report.Emit(o.output);
}

}  // namespace

struct DrainLobby::Impl {
  Impl(const std::string& conninfo, int pool)
      : endpoint(conninfo, pool, lobby::SchedulerOptions{}.coalesce_wait.count() / 1000.0, 0) {}
  LobbyEndpoint endpoint;
};

DrainLobby::DrainLobby(const std::string& conninfo, int pool)
    : impl_(std::make_unique<Impl>(conninfo, pool)), conninfo_(conninfo) {}

DrainLobby::~DrainLobby() = default;

uint16_t DrainLobby::port() const { return impl_->endpoint.port; }

double DrainLobby::Drain(const std::string& dir, uint32_t shards, size_t batch, uint64_t base,
                         uint64_t n) const {
  return RunVerdict(conninfo_, dir, shards, batch, base, n, impl_->endpoint.url).per_s;
}

double DrainAllocated(const std::string& conninfo, const std::string& dir, uint32_t shards,
                      size_t batch, uint64_t base, uint64_t n, const std::string& lobby_url) {
  return RunVerdict(conninfo, dir, shards, batch, base, n, lobby_url, 0,
                    {.shape = {}, .allocate = false, .integer_ids = true})
      .per_s;
}

size_t HeadlineBatch(const DrainOptions& o) {
  const size_t default_batch = delivery::DelivererOptions{}.batch;
  return std::find(o.batches.begin(), o.batches.end(), default_batch) != o.batches.end()
             ? default_batch
             : *std::max_element(o.batches.begin(), o.batches.end());
}

uint32_t HeadlineShards(const DrainOptions& o) {
  return std::find(o.shards.begin(), o.shards.end(), 16u) != o.shards.end()
             ? 16
             : *std::max_element(o.shards.begin(), o.shards.end());
}

int RunDrain(const DrainOptions& o) {
  const std::string& conninfo = o.db;
  try {
    pqxx::connection check(conninfo);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot reach PostgreSQL (%s): %s\n",
                 conninfo.empty() ? "PG* environment" : conninfo.c_str(), e.what());
    return 1;
  }
  auto migrated = lobby::Migrate({.conninfo = conninfo});
  if (!migrated.ok()) {
    std::fprintf(stderr, "%s\n", migrated.status().ToString().c_str());
    return 1;
  }
  // The lobby as deployed by default (8 DB workers): more concurrent transactions than that
  // only queue up on a 2-core machine. A second one without group commit measures it at batch 1.
  LobbyEndpoint lobby(conninfo, o.lobby_db_pool, o.lobby_coalesce_ms, o.rtt_ms);
  if (lobby.port == 0) return 1;
  const std::string root = TempRoot();
  if (!o.modes.empty()) {
    const uint32_t shards = HeadlineShards(o);
    const size_t batch = *std::max_element(o.batches.begin(), o.batches.end());
    std::fprintf(stderr, "drain by mode: backlog %llu rooms each, %u shards, batch %zu\n",
                 static_cast<unsigned long long>(o.backlog), shards, batch);
    const std::vector<ModeRow> rows =
        RunModes(o, conninfo, root, lobby.lobby, lobby.url, shards, batch);
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
    return SummarizeModes(o, rows);
  }
  std::unique_ptr<LobbyEndpoint> uncoalesced;
  if (o.lobby_coalesce_ms > 0 &&
      std::find(o.batches.begin(), o.batches.end(), size_t{1}) != o.batches.end()) {
    uncoalesced = std::make_unique<LobbyEndpoint>(conninfo, o.lobby_db_pool, 0, o.rtt_ms);
    if (uncoalesced->port == 0) return 1;
  }
  std::fprintf(stderr, "drain: backlog %llu, shards", static_cast<unsigned long long>(o.backlog));
  for (uint32_t s : o.shards) std::fprintf(stderr, " %u", s);
  std::fprintf(stderr, ", batch");
  for (size_t b : o.batches) std::fprintf(stderr, " %zu", b);
  std::fprintf(stderr, "; lobby at %s (%.1f ms added round trip); files in %s\n", lobby.url.c_str(),
               o.rtt_ms, root.c_str());
  const std::vector<Row> rows = RunAll(o, conninfo, root, lobby, uncoalesced.get());
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  return Summarize(o, rows);
}

}  // namespace verdict::bench
