#include "bench/http_ingest.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "bench/sample.h"
#include "node/battle_node.h"
#include "proto/wire.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
// Room ids of client c start at (c + 1) * this, so no two requests share a room.
constexpr uint64_t kRoomsPerClient = 1'000'000'000;
constexpr size_t kReadChunk = 64 * 1024;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One keep-alive client: at most one request in flight, as a battle host posting a result and
// waiting for "stored" before it lets the room go.
struct Client {
  int fd = -1;
  uint64_t room = 0;
  uint64_t sent_requests = 0;   // requests sent so far (the next one's number)
  SteadyClock::time_point due;  // when the request in flight was due (open loop) or sent
  bool in_flight = false;
  std::string out;  // request bytes not yet written
  size_t written = 0;
  std::string in;  // answer bytes read so far
};

// The status of a complete answer at the start of `in`, and its length; nullopt while it is
// incomplete. The node always answers with a Content-Length.
std::optional<std::pair<int, size_t>> CompleteAnswer(const std::string& in) {
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return std::nullopt;
  const int status = in.size() > 12 ? std::atoi(in.c_str() + 9) : 0;
  size_t length = 0;
  for (size_t line = in.find("\r\n") + 2; line < end; line = in.find("\r\n", line) + 2) {
    if (strncasecmp(in.c_str() + line, "content-length:", 15) == 0) {
      length = std::strtoull(in.c_str() + line + 15, nullptr, 10);
    }
  }
  if (in.size() < end + 4 + length) return std::nullopt;
  return std::pair{status, end + 4 + length};
}

