// `verdict-bench retention`: the lobby's data over time (docs/operating.md, "Retention"), in three
// parts, each on a database of its own:
//   growth   rooms settled at a steady rate (the settlement statement itself, a batch every
//            100 ms, each batch's events then numbered into the feed as the lobby's hub does)
//            while retention passes run every second with short windows and small partitions;
//            the rows and bytes of each table are sampled every second. The events must stay
//            within their window plus one partition: at every sample, at most the events that
//            arrived in the last window and the longest time between passes, plus a partition.
//   drain    a backlog drained by the deliverers into a lobby in this process (as `drain` does),
//            alternating: without retention, then with retention passes running every half
//            second (windows of two seconds, so that they drop partitions and expire receipts
//            under the drain; one pass first catches up with what the drain before left), three
//            rounds, and once more without. Each drain with retention must keep 0.9 of the mean
//            of the two without around it (the median of three).
//   drop     a partition of 100,000 events and one of 1,000,000, each dropped by the retention
//            pass's own statements once past its window, timed as the detach (the family's
//            tables locked, what settlements wait for) and the drop of the detached table (its
//            files removed, in what the file system takes): the detaches must take about as long
//            (within 2x).
#include "bench/retention.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

#include "bench/drain.h"
#include "bench/pgbench_settle.h"
#include "bench/sample.h"
#include "lobby/retention.h"
#include "lobby/schema.h"
#include "lobby/settlement_store.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The tables the growth part samples.
constexpr const char* kTables[] = {"settlement_events",   "matches",
                                   "match_players",       "replays",
                                   "settlement_receipts", "settled_rooms"};

// Allocates rooms $1 … $2 of the growth part. Room r seats players (r % 1000) * 10 + 1 … + 10,
// so that the rooms of one batch (fewer than 1,000) share no player.
constexpr const char* kAllocate =
    "SELECT count(*) FROM generate_series($1::bigint, $2::bigint) r, LATERAL verdict_allocate(r, "
    "'bench-node', 'default', ARRAY(SELECT ((r % 1000) * 10 + g)::text FROM generate_series(1, 10) "
    "g), '{1,1,1,1,1,2,2,2,2,2}')";
// Settles rooms $1 … $2 ($3 of them) with the lobby's own statements, team 1 winning: the
// prepare, then the write (BenchSettleCalls), in one transaction.
std::pair<std::string, std::string> SettleStatements() {
  const std::string from =
      "SELECT count(*) FROM (SELECT array_agg(r ORDER BY r) AS rooms "
      "FROM generate_series($1::bigint, $2::bigint) r) rr, "
      "LATERAL (SELECT array_agg(r ORDER BY r, g) AS rooms, "
      "array_agg(((r % 1000) * 10 + g)::text ORDER BY r, g) AS ids, "
      "array_agg(CASE WHEN g <= 5 THEN 1 ELSE 2 END::smallint ORDER BY r, g) AS teams, "
      "array_agg(g ORDER BY r, g) AS kills, array_agg(0 ORDER BY r, g) AS zeros, "
      "array_agg(100 * g::bigint ORDER BY r, g) AS scores, "
      "array_agg(false ORDER BY r, g) AS disconnected "
      "FROM generate_series($1::bigint, $2::bigint) r, generate_series(1, 10) g) p, "
      "LATERAL ";
  const BenchSettle calls = BenchSettleCalls("rr.rooms", "$3::int");
  return {from + calls.prepare + " s WHERE s.status = 'settle'", from + calls.write + " w"};
}

