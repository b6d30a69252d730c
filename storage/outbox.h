// Outbox: the battle node's durable queue of finished-battle results, hashed into shards by
// room. The OutboxWriter enqueues, one Deliverer per shard reads, acks and dead-letters, and
// operators list and redrive. Thread-safety: Enqueue, Redrive, ListSidePage and Stats may be
// called from any thread. ReadShard, Ack and DeadLetter for one shard must come from one thread at
// a time (its deliverer); different shards and Enqueue may proceed concurrently.
//
// Durability and crash semantics:
//  - Enqueue returns OK only after its batch is in the write-ahead log and fsynced: a record
//    acknowledged by Enqueue survives a process kill or power loss.
//  - Ack deletes without fsync. A crash shortly after an Ack can bring the record back; it is
//    then delivered again and the lobby answers `duplicate: true` with the original match_id,
//    so a resurrected record costs one extra request and never a second settlement.
//  - DeadLetter, quarantine moves and Redrive are single atomic WriteBatches: after a crash a
//    record is in exactly one place, never in none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "verdict/common/clock.h"
#include "verdict/common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace rocksdb {
class Env;
}

namespace verdict::storage {

struct OutboxOptions {
  // Number of shard column families. Used only when the outbox is created: an existing outbox
  // keeps its count, and opening it with a different count fails (resharding is explicit).
  // Default: 16.
  uint32_t shard_count = 16;

  // Largest serialized BattleResult accepted into a shard; larger ones are refused and kept
  // whole in quarantine with reason "oversize".
  // Default: 1 MiB.
  size_t max_record_bytes = size_t{1} << 20;

  // Upper bound on write-ahead-log size across column families before RocksDB forces the
  // column families holding the oldest log to flush, so the log cannot grow without bound.
  // Default: 64 MiB.
  uint64_t max_total_wal_size = uint64_t{64} << 20;

  // Upper bound on memtable memory across all column families (a deep backlog must not grow
  // the node's memory).
  // Default: 64 MiB.
  size_t total_memtable_bytes = size_t{64} << 20;

  // Opens an existing outbox with the shard count it was created with, whatever shard_count
  // says (which then applies only to a new outbox), instead of refusing a different count. For
  // operators' tools that write to an outbox they did not create.
  // Default: false.
  bool adopt_existing_shard_count = false;

  // Source of enqueue timestamps (oldest-record age). Not owned; must outlive the outbox.
  // Default: nullptr, meaning the system clock.
  const Clock* clock = nullptr;

  // Opens an existing outbox for reading only, without taking its lock, so an operator can
  // inspect it while a node runs (a consistent view as of the open). shard_count is then taken
  // from the outbox; every method that writes returns FAILED_PRECONDITION.
  // Default: false.
  bool read_only = false;

  // Preallocates log and table files (fallocate), as RocksDB does by default. With it, a full
  // disk fails writes only at the next memtable flush or log switch; without it, at the next
  // write. The fault suite turns it off so that filling the disk bites at once.
  // Default: true.
  bool preallocate_files = true;

  // The RocksDB environment every file operation goes through. Tests pass one whose file
  // system simulates a power cut (tests/support/power_cut_fs.h). The outbox keeps it alive.
  // Default: nullptr, meaning rocksdb::Env::Default().
  std::shared_ptr<rocksdb::Env> env = nullptr;

