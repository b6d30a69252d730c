#include "proto/wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>

namespace verdict::wire {
namespace {

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

bool DecodeBody(std::string_view body, BodyFormat format, google::protobuf::Message* message,
                std::string* error) {
  if (format == BodyFormat::kProtobuf) {
    if (!message->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      *error = "body is not a valid protobuf " + message->GetTypeName();
      return false;
    }
    return true;
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), message, options);
  if (!status.ok()) {
    *error =
        "body is not a valid JSON " + message->GetTypeName() + ": " + std::string(status.message());
    return false;
  }
  return true;
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
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return InternalError("cannot write " + message.GetTypeName() +
                         " as JSON: " + std::string(status.message()));
  }
  return out;
}

}  // namespace verdict::wire