// Runs `pass` every `every` on a thread of its own until destroyed.
class Periodic {
 public:
  Periodic(std::chrono::milliseconds every, std::function<void()> pass)
      : thread_([this, every, pass = std::move(pass)] {
          std::unique_lock lock(mu_);
          while (!stop_) {
            lock.unlock();
            pass();
            lock.lock();
            cv_.wait_for(lock, every, [this] { return stop_; });
          }
        }) {}
  ~Periodic() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Retention passes with `o` on `conninfo`, counting what they did.
struct Passes {
  std::atomic<int> passes{0}, failed{0}, event_partitions{0}, history_partitions{0};
  std::atomic<int64_t> receipts{0};
  // The longest time from one pass's start to the next one's end: a partition that became
  // droppable just after a pass looked is gone by then at the latest. Written by the passes'
  // thread only.
  std::atomic<double> span_s{0};
  SteadyClock::time_point last_start{};
  void Run(const std::string& conninfo, const lobby::RetentionOptions& o) {
    const auto started = SteadyClock::now();
    auto report = lobby::RetainOnce(
        {.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)}, o);
    if (last_start != SteadyClock::time_point{}) {
      span_s = std::max(span_s.load(), Seconds(SteadyClock::now() - last_start));
    }
    last_start = started;
    ++passes;
    if (!report.ok()) {
      ++failed;
      std::fprintf(stderr, "    retention pass failed: %s\n", report.status().ToString().c_str());
      return;
    }
    for (const std::string& step : report->steps_failed) {
      ++failed;
      std::fprintf(stderr, "    retention step failed: %s\n", step.c_str());
    }
    event_partitions += report->event_partitions_dropped;
    history_partitions += report->history_partitions_dropped;
    receipts += report->receipts_expired;
  }
};

lobby::RetentionOptions Windows(int64_t partition, double events_s, double history_s,
                                double receipts_s) {
  lobby::RetentionOptions o;
  o.partitions.events_per_partition = partition;
  o.partitions.matches_per_partition = partition;
  o.events_older_than = Millis(events_s);
  o.history_older_than = Millis(history_s);
  o.receipts_older_than = Millis(receipts_s);
  return o;
}

struct Sample {
  double t_s;
  std::string table;
  int64_t rows;
  int64_t bytes;
  uint64_t settled = 0;  // rooms settled when the sample was taken (one event each)
};

struct Growth {
  std::vector<Sample> samples;
  double per_s = 0;
  // The events kept against what they may be: the events that arrived in the last window and
  // pass interval, plus one partition (the oldest, not yet wholly past the window). Checked at
  // every sample after the first window (before it nothing is old enough to drop), against the
  // arrivals measured at the samples, so that a stretch where the settler caught up above the
  // mean rate is held to what really arrived. `events_max` is the most kept at any sample, and
  // `events_bound` the bound at the sample closest to (or furthest beyond) its bound.
  int64_t events_max = 0;
  double events_bound = 0;
  int64_t events_at_worst = 0;
  double pass_span_s = 0;  // Passes::span_s
  int passes = 0, failed = 0, event_partitions = 0, history_partitions = 0;
  int64_t receipts = 0;
};

