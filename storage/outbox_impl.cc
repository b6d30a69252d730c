// The RocksDB outbox: the Outbox interface over one RocksDB instance whose layout
// storage/outbox_format.h describes.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include <rocksdb/db.h>
#include <rocksdb/file_system.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/options_util.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/wal_filter.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/log_rate_limit.h"
#include "common/mutex.h"
#include "proto/wire.h"
#include "storage/log_scan.h"
#include "storage/outbox.h"
#include "storage/outbox_format.h"
#include "storage/outbox_internal.h"

namespace verdict::storage {
namespace internal {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  std::string msg = what + ": " + s.ToString();
  if (s.IsNoSpace()) return ResourceExhaustedError(msg);
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    return UnavailableError(msg);
  }
  if (s.IsCorruption()) return DataLossError(msg);
  if (s.IsInvalidArgument()) return InvalidArgumentError(msg);
  return InternalError(msg);
}

}  // namespace internal

namespace {

using namespace format;
using internal::CommonDbOptions;
using internal::FromRocks;

// RocksDB tuning, and why each setting differs from RocksDB's default. What an operator may
// choose is in OutboxOptions; these are fixed.
//
// Memtable sizing for a queue whose records live seconds. RocksDB stops all writes when a
// column family has max_write_buffer_number memtables that are full or flushing; with its
// default (2), the outbox-wide memtable budget switching several shards at once stopped ingest
// until a flush finished, dozens of times in a 5 s benchmark ("Stopping writes because we have
// 2 immutable memtables"). Smaller memtables, and more of them per shard, let a shard switch
// without waiting for a flush. RocksDB slows a shard's writes once all but one are waiting; with
// four, the one flush thread fell behind at the maximum (about 200 MB/s of results) in five of
// ten benchmark runs ("Stalling writes because we have 3 immutable memtables"), with five in
// none of ten. Worst-case memory per shard: 20 MiB; the outbox-wide budget that starts flushes
// (OutboxOptions::total_memtable_bytes) is unchanged.
constexpr size_t kMemtableBytes = size_t{4} << 20;
constexpr int kMemtablesPerColumnFamily = 5;
// Background threads: one flush, one compaction. A second flush thread does not help on two
// cores, and two flushes syncing the same closed log after an I/O error make RocksDB built with
// assertions (Debian's) abort, as a simulated power cut that failed all later I/O showed.
constexpr int kBackgroundJobs = 2;
// One block cache for every column family (they share one table factory), for the flushed
// blocks that a backlog's deliverers and the idempotency lookups read; twice RocksDB's default,
// and still small beside the battles on the same host.
constexpr size_t kBlockCacheBytes = size_t{16} << 20;
// Most idempotency lookups miss: a Bloom filter answers them without reading blocks, with about
// 1 % false positives at 10 bits per key.
constexpr double kBloomBitsPerKey = 10;
// A queue deletes everything it writes: a shard file is compacted early once any 8192
// consecutive entries hold 4096 tombstones, or half its entries are tombstones, so reads never
// wade through them.
constexpr size_t kTombstoneWindow = 8192;
constexpr size_t kTombstonesInWindow = 4096;
constexpr double kTombstoneRatio = 0.5;
// Most idempotency lookups miss, and most keys they look for are in the memtable: a memtable
// Bloom filter of 5 % of its size (well over ten bits per index entry) answers a miss without
// walking the skip list.
constexpr double kMetaMemtableBloomRatio = 0.05;

// Shard column families are named with three digits ("shard-999").
constexpr uint32_t kMaxShards = 1000;
// The block cache of a read-only open (operators' listings): small, as a listing reads each
// block once, and shared by every column family, so that reading a large outbox stays within
// the tools' memory bound (RocksDB's default gives each column family a cache of its own).
constexpr size_t kReadOnlyBlockCacheBytes = size_t{4} << 20;
// A damaged shard is never compacted (a compaction reading the damaged block would stop every
// write), so its level-0 files pile up until the outbox is salvaged; RocksDB would stall, then
// stop, every write of the outbox at 20 and 36 of them. These triggers keep it writing.
constexpr int kDamagedShardLevel0Trigger = 1 << 30;

// What the operator can do about a damaged outbox, appended to every error that reports one.
constexpr char kSalvageHint[] =
    "stop the node and copy what can be read into a new outbox with `verdict-node outbox salvage "
    "--outbox DIR --to NEWDIR`";

// Reads for whole-column-family scans (counting at open, listings).
rocksdb::ReadOptions ScanOptions() {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // a scan reads each block once: keep the cache for the deliverers
  return ro;
}

// Raises `value` to `to` unless it is already at or above it.
void RaiseTo(std::atomic<uint64_t>& value, uint64_t to) {
  uint64_t seen = value.load();
  while (seen < to && !value.compare_exchange_weak(seen, to)) {
  }
}

// A lock on an outbox's directory itself (flock; released with the process if it dies). A
// writable open holds it exclusively for as long as the outbox is open; a read-only one takes it
// shared while it looks and opens, if no writer holds it. So a process never takes the half of
// an outbox that another is creating (or a live one changing under it) for a damaged one.
class DirectoryLock {
 public:
  DirectoryLock() = default;
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  DirectoryLock(DirectoryLock&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), writer_present_(other.writer_present_) {}
  DirectoryLock& operator=(DirectoryLock&& other) noexcept {
    std::swap(fd_, other.fd_);
    writer_present_ = other.writer_present_;
    return *this;
  }

  // Takes the lock without waiting. Exclusive: UNAVAILABLE if another process holds the
  // directory. Shared: writer_present() if a writer holds it (then nothing is held). Nothing is
  // held either if the directory cannot be opened (absent, unreadable): the open's own checks
  // say why.
  static Result<DirectoryLock> Take(const std::string& dir, bool exclusive) {
    DirectoryLock lock;
    lock.fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock.fd_ < 0) return lock;
    int taken;
    do {
      taken = ::flock(lock.fd_, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
    } while (taken != 0 && errno == EINTR);
    if (taken == 0) return lock;
    const int why = errno;
    ::close(std::exchange(lock.fd_, -1));
    if (why != EWOULDBLOCK) {
      return UnavailableError("cannot lock the outbox directory " + dir + ": " +
                              std::strerror(why));
    }
    if (exclusive) {
      return UnavailableError("outbox " + dir +
                              " is in use by another process (a running node, or another "
                              "enqueue or outbox command)");
    }
    lock.writer_present_ = true;
    return lock;
  }

  // A shared Take found a writer: what is read may change (or be half made) while it is read.
  bool writer_present() const { return writer_present_; }

 private:
  int fd_ = -1;
  bool writer_present_ = false;
};

class OutboxImpl final : public Outbox {
 public:
  OutboxImpl(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
             uint32_t shard_count, std::string dir, const OutboxOptions& options)
      : db_(std::move(db)),
        handles_(std::move(handles)),
        shard_count_(shard_count),
        dir_(std::move(dir)),
        options_(options),
        clock_(options.clock ? options.clock : SystemClock::Default()),
        shards_(shard_count),
        damage_(shard_count) {
    write_options_.sync =
        !options.unsafe_disable_wal_for_test && !options.unsafe_skip_wal_sync_for_test;
    write_options_.disableWAL = options.unsafe_disable_wal_for_test;
    unsynced_options_.sync = false;
    unsynced_options_.disableWAL = options.unsafe_disable_wal_for_test;
  }

  // Keeps the directory's lock (DirectoryLock) until the outbox is closed.
  void HoldDirectoryLock(DirectoryLock lock) { directory_lock_ = std::move(lock); }

  ~OutboxImpl() override {
    for (SideCursor& cursor : side_cursors_) cursor.it.reset();  // before the database closes
    if (!options_.read_only) {
      // A clean close leaves nothing in the log to replay: after a drain that is one delete
      // per acked record, which made the next open take seconds after a million acks.
      rocksdb::FlushOptions flush;
      flush.allow_write_stall = true;
      if (rocksdb::Status s = db_->Flush(flush, handles_); !s.ok()) {
        Log().warn("outbox: flush on close failed ({}); the next open replays the log",
                   s.ToString());
      }
    }
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db_->Close().PermitUncheckedError();
  }

