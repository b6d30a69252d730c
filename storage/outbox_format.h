// The outbox's on-disk format: column family names, keys and values, and the functions that
// encode and decode them. Internal to storage/; stateless.
//
// On-disk layout (one RocksDB instance):
//   column family "shard-NNN" (N = 000 … count-1)
//     key   = sequence, 8 bytes big-endian (so iteration order is enqueue order)
//     value = verdict.v1.Envelope{sequence, enqueued_at_ms, result}
//   column families "quarantine" and "dead-letter"
//     key   = sequence, 8 bytes big-endian
//     value = Envelope{…, reason, detail, shard} (or Envelope{raw} for undecodable bytes)
//   column family "meta"
//     "shard_count"      → 4 bytes big-endian, written once at creation
//     "next_sequence"    → 8 bytes big-endian, rewritten with every batch that allocates one
//     "i" + room_id (8 BE) + ended_at_ms (8 BE)
//                        → area (1 byte: 0 shard, 1 quarantine, 2 dead-letter)
//                          + shard (4 BE) + sequence (8 BE): the idempotency index
//
// Sequences come from one counter per node, so every key in every column family is unique and
// a redriven record gets a key after everything already queued.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <rocksdb/slice.h>

#include "verdict/v1/verdict.pb.h"

namespace verdict::storage::format {

inline constexpr char kMetaCf[] = "meta";
inline constexpr char kQuarantineCf[] = "quarantine";
inline constexpr char kDeadLetterCf[] = "dead-letter";
inline constexpr char kShardCountKey[] = "shard_count";
inline constexpr char kNextSequenceKey[] = "next_sequence";

// Where an indexed record lives.
enum class Area : uint8_t { kShard = 0, kQuarantine = 1, kDeadLetter = 2 };

struct IndexEntry {
  Area area;
  uint32_t shard;
  uint64_t sequence;
};

// "shard-007".
std::string ShardCfName(uint32_t shard);

void PutBigEndian(std::string* out, uint64_t v, int bytes);
uint64_t GetBigEndian(const char* p, int bytes);

// The 8-byte big-endian key of a sequence, and back (0, never allocated, for a malformed key).
std::string SequenceKey(uint64_t sequence);
uint64_t KeySequence(const rocksdb::Slice& key);

// The meta column family's "shard_count" and "next_sequence" values, and back (nullopt for a
// value of the wrong size).
std::string EncodeShardCount(uint32_t shard_count);
std::optional<uint32_t> DecodeShardCount(const std::string& v);
std::string EncodeNextSequence(uint64_t next);
std::optional<uint64_t> DecodeNextSequence(const std::string& v);

// The idempotency index: key of (room_id, ended_at_ms), and its value.
std::string IndexKey(uint64_t room_id, int64_t ended_at_ms);
std::string EncodeIndex(const IndexEntry& e);
std::optional<IndexEntry> DecodeIndex(const std::string& v);

// An Envelope's deterministic bytes.
std::string SerializeEnvelope(const v1::Envelope& envelope);

// The shard value of a record, built from the result's canonical bytes without copying or
// serializing the result again. Equal to the Envelope's deterministic serialization.
std::string ShardValue(uint64_t sequence, int64_t enqueued_at_ms, const std::string& result);

// A shard value decodes only if it parses, carries a result and names its own key.
bool DecodeShardValue(const rocksdb::Slice& value, uint64_t sequence, v1::Envelope* out);

}  // namespace verdict::storage::format
