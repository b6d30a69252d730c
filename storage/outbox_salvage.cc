#include "storage/outbox_salvage.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <unordered_set>

#include <rocksdb/db.h>
#include <rocksdb/file_system.h>
#include <rocksdb/write_batch.h>

#include "storage/log_scan.h"
#include "storage/outbox_format.h"
#include "storage/outbox_internal.h"

namespace verdict::storage {
namespace {

namespace fs = std::filesystem;
using namespace format;
using internal::FromRocks;
using internal::SalvagedRecord;

const uint32_t kDefaultShards = OutboxOptions{}.shard_count;
// Records and bytes copied per write into the new outbox: its memory bound while copying.
constexpr size_t kImportRecords = 256;
constexpr size_t kImportBytes = size_t{4} << 20;
constexpr uint64_t kProgressEvery = 10'000;

// A copy of the damaged outbox beside the new one, for RocksDB to read what it cannot read in
// place: made of hard links (copies across file systems), with each damaged log rewritten
// without its damage (CopyReadableLog), and a CURRENT naming the newest manifest if it had
// none. Removed with the object.
class WorkingCopy {
 public:
  ~WorkingCopy() {
    if (path_.empty()) return;
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }

  // `manifest`: the manifest a new CURRENT names, or empty to keep the outbox's CURRENT.
  Status Make(const std::string& from, const std::string& path, const std::string& manifest,
              const std::set<std::string>& damaged_logs) {
    std::error_code error;
    fs::remove_all(path, error);
    fs::create_directories(path, error);
    if (error) return UnavailableError("cannot make " + path + ": " + error.message());
    path_ = path;
    for (const auto& entry : fs::directory_iterator(from, error)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file() || name == "LOCK" || damaged_logs.count(name)) continue;
      const fs::path target = fs::path(path) / name;
      fs::create_hard_link(entry.path(), target, error);
      if (error) fs::copy_file(entry.path(), target, error);
      if (error) {
        return UnavailableError("cannot copy " + entry.path().string() + ": " + error.message());
      }
    }
    if (error) return UnavailableError("cannot list " + from + ": " + error.message());
    for (const std::string& log : damaged_logs) {
      VERDICT_RETURN_IF_ERROR(CopyReadableLog(*rocksdb::FileSystem::Default(), from, log, path));
    }
    if (manifest.empty()) return Status::Ok();
    std::ofstream current(path + "/CURRENT", std::ios::trunc);
    current << manifest << "\n";
    if (!current.flush()) return UnavailableError("cannot write " + path + "/CURRENT");
    return Status::Ok();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The newest manifest among `files` ("MANIFEST-000012"), or empty.
std::string NewestManifest(const std::vector<std::string>& files) {
  std::string newest;
  uint64_t newest_number = 0;
  for (const std::string& f : files) {
    if (!f.starts_with("MANIFEST-")) continue;
    const uint64_t number = std::strtoull(f.c_str() + 9, nullptr, 10);
    if (newest.empty() || number > newest_number) {
      newest = f;
      newest_number = number;
    }
  }
  return newest;
}

// What a write batch of the outbox stores, as far as it can be taken apart: the records it puts
// (their sequences, and rooms) through their values and through their index entries. A put it
// cannot make sense of is counted: what it held is unknown.
class BatchContents final : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    const std::string k = key.ToString();
    const std::string index_prefix = IndexKey(0, 0).substr(0, 1);
    v1::Envelope envelope;
    if (k == kNextSequenceKey || k == kShardCountKey) return rocksdb::Status::OK();
    if (k.size() == IndexKey(0, 0).size() && k.starts_with(index_prefix)) {
      if (auto entry = DecodeIndex(value.ToString())) {
        records.emplace_back(entry->sequence, GetBigEndian(k.data() + 1, 8));
        return rocksdb::Status::OK();
      }
    } else if (const uint64_t sequence = KeySequence(key); sequence != 0) {
      // A shard value names its own sequence; a side record is an envelope with a reason.
      if (DecodeShardValue(value, sequence, &envelope) ||
          (envelope.ParseFromArray(value.data(), static_cast<int>(value.size())) &&
           !envelope.reason().empty() && envelope.sequence() == sequence)) {
        records.emplace_back(sequence, envelope.has_result()
                                           ? std::optional(envelope.result().room_id())
                                           : std::nullopt);
        return rocksdb::Status::OK();
      }
    }
    ++unknown;
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }

  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> records;  // (sequence, room)
  uint64_t unknown = 0;  // puts that are none of the outbox's
};

class Salvager {
 public:
  Salvager(const SalvageOptions& options, SalvageReport& report)
      : options_(options), report_(report) {}