  // Test-only: opens without checking the write-ahead logs for damage in their middle, leaving
  // RocksDB's point-in-time recovery alone, which stops at the first damaged record and drops the
  // stored records after it. It exists so the corruption tests can show that they catch that
  // loss. Default: false. Never set it outside tests.
  bool unsafe_skip_log_check_for_test = false;
  // Test-only: writes without the write-ahead log, so Enqueue acknowledges records that exist
  // only in memory. It exists so the crash test can show that it detects lost records.
  // Default: false. Never set it outside tests.
  bool unsafe_disable_wal_for_test = false;
  // Test-only: writes the log but never fsyncs it (SyncEnqueued and synced writes return
  // without waiting for the disk), so Enqueue acknowledges records that sit in the page cache.
  // A killed process loses none of them; a power cut loses them. It exists so the power-loss
  // test can show that it detects the missing fsync. Default: false. Never set it outside tests.
  bool unsafe_skip_wal_sync_for_test = false;
};

// A record as stored in a shard.
struct OutboxRecord {
  uint32_t shard = 0;
  uint64_t sequence = 0;  // per-node, strictly increasing in enqueue order
  int64_t enqueued_at_ms = 0;
  size_t stored_bytes = 0;
  v1::BattleResult result;
};

// Where a record that is not (or no longer) in a shard lives.
enum class SideArea { kQuarantine, kDeadLetter };
const char* SideAreaName(SideArea area);  // "quarantine" / "dead-letter"

// A record in quarantine or dead letter, with the reason it was moved aside.
struct SideRecord {
  SideArea area = SideArea::kQuarantine;
  uint32_t shard = 0;  // the shard it came from (or would have gone to)
  uint64_t sequence = 0;
  int64_t enqueued_at_ms = 0;
  std::string reason;  // "oversize", "undecodable", or the lobby's error code
  std::string detail;  // human-readable explanation
  bool decodable = false;
  v1::BattleResult result;  // meaningful only if decodable
  size_t stored_bytes = 0;
};

// The result of enqueuing one record of a batch.
struct EnqueueResult {
  // OK: the record is durable in `shard` at `sequence` (newly, or already before).
  // RESOURCE_EXHAUSTED: over max_record_bytes; refused, and kept in quarantine as "oversize".
  // ALREADY_EXISTS: a different record with the same (room_id, ended_at_ms) is stored; refused.
  // INVALID_ARGUMENT: room_id is 0.
  Status status;
  bool already_present = false;  // an identical record was stored before; nothing written
  uint32_t shard = 0;
  uint64_t sequence = 0;
};

struct ShardStats {
  uint32_t shard = 0;
  uint64_t records = 0;  // of a damaged shard: those read before the damage
  uint64_t bytes = 0;
  int64_t oldest_age_ms = 0;  // 0 when the shard is empty
  // Empty, or why the shard cannot be read (a table file's block fails its checksum): the
  // shard is stopped, its records are neither delivered nor lost, the other shards go on.
  std::string damage;
};

struct OutboxStats {
  std::vector<ShardStats> shards;
  uint64_t records = 0;  // sum over shards
  uint64_t bytes = 0;
  uint64_t quarantined = 0;
  uint64_t dead_lettered = 0;
  uint64_t free_disk_bytes = 0;  // free to unprivileged users on the outbox's file system
  uint32_t damaged_shards = 0;   // shards whose damage is set
};

struct RedriveReport {
  uint64_t moved = 0;    // back in their shards, at the tail with new sequences
  uint64_t skipped = 0;  // left where they are: undecodable or still oversize
};

// The stable room → shard mapping: SplitMix64's finalizer (Steele, Lea, Flood 2014) of the
// room id, modulo the shard count. It is part of the on-disk format: never change it.
//   z = room_id + 0x9E3779B97F4A7C15
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//   hash = z ^ (z >> 31)
uint64_t RoomHash(uint64_t room_id);
inline uint32_t RoomShard(uint64_t room_id, uint32_t shard_count) {
  return static_cast<uint32_t>(RoomHash(room_id) % shard_count);
}

class Outbox {
 public:
  virtual ~Outbox() = default;

  virtual uint32_t shard_count() const = 0;

  // Stores the batch durably: EnqueueBuffered, then SyncEnqueued. Returns one EnqueueResult per
  // input, in order. A top-level error (UNAVAILABLE, RESOURCE_EXHAUSTED for a full disk,
  // INTERNAL) means the batch is not known to be durable and the same call may be retried.
  // Records refused individually (see EnqueueResult) do not fail the batch.
  Result<std::vector<EnqueueResult>> Enqueue(std::span<const v1::BattleResult> batch) {
    auto results = EnqueueBuffered(batch);
    if (!results.ok()) return results;
    if (Status synced = SyncEnqueued(); !synced.ok()) return synced;
    return results;
  }

  // Group commit in two steps, so one thread can write the next batch while another fsyncs
  // the ones before it. EnqueueBuffered does the batch's lookups, assigns its sequences and
  // writes it, whole or (after an error) not at all, without syncing: into the log's buffer in
  // memory and the memtables. ReadShard does not show its records until the next SyncEnqueued
  // returns OK (Stats counts them at once); if the process dies before, they are lost. Its
  // results are final (sequences, refusals, repeats, also of records not yet synced), but
  // nothing may be reported stored before that SyncEnqueued returns OK.
  // Errors as for Enqueue: after one, nothing of the batch was written.
  virtual Result<std::vector<EnqueueResult>> EnqueueBuffered(
      std::span<const v1::BattleResult> batch) = 0;
  // Writes the log's buffer to its file and fsyncs it, and returns once every batch
  // EnqueueBuffered returned before this call is durable; ReadShard shows them from then on.
  // An error means they are not known to be durable; the next call makes them durable first
  // (after a failed log write, by flushing the memtables to synced table files).
  virtual Status SyncEnqueued() = 0;

