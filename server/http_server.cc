#include "server/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>
#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/host_port.h"
#include "common/log.h"
#include "common/log_rate_limit.h"
#include "server/problem.h"

namespace verdict::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using unix_socket = net::local::stream_protocol;
using UnixStream = beast::basic_stream<unix_socket>;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// Beast's number for HTTP/1.1, the version of a reply to a request not parsed.
constexpr unsigned kHttp11 = 11;
// A lingering close reads and discards for this long at most, in chunks of this size.
constexpr std::chrono::seconds kLingerTimeout{2};
constexpr size_t kLingerReadBytes = 16 * 1024;
// The most a body read asks of the socket at a time, and the buffer a connection keeps between
// requests.
constexpr uint64_t kBodyReadBytes = 64 * 1024;
constexpr size_t kIdleBufferBytes = 4 * 1024;
// How long to wait before accepting again after an accept failed.
constexpr std::chrono::milliseconds kAcceptRetryPause{100};
constexpr std::string_view kUnixPrefix = "unix:";

std::string PathOf(std::string_view target) {
  return std::string(target.substr(0, target.find('?')));
}

// `reply` as the bytes of an HTTP/1.1 response that closes its connection.
std::string Serialized(const HttpReply& reply, const std::string& server) {
  http::response<http::string_body> res(static_cast<http::status>(reply.status), kHttp11);
  res.set(http::field::server, server);
  res.set(http::field::content_type, reply.content_type);
  for (const auto& [name, value] : reply.headers) res.set(name, value);
  res.keep_alive(false);
  res.body() = reply.body;
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  return out.str();
}

bool ExpectsContinue(beast::string_view expect) { return beast::iequals(expect, "100-continue"); }

// RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host field (HTTP/1.0 may have none); any
// other count is answered 400.
template <class Fields>
bool HostFieldsValid(const Fields& header, unsigned version) {
  const size_t hosts = header.count(http::field::host);
  return hosts == 1 || (hosts == 0 && version < 11);
}

}  // namespace

