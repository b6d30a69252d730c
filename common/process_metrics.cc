#include "common/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "common/build_info.h"

namespace verdict::metrics {
namespace {

constexpr double kUnreadable = std::numeric_limits<double>::quiet_NaN();

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<ProcessStat> ReadStat() {
  auto text = ReadFile("/proc/self/stat");
  return text ? ParseProcessStat(*text) : std::nullopt;
}

double TicksPerSecond() {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ticks;
}

// The entries of /proc/self/fd, as the Prometheus clients count them (the directory's own
// descriptor, open while it is read, included).
double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return kUnreadable;
  double n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace

std::optional<ProcessStat> ParseProcessStat(const std::string& text) {
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(name_end + 1));
  // Field 3 (the state) onwards; fields 14, 15, 22, 23 and 24 are the ones kept.
  std::vector<std::string> fields;
  for (std::string field; rest >> field && fields.size() < 22;) fields.push_back(field);
  if (fields.size() < 22) return std::nullopt;
  auto number = [&](int field) -> std::optional<uint64_t> {
    const std::string& s = fields[field - 3];
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(s);
  };
  const auto utime = number(14), stime = number(15), start = number(22), vsize = number(23),
             rss = number(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  return ProcessStat{*utime, *stime, *start, *vsize, *rss};
}

std::optional<double> ParseMaxOpenFiles(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    constexpr std::string_view kName = "Max open files";
    if (!line.starts_with(kName)) continue;
    std::istringstream limits(line.substr(kName.size()));
    std::string soft;
    if (!(limits >> soft)) return std::nullopt;
    if (soft == "unlimited") return std::numeric_limits<double>::infinity();
    if (soft.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stod(soft);
  }
  return std::nullopt;
}

std::optional<uint64_t> ParseBootTime(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("btime ")) continue;
    const std::string value = line.substr(6);
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) break;
    return std::stoull(value);
  }
  return std::nullopt;
}

void AddProcessMetrics(Registry& registry) {
  registry.AddCounterReading("process_cpu_seconds_total",
                             "Total user and system CPU time spent in seconds.", [] {
                               const auto stat = ReadStat();
                               if (!stat) return kUnreadable;
                               return (stat->utime_ticks + stat->stime_ticks) / TicksPerSecond();
                             });
  registry.AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.", [] {
    const auto stat = ReadStat();
    return stat ? static_cast<double>(stat->rss_pages) * static_cast<double>(getpagesize())
                : kUnreadable;
  });
  registry.AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", [] {
    const auto stat = ReadStat();
    return stat ? static_cast<double>(stat->vsize_bytes) : kUnreadable;
  });
  registry.AddGauge("process_open_fds", "Number of open file descriptors.", OpenFds);
  registry.AddGauge("process_max_fds", "Maximum number of open file descriptors.", [] {
    const auto text = ReadFile("/proc/self/limits");
    const auto max = text ? ParseMaxOpenFiles(*text) : std::nullopt;
    return max ? *max : kUnreadable;
  });
  registry.AddGauge("process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.", [] {
                      const auto stat = ReadStat();
                      const auto text = ReadFile("/proc/stat");
                      const auto boot = text ? ParseBootTime(*text) : std::nullopt;
                      if (!stat || !boot) return kUnreadable;
                      return static_cast<double>(*boot) + stat->start_ticks / TicksPerSecond();
                    });
  const BuildInfo& build = ThisBuild();
  registry.AddInfo("verdict_build_info",
                   "The version and source revision of this build; the value is always 1.",
                   {{"version", build.version}, {"revision", build.revision}});
}

}  // namespace verdict::metrics
