// `verdict-bench ingest-memory`: what many slow local clients cost verdict-node's memory.
//   For the node's body budget (--ingest-body-budget-mib) and then for none (a budget no run
//   reaches, which is how the node behaved before it had one), a verdict-node is started with a
//   Unix ingest socket and an unreachable lobby. N connections each send the header of a batch
//   of the largest size the node takes (4 MiB) and all of its body but the last byte, and hold
//   it. A connection the node refuses (503 before its body is read) is counted and closed. While
//   the bodies are held the node's resident memory is sampled; its peak (VmHWM) is the figure.
// The two runs side by side make the budget's effect a ratio on one machine.
#include "bench/ingest_memory.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "bench/sample.h"
#include "proto/wire.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A budget no run reaches: the node without one.
constexpr uint64_t kNoBudgetMib = uint64_t{1} << 20;
// How long the connections may take to send their bodies.
constexpr std::chrono::seconds kSendFor{120};
constexpr std::chrono::milliseconds kSampleEvery{50};

struct Run {
  std::string label;  // "budget" or "none"
  uint64_t budget_mib = 0;
  double baseline_rss_mib = 0;
  double peak_rss_mib = 0;  // VmHWM once the bodies were held
  int held = 0;             // connections holding a body short of its last byte
  int refused = 0;          // connections answered 503 before their body was read
};

// One client connection and how far its body went.
struct Client {
  int fd = -1;
  std::string head;
  size_t sent = 0;  // bytes of head and body written
  bool done = false;
  bool refused = false;
};

int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// Sends every client's header and body but its last byte, as fast as the node reads them;
// a client the node answers (503) or closes is refused. OK once every client is done.
Status SendBodies(std::vector<Client>& clients, size_t body_bytes) {
  const std::string filler(64 * 1024, ' ');
  const auto give_up = SteadyClock::now() + kSendFor;
  for (;;) {
    std::vector<pollfd> polls;
    std::vector<Client*> open;
    for (Client& c : clients) {
      if (c.done) continue;
      polls.push_back({c.fd, POLLIN | POLLOUT, 0});
      open.push_back(&c);
    }
    if (open.empty()) return Status::Ok();
    if (SteadyClock::now() > give_up) {
      return UnavailableError(std::to_string(open.size()) +
                              " connection(s) could not send their bodies in time");
    }
    if (::poll(polls.data(), polls.size(), 1000) < 0 && errno != EINTR) {
      return InternalError(std::string("poll: ") + std::strerror(errno));
    }
    for (size_t i = 0; i < polls.size(); ++i) {
      Client& c = *open[i];
      if (polls[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        c.done = c.refused = true;  // an answer (503) or a close before the body was read
        continue;
      }
      if (!(polls[i].revents & POLLOUT)) continue;
      const size_t total = c.head.size() + body_bytes - 1;
      while (c.sent < total) {
        const char* data = c.sent < c.head.size() ? c.head.data() + c.sent : filler.data();
        const size_t left = c.sent < c.head.size() ? c.head.size() - c.sent
                                                   : std::min(filler.size(), total - c.sent);
        const ssize_t n = ::send(c.fd, data, left, MSG_NOSIGNAL);
        if (n < 0) {
          if (errno != EAGAIN && errno != EWOULDBLOCK) c.done = c.refused = true;
          break;
        }
        c.sent += static_cast<size_t>(n);
      }
      if (c.sent == total) c.done = true;
    }
  }
}

Result<Run> MeasureOne(const IngestMemoryOptions& o, const std::string& label, uint64_t budget_mib,
                       const std::string& root) {
  const std::string dir = root + "/" + label;
  std::filesystem::create_directories(dir);
  const std::string socket = dir + "/ingest.sock";
  const std::string log = dir + "/node.log";
  auto spawned = SpawnReadyNode(
      {NodeBinary(o.node_binary), "run", "--node-id", "bench-memory", "--outbox", dir + "/outbox",
       "--lobby", "http://127.0.0.1:1", "--token", "t", "--ingest-listen", "unix:" + socket,
       "--ingest-body-budget-mib", std::to_string(budget_mib), "--log-level", "error"},
      "unix:" + socket, log);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  auto stop = [&](Status why) {
    Status stopped = StopChild(pid, "verdict-node");
    return why.ok() ? stopped : Status(why.code(), why.message() + "; see " + log);
  };
  Run run{label, budget_mib};
  run.baseline_rss_mib = StatusMiB(pid, "VmRSS");

  const size_t body_bytes = wire::kMaxBatchBodyBytes;
  const std::string head =
      "POST /v1/results:batch HTTP/1.1\r\nHost: node\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body_bytes) + "\r\n\r\n";
  std::vector<Client> clients(o.connections);
  Status sent = Status::Ok();
  for (Client& c : clients) {
    c.fd = ConnectUnix(socket);
    c.head = head;
    if (c.fd < 0) sent = UnavailableError("cannot connect to " + socket);
  }
  if (sent.ok()) sent = SendBodies(clients, body_bytes);
  // Held: the node has read what was sent of each body it admitted; sample while it holds them.
  const auto hold_until =
      SteadyClock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.hold_s * 1000));
  while (sent.ok() && SteadyClock::now() < hold_until) {
    run.peak_rss_mib = std::max(run.peak_rss_mib, StatusMiB(pid, "VmRSS"));
    std::this_thread::sleep_for(kSampleEvery);
  }
  run.peak_rss_mib = std::max(run.peak_rss_mib, StatusMiB(pid, "VmHWM"));
  for (Client& c : clients) {
    if (c.fd >= 0) ::close(c.fd);
    (c.refused ? run.refused : run.held) += 1;
  }
  if (Status s = stop(sent); !s.ok()) return s;
  return run;
}

}  // namespace

