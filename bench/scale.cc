// `verdict-bench scale`: what a deep backlog costs the node.
//   fill      N results stored through the outbox (a lobby outage's backlog);
//   memory    verdict-node runs over that backlog with the lobby unreachable — its deliverers
//             read, fail and back off — and its resident memory is sampled;
//   head      the backlog is then acked from the heads of the shards, and at every tenth the
//             cost of reading a shard's head (time, and tombstones RocksDB skipped) is taken;
//             after the last ack one fresh record per shard is read the same way, and once more
//             after reopening the outbox, which must find the head again without the in-memory
//             low-water marks.
// A queue that deletes everything it wrote is RocksDB's worst case: the head read must stay
// flat however many records were acked before it.
#include "bench/scale.h"

#include <sys/wait.h>
#include <unistd.h>

#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/sample.h"
#include "storage/outbox.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

Status Fill(const ScaleOptions& o, const std::string& dir, double* per_s) {
  auto outbox = storage::OpenOutbox(dir, {.shard_count = o.shards});
  if (!outbox.ok()) return outbox.status();
  std::vector<v1::BattleResult> batch(1000, PaddedResult(o.size));
  std::atomic<uint64_t> stored{0};
  const auto start = SteadyClock::now();
  Progress progress("fill", 0, stored);
  for (uint64_t room = 1; room <= o.records;) {
    const size_t n = std::min<uint64_t>(batch.size(), o.records - room + 1);
    for (size_t i = 0; i < n; ++i) batch[i].set_room_id(room + i);
    auto out = (*outbox)->Enqueue(std::span(batch.data(), n));
    if (!out.ok()) return out.status();
    room += n;
    stored += n;
  }
  *per_s = o.records / Seconds(SteadyClock::now() - start);
  return Status::Ok();
}

struct Memory {
  double max_rss_mib = 0;
  double peak_mib = 0;  // VmHWM: the most it was resident at any moment
};