int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    std::fprintf(stderr, "http ingest: cannot connect to %s: %s\n", path.c_str(),
                 std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

HttpIngestRun RunHttpIngest(const IngestOptions& o, const std::string& dir, int clients,
                            size_t batch, double rate, bool http_alone) {
  std::filesystem::create_directories(dir);
  const v1::BattleResult proto = PaddedResult(o.size);
  node::NodeOptions options;
  options.node_id = proto.node_id();
  options.outbox_dir = dir + "/outbox";
  options.lobby_urls = {"http://127.0.0.1:1"};  // no lobby: this measures ingest alone
  options.token = "bench";
  const std::string socket = dir + "/ingest.sock";
  options.ingest.listen = {"unix:" + socket};
  options.ingest.unsafe_answer_before_durable_for_test = http_alone;
  auto node = node::BattleNode::Start(options);
  if (!node.ok()) {
    std::fprintf(stderr, "http ingest: %s\n", node.status().ToString().c_str());
    return {};
  }
  const std::string head =
      std::string("POST ") + (batch == 1 ? "/v1/results" : "/v1/results:batch") +
      " HTTP/1.1\r\nHost: localhost\r\nContent-Type: " + std::string(wire::kProtobufType) +
      "\r\nAccept: " + std::string(wire::kProtobufType) + "\r\nContent-Length: ";
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Client> all(clients);
  bool failed = false;
  for (int c = 0; c < clients && !failed; ++c) {
    all[c].room = (c + 1) * kRoomsPerClient;
    all[c].fd = ConnectUnix(socket);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u32 = c;
    failed = all[c].fd < 0 || ::epoll_ctl(epoll, EPOLL_CTL_ADD, all[c].fd, &event) != 0;
  }
  std::atomic<uint64_t> answered{0};
  std::vector<double> latencies_ms;
  const double process_cpu_at_start = CpuSeconds(RUSAGE_SELF);
  const double client_cpu_at_start = CpuSeconds(RUSAGE_THREAD);
  const auto start = SteadyClock::now();
  const auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(o.seconds));
  // Open loop: client c sends its k-th request at start + (k + c / clients) * interval.
  const auto interval = rate > 0 ? std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(clients * batch / rate))
                                 : SteadyClock::duration::zero();
  if (rate > 0) latencies_ms.reserve(static_cast<size_t>(rate / batch * o.seconds * 1.1) + 16);
  v1::BattleResult result = proto;
  v1::SettlementBatch many;
  // Writes what is left of c's request; on EAGAIN the rest waits for EPOLLOUT.
  auto flush = [&](int c) {
    Client& client = all[c];
    while (client.written < client.out.size()) {
      const ssize_t n = ::send(client.fd, client.out.data() + client.written,
                               client.out.size() - client.written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        std::fprintf(stderr, "http ingest: send: %s\n", std::strerror(errno));
        failed = true;
        return;
      }
      client.written += n;
    }
    epoll_event event{};
    event.events = EPOLLIN | (client.written < client.out.size() ? EPOLLOUT : 0);
    event.data.u32 = c;
    ::epoll_ctl(epoll, EPOLL_CTL_MOD, client.fd, &event);
  };
  auto send_next = [&](int c, SteadyClock::time_point due) {
    Client& client = all[c];
    std::string body;
    if (batch == 1) {
      result.set_room_id(++client.room);
      body = wire::DeterministicBytes(result);
    } else {
      many.clear_results();
      for (size_t i = 0; i < batch; ++i) {
        result.set_room_id(++client.room);
        *many.add_results() = result;
      }
      body = wire::DeterministicBytes(many);
    }
    client.out = head + std::to_string(body.size()) + "\r\n\r\n" + body;
    client.written = 0;
    client.due = due;
    client.in_flight = true;
    ++client.sent_requests;
    flush(c);
  };
  auto due_of = [&](int c) {
    return start + interval * static_cast<int64_t>(all[c].sent_requests) + interval * c / clients;
  };
  {
    char label[64];
    std::snprintf(label, sizeof(label), "http ingest, %d clients x %zu", clients, batch);
    Progress progress(label, o.seconds, answered);
    std::vector<epoll_event> events(clients);
    std::vector<char> chunk(kReadChunk);
    while (!failed) {
      const auto now = SteadyClock::now();
      // Start every idle client whose next request is due; stop once the run is over.
      auto next_due = deadline;
      size_t busy = 0;
      for (int c = 0; c < clients; ++c) {
        if (all[c].in_flight) {
          ++busy;
          continue;
        }
        const auto due = rate > 0 ? due_of(c) : now;
        if (due >= deadline) continue;
        if (due <= now) {
          send_next(c, due);
          ++busy;
        } else {
          next_due = std::min(next_due, due);
        }
      }
      if (busy == 0 && (rate == 0 || next_due >= deadline)) break;
      const auto wait = std::max(next_due - SteadyClock::now(), SteadyClock::duration::zero());
      timespec timeout{};
      timeout.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(wait).count();
      timeout.tv_nsec = (wait - std::chrono::seconds(timeout.tv_sec)).count();
      const int ready = ::epoll_pwait2(epoll, events.data(), clients, &timeout, nullptr);
      for (int i = 0; i < ready && !failed; ++i) {
        const int c = events[i].data.u32;
        Client& client = all[c];
        if (events[i].events & EPOLLOUT) flush(c);
        if (!(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
        const ssize_t n = ::recv(client.fd, chunk.data(), chunk.size(), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) {
          std::fprintf(stderr, "http ingest: the node closed a connection\n");
          failed = true;
          break;
        }
        client.in.append(chunk.data(), n);
        const auto answer = CompleteAnswer(client.in);
        if (!answer) continue;
        if (answer->first / 100 != 2) {
          std::fprintf(stderr, "http ingest: %s\n", client.in.substr(0, answer->second).c_str());
          failed = true;
          break;
        }
        client.in.erase(0, answer->second);
        client.in_flight = false;
        latencies_ms.push_back(Ms(SteadyClock::now() - client.due));
        answered += batch;
      }
    }
  }
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const double client_cpu = CpuSeconds(RUSAGE_THREAD) - client_cpu_at_start;
  const double node_cpu = CpuSeconds(RUSAGE_SELF) - process_cpu_at_start - client_cpu;
  for (Client& client : all) {
    if (client.fd >= 0) ::close(client.fd);
  }
  ::close(epoll);
  (*node)->Shutdown();
  HttpIngestRun run;
  run.per_s = failed ? 0 : answered.load() / elapsed;
  run.p50_ms = Percentile(latencies_ms, 0.50);
  run.p99_ms = Percentile(latencies_ms, 0.99);
  if (answered > 0) {
    run.node_cpu_us = node_cpu / answered * 1e6;
    run.client_cpu_us = client_cpu / answered * 1e6;
  }
  return run;
}

}  // namespace verdict::bench