Result<Growth> RunGrowth(const RetentionBenchOptions& o) {
  ScratchDatabase database(o.db, "retention_growth");
  const std::string conninfo = database.conninfo();
  lobby::PartitionOptions partitions;
  partitions.events_per_partition = o.partition;
  partitions.matches_per_partition = o.partition;
  if (auto migrated = lobby::Migrate(
          {.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)}, partitions);
      !migrated.ok()) {
    return migrated.status();
  }
  const lobby::RetentionOptions windows =
      Windows(o.partition, o.events_window_s, o.history_window_s, o.receipts_window_s);
  Growth growth;
  std::mutex mu;
  const auto start = SteadyClock::now();
  std::atomic<uint64_t> settled{0};
  {
    Passes passes;
    Periodic retention(Millis(o.pass_s), [&] { passes.Run(conninfo, windows); });
    pqxx::connection sampler_conn(conninfo);
    Periodic sampler(std::chrono::seconds(1), [&] {
      const double t = Seconds(SteadyClock::now() - start);
      for (const char* table : kTables) {
        const pqxx::row row = pqxx::nontransaction(sampler_conn)
                                  .exec1(std::string("SELECT count(*), (SELECT coalesce(sum("
                                                     "pg_total_relation_size(relid)), 0) FROM "
                                                     "pg_partition_tree('") +
                                         table + "')) FROM " + table);
        std::lock_guard lock(mu);
        growth.samples.push_back(
            {t, table, row[0].as<int64_t>(), row[1].as<int64_t>(), settled.load()});
      }
    });
    Progress progress("settling (retention growth)", o.rooms / o.rate, settled);
    pqxx::connection conn(conninfo);
    constexpr double kTick = 0.1;  // a batch every 100 ms
    const uint64_t per_batch = std::max<uint64_t>(1, static_cast<uint64_t>(o.rate * kTick));
    for (uint64_t first = 1; first <= o.rooms; first += per_batch) {
      const uint64_t last = std::min(o.rooms, first + per_batch - 1);
      pqxx::nontransaction(conn).exec_params(kAllocate, first, last);
      {
        static const auto [prepare, write] = SettleStatements();
        pqxx::work tx(conn);
        tx.exec_params(prepare, first, last, last - first + 1);
        tx.exec_params(write, first, last, last - first + 1);
        tx.commit();
      }
      // What the lobby's event hub does after each commit: give the new events their places in
      // the feed. Retention drops only events that have one (the others were delivered to nobody).
      pqxx::nontransaction(conn).exec("SELECT verdict_sequence_events(1000000)");
      settled = last;
      // Open loop: batch k is due at k × tick, however long the earlier ones took.
      const auto due = start + Millis(static_cast<double>(last) / o.rate);
      std::this_thread::sleep_until(due);
    }
    growth.per_s = static_cast<double>(o.rooms) / Seconds(SteadyClock::now() - start);
    growth.passes = passes.passes;
    growth.failed = passes.failed;
    growth.event_partitions = passes.event_partitions;
    growth.history_partitions = passes.history_partitions;
    growth.receipts = passes.receipts;
    growth.pass_span_s = passes.span_s;
  }
  std::vector<const Sample*> events;
  for (const Sample& s : growth.samples) {
    if (s.table == std::string("settlement_events")) events.push_back(&s);
  }
  const double span = o.events_window_s + growth.pass_span_s;
  double worst = -1e18;
  for (const Sample* s : events) {
    if (s->t_s <= span) continue;
    // Arrivals since the first sample at or after t - span: the fewest that can be counted, so
    // the bound is never loosened by the sampling interval.
    uint64_t since = s->settled;
    for (const Sample* e : events) {
      if (e->t_s >= s->t_s - span) {
        since = e->settled;
        break;
      }
    }
    const double bound = static_cast<double>(s->settled - since) + static_cast<double>(o.partition);
    growth.events_max = std::max(growth.events_max, s->rows);
    if (static_cast<double>(s->rows) - bound > worst) {
      worst = static_cast<double>(s->rows) - bound;
      growth.events_bound = bound;
      growth.events_at_worst = s->rows;
    }
  }
  return growth;
}

// The drains alternate, without retention and with it, kRounds times each and once more without
// at the end, so that each drain with retention has one without on either side: on a shared
// machine two drains without retention a minute apart differ by more than retention costs, and
// only alternation puts that drift on both sides of the ratio.
constexpr int kRounds = 3;

struct Drains {
  std::vector<double> without, with;  // results/s, in the order they ran
  int passes = 0, event_partitions = 0, history_partitions = 0;
  int64_t receipts = 0;
};

