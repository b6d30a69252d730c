#include "lobby/settle_batch_call.h"

namespace verdict::lobby {

std::string SettleBatchCall(const SettleBatchArgs& sql) {
  std::string call = "verdict_settle_batch(";
  for (size_t i = 0; i < sql.size(); ++i) {
    if (i > 0) call += ", ";
    call += "(" + sql[i] + ")::";
    call += kSettleBatchParameters[i].type;
  }
  return call + ")";
}

std::string SettleBatchPreparedCall() {
  SettleBatchArgs placeholders;
  for (size_t i = 0; i < placeholders.size(); ++i) placeholders[i] = "$" + std::to_string(i + 1);
  return SettleBatchCall(placeholders);
}

std::string SettleBatchIdentityArguments() {
  std::string list;
  for (const SqlParameter& p : kSettleBatchParameters) {
    if (!list.empty()) list += ", ";
    list += std::string(p.name) + " " + std::string(p.type);
  }
  return list;
}

}  // namespace verdict::lobby
