// HttpConnection::Close while a Post waits on the network, as a deliverer's Stop does: the Post
// ends with a failure, and nothing it was waiting in is destroyed under it. scripts/test runs
// this binary under AddressSanitizer (ctest label `asan`), with http_client.cc compiled into it
// instrumented: an SSL stream destroyed while its handshake or read is pending is reported as a
// use-after-free when the aborted operation completes.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first
#include <variant>

#include <boost/asio.hpp>

#include "delivery/http_client.h"
#include "tests/support/wait.h"

extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace verdict::delivery {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using net::ip::tcp;
using testing::WaitUntil;

// A listener on 127.0.0.1 that accepts one connection, reads what comes and never answers: a
// TLS handshake or an HTTP answer waits on it until the client gives up.
class SilentServer {
 public:
  SilentServer() : acceptor_(ioc_, tcp::endpoint(net::ip::address_v4::loopback(), 0)) {
    thread_ = std::thread([this] {
      boost::system::error_code ec;
      tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      if (ec) return;
      char buf[4096];
      for (;;) {
        const size_t n = socket.read_some(net::buffer(buf), ec);
        if (ec) return;
        received_.fetch_add(n);
      }
    });
  }
  ~SilentServer() {
    // A connection of its own ends an accept still waiting; the client's close ends the read.
    boost::system::error_code ignored;
    tcp::socket poke(ioc_);
    poke.connect(acceptor_.local_endpoint(), ignored);
    poke.close(ignored);
    thread_.join();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  size_t received() const { return received_.load(); }

 private:
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::atomic<size_t> received_{0};
  std::thread thread_;
};

// Posts to the silent server, waits until it has received `bytes`, closes the connection from
// the connection's strand, and returns how the Post ended.
HttpOutcome CloseWhilePending(bool tls, size_t bytes) {
  SilentServer server;
  net::io_context ioc;
  auto strand = net::make_strand(ioc);
  HttpConnectionOptions options;
  options.timeout = 60s;  // longer than the test: only the Close may end the Post
  if (tls) {
    auto trust = LoadTlsTrust("");
    EXPECT_TRUE(trust.ok()) << trust.status().ToString();
    if (trust.ok()) options.tls = *trust;
  }
  auto connection = std::make_unique<HttpConnection>(strand, options);
  HttpUrl url;
  url.host = "127.0.0.1";
  url.port = server.port();
  url.tls = tls;
  HttpRequest request;
  request.target = "/v1/settlements";
  request.body = "x";
  std::optional<HttpOutcome> outcome;
  net::co_spawn(
      strand, [&]() -> net::awaitable<void> { outcome = co_await connection->Post(url, request); },
      net::detached);
  std::thread runner([&] { ioc.run(); });
  EXPECT_TRUE(WaitUntil([&] { return server.received() >= bytes; }, 20s));
  net::post(strand, [&] { connection->Close(); });
  runner.join();  // the io_context runs out of work once the Post has ended
  connection.reset();
  EXPECT_TRUE(outcome.has_value());
  return outcome.value_or(HttpOutcome(HttpError{}));
}

TEST(HttpConnectionCloseTest, CloseDuringATlsHandshakeEndsThePost) {
  const HttpOutcome outcome = CloseWhilePending(/*tls=*/true, /*bytes=*/1);  // the ClientHello
  const auto* error = std::get_if<HttpError>(&outcome);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->failure, HttpFailure::kConnect) << error->message;
}

TEST(HttpConnectionCloseTest, CloseWhileWaitingForAnAnswerEndsThePost) {
  // The request line, headers and one-byte body are well over 64 bytes.
  const HttpOutcome outcome = CloseWhilePending(/*tls=*/false, /*bytes=*/64);
  const auto* error = std::get_if<HttpError>(&outcome);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->failure, HttpFailure::kRead) << error->message;
}

}  // namespace
}  // namespace verdict::delivery
