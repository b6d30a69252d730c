// `--log-level` for the verdict binaries: one list of level names, checked the same way on the
// command line and in a `--config` file, so that a misspelt level is a usage error instead of
// spdlog's silent "off" (which hid error lines too). Names are case-insensitive (INFO means
// info) and stored in lower case.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace verdict::cli {

// Adds `--log-level LEVEL` to `app`, bound to `*level`, which holds the default: one of trace,
// debug, info, warn, error, critical or off; anything else fails the parse (CLI::ValidationError).
CLI::Option* AddLogLevelOption(CLI::App& app, std::string* level);

// Sets spdlog's level to `level`, a name AddLogLevelOption accepted.
void ApplyLogLevel(const std::string& level);

}  // namespace verdict::cli