  // Rebuilds the in-memory counters, low-water marks and next sequence from disk. A shard that
  // cannot be read is marked damaged and the others load; damage anywhere else fails the open.
  Status Load() {
    uint64_t max_seen = 0;
    for (uint32_t s = 0; s < shard_count_; ++s) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ScanOptions(), ShardCf(s)));
      uint64_t records = 0, bytes = 0;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        if (records == 0) shards_[s].low_water = KeySequence(it->key());
        ++records;
        bytes += it->value().size();
        max_seen = std::max(max_seen, KeySequence(it->key()));
      }
      shards_[s].records = records;
      shards_[s].bytes = bytes;
      if (it->status().IsCorruption()) {
        MarkDamaged(s, it->status());
        // Keys beyond the damage are unknown: keep new sequences clear of any that may exist.
        max_seen = std::max(max_seen, LastKeySequence(ShardCf(s)));
        continue;
      }
      VERDICT_RETURN_IF_ERROR(FromRocks(it->status(), "scanning " + ShardCfName(s)));
    }
    for (auto [area, count] : {std::pair{SideArea::kQuarantine, &quarantined_},
                               std::pair{SideArea::kDeadLetter, &dead_lettered_}}) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ScanOptions(), SideCf(area)));
      uint64_t n = 0;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        ++n;
        max_seen = std::max(max_seen, KeySequence(it->key()));
      }
      VERDICT_RETURN_IF_ERROR(Damaged(it->status(), SideAreaName(area)));
      *count = n;
    }
    std::string stored;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), MetaCf(), kNextSequenceKey, &stored);
    if (!s.ok() && !s.IsNotFound()) return Damaged(s, "its next sequence in meta");
    const uint64_t next = (s.ok() ? DecodeNextSequence(stored) : std::nullopt).value_or(1);
    next_sequence_ = std::max({next, max_seen + 1, uint64_t{1}});
    published_ = next_sequence_.load();
    return Status::Ok();
  }

  // The shards Load or a read found damaged.
  std::vector<uint32_t> DamagedShards() const {
    std::vector<uint32_t> damaged;
    for (uint32_t s = 0; s < shard_count_; ++s) {
      if (shards_[s].damaged) damaged.push_back(s);
    }
    return damaged;
  }

  uint32_t shard_count() const override { return shard_count_; }

  Result<std::vector<EnqueueResult>> EnqueueBuffered(
      std::span<const v1::BattleResult> batch) override {
    const std::vector<int64_t> now(batch.size(), clock_->NowMs());
    return StoreNew(batch, now);
  }

  // EnqueueBuffered, each record stamped with its own enqueue time.
  Result<std::vector<EnqueueResult>> StoreNew(std::span<const v1::BattleResult> batch,
                                              std::span<const int64_t> enqueued_at_ms) {
    VERDICT_RETURN_IF_ERROR(CheckWritable());
    // While the outbox cannot write (a full disk), refuse, so the caller keeps its batch.
    VERDICT_RETURN_IF_ERROR(ResumeAfterFailure());
    MutexLock lock(&write_mu_);
    BatchInProgress b(batch, next_sequence_, enqueued_at_ms);
    LookUpEarlierCopies(b);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].room_id() == 0) {
        b.results[i].status = InvalidArgumentError("room_id 0 is not a valid room");
        continue;
      }
      auto earlier = EarlierCopy(b, i);
      if (!earlier.ok()) return earlier.status();
      if (earlier->has_value()) {
        b.results[i] = **earlier;
        continue;
      }
      AddNew(b, i);
    }
    if (b.writes.Count() > 0) VERDICT_RETURN_IF_ERROR(WriteBuffered(b));
    return std::move(b.results);
  }

  // The log is flushed by hand (manual_wal_flush): EnqueueBuffered's writes go to the log's
  // buffer in memory and to the memtables, and this call writes that buffer to the log file and
  // fsyncs it, while the writer thread goes on writing the next batches into a new buffer. The
  // disk's fsync thus overlaps the next batches' log append and memtable insert, as it did when
  // SyncWAL ran beside unsynced writes, but no unsynced write touches the file while it is being
  // synced unless the buffer overflows.
  Status SyncEnqueued() override {
    VERDICT_RETURN_IF_ERROR(CheckWritable());
    MutexLock lock(&sync_mu_);
    // Every sequence below it is in the log's buffer or a memtable.
    const uint64_t target = next_sequence_.load();
    if (published_.load() >= target) return Status::Ok();
    VERDICT_RETURN_IF_ERROR(MakeWrittenDurable());
    RaiseTo(published_, target);
    return Status::Ok();
  }

  Result<std::vector<OutboxRecord>> ReadShard(uint32_t shard, uint64_t after_sequence,
                                              size_t max_records) override {
    if (shard >= shard_count_) return InvalidArgumentError("no shard " + std::to_string(shard));
    ShardState& state = shards_[shard];
    if (state.damaged) return DataLossError(DamageOf(shard));
    const uint64_t low_water = state.low_water.load();
    const bool from_head = after_sequence < std::max<uint64_t>(low_water, 1);
    const std::string lower = SequenceKey(std::max(after_sequence + 1, low_water));
    const rocksdb::Slice lower_slice(lower);
    // Only what a sync made durable: a record written after the last sync is in a memtable
    // already, and must not be delivered before it is on disk.
    const std::string upper = SequenceKey(published_.load());
    const rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions ro;
    ro.iterate_lower_bound = &lower_slice;
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, ShardCf(shard)));

    std::vector<OutboxRecord> records;
    for (it->Seek(lower); it->Valid() && records.size() < max_records; it->Next()) {
      const uint64_t sequence = KeySequence(it->key());
      if (from_head && records.empty()) {
        // Nothing live lies below the first key found, and new keys are always larger.
        RaiseTo(state.low_water, sequence);
      }
      v1::Envelope envelope;
      if (sequence == 0 || !DecodeShardValue(it->value(), sequence, &envelope)) {
        if (!options_.read_only) {
          VERDICT_RETURN_IF_ERROR(QuarantineUndecodable(shard, it->key(), it->value()));
        }
        continue;
      }
      OutboxRecord& r = records.emplace_back();
      r.shard = shard;
      r.sequence = sequence;
      r.enqueued_at_ms = envelope.enqueued_at_ms();
      r.stored_bytes = it->value().size();
      r.result = std::move(*envelope.mutable_result());
    }
    if (it->status().IsCorruption()) {
      MarkDamaged(shard, it->status());
      return DataLossError(DamageOf(shard));
    }
    VERDICT_RETURN_IF_ERROR(FromRocks(it->status(), "reading " + ShardCfName(shard)));
    return records;
  }

  Status AckAll(std::span<const OutboxRecord> records) override {
    VERDICT_RETURN_IF_ERROR(CheckWritable());
    rocksdb::WriteBatch wb;
    for (const OutboxRecord& record : records) {
      if (record.shard >= shard_count_) return InvalidArgumentError("no such shard");
      wb.Delete(ShardCf(record.shard), SequenceKey(record.sequence));
      wb.Delete(MetaCf(), IndexKey(record.result.room_id(), record.result.ended_at_ms()));
    }
    if (records.empty()) return Status::Ok();
    VERDICT_RETURN_IF_ERROR(WriteRecovering(&wb, "ack", unsynced_options_));
    // Into the log file (not synced), so that a crash of the process alone does not lose it.
    VERDICT_RETURN_IF_ERROR(FlushLog(/*sync=*/false));
    for (const OutboxRecord& record : records) {
      Removed(record.shard, record.sequence, record.stored_bytes);
    }
    return Status::Ok();
  }

  Status DeadLetter(const OutboxRecord& record, const std::string& code,
                    const std::string& message) override {
    VERDICT_RETURN_IF_ERROR(CheckWritable());
    if (record.shard >= shard_count_) return InvalidArgumentError("no such shard");
    v1::Envelope envelope;
    envelope.set_sequence(record.sequence);
    envelope.set_enqueued_at_ms(record.enqueued_at_ms);
    *envelope.mutable_result() = record.result;
    // The lobby's words may hold any bytes; an envelope whose text is not UTF-8 cannot be read
    // back (proto3), which would make the record undecodable.
    envelope.set_reason(wire::ValidUtf8(code));
    envelope.set_detail(wire::ValidUtf8(message));
    envelope.set_shard(record.shard);
    rocksdb::WriteBatch wb;
    wb.Put(DeadLetterCf(), SequenceKey(record.sequence), SerializeEnvelope(envelope));
    wb.Delete(ShardCf(record.shard), SequenceKey(record.sequence));
    wb.Put(MetaCf(), IndexKey(record.result.room_id(), record.result.ended_at_ms()),
           EncodeIndex({Area::kDeadLetter, record.shard, record.sequence}));
    VERDICT_RETURN_IF_ERROR(WriteRecovering(&wb, "dead-letter"));
    Removed(record.shard, record.sequence, record.stored_bytes);
    ++dead_lettered_;
    return Status::Ok();
  }

  Result<std::vector<SideRecord>> ListSidePage(SideArea area, std::optional<uint64_t> room_id,
                                               uint64_t after_sequence,
                                               size_t max_records) override {
    // A read-only outbox does not change, so the page after this one continues this page's
    // iterator: a new one would read the first block of every level-0 table file past the
    // target again, which made listing a quarantine of large records quadratic in its files.
    MutexLock lock(&side_cursor_mu_);
    SideCursor& cursor = side_cursors_[area == SideArea::kQuarantine ? 0 : 1];
    std::unique_ptr<rocksdb::Iterator> fresh;
    rocksdb::Iterator* it = cursor.it.get();
    if (!options_.read_only || !it || cursor.after != after_sequence || cursor.room != room_id) {
      fresh.reset(db_->NewIterator(ScanOptions(), SideCf(area)));
      fresh->Seek(SequenceKey(after_sequence + 1));
      it = fresh.get();
    }
    std::vector<SideRecord> out;
    size_t bytes = 0;
    for (; it->Valid() && out.size() < max_records && bytes < kSidePageBytes; it->Next()) {
      SideRecord r = DecodeSide(area, it->key(), it->value());
      if (room_id && (!r.decodable || r.result.room_id() != *room_id)) continue;
      bytes += r.stored_bytes;
      out.push_back(std::move(r));
    }
    VERDICT_RETURN_IF_ERROR(Damaged(it->status(), SideAreaName(area)));
    if (options_.read_only) {
      if (fresh) cursor.it = std::move(fresh);
      cursor.after = out.empty() ? after_sequence : out.back().sequence;
      cursor.room = room_id;
    }
    return out;
  }

  Result<RedriveReport> Redrive(SideArea from, std::optional<uint64_t> room_id) override {
    VERDICT_RETURN_IF_ERROR(CheckWritable());
    RedriveReport report;
    // A page at a time: moved records leave the area, those left behind stay below `after`. The
    // writes are held for one page at a time only, so that a node redriving while it runs goes
    // on storing what its hosts post.
    for (uint64_t after = 0;;) {
      auto page = ListSidePage(from, room_id, after, kRedrivePage);
      if (!page.ok()) return page.status();
      if (page->empty()) return report;
      after = page->back().sequence;
      MutexLock lock(&write_mu_);
      // Records written and not yet synced have lower sequences than the ones given here: make
      // them durable and visible first, so a shard's records appear in sequence order.
      VERDICT_RETURN_IF_ERROR(SyncEnqueued());
      VERDICT_RETURN_IF_ERROR(RedriveOnePage(from, *page, report));
    }
  }

  Result<OutboxStats> Stats() override {
    OutboxStats stats;
    const int64_t now = clock_->NowMs();
    for (uint32_t s = 0; s < shard_count_; ++s) {
      ShardStats& st = stats.shards.emplace_back();
      st.shard = s;
      st.records = shards_[s].records.load();
      st.bytes = shards_[s].bytes.load();
      if (st.records > 0 && !shards_[s].damaged) {
        auto oldest = OldestEnqueuedAt(s);
        if (!oldest.ok() && oldest.status().code() != StatusCode::kDataLoss) {
          return oldest.status();
        }
        if (oldest.ok() && *oldest > 0) st.oldest_age_ms = std::max<int64_t>(0, now - *oldest);
      }
      if (shards_[s].damaged) {
        st.damage = DamageOf(s);
        ++stats.damaged_shards;
      }
      stats.records += st.records;
      stats.bytes += st.bytes;
    }
    stats.quarantined = quarantined_.load();
    stats.dead_lettered = dead_lettered_.load();
    struct statvfs vfs;
    if (statvfs(dir_.c_str(), &vfs) == 0) {
      stats.free_disk_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    }
    return stats;
  }

  // Stores records copied from another outbox by salvage, synced: into their shards (keeping
  // their enqueue times, in the order given), or, over max_record_bytes, into quarantine as
  // "oversize". Results as for Enqueue.
  Result<std::vector<EnqueueResult>> ImportPending(std::span<const v1::BattleResult> batch,
                                                   std::span<const int64_t> enqueued_at_ms) {
    auto results = StoreNew(batch, enqueued_at_ms);
    if (!results.ok()) return results;
    VERDICT_RETURN_IF_ERROR(SyncEnqueued());
    return results;
  }

  // Stores records copied from another outbox's quarantine or dead letter (or undecodable shard
  // values) into that area, synced, with new sequences and their reason, detail and enqueue
  // time. A decodable record whose room and end time the outbox already holds is skipped.
  // Says for each whether it was stored.
  Result<std::vector<bool>> ImportSide(std::span<const internal::SalvagedRecord> records) {
    VERDICT_RETURN_IF_ERROR(CheckWritable());
    MutexLock lock(&write_mu_);
    rocksdb::WriteBatch wb;
    std::set<std::string> indexed;
    uint64_t sequence = next_sequence_;
    std::map<SideArea, uint64_t> added;
    std::vector<bool> stored(records.size(), false);
    for (size_t i = 0; i < records.size(); ++i) {
      const internal::SalvagedRecord& r = records[i];
      v1::Envelope envelope;
      envelope.set_sequence(sequence);
      envelope.set_enqueued_at_ms(r.enqueued_at_ms);
      envelope.set_reason(r.reason);
      envelope.set_detail(r.detail);
      if (r.decodable) {
        const std::string index_key = IndexKey(r.result.room_id(), r.result.ended_at_ms());
        std::string existing;
        rocksdb::Status found = db_->Get(rocksdb::ReadOptions(), MetaCf(), index_key, &existing);
        if (!found.ok() && !found.IsNotFound()) return FromRocks(found, "reading the index");
        if (found.ok() || !indexed.insert(index_key).second) continue;
        envelope.set_shard(RoomShard(r.result.room_id(), shard_count_));
        *envelope.mutable_result() = r.result;
        wb.Put(MetaCf(), index_key,
               EncodeIndex({r.area == SideArea::kQuarantine ? Area::kQuarantine : Area::kDeadLetter,
                            envelope.shard(), sequence}));
      } else {
        envelope.set_shard(r.shard);
        envelope.set_raw(r.raw);
      }
      wb.Put(SideCf(r.area), SequenceKey(sequence), SerializeEnvelope(envelope));
      ++added[r.area];
      stored[i] = true;
      ++sequence;
    }
    if (wb.Count() == 0) return stored;
    // Written after anything buffered before, and synced: everything before it is durable.
    wb.Put(MetaCf(), kNextSequenceKey, EncodeNextSequence(sequence));
    VERDICT_RETURN_IF_ERROR(WriteRecovering(&wb, "salvage import"));
    next_sequence_ = sequence;
    RaiseTo(published_, sequence);
    for (auto [area, n] : added) SideCount(area) += n;
    return stored;
  }

 private:
  DirectoryLock directory_lock_;  // first: released after everything else is closed

  // Records Redrive moves per page: its memory bound, with ListSidePage's byte limit.
  static constexpr size_t kRedrivePage = 64;

  Status RedriveOnePage(SideArea from, const std::vector<SideRecord>& page, RedriveReport& report) {
    for (const SideRecord& r : page) {
      if (!r.decodable || wire::DeterministicBytes(r.result).size() > options_.max_record_bytes) {
        ++report.skipped;
        continue;
      }
      const uint32_t shard = RoomShard(r.result.room_id(), shard_count_);
      const uint64_t sequence = next_sequence_;
      v1::Envelope envelope;
      envelope.set_sequence(sequence);
      envelope.set_enqueued_at_ms(clock_->NowMs());
      *envelope.mutable_result() = r.result;
      const std::string value = SerializeEnvelope(envelope);
      rocksdb::WriteBatch wb;
      wb.Delete(SideCf(from), SequenceKey(r.sequence));
      wb.Put(ShardCf(shard), SequenceKey(sequence), value);
      wb.Put(MetaCf(), IndexKey(r.result.room_id(), r.result.ended_at_ms()),
             EncodeIndex({Area::kShard, shard, sequence}));
      wb.Put(MetaCf(), kNextSequenceKey, EncodeNextSequence(sequence + 1));
      VERDICT_RETURN_IF_ERROR(WriteRecovering(&wb, "redrive"));
      next_sequence_ = sequence + 1;
      RaiseTo(published_, sequence + 1);  // a synced write: everything before it is durable too
      shards_[shard].records += 1;
      shards_[shard].bytes += value.size();
      --SideCount(from);
      ++report.moved;
    }
    return Status::Ok();
  }

  struct ShardState {
    // Every live key of the shard is >= low_water; reads start here so they never walk the
    // tombstones of records already acked.
    std::atomic<uint64_t> low_water{0};
    std::atomic<uint64_t> records{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<bool> damaged{false};  // set once; the reason is in damage_
  };

  // A read of a shard met a damaged block: the shard stops (ReadShard answers DATA_LOSS) and
  // is never compacted again, while the other shards and enqueues go on.
  void MarkDamaged(uint32_t shard, const rocksdb::Status& why) {
    {
      MutexLock lock(&damage_mu_);
      if (shards_[shard].damaged) return;
      damage_[shard] = ShardCfName(shard) + " of outbox " + dir_ + " is damaged (" +
                       why.ToString() +
                       "); its delivery is stopped, the other shards go on: " + kSalvageHint;
      shards_[shard].damaged = true;
    }
    Log().error("outbox shard={}: {}", shard, DamageOf(shard));
    if (options_.read_only) return;
    const std::string trigger = std::to_string(kDamagedShardLevel0Trigger);
    rocksdb::Status s =
        db_->SetOptions(ShardCf(shard), {{"disable_auto_compactions", "true"},
                                         {"level0_slowdown_writes_trigger", trigger},
                                         {"level0_stop_writes_trigger", trigger}});
    if (!s.ok()) {
      Log().error("outbox shard={}: cannot stop its compactions: {}", shard, s.ToString());
    }
  }

  std::string DamageOf(uint32_t shard) const {
    MutexLock lock(&damage_mu_);
    return damage_[shard];
  }

  // DATA_LOSS naming the damaged `what` (quarantine, dead letter, meta) for a corruption, else
  // the error `s` is.
  Status Damaged(const rocksdb::Status& s, const std::string& what) {
    if (s.ok()) return Status::Ok();
    if (!s.IsCorruption()) return FromRocks(s, "reading " + what);
    return DataLossError("outbox " + dir_ + " is damaged: " + what + " cannot be read (" +
                         s.ToString() + "); nothing was changed: " + kSalvageHint);
  }

  // The largest sequence key of `cf`, read from its end (0 if none can be read).
  uint64_t LastKeySequence(rocksdb::ColumnFamilyHandle* cf) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ScanOptions(), cf));
    it->SeekToLast();
    return it->Valid() ? KeySequence(it->key()) : 0;
  }

  // Column family handles: shards first, then quarantine, dead-letter, meta.
  rocksdb::ColumnFamilyHandle* ShardCf(uint32_t s) const { return handles_[s]; }
  rocksdb::ColumnFamilyHandle* QuarantineCf() const { return handles_[shard_count_]; }
  rocksdb::ColumnFamilyHandle* DeadLetterCf() const { return handles_[shard_count_ + 1]; }
  rocksdb::ColumnFamilyHandle* MetaCf() const { return handles_[shard_count_ + 2]; }
  rocksdb::ColumnFamilyHandle* SideCf(SideArea a) const {
    return a == SideArea::kQuarantine ? QuarantineCf() : DeadLetterCf();
  }
  std::atomic<uint64_t>& SideCount(SideArea a) {
    return a == SideArea::kQuarantine ? quarantined_ : dead_lettered_;
  }

  Status CheckWritable() const {
    if (!options_.read_only) return Status::Ok();
    return FailedPreconditionError("the outbox " + dir_ +
                                   " is open read-only; stop the node that holds it to change it");
  }

  // A write, synced unless `options` say otherwise. After a failed write RocksDB may refuse all
  // writes until resumed (for example after the disk was full), so a failure asks it to resume
  // before the next write.
  Status WriteRecovering(rocksdb::WriteBatch* wb, const char* what) {
    return WriteRecovering(wb, what, write_options_);
  }
  Status WriteRecovering(rocksdb::WriteBatch* wb, const char* what,
                         const rocksdb::WriteOptions& options) {
    VERDICT_RETURN_IF_ERROR(ResumeAfterFailure());
    return WriteToLog(wb, what, options);
  }

  // Every write goes through here: each appends to the log. RocksDB 7.8 lets a write append to
  // the log after the log's last write failed, when it comes before that failure is recorded,
  // and its assertions (on in Debian's build) then abort the process (facebook/rocksdb#12448,
  // fixed in later releases): a node whose disk filled died at random, at about one fill in
  // forty. So writes hold log_mu_ shared and go only while no failure waits for a resume; the
  // log's flush holds it exclusively (FlushLog) and records its failure before any write can
  // follow it.
  Status WriteToLog(rocksdb::WriteBatch* wb, const char* what,
                    const rocksdb::WriteOptions& options) {
    std::shared_lock lock(log_mu_);
    if (needs_resume_) {
      return UnavailableError(std::string(what) +
                              ": the outbox's last write failed and it has not resumed yet");
    }
    Status s = FromRocks(db_->Write(options, wb), what);
    if (!s.ok()) needs_resume_ = true;
    return s;
  }

  // After a failed write or sync, asks RocksDB to resume; while it cannot (the disk is still
  // full or failing), nothing else is tried.
  Status ResumeAfterFailure() {
    if (!needs_resume_.exchange(false)) return Status::Ok();
    rocksdb::Status r = db_->Resume();
    if (r.ok()) return Status::Ok();
    needs_resume_ = true;
    return FromRocks(r, "resuming the outbox after a write failure");
  }

  // The stored copy of a record with this index key, if any. The stored record must be
  // byte-identical (`canonical`); a different one is ALREADY_EXISTS.
  Result<std::optional<EnqueueResult>> ResolveIndexHit(const std::string& raw,
                                                       const std::string& canonical) {
    std::optional<IndexEntry> entry = DecodeIndex(raw);
    if (!entry) return std::optional<EnqueueResult>();  // unreadable entry: rewrite it
    rocksdb::ColumnFamilyHandle* cf = entry->area == Area::kShard        ? ShardCf(entry->shard)
                                      : entry->area == Area::kQuarantine ? QuarantineCf()
                                                                         : DeadLetterCf();
    if (entry->area == Area::kShard && entry->shard >= shard_count_) {
      return std::optional<EnqueueResult>();
    }
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf, SequenceKey(entry->sequence), &value);
    if (s.IsNotFound()) return std::optional<EnqueueResult>();  // stale entry
    if (!s.ok()) return FromRocks(s, "reading indexed record");
    v1::Envelope envelope;
    if (!envelope.ParseFromString(value) || !envelope.has_result()) {
      return std::optional<EnqueueResult>();
    }
    EnqueueResult out;
    out.shard = entry->shard;
    out.sequence = entry->sequence;
    if (wire::DeterministicBytes(envelope.result()) != canonical) {
      out.status = AlreadyExistsError(
          "a different result for room " + std::to_string(envelope.result().room_id()) +
          " with ended_at_ms " + std::to_string(envelope.result().ended_at_ms()) +
          " is already stored");
      return std::optional<EnqueueResult>(out);
    }
    out.already_present = true;
    if (entry->area == Area::kQuarantine) {
      out.status =
          ResourceExhaustedError("result for room " + std::to_string(envelope.result().room_id()) +
                                 " is already in quarantine: " + envelope.detail());
    }
    return std::optional<EnqueueResult>(out);
  }

  // The outcome of a record enqueued again earlier in the same batch: where the first copy went
  // if the two are the same, ALREADY_EXISTS if they differ.
  static EnqueueResult Repeated(EnqueueResult first, bool same, const v1::BattleResult& result) {
    first.already_present = same;
    if (!same) {
      first.status = AlreadyExistsError(
          "a different result for room " + std::to_string(result.room_id()) + " with ended_at_ms " +
          std::to_string(result.ended_at_ms()) + " is already enqueued");
    }
    return first;
  }

  // One batch as EnqueueBuffered works through it: each record's keys and what was enqueued
  // before it, the results so far, and the batch's writes.
  struct BatchInProgress {
    BatchInProgress(std::span<const v1::BattleResult> batch, uint64_t next,
                    std::span<const int64_t> enqueued_at)
        : records(batch),
          index_values(batch.size()),
          index_statuses(batch.size()),
          results(batch.size()),
          next_sequence(next),
          enqueued_at_ms(enqueued_at) {}

    std::span<const v1::BattleResult> records;
    std::vector<std::string> index_keys;  // each record's idempotency index key
    std::vector<std::string> canonicals;  // each record's deterministic serialization
    // Each record's idempotency index entry as stored (NotFound if none).
    std::vector<rocksdb::PinnableSlice> index_values;
    std::vector<rocksdb::Status> index_statuses;
    // Index keys this batch stores (position of the first), so a record repeated within one
    // batch is stored once.
    std::unordered_map<std::string, size_t> stored_keys;
    std::vector<EnqueueResult> results;

    rocksdb::WriteBatch writes;
    std::vector<std::pair<uint32_t, size_t>> shard_growth;  // (shard, bytes) to count once written
    uint64_t quarantined = 0;
    uint64_t next_sequence;                   // the sequence the next stored record gets
    std::span<const int64_t> enqueued_at_ms;  // each record's enqueue time
  };

  // Fills the batch's index keys and canonical bytes, and looks up what each record may repeat
  // with one MultiGet of the idempotency index for the whole batch. Earlier batches are in the
  // memtables already, synced or not, so a record not found is new.
  void LookUpEarlierCopies(BatchInProgress& b) {
    b.index_keys.reserve(b.records.size());
    b.canonicals.reserve(b.records.size());
    for (const auto& result : b.records) {
      b.index_keys.push_back(IndexKey(result.room_id(), result.ended_at_ms()));
      b.canonicals.push_back(wire::DeterministicBytes(result));
    }
    const std::vector<rocksdb::Slice> key_slices(b.index_keys.begin(), b.index_keys.end());
    db_->MultiGet(rocksdb::ReadOptions(), MetaCf(), b.records.size(), key_slices.data(),
                  b.index_values.data(), b.index_statuses.data());
  }

  // The outcome of record i if it was enqueued before: earlier in this batch, or by an earlier
  // batch. Nullopt if it is new.
  Result<std::optional<EnqueueResult>> EarlierCopy(const BatchInProgress& b, size_t i) {
    if (auto earlier = b.stored_keys.find(b.index_keys[i]); earlier != b.stored_keys.end()) {
      const size_t j = earlier->second;
      return std::optional<EnqueueResult>(
          Repeated(b.results[j], b.canonicals[j] == b.canonicals[i], b.records[i]));
    }
    if (b.index_statuses[i].IsNotFound()) return std::optional<EnqueueResult>();
    if (!b.index_statuses[i].ok()) {
      return FromRocks(b.index_statuses[i], "reading idempotency index");
    }
    return ResolveIndexHit(b.index_values[i].ToString(), b.canonicals[i]);
  }

  // Gives new record i the next sequence and adds its writes to the batch: into its shard, or,
  // over max_record_bytes, refused and kept whole in quarantine with reason "oversize".
  void AddNew(BatchInProgress& b, size_t i) {
    const v1::BattleResult& result = b.records[i];
    const std::string& index_key = b.index_keys[i];
    const std::string& canonical = b.canonicals[i];
    EnqueueResult& out = b.results[i];
    b.stored_keys.emplace(index_key, i);
    out.shard = RoomShard(result.room_id(), shard_count_);
    out.sequence = b.next_sequence++;
    if (canonical.size() > options_.max_record_bytes) {
      v1::Envelope envelope;
      envelope.set_sequence(out.sequence);
      envelope.set_enqueued_at_ms(b.enqueued_at_ms[i]);
      *envelope.mutable_result() = result;
      envelope.set_reason("oversize");
      envelope.set_detail("serialized result is " + std::to_string(canonical.size()) +
                          " bytes, over the " + std::to_string(options_.max_record_bytes) +
                          "-byte limit");
      envelope.set_shard(out.shard);
      b.writes.Put(QuarantineCf(), SequenceKey(out.sequence), SerializeEnvelope(envelope));
      b.writes.Put(MetaCf(), index_key, EncodeIndex({Area::kQuarantine, out.shard, out.sequence}));
      out.status = ResourceExhaustedError("result for room " + std::to_string(result.room_id()) +
                                          " refused: " + envelope.detail() +
                                          "; kept whole in quarantine (reason oversize)");
      ++b.quarantined;
    } else {
      const std::string value = ShardValue(out.sequence, b.enqueued_at_ms[i], canonical);
      b.shard_growth.emplace_back(out.shard, value.size());
      b.writes.Put(ShardCf(out.shard), SequenceKey(out.sequence), value);
      b.writes.Put(MetaCf(), index_key, EncodeIndex({Area::kShard, out.shard, out.sequence}));
    }
  }

  // Writes the batch, and the next sequence after it, unsynced: into the log's buffer in
  // memory and the memtables. ReadShard shows none of it before the next SyncEnqueued.
  Status WriteBuffered(BatchInProgress& b) {
    b.writes.Put(MetaCf(), kNextSequenceKey, EncodeNextSequence(b.next_sequence));
    VERDICT_RETURN_IF_ERROR(WriteToLog(&b.writes, "enqueue", unsynced_options_));
    for (auto [shard, bytes] : b.shard_growth) {
      shards_[shard].records += 1;
      shards_[shard].bytes += bytes;
    }
    quarantined_ += b.quarantined;
    next_sequence_ = b.next_sequence;
    return Status::Ok();
  }

  // Writes the log's buffer to its file and fsyncs it. After a failed log write the buffer's
  // records are gone from the log but still in the memtables: once RocksDB resumes, flushing the
  // memtables to synced table files makes them durable instead.
  Status MakeWrittenDurable() REQUIRES(sync_mu_) {
    if (log_failed_) {  // never set without a log (FlushLog returns before)
      VERDICT_RETURN_IF_ERROR(ResumeAfterFailure());
      rocksdb::FlushOptions flush;
      flush.allow_write_stall = true;
      if (Status s = FromRocks(db_->Flush(flush, handles_), "flushing after a failed log write");
          !s.ok()) {
        needs_resume_ = true;
        return s;
      }
      log_failed_ = false;
    }
    return FlushLog(/*sync=*/!options_.unsafe_skip_wal_sync_for_test);
  }

  // Writes the log's buffer to its file, and fsyncs it if `sync`. Unsynced, it does what an
  // unsynced write does when the log is not flushed by hand.
  // The buffer goes to the file with every other write held off (WriteToLog), the fsync while
  // they go on, as FlushWAL(true) would do it.
  Status FlushLog(bool sync) {
    if (options_.unsafe_disable_wal_for_test) return Status::Ok();
    {
      std::unique_lock lock(log_mu_);
      if (Status s = FromRocks(db_->FlushWAL(/*sync=*/false), "writing the outbox log"); !s.ok()) {
        needs_resume_ = true;
        log_failed_ = true;
        return s;
      }
    }
    if (!sync) return Status::Ok();
    Status s = FromRocks(db_->SyncWAL(), "syncing the outbox log");
    if (!s.ok()) {
      needs_resume_ = true;
      log_failed_ = true;
    }
    return s;
  }

  Status QuarantineUndecodable(uint32_t shard, const rocksdb::Slice& key,
                               const rocksdb::Slice& value) {
    const uint64_t sequence = KeySequence(key);
    v1::Envelope envelope;
    envelope.set_sequence(sequence);
    envelope.set_reason("undecodable");
    envelope.set_detail("value of " + std::to_string(value.size()) + " bytes in " +
                        ShardCfName(shard) + " is not a valid envelope");
    envelope.set_shard(shard);
    envelope.set_raw(value.data(), value.size());
    rocksdb::WriteBatch wb;
    wb.Put(QuarantineCf(), key, SerializeEnvelope(envelope));
    wb.Delete(ShardCf(shard), key);
    VERDICT_RETURN_IF_ERROR(WriteRecovering(&wb, "quarantine"));
    LogLimited(Log(), quarantine_log_, spdlog::level::warn,
               "outbox shard={} sequence={}: {}; moved to quarantine", shard, sequence,
               envelope.detail());
    Removed(shard, sequence, value.size());
    ++quarantined_;
    return Status::Ok();
  }

  SideRecord DecodeSide(SideArea area, const rocksdb::Slice& key, const rocksdb::Slice& value) {
    SideRecord r;
    r.area = area;
    r.sequence = KeySequence(key);
    r.stored_bytes = value.size();
    v1::Envelope envelope;
    if (!envelope.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      r.reason = "undecodable";
      r.detail = "side record itself is unreadable";
      return r;
    }
    r.shard = envelope.shard();
    r.enqueued_at_ms = envelope.enqueued_at_ms();
    r.reason = envelope.reason();
    r.detail = envelope.detail();
    r.decodable = envelope.has_result();
    if (r.decodable) r.result = std::move(*envelope.mutable_result());
    return r;
  }

  // The enqueue time of the shard's first decodable record (0 if none). Unlike ReadShard it
  // quarantines nothing, so any thread may call it; it only raises the mark to the first live key.
  Result<int64_t> OldestEnqueuedAt(uint32_t shard) {
    ShardState& state = shards_[shard];
    const std::string lower = SequenceKey(state.low_water.load());
    const rocksdb::Slice lower_slice(lower);
    rocksdb::ReadOptions ro;
    ro.iterate_lower_bound = &lower_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, ShardCf(shard)));
    it->Seek(lower);
    // Nothing live lies below the first key found, and new keys are always larger.
    if (it->Valid()) RaiseTo(state.low_water, KeySequence(it->key()));
    for (; it->Valid(); it->Next()) {
      v1::Envelope envelope;
      if (DecodeShardValue(it->value(), KeySequence(it->key()), &envelope)) {
        return envelope.enqueued_at_ms();
      }
    }
    if (it->status().IsCorruption()) {
      MarkDamaged(shard, it->status());
      return DataLossError(DamageOf(shard));
    }
    VERDICT_RETURN_IF_ERROR(FromRocks(it->status(), "reading " + ShardCfName(shard)));
    return int64_t{0};
  }

  void Removed(uint32_t shard, uint64_t sequence, size_t bytes) {
    ShardState& state = shards_[shard];
    // Records leave out of order (a room in backoff keeps its record while later rooms are
    // acked), so the mark moves only past the record at the mark itself; ReadShard from the head
    // and OldestEnqueuedAt move it past the rest.
    uint64_t at_mark = sequence;
    state.low_water.compare_exchange_strong(at_mark, sequence + 1);
    state.records -= 1;
    state.bytes -= std::min<uint64_t>(bytes, state.bytes.load());
  }

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  const uint32_t shard_count_;
  const std::string dir_;
  const OutboxOptions options_;
  const Clock* clock_;
  rocksdb::WriteOptions write_options_;     // synced
  rocksdb::WriteOptions unsynced_options_;  // acks, and EnqueueBuffered until SyncEnqueued

  // Lock order: write_mu_, then sync_mu_.
  Mutex write_mu_;  // serializes sequence allocation and the writes that use it
  // Every sequence below it is written (for EnqueueBuffered, to the log's buffer and the
  // memtables); the next record gets it.
  std::atomic<uint64_t> next_sequence_{1};
  std::vector<ShardState> shards_;
  mutable Mutex damage_mu_;
  std::vector<std::string> damage_ GUARDED_BY(damage_mu_);  // each damaged shard's reason
  // Where the last ListSidePage of each side area stopped (read-only outboxes only).
  struct SideCursor {
    std::unique_ptr<rocksdb::Iterator> it;  // at the entry after the last one returned
    uint64_t after = 0;                     // the last sequence returned
    std::optional<uint64_t> room;
  };
  Mutex side_cursor_mu_;
  SideCursor side_cursors_[2] GUARDED_BY(side_cursor_mu_);  // quarantine, dead letter
  std::atomic<uint64_t> quarantined_{0};
  std::atomic<uint64_t> dead_lettered_{0};
  // A damaged stretch of a shard quarantines record after record: one line each, up to a limit.
  LogRateLimit quarantine_log_{RepeatedFaultLimit()};
  std::atomic<bool> needs_resume_{false};
  // Shared by each write, exclusive while the log's buffer goes to its file (WriteToLog says why).
  // Innermost: taken after write_mu_ or sync_mu_, never before them.
  std::shared_mutex log_mu_;

  // Every sequence below it is durable, and only those are visible to ReadShard.
  std::atomic<uint64_t> published_{1};
  std::atomic<bool> log_failed_{false};  // a log write failed: flush the memtables before syncing
  Mutex sync_mu_;                        // one SyncEnqueued at a time
};

