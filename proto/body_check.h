// The checks DecodeBody (proto/wire.h) runs on a body before protobuf builds a message from it:
// one pass over the bytes, guided by the message type's schema, that holds the body to the
// DecodeLimits and, for JSON, to the exact form the lobby and the node accept. Protobuf's own
// parsers cannot do this: they allocate as they go (an object per element, per unknown field,
// per level of a nested JSON array) and count nothing. Internal to verdict::proto; stateless;
// thread-safe.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "common/status.h"
#include "proto/wire.h"

namespace verdict::wire {

// OK if `json` is one JSON object that protobuf may parse as `type` within `limits`, once each
// integer given for a player id (a field with the player_id_field option) is quoted; else
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED as DecodeBody says. `integer_ids` (may be null) gets the
// byte ranges [begin, end) of those integers, in order.
Status CheckJsonBody(std::string_view json, const google::protobuf::Descriptor& type,
                     const DecodeLimits& limits,
                     std::vector<std::pair<size_t, size_t>>* integer_ids = nullptr);

// OK if `bytes`, read as the protobuf binary form of `type`, stays within `limits`; else
// INVALID_ARGUMENT (malformed, or past a size or depth limit) or RESOURCE_EXHAUSTED (more
// elements or unknown fields than allowed). A malformed body that this pass cannot tell apart
// from a valid one is left for protobuf to refuse.
Status CheckProtobufBody(std::string_view bytes, const google::protobuf::Descriptor& type,
                         const DecodeLimits& limits);

}  // namespace verdict::wire
