// Fuzz target: the outbox's decoding of what it reads back from RocksDB — a shard value (the
// Envelope of a record, checked against its key's sequence) and an idempotency-index entry.
// Whatever is on disk, decoding either succeeds or says "undecodable" (the record is then
// quarantined); it never crashes. A value that decodes must encode back to a decodable value.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/wire.h"
#include "storage/outbox_format.h"

using namespace verdict::storage::format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint64_t sequence = GetBigEndian(reinterpret_cast<const char*>(data), 8);
  const std::string value(reinterpret_cast<const char*>(data) + 8, size - 8);
  verdict::v1::Envelope envelope;
  if (DecodeShardValue(rocksdb::Slice(value), sequence, &envelope)) {
    const std::string again = ShardValue(sequence, envelope.enqueued_at_ms(),
                                         verdict::wire::DeterministicBytes(envelope.result()));
    verdict::v1::Envelope round_trip;
    if (!DecodeShardValue(rocksdb::Slice(again), sequence, &round_trip)) __builtin_trap();
  }
  (void)DecodeIndex(value);
  return 0;
}