// RocksDB's info log, sent to the process's log instead of a LOG file in the outbox. On a full
// disk a LOG file cannot be written, and RocksDB (as Debian builds it, with assertions) aborts
// the process at the next line it tries to log there: a full disk must stall the node (P6), not
// kill it. Warnings and errors only; RocksDB's routine chatter stays out of the journal.
class RocksLogToSpdlog final : public rocksdb::Logger {
 public:
  RocksLogToSpdlog() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char line[kMaxLineBytes];  // longer lines are cut
    std::vsnprintf(line, sizeof(line), format, ap);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      Log().error("outbox (rocksdb): {}", line);
    } else {
      LogLimited(Log(), warnings_, spdlog::level::warn, "outbox (rocksdb): {}", line);
    }
  }

 private:
  // A failing disk repeats RocksDB's warnings (a background write retried): a few, then one a
  // second. Its errors are never held back.
  LogRateLimit warnings_{RepeatedFaultLimit()};
  static constexpr size_t kMaxLineBytes = 1024;
};

// Records each column family's oldest log still needed, which RocksDB hands to a WAL filter
// before it replays the logs: the logs below the smallest were flushed and are not read again.
class LogNumberProbe final : public rocksdb::WalFilter {
 public:
  void ColumnFamilyLogNumberMap(const std::map<uint32_t, uint64_t>& log_numbers,
                                const std::map<std::string, uint32_t>&) override {
    for (const auto& [cf, number] : log_numbers) min_ = std::min(min_.value_or(number), number);
  }
  const char* Name() const override { return "verdict.LogNumberProbe"; }
  // 0 when RocksDB found no log to replay.
  uint64_t min_log_number() const { return min_.value_or(0); }

