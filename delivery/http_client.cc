// HttpConnection and BlockingHttpClient on Boost.Beast, written as C++20 coroutines: a Post
// reads top to bottom (connect if needed, write, read), each operation under its own timeout,
// the way the Beast client examples set `expires_after` before every operation.
#include "delivery/http_client.h"

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>
#include <optional>

#include "common/failpoint.h"

namespace verdict::delivery {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;

// A request goes out at most this often: once, and once more on a fresh connection when the
// reused one turned out to be closed.
constexpr int kTriesPerRequest = 2;
// HTTP/1.1, in Beast's notation.
constexpr unsigned kHttpVersion = 11;

http::request<http::string_body> BuildRequest(const HttpUrl& url, HttpRequest request,
                                              const std::string& user_agent) {
  http::request<http::string_body> req{http::verb::post, request.target, kHttpVersion};
  req.set(http::field::host, JoinHostPort(url.host, url.port));
  if (!request.bearer_token.empty()) {
    req.set(http::field::authorization, "Bearer " + request.bearer_token);
  } else if (!request.authorization.empty()) {
    req.set(http::field::authorization, request.authorization);
  }
  req.set(http::field::content_type, request.content_type);
  if (!request.accept.empty()) req.set(http::field::accept, request.accept);
  req.set(http::field::user_agent, user_agent);
  req.keep_alive(true);
  req.body() = std::move(request.body);
  req.prepare_payload();
  return req;
}

std::string Header(const http::response<http::string_body>& res, http::field field) {
  const auto value = res[field];
  return std::string(value.data(), value.size());
}

HttpResponse ToResponse(http::response<http::string_body>& res) {
  HttpResponse out;
  out.status = res.result_int();
  out.reason = std::string(res.reason());
  out.content_type = Header(res, http::field::content_type);
  out.retry_after = Header(res, http::field::retry_after);
  out.body = std::move(res.body());
  return out;
}

}  // namespace

class TlsTrust {
 public:
  net::ssl::context context{net::ssl::context::tls_client};
};

Result<std::shared_ptr<TlsTrust>> LoadTlsTrust(const std::string& ca_file,
                                               const std::string& cert_file,
                                               const std::string& key_file) {
  auto trust = std::make_shared<TlsTrust>();
  trust->context.set_verify_mode(net::ssl::verify_peer);
  beast::error_code ec;
  if (ca_file.empty()) {
    trust->context.set_default_verify_paths(ec);
  } else {
    trust->context.load_verify_file(ca_file, ec);
  }
  if (ec) {
    return InvalidArgumentError(
        "cannot load the certificate authorities" +
        (ca_file.empty() ? std::string(" of the system") : " in " + ca_file) + ": " + ec.message());
  }
  if (!cert_file.empty()) {
    trust->context.use_certificate_chain_file(cert_file, ec);
    if (!ec) trust->context.use_private_key_file(key_file, net::ssl::context::pem, ec);
    if (ec) {
      return InvalidArgumentError("cannot load the client certificate " + cert_file +
                                  " and its key " + key_file + ": " + ec.message());
    }
  }
  return trust;
}

struct HttpConnection::State {
  State(net::any_io_executor ex, HttpConnectionOptions o)
      : executor(std::move(ex)), options(std::move(o)) {}

  awaitable<HttpOutcome> Post(HttpUrl url, HttpRequest request);
  awaitable<beast::error_code> Connect(const HttpUrl& url);
  awaitable<beast::error_code> ConnectTls(const HttpUrl& url,
                                          const tcp::resolver::results_type& addresses);
  // Shuts and closes the sockets, so that any operation pending on them completes (aborted),
  // but keeps the stream objects: a pending operation still refers to them (an SSL stream's
  // engine and buffers).
  void CloseSockets();
  // CloseSockets, and destroys the streams. Only where no operation is pending on them.
  void CloseStreams();

  // One HTTP write or read on whichever stream is open, under the timeout.
  template <class Stream>
  awaitable<beast::error_code> WriteOn(Stream& stream, http::request<http::string_body>& req) {
    beast::error_code ec;
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    co_await http::async_write(stream, req, net::redirect_error(use_awaitable, ec));
    co_return ec;
  }
  template <class Stream>
  awaitable<beast::error_code> ReadOn(Stream& stream, http::response<http::string_body>& res) {
    beast::error_code ec;
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    co_await http::async_read(stream, buffer, res, net::redirect_error(use_awaitable, ec));
    co_return ec;
  }
  awaitable<beast::error_code> Write(http::request<http::string_body>& req) {
    if (tls_stream) co_return co_await WriteOn(*tls_stream, req);
    co_return co_await WriteOn(*stream, req);
  }
  awaitable<beast::error_code> Read(http::response<http::string_body>& res) {
    if (tls_stream) co_return co_await ReadOn(*tls_stream, res);
    co_return co_await ReadOn(*stream, res);
  }

  net::any_io_executor executor;
  const HttpConnectionOptions options;
  std::optional<beast::tcp_stream> stream;                         // http://
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_stream;  // https://
  beast::flat_buffer buffer;
  std::optional<HttpUrl> connected_to;  // where the open connection goes; none if closed
  uint64_t closes = 0;                  // Close calls so far: a Post they interrupt ends
};

