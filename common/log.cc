#include "common/log.h"

#include <algorithm>
#include <memory>

#include <spdlog/spdlog.h>

namespace verdict {

spdlog::logger& Log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    if (auto registered = spdlog::get(kLoggerName)) return registered;
    auto made = spdlog::default_logger()->clone(kLoggerName);
    try {
      spdlog::register_logger(made);
    } catch (const spdlog::spdlog_ex&) {
      // Registered by the host between the lookup and here: use theirs.
      if (auto registered = spdlog::get(kLoggerName)) return registered;
    }
    return made;
  }();
  return *logger;
}

LogLine SplitLogFields(std::string_view line) {
  LogLine split;
  std::string_view rest = line;
  for (;;) {
    const size_t end = rest.find_first_of(" :");
    const size_t eq = rest.substr(0, end).find('=');
    if (end == std::string_view::npos || eq == std::string_view::npos || eq == 0 || eq + 1 == end) {
      break;
    }
    const std::string_view key = rest.substr(0, eq);
    if (std::find(kLogFieldKeys.begin(), kLogFieldKeys.end(), key) == kLogFieldKeys.end()) break;
    split.fields.emplace_back(key, rest.substr(eq + 1, end - eq - 1));
    if (rest[end] == ':') {
      if (end + 1 < rest.size() && rest[end + 1] != ' ') break;
      split.message = rest.substr(std::min(rest.size(), end + 2));
      return split;
    }
    rest.remove_prefix(end + 1);
  }
  return {{}, line};
}

}  // namespace verdict
