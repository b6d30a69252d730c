// `--config FILE` for the verdict binaries: a flat file of `key = value` lines whose keys are the
// long flag names without their dashes. A key may name an option of the program or of the
// subcommand being run; keys of other subcommands are skipped, so one file can serve
// `verdict-lobby migrate` and `verdict-lobby serve`. Flags on the command line win. A key that
// names no option anywhere, or a malformed line, is an error with the file and line number.
//
//   # /etc/verdict/lobby.conf
//   db = host=/run/postgresql dbname=verdict
//   listen = "0.0.0.0:8080"
//   node-token = battle-01=secret-one      # repeatable keys repeat
//   node-token = battle-02=secret-two
#pragma once

#include <CLI/CLI.hpp>

namespace verdict::cli {

// Adds `--config FILE` to `app` and makes CLI11 read it with the rules above.
void AddConfigOption(CLI::App& app);

}  // namespace verdict::cli
