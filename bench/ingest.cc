// `verdict-bench ingest`: how many results a battle host can make durable per second, side by
// side in one run:
//   verdict   P producer threads push through the real path — ResultChannel, OutboxWriter,
//             unsynced writes of each batch and one log fsync per group of batches — and each
//             result's latency is measured from Push until its batch is durable; each sync of
//             the run (writing the log's buffer, fsync) is timed too, so the table shows how
//             much of that latency the disk sets;
//   file      the design verdict replaces: one file per result, written to a temporary name,
//             fsynced, renamed, and the directory fsynced (P threads);
//   ceiling   raw RocksDB synced WriteBatches, one writer, the best of a few batch sizes.
// Then verdict again, open loop at part of its maximum, and at the same rate the same
// producers, channel and writer over a bare log (one append-only file, an fdatasync per sync):
// the latency this host's threads and disk give with no storage engine under them.
// Then the HTTP ingest over a Unix socket (bench/http_ingest.h): single-result requests from 64
// keep-alive clients and batches of 64, as shares of the in-process maximum; and single requests
// open loop at half their own maximum, beside the bare log at that rate.
#include "bench/ingest.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench/http_ingest.h"
#include "bench/report.h"
#include "bench/sample.h"
#include "node/outbox_writer.h"
#include "node/result_channel.h"
#include "proto/wire.h"
#include "storage/outbox.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
// The HTTP rows: single-result requests from this many keep-alive clients, and batches of
// kHttpBatch from kHttpBatchClients.
constexpr int kHttpClients = 64;
constexpr int kHttpBatchClients = 16;
constexpr size_t kHttpBatch = 64;
constexpr uint64_t kRoomsPerProducer = 1'000'000'000;
// The least time an open-loop producer sleeps at a time (see RunVerdict).
constexpr auto kProducerTick = std::chrono::microseconds(500);

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

struct VerdictRun {
  double per_s = 0;
  double p50_ms = 0;  // push -> durable
  double p99_ms = 0;
  // The syncs of the same run (Outbox::SyncEnqueued as the writer calls it: writing the log's
  // buffer to its file and fsyncing it): the part of the latency the disk sets.
  double fsync_p50_ms = 0;
  double fsync_p99_ms = 0;
  size_t fsyncs = 0;
  // The process's CPU time over the run, as a share of all the host's cores: the writer path,
  // RocksDB's flushes and compactions, and the producers. Near 1, the latency is mostly waiting
  // for a core.
  double cpu_busy = 0;
  // The same CPU time per result stored, in microseconds (producers included).
  double cpu_us = 0;
};

// Passes everything to the outbox and times each SyncEnqueued. Calls come from the writer's
// sync thread only.
class SyncTimingOutbox final : public storage::Outbox {
 public:
  explicit SyncTimingOutbox(storage::Outbox& outbox) : outbox_(outbox) {}
  std::vector<double> sync_ms;  // read after the writer stopped

  uint32_t shard_count() const override { return outbox_.shard_count(); }
  Result<std::vector<storage::EnqueueResult>> EnqueueBuffered(
      std::span<const v1::BattleResult> batch) override {
    return outbox_.EnqueueBuffered(batch);
  }
  Status SyncEnqueued() override {
    const auto start = SteadyClock::now();
    Status s = outbox_.SyncEnqueued();
    sync_ms.push_back(Seconds(SteadyClock::now() - start) * 1000);
    return s;
  }
  Result<std::vector<storage::OutboxRecord>> ReadShard(uint32_t shard, uint64_t after,
                                                       size_t max) override {
    return outbox_.ReadShard(shard, after, max);
  }
  Status AckAll(std::span<const storage::OutboxRecord> records) override {
    return outbox_.AckAll(records);
  }
  Status DeadLetter(const storage::OutboxRecord& record, const std::string& code,
                    const std::string& message) override {
    return outbox_.DeadLetter(record, code, message);
  }
  Result<std::vector<storage::SideRecord>> ListSidePage(storage::SideArea area,
                                                        std::optional<uint64_t> room,
                                                        uint64_t after, size_t max) override {
    return outbox_.ListSidePage(area, room, after, max);
  }
  Result<storage::RedriveReport> Redrive(storage::SideArea from,
                                         std::optional<uint64_t> room) override {
    return outbox_.Redrive(from, room);
  }
  Result<storage::OutboxStats> Stats() override { return outbox_.Stats(); }

