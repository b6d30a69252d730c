// The shared HTTP server core on its own, with a fake handler: Unix sockets (mode, stale and live
// sockets, removal), what is decided from the header before a body is read (refusals, the body
// limit, 100-continue, the Host header), connection caps per listener, the budget for bodies,
// idle connections, answers that come later or never, hang-ups, and accepting again after
// running out of descriptors; and the bearer token's reading.
#include "server/http_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "server/http_client.h"
#include "server/problem.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::server {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WaitUntil;

// Answers /now at once, /later never by itself (the test answers it), refuses /secret from the
// header unless the request came over a Unix socket, and takes bodies up to 100 bytes.
class FakeHandler final : public HttpHandler {
 public:
  HeaderVerdict OnHeader(const RequestHead& head) override {
    ++headers;
    if (head.path == "/secret" && !head.local) {
      return {ProblemReply(ErrorCode::kUnauthenticated, "no", head.path)};
    }
    return {std::nullopt, 100};
  }
  void OnRequest(const RequestHead& head, HttpRequest request,
                 std::shared_ptr<Exchange> exchange) override {
    ++requests;
    if (head.path == "/later") {
      exchange->OnHangUp([this] { ++hang_ups; });
      if (fallback_after) {
        exchange->ReplyUnlessAnsweredWithin(*fallback_after, {503, "text/plain", "late\n", {}});
      }
      std::lock_guard lock(mu);
      later = exchange;
      return;
    }
    exchange->Reply({200, "text/plain", "got " + request.body, {}});
  }

  std::atomic<int> headers{0}, requests{0}, hang_ups{0};
  std::optional<std::chrono::milliseconds> fallback_after;
  std::mutex mu;
  std::shared_ptr<Exchange> later;
};

// A raw connection to a Unix socket or a loopback port, to send exactly the bytes a test needs.
int Connect(const ListenAddress& to) {
  if (to.kind == ListenAddress::Kind::kUnix) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, to.path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(to.port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What arrives on `fd` within `wait` (until the peer closes, or nothing more comes).
std::string ReadSome(int fd, std::chrono::milliseconds wait) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.find("\r\n\r\n") != std::string::npos) break;  // a whole header block
  }
  return out;
}

// Whether a new connection to `to` is answered 503 at once: its listener is at its cap.
bool RefusedOverTheCap(const ListenAddress& to) {
  const int extra = Connect(to);
  const std::string answer = ReadSome(extra, std::chrono::seconds(2));
  ::close(extra);
  return answer.starts_with("HTTP/1.1 503");
}

bool SendAll(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

class HttpServerTest : public ::testing::Test {
 protected:
  // An exchange the handler kept holds its session, which must go before the server.
  ~HttpServerTest() override { handler_.later.reset(); }

  // Starts a server on a Unix socket and a loopback port.
  void StartServer(HttpServerOptions options = {}) {
    unix_ = ListenAddress::Parse("unix:" + dir_.Sub("s.sock")).value();
    tcp_ = ListenAddress::Parse("127.0.0.1:0").value();
    options.listen = {unix_, tcp_};
    server_ = std::make_unique<HttpServer>(options, handler_, nullptr);
    auto ports = server_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status().ToString();
    tcp_.port = (*ports)[1];
  }

  Result<HttpReply> Get(const ListenAddress& to, const std::string& target,
                        const std::string& body = "") {
    BlockingHttpClient client(to, 5s);
    return client.Call({body.empty() ? "GET" : "POST", target, "text/plain", "", "", body});
  }

  TempDir dir_;
  FakeHandler handler_;
  ListenAddress unix_, tcp_;
  std::unique_ptr<HttpServer> server_;
};

// The one query splitter every endpoint reads its parameters with: a parameter with '=' has a
// value (maybe empty), one without has none, and the order is kept.
TEST(QueryParamsTest, SplitsNamesAndValuesAsWritten) {
  EXPECT_TRUE(QueryParams("/v1/results").empty());
  const std::vector<QueryParam> params = QueryParams("/v1/x?from=dead-letter&all&room_id=&a=b=c");
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].name, "from");
  EXPECT_EQ(params[0].value, "dead-letter");
  EXPECT_TRUE(params[0].has_value);
  EXPECT_EQ(params[1].name, "all");
  EXPECT_FALSE(params[1].has_value);
  EXPECT_EQ(params[2].name, "room_id");
  EXPECT_EQ(params[2].value, "");
  EXPECT_TRUE(params[2].has_value);
  EXPECT_EQ(params[3].value, "b=c");
  EXPECT_EQ(QueryValue("/v1/events?after=10&after=11", "after"), "10");
  EXPECT_EQ(QueryValue("/v1/events?after", "after"), std::nullopt);
  EXPECT_EQ(QueryValue("/v1/events?afterwards=1", "after"), std::nullopt);
  EXPECT_EQ(QueryValue("/v1/events?after=", "after"), "");
}