awaitable<HttpOutcome> HttpConnection::State::Post(HttpUrl url, HttpRequest request) {
  http::request<http::string_body> req = BuildRequest(url, std::move(request), options.user_agent);
  const uint64_t closes_before = closes;
  for (int tries = 0; tries < kTriesPerRequest; ++tries) {
    bool fresh = false;
    if (connected_to != url) {
      const beast::error_code ec = co_await Connect(url);
      if (ec) co_return HttpError{HttpFailure::kConnect, ec.message()};
      fresh = true;
    }
    if (!options.failpoint_before_write.empty()) CheckFailpoint(options.failpoint_before_write);
    beast::error_code ec = co_await Write(req);
    if (ec) {
      CloseStreams();
      if (!fresh && closes == closes_before) continue;
      co_return HttpError{HttpFailure::kWrite, ec.message()};
    }
    http::response<http::string_body> res;
    ec = co_await Read(res);
    if (ec) {
      CloseStreams();
      if (ec == beast::error::timeout)
        co_return HttpError{HttpFailure::kTimeout, "no answer in time"};
      if (!fresh && closes == closes_before) continue;
      co_return HttpError{HttpFailure::kRead, ec.message()};
    }
    if (!res.keep_alive()) CloseStreams();
    co_return ToResponse(res);
  }
  co_return HttpError{HttpFailure::kStale, "connection lost twice"};
}

awaitable<beast::error_code> HttpConnection::State::Connect(const HttpUrl& url) {
  CloseStreams();
  buffer.clear();
  const uint64_t closes_before = closes;
  beast::error_code ec;
  tcp::resolver resolver(executor);
  const auto addresses = co_await resolver.async_resolve(url.host, std::to_string(url.port),
                                                         net::redirect_error(use_awaitable, ec));
  if (ec) co_return ec;
  if (closes != closes_before) co_return beast::error_code(net::error::operation_aborted);
  if (url.tls) {
    ec = co_await ConnectTls(url, addresses);
  } else {
    stream.emplace(executor);
    stream->expires_after(options.timeout);
    co_await stream->async_connect(addresses, net::redirect_error(use_awaitable, ec));
  }
  if (ec) {
    CloseStreams();
  } else {
    // A request goes out whole, in one write: with Nagle's algorithm on, the next one waits for
    // the lobby's acknowledgement of the last, which it may delay (server/http_server.cc).
    beast::error_code ignored;
    tcp::socket& socket =
        url.tls ? beast::get_lowest_layer(*tls_stream).socket() : stream->socket();
    socket.set_option(tcp::no_delay(true), ignored);
    connected_to = url;
  }
  co_return ec;
}

awaitable<beast::error_code> HttpConnection::State::ConnectTls(
    const HttpUrl& url, const tcp::resolver::results_type& addresses) {
  if (!options.tls) co_return beast::error_code(net::error::operation_not_supported);
  tls_stream.emplace(executor, options.tls->context);
  // SNI, and the certificate must name the host we asked for.
  SSL_set_tlsext_host_name(tls_stream->native_handle(), url.host.c_str());
  tls_stream->set_verify_callback(net::ssl::host_name_verification(url.host));
  auto& tcp_layer = beast::get_lowest_layer(*tls_stream);
  // One timeout for the connect and the handshake together.
  tcp_layer.expires_after(options.timeout);
  beast::error_code ec;
  co_await tcp_layer.async_connect(addresses, net::redirect_error(use_awaitable, ec));
  if (ec) co_return ec;
  co_await tls_stream->async_handshake(net::ssl::stream_base::client,
                                       net::redirect_error(use_awaitable, ec));
  co_return ec;
}

void HttpConnection::State::CloseSockets() {
  beast::error_code ignored;
  if (stream) {
    stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream->close();
  }
  if (tls_stream) {
    // No TLS close_notify: the lobby treats a closed connection as closed either way.
    beast::get_lowest_layer(*tls_stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(*tls_stream).close();
  }
  connected_to.reset();
}

void HttpConnection::State::CloseStreams() {
  CloseSockets();
  stream.reset();
  tls_stream.reset();
}

HttpConnection::HttpConnection(net::any_io_executor executor, HttpConnectionOptions options)
    : state_(std::make_unique<State>(std::move(executor), std::move(options))) {}

HttpConnection::~HttpConnection() = default;

awaitable<HttpOutcome> HttpConnection::Post(HttpUrl url, HttpRequest request) {
  return state_->Post(std::move(url), std::move(request));
}

void HttpConnection::Close() {
  ++state_->closes;
  // A Post may be suspended in an operation on the streams: it ends that operation aborted and
  // destroys them itself (Post and Connect close the streams after a failure).
  state_->CloseSockets();
}

struct BlockingHttpClient::State {
  explicit State(HttpConnectionOptions options)
      : connection(ioc.get_executor(), std::move(options)) {}
  net::io_context ioc;
  HttpConnection connection;
};

BlockingHttpClient::BlockingHttpClient(HttpConnectionOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}

BlockingHttpClient::~BlockingHttpClient() = default;

HttpOutcome BlockingHttpClient::Post(const HttpUrl& url, HttpRequest request) {
  HttpOutcome outcome;
  std::exception_ptr error;
  net::co_spawn(state_->ioc, state_->connection.Post(url, std::move(request)),
                [&](std::exception_ptr e, HttpOutcome o) {
                  error = e;
                  outcome = std::move(o);
                });
  state_->ioc.restart();
  state_->ioc.run();
  if (error) std::rethrow_exception(error);
  return outcome;
}

}  // namespace verdict::delivery
