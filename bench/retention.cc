// `verdict-bench retention`: the lobby's data over time (README, "Retention"), in three parts,
// each on a database of its own:
//   growth   rooms settled at a steady rate (the settlement statement itself, a batch every
//            100 ms) while retention passes run every second with short windows and small
//            partitions; the rows and bytes of each table are sampled every second. The events
//            must stay within their window plus one partition (plus what arrives between two
//            passes): rate × (window + pass interval) + partition size.
//   drain    a backlog drained by the deliverers into a lobby in this process (as `drain` does),
//            three times: without retention, with retention passes running every half second
//            (windows of two seconds, so that they drop partitions and expire receipts under
//            the drain), and without again. The drain with retention must keep 0.9 of the mean
//            of the two without.
//   drop     a partition of 100,000 events and one of 1,000,000, each dropped by the retention
//            pass's own statement once past its window: the two must take about as long
//            (within 2×), since dropping a partition unlinks its files whatever they hold.
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
#include "bench/sample.h"
#include "lobby/retention.h"
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
    "'bench-node', ARRAY(SELECT (r % 1000) * 10 + g FROM generate_series(1, 10) g), "
    "'{1,1,1,1,1,2,2,2,2,2}')";
// Settles rooms $1 … $2 ($3 of them) with the lobby's own statement, team 1 winning.
std::string SettleStatement() {
  return "SELECT count(*) FROM (SELECT array_agg(r ORDER BY r) AS rooms "
         "FROM generate_series($1::bigint, $2::bigint) r) rr, "
         "LATERAL (SELECT array_agg(r ORDER BY r, g) AS rooms, "
         "array_agg((r % 1000) * 10 + g ORDER BY r, g) AS ids, "
         "array_agg(CASE WHEN g <= 5 THEN 1 ELSE 2 END::smallint ORDER BY r, g) AS teams, "
         "array_agg(g ORDER BY r, g) AS kills, array_agg(0 ORDER BY r, g) AS zeros, "
         "array_agg(100 * g::bigint ORDER BY r, g) AS scores, "
         "array_agg(false ORDER BY r, g) AS disconnected "
         "FROM generate_series($1::bigint, $2::bigint) r, generate_series(1, 10) g) p, "
         "LATERAL " +
         BenchSettleCall("rr.rooms", "$3::int") + " s WHERE s.status = 'settled'";
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
  void Run(const std::string& conninfo, const lobby::RetentionOptions& o) {
    auto report = lobby::RetainOnce(conninfo, o);
    ++passes;
    if (!report.ok()) {
      ++failed;
      std::fprintf(stderr, "    retention pass failed: %s\n", report.status().ToString().c_str());
      return;
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
};

struct Growth {
  std::vector<Sample> samples;
  double per_s = 0;
  int64_t events_max = 0;  // after the first window: before it nothing is old enough to drop
  double events_bound = 0;
  int passes = 0, failed = 0, event_partitions = 0, history_partitions = 0;
  int64_t receipts = 0;
};

Result<Growth> RunGrowth(const RetentionBenchOptions& o) {
  ScratchDatabase database(o.db, "retention_growth");
  const std::string conninfo = database.conninfo();
  lobby::PartitionOptions partitions;
  partitions.events_per_partition = o.partition;
  partitions.matches_per_partition = o.partition;
  if (auto migrated = lobby::Migrate(conninfo, partitions); !migrated.ok()) {
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
        growth.samples.push_back({t, table, row[0].as<int64_t>(), row[1].as<int64_t>()});
      }
    });
    Progress progress("settling (retention growth)", o.rooms / o.rate, settled);
    pqxx::connection conn(conninfo);
    constexpr double kTick = 0.1;  // a batch every 100 ms
    const uint64_t per_batch = std::max<uint64_t>(1, static_cast<uint64_t>(o.rate * kTick));
    for (uint64_t first = 1; first <= o.rooms; first += per_batch) {
      const uint64_t last = std::min(o.rooms, first + per_batch - 1);
      pqxx::nontransaction(conn).exec_params(kAllocate, first, last);
      pqxx::nontransaction(conn).exec_params(SettleStatement(), first, last, last - first + 1);
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
  }
  growth.events_bound =
      growth.per_s * (o.events_window_s + o.pass_s) + static_cast<double>(o.partition);
  for (const Sample& s : growth.samples) {
    if (s.table == std::string("settlement_events") && s.t_s > o.events_window_s + o.pass_s) {
      growth.events_max = std::max(growth.events_max, s.rows);
    }
  }
  return growth;
}

struct Drains {
  double without_before = 0, with = 0, without_after = 0;
  int passes = 0, event_partitions = 0, history_partitions = 0;
  int64_t receipts = 0;
};

