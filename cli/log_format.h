// `--log-format` for the verdict programs: `text` (spdlog's lines, the default) or `json` (one
// JSON object per line, common/json_log.h), for every log line of the program, the library's
// included. Checked like --log-level, on the command line and in a `--config` file.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace verdict::cli {

// Adds `--log-format FORMAT` to `app`, bound to `*format`, which holds the default: text or
// json (case-insensitive); anything else fails the parse (CLI::ValidationError).
CLI::Option* AddLogFormatOption(CLI::App& app, std::string* format);

// Gives every spdlog logger's sinks the format `format` names (one AddLogFormatOption accepted).
// Call it after setting the default logger and before the first line: the "verdict" logger
// (common/log.h) shares the default logger's sinks.
void ApplyLogFormat(const std::string& format);

// Prints why `program` stops on standard error: "program: message" as text, or an error line in
// JSON once ApplyLogFormat chose it, so that a log pipeline reading the program's standard error
// sees only JSON. Printed whatever the log level.
void PrintError(std::string_view program, std::string_view message);

}  // namespace verdict::cli
