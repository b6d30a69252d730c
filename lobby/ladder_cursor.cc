#include "lobby/ladder_cursor.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include "proto/validation.h"

namespace verdict::lobby {
namespace {

// The order-preserving bits of a double: as unsigned integers, their order is the doubles'.
uint64_t OrderedBits(double d) {
  const uint64_t bits = std::bit_cast<uint64_t>(d);
  return bits & (uint64_t{1} << 63) ? ~bits : bits | (uint64_t{1} << 63);
}
double FromOrderedBits(uint64_t bits) {
  return std::bit_cast<double>(bits & (uint64_t{1} << 63) ? bits & ~(uint64_t{1} << 63) : ~bits);
}

constexpr char kBase64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

}  // namespace

std::string EncodeLadderCursor(const LadderCursor& cursor) {
  std::string bytes(8, '\0');
  const uint64_t bits = OrderedBits(cursor.displayed);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(bits >> (56 - 8 * i));
  bytes += cursor.player_id;
  std::string out;
  uint32_t buffer = 0;
  int held = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    held += 8;
    while (held >= 6) {
      out.push_back(kBase64Url[(buffer >> (held - 6)) & 63]);
      held -= 6;
    }
  }
  if (held > 0) out.push_back(kBase64Url[(buffer << (6 - held)) & 63]);
  return out;
}

std::optional<LadderCursor> DecodeLadderCursor(std::string_view text) {
  std::string bytes;
  uint32_t buffer = 0;
  int held = 0;
  for (char c : text) {
    const char* at = std::strchr(kBase64Url, c);
    if (c == '\0' || at == nullptr) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(at - kBase64Url);
    held += 6;
    if (held >= 8) {
      bytes.push_back(static_cast<char>((buffer >> (held - 8)) & 255));
      held -= 8;
    }
  }
  // 8 bytes of the rating, then a player id as every player id is (1 to 64 bytes of UTF-8 with
  // no NUL): PostgreSQL refuses other bytes in a text parameter (a 500), and libpq's text
  // parameters end at a NUL (a page after another id than the one given).
  if (bytes.size() < 8) return std::nullopt;
  std::string player_id = bytes.substr(8);
  if (!wire::ValidatePlayerId(player_id).ok()) return std::nullopt;
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(bytes[i]);
  return LadderCursor{FromOrderedBits(bits), std::move(player_id)};
}

}  // namespace verdict::lobby
