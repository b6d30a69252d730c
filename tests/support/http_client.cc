#include "tests/support/http_client.h"

#include <cstdlib>

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace verdict::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

}  // namespace

double MetricValue(const std::string& metrics, const std::string& series, double absent) {
  const size_t at = ("\n" + metrics).find("\n" + series + " ");
  if (at == std::string::npos) return absent;
  return std::strtod(metrics.c_str() + at + series.size() + 1, nullptr);  // reads "+Inf" too
}

HttpResponse HttpCall(uint16_t port, const std::string& method, const std::string& target,
                      const std::map<std::string, std::string>& headers, const std::string& body,
                      std::chrono::milliseconds timeout) {
  HttpResponse out;
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  stream.expires_after(timeout);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) {
    out.error = "connect: " + ec.message();
    return out;
  }
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  // Write and read concurrently, so a server that answers before reading the whole body
  // (413) is heard even while we are still sending.
  http::async_write(stream, req, [](beast::error_code, std::size_t) {});
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::async_read(stream, buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
  ioc.run();
  if (ec) {
    out.error = "read: " + ec.message();
    return out;
  }
  auto res = parser.release();
  out.status = res.result_int();
  out.body = res.body();
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  return out;
}

struct WsClient::State {
  net::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
};

WsClient::WsClient() : state_(std::make_unique<State>()) {}
WsClient::~WsClient() = default;

bool WsClient::Connect(uint16_t port, const std::string& target, const std::string& bearer_token) {
  beast::error_code ec;
  auto& lowest = beast::get_lowest_layer(state_->ws);
  lowest.expires_after(std::chrono::seconds(10));
  lowest.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) {
    error_ = "connect: " + ec.message();
    return false;
  }
  state_->ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
    req.set(http::field::authorization, "Bearer " + bearer_token);
  }));
  state_->ws.handshake("127.0.0.1", target, ec);
  lowest.expires_never();
  if (ec) {
    error_ = "handshake: " + ec.message();
    return false;
  }
  return true;
}

std::optional<std::string> WsClient::Read(std::chrono::milliseconds timeout) {
  beast::error_code ec = net::error::would_block;
  bool done = false;
  state_->buffer.clear();
  state_->ws.async_read(state_->buffer, [&](beast::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  state_->ioc.restart();
  state_->ioc.run_for(timeout);
  if (!done) {
    // Abandon the read: closing the socket completes it with an error, and this client is
    // not used for reading again after a timeout.
    beast::get_lowest_layer(state_->ws).close();
    state_->ioc.restart();
    state_->ioc.run();
    return std::nullopt;
  }
  if (ec == websocket::error::closed) {
    close_code_ = state_->ws.reason().code;
    close_reason_ = std::string(state_->ws.reason().reason.c_str());
  }
  if (ec) return std::nullopt;
  return beast::buffers_to_string(state_->buffer.data());
}

}  // namespace verdict::testing
