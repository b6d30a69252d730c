#include "proto/wire.h"

#include "verdict/v1/verdict.pb.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/utf8.h"
#include "proto/body_check.h"

namespace verdict::wire {
namespace {

constexpr char kTypeUrlPrefix[] = "type.googleapis.com";

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string MediaTypeOf(std::string_view content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';'))));
}

bool IsValidUtf8(std::string_view text) {
  while (!text.empty()) {
    // ASCII eight bytes at a time: results are mostly ASCII (ids, paths), checked on every
    // request, and a byte-by-byte walk was a visible share of the ingest's CPU.
    uint64_t eight;
    if (text.size() >= sizeof(eight)) {
      std::memcpy(&eight, text.data(), sizeof(eight));
      if ((eight & 0x8080808080808080ULL) == 0) {
        text.remove_prefix(sizeof(eight));
        continue;
      }
    }
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) return false;
    text.remove_prefix(length);
  }
  return true;
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
      text.remove_prefix(1);
    } else {
      out.append(text.substr(0, length));
      text.remove_prefix(length);
    }
  }
  return out;
}

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  char escape[8];
  while (!text.empty()) {
    const auto c = static_cast<unsigned char>(text[0]);
    const size_t n = Utf8SequenceLength(text);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (n == 0 || c < 0x20 || c == 0x7f) {
      std::snprintf(escape, sizeof(escape), "\\x%02x", c);  // a control, or not UTF-8
      out += escape;
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(text[1]) < 0xa0) {
      std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned char>(text[1]));
      out += escape;  // C1 controls (U+0080–U+009F), which some terminals obey as escapes
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n == 0 ? 1 : n);
  }
  return out;
}

std::optional<BodyFormat> FormatOfContentType(std::string_view content_type) {
  const std::string type = MediaTypeOf(content_type);
  if (type == kProtobufType) return BodyFormat::kProtobuf;
  if (type == kJsonType) return BodyFormat::kJson;
  return std::nullopt;
}

BodyFormat ReplyFormat(std::string_view accept, std::optional<BodyFormat> request_format,
                       BodyFormat fallback) {
  const std::string a = Lower(accept);
  const bool wants_proto = a.find(kProtobufType) != std::string::npos;
  const bool wants_json = a.find(kJsonType) != std::string::npos;
  if (wants_proto && !wants_json) return BodyFormat::kProtobuf;
  if (wants_json && !wants_proto) return BodyFormat::kJson;
  return request_format.value_or(fallback);
}

std::string_view ContentTypeOf(BodyFormat format) {
  return format == BodyFormat::kProtobuf ? kProtobufType : kJsonType;
}

namespace {

// `id` of players or seats [i], moved into player_id.
template <typename Player>
Status ReadLegacyId(Player& p, const char* what, int i) {
  if (!p.has_legacy_player_id()) return Status::Ok();
  const std::string decimal = std::to_string(p.legacy_player_id());
  if (p.player_id().empty()) {
    p.set_player_id(decimal);
  } else if (p.player_id() != decimal) {
    return InvalidArgumentError(std::string(what) + "[" + std::to_string(i) +
                                "]: player_id and legacy_player_id name different players");
  }
  p.clear_legacy_player_id();
  return Status::Ok();
}

Status ReadLegacyIds(v1::BattleResult& r) {
  for (int i = 0; i < r.players_size(); ++i) {
    VERDICT_RETURN_IF_ERROR(ReadLegacyId(*r.mutable_players(i), "players", i));
  }
  return Status::Ok();
}

}  // namespace