 private:
  std::optional<uint64_t> min_;
};

// A RocksDB open's error in words that say what is wrong: the lock is held (UNAVAILABLE), this
// process may not use a file or the file system is read-only (FAILED_PRECONDITION), the files
// are damaged (DATA_LOSS). Whether a lock is held is told by the lock call's own error, not by
// the word "lock" (opening the LOCK file can fail for want of permission).
Status OpenError(const rocksdb::Status& s, const std::string& dir, const std::string& doing) {
  const std::string text = s.ToString();
  auto says = [&text](const char* part) { return text.find(part) != std::string::npos; };
  if (says("While lock file") || says("lock hold by current process")) {
    return UnavailableError("outbox " + dir + " is in use by another process: " + text);
  }
  if (says("Permission denied")) {
    return FailedPreconditionError("permission denied " + doing + " outbox " + dir + ": " + text +
                                   "; run as the outbox's owner, or fix its permissions");
  }
  if (says("Read-only file system")) {
    return FailedPreconditionError("outbox " + dir + " is on a read-only file system: " + text);
  }
  if (s.IsCorruption() || s.IsPathNotFound()) {
    return DataLossError("outbox " + dir + " is damaged: " + text +
                         "; nothing was changed: " + kSalvageHint);
  }
  return FromRocks(s, doing + " outbox " + dir);
}