TEST(ListenAddressTest, ParsesBothFormsAndRefusesTheRest) {
  auto unix_address = ListenAddress::Parse("unix:/run/verdict/node.sock");
  ASSERT_TRUE(unix_address.ok());
  EXPECT_EQ(unix_address->kind, ListenAddress::Kind::kUnix);
  EXPECT_EQ(unix_address->path, "/run/verdict/node.sock");
  auto tcp = ListenAddress::Parse("[::1]:9000");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->host, "::1");
  EXPECT_EQ(tcp->port, 9000);
  EXPECT_EQ(tcp->ToString(), "[::1]:9000");
  for (const char* bad : {"unix:", "node.sock", "localhost", ":80"}) {
    EXPECT_EQ(ListenAddress::Parse(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ListenAddress::Parse("unix:/" + std::string(200, 'x')).ok());
}

TEST_F(HttpServerTest, ServesBothListenersAndTheSocketHasMode0660UntilStopped) {
  StartServer();
  for (const auto* to : {&unix_, &tcp_}) {
    auto reply = Get(*to, "/now", "hello");
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, "got hello");
  }
  struct stat st {};
  ASSERT_EQ(::stat(unix_.path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  server_->Stop();
  EXPECT_NE(::stat(unix_.path.c_str(), &st), 0) << "the socket file outlived the server";
}

TEST_F(HttpServerTest, AStaleSocketIsReplacedALiveOneAndAFileAreRefused) {
  // Stale: a socket file nobody listens on (its process died).
  const std::string path = dir_.Sub("s.sock");
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ::close(fd);  // the file stays, with nobody behind it
  }
  StartServer();
  auto reply = Get(unix_, "/now", "x");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();

  // Live: a second server on the same path is refused, and the first keeps its socket.
  FakeHandler other;
  HttpServer second({.listen = {unix_}}, other, nullptr);
  const auto refused = second.Start();
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("another process is answering"), std::string::npos)
      << refused.status().ToString();
  second.Stop();
  EXPECT_TRUE(Get(unix_, "/now", "x").ok()) << "the refused server removed the live socket";

  // Not a socket: never replaced.
  const std::string file = dir_.Sub("plain");
  std::ofstream(file) << "data";
  HttpServer third({.listen = {ListenAddress::Parse("unix:" + file).value()}}, other, nullptr);
  EXPECT_EQ(third.Start().status().code(), StatusCode::kFailedPrecondition);
  std::ifstream kept(file);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(kept)), {}), "data");
}

TEST_F(HttpServerTest, ARefusalFromTheHeaderIsSentWithoutReadingTheBody) {
  StartServer();
  const int fd = Connect(tcp_);
  ASSERT_GE(fd, 0);
  // A body announced and never sent: only an answer from the header can come back.
  ASSERT_TRUE(SendAll(fd, "POST /secret HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n"));
  const std::string answer = ReadSome(fd, 3s);
  ::close(fd);
  EXPECT_NE(answer.find("HTTP/1.1 401"), std::string::npos) << answer;
  EXPECT_EQ(handler_.requests.load(), 0);
  // The same path over the Unix socket passes the header check.
  auto reply = Get(unix_, "/secret", "x");
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status, 200);
}

