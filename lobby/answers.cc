#include "lobby/answers.h"

namespace verdict::lobby {
namespace {

// The value of the field `name`, or nullptr for a name that is no field.
const std::string* FieldOf(std::string_view name, const AnswerFields& fields) {
  if (name == "room") return &fields.room;
  if (name == "player") return &fields.player;
  if (name == "mode") return &fields.mode;
  if (name == "outcome") return &fields.outcome;
  if (name == "detail") return &fields.detail;
  return nullptr;
}

}  // namespace

std::string FillDetail(std::string_view detail, const AnswerFields& fields) {
  std::string out;
  while (!detail.empty()) {
    const size_t open = detail.find('{');
    const size_t close = detail.find('}', open);
    if (close == std::string_view::npos) break;
    out.append(detail.substr(0, open));
    const std::string* value = FieldOf(detail.substr(open + 1, close - open - 1), fields);
    out.append(value ? std::string_view(*value) : detail.substr(open, close - open + 1));
    detail.remove_prefix(close + 1);
  }
  out.append(detail);
  return out;
}

int HttpStatusOf(const Answer& answer) {
  return answer.success ? answer.success : server::InfoOf(answer.problem).http_status;
}

std::string_view LabelOf(const Answer& answer) {
  return answer.success ? answer.label : server::InfoOf(answer.problem).code;
}

}  // namespace verdict::lobby
