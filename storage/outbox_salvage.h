// SalvageOutbox: the way on from a damaged outbox. It copies every record that can still be read
// into a new outbox and says what could not be read. `verdict-node outbox salvage` calls it with
// the node stopped; the node then runs on the new outbox. It never writes to the damaged outbox
// (when its CURRENT file is gone, it reads a copy made of hard links beside the new one).
// Thread-safety: one call at a time per outbox; the progress callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace verdict::storage {

struct SalvageProgress {
  std::string area;     // "shard-003", "quarantine", "dead-letter", "index"
  uint64_t copied = 0;  // records copied so far, over all areas
};

struct SalvageOptions {
  // Shards of the new outbox.
  // Default: 0, meaning as many as the damaged outbox had (16 if its count cannot be read).
  uint32_t shard_count = 0;
  // Called as each area begins and every 10,000 records. Default: none.
  std::function<void(const SalvageProgress&)> progress;
};

struct SalvageReport {
  uint32_t shard_count = 0;    // of the new outbox
  uint64_t pending = 0;        // copied into its shards, each room's records in their order
  uint64_t quarantined = 0;    // copied into its quarantine (with their reasons)
  uint64_t dead_lettered = 0;  // copied into its dead letter (with the lobby's codes)
  uint64_t undecodable = 0;    // of the quarantined: bytes that are no result, kept as they are
  // Stored records that could not be read: those the outbox's idempotency index names, and
  // those a damaged log record held (by their values or their index entries). The rooms of
  // those whose room is known, sorted (a room read from a damaged log record is as its bytes
  // say).
  uint64_t lost = 0;
  std::vector<uint64_t> lost_rooms;
  // Damage that may have hidden more records than are counted in `lost` (an index that could
  // not be read to its end, a damaged log record that could not be taken apart whole).
  bool more_may_be_lost = false;
  // Each damaged or missing part found, in words, in the order found.
  std::vector<std::string> damage;
};

// Copies what can be read of the outbox in `from` into a new outbox in `to` (absent or empty).
// Pending records go to their shards in their order, side records to the same area with their
// reasons; the new outbox's idempotency index is rebuilt. Errors: FAILED_PRECONDITION if `to`
// is not absent or empty (or is `from`, or inside it), or if a running node holds `from`; NOT_FOUND
// if `from` holds no outbox; DATA_LOSS if its manifest cannot be read at all; and the errors of
// writing the new outbox. A partly copied `to` is left for the operator to remove.
Result<SalvageReport> SalvageOutbox(const std::string& from, const std::string& to,
                                    const SalvageOptions& options);

}  // namespace verdict::storage