Result<ListenAddress> ListenAddress::Parse(const std::string& text) {
  ListenAddress address;
  if (std::string_view(text).starts_with(kUnixPrefix)) {
    address.kind = Kind::kUnix;
    address.path = text.substr(kUnixPrefix.size());
    if (address.path.empty()) return InvalidArgumentError("'" + text + "' names no socket path");
    if (address.path.size() >= sizeof(sockaddr_un::sun_path)) {
      return InvalidArgumentError("the socket path of '" + text + "' is longer than " +
                                  std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
    }
    return address;
  }
  if (!ParseHostPort(text, &address.host, &address.port)) {
    return InvalidArgumentError("a listen address is HOST:PORT or unix:PATH, got '" + text + "'");
  }
  return address;
}

std::string ListenAddress::ToString() const {
  return kind == Kind::kUnix ? std::string(kUnixPrefix) + path : JoinHostPort(host, port);
}

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, HttpHandler& handler, metrics::Registry* registry)
      : options_(std::move(options)),
        handler_(handler),
        registry_(registry ? *registry : fallback_registry_),
        requests_(registry_.AddLabeledCounter(options_.name + "_http_requests_total",
                                              "HTTP responses by status code.", "status")),
        occupancy_(
            std::make_shared<Occupancy>(options_.listen.size(), options_.max_body_bytes_in_flight)),
        caps_(options_.listen.size(), options_.max_connections),
        over_cap_reply_(Serialized(
            ProblemReply(ErrorCode::kUnavailable, "too many open connections", ""), options_.name)),
        ioc_(options_.io_threads) {
    registry_.AddGauge(options_.name + "_open_connections", "Open HTTP connections.",
                       [o = occupancy_] { return static_cast<double>(o->live.load()); });
    registry_.AddGauge(options_.name + "_http_body_bytes_in_flight",
                       "Bytes of request bodies reserved by requests not yet answered.",
                       [o = occupancy_] { return static_cast<double>(o->body_bytes.load()); });
  }

  Result<std::vector<uint16_t>> Start();
  void Stop();

  void CountReply(int status) { requests_.Add(std::to_string(status)); }

  // What connections hold of the server: counted as they open and close, and shared with each,
  // so that one outliving the server (an Exchange a handler kept) touches nothing freed.
  struct Occupancy {
    Occupancy(size_t listeners, uint64_t body_budget)
        : per_listener(listeners), body_budget(body_budget) {}

    // A connection on `listener` opened or closed (an HTTP session or the WebSocket it became).
    void Opened(size_t listener) {
      ++live;
      ++per_listener[listener];
    }
    void Closed(size_t listener) {
      --live;
      --per_listener[listener];
    }
    // Takes `bytes` from the body budget; false, taking nothing, if they do not fit in it.
    bool ReserveBody(uint64_t bytes) {
      if (body_budget == 0) return true;
      uint64_t held = body_bytes.load();
      do {
        if (bytes > body_budget - held) return false;
      } while (!body_bytes.compare_exchange_weak(held, held + bytes));
      return true;
    }
    void ReleaseBody(uint64_t bytes) {
      if (body_budget != 0) body_bytes -= bytes;
    }

    std::atomic<size_t> live{0};
    std::vector<std::atomic<size_t>> per_listener;  // in HttpServerOptions::listen order
    const uint64_t body_budget;                     // max_body_bytes_in_flight
    std::atomic<uint64_t> body_bytes{0};            // reserved from it
  };

  bool OverConnectionCap(size_t listener) const {
    return occupancy_->per_listener[listener].load() > caps_[listener];
  }

  const HttpServerOptions options_;
  HttpHandler& handler_;
  metrics::Registry fallback_registry_;
  metrics::Registry& registry_;
  metrics::LabeledCounter& requests_;
  const std::shared_ptr<Occupancy> occupancy_;
  std::vector<size_t> caps_;          // per listener, in options_.listen order; set by Start
  const std::string over_cap_reply_;  // the bytes of the 503 over a cap
  std::optional<net::ssl::context> tls_;
  // Accepts failing (out of descriptors) repeat every pause, on every listener.
  LogRateLimit accept_failure_log_{RepeatedFaultLimit()};
  // Declared after everything sessions touch, so pending sessions die first.
  net::io_context ioc_;

 private:
  class ListenerBase {
   public:
    virtual ~ListenerBase() = default;
    virtual void Accept() = 0;
    virtual void Close() = 0;
  };
  template <class Protocol>
  class Listener;

  Status LoadTls();
  // Lowers caps_ so that the listeners' connections fit in the descriptor limit together,
  // beside kReservedDescriptors.
  void FitConnectionCaps();

  std::vector<std::unique_ptr<ListenerBase>> listeners_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
};

namespace {

// Hands one request's answer back to its session's strand. Any thread.
template <class Session>
class SessionExchange final : public Exchange {
 public:
  SessionExchange(std::shared_ptr<Session> session, uint64_t request)
      : session_(std::move(session)), request_(request) {}

  void Reply(HttpReply reply) override {
    net::post(session_->executor(), [s = session_, id = request_, r = std::move(reply)]() mutable {
      s->Answer(id, std::move(r));
    });
  }
  void ReplyUnlessAnsweredWithin(std::chrono::milliseconds wait, HttpReply fallback) override {
    net::post(session_->executor(),
              [s = session_, id = request_, wait, f = std::move(fallback)]() mutable {
                s->ArmDeadline(id, wait, std::move(f));
              });
  }
  void OnHangUp(std::function<void()> on_hang_up) override {
    net::post(session_->executor(),
              [s = session_, id = request_, f = std::move(on_hang_up)]() mutable {
                s->WatchForHangUp(id, std::move(f));
              });
  }
  void AcceptWebSocket(size_t max_message_bytes, SessionMaker make) override {
    net::post(session_->executor(),
              [s = session_, id = request_, max_message_bytes, make = std::move(make)]() mutable {
                s->Upgrade(id, max_message_bytes, std::move(make));
              });
  }

