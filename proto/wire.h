// Wire encoding shared by node and lobby: which media types carry verdict messages and how a
// message is read from and written to an HTTP body (protobuf binary or proto3 JSON with the
// proto field names). Stateless; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "common/status.h"

namespace verdict::wire {

enum class BodyFormat { kProtobuf, kJson };

inline constexpr std::string_view kProtobufType = "application/x-protobuf";
inline constexpr std::string_view kJsonType = "application/json";

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

// Protobuf: deterministic binary. JSON: proto field names, default values printed; INTERNAL if
// the message has no JSON form (a well-known type out of its range, an Any of an unknown type).
Result<std::string> EncodeBody(const google::protobuf::Message& message, BodyFormat format);

}  // namespace verdict::wire
