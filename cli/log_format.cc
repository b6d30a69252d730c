#include "cli/log_format.h"

#include <atomic>
#include <cstdio>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/json_log.h"

namespace verdict::cli {
namespace {

const std::vector<std::string> kFormats = {"text", "json"};

std::atomic<bool> json_chosen{false};

}  // namespace

CLI::Option* AddLogFormatOption(CLI::App& app, std::string* format) {
  return app
      .add_option("--log-format", *format,
                  "text, or json: one JSON object per log line (time, level, logger, message, "
                  "and room, node, shard, code when the line concerns one)")
      ->transform(CLI::IsMember(kFormats, CLI::ignore_case))
      ->capture_default_str();
}

void ApplyLogFormat(const std::string& format) {
  if (format != "json") return;
  spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
  json_chosen = true;
}

void PrintError(std::string_view program, std::string_view message) {
  if (!json_chosen) {
    std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(message.size()), message.data());
    return;
  }
  const spdlog::string_view_t name = spdlog::default_logger()->name();
  const spdlog::details::log_msg msg(name, spdlog::level::err,
                                     spdlog::string_view_t(message.data(), message.size()));
  spdlog::memory_buf_t line;
  JsonLogFormatter().format(msg, line);
  spdlog::default_logger()->flush();
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace verdict::cli