Status ReadOnlyFileSystem(const std::string& dir) {
  return FailedPreconditionError("outbox " + dir +
                                 " is on a read-only file system: the node cannot write its "
                                 "outbox there (outbox stats, ls and show can read it)");
}

// FAILED_PRECONDITION if this process may not read `dir` (and, if `writable`, write it), or if
// `writable` and it is on a read-only file system.
Status CheckAccess(const std::string& dir, bool writable) {
  const int mode = R_OK | X_OK | (writable ? W_OK : 0);
  if (::faccessat(AT_FDCWD, dir.c_str(), mode, AT_EACCESS) != 0) {
    const int err = errno;
    if (err == EROFS) return ReadOnlyFileSystem(dir);
    if (err != EACCES && err != EPERM) {
      return UnavailableError("cannot check access to outbox " + dir + ": " + std::strerror(err));
    }
    struct stat st {};
    ::stat(dir.c_str(), &st);
    char owner[96];
    std::snprintf(owner, sizeof(owner), "owner uid %u, mode %04o", st.st_uid,
                  static_cast<unsigned>(st.st_mode & 07777));
    return FailedPreconditionError(
        "permission denied: this process (uid " + std::to_string(::geteuid()) + ") may not " +
        (writable ? "read and write" : "read") + " the outbox directory " + dir + " (" + owner +
        "); run it as the directory's owner, or fix the permissions");
  }
  struct statvfs vfs;
  if (writable && ::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) {
    return ReadOnlyFileSystem(dir);
  }
  return Status::Ok();
}