 private:
  std::shared_ptr<Session> session_;
  const uint64_t request_;
};

// A WebSocket taken over from an HTTP connection. It holds its session only weakly; the read
// loop's handler holds both, so the pair lives while the peer is there, and the session, which
// holds the connection, keeps it for its own pending work. `Next` is the connection's stream.
template <class Next>
class WsConnection final : public WebSocket,
                           public std::enable_shared_from_this<WsConnection<Next>> {
 public:
  WsConnection(Next&& next, HttpServer::Impl& server, size_t listener)
      : ws_(std::move(next)), occupancy_(server.occupancy_), listener_(listener) {
    occupancy_->Opened(listener_);
  }
  ~WsConnection() override { occupancy_->Closed(listener_); }

  void Accept(http::request<http::string_body> request, size_t max_message_bytes,
              Exchange::SessionMaker make) {
    request_ = std::move(request);
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.read_message_max(max_message_bytes);
    ws_.async_accept(
        request_, [self = this->shared_from_this(), make = std::move(make)](beast::error_code ec) {
          if (ec) return;
          std::shared_ptr<WebSocketSession> session = make(self);
          session->OnOpen();
          self->Read(std::move(session));
        });
  }

  void Post(std::function<void()> fn) override { net::post(ws_.get_executor(), std::move(fn)); }

  void Write(const std::string& text, std::function<void(bool)> done) override {
    ws_.text(true);
    ws_.async_write(net::buffer(text), [self = this->shared_from_this(), done = std::move(done)](
                                           beast::error_code ec, std::size_t) { done(!ec); });
  }

  void Close(uint16_t code, const std::string& reason) override {
    ws_.async_close(websocket::close_reason(static_cast<websocket::close_code>(code), reason),
                    [self = this->shared_from_this()](beast::error_code) {});
  }

 private:
  void Read(std::shared_ptr<WebSocketSession> session) {
    ws_.async_read(read_buffer_, [self = this->shared_from_this(), session = std::move(session)](
                                     beast::error_code ec, std::size_t) mutable {
      if (ec) return session->OnGone();
      self->read_buffer_.consume(self->read_buffer_.size());
      self->Read(std::move(session));
    });
  }

  websocket::stream<Next> ws_;
  const std::shared_ptr<HttpServer::Impl::Occupancy> occupancy_;
  const size_t listener_;
  http::request<http::string_body> request_;
  beast::flat_buffer read_buffer_;
};

// One HTTP/1.1 connection: reads a request under a deadline, lets the handler judge its header,
// reads its body, hands it over, writes the answer, and repeats while the client keeps the
// connection alive. All state lives on the connection's strand.
// `Stream` is beast::tcp_stream, TlsStream over it, or UnixStream.
template <class Stream>
class HttpSession final : public std::enable_shared_from_this<HttpSession<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  // `args` construct the stream: the accepted socket, and the TLS context if any.
  template <class... Args>
  HttpSession(HttpServer::Impl& server, bool local, size_t listener, Args&&... args)
      : stream_(std::forward<Args>(args)...),
        server_(server),
        local_(local),
        listener_(listener),
        occupancy_(server.occupancy_),
        deadline_(stream_.get_executor()) {
    occupancy_->Opened(listener_);
  }
  ~HttpSession() {
    occupancy_->ReleaseBody(body_reserved_);
    occupancy_->Closed(listener_);
  }

  auto executor() { return stream_.get_executor(); }

  void Run() {
    net::dispatch(executor(), [self = this->shared_from_this()] {
      if (self->server_.OverConnectionCap(self->listener_)) return self->RefuseOverCap();
      self->Handshake([self] { self->DoRead(); });
    });
  }

  // The handler's answer to request `id`, unless that request was answered already.
  void Answer(uint64_t id, HttpReply reply) {
    if (id != request_ || !awaiting_) return;
    awaiting_ = false;
    deadline_.cancel();
    StopWatching();
    ReleaseBody();
    WriteReply(std::move(reply), keep_alive_);
  }

  void ArmDeadline(uint64_t id, std::chrono::milliseconds wait, HttpReply fallback) {
    if (id != request_ || !awaiting_) return;
    deadline_.expires_after(wait);
    deadline_.async_wait([self = this->shared_from_this(), id,
                          fallback = std::move(fallback)](beast::error_code ec) mutable {
      if (!ec) self->Answer(id, std::move(fallback));
    });
  }

