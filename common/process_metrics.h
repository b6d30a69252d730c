// What every verdict /metrics endpoint says about the process behind it: Prometheus' standard
// process metrics, read from /proc as its client libraries read them, and verdict_build_info.
// Called once per endpoint's registry (BattleNode's and the lobby's). The readings are taken
// when the registry renders; each is a read of /proc, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/metrics.h"

namespace verdict::metrics {

// Adds to `registry`, read at each rendering:
//   process_cpu_seconds_total        user and system CPU time (counter)
//   process_resident_memory_bytes    resident set size
//   process_virtual_memory_bytes     virtual memory size
//   process_open_fds                 open file descriptors
//   process_max_fds                  the soft limit on them (RLIMIT_NOFILE)
//   process_start_time_seconds       start time, in seconds since the Unix epoch
//   verdict_build_info{version,revision}  1 (common/build_info.h)
// A reading that fails (no /proc) renders as NaN rather than as a plausible number.
void AddProcessMetrics(Registry& registry);

// The fields of /proc/self/stat (proc(5)) the metrics use, in the kernel's units.
struct ProcessStat {
  uint64_t utime_ticks = 0, stime_ticks = 0;  // fields 14 and 15
  uint64_t start_ticks = 0;                   // field 22: since boot
  uint64_t vsize_bytes = 0;                   // field 23
  uint64_t rss_pages = 0;                     // field 24
};

// Parses the text of /proc/PID/stat; nullopt if it is not one. The command name (field 2) is
// read up to its last ')', since it may itself hold spaces and parentheses.
std::optional<ProcessStat> ParseProcessStat(const std::string& text);

// The soft "Max open files" limit in the text of /proc/PID/limits; +Inf for "unlimited",
// nullopt if the line is missing.
std::optional<double> ParseMaxOpenFiles(const std::string& text);

// The "btime" (boot time, seconds since the epoch) in the text of /proc/stat.
std::optional<uint64_t> ParseBootTime(const std::string& text);

}  // namespace verdict::metrics
