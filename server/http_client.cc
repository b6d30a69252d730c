#include "server/http_client.h"

#include <cctype>
#include <optional>
#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/host_port.h"

namespace verdict::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using unix_socket = net::local::stream_protocol;

// Replies larger than this are refused: no endpoint of ours sends one near it.
constexpr uint64_t kMaxReplyBytes = uint64_t{64} << 20;

}  // namespace

class BlockingHttpClient::Impl {
 public:
  Impl(ListenAddress to, std::chrono::milliseconds timeout)
      : to_(std::move(to)), timeout_(timeout) {}

  Result<HttpReply> Call(const HttpRequest& request) {
    auto reply = TryCall(request);
    if (!reply.ok()) Close();
    return reply;
  }

 private:
  Result<HttpReply> TryCall(const HttpRequest& request) {
    http::request<http::string_body> req(http::string_to_verb(request.method), request.target, 11);
    req.set(http::field::host, to_.kind == ListenAddress::Kind::kUnix
                                   ? std::string("localhost")
                                   : JoinHostPort(to_.host, to_.port));
    if (!request.content_type.empty()) req.set(http::field::content_type, request.content_type);
    if (!request.accept.empty()) req.set(http::field::accept, request.accept);
    if (!request.authorization.empty()) {
      req.set(http::field::authorization, request.authorization);
    }
    req.body() = request.body;
    req.keep_alive(true);
    req.prepare_payload();
    if (to_.kind == ListenAddress::Kind::kUnix) return Exchange(unix_, req);
    return Exchange(tcp_, req);
  }

  template <class Stream>
  Result<HttpReply> Exchange(std::optional<Stream>& stream, http::request<http::string_body>& req) {
    ioc_.restart();
    beast::error_code ec;
    if (!stream) {
      stream.emplace(ioc_);
      stream->expires_after(timeout_);
      if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
        const auto address = net::ip::make_address(to_.host, ec);
        if (ec) return InvalidArgumentError("bad address " + to_.host + ": " + ec.message());
        stream->async_connect(tcp::endpoint(address, to_.port),
                              [&](beast::error_code e) { ec = e; });
      } else {
        stream->async_connect(unix_socket::endpoint(to_.path),
                              [&](beast::error_code e) { ec = e; });
      }
      ioc_.run();
      if (ec) return UnavailableError("cannot connect to " + to_.ToString() + ": " + ec.message());
      ioc_.restart();
    }
    stream->expires_after(timeout_);
    // Write and read concurrently, so an answer sent before the whole body was read (413) is
    // heard even while the body is still going out.
    beast::error_code write_ec, read_ec;
    http::async_write(*stream, req, [&](beast::error_code e, std::size_t) { write_ec = e; });
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxReplyBytes);
    http::async_read(*stream, buffer_, parser,
                     [&](beast::error_code e, std::size_t) { read_ec = e; });
    ioc_.run();
    if (read_ec) {
      return UnavailableError("no answer from " + to_.ToString() + ": " + read_ec.message());
    }
    auto res = parser.release();
    HttpReply reply;
    reply.status = res.result_int();
    reply.content_type = std::string(res[http::field::content_type]);
    reply.body = std::move(res.body());
    for (const auto& field : res) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      reply.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    if (!res.keep_alive() || write_ec) Close();
    return reply;
  }

  void Close() {
    tcp_.reset();
    unix_.reset();
    buffer_.clear();
  }

  const ListenAddress to_;
  const std::chrono::milliseconds timeout_;
  net::io_context ioc_;
  beast::flat_buffer buffer_;
  std::optional<beast::tcp_stream> tcp_;
  std::optional<beast::basic_stream<unix_socket>> unix_;
};

BlockingHttpClient::BlockingHttpClient(ListenAddress to, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(to), timeout)) {}
BlockingHttpClient::~BlockingHttpClient() = default;
Result<HttpReply> BlockingHttpClient::Call(const HttpRequest& request) {
  return impl_->Call(request);
}

}  // namespace verdict::server