  // Hands the connection over to a WebSocket, if request `id` is still unanswered.
  void Upgrade(uint64_t id, size_t max_message_bytes, Exchange::SessionMaker make) {
    if (id != request_ || !awaiting_ || !upgrade_request_) {
      if (id == request_ && awaiting_) {
        Answer(id,
               ProblemReply(ErrorCode::kInvalidArgument, "not a WebSocket upgrade", head_.path));
      }
      return;
    }
    awaiting_ = false;
    deadline_.cancel();
    StopWatching();
    ReleaseBody();
    std::make_shared<WsConnection<Stream>>(std::move(stream_), server_, listener_)
        ->Accept(std::move(*upgrade_request_), max_message_bytes, std::move(make));
  }

  // While request `id` waits for its answer, watches the socket: readable with nothing to read
  // is the client hanging up, and `on_hang_up` runs. Readable with data (a pipelined request, a
  // TLS record) ends the watch, as the connection is alive.
  void WatchForHangUp(uint64_t id, std::function<void()> on_hang_up) {
    if (id != request_ || !awaiting_) return;
    on_hang_up_ = std::move(on_hang_up);
    Watch();
  }

 private:
  // TLS first, under the read deadline, when the listener serves TLS; then `next`.
  template <class Next>
  void Handshake(Next next) {
    if constexpr (kTls) {
      beast::get_lowest_layer(stream_).expires_after(server_.options_.read_timeout);
      stream_.async_handshake(
          net::ssl::stream_base::server,
          [self = this->shared_from_this(), next = std::move(next)](beast::error_code ec) mutable {
            if (ec) return self->Close();  // not TLS, or a bad handshake
            next();
          });
    } else {
      next();
    }
  }

  // A connection over its listener's cap is answered 503 at once (over TLS it is closed: an
  // answer would need a handshake first), and closed without waiting for the client: a flood of
  // connections must not hold descriptors that other listeners need.
  void RefuseOverCap() {
    server_.CountReply(503);
    if constexpr (kTls) {
      return Close();
    } else {
      beast::get_lowest_layer(stream_).expires_after(kLingerTimeout);
      net::async_write(
          stream_, net::buffer(server_.over_cap_reply_),
          [self = this->shared_from_this()](beast::error_code, std::size_t) { self->Close(); });
    }
  }