Result<Drains> RunDrains(const RetentionBenchOptions& o, const std::string& root) {
  ScratchDatabase database(o.db, "retention_drain");
  const std::string conninfo = database.conninfo();
  lobby::PartitionOptions partitions;
  partitions.events_per_partition = o.partition;
  partitions.matches_per_partition = o.partition;
  if (auto migrated = lobby::Migrate(
          {.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)}, partitions);
      !migrated.ok()) {
    return migrated.status();
  }
  DrainLobby lobby(conninfo, 8);
  if (lobby.port() == 0) return UnavailableError("the in-process lobby did not start");
  Drains drains;
  const uint64_t each = std::max<uint64_t>(100, o.backlog / 2);
  uint64_t base = 0;
  const auto drain = [&](const std::string& name) {
    const double per_s = lobby.Drain(root + "/" + name, o.shards, o.batch, base, each);
    base += each;
    return per_s;
  };
  // A first drain, not counted, so that none pays for a cold cache or the lobby's first
  // connections.
  // A deployed lobby makes partitions ahead all the time (serve's maintenance), whether or not
  // retention is on; so do the drains without retention, at the passes' pace. Otherwise their rows
  // would pile into the DEFAULT partition past the partitions `migrate` made, and the drains
  // with retention would pay for moving them out besides their own retention.
  const lobby::RetentionOptions maintained = Windows(o.partition, 2, 2, 2);
  const auto without = [&](const std::string& name) {
    Periodic maintenance(std::chrono::milliseconds(500), [&] {
      (void)lobby::EnsurePartitions(
          {.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)},
          maintained.partitions, maintained.lock_timeout);
    });
    return drain(name);
  };
  std::fprintf(stderr, "  warming up\n");
  without("warm");
  const lobby::RetentionOptions windows = Windows(o.partition, 2, 2, 2);
  for (int round = 0; round < kRounds; ++round) {
    std::fprintf(stderr, "  round %d of %d: a drain without retention\n", round + 1, kRounds);
    drains.without.push_back(without("without-" + std::to_string(round)));
    std::fprintf(stderr,
                 "  round %d of %d: a drain with a retention pass every 0.5 s (2 s windows)\n",
                 round + 1, kRounds);
    // What the drains without retention left is past its windows 2 s later, and a deployment's
    // passes never let that pile up: one pass catches up first, uncounted, so that this drain
    // pays for the retention of what it settles itself, as a lobby whose passes always run does.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    Passes catch_up;
    catch_up.Run(conninfo, windows);
    Passes passes;
    Periodic retention(std::chrono::milliseconds(500), [&] { passes.Run(conninfo, windows); });
    drains.with.push_back(drain("with-" + std::to_string(round)));
    drains.passes += passes.passes;
    drains.event_partitions += passes.event_partitions;
    drains.history_partitions += passes.history_partitions;
    drains.receipts += passes.receipts;
  }
  std::fprintf(stderr, "  a last drain without retention\n");
  drains.without.push_back(without("without-last"));
  return drains;
}

// A drop's time, whole and in its two transactions: the detach (the checks, the family's locks,
// the catalog change, its commit), which is what settlements wait for, and the drop of the
// detached table, which locks only that table and whose commit removes its files, in what the
// file system takes to free them.
struct DropTime {
  double ms = 0, detach_ms = 0, files_ms = 0;
};

struct Drops {
  DropTime small, large;
};

// The time of one statement and its commit, in milliseconds, and its value.
std::pair<double, pqxx::row> TimedStep(pqxx::connection& conn, const std::string& sql) {
  const auto start = SteadyClock::now();
  pqxx::work tx(conn);
  pqxx::row row = tx.exec1(sql);
  tx.commit();
  return {Seconds(SteadyClock::now() - start) * 1000, std::move(row)};
}

// Times the retention pass's drop of the oldest events partition, which must be one of `rows`.
Result<DropTime> TimeDrop(const std::string& conninfo, uint64_t rows) {
  pqxx::connection conn(conninfo);
  pqxx::nontransaction(conn).exec("CHECKPOINT");
  const auto [detach_ms, detached] =
      TimedStep(conn, "SELECT verdict_detach_old_partitions('events', now(), 1)");
  const auto [files_ms, dropped] = TimedStep(conn, "SELECT verdict_drop_detached_partition()");
  if (detached[0].as<int>() != 1 || dropped[0].is_null()) {
    return InternalError("the partition of " + std::to_string(rows) + " events was not dropped");
  }
  return DropTime{detach_ms + files_ms, detach_ms, files_ms};
}