// "MANIFEST-000005, 000004.log and 3 table files": what a directory holds, briefly.
std::string Summary(const std::vector<std::string>& files) {
  std::vector<std::string> named;
  size_t tables = 0;
  for (const std::string& f : files) {
    if (f.ends_with(".sst")) {
      ++tables;
    } else if (f.starts_with("MANIFEST-") || f.ends_with(".log")) {
      named.push_back(f);
    }
  }
  if (tables) named.push_back(std::to_string(tables) + " table file" + (tables > 1 ? "s" : ""));
  if (named.empty()) named = files;
  std::string out;
  for (size_t i = 0; i < named.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == named.size() ? " and " : ", ") + named[i];
  }
  return out;
}

enum class Found { kNothing, kOutbox };

// What `dir` holds, checked before RocksDB is let near it: nothing (absent or empty: a new
// outbox may be made there), or an outbox (it has CURRENT). Anything else is an error, so that
// nothing is ever created over a damaged outbox or another program's files.
Result<Found> InspectDirectory(const std::string& dir, bool writable) {
  auto contents = internal::ListDirectory(dir);
  if (!contents.ok()) return contents.status();
  if (!contents->exists) return Found::kNothing;
  VERDICT_RETURN_IF_ERROR(CheckAccess(dir, writable));
  if (contents->has_current) return Found::kOutbox;
  if (!contents->database_files.empty()) {
    return DataLossError(
        "outbox " + dir + " is damaged: it holds an outbox's files (" +
        Summary(contents->database_files) +
        ") but no CURRENT file, which names its manifest; nothing was changed: " + kSalvageHint +
        " (an outbox whose creation was interrupted holds no results: empty the "
        "directory)");
  }
  if (!contents->other_files.empty()) {
    return FailedPreconditionError(dir + " holds files (" + Summary(contents->other_files) +
                                   ") but no outbox; an outbox is made only in an empty or "
                                   "absent directory");
  }
  return Found::kNothing;
}

bool IsOurColumnFamily(const std::string& name) {
  return name == kMetaCf || name == kQuarantineCf || name == kDeadLetterCf ||
         name.starts_with("shard-");
}

// Refuses a manifest that lost track of the outbox's column families (truncated or damaged:
// RocksDB reads a manifest up to its first bad record and takes that for the whole), and a
// database that is not an outbox. The newest OPTIONS file RocksDB wrote names every column
// family the outbox had when it was last opened.
Status CheckColumnFamilies(const std::string& dir, const std::vector<std::string>& listed,
                           const rocksdb::DBOptions& db_options) {
  rocksdb::ConfigOptions config;
  config.ignore_unknown_options = true;
  config.env = db_options.env;
  rocksdb::DBOptions recorded_db;
  std::vector<rocksdb::ColumnFamilyDescriptor> recorded;
  if (!rocksdb::LoadLatestOptions(config, dir, &recorded_db, &recorded).ok()) recorded.clear();
  auto in = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> missing;
  bool ours = std::any_of(listed.begin(), listed.end(), IsOurColumnFamily);
  for (const auto& cf : recorded) {
    ours = ours || IsOurColumnFamily(cf.name);
    if (!in(listed, cf.name)) missing.push_back(cf.name);
  }
  if (!ours) {
    return FailedPreconditionError(dir + " is a RocksDB database but not a verdict outbox");
  }
  if (missing.empty() && in(listed, kMetaCf)) return Status::Ok();
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 4; ++i) names += (i ? ", " : "") + missing[i];
  if (missing.size() > 4) names += ", …";
  return DataLossError(
      "outbox " + dir + " is damaged: its manifest names " + std::to_string(listed.size()) +
      " column famil" + (listed.size() == 1 ? "y" : "ies") + ", " +
      (missing.empty()
           ? std::string("without meta")
           : "without " + std::to_string(missing.size()) + " (" + names + ") that the outbox had") +
      ": the MANIFEST file is truncated or damaged; nothing was changed: " + kSalvageHint);
}