Status ReadLegacyPlayerIds(google::protobuf::Message* message) {
  if (auto* r = dynamic_cast<v1::BattleResult*>(message)) return ReadLegacyIds(*r);
  if (auto* e = dynamic_cast<v1::Envelope*>(message)) {
    return e->has_result() ? ReadLegacyIds(*e->mutable_result()) : Status::Ok();
  }
  if (auto* b = dynamic_cast<v1::SettlementBatch*>(message)) {
    for (int i = 0; i < b->results_size(); ++i) {
      if (Status s = ReadLegacyIds(*b->mutable_results(i)); !s.ok()) {
        return Status(s.code(), "results[" + std::to_string(i) + "]." + s.message());
      }
    }
    return Status::Ok();
  }
  if (auto* a = dynamic_cast<v1::RoomAllocation*>(message)) {
    for (int i = 0; i < a->seats_size(); ++i) {
      VERDICT_RETURN_IF_ERROR(ReadLegacyId(*a->mutable_seats(i), "seats", i));
    }
  }
  return Status::Ok();
}

Status DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                  const DecodeLimits& limits) {
  message->Clear();
  const google::protobuf::Descriptor& type = *message->GetDescriptor();
  const std::string what = (format == BodyFormat::kProtobuf ? "body is not a valid protobuf "
                                                            : "body is not a valid JSON ") +
                           message->GetTypeName();
  std::vector<std::pair<size_t, size_t>> integer_ids;
  const Status checked = format == BodyFormat::kProtobuf
                             ? CheckProtobufBody(body, type, limits)
                             : CheckJsonBody(body, type, limits, &integer_ids);
  if (!checked.ok()) return Status(checked.code(), what + ": " + checked.message());
  if (format == BodyFormat::kProtobuf) {
    if (!message->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      message->Clear();
      return InvalidArgumentError(what);
    }
  } else {
    // Player ids given as integers, quoted: the strings protobuf reads them as.
    std::string quoted;
    if (!integer_ids.empty()) {
      quoted.reserve(body.size() + 2 * integer_ids.size());
      size_t at = 0;
      for (const auto& [begin, end] : integer_ids) {
        quoted.append(body.substr(at, begin - at)).push_back('"');
        quoted.append(body.substr(begin, end - begin)).push_back('"');
        at = end;
      }
      quoted.append(body.substr(at));
      body = quoted;
    }
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    auto status = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(body.data(), body.size()), message, options);
    if (!status.ok()) {
      message->Clear();
      return InvalidArgumentError(what + ": " + std::string(status.message()));
    }
  }
  if (Status ids = ReadLegacyPlayerIds(message); !ids.ok()) {
    message->Clear();
    return Status(ids.code(), what + ": " + ids.message());
  }
  return Status::Ok();
}

bool DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                std::string* error) {
  const Status decoded = DecodeBody(body, format, message);
  if (!decoded.ok()) *error = decoded.message();
  return decoded.ok();
}

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

void AppendToBatchBytes(const v1::BattleResult& result, std::string* batch) {
  google::protobuf::io::StringOutputStream stream(batch);  // appends
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
      v1::SettlementBatch::kResultsFieldNumber,
      google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  coded.WriteVarint32(static_cast<uint32_t>(result.ByteSizeLong()));
  result.SerializeWithCachedSizes(&coded);
  coded.Trim();
}

Result<std::string> EncodeBody(const google::protobuf::Message& message, BodyFormat format) {
  if (format == BodyFormat::kProtobuf) return DeterministicBytes(message);
  return ToJson(message);
}

Result<std::string> ToJson(const google::protobuf::Message& message) {
  // What MessageToJsonString does, but from the deterministic bytes: the JSON printer writes
  // fields in the order of the bytes, and only a deterministic serialization orders map entries.
  static const std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, google::protobuf::DescriptorPool::generated_pool()));
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  auto status = google::protobuf::util::BinaryToJsonString(
      resolver.get(), std::string(kTypeUrlPrefix) + "/" + message.GetDescriptor()->full_name(),
      DeterministicBytes(message), &out, options);
  if (!status.ok()) {
    return InternalError("cannot write " + message.GetTypeName() +
                         " as JSON: " + std::string(status.message()));
  }
  return out;
}

}  // namespace verdict::wire