TEST_F(HttpServerTest, ABodyOverTheLimitIsRefusedFromItsLengthOrAsItGrows) {
  StartServer();
  const int fd = Connect(tcp_);
  ASSERT_TRUE(SendAll(fd, "POST /now HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n"));
  const std::string answer = ReadSome(fd, 3s);
  ::close(fd);
  EXPECT_NE(answer.find("HTTP/1.1 413"), std::string::npos) << answer;
  EXPECT_NE(answer.find("PAYLOAD_TOO_LARGE"), std::string::npos) << answer;

  const int chunked = Connect(tcp_);
  ASSERT_TRUE(SendAll(chunked,
                      "POST /now HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "80\r\n" +
                          std::string(128, 'a') + "\r\n"));
  const std::string grown = ReadSome(chunked, 3s);
  ::close(chunked);
  EXPECT_NE(grown.find("HTTP/1.1 413"), std::string::npos) << grown;
  EXPECT_EQ(handler_.requests.load(), 0);
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBodyIsSent) {
  StartServer();
  const int fd = Connect(unix_);
  ASSERT_TRUE(SendAll(fd,
                      "POST /now HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                      "Expect: 100-continue\r\n\r\n"));
  const std::string go_on = ReadSome(fd, 3s);
  EXPECT_NE(go_on.find("HTTP/1.1 100 Continue"), std::string::npos) << go_on;
  ASSERT_TRUE(SendAll(fd, "hi"));
  const std::string answer = ReadSome(fd, 3s);
  ::close(fd);
  EXPECT_NE(answer.find("got hi"), std::string::npos) << answer;
}

// RFC 9112 §3.2: an HTTP/1.1 request without a Host header, or with two, is answered 400 before
// the handler sees it; HTTP/1.0 needs none.
TEST_F(HttpServerTest, AnHttp11RequestNeedsExactlyOneHostHeader) {
  StartServer();
  const auto status_line = [&](const std::string& request) {
    const int fd = Connect(tcp_);
    EXPECT_TRUE(SendAll(fd, request));
    const std::string answer = ReadSome(fd, 3s);
    ::close(fd);
    return answer.substr(0, answer.find("\r\n"));
  };
  EXPECT_EQ(status_line("GET /now HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(status_line("GET /now HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(handler_.headers.load(), 0);
  EXPECT_EQ(status_line("GET /now HTTP/1.1\r\nHost: a\r\n\r\n"), "HTTP/1.1 200 OK");
  EXPECT_EQ(status_line("GET /now HTTP/1.0\r\n\r\n"), "HTTP/1.0 200 OK");
}

TEST_F(HttpServerTest, AnIdleConnectionIsClosedAfterTheReadTimeout) {
  StartServer({.read_timeout = 300ms});
  const int fd = Connect(tcp_);
  ASSERT_GE(fd, 0);
  char byte;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  EXPECT_EQ(::recv(fd, &byte, 1, 0), 0) << "the server kept a silent connection open";
  ::close(fd);
}

// Connections nobody has authenticated (a metrics port, a TCP ingest port) flood both TCP
// listeners past the cap: each refuses its own excess, and the Unix socket, whose cap is its
// own, still answers.
TEST_F(HttpServerTest, AFloodOnTheTcpListenersLeavesTheUnixSocketServed) {
  constexpr size_t kCap = 20;
  unix_ = ListenAddress::Parse("unix:" + dir_.Sub("s.sock")).value();
  ListenAddress metrics = ListenAddress::Parse("127.0.0.1:0").value();
  tcp_ = metrics;
  server_ = std::make_unique<HttpServer>(
      HttpServerOptions{.listen = {metrics, tcp_, unix_}, .max_connections = kCap}, handler_,
      nullptr);
  auto ports = server_->Start();
  ASSERT_TRUE(ports.ok()) << ports.status().ToString();
  metrics.port = (*ports)[0];
  tcp_.port = (*ports)[1];
  std::vector<int> flood;
  for (const ListenAddress* to : {&metrics, &tcp_}) {
    for (size_t i = 0; i < kCap; ++i) {
      flood.push_back(Connect(*to));
      ASSERT_GE(flood.back(), 0);
    }
    // Every idle one is held: the next connection is over the cap and refused at once.
    ASSERT_TRUE(WaitUntil([&] { return RefusedOverTheCap(*to); }))
        << "the flood never filled the listener";
  }
  auto reply = Get(unix_, "/now", "local");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->status, 200) << "a flood on the TCP listeners starved the Unix socket";
  for (int fd : flood) ::close(fd);
}

// With several listeners, the caps are lowered so that their connections fit in the descriptor
// limit together: a flood on one reaches its cap before the process runs out of descriptors,
// which would stop every listener's accepts.
TEST_F(HttpServerTest, CapsFitTheDescriptorLimitTogether) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  size_t open = 0;
  for ([[maybe_unused]] const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++open;
  }
  // The server keeps 256 descriptors for other uses and shares the rest: 10 for each listener.
  rlimit low = saved;
  low.rlim_cur = open + 256 + 2 * 10;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  StartServer();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<int> held;
  for (int i = 0; i < 10; ++i) {
    held.push_back(Connect(tcp_));
    ASSERT_GE(held.back(), 0);
  }
  EXPECT_TRUE(WaitUntil([&] { return RefusedOverTheCap(tcp_); }))
      << "the TCP listener kept its cap of 1024 under a limit that cannot hold it";
  auto reply = Get(unix_, "/now", "x");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->status, 200);
  for (int fd : held) ::close(fd);
}

// One listener, like a battle host's metrics port (which needs no token), is fitted to the
// descriptor limit too: a flood of idle connections past the limit is refused at the cap, and the
// process keeps kReservedDescriptors for its own sockets and files. The server runs in a child
// process, so the low limit is the child's alone; the parent floods it.
TEST(HttpServerDescriptorTest, AFloodOnALoneListenerLeavesTheProcessItsReserve) {
  constexpr uint64_t kCap = 16;
  constexpr int kOwnOpens = static_cast<int>(kReservedDescriptors / 2);
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_parent[0]);
    ::close(to_child[1]);
    size_t open = 0;
    for ([[maybe_unused]] const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
      ++open;
    }
    rlimit low{};
    ::getrlimit(RLIMIT_NOFILE, &low);
    low.rlim_cur = open + kReservedDescriptors + kCap;
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) ::_exit(2);
    FakeHandler handler;
    // Idle connections stay for the whole test, as a flood that keeps them alive would.
    HttpServer server(
        {.listen = {ListenAddress::Parse("127.0.0.1:0").value()}, .read_timeout = 120s}, handler,
        nullptr);
    auto ports = server.Start();
    if (!ports.ok()) ::_exit(3);
    const uint16_t port = ports->front();
    if (::write(to_parent[1], &port, sizeof(port)) != sizeof(port)) ::_exit(4);
    char go = 0;
    if (::read(to_child[0], &go, 1) != 1) ::_exit(5);
    // The host's own descriptors, while the flood holds the listener.
    int opened = 0;
    for (int i = 0; i < kOwnOpens; ++i) {
      if (::open("/dev/null", O_RDONLY) >= 0) ++opened;
    }
    if (::write(to_parent[1], &opened, sizeof(opened)) != sizeof(opened)) ::_exit(6);
    server.Stop();
    ::_exit(0);
  }
  ::close(to_parent[1]);
  ::close(to_child[0]);
  uint16_t port = 0;
  ASSERT_EQ(::read(to_parent[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  ListenAddress to = ListenAddress::Parse("127.0.0.1:0").value();
  to.port = port;
  // More idle connections than the child may hold descriptors at all.
  std::vector<int> flood;
  for (uint64_t i = 0; i < kReservedDescriptors + 4 * kCap; ++i) {
    const int fd = Connect(to);
    if (fd >= 0) flood.push_back(fd);
  }
  const bool refused = WaitUntil([&] { return RefusedOverTheCap(to); });
  ASSERT_EQ(::write(to_child[1], "g", 1), 1);
  int opened = -1;
  const bool answered = ::read(to_parent[0], &opened, sizeof(opened)) == sizeof(opened);
  for (int fd : flood) ::close(fd);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(to_parent[0]);
  ::close(to_child[1]);
  ASSERT_TRUE(answered) << "the child ended early, status " << status;
  EXPECT_TRUE(refused) << "the lone listener took connections past its share of the limit";
  EXPECT_EQ(opened, kOwnOpens) << "the flood left the process no descriptors of its own";
}

// Bodies are held against one budget: a request whose announced body does not fit is answered
// 503 with Retry-After before a byte of it is read, and an answer gives its share back.
TEST_F(HttpServerTest, ABodyThatDoesNotFitTheBudgetIsRefusedUntilAnotherIsAnswered) {
  StartServer({.max_body_bytes_in_flight = 250});
  const auto start_body = [&](size_t length) {
    const int fd = Connect(tcp_);
    EXPECT_TRUE(SendAll(fd, "POST /now HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                std::to_string(length) + "\r\n\r\n" + std::string(10, 'b')));
    return fd;
  };
  const int first = start_body(100), second = start_body(100);
  ASSERT_TRUE(WaitUntil([&] { return handler_.headers.load() == 2; }));
  const int refused = start_body(100);  // 300 of 250
  const std::string answer = ReadSome(refused, 3s);
  ::close(refused);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 503")) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_EQ(handler_.requests.load(), 0);
  // A small one fits beside the two; once the first is answered, a large one fits again.
  auto small = Get(unix_, "/now", std::string(40, 's'));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->status, 200);
  ASSERT_TRUE(SendAll(first, std::string(90, 'b')));
  EXPECT_NE(ReadSome(first, 3s).find("HTTP/1.1 200"), std::string::npos);
  auto large = Get(unix_, "/now", std::string(100, 'l'));
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->status, 200);
  ::close(first);
  ::close(second);
}

TEST_F(HttpServerTest, ALaterAnswerArrivesAndAMissingOneGetsTheFallback) {
  StartServer();
  std::thread answer([&] {
    ASSERT_TRUE(WaitUntil([&] {
      std::lock_guard lock(handler_.mu);
      return handler_.later != nullptr;
    }));
    std::lock_guard lock(handler_.mu);
    handler_.later->Reply({201, "text/plain", "done", {}});
    handler_.later->Reply({500, "text/plain", "twice", {}});  // ignored
  });
  auto reply = Get(unix_, "/later", "x");
  answer.join();
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status, 201);
  EXPECT_EQ(reply->body, "done");

  handler_.fallback_after = 200ms;
  auto late = Get(unix_, "/later", "x");
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->status, 503);
  EXPECT_EQ(late->body, "late\n");
}

