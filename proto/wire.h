// Wire encoding shared by node and lobby: which media types carry verdict messages and how a
// message is read from and written to an HTTP body (protobuf binary or proto3 JSON with the
// proto field names) within the limits a body may not pass, and the one JSON writer of the
// programs' other documents. Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "common/status.h"

namespace verdict::v1 {
class BattleResult;
}  // namespace verdict::v1

namespace verdict::wire {

enum class BodyFormat { kProtobuf, kJson };

inline constexpr std::string_view kProtobufType = "application/x-protobuf";
inline constexpr std::string_view kJsonType = "application/json";

// The lobby's result endpoints: one result, and a batch of them.
inline constexpr char kSettlementsPath[] = "/v1/settlements";
inline constexpr char kSettlementsBatchPath[] = "/v1/settlements:batch";

// The limits of the result endpoints, the lobby's (POST /v1/settlements, …:batch) and the node's
// (POST /v1/results, …:batch) alike: a single result's body, a batch's body, a batch's results.
inline constexpr size_t kMaxResultBodyBytes = size_t{1} << 20;
inline constexpr size_t kMaxBatchBodyBytes = size_t{4} << 20;
inline constexpr size_t kMaxBatchResults = 256;
// How a sender packs a batch under kMaxBatchBodyBytes: what one result adds beyond its own bytes
// at most (its field tag and length), and the bytes the results may take together (64 KiB are
// left for the rest of the request).
inline constexpr size_t kBatchBytesPerResult = 16;
inline constexpr size_t kMaxBatchResultBytes = kMaxBatchBodyBytes - (size_t{64} << 10);
// The players of a result and the seats of a room, and the teams of either (proto/validation.h: a
// 150-player battle royale fits), and the bytes of any one string of a message.
inline constexpr size_t kMaxPlayers = 200;
inline constexpr size_t kMaxTeams = 100;
inline constexpr size_t kMaxStringBytes = 4096;

// What one body may hold, checked in one pass over its bytes before protobuf builds anything
// from it: protobuf's parsers allocate as they read (an object per element, per unknown field,
// per level of a nested JSON array, 60 to 150 times a hostile body's size) and count nothing.
// Within these limits a body costs a small multiple of its size.
struct DecodeLimits {
  // Elements of any one repeated field, or entries of any one map; more is RESOURCE_EXHAUSTED.
  // Default: kMaxBatchResults (256), a batch's results.
  size_t max_repeated = kMaxBatchResults;
  // Elements of all the repeated fields and maps of the body together; more is
  // RESOURCE_EXHAUSTED. Default: a full batch of full rooms, each placing as many teams as it may,
  // kMaxBatchResults × (1 + kMaxPlayers + kMaxTeams).
  size_t max_elements = kMaxBatchResults * (1 + kMaxPlayers + kMaxTeams);
  // Fields of a protobuf body that its types do not know (a newer sender's; protobuf keeps each
  // as an object), all together; more is RESOURCE_EXHAUSTED. JSON refuses unknown fields.
  // Default: as max_elements.
  size_t max_unknown_fields = kMaxBatchResults * (1 + kMaxPlayers + kMaxTeams);
  // Bytes of any one string or bytes value (unescaped); longer is INVALID_ARGUMENT.
  // Default: kMaxStringBytes (4096).
  size_t max_string_bytes = kMaxStringBytes;
  // Messages nested in one another, the body's own counting as 1; deeper is INVALID_ARGUMENT.
  // Default: 8.
  int max_depth = 8;
};

// The media type of a Content-Type header: lower case, without parameters (such as charset)
// or the blanks around it.
std::string MediaTypeOf(std::string_view content_type);

// The format named by a Content-Type header (parameters such as charset are ignored);
// nullopt for anything else.
std::optional<BodyFormat> FormatOfContentType(std::string_view content_type);

// The format to answer in: what Accept asks for if it names one of ours, otherwise the
// request's own format, otherwise `fallback`.
BodyFormat ReplyFormat(std::string_view accept, std::optional<BodyFormat> request_format,
                       BodyFormat fallback);

std::string_view ContentTypeOf(BodyFormat format);

// Parses `body` into `message`, after checking it against `limits` and, for JSON, against the
// one form verdict accepts (proto/body_check.cc): one object; each field once, under its proto
// name or its camelCase one; no unknown field; integers as integer literals or strings of one,
// in range (never a fraction or exponent, which protobuf would round through a double). OK, or
// INVALID_ARGUMENT (not a `message`, saying where) or RESOURCE_EXHAUSTED (more elements or
// unknown fields than `limits` allow), with `message` then left empty.
Status DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                  const DecodeLimits& limits = {});
// The same within the default limits, saying why in `error`: for callers that need only the
// message.
bool DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                std::string* error);

// Moves each player id a sender of integer ids gave as `legacy_player_id` (a PlayerResult's, a
// Seat's) into `player_id`, as its decimal string, in a BattleResult, a SettlementBatch, a
// RoomAllocation or an Envelope; other messages are left as they are. INVALID_ARGUMENT naming the
// player when the two fields name different players. DecodeBody does it to every body.
Status ReadLegacyPlayerIds(google::protobuf::Message* message);

// The canonical bytes of a message: protobuf's deterministic serialization (map entries
// sorted), the same for a message decoded from protobuf or from JSON.
std::string DeterministicBytes(const google::protobuf::Message& message);

// Appends `result` to `batch`, the deterministic bytes of a SettlementBatch being built: the
// field's tag and length, then the result's own deterministic bytes, as protobuf writes an element
// of a repeated message field. A node's request of 64 results is built so without copying each
// result into a SettlementBatch first (its player ids are a heap string each).
void AppendToBatchBytes(const v1::BattleResult& result, std::string* batch);

// Protobuf: deterministic binary. JSON: see ToJson.
Result<std::string> EncodeBody(const google::protobuf::Message& message, BodyFormat format);

// The proto3 JSON form of a message, on one line: proto field names, default values printed,
// map entries (and so a google.protobuf.Struct's keys) in key order. Every JSON document verdict
// writes goes through here, so all share one escaping and one field naming. INTERNAL if the
// message has no JSON form (a well-known type out of its range, an Any of an unknown type).
Result<std::string> ToJson(const google::protobuf::Message& message);

// Whether `text` is well-formed UTF-8, as protobuf requires of a string field.
bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not part of well-formed UTF-8 replaced by U+FFFD. A message's
// string fields must be UTF-8: protobuf drops other bytes when it writes JSON, and logs an error
// each time. Text from outside (a request path, a stored detail) goes through here first.
std::string ValidUtf8(std::string_view text);

// `text` with every control character (C0, DEL, C1) and every byte that is not UTF-8 written as
// an escape (\n, \t, \x1b, \u009b, \\), so that what a lobby or a record says cannot move the
// cursor, change colours or forge lines when printed to a terminal or a log.
std::string EscapeForTerminal(std::string_view text);

}  // namespace verdict::wire
