// `--version` for the verdict programs: one line with the version and the git revision the
// program was built from (common/build_info.h), printed on standard output, exit status 0.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace verdict::cli {

// Adds `--version` to `app`; it prints VersionLine(program) and exits 0, before any other flag
// or subcommand is required.
void AddVersionOption(CLI::App& app, const std::string& program);

}  // namespace verdict::cli
