#include "common/build_info.h"

namespace verdict {

std::string VersionLine(std::string_view program) {
  const BuildInfo& build = ThisBuild();
  std::string line = std::string(program) + " " + build.version + " (revision " + build.revision;
  if (*build.revision_note) line += std::string(": ") + build.revision_note;
  return line + ")";
}

}  // namespace verdict
