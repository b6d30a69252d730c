#include "proto/wire.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <algorithm>
#include <cctype>
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

Status DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                  const DecodeLimits& limits) {
  message->Clear();
  const google::protobuf::Descriptor& type = *message->GetDescriptor();
  const std::string what = (format == BodyFormat::kProtobuf ? "body is not a valid protobuf "
                                                            : "body is not a valid JSON ") +
                           message->GetTypeName();
  const Status checked = format == BodyFormat::kProtobuf ? CheckProtobufBody(body, type, limits)
                                                         : CheckJsonBody(body, type, limits);
  if (!checked.ok()) return Status(checked.code(), what + ": " + checked.message());
  if (format == BodyFormat::kProtobuf) {
    if (!message->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      message->Clear();
      return InvalidArgumentError(what);
    }
    return Status::Ok();
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), message, options);
  if (!status.ok()) {
    message->Clear();
    return InvalidArgumentError(what + ": " + std::string(status.message()));
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
