#include "bench/latency_proxy.h"

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <string>
#include <thread>

namespace verdict::bench {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;
using SteadyClock = std::chrono::steady_clock;

// One direction of one connection: what is read from `from` is written to `to` once its delay
// has passed, in order.
class Pipe : public std::enable_shared_from_this<Pipe> {
 public:
  Pipe(std::shared_ptr<tcp::socket> from, std::shared_ptr<tcp::socket> to,
       std::chrono::microseconds delay)
      : from_(std::move(from)), to_(std::move(to)), delay_(delay), wake_(from_->get_executor()) {}

  void Start() {
    net::co_spawn(from_->get_executor(), Read(shared_from_this()), net::detached);
    net::co_spawn(from_->get_executor(), Write(shared_from_this()), net::detached);
  }

 private:
  static awaitable<void> Read(std::shared_ptr<Pipe> self) {
    char buf[16 * 1024];
    for (;;) {
      boost::system::error_code ec;
      const size_t n = co_await self->from_->async_read_some(
          net::buffer(buf), net::redirect_error(use_awaitable, ec));
      if (ec) {
        self->closed_ = true;
        self->wake_.cancel();
        co_return;
      }
      self->queue_.emplace_back(SteadyClock::now() + self->delay_, std::string(buf, n));
      self->wake_.cancel();
    }
  }

  static awaitable<void> Write(std::shared_ptr<Pipe> self) {
    for (;;) {
      boost::system::error_code ec;
      if (self->queue_.empty()) {
        if (self->closed_) break;
        self->wake_.expires_at(SteadyClock::time_point::max());
        co_await self->wake_.async_wait(net::redirect_error(use_awaitable, ec));
        continue;
      }
      if (SteadyClock::now() < self->queue_.front().first) {
        self->wake_.expires_at(self->queue_.front().first);
        co_await self->wake_.async_wait(net::redirect_error(use_awaitable, ec));
        continue;
      }
      std::string chunk = std::move(self->queue_.front().second);
      self->queue_.pop_front();
      co_await net::async_write(*self->to_, net::buffer(chunk),
                                net::redirect_error(use_awaitable, ec));
      if (ec) break;
    }
    boost::system::error_code ignored;
    self->to_->shutdown(tcp::socket::shutdown_send, ignored);
  }

  std::shared_ptr<tcp::socket> from_, to_;
  const std::chrono::microseconds delay_;
  net::steady_timer wake_;
  std::deque<std::pair<SteadyClock::time_point, std::string>> queue_;
  bool closed_ = false;
};

}  // namespace

class LatencyProxy::Impl {
 public:
  Impl(uint16_t upstream, std::chrono::microseconds rtt)
      : upstream_(upstream), one_way_(rtt / 2), acceptor_(ioc_) {}

  uint16_t Start() {
    boost::system::error_code ec;
    const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return 0;
    net::co_spawn(ioc_, Accept(), net::detached);
    thread_ = std::thread([this] { ioc_.run(); });
    return acceptor_.local_endpoint().port();
  }

  void Stop() {
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  awaitable<void> Accept() {
    for (;;) {
      boost::system::error_code ec;
      auto client = std::make_shared<tcp::socket>(ioc_);
      co_await acceptor_.async_accept(*client, net::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      auto server = std::make_shared<tcp::socket>(ioc_);
      co_await server->async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), upstream_),
                                     net::redirect_error(use_awaitable, ec));
      if (ec) continue;
      client->set_option(tcp::no_delay(true));
      server->set_option(tcp::no_delay(true));
      std::make_shared<Pipe>(client, server, one_way_)->Start();
      std::make_shared<Pipe>(server, client, one_way_)->Start();
    }
  }

  const uint16_t upstream_;
  const std::chrono::microseconds one_way_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

LatencyProxy::LatencyProxy(uint16_t upstream_port, std::chrono::microseconds round_trip)
    : impl_(std::make_unique<Impl>(upstream_port, round_trip)) {}
LatencyProxy::~LatencyProxy() { Stop(); }
uint16_t LatencyProxy::Start() { return impl_->Start(); }
void LatencyProxy::Stop() { impl_->Stop(); }

}  // namespace verdict::bench