 private:
  storage::Outbox& outbox_;
};

// The floor under the outbox at a given load: the writer's batches appended, encoded, to one
// file, and each sync an fdatasync of it. No lookups, memtables, flushes or compactions; only
// the writer path calls it, so everything else is refused.
class BareLog final : public storage::Outbox {
 public:
  static std::unique_ptr<BareLog> Open(const std::string& dir) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    const std::string path = dir + "/log";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::fprintf(stderr, "bare log %s: %s\n", path.c_str(), std::strerror(errno));
      return nullptr;
    }
    return std::unique_ptr<BareLog>(new BareLog(fd));
  }
  ~BareLog() override { ::close(fd_); }

  uint32_t shard_count() const override { return 1; }
  Result<std::vector<storage::EnqueueResult>> EnqueueBuffered(
      std::span<const v1::BattleResult> batch) override {
    buffer_.clear();
    for (const auto& r : batch) buffer_ += wire::DeterministicBytes(r);
    if (::write(fd_, buffer_.data(), buffer_.size()) != static_cast<ssize_t>(buffer_.size())) {
      return UnavailableError(std::string("bare log write: ") + std::strerror(errno));
    }
    return std::vector<storage::EnqueueResult>(batch.size());
  }
  Status SyncEnqueued() override {
    if (::fdatasync(fd_) != 0) {
      return UnavailableError(std::string("bare log fdatasync: ") + std::strerror(errno));
    }
    return Status::Ok();
  }
  Result<std::vector<storage::OutboxRecord>> ReadShard(uint32_t, uint64_t, size_t) override {
    return Refused();
  }
  Status AckAll(std::span<const storage::OutboxRecord>) override { return Refused(); }
  Status DeadLetter(const storage::OutboxRecord&, const std::string&, const std::string&) override {
    return Refused();
  }
  Result<std::vector<storage::SideRecord>> ListSidePage(storage::SideArea, std::optional<uint64_t>,
                                                        uint64_t, size_t) override {
    return Refused();
  }
  Result<storage::RedriveReport> Redrive(storage::SideArea, std::optional<uint64_t>) override {
    return Refused();
  }
  Result<storage::OutboxStats> Stats() override { return Refused(); }

 private:
  explicit BareLog(int fd) : fd_(fd) {}
  static Status Refused() { return FailedPreconditionError("the bare log only appends and syncs"); }

  const int fd_;
  std::string buffer_;  // one batch, encoded (the writer thread's only)
};

