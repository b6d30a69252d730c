#include "bench/feed.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace verdict::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

struct FeedReader::Impl {
  net::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
  bool quick_ack = false;
};

FeedReader::FeedReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FeedReader::~FeedReader() {
  beast::error_code ignored;
  impl_->ws.close(websocket::close_code::normal, ignored);
}

Result<std::unique_ptr<FeedReader>> FeedReader::Open(uint16_t port, const std::string& token,
                                                     uint64_t after, bool quick_ack) {
  auto impl = std::make_unique<Impl>();
  impl->quick_ack = quick_ack;
  beast::error_code ec;
  beast::get_lowest_layer(impl->ws).connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return UnavailableError("feed: connect: " + ec.message());
  impl->ws.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
    req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  impl->ws.handshake("127.0.0.1", "/v1/events?after=" + std::to_string(after), ec);
  if (ec) return UnavailableError("feed: handshake: " + ec.message());
  return std::unique_ptr<FeedReader>(new FeedReader(std::move(impl)));
}

Result<std::string> FeedReader::Next(std::chrono::milliseconds stall) {
  Impl& f = *impl_;
  f.buffer.clear();
  if (f.quick_ack) {
    // The kernel turns quick acknowledgement off again by itself: asked for before every read.
    const int on = 1;
    ::setsockopt(beast::get_lowest_layer(f.ws).socket().native_handle(), IPPROTO_TCP, TCP_QUICKACK,
                 &on, sizeof(on));
  }
  // Asynchronous only for the deadline.
  beast::get_lowest_layer(f.ws).expires_after(stall);
  beast::error_code ec;
  f.ws.async_read(f.buffer, [&ec](beast::error_code e, size_t) { ec = e; });
  f.ioc.restart();
  f.ioc.run();
  if (ec == beast::error::timeout) {
    char waited[32];
    std::snprintf(waited, sizeof(waited), "%g", std::chrono::duration<double>(stall).count());
    return UnavailableError(std::string("feed: no event for ") + waited + " s");
  }
  if (ec) return UnavailableError("feed: read: " + ec.message());
  return beast::buffers_to_string(f.buffer.data());
}

uint64_t EventNumber(const std::string& message, std::string_view member) {
  // The lobby prints the event as jsonb does ("room_id": "N"): a space, and a quote for a 64-bit
  // number, may come between the colon and the digits.
  const std::string key = "\"" + std::string(member) + "\":";
  size_t at = message.find(key);
  if (at == std::string::npos) return 0;
  at = message.find_first_not_of(" \"", at + key.size());
  return at == std::string::npos ? 0 : std::strtoull(message.c_str() + at, nullptr, 10);
}

}  // namespace verdict::bench