  // Copies every readable record of the opened damaged outbox into `target`.
  Status Copy(rocksdb::DB& db, const std::vector<std::string>& names,
              const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
              internal::ImportTarget& target) {
    target_ = &target;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i].starts_with("shard-")) {
        const uint32_t shard =
            static_cast<uint32_t>(std::strtoul(names[i].c_str() + 6, nullptr, 10));
        VERDICT_RETURN_IF_ERROR(CopyArea(db, handles[i], names[i], [&](auto key, auto value) {
          return AddShardValue(shard, key, value);
        }));
      }
    }
    for (SideArea area : {SideArea::kQuarantine, SideArea::kDeadLetter}) {
      const auto it = std::find(names.begin(), names.end(), SideAreaName(area));
      if (it == names.end()) continue;
      VERDICT_RETURN_IF_ERROR(
          CopyArea(db, handles[it - names.begin()], SideAreaName(area),
                   [&](auto key, auto value) { return AddSideValue(area, key, value); }));
    }
    return Status::Ok();
  }

  // Counts the stored records that were not copied: those the index names (when `meta` can be
  // read) and those in `damaged_batches` of the log.
  void CountLost(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* meta,
                 const std::vector<std::string>& damaged_batches) {
    std::map<uint64_t, std::optional<uint64_t>> missing;  // sequence → room, if known
    auto note = [&](uint64_t sequence, std::optional<uint64_t> room) {
      if (read_.count(sequence)) return;
      auto& known = missing[sequence];
      if (room) known = room;
    };
    if (meta) {
      Progress("index");
      std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(ReadOptions(), meta));
      const std::string prefix = IndexKey(0, 0).substr(0, 1);
      for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
        const rocksdb::Slice key = it->key();
        auto entry = DecodeIndex(it->value().ToString());
        if (key.size() == IndexKey(0, 0).size() && entry) {
          note(entry->sequence, GetBigEndian(key.data() + 1, 8));
        }
      }
      if (!it->status().ok()) {
        report_.damage.push_back("meta (the idempotency index): cannot be read to its end (" +
                                 it->status().ToString() + ")");
        report_.more_may_be_lost = true;
      }
    } else {
      report_.more_may_be_lost = true;
    }
    for (const std::string& bytes : damaged_batches) {
      BatchContents contents;
      rocksdb::WriteBatch batch(bytes);
      if (bytes.size() < 12 || !batch.Iterate(&contents).ok() || contents.unknown > 0) {
        report_.more_may_be_lost = true;
      }
      for (const auto& [sequence, room] : contents.records) note(sequence, room);
    }
    std::set<uint64_t> rooms;
    for (const auto& [sequence, room] : missing) {
      if (room) rooms.insert(*room);
    }
    report_.lost = missing.size();
    report_.lost_rooms.assign(rooms.begin(), rooms.end());
  }

 private:
  using Visit = std::function<Status(const rocksdb::Slice& key, const rocksdb::Slice& value)>;

  static rocksdb::ReadOptions ReadOptions() {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    return ro;
  }

  // Visits every entry of a column family keyed by sequence that can be read, in order. A
  // damaged block is noted and skipped: the copy seeks on past it (see ReadableFrom).
  Status CopyArea(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf, const std::string& name,
                  const Visit& visit) {
    Progress(name);
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(ReadOptions(), cf));
    uint64_t floor = 0;  // every sequence below it is copied or skipped
    it->SeekToFirst();
    for (;;) {
      for (; it->Valid(); it->Next()) {
        VERDICT_RETURN_IF_ERROR(visit(it->key(), it->value()));
        floor = std::max(floor, KeySequence(it->key()) + 1);
      }
      if (it->status().ok()) break;
      if (!it->status().IsCorruption()) return FromRocks(it->status(), "reading " + name);
      const std::string why = it->status().ToString();
      const std::optional<uint64_t> resume = ReadableFrom(db, cf, floor);
      report_.damage.push_back(
          name + ": records from sequence " + std::to_string(floor) +
          (resume ? " to " + std::to_string(*resume - 1) : std::string(" on")) +
          " cannot be read (" + why + ")");
      if (!resume) break;
      // Past the damage; at least one sequence further, so that the copy always moves on.
      floor = std::max(*resume, floor + 1);
      it.reset(db.NewIterator(ReadOptions(), cf));
      it->Seek(SequenceKey(floor));
    }
    return Flush();
  }

  // The smallest sequence at or after `from` from which the column family reads again (a seek
  // to a key inside a damaged block fails, one past it does not), or nullopt if none does. Each
  // seek is made by a new iterator: one that has failed may answer a later seek from the state
  // the failure left.
  static std::optional<uint64_t> ReadableFrom(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf,
                                              uint64_t from) {
    auto readable = [&](uint64_t sequence) {
      std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(ReadOptions(), cf));
      it->Seek(SequenceKey(sequence));
      return it->status().ok();
    };
    if (readable(from)) return from;
    uint64_t bad = from, step = 1;
    for (;;) {  // doubling steps until one lands past the damage
      const uint64_t probe = bad + std::min(step, UINT64_MAX - bad);
      if (readable(probe)) {
        uint64_t good = probe;
        while (good - bad > 1) {  // then halving back to its first readable sequence
          const uint64_t mid = bad + (good - bad) / 2;
          (readable(mid) ? good : bad) = mid;
        }
        return good;
      }
      if (probe == UINT64_MAX) return std::nullopt;
      bad = probe;
      step *= 2;
    }
  }

  Status AddShardValue(uint32_t shard, const rocksdb::Slice& key, const rocksdb::Slice& value) {
    const uint64_t sequence = KeySequence(key);
    read_.insert(sequence);
    v1::Envelope envelope;
    if (sequence != 0 && DecodeShardValue(value, sequence, &envelope)) {
      pending_.push_back(std::move(*envelope.mutable_result()));
      pending_times_.push_back(envelope.enqueued_at_ms());
    } else {
      SalvagedRecord& r = side_.emplace_back();
      r.area = SideArea::kQuarantine;
      r.shard = shard;
      r.reason = "undecodable";
      r.detail = "value of " + std::to_string(value.size()) + " bytes in " + ShardCfName(shard) +
                 " is not a valid envelope (salvaged)";
      r.raw = value.ToString();
    }
    bytes_ += value.size();
    return MaybeFlush();
  }

  Status AddSideValue(SideArea area, const rocksdb::Slice& key, const rocksdb::Slice& value) {
    read_.insert(KeySequence(key));
    SalvagedRecord& r = side_.emplace_back();
    r.area = area;
    v1::Envelope envelope;
    if (!envelope.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      r.area = SideArea::kQuarantine;
      r.reason = "undecodable";
      r.detail = "a " + std::string(SideAreaName(area)) + " record that cannot be read (salvaged)";
      r.raw = value.ToString();
    } else {
      r.shard = envelope.shard();
      r.enqueued_at_ms = envelope.enqueued_at_ms();
      r.reason = envelope.reason();
      r.detail = envelope.detail();
      r.decodable = envelope.has_result();
      if (r.decodable) r.result = std::move(*envelope.mutable_result());
      r.raw = envelope.raw();
    }
    bytes_ += value.size();
    return MaybeFlush();
  }

  Status MaybeFlush() {
    if (pending_.size() + side_.size() < kImportRecords && bytes_ < kImportBytes) {
      return Status::Ok();
    }
    return Flush();
  }

  // Writes what is buffered into the new outbox.
  Status Flush() {
    if (!pending_.empty()) {
      auto stored = target_->ImportPending(pending_, pending_times_);
      if (!stored.ok()) return stored.status();
      for (size_t i = 0; i < stored->size(); ++i) {
        const EnqueueResult& r = (*stored)[i];
        if (r.status.ok() && !r.already_present) ++report_.pending;
        if (r.status.code() == StatusCode::kResourceExhausted && !r.already_present) {
          ++report_.quarantined;  // over the size limit: kept whole in quarantine
        }
        if (r.status.code() == StatusCode::kAlreadyExists) {
          report_.damage.push_back("room " + std::to_string(pending_[i].room_id()) +
                                   ": two different results with the same end time; the first "
                                   "was copied");
        }
      }
      copied_ += stored->size();
    }
    if (!side_.empty()) {
      auto stored = target_->ImportSide(side_);
      if (!stored.ok()) return stored.status();
      for (size_t i = 0; i < side_.size(); ++i) {
        if ((*stored)[i] && !side_[i].decodable) ++report_.undecodable;
        if ((*stored)[i]) {
          ++(side_[i].area == SideArea::kQuarantine ? report_.quarantined : report_.dead_lettered);
        }
      }
      copied_ += side_.size();
    }
    pending_.clear();
    pending_times_.clear();
    side_.clear();
    bytes_ = 0;
    if (copied_ - last_progress_ >= kProgressEvery) Progress(area_);
    return Status::Ok();
  }

  void Progress(const std::string& area) {
    area_ = area;
    last_progress_ = copied_;
    if (options_.progress) options_.progress({area, copied_});
  }

  const SalvageOptions& options_;
  SalvageReport& report_;
  internal::ImportTarget* target_ = nullptr;
  std::unordered_set<uint64_t> read_;  // sequences read from the damaged outbox
  uint64_t copied_ = 0;                // records handed to the new outbox
  std::vector<v1::BattleResult> pending_;
  std::vector<int64_t> pending_times_;
  std::vector<SalvagedRecord> side_;
  size_t bytes_ = 0;
  std::string area_;
  uint64_t last_progress_ = 0;
};