std::string LogDamageMessage(const std::string& dir, const LogScan& scan) {
  const LogDamage& d = scan.damage.front();
  return "outbox " + dir + " is damaged: its write-ahead log " + d.file +
         " cannot be read at byte offset " + std::to_string(d.offset) + " (" + d.what + ", " +
         std::to_string(d.bytes) + " bytes), and " +
         std::to_string(scan.intact_records_after_damage) + " stored write batch(es) of " +
         std::to_string(scan.intact_bytes_after_damage) +
         " bytes follow it that opening would drop; nothing was changed: " + kSalvageHint;
}

// Looks at an existing outbox through a read-only open, which writes nothing: its column
// families and shard count, and whether a log is damaged before its end. Returns the shard
// count.
Result<uint32_t> ExamineExisting(const std::string& dir, const OutboxOptions& options) {
  rocksdb::DBOptions db_options = CommonDbOptions(options);
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, dir, &names);
  if (!s.ok()) return OpenError(s, dir, "reading the manifest of");
  VERDICT_RETURN_IF_ERROR(CheckColumnFamilies(dir, names, db_options));

  LogNumberProbe probe;
  db_options.wal_filter = &probe;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, internal::ReadOnlyColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::OpenForReadOnly(db_options, dir, descriptors, &handles, &raw);
  rocksdb::FileSystem& fs = *db_options.env->GetFileSystem();
  if (!s.ok()) {
    // A damaged log can fail recovery outright (data in a table file beyond the damage): say
    // where the damage is if a log shows it.
    if (s.IsCorruption()) {
      auto scan = ScanLogs(fs, dir, 0);
      if (scan.ok() && scan->intact_records_after_damage > 0) {
        return DataLossError(LogDamageMessage(dir, *scan));
      }
    }
    return OpenError(s, dir, "reading");
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  const size_t meta = std::find(names.begin(), names.end(), kMetaCf) - names.begin();
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), handles[meta], kShardCountKey, &value);
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  db.reset();
  const std::optional<uint32_t> count = s.ok() ? DecodeShardCount(value) : std::nullopt;
  if (!count) {
    return DataLossError("outbox " + dir + " is damaged: its meta column family has no readable " +
                         "shard count (" +
                         (s.ok()           ? "a value of the wrong size"
                          : s.IsNotFound() ? "none stored"
                                           : s.ToString()) +
                         "; a truncated MANIFEST loses it); nothing was changed: " + kSalvageHint);
  }
  if (!options.unsafe_skip_log_check_for_test) {
    auto scan = ScanLogs(fs, dir, probe.min_log_number());
    if (!scan.ok()) return scan.status();
    if (scan->intact_records_after_damage > 0) return DataLossError(LogDamageMessage(dir, *scan));
    if (!scan->damage.empty()) {
      const LogDamage& tail = scan->damage.front();
      Log().warn(
          "outbox {}: log {} ends in {} unreadable bytes at offset {} ({}): a write torn "
          "by a crash or power cut, never reported stored",
          dir, tail.file, tail.bytes, tail.offset, tail.what);
    }
  }
  return *count;
}

// The column family descriptors of an outbox with `shard_count` shards, in handle order.
std::vector<rocksdb::ColumnFamilyDescriptor> Descriptors(uint32_t shard_count,
                                                         const rocksdb::ColumnFamilyOptions& base,
                                                         const rocksdb::ColumnFamilyOptions& shard,
                                                         const rocksdb::ColumnFamilyOptions& meta) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (uint32_t s = 0; s < shard_count; ++s) descriptors.emplace_back(ShardCfName(s), shard);
  descriptors.emplace_back(kQuarantineCf, base);
  descriptors.emplace_back(kDeadLetterCf, base);
  descriptors.emplace_back(kMetaCf, meta);
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, base);
  return descriptors;
}

Result<std::unique_ptr<Outbox>> OpenOutboxReadOnly(const std::string& dir,
                                                   const OutboxOptions& options) {
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  const rocksdb::ColumnFamilyOptions cf = internal::ReadOnlyColumnFamilyOptions();
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(
      CommonDbOptions(options), dir, Descriptors(options.shard_count, cf, cf, cf), &handles, &raw);
  if (!s.ok()) return OpenError(s, dir, "reading");
  std::unique_ptr<rocksdb::DB> db(raw);
  db->DestroyColumnFamilyHandle(handles.back()).PermitUncheckedError();
  handles.pop_back();
  auto outbox = std::make_unique<OutboxImpl>(std::move(db), std::move(handles), options.shard_count,
                                             dir, options);
  VERDICT_RETURN_IF_ERROR(outbox->Load());
  return std::unique_ptr<Outbox>(std::move(outbox));
}

// Made here rather than by RocksDB, which logs an error about the missing directory first.
Status CreateOutboxDirectory(const std::string& dir) {
  std::error_code mkdir_error;
  std::filesystem::create_directories(dir, mkdir_error);
  if (!mkdir_error) return Status::Ok();
  const std::string why = "cannot create outbox directory " + dir + ": " + mkdir_error.message();
  if (mkdir_error == std::errc::no_space_on_device) return ResourceExhaustedError(why);
  if (mkdir_error == std::errc::read_only_file_system ||
      mkdir_error == std::errc::permission_denied) {
    return FailedPreconditionError(why);
  }
  return UnavailableError(why);
}

// The database options of an open for writing: the operator's choices from `options`, and the
// tuning named at the top of this file. Creates a database only if `create`.
rocksdb::DBOptions WritableDbOptions(const OutboxOptions& options, bool create) {
  rocksdb::DBOptions db_options = CommonDbOptions(options);
  db_options.create_if_missing = create;
  db_options.create_missing_column_families = create;
  db_options.max_total_wal_size = options.max_total_wal_size;
  db_options.db_write_buffer_size = options.total_memtable_bytes;
  db_options.max_background_jobs = kBackgroundJobs;
  // A write group's log stage runs beside the previous group's memtable stage, so deliverers'
  // acks and the next batch need not wait for the memtable insert of a large batch.
  db_options.enable_pipelined_write = true;
  // Writes fill the log's buffer in memory; SyncEnqueued writes and fsyncs it (see there).
  db_options.manual_wal_flush = true;
  db_options.allow_fallocate = options.preallocate_files;
  return db_options;
}

// The column families of an open for writing, tuned for a queue (see the top of this file).
// The `damaged` shards are never compacted (see kDamagedShardLevel0Trigger).
std::vector<rocksdb::ColumnFamilyDescriptor> WritableDescriptors(
    uint32_t shard_count, const std::vector<uint32_t>& damaged) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(kBloomBitsPerKey));
  rocksdb::ColumnFamilyOptions base;
  base.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  base.write_buffer_size = kMemtableBytes;
  base.max_write_buffer_number = kMemtablesPerColumnFamily;

  rocksdb::ColumnFamilyOptions shard_options = base;
  shard_options.table_properties_collector_factories.emplace_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(kTombstoneWindow, kTombstonesInWindow,
                                                    kTombstoneRatio));
  // Records live seconds in the common case; compressing them on flush is CPU the writer
  // needs (ingest is CPU-bound on small hosts).
  shard_options.compression = rocksdb::kNoCompression;

  rocksdb::ColumnFamilyOptions meta_options = base;
  meta_options.memtable_whole_key_filtering = true;  // index keys have no prefix extractor
  meta_options.memtable_prefix_bloom_size_ratio = kMetaMemtableBloomRatio;

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors =
      Descriptors(shard_count, base, shard_options, meta_options);
  for (uint32_t shard : damaged) {
    rocksdb::ColumnFamilyOptions& stopped = descriptors[shard].options;
    stopped.disable_auto_compactions = true;
    stopped.level0_slowdown_writes_trigger = kDamagedShardLevel0Trigger;
    stopped.level0_stop_writes_trigger = kDamagedShardLevel0Trigger;
  }
  return descriptors;
}

// Writes a new outbox's shard count, synced, to its meta column family.
Status RecordShardCount(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* meta, uint32_t shard_count) {
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return FromRocks(db.Put(sync, meta, kShardCountKey, EncodeShardCount(shard_count)),
                   "recording shard count");
}