  void DoRead() {
    parser_.emplace();
    parser_->header_limit(server_.options_.max_header_bytes);
    // No limit while the header is read (Beast would otherwise hold Content-Length to its
    // default of 1 MiB there): the handler's verdict sets the body's limit.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::get_lowest_layer(stream_).expires_after(server_.options_.read_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&HttpSession::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    version_ = header.version();
    keep_alive_ = header.keep_alive();
    head_ = RequestHead{std::string(header.method_string()),
                        std::string(header.target()),
                        PathOf(std::string_view(header.target().data(), header.target().size())),
                        std::string(header[http::field::content_type]),
                        std::string(header[http::field::authorization]),
                        local_,
                        websocket::is_upgrade(header),
                        listener_};
    if (!HostFieldsValid(header, version_)) {
      return WriteReply(
          ProblemReply(ErrorCode::kInvalidArgument,
                       "an HTTP/1.1 request needs exactly one Host header", head_.path),
          false);
    }
    HeaderVerdict verdict = server_.handler_.OnHeader(head_);
    if (verdict.reply) {
      // Keep the connection only if there is no body left unread on it.
      return WriteReply(std::move(*verdict.reply), parser_->is_done() && keep_alive_);
    }
    const auto length = parser_->content_length();
    if (length && *length > verdict.max_body_bytes) return RefuseTooLarge(verdict.max_body_bytes);
    // What the body may take, held from now until the answer: a body whose length is not
    // announced may grow to the limit.
    const uint64_t reserve = parser_->is_done() ? 0 : length.value_or(verdict.max_body_bytes);
    if (!occupancy_->ReserveBody(reserve)) {
      return WriteReply(
          ProblemReply(ErrorCode::kUnavailable,
                       "too many request bodies are being received at once; retry", head_.path),
          false);
    }
    body_reserved_ = reserve;
    parser_->body_limit(verdict.max_body_bytes);
    // Beast reads as much as the buffer has room for, at least 512 bytes; the body is parsed out
    // of the buffer as it arrives, so a buffer sized for the header would take the body 512
    // bytes a syscall. Make room for the body, up to a read's worth.
    buffer_.reserve(buffer_.size() +
                    std::min<uint64_t>(length.value_or(kBodyReadBytes),
                                       std::min(verdict.max_body_bytes, kBodyReadBytes)));
    max_body_bytes_ = verdict.max_body_bytes;
    if (!parser_->is_done() && ExpectsContinue(header[http::field::expect])) {
      auto go_on =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
      return http::async_write(
          stream_, *go_on,
          [self = this->shared_from_this(), go_on](beast::error_code ec, std::size_t) {
            if (ec) return self->Close();
            self->ReadBody();
          });
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&HttpSession::OnBody, this->shared_from_this()));
  }

  void OnBody(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    // An idle keep-alive connection holds no more than a header's worth of buffer.
    if (buffer_.capacity() > kIdleBufferBytes) buffer_.shrink_to_fit();
    http::request<http::string_body> req = parser_->release();
    upgrade_request_.reset();
    if (head_.upgrade) upgrade_request_ = req;
    HttpRequest request{std::string(req.method_string()),
                        std::string(req.target()),
                        std::string(req[http::field::content_type]),
                        std::string(req[http::field::accept]),
                        std::string(req[http::field::authorization]),
                        std::move(req.body())};
    awaiting_ = true;
    server_.handler_.OnRequest(
        head_, std::move(request),
        std::make_shared<SessionExchange<HttpSession>>(this->shared_from_this(), ++request_));
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) return RefuseTooLarge(max_body_bytes_);
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset) {
      return Close();
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return WriteReply(
          ProblemReply(ErrorCode::kInvalidArgument, "malformed HTTP request: " + ec.message(), ""),
          false);
    }
    Close();
  }

  void RefuseTooLarge(size_t limit) {
    WriteReply(
        ProblemReply(ErrorCode::kPayloadTooLarge,
                     "request bodies here are limited to " + std::to_string(limit) + " bytes",
                     head_.path),
        false);
  }

  void Watch() {
    auto& socket = beast::get_lowest_layer(stream_).socket();
    watching_ = true;
    socket.async_wait(socket.wait_read, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec || !self->watching_) return;
      auto& socket = beast::get_lowest_layer(self->stream_).socket();
      char byte;
      const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // data: alive
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return self->Watch();
      }
      self->watching_ = false;
      if (auto hung_up = std::exchange(self->on_hang_up_, nullptr)) hung_up();
    });
  }

  void StopWatching() {
    on_hang_up_ = nullptr;
    if (!watching_) return;
    watching_ = false;
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().cancel(ignored);
  }

  void WriteReply(HttpReply reply, bool keep_alive) {
    server_.CountReply(reply.status);
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), version_ ? version_ : kHttp11);
    res->set(http::field::server, server_.options_.name);
    res->set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) res->set(name, value);
    res->keep_alive(keep_alive);
    res->body() = std::move(reply.body);
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(server_.options_.read_timeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code ec, std::size_t) {
                        if (ec) return;
                        if (res->need_eof()) return self->LingeringClose();
                        self->DoRead();
                      });
  }

  // Half-closes, then reads and discards until the client closes (or a short deadline), so a
  // client still sending an oversized body receives our answer instead of a reset.
  void LingeringClose() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(net::socket_base::shutdown_send, ignored);
    beast::get_lowest_layer(stream_).expires_after(kLingerTimeout);
    DrainLoop();
  }

  void DrainLoop() {
    stream_.async_read_some(net::buffer(drain_),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              if (!ec) self->DrainLoop();
                            });
  }

  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(net::socket_base::shutdown_send, ignored);
  }

  void ReleaseBody() {
    occupancy_->ReleaseBody(body_reserved_);
    body_reserved_ = 0;
  }

  Stream stream_;
  HttpServer::Impl& server_;
  const bool local_;
  const size_t listener_;
  const std::shared_ptr<HttpServer::Impl::Occupancy> occupancy_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  RequestHead head_;
  std::optional<http::request<http::string_body>> upgrade_request_;  // the last one, if upgrade
  unsigned version_ = kHttp11;
  bool keep_alive_ = false;
  size_t max_body_bytes_ = 0;
  uint64_t body_reserved_ = 0;  // from the server's body budget, for the request being read
  uint64_t request_ = 0;        // the number of the request read last
  bool awaiting_ = false;       // its answer is pending
  net::steady_timer deadline_;
  std::function<void()> on_hang_up_;
  bool watching_ = false;
  std::array<char, kLingerReadBytes> drain_;
};

}  // namespace

