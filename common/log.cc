#include "common/log.h"

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

}  // namespace verdict