// Opens the outbox in `dir` for writing, or creates it (`create`: `dir` is absent or empty),
// with the `damaged` shards' compactions off.
Result<std::unique_ptr<OutboxImpl>> OpenWritableOnce(const std::string& dir,
                                                     const OutboxOptions& options, bool create,
                                                     const std::vector<uint32_t>& damaged) {
  if (create) VERDICT_RETURN_IF_ERROR(CreateOutboxDirectory(dir));
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(WritableDbOptions(options, create), dir,
                        WritableDescriptors(options.shard_count, damaged), &handles, &raw);
  if (!s.ok()) return OpenError(s, dir, create ? "creating" : "opening");
  std::unique_ptr<rocksdb::DB> db(raw);
  db->DestroyColumnFamilyHandle(handles.back()).PermitUncheckedError();  // default: unused
  handles.pop_back();

  if (create) {
    if (Status recorded = RecordShardCount(*db, handles.back(), options.shard_count);
        !recorded.ok()) {
      for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
      return recorded;
    }
  }
  auto outbox = std::make_unique<OutboxImpl>(std::move(db), std::move(handles), options.shard_count,
                                             dir, options);
  VERDICT_RETURN_IF_ERROR(outbox->Load());
  return outbox;
}

// OpenWritableOnce; and if Load finds a damaged shard, again with that shard's compactions off
// from the start, so that none reads the damaged block (which stops every write of the outbox
// until it is reopened), not even one RocksDB began before Load reached the damage. (Turning
// them off on the open outbox costs an options file written and fsynced per column family.)
Result<std::unique_ptr<OutboxImpl>> OpenWritable(const std::string& dir,
                                                 const OutboxOptions& options, bool create) {
  auto outbox = OpenWritableOnce(dir, options, create, {});
  if (!outbox.ok() || (*outbox)->DamagedShards().empty()) return outbox;
  const std::vector<uint32_t> damaged = (*outbox)->DamagedShards();
  outbox->reset();
  return OpenWritableOnce(dir, options, /*create=*/false, damaged);
}

class ImportTargetImpl final : public internal::ImportTarget {
 public:
  explicit ImportTargetImpl(std::unique_ptr<OutboxImpl> outbox) : outbox_(std::move(outbox)) {}
  uint32_t shard_count() const override { return outbox_->shard_count(); }
  Result<std::vector<EnqueueResult>> ImportPending(
      std::span<const v1::BattleResult> batch, std::span<const int64_t> enqueued_at_ms) override {
    return outbox_->ImportPending(batch, enqueued_at_ms);
  }
  Result<std::vector<bool>> ImportSide(std::span<const internal::SalvagedRecord> records) override {
    return outbox_->ImportSide(records);
  }

 private:
  std::unique_ptr<OutboxImpl> outbox_;
};

}  // namespace

namespace internal {

rocksdb::DBOptions CommonDbOptions(const OutboxOptions& options) {
  rocksdb::DBOptions db_options;
  db_options.info_log = std::make_shared<RocksLogToSpdlog>();
  if (options.env) db_options.env = options.env.get();
  return db_options;
}

rocksdb::ColumnFamilyOptions ReadOnlyColumnFamilyOptions() {
  static const std::shared_ptr<rocksdb::TableFactory> table = [] {
    rocksdb::BlockBasedTableOptions options;
    options.block_cache = rocksdb::NewLRUCache(kReadOnlyBlockCacheBytes);
    return std::shared_ptr<rocksdb::TableFactory>(rocksdb::NewBlockBasedTableFactory(options));
  }();
  rocksdb::ColumnFamilyOptions cf;
  cf.table_factory = table;
  return cf;
}

Result<DirectoryContents> ListDirectory(const std::string& dir) {
  DirectoryContents out;
  std::error_code error;
  const auto status = std::filesystem::status(dir, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    if (error == std::errc::permission_denied) {
      return FailedPreconditionError("permission denied: this process (uid " +
                                     std::to_string(::geteuid()) + ") cannot reach " + dir);
    }
    return UnavailableError("cannot look at " + dir + ": " + error.message());
  }
  if (!std::filesystem::exists(status)) return out;
  if (!std::filesystem::is_directory(status)) {
    return FailedPreconditionError(dir + " is not a directory");
  }
  out.exists = true;
  std::filesystem::directory_iterator it(dir, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name == "lost+found") continue;  // a file system's own, when the outbox is its root
    if (name == "CURRENT") {
      out.has_current = true;
    } else if (name == "IDENTITY" || name == "LOCK" || name == "LOG" || name.starts_with("LOG.") ||
               name.starts_with("MANIFEST-") || name.starts_with("OPTIONS-") ||
               name.ends_with(".sst") || name.ends_with(".log") || name.ends_with(".dbtmp")) {
      out.database_files.push_back(name);
    } else {
      out.other_files.push_back(name);
    }
  }
  if (error == std::errc::permission_denied) {
    if (Status denied = CheckAccess(dir, false); !denied.ok()) return denied;
  }
  if (error) return UnavailableError("cannot list " + dir + ": " + error.message());
  std::sort(out.database_files.begin(), out.database_files.end());
  std::sort(out.other_files.begin(), out.other_files.end());
  return out;
}

Status CheckNewOutboxDirectory(const std::string& dir) {
  auto found = InspectDirectory(dir, /*writable=*/true);
  if (!found.ok()) return found.status();
  if (*found == Found::kOutbox) {
    return FailedPreconditionError(dir + " holds an outbox already; give a new directory");
  }
  return Status::Ok();
}

Result<std::unique_ptr<ImportTarget>> CreateOutboxForImport(const std::string& dir,
                                                            const OutboxOptions& options) {
  VERDICT_RETURN_IF_ERROR(CheckNewOutboxDirectory(dir));
  auto outbox = OpenWritable(dir, options, /*create=*/true);
  if (!outbox.ok()) return outbox.status();
  return std::unique_ptr<ImportTarget>(std::make_unique<ImportTargetImpl>(std::move(*outbox)));
}

}  // namespace internal

const char* SideAreaName(SideArea area) {
  return area == SideArea::kQuarantine ? "quarantine" : "dead-letter";
}

uint64_t RoomHash(uint64_t room_id) {
  uint64_t z = room_id + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {

// A read-only open, without the directory's lock (OpenOutbox takes it).
Result<std::unique_ptr<Outbox>> OpenReadOnly(const std::string& dir, const OutboxOptions& options) {
  auto found = InspectDirectory(dir, /*writable=*/false);
  if (!found.ok()) return found.status();
  if (*found == Found::kNothing) return NotFoundError("no outbox in " + dir);
  auto existing = ExamineExisting(dir, options);
  if (!existing.ok()) return existing.status();
  OutboxOptions adopted = options;
  adopted.shard_count = *existing;
  return OpenOutboxReadOnly(dir, adopted);
}

}  // namespace

Result<std::unique_ptr<Outbox>> OpenOutbox(const std::string& dir, const OutboxOptions& options) {
  if (options.shard_count == 0 || options.shard_count > kMaxShards) {
    return InvalidArgumentError("shard count must be between 1 and " + std::to_string(kMaxShards) +
                                ", got " + std::to_string(options.shard_count));
  }
  if (options.read_only) {
    auto lock = DirectoryLock::Take(dir, /*exclusive=*/false);
    if (!lock.ok()) return lock.status();
    auto opened = OpenReadOnly(dir, options);
    // An outbox a writer holds may be half created, or change (files replaced by a flush)
    // while it is read: not damage, only a reading to try again.
    if (lock->writer_present() && !opened.ok() &&
        (opened.status().code() == StatusCode::kDataLoss ||
         opened.status().code() == StatusCode::kNotFound)) {
      return UnavailableError("outbox " + dir + " is in use by a process writing it, and " +
                              "changed while it was read (" + opened.status().message() +
                              "); try again");
    }
    return opened;
  }
  // One writer at a time decides what the directory holds and opens or creates it; it keeps the
  // directory until it closes the outbox.
  VERDICT_RETURN_IF_ERROR(CreateOutboxDirectory(dir));
  auto lock = DirectoryLock::Take(dir, /*exclusive=*/true);
  if (!lock.ok()) return lock.status();
  auto found = InspectDirectory(dir, /*writable=*/true);
  if (!found.ok()) return found.status();
  Result<std::unique_ptr<OutboxImpl>> opened = InternalError("not opened");
  if (*found == Found::kNothing) {
    opened = OpenWritable(dir, options, /*create=*/true);
  } else {
    auto existing = ExamineExisting(dir, options);
    if (!existing.ok()) return existing.status();
    if (*existing != options.shard_count && !options.adopt_existing_shard_count) {
      return FailedPreconditionError(
          "outbox " + dir + " was created with " + std::to_string(*existing) +
          " shards but was opened with " + std::to_string(options.shard_count) + "; open it with " +
          std::to_string(*existing) + " shards or reshard it explicitly");
    }
    OutboxOptions adopted = options;
    adopted.shard_count = *existing;
    opened = OpenWritable(dir, adopted, /*create=*/false);
  }
  if (!opened.ok()) return opened.status();
  (*opened)->HoldDirectoryLock(std::move(lock).value());
  return std::unique_ptr<Outbox>(std::move(*opened));
}

}  // namespace verdict::storage