// One listening socket and its accept loop.
template <class Protocol>
class HttpServer::Impl::Listener final : public HttpServer::Impl::ListenerBase {
  static constexpr bool kUnix = std::is_same_v<Protocol, unix_socket>;

 public:
  Listener(Impl& server, size_t index) : server_(server), index_(index), acceptor_(server.ioc_) {}
  ~Listener() override { RemoveSocketFile(); }

  // Binds to `endpoint`; returns the bound port (0 for a Unix socket).
  Result<uint16_t> Bind(const typename Protocol::endpoint& endpoint, const std::string& shown) {
    beast::error_code ec;
    if constexpr (kUnix) VERDICT_RETURN_IF_ERROR(ClearStaleSocket(endpoint.path(), shown));
    acceptor_.open(endpoint.protocol(), ec);
    if constexpr (!kUnix) {
      if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) acceptor_.bind(endpoint, ec);
    if (ec) return UnavailableError("cannot listen on " + shown + ": " + ec.message());
    if constexpr (kUnix) {
      path_ = endpoint.path();
      struct stat st {};
      if (::chmod(path_.c_str(), 0660) != 0 || ::stat(path_.c_str(), &st) != 0) {
        const std::string why = std::strerror(errno);
        RemoveSocketFile();
        return UnavailableError("cannot set the mode of " + shown + ": " + why);
      }
      inode_ = st.st_ino;
    }
    acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return UnavailableError("cannot listen on " + shown + ": " + ec.message());
    if constexpr (kUnix) {
      return uint16_t{0};
    } else {
      return acceptor_.local_endpoint().port();
    }
  }

  void Accept() override {
    acceptor_.async_accept(net::make_strand(server_.ioc_),
                           beast::bind_front_handler(&Listener::OnAccept, this));
  }

  void Close() override {
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  // A socket file whose process died is removed; one that still answers is someone else's.
  static Status ClearStaleSocket(const std::string& path, const std::string& shown) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return Status::Ok();  // nothing there
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPreconditionError(shown + " exists and is not a socket; not replacing it");
    }
    // Does a process answer on it? A connect to a socket nobody listens on is refused.
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int connected =
        ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    const int why = errno;
    ::close(probe);
    if (connected == 0) {
      return UnavailableError("another process is answering on " + shown +
                              "; is another verdict-node running?");
    }
    if (why != ECONNREFUSED) {
      return UnavailableError("cannot tell whether " + shown + " is in use: " + std::strerror(why));
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return UnavailableError("cannot remove the stale socket " + shown + ": " +
                              std::strerror(errno));
    }
    Log().info("{}: replaced a socket left by a process that is gone", shown);
    return Status::Ok();
  }

  void OnAccept(beast::error_code ec, typename Protocol::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      if (server_.options_.unsafe_stop_accepting_on_failure_for_test) {
        Log().error("accept failed: {}; UNSAFE: no longer accepting", ec.message());
        return;
      }
      // Out of file descriptors or memory, say: the connection stays in the backlog and an
      // accept at once would fail the same way, spinning an I/O thread. Pause.
      LogLimited(Log(), server_.accept_failure_log_, spdlog::level::warn,
                 "accept failed: {}; accepting again in {} ms", ec.message(),
                 kAcceptRetryPause.count());
      pause_.expires_after(kAcceptRetryPause);
      pause_.async_wait([this](beast::error_code waited) {
        if (!waited) Accept();
      });
      return;
    }
    if constexpr (!kUnix) {
      // Every answer and feed event goes out whole, in one write, so Nagle's algorithm can only
      // hold a small one back until the peer acknowledges the one before, which a peer that
      // delays its acknowledgements does for up to 40 ms: most of a settlement's visible latency
      // at a low rate (docs/benchmarks.md, "Settlement latency").
      beast::error_code ignored;
      socket.set_option(net::ip::tcp::no_delay(true), ignored);
    }
    if constexpr (kUnix) {
      std::make_shared<HttpSession<UnixStream>>(server_, true, index_, std::move(socket))->Run();
    } else if (server_.tls_) {
      std::make_shared<HttpSession<TlsStream>>(server_, false, index_, std::move(socket),
                                               *server_.tls_)
          ->Run();
    } else {
      std::make_shared<HttpSession<beast::tcp_stream>>(server_, false, index_, std::move(socket))
          ->Run();
    }
    Accept();
  }

  // Removes the socket file this listener created, unless another process replaced it since.
  void RemoveSocketFile() {
    if (path_.empty()) return;
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && st.st_ino == inode_) ::unlink(path_.c_str());
    path_.clear();
  }

  Impl& server_;
  const size_t index_;
  typename Protocol::acceptor acceptor_;
  net::steady_timer pause_{server_.ioc_};  // after an accept failed
  std::string path_;                       // the Unix socket file, once bound
  ino_t inode_ = 0;
};

