// Which build this is: the project's version and the source revision it was built from, for
// `--version` and the verdict_build_info metric. Written at build time by cmake/build_info.cmake
// (a commit made since the last configure is named). Thread-safe: constants.
#pragma once

#include <string>
#include <string_view>

namespace verdict {

struct BuildInfo {
  // The project's version (CMakeLists.txt), e.g. "0.1.0".
  const char* version;
  // The git commit's hash (12 digits), with "-dirty" when tracked files differed from it; or
  // "unknown" for a build from a source tree without git (a release tarball).
  const char* revision;
  // Empty, or why the revision is unknown.
  const char* revision_note;
};

const BuildInfo& ThisBuild();

// `program`'s --version line: "verdict-node 0.1.0 (revision 74e874d1c0de)", or with "revision
// unknown: built from a source tree without git".
std::string VersionLine(std::string_view program);

}  // namespace verdict