// FAILED_PRECONDITION if a process (a node) holds the outbox in `dir`: it would go on writing
// records the copy misses. Tried only when the outbox has its LOCK file, which taking the lock
// would otherwise create; a lock this process may not take is not held against it.
Status RefuseIfInUse(const std::string& dir) {
  const std::string lock_file = dir + "/LOCK";
  std::error_code error;
  if (!fs::exists(lock_file, error)) return Status::Ok();
  rocksdb::Env* env = rocksdb::Env::Default();
  rocksdb::FileLock* lock = nullptr;
  rocksdb::Status s = env->LockFile(lock_file, &lock);
  if (s.ok()) return internal::FromRocks(env->UnlockFile(lock), "unlocking " + lock_file);
  const std::string text = s.ToString();
  if (text.find("While lock file") != std::string::npos ||
      text.find("lock hold by current process") != std::string::npos) {
    return FailedPreconditionError(
        "outbox " + dir + " is in use by a running node; stop it before salvaging (" + text + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<SalvageReport> SalvageOutbox(const std::string& from, const std::string& to,
                                    const SalvageOptions& options) {
  // Salvage never writes to the damaged outbox: not into it, nor into a directory inside it.
  std::error_code error;
  const fs::path from_path = fs::weakly_canonical(from, error);
  const fs::path to_path = fs::weakly_canonical(to, error);
  if (from_path == to_path) {
    return FailedPreconditionError("salvage copies into a new outbox: --to must not be " + from);
  }
  const fs::path inside = to_path.lexically_relative(from_path);
  if (!inside.empty() && *inside.begin() != "..") {
    return FailedPreconditionError("salvage never writes to the outbox it reads: --to " + to +
                                   " is inside " + from + "; give a directory outside it");
  }
  auto contents = internal::ListDirectory(from);
  if (!contents.ok()) return contents.status();
  if (!contents->exists || (contents->database_files.empty() && !contents->has_current)) {
    return NotFoundError("no outbox in " + from);
  }
  VERDICT_RETURN_IF_ERROR(RefuseIfInUse(from));
  VERDICT_RETURN_IF_ERROR(internal::CheckNewOutboxDirectory(to));

  SalvageReport report;
  rocksdb::DBOptions db_options = internal::CommonDbOptions(OutboxOptions{});
  auto scan = ScanLogs(*db_options.env->GetFileSystem(), from, 0);
  if (!scan.ok()) return scan.status();
  std::set<std::string> damaged_logs;
  for (const LogDamage& d : scan->damage) {
    damaged_logs.insert(d.file);
    report.damage.push_back(d.file + ": " + std::to_string(d.bytes) + " bytes at offset " +
                            std::to_string(d.offset) + " cannot be read (" + d.what + ")");
  }
  std::string manifest;
  if (!contents->has_current) {
    manifest = NewestManifest(contents->database_files);
    if (manifest.empty()) {
      return DataLossError("outbox " + from +
                           " has neither CURRENT nor a MANIFEST file: nothing says which table "
                           "files and logs hold its records");
    }
    report.damage.push_back("CURRENT is missing: read by " + manifest + ", the newest manifest");
  }
  std::string source = from;
  WorkingCopy copy;
  if (!manifest.empty() || !damaged_logs.empty()) {
    std::string work = fs::path(to).lexically_normal().string();
    if (work.ends_with('/')) work.pop_back();
    VERDICT_RETURN_IF_ERROR(copy.Make(from, work + ".salvage-work", manifest, damaged_logs));
    source = copy.path();
  }

  // Read-only, which writes nothing, and past damaged log records rather than stopping there.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords;
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, source, &names);
  if (!s.ok()) {
    return DataLossError("cannot read the manifest of outbox " + from + ": " + s.ToString());
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) {
    descriptors.emplace_back(n, internal::ReadOnlyColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::OpenForReadOnly(db_options, source, descriptors, &handles, &raw);
  if (!s.ok()) return DataLossError("cannot open outbox " + from + " to read it: " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  struct Handles {
    rocksdb::DB& db;
    std::vector<rocksdb::ColumnFamilyHandle*>& handles;
    ~Handles() {
      for (auto* h : handles) db.DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
  } release{*db, handles};

  const auto meta_at = std::find(names.begin(), names.end(), kMetaCf);
  rocksdb::ColumnFamilyHandle* meta =
      meta_at == names.end() ? nullptr : handles[meta_at - names.begin()];
  std::optional<uint32_t> shards;
  if (meta) {
    std::string value;
    if (db->Get(rocksdb::ReadOptions(), meta, kShardCountKey, &value).ok()) {
      shards = DecodeShardCount(value);
    }
  }
  if (!shards) report.damage.push_back("meta: the shard count cannot be read");
  report.shard_count = options.shard_count ? options.shard_count : shards.value_or(kDefaultShards);

  OutboxOptions target_options;
  target_options.shard_count = report.shard_count;
  auto target = internal::CreateOutboxForImport(to, target_options);
  if (!target.ok()) return target.status();
  Salvager salvager(options, report);
  VERDICT_RETURN_IF_ERROR(salvager.Copy(*db, names, handles, **target));
  salvager.CountLost(*db, meta, scan->damaged_batches);
  return report;
}

}  // namespace verdict::storage