Result<Drops> RunDrops(const RetentionBenchOptions& o) {
  ScratchDatabase database(o.db, "retention_drop");
  const std::string conninfo = database.conninfo();
  if (auto migrated =
          lobby::Migrate({.conninfo = conninfo, .statement_timeout = std::chrono::milliseconds(0)});
      !migrated.ok())
    return migrated.status();
  pqxx::connection conn(conninfo);
  const uint64_t small_end = 1 + o.drop_small, large_end = small_end + o.drop_large;
  {
    // The partitions Migrate made give way to one of each size (and one after them, which
    // stays), then the events fill both.
    pqxx::work tx(conn);
    tx.exec(R"(
        DO $$ DECLARE p record; BEGIN
          FOR p IN SELECT * FROM verdict_partitions WHERE family = 'events' AND lower_id > 0 LOOP
            EXECUTE format('DROP TABLE %I', 'settlement_events_p' || p.lower_id);
          END LOOP;
          DELETE FROM verdict_partitions WHERE family = 'events' AND lower_id > 0;
        END $$)");
    tx.exec("SELECT verdict_create_partition('events', 1, " + std::to_string(small_end) + ")");
    tx.exec("SELECT verdict_create_partition('events', " + std::to_string(small_end) + ", " +
            std::to_string(large_end) + ")");
    tx.exec("SELECT verdict_create_partition('events', " + std::to_string(large_end) + ", " +
            std::to_string(large_end + 1) + ")");
    tx.commit();
  }
  std::atomic<uint64_t> written{0};
  {
    Progress progress("writing events (retention drop)", 0, written);
    constexpr uint64_t kChunk = 100'000;
    for (uint64_t first = 1; first < large_end; first += kChunk) {
      const uint64_t last = std::min(large_end - 1, first + kChunk - 1);
      pqxx::nontransaction(conn).exec(
          "INSERT INTO settlement_events (room_id, node_id, match_id, payload, created_at, seq) "
          "SELECT g, 'bench-node', g, jsonb_build_object('padding', repeat('x', 200)), "
          "now() - interval '1 hour', g FROM generate_series(" +
          std::to_string(first) + ", " + std::to_string(last) + ") g");
      written = last;
    }
  }
  // The empty first partition (from before the rows) goes first, untimed.
  if (auto first = TimeDrop(conninfo, 0); !first.ok()) return first.status();
  Drops drops;
  auto small = TimeDrop(conninfo, o.drop_small);
  if (!small.ok()) return small.status();
  auto large = TimeDrop(conninfo, o.drop_large);
  if (!large.ok()) return large.status();
  drops.small = *small;
  drops.large = *large;
  return drops;
}

}  // namespace