// Saturation when `rate` is 0: producers push as fast as the channel takes results. Otherwise
// open loop at `rate` results/s in all: each producer pushes on a fixed schedule, and latency
// counts from the scheduled time, so a producer held up by a full channel is not excused.
VerdictRun RunPipeline(const IngestOptions& o, storage::Outbox& outbox, double rate,
                       int producer_count, const char* label) {
  node::ResultChannel channel;
  const v1::BattleResult proto = PaddedResult(o.size);
  // Push times, one preallocated slot per result (producer p's i-th result is room
  // p * 1e9 + i + 1). A slot is written before its Push, whose lock orders it before the
  // writer's read, so no further locking is needed. Open loop, each producer's share of the
  // run (and a second to spare) so a long run is never cut short; saturated, a fixed table.
  const uint64_t slots =
      rate > 0 ? static_cast<uint64_t>(rate / producer_count * (o.seconds + 1)) + 1 : 1 << 22;
  std::vector<std::unique_ptr<SteadyClock::time_point[]>> pushed;
  for (int p = 0; p < producer_count; ++p) {
    pushed.push_back(std::make_unique<SteadyClock::time_point[]>(slots));
  }
  // Reserved up front in an open-loop run: the callback below runs on the writer's sync thread,
  // and growing a vector of 200,000 samples there (a copy into fresh memory) once held every
  // result behind it for 25 ms, a stall of the benchmark's own making.
  std::vector<double> latencies_ms;
  if (rate > 0) latencies_ms.reserve(slots * producer_count);
  std::atomic<uint64_t> stored{0};
  SyncTimingOutbox timed(outbox);
  node::OutboxWriter writer(
      channel, timed, {},
      [&](const std::vector<v1::BattleResult>& batch, const std::vector<storage::EnqueueResult>&) {
        const auto now = SteadyClock::now();
        for (const auto& r : batch) {
          const uint64_t p = (r.room_id() - 1) / kRoomsPerProducer;
          const uint64_t i = (r.room_id() - 1) % kRoomsPerProducer;
          latencies_ms.push_back(Seconds(now - pushed[p][i]) * 1000);
        }
        stored += batch.size();
      },
      nullptr);
  writer.Start();
  std::atomic<bool> stop{false};
  const auto start = SteadyClock::now();
  const double cpu_at_start = CpuSeconds(RUSAGE_SELF);
  {
    Progress progress(label, o.seconds, stored);
    std::vector<std::thread> producers;
    const auto interval = std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(rate > 0 ? producer_count / rate : 0));
    for (int p = 0; p < producer_count; ++p) {
      producers.emplace_back([&, p] {
        v1::BattleResult r = proto;
        // Producers start evenly spread over one interval.
        auto next = start + interval * p / producer_count;
        auto last_wake = start;
        for (uint64_t i = 0; i < slots && !stop.load(std::memory_order_relaxed); ++i) {
          r.set_room_id(p * kRoomsPerProducer + i + 1);
          if (rate > 0) {
            // Results come due on a fixed schedule. The producer sleeps only when the next one
            // is not due yet, and then at least a tick, pushing everything due when it wakes.
            // Latency counts from each result's due time, so a tick's lateness is charged to the
            // result; what the tick saves is the load generator's own wakeups, which at one per
            // result took about half of one of this host's two cores at 35,000 results/s.
            if (next > SteadyClock::now()) {
              std::this_thread::sleep_until(std::max(next, last_wake + kProducerTick));
              last_wake = SteadyClock::now();
            }
            pushed[p][i] = next;
            next += interval;
          } else {
            pushed[p][i] = SteadyClock::now();
          }
          if (!channel.Push(r).ok()) return;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    stop = true;
    for (auto& t : producers) t.join();
    writer.Stop();
  }
  const double elapsed = Seconds(SteadyClock::now() - start);
  VerdictRun run;
  run.cpu_busy = (CpuSeconds(RUSAGE_SELF) - cpu_at_start) /
                 (elapsed * std::max(1u, std::thread::hardware_concurrency()));
  run.per_s = stored.load() / elapsed;
  if (stored > 0) run.cpu_us = (CpuSeconds(RUSAGE_SELF) - cpu_at_start) / stored.load() * 1e6;
  run.p50_ms = Percentile(latencies_ms, 0.50);
  run.p99_ms = Percentile(latencies_ms, 0.99);
  run.fsyncs = timed.sync_ms.size();
  run.fsync_p50_ms = Percentile(timed.sync_ms, 0.50);
  run.fsync_p99_ms = Percentile(timed.sync_ms, 0.99);
  return run;
}

VerdictRun RunVerdict(const IngestOptions& o, const std::string& dir, double rate,
                      int producer_count) {
  auto outbox = storage::OpenOutbox(dir, {});
  if (!outbox.ok()) {
    std::fprintf(stderr, "outbox: %s\n", outbox.status().ToString().c_str());
    return {};
  }
  return RunPipeline(o, **outbox, rate, producer_count,
                     rate > 0 ? "verdict at a fixed load" : "verdict");
}

VerdictRun RunBareLog(const IngestOptions& o, const std::string& dir, double rate,
                      int producer_count) {
  std::unique_ptr<BareLog> log = BareLog::Open(dir);
  return log ? RunPipeline(o, *log, rate, producer_count, "bare log at the same load")
             : VerdictRun{};
}

// One file per result: temp name, write, fsync, rename, fsync the directory.
double RunFileBaseline(const IngestOptions& o, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string bytes = wire::DeterministicBytes(PaddedResult(o.size));
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  std::atomic<uint64_t> written{0};
  std::atomic<bool> stop{false};
  const auto start = SteadyClock::now();
  {
    Progress progress("file per result", o.seconds, written);
    std::vector<std::thread> producers;
    for (int p = 0; p < o.producers; ++p) {
      producers.emplace_back([&, p] {
        for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          const std::string name = dir + "/" + std::to_string(p) + "-" + std::to_string(i);
          const std::string tmp = name + ".tmp";
          const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
          if (fd < 0) return;
          const bool ok =
              ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) &&
              ::fsync(fd) == 0;
          ::close(fd);
          if (!ok || ::rename(tmp.c_str(), name.c_str()) != 0 || ::fsync(dir_fd) != 0) return;
          ++written;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    stop = true;
    for (auto& t : producers) t.join();
  }
  const double elapsed = Seconds(SteadyClock::now() - start);
  ::close(dir_fd);
  return written.load() / elapsed;
}

// Raw RocksDB, one writer, synced WriteBatches of `batch` records; records per second.
double RunRocksBatch(const std::string& dir, const std::string& value, size_t batch, double seconds,
                     std::atomic<uint64_t>& written) {
  std::filesystem::create_directories(dir);
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(options, dir, &raw).ok()) return 0;
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions sync;
  sync.sync = true;
  uint64_t key = 0, count = 0;
  const auto start = SteadyClock::now();
  const auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(seconds));
  while (SteadyClock::now() < deadline) {
    rocksdb::WriteBatch wb;
    for (size_t i = 0; i < batch; ++i) {
      char k[8];
      for (int b = 0; b < 8; ++b) k[b] = static_cast<char>((key >> (56 - 8 * b)) & 0xff);
      ++key;
      wb.Put(rocksdb::Slice(k, 8), value);
    }
    if (!db->Write(sync, &wb).ok()) break;
    count += batch;
    written += batch;
  }
  return count / Seconds(SteadyClock::now() - start);
}

// Records per second of raw RocksDB at each batch size tried.
std::vector<std::pair<size_t, double>> RunRocksCeiling(const IngestOptions& o,
                                                       const std::string& dir) {
  const std::string value = wire::DeterministicBytes(PaddedResult(o.size));
  const size_t sizes[] = {64, 256, 1024};
  std::atomic<uint64_t> written{0};
  Progress progress("rocksdb ceiling", o.seconds, written);
  std::vector<std::pair<size_t, double>> rates;
  for (size_t batch : sizes) {
    rates.emplace_back(batch, RunRocksBatch(dir + "/b" + std::to_string(batch), value, batch,
                                            o.seconds / std::size(sizes), written));
  }
  return rates;
}

}  // namespace

int RunIngest(const IngestOptions& o) {
  const std::string root = TempRoot();
  std::fprintf(stderr, "ingest: %d producers, %zu-byte results, %.0f s per design, in %s\n",
               o.producers, o.size, o.seconds, root.c_str());
  const VerdictRun verdict = RunVerdict(o, root + "/verdict", 0, o.producers);
  // A battle host is rarely saturated: the latency it sees is the one at part of the maximum.
  const double load = verdict.per_s * o.load_fraction;
  const VerdictRun at_load =
      load > 0 ? RunVerdict(o, root + "/verdict-load", load, o.load_producers) : VerdictRun{};
  // The same rate through the same threads with no storage engine: what is left of the tail
  // without one is this host's (its scheduler, its disk), not verdict's.
  const VerdictRun bare = load > 0 && !o.verdict_only
                              ? RunBareLog(o, root + "/bare-log", load, o.load_producers)
                              : VerdictRun{};
  // The HTTP ingest, then its single requests at half their maximum beside the bare log.
  const HttpIngestRun http_single = RunHttpIngest(o, root + "/http-single", kHttpClients, 1, 0);
  const HttpIngestRun http_alone =
      RunHttpIngest(o, root + "/http-alone", kHttpClients, 1, 0, /*http_alone=*/true);
  const HttpIngestRun http_batch =
      RunHttpIngest(o, root + "/http-batch", kHttpBatchClients, kHttpBatch, 0);
  const double http_half = http_single.per_s * 0.5;
  const HttpIngestRun http_at_half =
      http_half > 0 ? RunHttpIngest(o, root + "/http-half", kHttpClients, 1, http_half)
                    : HttpIngestRun{};
  const VerdictRun bare_at_http_half =
      http_half > 0 ? RunBareLog(o, root + "/bare-log-http", http_half, o.load_producers)
                    : VerdictRun{};
  const double file = o.verdict_only ? 0 : RunFileBaseline(o, root + "/files");
  const auto ceilings = o.verdict_only ? std::vector<std::pair<size_t, double>>{}
                                       : RunRocksCeiling(o, root + "/rocksdb");
  double ceiling = 0;
  size_t best_batch = 0;
  for (const auto& [batch, rate] : ceilings) {
    if (rate > ceiling) std::tie(best_batch, ceiling) = std::pair(batch, rate);
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);

  Report report("ingest");
  report.Field("producers", o.producers);
  report.Field("size_bytes", static_cast<double>(o.size));
  report.Field("seconds", o.seconds);
  report.Field("verdict_per_s", verdict.per_s);
  report.Field("verdict_p99_ms", verdict.p99_ms);
  report.Field("verdict_cpu_busy", verdict.cpu_busy);
  report.Field("verdict_cpu_busy_at_load", at_load.cpu_busy);
  report.Field("verdict_cpu_us_per_result", verdict.cpu_us);
  report.Field("verdict_load_per_s", at_load.per_s);
  report.Field("verdict_p99_ms_at_load", at_load.p99_ms);
  report.Field("verdict_p50_ms_at_load", at_load.p50_ms);
  report.Field("fsync_p50_ms_at_load", at_load.fsync_p50_ms);
  report.Field("fsync_p99_ms_at_load", at_load.fsync_p99_ms);
  report.Field("load_producers", o.load_producers);
  report.Field("bare_log_p50_ms_at_load", bare.p50_ms);
  report.Field("bare_log_p99_ms_at_load", bare.p99_ms);
  report.Field("bare_log_fsync_p99_ms_at_load", bare.fsync_p99_ms);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  report.Field("http_single_per_s", http_single.per_s);
  report.Field("http_single_share", ratio(http_single.per_s, verdict.per_s));
  report.Field("http_single_node_cpu_us", http_single.node_cpu_us);
  report.Field("http_single_client_cpu_us", http_single.client_cpu_us);
  report.Field("http_alone_per_s", http_alone.per_s);
  report.Field("http_alone_node_cpu_us", http_alone.node_cpu_us);
  report.Field("http_batch64_per_s", http_batch.per_s);
  report.Field("http_batch64_share", ratio(http_batch.per_s, verdict.per_s));
  report.Field("http_batch64_node_cpu_us", http_batch.node_cpu_us);
  report.Field("http_batch64_client_cpu_us", http_batch.client_cpu_us);
  report.Field("http_p99_ms_at_half", http_at_half.p99_ms);
  report.Field("bare_log_p99_ms_at_http_half", bare_at_http_half.p99_ms);
  report.Field("http_p99_over_bare_log", ratio(http_at_half.p99_ms, bare_at_http_half.p99_ms));
  report.Field("file_baseline_per_s", file);
  report.Field("rocksdb_ceiling_per_s", ceiling);
  report.Field("rocksdb_ceiling_batch", static_cast<double>(best_batch));
  report.Row({{"mode", "verdict"}}, {{"per_s", verdict.per_s}, {"p99_ms", verdict.p99_ms}});
  if (load > 0) {
    report.Row({{"mode", "verdict_at_load"}},
               {{"per_s", at_load.per_s}, {"p50_ms", at_load.p50_ms}, {"p99_ms", at_load.p99_ms}});
    report.Row({{"mode", "log_fsync_at_load"}}, {{"fsyncs", static_cast<double>(at_load.fsyncs)},
                                                 {"p50_ms", at_load.fsync_p50_ms},
                                                 {"p99_ms", at_load.fsync_p99_ms}});
    if (!o.verdict_only) {
      report.Row({{"mode", "bare_log_at_load"}},
                 {{"per_s", bare.per_s}, {"p50_ms", bare.p50_ms}, {"p99_ms", bare.p99_ms}});
    }
  }
  report.Row({{"mode", "http_single"}}, {{"per_s", http_single.per_s},
                                         {"p50_ms", http_single.p50_ms},
                                         {"p99_ms", http_single.p99_ms}});
  report.Row(
      {{"mode", "http_batch64"}},
      {{"per_s", http_batch.per_s}, {"p50_ms", http_batch.p50_ms}, {"p99_ms", http_batch.p99_ms}});
  report.Row({{"mode", "http_single_at_half"}}, {{"per_s", http_at_half.per_s},
                                                 {"p50_ms", http_at_half.p50_ms},
                                                 {"p99_ms", http_at_half.p99_ms}});
  report.Row({{"mode", "bare_log_at_http_half"}}, {{"per_s", bare_at_http_half.per_s},
                                                   {"p50_ms", bare_at_http_half.p50_ms},
                                                   {"p99_ms", bare_at_http_half.p99_ms}});
  report.Row({{"mode", "file_per_result"}}, {{"per_s", file}});
  for (const auto& [batch, rate] : ceilings) {
    report.Row({{"mode", "rocksdb_ceiling"}},
               {{"per_s", rate}, {"batch", static_cast<double>(batch)}});
  }

  // With --json the table goes to stderr, keeping stdout for the JSON object.
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-38s %14s %10s %10s\n", "design", "results/s", "p50 ms", "p99 ms");
  std::fprintf(table, "%-38s %14.0f %10.2f %10.2f\n", "verdict (channel -> writer -> RocksDB)",
               verdict.per_s, verdict.p50_ms, verdict.p99_ms);
  if (load > 0) {
    // An open-loop run's row, then its syncs' row.
    auto print_open_loop = [&](const std::string& name, const VerdictRun& run, const char* syncs) {
      std::fprintf(table, "%-38s %14.0f %10.2f %10.2f\n", name.c_str(), run.per_s, run.p50_ms,
                   run.p99_ms);
      const std::string sync_name =
          "  its " + std::string(syncs) + " (" + std::to_string(run.fsyncs) + ")";
      std::fprintf(table, "%-38s %14s %10.2f %10.2f\n", sync_name.c_str(), "-", run.fsync_p50_ms,
                   run.fsync_p99_ms);
    };
    char at[64];
    std::snprintf(at, sizeof(at), "verdict at %.0f%% of that, %d producers", o.load_fraction * 100,
                  o.load_producers);
    print_open_loop(at, at_load, "log syncs");
    if (!o.verdict_only) print_open_loop("bare log at that rate (no engine)", bare, "fdatasyncs");
    std::fprintf(table,
                 "  CPU busy: %.0f%% of the host's cores at the maximum (%.1f us per result), "
                 "%.0f%% at %.0f%%\n",
                 verdict.cpu_busy * 100, verdict.cpu_us, at_load.cpu_busy * 100,
                 o.load_fraction * 100);
  }
  auto print_http = [&](const std::string& name, const HttpIngestRun& run) {
    std::fprintf(table, "%-38s %14.0f %10.2f %10.2f   CPU us/result: node %.1f, client %.1f\n",
                 name.c_str(), run.per_s, run.p50_ms, run.p99_ms, run.node_cpu_us,
                 run.client_cpu_us);
  };
  print_http("http, " + std::to_string(kHttpClients) + " clients x 1 result", http_single);
  print_http("  the same answered before durable", http_alone);
  print_http("http, " + std::to_string(kHttpBatchClients) + " clients x batch " +
                 std::to_string(kHttpBatch),
             http_batch);
  print_http("http single at half that", http_at_half);
  std::fprintf(table, "%-38s %14.0f %10.2f %10.2f\n", "bare log at that rate",
               bare_at_http_half.per_s, bare_at_http_half.p50_ms, bare_at_http_half.p99_ms);
  std::fprintf(table,
               "  http: single %.2fx and batches %.2fx the in-process maximum; p99 at half load "
               "%.1fx the bare log's\n",
               ratio(http_single.per_s, verdict.per_s), ratio(http_batch.per_s, verdict.per_s),
               ratio(http_at_half.p99_ms, bare_at_http_half.p99_ms));
  if (o.verdict_only) return report.Emit(o.output);  // the other designs did not run
  std::fprintf(table, "%-38s %14.0f %10s %10s\n", "file per result (fsync + rename)", file, "-",
               "-");
  char label[64];
  std::snprintf(label, sizeof(label), "RocksDB ceiling (batch %zu)", best_batch);
  std::fprintf(table, "%-38s %14.0f %10s %10s\n", label, ceiling, "-", "-");
  std::fprintf(table,
               "\nverdict is %.1fx the file-per-result design and %.2fx the RocksDB ceiling\n",
               file > 0 ? verdict.per_s / file : 0, ceiling > 0 ? verdict.per_s / ceiling : 0);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
