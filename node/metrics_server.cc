#include "node/metrics_server.h"

#include "common/host_port.h"

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace verdict::node {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, MetricsServer::Impl& server)
      : stream_(std::move(socket)), server_(server) {}
  void Run();

 private:
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  MetricsServer::Impl& server_;
};

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(metrics::Registry& registry, std::function<Status()> health)
      : registry_(registry), health_(std::move(health)), acceptor_(ioc_) {}

  Result<uint16_t> Start(const std::string& listen) {
    std::string host;
    uint16_t port = 0;
    if (!ParseHostPort(listen, &host, &port)) {
      return InvalidArgumentError("metrics address must be HOST:PORT, got '" + listen + "'");
    }
    beast::error_code ec;
    const auto address = net::ip::make_address(host, ec);
    if (ec) return InvalidArgumentError("cannot listen on '" + host + "': " + ec.message());
    const tcp::endpoint endpoint(address, port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return UnavailableError("cannot listen on " + listen + ": " + ec.message());
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
    return acceptor_.local_endpoint().port();
  }

  void Stop() {
    if (!thread_.joinable()) return;
    ioc_.stop();
    thread_.join();
  }

  http::response<http::string_body> Answer(const http::request<http::string_body>& req) {
    http::response<http::string_body> res(http::status::ok, req.version());
    res.set(http::field::server, "verdict-node");
    res.keep_alive(false);
    if (req.target() == "/metrics") {
      res.set(http::field::content_type, metrics::kTextContentType);
      res.body() = registry_.RenderText();
    } else if (req.target() == "/healthz") {
      res.set(http::field::content_type, "text/plain");
      const Status health = health_ ? health_() : Status::Ok();
      if (!health.ok()) res.result(http::status::service_unavailable);
      res.body() = health.ok() ? "ok\n" : health.message() + "\n";
    } else {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain");
      res.body() = "try /metrics or /healthz\n";
    }
    res.prepare_payload();
    return res;
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      std::make_shared<Session>(std::move(socket), *this)->Run();
      Accept();
    });
  }

  metrics::Registry& registry_;
  std::function<Status()> health_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

void Session::Run() {
  stream_.expires_after(std::chrono::seconds(10));
  http::async_read(
      stream_, buffer_, request_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) return;
        self->response_ = self->server_.Answer(self->request_);
        http::async_write(self->stream_, self->response_, [self](beast::error_code, std::size_t) {
          beast::error_code ignored;
          self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        });
      });
}

MetricsServer::MetricsServer(metrics::Registry& registry, std::function<Status()> health)
    : impl_(std::make_unique<Impl>(registry, std::move(health))) {}
MetricsServer::~MetricsServer() { Stop(); }
Result<uint16_t> MetricsServer::Start(const std::string& listen) { return impl_->Start(listen); }
void MetricsServer::Stop() { impl_->Stop(); }

}  // namespace verdict::node