  // Up to `max_records` records of `shard` with sequence > `after_sequence`, in enqueue order
  // (after_sequence 0 = from the head). A value that cannot be decoded is moved to quarantine
  // with reason "undecodable" and skipped. DATA_LOSS if the shard is damaged (see
  // ShardStats::damage): it stays stopped until the outbox is salvaged.
  virtual Result<std::vector<OutboxRecord>> ReadShard(uint32_t shard, uint64_t after_sequence,
                                                      size_t max_records) = 0;

  // Removes delivered records and their idempotency entries in one write, all or none (not
  // synced; see the file comment): a batch the lobby settled whole is one write, not one a
  // record. Each record read must be acked or dead-lettered at most once.
  virtual Status AckAll(std::span<const OutboxRecord> records) = 0;
  // One delivered record: AckAll of it alone.
  Status Ack(const OutboxRecord& record) { return AckAll(std::span(&record, 1)); }

  // Moves a record the lobby refused as terminal to dead letter with the lobby's code and
  // message, atomically.
  virtual Status DeadLetter(const OutboxRecord& record, const std::string& code,
                            const std::string& message) = 0;

  // The next records in quarantine or dead letter with sequence > `after_sequence`, oldest
  // first, those of `room_id` only when it is set: at most `max_records`, and fewer once they
  // hold kSidePageBytes (always at least one). Empty at the end of the area. Memory is bounded
  // by the page whatever the area holds.
  virtual Result<std::vector<SideRecord>> ListSidePage(SideArea area,
                                                       std::optional<uint64_t> room_id,
                                                       uint64_t after_sequence,
                                                       size_t max_records) = 0;
  static constexpr size_t kSidePageBytes = size_t{4} << 20;

  // Every record of ListSidePage at once, for small areas (tests, the deliverer's checks).
  Result<std::vector<SideRecord>> ListSide(SideArea area, std::optional<uint64_t> room_id) {
    std::vector<SideRecord> all;
    for (uint64_t after = 0;;) {
      auto page = ListSidePage(area, room_id, after, 256);
      if (!page.ok()) return page.status();
      if (page->empty()) return all;
      after = page->back().sequence;
      for (auto& r : *page) all.push_back(std::move(r));
    }
  }

  // Moves decodable records from `from` back to the tail of their shards (new sequences), all
  // of them or those of `room_id`, a page at a time, holding Enqueue back for one page at a
  // time only. Records that cannot be redriven stay and are counted. A redriven record goes
  // behind any record of its room stored since it was set aside: per-room order is the order
  // the records are in the shard, and a redrive is a new store.
  virtual Result<RedriveReport> Redrive(SideArea from, std::optional<uint64_t> room_id) = 0;

  // Counts, bytes and ages per shard, side-area counts, free disk.
  virtual Result<OutboxStats> Stats() = 0;
};

// Opens the outbox in `dir`, creating it if `dir` is absent or empty (never otherwise). A failed
// open changes nothing in `dir`. Errors:
//  - FAILED_PRECONDITION: the outbox has another shard count; this process may not read (or,
//    to write, write) `dir`; `dir` is on a read-only file system (to write); `dir` holds files
//    but no outbox, or a RocksDB database that is not an outbox.
//  - UNAVAILABLE: another process holds the outbox (or an I/O error).
//  - DATA_LOSS: the outbox is damaged: a write-ahead log damaged before its end (naming the file
//    and the offset), CURRENT missing, a manifest that lost track of the outbox's column
//    families, an unreadable quarantine, dead letter or meta. Opening it anyway would drop
//    stored results; `SalvageOutbox` (storage/outbox_salvage.h) copies what can be read. A
//    damaged shard is not an open error: it is reported in Stats and stops alone.
//  - with options.read_only, NOT_FOUND if there is no outbox in `dir`.
// A log whose tail was torn by a crash or a power cut is not damage: what it held unsynced was
// never reported stored. Processes opening one directory at once take turns (a lock on the
// directory): of several creating a new outbox, one creates it and the others find it whole.
Result<std::unique_ptr<Outbox>> OpenOutbox(const std::string& dir, const OutboxOptions& options);

}  // namespace verdict::storage
