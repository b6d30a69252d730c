// Reads the outbox's write-ahead logs on its own, by RocksDB's log format, to tell a log whose
// tail a crash tore (normal: recovery stops at the tear, and nothing reported stored is lost)
// from a log damaged in the middle (point-in-time recovery stops there too, and silently drops
// every stored result after it). Also gives salvage what a damaged stretch held. Internal to
// storage/; stateless functions, safe from any thread.
//
// The log format (RocksDB's db/log_format.h, LevelDB's before it): a log is a sequence of 32 KiB
// blocks. A block holds physical records, each a header and a payload: the masked CRC32C of the
// type byte and the payload (4 bytes, little-endian), the payload's length (2 bytes,
// little-endian) and the type (1 byte: 1 a whole logical record, 2 its first fragment, 3 a middle
// one, 4 its last). A physical record never crosses a block; a block's last 1–6 bytes, too few
// for a header, are zeros. Types 5–8 are the same four in a recycled log, with the log's number in
// 4 more header bytes. A logical record is one WriteBatch. The other types RocksDB writes hold the
// log's metadata and are passed over, and so is a type RocksDB does not know whose high bit marks
// it safe to ignore; any other unknown type is damage, as RocksDB's own reader calls it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace rocksdb {
class FileSystem;
}

namespace verdict::storage {

// A stretch of a log that cannot be read.
struct LogDamage {
  std::string file;     // its name in the outbox directory, "000004.log"
  uint64_t offset = 0;  // where the first unreadable physical record starts
  uint64_t bytes = 0;   // how many bytes from there cannot be read
  std::string what;     // "checksum mismatch", "record length past its block", …
};

// What ScanLogs found.
struct LogScan {
  // Every unreadable stretch, in log order.
  std::vector<LogDamage> damage;
  // Whole logical records (write batches) that read cleanly after the first damage, and their
  // bytes. Zero when the logs read to their ends or only their tails are torn: anything here is
  // stored data that recovery, stopping at the damage, would drop.
  uint64_t intact_records_after_damage = 0;
  uint64_t intact_bytes_after_damage = 0;
  // The logical records the damage cut into, as much of each as can be read (its fragments
  // before the damage, the damaged fragment when its length is believable, and the fragments
  // after it), for salvage to name what they held. Their bytes are unverified: never store them.
  std::vector<std::string> damaged_batches;
  uint64_t logs_scanned = 0;
};

// Scans the logs (files named NUMBER.log) in `dir` whose number is at least `min_log_number`, in
// number order, through `fs`. Logs below it were flushed and are no longer read by recovery.
// UNAVAILABLE if a log cannot be listed or read.
Result<LogScan> ScanLogs(rocksdb::FileSystem& fs, const std::string& dir, uint64_t min_log_number);

// Writes the log `name` of `from_dir` into `to_dir` (as a new file of the same name) with every
// logical record that reads whole, in order, and nothing of its damaged stretches. RocksDB, even
// skipping damaged records, drops the rest of the 32 KiB block holding one, and with it the
// start of the next intact record; from the copy it replays every intact record.
Status CopyReadableLog(rocksdb::FileSystem& fs, const std::string& from_dir,
                       const std::string& name, const std::string& to_dir);

}  // namespace verdict::storage
