#include "storage/log_scan.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include <rocksdb/file_checksum.h>
#include <rocksdb/file_system.h>

namespace verdict::storage {
namespace {

constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;
constexpr size_t kRecyclableHeaderSize = 11;
// RocksDB's record types (db/log_format.h). 1–4 carry write batches, 5–8 are the same in a
// recycled log; the others carry the log's own metadata, never a batch: 9 its compression, 10 and
// 11 (recycled) the user-defined timestamp sizes, 130 and 131 (recycled) the preceding log's
// identity. A type RocksDB does not know is damage, unless its high bit says a reader may skip it
// (kRecordTypeSafeIgnoreMask): that is how RocksDB adds types older readers must pass over.
enum RecordType : uint8_t {
  kZeroType = 0,
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
  kRecyclableFullType = 5,
  kRecyclableLastType = 8,
  kSetCompressionType = 9,
  kUserDefinedTimestampSizeType = 10,
  kRecyclableUserDefinedTimestampSizeType = 11,
  kPredecessorWalInfoType = 130,
  kRecyclePredecessorWalInfoType = 131,
};
constexpr uint8_t kRecordTypeSafeIgnoreMask = 1 << 7;

// A recycled log's records name the log in 4 more header bytes.
bool IsRecyclable(uint8_t type) {
  return (type >= kRecyclableFullType && type <= kRecyclableLastType) ||
         type == kRecyclableUserDefinedTimestampSizeType || type == kRecyclePredecessorWalInfoType;
}

bool IsKnown(uint8_t type) {
  return type <= kRecyclableUserDefinedTimestampSizeType || type == kPredecessorWalInfoType ||
         type == kRecyclePredecessorWalInfoType;
}
// RocksDB stores CRCs masked (rotated, plus a constant), so that a CRC of data that itself
// holds CRCs is not trivially a valid record.
constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;

uint32_t LittleEndian32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// CRC32C of `data`, by RocksDB's own implementation (hardware-accelerated where the CPU has it),
// reached through its public file-checksum interface, which hands the value out big-endian.
uint32_t Crc32c(std::string_view data) {
  static const std::shared_ptr<rocksdb::FileChecksumGenFactory> factory =
      rocksdb::GetFileChecksumGenCrc32cFactory();
  std::unique_ptr<rocksdb::FileChecksumGenerator> crc =
      factory->CreateFileChecksumGenerator(rocksdb::FileChecksumGenContext());
  crc->Update(data.data(), data.size());
  crc->Finalize();
  const std::string bytes = crc->GetChecksum();
  uint32_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  return v;
}

uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rotated = masked - kCrcMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }

// The number of a log file's name ("000004.log" → 4), or nullopt for any other file.
std::optional<uint64_t> LogNumber(const std::string& name) {
  constexpr std::string_view kSuffix = ".log";
  if (name.size() <= kSuffix.size() || !name.ends_with(kSuffix)) return std::nullopt;
  const std::string digits = name.substr(0, name.size() - kSuffix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::strtoull(digits.c_str(), nullptr, 10);
}

// One physical record as its header describes it, checked against its block.
struct Physical {
  enum class Verdict { kIntact, kOld, kDamaged } verdict;
  uint8_t type = 0;
  size_t header = kHeaderSize;
  size_t length = 0;
  bool length_fits = false;  // header and payload lie inside the block
  std::string what;          // why it is damaged
};

// Reads one log, block by block, into `out`.
class LogReader {
 public:
  // `on_record`, if set, is given every logical record that reads whole, in order.
  LogReader(std::string name, uint64_t number, LogScan& out,
            std::function<Status(std::string_view)> on_record = nullptr)
      : name_(std::move(name)), number_(number), out_(out), on_record_(std::move(on_record)) {}

  void Block(std::string_view block, uint64_t block_offset, bool last) {
    size_t pos = 0;
    while (pos < block.size()) {
      const size_t left = block.size() - pos;
      if (left < kHeaderSize) {
        // A full block's tail is padding; a short one at the end of the log is a torn header.
        if (last && block.size() < kBlockSize) {
          Damage(block_offset + pos, left, "log ends inside a record header", {});
        }
        return;
      }
      const Physical p = Examine(block, pos, last);
      if (p.verdict == Physical::Verdict::kOld) {
        ended_ = true;  // a record of the log this file held before it was recycled
        return;
      }
      if (p.verdict == Physical::Verdict::kDamaged) {
        const std::string_view payload =
            p.length_fits ? block.substr(pos + p.header, p.length) : std::string_view();
        // Recovery drops the rest of the block, as the length may be what is wrong. An intact
        // record may still start later in it.
        const size_t next = NextIntactRecord(block, pos + 1, last);
        Damage(block_offset + pos, next - pos, p.what, payload);
        pos = next;
        continue;
      }
      Fragment(p.type, block.substr(pos + p.header, p.length), block_offset + pos);
      pos += p.header + p.length;
    }
  }

  // At the end of the log: a logical record still open was cut off by it.
  void End(uint64_t size) {
    if (in_record_ && !ended_) {
      Damage(record_offset_, size - record_offset_, "log ends inside a record", {});
    }
  }

  bool ended() const { return ended_; }
  // The first error on_record returned.
  const Status& status() const { return status_; }

 private:
  Physical Examine(std::string_view block, size_t pos, bool last) const {
    Physical p;
    const char* h = block.data() + pos;
    p.type = static_cast<uint8_t>(h[6]);
    p.length = static_cast<unsigned char>(h[4]) |
               (static_cast<size_t>(static_cast<unsigned char>(h[5])) << 8);
    const bool recyclable = IsRecyclable(p.type);
    p.header = recyclable ? kRecyclableHeaderSize : kHeaderSize;
    p.length_fits = pos + p.header + p.length <= block.size();
    p.verdict = Physical::Verdict::kDamaged;
    if (p.type == kZeroType && p.length == 0) {
      p.what = "zeroed bytes where a record should be";
      return p;
    }
    if (!p.length_fits) {
      p.what = last && block.size() < kBlockSize ? "log ends inside a record"
                                                 : "record length past the end of its block";
      return p;
    }
    const uint32_t stored = UnmaskCrc(LittleEndian32(h));
    if (Crc32c(block.substr(pos + 6, p.header - 6 + p.length)) != stored) {
      p.what = "checksum mismatch";
      return p;
    }
    if (recyclable && LittleEndian32(h + 7) != static_cast<uint32_t>(number_)) {
      p.verdict = Physical::Verdict::kOld;
      return p;
    }
    if (!IsKnown(p.type) && !(p.type & kRecordTypeSafeIgnoreMask)) {
      p.what = "unknown record type " + std::to_string(p.type);
      return p;
    }
    p.verdict = Physical::Verdict::kIntact;
    return p;
  }

  // The first position at or after `from` where an intact physical record starts, or the block's
  // end.
  size_t NextIntactRecord(std::string_view block, size_t from, bool last) const {
    for (size_t pos = from; pos + kHeaderSize <= block.size(); ++pos) {
      const Physical p = Examine(block, pos, last);
      if (p.verdict == Physical::Verdict::kIntact && p.type != kZeroType) return pos;
    }
    return block.size();
  }

  void Fragment(uint8_t type, std::string_view payload, uint64_t offset) {
    if (type >= kRecyclableFullType && type <= kRecyclableLastType) type -= 4;
    switch (type) {
      case kFullType:
        CloseUnfinished(offset);
        Whole(payload);
        break;
      case kFirstType:
        CloseUnfinished(offset);
        in_record_ = true;
        record_offset_ = offset;
        record_.assign(payload);
        break;
      case kMiddleType:
      case kLastType:
        if (in_record_) {
          record_.append(payload);
          if (type == kLastType) {
            in_record_ = false;
            Whole(record_);
            record_.clear();
          }
        } else if (broken_) {
          out_.damaged_batches.back().append(payload);  // the rest of a damaged record
          if (type == kLastType) broken_ = false;
        }
        break;
      default:  // the log's metadata, or a type a reader may skip: not a batch
        break;
    }
  }

  // A first fragment whose record never ended, now that another record starts.
  void CloseUnfinished(uint64_t offset) {
    if (!in_record_) return;
    Damage(record_offset_, offset - record_offset_, "record without its last fragment", {});
  }

  void Whole(std::string_view record) {
    broken_ = false;
    if (on_record_ && status_.ok()) status_ = on_record_(record);
    if (out_.damage.empty()) return;
    ++out_.intact_records_after_damage;
    out_.intact_bytes_after_damage += record.size();
  }

  // Notes damage at `offset`; `payload` is what the damaged fragment's header says it holds
  // (empty if that cannot be believed).
  void Damage(uint64_t offset, uint64_t bytes, const std::string& what, std::string_view payload) {
    if (in_record_ || !payload.empty()) {
      std::string batch = in_record_ ? std::move(record_) : std::string();
      batch.append(payload);
      out_.damaged_batches.push_back(std::move(batch));
      broken_ = true;
    }
    in_record_ = false;
    record_.clear();
    if (!out_.damage.empty()) {
      LogDamage& previous = out_.damage.back();
      if (previous.file == name_ && previous.offset + previous.bytes == offset) {
        previous.bytes += bytes;  // one stretch, such as a zeroed tail over several blocks
        return;
      }
    }
    out_.damage.push_back({name_, offset, bytes, what});
  }

  const std::string name_;
  const uint64_t number_;
  LogScan& out_;
  bool in_record_ = false;  // reading the fragments of a logical record
  uint64_t record_offset_ = 0;
  std::string record_;
  bool broken_ = false;  // fragments without a start go to the last damaged batch
  bool ended_ = false;
  std::function<Status(std::string_view)> on_record_;
  Status status_;
};

// Writes logical records as a log, in RocksDB's format (see the file comment), as RocksDB's
// log::Writer lays them out.
class LogWriter {
 public:
  explicit LogWriter(std::unique_ptr<rocksdb::FSWritableFile> file) : file_(std::move(file)) {}

  Status Add(std::string_view record) {
    bool first = true;
    do {
      const size_t left_in_block = kBlockSize - block_offset_;
      if (left_in_block < kHeaderSize) {
        VERDICT_RETURN_IF_ERROR(Append(std::string(left_in_block, '\0')));
        block_offset_ = 0;
      }
      const size_t room = kBlockSize - block_offset_ - kHeaderSize;
      const size_t length = std::min(record.size(), room);
      const bool last = length == record.size();
      const uint8_t type = first && last ? kFullType
                           : first       ? kFirstType
                           : last        ? kLastType
                                         : kMiddleType;
      VERDICT_RETURN_IF_ERROR(Physical(type, record.substr(0, length)));
      record.remove_prefix(length);
      first = false;
    } while (!record.empty());
    return Status::Ok();
  }

  Status Close() {
    rocksdb::IOStatus s = file_->Sync(rocksdb::IOOptions(), nullptr);
    if (s.ok()) s = file_->Close(rocksdb::IOOptions(), nullptr);
    return s.ok() ? Status::Ok() : UnavailableError("cannot write a log: " + s.ToString());
  }

 private:
  Status Physical(uint8_t type, std::string_view payload) {
    std::string record(kHeaderSize, '\0');
    record[4] = static_cast<char>(payload.size() & 0xff);
    record[5] = static_cast<char>(payload.size() >> 8);
    record[6] = static_cast<char>(type);
    record.append(payload);
    const uint32_t crc = MaskCrc(Crc32c(std::string_view(record).substr(6)));
    for (int i = 0; i < 4; ++i) record[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    block_offset_ += record.size();
    return Append(record);
  }

  Status Append(const std::string& bytes) {
    rocksdb::IOStatus s = file_->Append(bytes, rocksdb::IOOptions(), nullptr);
    return s.ok() ? Status::Ok() : UnavailableError("cannot write a log: " + s.ToString());
  }

  std::unique_ptr<rocksdb::FSWritableFile> file_;
  size_t block_offset_ = 0;
};

Status ScanLog(rocksdb::FileSystem& fs, const std::string& dir, const std::string& name,
               uint64_t number, LogScan& out,
               std::function<Status(std::string_view)> on_record = nullptr) {
  const std::string path = dir + "/" + name;
  std::unique_ptr<rocksdb::FSSequentialFile> file;
  rocksdb::IOStatus s = fs.NewSequentialFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return UnavailableError("cannot open the outbox log " + path + ": " + s.ToString());
  LogReader reader(name, number, out, std::move(on_record));
  std::string scratch(kBlockSize, '\0');
  std::string block, next;
  uint64_t offset = 0;
  auto read = [&](std::string* into) -> Status {
    rocksdb::Slice got;
    into->clear();
    while (into->size() < kBlockSize) {
      rocksdb::IOStatus r = file->Read(kBlockSize - into->size(), rocksdb::IOOptions(), &got,
                                       scratch.data(), nullptr);
      if (!r.ok())
        return UnavailableError("cannot read the outbox log " + path + ": " + r.ToString());
      if (got.empty()) break;
      into->append(got.data(), got.size());
    }
    return Status::Ok();
  };
  VERDICT_RETURN_IF_ERROR(read(&block));
  while (!block.empty() && !reader.ended()) {
    VERDICT_RETURN_IF_ERROR(read(&next));  // one block ahead, to know which block is the last
    reader.Block(block, offset, next.empty());
    offset += block.size();
    block.swap(next);
  }
  reader.End(offset);
  ++out.logs_scanned;
  return reader.status();
}

}  // namespace

Result<LogScan> ScanLogs(rocksdb::FileSystem& fs, const std::string& dir, uint64_t min_log_number) {
  std::vector<std::string> children;
  rocksdb::IOStatus s = fs.GetChildren(dir, rocksdb::IOOptions(), &children, nullptr);
  if (!s.ok()) return UnavailableError("cannot list the outbox " + dir + ": " + s.ToString());
  std::vector<std::pair<uint64_t, std::string>> logs;
  for (const std::string& name : children) {
    if (auto number = LogNumber(name); number && *number >= min_log_number) {
      logs.emplace_back(*number, name);
    }
  }
  std::sort(logs.begin(), logs.end());
  LogScan scan;
  for (const auto& [number, name] : logs) {
    VERDICT_RETURN_IF_ERROR(ScanLog(fs, dir, name, number, scan));
  }
  return scan;
}

Status CopyReadableLog(rocksdb::FileSystem& fs, const std::string& from_dir,
                       const std::string& name, const std::string& to_dir) {
  const std::optional<uint64_t> number = LogNumber(name);
  if (!number) return InvalidArgumentError(name + " is not a log");
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s =
      fs.NewWritableFile(to_dir + "/" + name, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return UnavailableError("cannot write " + to_dir + "/" + name + ": " + s.ToString());
  LogWriter writer(std::move(file));
  LogScan ignored;
  VERDICT_RETURN_IF_ERROR(
      ScanLog(fs, from_dir, name, *number, ignored,
              [&writer](std::string_view record) { return writer.Add(record); }));
  return writer.Close();
}

}  // namespace verdict::storage