// Runs verdict-node over the outbox with an unreachable lobby and samples its memory.
Result<Memory> MeasureNode(const ScaleOptions& o, const std::string& dir, const std::string& log) {
  auto spawned = SpawnWithLog({NodeBinary(o.node_binary), "run", "--node-id", "bench-scale",
                               "--outbox", dir, "--lobby", "http://127.0.0.1:1", "--token", "t",
                               "--shards", std::to_string(o.shards), "--log-level", "warn"},
                              log);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;

  Memory memory;
  const auto start = SteadyClock::now();
  std::atomic<uint64_t> mib{0};
  {
    Progress progress("verdict-node over the backlog (MiB resident)", o.node_seconds, mib);
    while (Seconds(SteadyClock::now() - start) < o.node_seconds) {
      const double rss = StatusMiB(pid, "VmRSS");
      if (rss < 0 || ::waitpid(pid, nullptr, WNOHANG) == pid) {
        return InternalError("verdict-node exited early; see " + log);
      }
      memory.max_rss_mib = std::max(memory.max_rss_mib, rss);
      mib = static_cast<uint64_t>(rss);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  memory.peak_mib = StatusMiB(pid, "VmHWM");
  if (Status s = StopChild(pid, "verdict-node"); !s.ok()) {
    return Status(s.code(), s.message() + "; see " + log);
  }
  return memory;
}

struct HeadRead {
  uint64_t acked = 0;
  double us = 0;            // mean time of ReadShard(shard, 0, 1) over the shards read
  uint64_t tombstones = 0;  // deletions RocksDB skipped, summed over those reads
};

HeadRead ReadHeads(storage::Outbox& outbox, uint64_t acked) {
  HeadRead h{.acked = acked};
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  const auto start = SteadyClock::now();
  for (uint32_t s = 0; s < outbox.shard_count(); ++s) (void)outbox.ReadShard(s, 0, 1);
  h.us = Seconds(SteadyClock::now() - start) * 1e6 / outbox.shard_count();
  h.tombstones = rocksdb::get_perf_context()->internal_delete_skipped_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  return h;
}

// One fresh record per shard, so that a head read after the acks has something to find.
Status EnqueueOnePerShard(storage::Outbox& outbox, uint64_t first_room) {
  std::vector<v1::BattleResult> fresh;
  std::vector<bool> covered(outbox.shard_count());
  for (uint64_t room = first_room; fresh.size() < outbox.shard_count(); ++room) {
    const uint32_t shard = storage::RoomShard(room, outbox.shard_count());
    if (covered[shard]) continue;
    covered[shard] = true;
    fresh.push_back(PaddedResult(200));
    fresh.back().set_room_id(room);
  }
  return outbox.Enqueue(fresh).status();
}

// Acks the whole backlog, shard by shard in turn, reading heads at every tenth.
Result<std::vector<HeadRead>> AckAll(const ScaleOptions& o, const std::string& dir) {
  auto outbox = storage::OpenOutbox(dir, {.shard_count = o.shards});
  if (!outbox.ok()) return outbox.status();
  std::vector<HeadRead> heads = {ReadHeads(**outbox, 0)};
  std::atomic<uint64_t> acked{0};
  Progress progress("ack", 0, acked);
  uint64_t next_checkpoint = o.records / 10;
  for (bool any = true; any;) {
    any = false;
    for (uint32_t s = 0; s < o.shards; ++s) {
      auto records = (*outbox)->ReadShard(s, 0, 64);
      if (!records.ok()) return records.status();
      for (const auto& r : *records) VERDICT_RETURN_IF_ERROR((*outbox)->Ack(r));
      acked += records->size();
      any = any || !records->empty();
    }
    if (acked >= next_checkpoint && acked < o.records) {
      heads.push_back(ReadHeads(**outbox, acked));
      next_checkpoint += o.records / 10;
    }
  }
  VERDICT_RETURN_IF_ERROR(EnqueueOnePerShard(**outbox, o.records + 1));
  heads.push_back(ReadHeads(**outbox, acked));
  return heads;
}

}  // namespace

int RunScale(const ScaleOptions& o) {
  const std::string root = TempRoot();
  const std::string dir = root + "/outbox";
  std::fprintf(stderr, "scale: %llu results of %zu bytes in %u shards, in %s\n",
               static_cast<unsigned long long>(o.records), o.size, o.shards, root.c_str());
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "verdict-bench scale: %s\n", s.ToString().c_str());
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
    return 1;
  };

  double fill_per_s = 0;
  if (Status s = Fill(o, dir, &fill_per_s); !s.ok()) return fail(s);
  uint64_t disk_bytes = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    if (f.is_regular_file()) disk_bytes += f.file_size();
  }
  auto memory = MeasureNode(o, dir, root + "/node.log");
  if (!memory.ok()) return fail(memory.status());
  auto heads = AckAll(o, dir);
  if (!heads.ok()) return fail(heads.status());

  // A restart after the acks: the low-water marks are rebuilt from disk.
  const auto open_start = SteadyClock::now();
  auto reopened = storage::OpenOutbox(dir, {.shard_count = o.shards});
  if (!reopened.ok()) return fail(reopened.status());
  const double reopen_s = Seconds(SteadyClock::now() - open_start);
  const HeadRead after_reopen = ReadHeads(**reopened, heads->back().acked);
  reopened->reset();
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);

  Report report("scale");
  report.Field("records", static_cast<double>(o.records));
  report.Field("size_bytes", static_cast<double>(o.size));
  report.Field("shards", o.shards);
  report.Field("fill_per_s", fill_per_s);
  report.Field("outbox_disk_mib", disk_bytes / 1048576.0);
  report.Field("node_rss_mib", memory->max_rss_mib);
  report.Field("node_peak_rss_mib", memory->peak_mib);
  report.Field("reopen_s", reopen_s);
  report.Field("reopen_head_read_us", after_reopen.us);
  report.Field("reopen_head_tombstones", static_cast<double>(after_reopen.tombstones));
  for (const HeadRead& h : *heads) {
    report.Row({{"mode", "head_read"}}, {{"acked", static_cast<double>(h.acked)},
                                         {"us", h.us},
                                         {"tombstones", static_cast<double>(h.tombstones)}});
  }

  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\nbacklog: %llu results, %.0f MiB on disk, stored at %.0f/s\n",
               static_cast<unsigned long long>(o.records), disk_bytes / 1048576.0, fill_per_s);
  std::fprintf(table,
               "verdict-node over it, lobby unreachable, %.0f s: %.1f MiB resident (peak %.1f)\n",
               o.node_seconds, memory->max_rss_mib, memory->peak_mib);
  std::fprintf(table, "\n%12s %16s %22s\n", "acked", "head read us", "tombstones skipped");
  for (const HeadRead& h : *heads) {
    std::fprintf(table, "%12llu %16.1f %22llu\n", static_cast<unsigned long long>(h.acked), h.us,
                 static_cast<unsigned long long>(h.tombstones));
  }
  std::fprintf(table, "%12s %16.1f %22llu   (after reopening, which took %.2f s)\n", "reopened",
               after_reopen.us, static_cast<unsigned long long>(after_reopen.tombstones), reopen_s);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
