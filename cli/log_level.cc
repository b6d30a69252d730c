#include "cli/log_level.h"

#include <vector>

#include <spdlog/spdlog.h>

namespace verdict::cli {
namespace {

// The names spdlog::level::from_str reads as themselves; it reads any other as "off".
const std::vector<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                          "error", "critical", "off"};

}  // namespace

CLI::Option* AddLogLevelOption(CLI::App& app, std::string* level) {
  return app.add_option("--log-level", *level, "trace, debug, info, warn, error, critical or off")
      ->transform(CLI::IsMember(kLevels, CLI::ignore_case))
      ->capture_default_str();
}

void ApplyLogLevel(const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); }

}  // namespace verdict::cli