int RunIngestMemory(const IngestMemoryOptions& o) {
  const std::string root = TempRoot();
  std::fprintf(stderr,
               "ingest-memory: %d connections each holding a %zu-byte batch body short "
               "of its last byte, in %s\n",
               o.connections, wire::kMaxBatchBodyBytes, root.c_str());
  std::vector<Run> runs;
  for (const auto& [label, budget] :
       {std::pair<std::string, uint64_t>{"budget", o.budget_mib}, {"none", kNoBudgetMib}}) {
    auto run = MeasureOne(o, label, budget, root);
    if (!run.ok()) {
      std::fprintf(stderr, "verdict-bench ingest-memory: %s\n", run.status().ToString().c_str());
      return 1;
    }
    runs.push_back(*run);
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);

  const Run& bounded = runs[0];
  const Run& unbounded = runs[1];
  Report report("ingest_memory");
  report.Field("connections", o.connections);
  report.Field("body_bytes", static_cast<double>(wire::kMaxBatchBodyBytes));
  report.Field("budget_mib", static_cast<double>(o.budget_mib));
  report.Field("peak_rss_mib", bounded.peak_rss_mib);
  report.Field("unbounded_peak_rss_mib", unbounded.peak_rss_mib);
  report.Field("rss_ratio", unbounded.peak_rss_mib / bounded.peak_rss_mib);
  for (const Run& r : runs) {
    report.Row({{"budget", r.label}}, {{"budget_mib", static_cast<double>(r.budget_mib)},
                                       {"baseline_rss_mib", r.baseline_rss_mib},
                                       {"peak_rss_mib", r.peak_rss_mib},
                                       {"held", static_cast<double>(r.held)},
                                       {"refused", static_cast<double>(r.refused)}});
  }
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table, "\n%-22s %12s %14s %10s %10s\n", "run", "baseline MiB", "peak RSS MiB",
               "held", "refused");
  for (const Run& r : runs) {
    const std::string name = r.label == "budget" ? "budget " + std::to_string(r.budget_mib) + " MiB"
                                                 : std::string("no budget");
    std::fprintf(table, "%-22s %12.1f %14.1f %10d %10d\n", name.c_str(), r.baseline_rss_mib,
                 r.peak_rss_mib, r.held, r.refused);
  }
  std::fprintf(table, "without the budget the node holds %.1fx the memory\n",
               unbounded.peak_rss_mib / bounded.peak_rss_mib);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