TEST_F(HttpServerTest, AClientThatHangsUpWhileItsAnswerIsPendingIsNoticed) {
  StartServer();
  const int fd = Connect(tcp_);
  ASSERT_TRUE(SendAll(fd, "POST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"));
  ASSERT_TRUE(WaitUntil([&] { return handler_.requests.load() == 1; }));
  ::close(fd);
  EXPECT_TRUE(WaitUntil([&] { return handler_.hang_ups.load() == 1; }));
}

// Out of descriptors, accept fails with the connection left in the backlog. The core pauses and
// accepts again once descriptors are free; the negative control, which stops accepting on the
// first failure (the node's old metrics server did), never serves again.
void OutOfDescriptorsThenServe(bool stop_on_failure, bool* served_again) {
  TempDir dir;
  FakeHandler handler;
  HttpServer server({.listen = {ListenAddress::Parse("127.0.0.1:0").value()},
                     .unsafe_stop_accepting_on_failure_for_test = stop_on_failure},
                    handler, nullptr);
  auto ports = server.Start();
  ASSERT_TRUE(ports.ok());
  ListenAddress to = ListenAddress::Parse("127.0.0.1:0").value();
  to.port = ports->front();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<int> held;
  // Take every descriptor but one below a low limit, then connect: the kernel completes the
  // connection (one more descriptor here) and the server's accept has none left.
  rlimit low = saved;
  low.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  for (;;) {
    const int fd = ::dup(0);
    if (fd < 0) break;
    held.push_back(fd);
  }
  ::close(held.back());
  held.pop_back();
  const int client = Connect(to);  // takes the last descriptor; the server's accept fails
  std::this_thread::sleep_for(300ms);
  for (int fd : held) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  if (client >= 0) ::close(client);
  *served_again = WaitUntil(
      [&] {
        BlockingHttpClient c(to, 1s);
        auto r = c.Call({"POST", "/now", "text/plain", "", "", "x"});
        return r.ok() && r->status == 200;
      },
      5s);
}

TEST(HttpServerAcceptTest, AcceptsAgainAfterRunningOutOfDescriptors) {
  bool served = false;
  OutOfDescriptorsThenServe(false, &served);
  EXPECT_TRUE(served) << "the server stopped accepting after a failed accept";
}

TEST(HttpServerAcceptTest, NegativeControlStopsAcceptingAndTheTestSeesIt) {
  bool served = true;
  OutOfDescriptorsThenServe(true, &served);
  EXPECT_FALSE(served) << "the negative control kept accepting: the test above proves nothing";
}

}  // namespace
}  // namespace verdict::server
