#include "cli/version.h"

#include "common/build_info.h"

namespace verdict::cli {

void AddVersionOption(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", VersionLine(program), "print the version and git revision");
}

}  // namespace verdict::cli