int RunRetentionBench(const RetentionBenchOptions& o) {
  FILE* table = o.output.json ? stderr : stdout;
  Report report("retention");
  std::fprintf(stderr, "retention: growth, %llu rooms at %.0f/s, partitions of %lld ids\n",
               static_cast<unsigned long long>(o.rooms), o.rate,
               static_cast<long long>(o.partition));
  Result<Growth> growth = InternalError("not run");
  try {
    growth = RunGrowth(o);
  } catch (const std::exception& e) {
    growth = UnavailableError(std::string("growth: ") + e.what());
  }
  if (!growth.ok()) {
    std::fprintf(stderr, "%s\n", growth.status().ToString().c_str());
    return 1;
  }
  std::fprintf(table, "\n%8s  %-20s %12s %12s\n", "t_s", "table", "rows", "bytes");
  for (const Sample& s : growth->samples) {
    std::fprintf(table, "%8.1f  %-20s %12lld %12lld\n", s.t_s, s.table.c_str(),
                 static_cast<long long>(s.rows), static_cast<long long>(s.bytes));
    report.Row({{"mode", "sample"}, {"table", s.table}},
               {{"t_s", s.t_s}, {"rows", double(s.rows)}, {"bytes", double(s.bytes)}});
  }
  std::fprintf(
      table,
      "growth: %.0f rooms/s; %d passes (%d failed) dropped %d event and %d history "
      "partitions and expired %lld receipts; events peaked at %lld rows; nearest its "
      "bound, %lld rows kept against %.0f (the events that arrived in the last window "
      "%.0f s + %.1f s, the longest from a pass's start to the next one's end, plus one "
      "partition of %lld): %s\n",
      growth->per_s, growth->passes, growth->failed, growth->event_partitions,
      growth->history_partitions, static_cast<long long>(growth->receipts),
      static_cast<long long>(growth->events_max), static_cast<long long>(growth->events_at_worst),
      growth->events_bound, o.events_window_s, growth->pass_span_s,
      static_cast<long long>(o.partition),
      static_cast<double>(growth->events_at_worst) <= growth->events_bound ? "within" : "BEYOND");
  report.Field("growth_rooms_per_s", growth->per_s);
  report.Field("events_rows_max", static_cast<double>(growth->events_max));
  report.Field("events_rows_at_worst", static_cast<double>(growth->events_at_worst));
  report.Field("events_rows_bound", growth->events_bound);
  report.Field("growth_passes_failed", growth->failed);

  const std::string root = TempRoot();
  std::fprintf(stderr, "retention: drain of %llu results, %u shards, batch %zu\n",
               static_cast<unsigned long long>(o.backlog), o.shards, o.batch);
  Result<Drains> drains = InternalError("not run");
  try {
    drains = RunDrains(o, root);
  } catch (const std::exception& e) {
    drains = UnavailableError(std::string("drain: ") + e.what());
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  if (!drains.ok()) {
    std::fprintf(stderr, "%s\n", drains.status().ToString().c_str());
    return 1;
  }
  // Each drain with retention against the mean of the two without around it; the median of
  // those ratios.
  std::vector<double> ratios;
  std::string sequence;
  for (int i = 0; i < kRounds; ++i) {
    const double around = (drains->without[i] + drains->without[i + 1]) / 2;
    ratios.push_back(around > 0 ? drains->with[i] / around : 0);
    sequence += std::to_string(static_cast<long>(drains->without[i])) + " | " +
                std::to_string(static_cast<long>(drains->with[i])) + " | ";
  }
  sequence += std::to_string(static_cast<long>(drains->without[kRounds]));
  std::sort(ratios.begin(), ratios.end());
  const double ratio = ratios[kRounds / 2];
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
  };
  std::fprintf(table,
               "drain: results/s without | with retention, alternating: %s (%d passes dropped %d "
               "event and %d history partitions and expired %lld receipts); each with against "
               "the two without around it: %.2fx, %.2fx, %.2fx; median %.2fx\n",
               sequence.c_str(), drains->passes, drains->event_partitions,
               drains->history_partitions, static_cast<long long>(drains->receipts), ratios[0],
               ratios[1], ratios[2], ratio);
  for (double per_s : drains->without) {
    report.Row({{"mode", "drain"}, {"retention", "without"}}, {{"per_s", per_s}});
  }
  for (double per_s : drains->with) {
    report.Row({{"mode", "drain"}, {"retention", "with_retention"}}, {{"per_s", per_s}});
  }
  report.Field("drain_per_s_without", mean(drains->without));
  report.Field("drain_per_s_with_retention", mean(drains->with));
  report.Field("drain_ratio", ratio);
  report.Field("drain_event_partitions_dropped", drains->event_partitions);

  std::fprintf(stderr, "retention: dropping partitions of %llu and %llu events\n",
               static_cast<unsigned long long>(o.drop_small),
               static_cast<unsigned long long>(o.drop_large));
  Result<Drops> drops = InternalError("not run");
  try {
    drops = RunDrops(o);
  } catch (const std::exception& e) {
    drops = UnavailableError(std::string("drop: ") + e.what());
  }
  if (!drops.ok()) {
    std::fprintf(stderr, "%s\n", drops.status().ToString().c_str());
    return 1;
  }
  const auto ratio_of = [](double large, double small) { return small > 0 ? large / small : 0; };
  const double drop_ratio = ratio_of(drops->large.detach_ms, drops->small.detach_ms);
  std::fprintf(
      table,
      "drop: %llu events in %.1f ms (detach, the family locked: %.1f; the detached table's "
      "files: %.1f), %llu events in %.1f ms (detach %.1f, files %.1f): the family locked "
      "%.2fx as long, the files %.2fx, the whole %.2fx\n",
      static_cast<unsigned long long>(o.drop_small), drops->small.ms, drops->small.detach_ms,
      drops->small.files_ms, static_cast<unsigned long long>(o.drop_large), drops->large.ms,
      drops->large.detach_ms, drops->large.files_ms, drop_ratio,
      ratio_of(drops->large.files_ms, drops->small.files_ms),
      ratio_of(drops->large.ms, drops->small.ms));
  report.Field("drop_ms_small", drops->small.ms);
  report.Field("drop_ms_large", drops->large.ms);
  report.Field("drop_detach_ms_small", drops->small.detach_ms);
  report.Field("drop_detach_ms_large", drops->large.detach_ms);
  report.Field("drop_files_ms_small", drops->small.files_ms);
  report.Field("drop_files_ms_large", drops->large.files_ms);
  report.Field("drop_ratio", drop_ratio);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
