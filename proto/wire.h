// Wire encoding shared by node and lobby: which media types carry verdict messages and how a
// message is read from and written to an HTTP body (protobuf binary or proto3 JSON with the
// proto field names), and the one JSON writer of the programs' other documents. Stateless;
// thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "common/status.h"

namespace verdict::wire {

enum class BodyFormat { kProtobuf, kJson };

inline constexpr std::string_view kProtobufType = "application/x-protobuf";
inline constexpr std::string_view kJsonType = "application/json";

// The limits of the result endpoints, the lobby's (POST /v1/settlements, …:batch) and the node's
// (POST /v1/results, …:batch) alike: a single result's body, a batch's body, a batch's results.
inline constexpr size_t kMaxResultBodyBytes = size_t{1} << 20;
inline constexpr size_t kMaxBatchBodyBytes = size_t{4} << 20;
inline constexpr size_t kMaxBatchResults = 256;

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

// Parses `body` into `message`. On failure returns false and says why in `error`.
// JSON accepts the proto field names and the camelCase ones; unknown fields are refused.
bool DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                std::string* error);

// The canonical bytes of a message: protobuf's deterministic serialization (map entries
// sorted), the same for a message decoded from protobuf or from JSON.
std::string DeterministicBytes(const google::protobuf::Message& message);

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

}  // namespace verdict::wire
