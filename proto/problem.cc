#include "proto/problem.h"

#include <cmath>
#include <string>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "proto/wire.h"

namespace verdict::wire {
namespace {

using Members = google::protobuf::Map<std::string, google::protobuf::Value>;

// The largest HTTP status code (RFC 9110 §15: three digits).
constexpr double kMaxHttpStatus = 999;

const google::protobuf::Value* Member(const Members& members, const std::string& name,
                                      google::protobuf::Value::KindCase kind) {
  const auto it = members.find(name);
  if (it == members.end() || it->second.kind_case() != kind) return nullptr;
  return &it->second;
}

std::string StringMember(const Members& members, const std::string& name) {
  const auto* value = Member(members, name, google::protobuf::Value::kStringValue);
  return value ? value->string_value() : std::string();
}

}  // namespace

std::optional<v1::Problem> ParseProblem(std::string_view body, std::string_view content_type) {
  if (MediaTypeOf(content_type) != kProblemType) return std::nullopt;
  google::protobuf::Struct json;
  if (!google::protobuf::util::JsonStringToMessage(
           google::protobuf::StringPiece(body.data(), body.size()), &json)
           .ok()) {
    return std::nullopt;
  }
  const Members& members = json.fields();
  v1::Problem problem;
  problem.set_code(StringMember(members, "code"));
  problem.set_detail(StringMember(members, "detail"));
  if (const auto* status = Member(members, "status", google::protobuf::Value::kNumberValue)) {
    const double n = status->number_value();
    if (n >= 0 && n <= kMaxHttpStatus && n == std::floor(n)) {
      problem.set_status(static_cast<uint32_t>(n));
    }
  }
  const auto* retryable = Member(members, "retryable", google::protobuf::Value::kBoolValue);
  problem.set_retryable(retryable == nullptr || retryable->bool_value());
  return problem;
}

}  // namespace verdict::wire