Status HttpServer::Impl::LoadTls() {
  if (options_.tls_cert_file.empty() && options_.tls_key_file.empty()) return Status::Ok();
  if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
    return InvalidArgumentError("TLS needs both a certificate and a private key file");
  }
  beast::error_code ec;
  tls_.emplace(net::ssl::context::tls_server);
  tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                    net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                    net::ssl::context::no_tlsv1_1);
  tls_->use_certificate_chain_file(options_.tls_cert_file, ec);
  if (ec) {
    return InvalidArgumentError("cannot load the TLS certificate " + options_.tls_cert_file + ": " +
                                ec.message());
  }
  tls_->use_private_key_file(options_.tls_key_file, net::ssl::context::pem, ec);
  if (ec) {
    return InvalidArgumentError("cannot load the TLS private key " + options_.tls_key_file + ": " +
                                ec.message());
  }
  return Status::Ok();
}

void HttpServer::Impl::FitConnectionCaps() {
  // One listener too: a metrics port that needs no token, flooded up to the descriptor limit,
  // would leave the process (a battle host embedding the node) none for its own files.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  size_t open = 0;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++open;
  }
  const uint64_t used = open + kReservedDescriptors;
  const uint64_t free = limit.rlim_cur > used ? limit.rlim_cur - used : 0;
  // The caps together must leave the process descriptors for everything else.
  const size_t each = std::max<size_t>(1, free / options_.listen.size());
  if (each >= options_.max_connections) return;
  Log().warn(
      "{} descriptors may be open ({} in use): each of the {} listener(s) takes at most {} "
      "connections instead of {}; raise the limit (LimitNOFILE=, ulimit -n) for more",
      limit.rlim_cur, open, options_.listen.size(), each, options_.max_connections);
  std::fill(caps_.begin(), caps_.end(), each);
}

Result<std::vector<uint16_t>> HttpServer::Impl::Start() {
  if (options_.listen.empty()) return InvalidArgumentError("a server needs a listen address");
  VERDICT_RETURN_IF_ERROR(LoadTls());
  FitConnectionCaps();
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < options_.listen.size(); ++i) {
    const ListenAddress& address = options_.listen[i];
    const std::string shown = address.ToString();
    if (address.kind == ListenAddress::Kind::kUnix) {
      auto listener = std::make_unique<Listener<unix_socket>>(*this, i);
      auto port = listener->Bind(unix_socket::endpoint(address.path), shown);
      if (!port.ok()) return port.status();
      ports.push_back(*port);
      listeners_.push_back(std::move(listener));
      continue;
    }
    beast::error_code ec;
    const net::ip::address ip = net::ip::make_address(address.host, ec);
    if (ec) return InvalidArgumentError("cannot listen on '" + shown + "': " + ec.message());
    auto listener = std::make_unique<Listener<tcp>>(*this, i);
    auto port = listener->Bind(tcp::endpoint(ip, address.port), shown);
    if (!port.ok()) return port.status();
    ports.push_back(*port);
    listeners_.push_back(std::move(listener));
  }
  for (auto& listener : listeners_) listener->Accept();
  for (int i = 0; i < options_.io_threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
  return ports;
}

void HttpServer::Impl::Stop() {
  if (stopped_.exchange(true)) return;
  net::post(ioc_, [this] {
    for (auto& listener : listeners_) listener->Close();
  });
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  listeners_.clear();  // removes the socket files
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler& handler, metrics::Registry* registry)
    : impl_(std::make_unique<Impl>(std::move(options), handler, registry)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::vector<uint16_t>> HttpServer::Start() { return impl_->Start(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace verdict::server
