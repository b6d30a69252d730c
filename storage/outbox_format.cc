#include "storage/outbox_format.h"

#include <cstdio>

#include "proto/wire.h"

namespace verdict::storage::format {
namespace {

constexpr char kIndexPrefix = 'i';

}  // namespace

std::string ShardCfName(uint32_t shard) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%03u", shard);
  return name;
}

void PutBigEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBigEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string SequenceKey(uint64_t sequence) {
  std::string key;
  PutBigEndian(&key, sequence, 8);
  return key;
}

// The sequence a column-family key names; 0 (never allocated) for a malformed key.
uint64_t KeySequence(const rocksdb::Slice& key) {
  return key.size() == 8 ? GetBigEndian(key.data(), 8) : 0;
}

std::string EncodeShardCount(uint32_t shard_count) {
  std::string v;
  PutBigEndian(&v, shard_count, 4);
  return v;
}

std::optional<uint32_t> DecodeShardCount(const std::string& v) {
  if (v.size() != 4) return std::nullopt;
  return static_cast<uint32_t>(GetBigEndian(v.data(), 4));
}

std::string EncodeNextSequence(uint64_t next) {
  std::string v;
  PutBigEndian(&v, next, 8);
  return v;
}

std::optional<uint64_t> DecodeNextSequence(const std::string& v) {
  if (v.size() != 8) return std::nullopt;
  return GetBigEndian(v.data(), 8);
}

std::string IndexKey(uint64_t room_id, int64_t ended_at_ms) {
  std::string key(1, kIndexPrefix);
  PutBigEndian(&key, room_id, 8);
  PutBigEndian(&key, static_cast<uint64_t>(ended_at_ms), 8);
  return key;
}

std::string EncodeIndex(const IndexEntry& e) {
  std::string v(1, static_cast<char>(e.area));
  PutBigEndian(&v, e.shard, 4);
  PutBigEndian(&v, e.sequence, 8);
  return v;
}

std::optional<IndexEntry> DecodeIndex(const std::string& v) {
  if (v.size() != 13 || static_cast<uint8_t>(v[0]) > 2) return std::nullopt;
  return IndexEntry{static_cast<Area>(v[0]), static_cast<uint32_t>(GetBigEndian(&v[1], 4)),
                    GetBigEndian(&v[5], 8)};
}

std::string SerializeEnvelope(const v1::Envelope& envelope) {
  return wire::DeterministicBytes(envelope);
}

// The shard value of a record: Envelope{sequence, enqueued_at_ms, result} serialized, built
// from the result's canonical bytes without copying or serializing the result again. Equal to
// the Envelope's deterministic serialization: fields 1 and 2, then field 3 (length-delimited).
std::string ShardValue(uint64_t sequence, int64_t enqueued_at_ms, const std::string& result) {
  v1::Envelope head;
  head.set_sequence(sequence);
  head.set_enqueued_at_ms(enqueued_at_ms);
  std::string out = SerializeEnvelope(head);
  out.reserve(out.size() + 6 + result.size());
  out.push_back(static_cast<char>((3 << 3) | 2));  // field 3, wire type LEN
  for (uint64_t n = result.size();; n >>= 7) {
    if (n < 0x80) {
      out.push_back(static_cast<char>(n));
      break;
    }
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  out += result;
  return out;
}

// A shard value decodes only if it parses, carries a result and names its own key.
bool DecodeShardValue(const rocksdb::Slice& value, uint64_t sequence, v1::Envelope* out) {
  return out->ParseFromArray(value.data(), static_cast<int>(value.size())) && out->has_result() &&
         out->sequence() == sequence;
}

}  // namespace verdict::storage::format
