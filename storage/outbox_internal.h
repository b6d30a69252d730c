// What storage/'s own files share beyond the Outbox interface: the RocksDB adapter pieces that
// OpenOutbox and SalvageOutbox both use, and the import path through which salvage writes into a
// new outbox. Internal to storage/; never installed. Thread-safety as for Outbox.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <rocksdb/options.h>
#include <rocksdb/status.h>

#include "common/status.h"
#include "storage/outbox.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::storage::internal {

// A RocksDB status as a verdict one, prefixed with `what` was being done.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

// The database options every open shares: RocksDB's log goes to spdlog, file I/O through
// options.env.
rocksdb::DBOptions CommonDbOptions(const OutboxOptions& options);

// Column family options for reading only: one small block cache shared by every column family.
rocksdb::ColumnFamilyOptions ReadOnlyColumnFamilyOptions();

// What a directory holds, as an outbox sees it (a lost+found directory is not counted).
struct DirectoryContents {
  bool exists = false;
  bool has_current = false;
  std::vector<std::string> database_files;  // files a RocksDB database keeps (but CURRENT)
  std::vector<std::string> other_files;
};
Result<DirectoryContents> ListDirectory(const std::string& dir);

// OK if `dir` may become a new outbox (absent or empty, and, if it exists, writable by this
// process); the errors of OpenOutbox otherwise.
Status CheckNewOutboxDirectory(const std::string& dir);

// A record salvage copies, as read from the damaged outbox.
struct SalvagedRecord {
  SideArea area = SideArea::kQuarantine;  // for side records
  uint32_t shard = 0;                     // where it was
  int64_t enqueued_at_ms = 0;
  bool decodable = false;
  v1::BattleResult result;  // when decodable
  std::string reason;       // side records: why it was set aside
  std::string detail;
  std::string raw;  // undecodable: the bytes as stored
};

// A new outbox that salvage fills. Not thread-safe.
class ImportTarget {
 public:
  virtual ~ImportTarget() = default;
  virtual uint32_t shard_count() const = 0;
  // Stores pending records into their shards with their enqueue times, in order, synced.
  virtual Result<std::vector<EnqueueResult>> ImportPending(
      std::span<const v1::BattleResult> batch, std::span<const int64_t> enqueued_at_ms) = 0;
  // Stores side records (and undecodable ones, into quarantine), synced; says for each whether
  // it was stored (a decodable one whose room and end time is stored already is skipped).
  virtual Result<std::vector<bool>> ImportSide(std::span<const SalvagedRecord> records) = 0;
};

// Creates a new outbox in `dir`, which must be absent or empty, to import into.
Result<std::unique_ptr<ImportTarget>> CreateOutboxForImport(const std::string& dir,
                                                            const OutboxOptions& options);

}  // namespace verdict::storage::internal