Result<Drains> RunDrains(const RetentionBenchOptions& o, const std::string& root) {
  ScratchDatabase database(o.db, "retention_drain");
  const std::string conninfo = database.conninfo();
  lobby::PartitionOptions partitions;
  partitions.events_per_partition = o.partition;
  partitions.matches_per_partition = o.partition;
  if (auto migrated = lobby::Migrate(conninfo, partitions); !migrated.ok()) {
    return migrated.status();
  }
  DrainLobby lobby(conninfo, 8);
  if (lobby.port() == 0) return UnavailableError("the in-process lobby did not start");
  Drains drains;
  std::fprintf(stderr, "  drain without retention\n");
  drains.without_before = lobby.Drain(root + "/before", o.shards, o.batch, 0, o.backlog);
  {
    Passes passes;
    const lobby::RetentionOptions windows = Windows(o.partition, 2, 2, 2);
    std::fprintf(stderr, "  drain with a retention pass every 0.5 s (2 s windows)\n");
    Periodic retention(std::chrono::milliseconds(500), [&] { passes.Run(conninfo, windows); });
    drains.with = lobby.Drain(root + "/with", o.shards, o.batch, o.backlog, o.backlog);
    drains.passes = passes.passes;
    drains.event_partitions = passes.event_partitions;
    drains.history_partitions = passes.history_partitions;
    drains.receipts = passes.receipts;
  }
  std::fprintf(stderr, "  drain without retention, again\n");
  drains.without_after = lobby.Drain(root + "/after", o.shards, o.batch, 2 * o.backlog, o.backlog);
  return drains;
}

struct Drops {
  double small_ms = 0, large_ms = 0;
};

// Times the retention pass's drop of the oldest events partition, which must be one of `rows`.
Result<double> TimeDrop(const std::string& conninfo, uint64_t rows) {
  pqxx::connection conn(conninfo);
  pqxx::nontransaction(conn).exec("CHECKPOINT");
  const auto start = SteadyClock::now();
  pqxx::work tx(conn);
  const pqxx::row dropped = tx.exec1(
      "SELECT verdict_drop_oldest_partition('events', now()), "
      "(SELECT count(*) FROM verdict_partitions WHERE family = 'events')");
  tx.commit();
  const double ms = Seconds(SteadyClock::now() - start) * 1000;
  if (dropped[0].is_null()) {
    return InternalError("the partition of " + std::to_string(rows) + " events was not dropped");
  }
  return ms;
}

Result<Drops> RunDrops(const RetentionBenchOptions& o) {
  ScratchDatabase database(o.db, "retention_drop");
  const std::string conninfo = database.conninfo();
  if (auto migrated = lobby::Migrate(conninfo); !migrated.ok()) return migrated.status();
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
  drops.small_ms = *small;
  drops.large_ms = *large;
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
  std::fprintf(table,
               "growth: %.0f rooms/s; %d passes (%d failed) dropped %d event and %d history "
               "partitions and expired %lld receipts; events peaked at %lld rows against a bound "
               "of %.0f (rate x (window %.0f s + pass %.0f s) + one partition of %lld)\n",
               growth->per_s, growth->passes, growth->failed, growth->event_partitions,
               growth->history_partitions, static_cast<long long>(growth->receipts),
               static_cast<long long>(growth->events_max), growth->events_bound, o.events_window_s,
               o.pass_s, static_cast<long long>(o.partition));
  report.Field("growth_rooms_per_s", growth->per_s);
  report.Field("events_rows_max", static_cast<double>(growth->events_max));
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
  const double without = (drains->without_before + drains->without_after) / 2;
  const double ratio = without > 0 ? drains->with / without : 0;
  std::fprintf(table,
               "drain: %.0f results/s without retention, %.0f with passes running (%d passes "
               "dropped %d event and %d history partitions and expired %lld receipts), %.0f "
               "without again: %.2fx\n",
               drains->without_before, drains->with, drains->passes, drains->event_partitions,
               drains->history_partitions, static_cast<long long>(drains->receipts),
               drains->without_after, ratio);
  for (const auto& [mode, per_s] :
       {std::pair<std::string, double>{"without", drains->without_before},
        {"with_retention", drains->with},
        {"without_again", drains->without_after}}) {
    report.Row({{"mode", "drain"}, {"retention", mode}}, {{"per_s", per_s}});
  }
  report.Field("drain_per_s_without", without);
  report.Field("drain_per_s_with_retention", drains->with);
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
  const double drop_ratio = drops->small_ms > 0 ? drops->large_ms / drops->small_ms : 0;
  std::fprintf(table, "drop: %llu events in %.1f ms, %llu events in %.1f ms: %.2fx\n",
               static_cast<unsigned long long>(o.drop_small), drops->small_ms,
               static_cast<unsigned long long>(o.drop_large), drops->large_ms, drop_ratio);
  report.Field("drop_ms_small", drops->small_ms);
  report.Field("drop_ms_large", drops->large_ms);
  report.Field("drop_ratio", drop_ratio);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
