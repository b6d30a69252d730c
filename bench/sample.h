// What the benchmark modes share: the sample result they store, a progress line printer, a
// percentile of samples, a process's memory as /proc reports it, starting and stopping child
// processes, and a database of their own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/types.h>

#include "common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::bench {

// A ten-player result (room 1) padded through replay_path to about `size` serialized bytes.
v1::BattleResult PaddedResult(size_t size);

// Prints "  label: 2/5 s, N done" to stderr once a second while it lives ("2 s" when the total
// is not known, 0).
class Progress {
 public:
  Progress(std::string label, double total_s, const std::atomic<uint64_t>& done);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The sample at `fraction` (0.5, 0.99, 0.999) of `samples`, sorted: the one at index
// floor(fraction * N); 0 for none.
double Percentile(std::vector<double> samples, double fraction);

// User plus system CPU time, in seconds, that this process (RUSAGE_SELF) or the calling thread
// (RUSAGE_THREAD) has used so far.
double CpuSeconds(int who);

// User plus system CPU time, in seconds, that process `pid` has used so far (/proc/PID/stat); -1
// if it is gone.
double ProcessCpuSeconds(pid_t pid);

// The host's CPU time so far, in seconds summed over its cores (/proc/stat): busy (neither idle
// nor waiting for I/O), and in all.
struct HostCpu {
  double busy_s = 0;
  double total_s = 0;
};
HostCpu HostCpuNow();

// A size field of /proc/PID/status ("VmRSS", "VmHWM") in MiB; -1 if the process is gone.
double StatusMiB(pid_t pid, const std::string& field);

// The verdict-node to run: `given` if set, else the one built with this benchmark, else the one
// on PATH.
std::string NodeBinary(const std::string& given);

// Starts `args` (args[0] from PATH if it has no slash) with its stdout and stderr in `log`.
Result<pid_t> SpawnWithLog(const std::vector<std::string>& args, const std::string& log);

// Starts verdict-node with `args` (args[0] the binary) and its output in `log`, and waits until
// it answers GET /readyz with 200 on its ingest listener `ingest` ("unix:PATH"). UNAVAILABLE if
// it cannot start or is not ready within 30 s (it is then stopped).
Result<pid_t> SpawnReadyNode(const std::vector<std::string>& args, const std::string& ingest,
                             const std::string& log);

// The verdict-lobby to run: `given` if set, else the one built with this benchmark, else the one
// on PATH.
std::string LobbyBinary(const std::string& given);

// A verdict-lobby process, and the port it listens on.
struct LobbyChild {
  pid_t pid = -1;
  uint16_t port = 0;
};

// Starts `binary --db conninfo --log-level warn serve --listen 127.0.0.1:0 ARGS…` with its stderr
// in `log`, and waits for its "listening on HOST:PORT" line. UNAVAILABLE if it does not come up
// (it is then killed).
Result<LobbyChild> SpawnLobby(const std::string& binary, const std::string& conninfo,
                              const std::vector<std::string>& serve_args, const std::string& log);

// Stops child `pid` (named `what` in errors) with SIGTERM and reaps it, waiting at most
// `grace` (twice the node's own 30 s shutdown deadline by default); a child still running then
// is killed with SIGKILL. OK only if it exited with status 0: a verdict process that crashes or
// hangs on SIGTERM is a finding, not a measurement.
Status StopChild(pid_t pid, const std::string& what,
                 std::chrono::seconds grace = std::chrono::seconds(60));

// A run's own database, created empty and dropped with everything in it when the run ends. Its
// name carries the mode and the process id: two runs against one server (CI runs the smoke tests
// and the pg_virtualenv test side by side) must never drop each other's database in the middle
// of a run. Throws (libpqxx) if the server cannot be reached.
class ScratchDatabase {
 public:
  ScratchDatabase(std::string admin_conninfo, const std::string& mode);
  ~ScratchDatabase();
  ScratchDatabase(const ScratchDatabase&) = delete;
  ScratchDatabase& operator=(const ScratchDatabase&) = delete;

  std::string conninfo() const { return admin_ + (admin_.empty() ? "" : " ") + "dbname=" + name_; }

 private:
  std::string admin_;
  std::string name_;
};

// A ScratchDatabase with this build's lobby schema in it; null, having said why on stderr, if the
// server cannot be reached or the schema cannot be applied.
std::unique_ptr<ScratchDatabase> MigratedScratchDatabase(const std::string& admin_conninfo,
                                                         const std::string& mode);

}  // namespace verdict::bench
