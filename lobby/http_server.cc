#include "lobby/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cerrno>
#include <deque>
#include <thread>

#include <spdlog/spdlog.h>

#include "lobby/problem.h"

namespace verdict::lobby {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

// Beast's number for HTTP/1.1, the version of a reply to a request not parsed.
constexpr unsigned kHttp11 = 11;
// A lingering close reads and discards for this long at most, in chunks of this size.
constexpr std::chrono::seconds kLingerTimeout{2};
constexpr size_t kLingerReadBytes = 16 * 1024;
// How long to wait before accepting again after an accept failed.
constexpr std::chrono::milliseconds kAcceptRetryPause{100};

std::string PathOf(const std::string& target) { return target.substr(0, target.find('?')); }

}  // namespace

class HttpServer::Impl {
 public:
  Impl(ServerOptions options, SettlementService& service, EventHub& hub,
       metrics::Registry& registry)
      : options_(std::move(options)),
        service_(service),
        hub_(hub),
        registry_(registry),
        requests_(registry.AddLabeledCounter("verdict_lobby_http_requests_total",
                                             "HTTP responses by status code.", "status")),
        ioc_(options_.io_threads),
        acceptor_(ioc_),
        db_pool_(options_.db_threads) {
    registry.AddGauge("verdict_lobby_open_connections", "Open HTTP and WebSocket connections.",
                      [this] { return static_cast<double>(live_.load()); });
    registry.AddGauge("verdict_lobby_queued_requests",
                      "Requests waiting for a DB worker to take them.",
                      [this] { return static_cast<double>(queued_.load()); });
    registry.AddGauge("verdict_lobby_event_subscribers", "Open /v1/events subscriptions.",
                      [this] { return static_cast<double>(subscribers_.load()); });
    registry.AddGauge("verdict_lobby_event_queued_bytes",
                      "Bytes of events queued for subscribers' sockets, all subscribers together.",
                      [this] { return static_cast<double>(event_queued_bytes_.load()); });
  }

  Result<uint16_t> Start() {
    beast::error_code ec;
    if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
      if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
        return InvalidArgumentError("TLS needs both a certificate and a private key file");
      }
      tls_.emplace(net::ssl::context::tls_server);
      tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                        net::ssl::context::no_tlsv1_1);
      tls_->use_certificate_chain_file(options_.tls_cert_file, ec);
      if (ec) {
        return InvalidArgumentError("cannot load the TLS certificate " + options_.tls_cert_file +
                                    ": " + ec.message());
      }
      tls_->use_private_key_file(options_.tls_key_file, net::ssl::context::pem, ec);
      if (ec) {
        return InvalidArgumentError("cannot load the TLS private key " + options_.tls_key_file +
                                    ": " + ec.message());
      }
    }
    const net::ip::address address = net::ip::make_address(options_.host, ec);
    if (ec)
      return InvalidArgumentError("cannot listen on '" + options_.host + "': " + ec.message());
    const tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return UnavailableError("cannot listen on " + options_.host + ":" +
                              std::to_string(options_.port) + ": " + ec.message());
    }
    const uint16_t port = acceptor_.local_endpoint().port();
    DoAccept();
    for (int i = 0; i < options_.io_threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return port;
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    net::post(ioc_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    db_pool_.join();
    canceller_.join();
  }

  void CountReply(int status) { requests_.Add(std::to_string(status)); }

  const ServerOptions options_;
  SettlementService& service_;
  EventHub& hub_;
  metrics::Registry& registry_;
  metrics::LabeledCounter& requests_;
  std::atomic<size_t> live_{0};
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> subscribers_{0};
  std::atomic<int64_t> event_queued_bytes_{0};
  std::atomic<bool> stopped_{false};
  std::optional<net::ssl::context> tls_;  // set when the lobby serves TLS
  // Declared after everything sessions touch, so pending sessions die first.
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer accept_pause_{ioc_};  // after an accept failed
  net::thread_pool db_pool_;
  // Cancels the statements of requests whose clients hung up (libpq's cancel blocks while it
  // reaches the server). One thread: a cancel is best effort, and rare.
  net::thread_pool canceller_{1};
  std::vector<std::thread> threads_;

 private:
  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
};

// One /v1/events subscriber. It follows the feed with its own cursor: the last place in the feed
// it has queued or skipped (events of other nodes are skipped for a node's token). Behind the
// hub, it pages the feed from the database, a page at a time and only while its queue is under
// half its byte budget, so a history of any length costs one page of memory. Once a page comes
// back short it is live: it takes the hub's pages, and if it ever finds a page that starts past
// its cursor (it missed one while paging), it pages again. A live subscriber whose queue grows
// past the budget is closed with 1013 and resumes with ?after=. All state lives on its strand.
// `Next` is the connection it was upgraded from: beast::tcp_stream, or the TLS stream over it.
template <class Next>
class EventsSession final : public EventSubscriber,
                            public std::enable_shared_from_this<EventsSession<Next>> {
 public:
  EventsSession(Next&& next, HttpServer::Impl& server, int64_t after,
                std::optional<std::string> node_id)
      : ws_(std::move(next)), server_(server), cursor_(after), node_id_(std::move(node_id)) {
    ++server_.live_;
  }
  ~EventsSession() override {
    --server_.live_;
    --server_.subscribers_;
    server_.event_queued_bytes_ -= queued_bytes_;
  }

  void Run(http::request<http::string_body> request) {
    request_ = std::move(request);
    net::dispatch(ws_.get_executor(), [self = this->shared_from_this()] { self->DoAccept(); });
  }

  void Deliver(std::shared_ptr<const FeedPage> page) override {
    net::post(ws_.get_executor(), [self = this->shared_from_this(), page = std::move(page)] {
      self->OnLivePage(*page);
    });
  }

 private:
  // A message queued for the socket: one event as the client sees it.
  struct Message {
    int64_t seq;
    std::string text;
  };

  void DoAccept() {
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.read_message_max(kMaxClientMessageBytes);
    ws_.async_accept(request_, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->server_.hub_.Subscribe(self->weak_from_this());
      self->DoRead();
      self->FetchIfRoom();
    });
  }

  // Catching up: reads the next page if the queue has drained enough and none is on its way.
  void FetchIfRoom() {
    if (closing_ || live_ || fetching_) return;
    if (queued_bytes_ > server_.options_.subscriber_buffer_bytes / 2) return;
    fetching_ = true;
    server_.hub_.FetchPage(cursor_, node_id_, server_.options_.catch_up_page_events,
                           [self = this->shared_from_this()](Result<FeedPage> page) {
                             net::post(self->ws_.get_executor(),
                                       [self, page = std::move(page)]() mutable {
                                         self->OnCatchUpPage(std::move(page));
                                       });
                           });
  }

  void OnCatchUpPage(Result<FeedPage> page) {
    fetching_ = false;
    if (closing_) return;
    if (!page.ok()) {
      spdlog::warn("events: catch-up failed: {}", page.status().ToString());
      return CloseWith(websocket::close_code::try_again_later,
                       "the event feed is unavailable; reconnect with ?after=");
    }
    for (const SettlementEvent& e : page->events) Queue(e);
    cursor_ = std::max(cursor_, page->last);
    if (page->events.size() < server_.options_.catch_up_page_events) {
      // Caught up with the feed as the database had it. The hub sets its head before it hands
      // out a page, so a head above the cursor means a page this session ignored while paging.
      live_ = server_.hub_.head() <= cursor_;
    }
    FetchIfRoom();
  }

  void OnLivePage(const FeedPage& page) {
    if (closing_ || !live_) return;  // catching up: the database pages cover this page too
    if (page.after > cursor_) {      // a page went by while this session was paging
      live_ = false;
      return FetchIfRoom();
    }
    for (const SettlementEvent& e : page.events) {
      if (e.seq > cursor_ && (!node_id_ || e.node_id == *node_id_)) Queue(e);
    }
    cursor_ = std::max(cursor_, page.last);
    if (queued_bytes_ > server_.options_.subscriber_buffer_bytes) {
      CloseWith(websocket::close_code::try_again_later,
                "too slow: more than " + std::to_string(server_.options_.subscriber_buffer_bytes) +
                    " bytes behind; reconnect with ?after=");
    }
  }

  void Queue(const SettlementEvent& e) {
    // The event goes out as the database wrote it (jsonb text), not parsed and printed again
    // through protobuf's JSON mapping, which costs more per event than the feed does in all.
    Message m{e.seq,
              "{\"event_id\":\"" + std::to_string(e.seq) + "\",\"event\":" + e.payload_json + "}"};
    queued_bytes_ += m.text.size();
    server_.event_queued_bytes_ += m.text.size();
    queue_.push_back(std::move(m));
    if (!writing_) DoWrite();
  }

  void DoWrite() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(net::buffer(queue_.front().text),
                    [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                      self->OnWritten(ec);
                    });
  }

  void OnWritten(beast::error_code ec) {
    writing_ = false;
    const size_t bytes = queue_.front().text.size();
    queued_bytes_ -= bytes;
    server_.event_queued_bytes_ -= bytes;
    queue_.pop_front();
    if (ec) {
      closing_ = true;  // the client is gone; nothing more to send
      return;
    }
    if (close_) return DoClose();
    if (!queue_.empty()) DoWrite();
    FetchIfRoom();
  }

  void DoRead() {
    ws_.async_read(read_buffer_, [self = this->shared_from_this()](beast::error_code ec,
                                                                   std::size_t) {
      if (ec) {
        self->closing_ = true;
        return;
      }
      self->read_buffer_.consume(self->read_buffer_.size());  // subscribers send nothing we need
      self->DoRead();
    });
  }

  // Closes cleanly: after the write in progress, if any (a WebSocket has one write at a time).
  void CloseWith(websocket::close_code code, const std::string& reason) {
    if (closing_) return;
    closing_ = true;
    close_ = websocket::close_reason(code, reason);
    if (!writing_) DoClose();
  }

  void DoClose() {
    server_.event_queued_bytes_ -= queued_bytes_;
    queued_bytes_ = 0;
    queue_.clear();
    ws_.async_close(*close_, [self = this->shared_from_this()](beast::error_code) {});
  }

  // Subscribers send nothing the lobby needs; anything large is an error that closes them.
  static constexpr size_t kMaxClientMessageBytes = 1024;

  websocket::stream<Next> ws_;
  HttpServer::Impl& server_;
  int64_t cursor_;
  const std::optional<std::string> node_id_;  // a node's token sees only its node's events
  http::request<http::string_body> request_;
  bool live_ = false;
  bool fetching_ = false;
  bool writing_ = false;
  bool closing_ = false;
  std::optional<websocket::close_reason> close_;
  std::deque<Message> queue_;
  size_t queued_bytes_ = 0;
  beast::flat_buffer read_buffer_;
};

// One HTTP/1.1 connection: reads a request under a deadline, answers it (on a DB worker when it
// needs the database), and repeats while the client keeps the connection alive.
// `Stream` is beast::tcp_stream, or beast::ssl_stream over it when the lobby serves TLS.
template <class Stream>
class HttpSession final : public std::enable_shared_from_this<HttpSession<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  // `args` construct the stream: the accepted socket, and the TLS context if any.
  template <class... Args>
  explicit HttpSession(HttpServer::Impl& server, Args&&... args)
      : stream_(std::forward<Args>(args)...), server_(server) {
    ++server_.live_;
  }
  ~HttpSession() { --server_.live_; }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      self->Handshake([self] { self->DoRead(); });
    });
  }

  // Answers once with `reply` and closes: used when over the connection cap.
  void Refuse(HttpReply reply) {
    net::dispatch(stream_.get_executor(),
                  [self = this->shared_from_this(), reply = std::move(reply)]() mutable {
                    self->Handshake([self, reply = std::move(reply)]() mutable {
                      self->WriteReply(std::move(reply), /*keep_alive=*/false);
                    });
                  });
  }

 private:
  // TLS first, under the read deadline, when the lobby serves TLS; then `next`.
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

  void DoRead() {
    parser_.emplace();
    parser_->body_limit(server_.options_.max_body_bytes);
    parser_->header_limit(server_.options_.max_header_bytes);
    beast::get_lowest_layer(stream_).expires_after(server_.options_.read_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&HttpSession::OnHeader, this->shared_from_this()));
  }

  // The header alone: a request without a valid token for an endpoint that needs one is
  // answered 401 now, and its body is never read (nor held); the rest read their bodies.
  void OnHeader(beast::error_code ec, std::size_t) {
    if (ec) return OnRead(ec, 0);
    const auto& header = parser_->get();
    const std::string path = PathOf(std::string(header.target()));
    auto refused = server_.service_.RefuseUnauthenticated(
        path, std::string(header[http::field::authorization]));
    if (refused) {
      version_ = header.version();
      // Keep the connection only if there is no body left unread on it.
      return WriteReply(std::move(*refused), parser_->is_done() && header.keep_alive());
    }
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&HttpSession::OnRead, this->shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec == http::error::body_limit) {
      return WriteReply(ProblemReply(ErrorCode::kPayloadTooLarge,
                                     "request bodies are limited to " +
                                         std::to_string(server_.options_.max_body_bytes) + " bytes",
                                     ""),
                        false);
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset) {
      return Close();
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return WriteReply(
          ProblemReply(ErrorCode::kInvalidArgument, "malformed HTTP request: " + ec.message(), ""),
          false);
    }
    if (ec) return Close();

    http::request<http::string_body> req = parser_->release();
    version_ = req.version();
    const bool keep_alive = req.keep_alive();
    const std::string target(req.target());
    const std::string path = PathOf(target);

    if (path == "/v1/events") return Subscribe(std::move(req), target);
    if (path == "/metrics") {
      return WriteReply({200, metrics::kTextContentType, server_.registry_.RenderText(), {}},
                        keep_alive);
    }

    HttpRequest request{std::string(req.method_string()),
                        target,
                        std::string(req[http::field::content_type]),
                        std::string(req[http::field::accept]),
                        std::string(req[http::field::authorization]),
                        std::move(req.body())};
    if (SettlementService::IsCheap(request)) {
      return server_.service_.Handle(request, nullptr, [this, keep_alive](HttpReply reply) {
        WriteReply(std::move(reply), keep_alive);
      });
    }
    if (server_.queued_.load() >= server_.options_.max_queued_requests) {
      return WriteReply(ProblemReply(ErrorCode::kUnavailable, "lobby is overloaded", path),
                        keep_alive);
    }
    ++server_.queued_;
    cancel_ = std::make_shared<Cancellation>();
    WatchForHangUp();
    net::post(server_.db_pool_, [self = this->shared_from_this(), request = std::move(request),
                                 cancel = cancel_, keep_alive]() mutable {
      --self->server_.queued_;
      self->server_.service_.Handle(request, cancel, [self, keep_alive](HttpReply reply) {
        net::post(self->stream_.get_executor(),
                  [self, reply = std::move(reply), keep_alive]() mutable {
                    self->StopWatching();
                    self->WriteReply(std::move(reply), keep_alive);
                  });
      });
    });
  }

  // While a request is on the DB workers, watches the socket: a client that hangs up cancels its
  // request, so an attempt nobody waits for neither starts nor holds a worker. Readable with
  // nothing to read is the hang-up; readable with data (a pipelined request, a TLS record) ends
  // the watch, as the connection is alive.
  void WatchForHangUp() {
    watching_ = true;
    beast::get_lowest_layer(stream_).socket().async_wait(
        tcp::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
          if (ec || !self->watching_) return;
          auto& socket = beast::get_lowest_layer(self->stream_).socket();
          char byte;
          const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n > 0) return;  // data: alive
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return self->WatchForHangUp();
          }
          self->watching_ = false;
          // EOF or a reset: nobody is waiting for the answer. Cancelling a statement connects
          // to the database server, which may be slow or gone: on the cancel thread, never here.
          net::post(self->server_.canceller_, [cancel = self->cancel_] { cancel->Cancel(); });
        });
  }

  void StopWatching() {
    if (!watching_) return;
    watching_ = false;
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().cancel(ignored);
  }

  void Subscribe(http::request<http::string_body> req, const std::string& target) {
    if (!websocket::is_upgrade(req)) {
      return WriteReply(
          ProblemReply(ErrorCode::kInvalidArgument,
                       "/v1/events is a WebSocket: connect with an upgrade", "/v1/events"),
          false);
    }
    const auto caller = server_.service_.Authenticate(std::string(req[http::field::authorization]));
    if (!caller) {
      return WriteReply(ProblemReply(ErrorCode::kUnauthenticated,
                                     "a valid bearer token is required", "/v1/events"),
                        false);
    }
    auto after = SettlementService::ParseEventsAfter(target);
    if (!after.ok()) {
      return WriteReply(
          ProblemReply(ErrorCode::kInvalidArgument, after.status().message(), "/v1/events"), false);
    }
    if (++server_.subscribers_ > server_.options_.max_subscribers) {
      --server_.subscribers_;
      return WriteReply(
          ProblemReply(ErrorCode::kUnavailable, "too many event subscribers on this lobby instance",
                       "/v1/events"),
          false);
    }
    // The admin token sees every node's events; a node's token only its own.
    std::optional<std::string> scope;
    if (!caller->admin) scope = caller->node_id;
    std::make_shared<EventsSession<Stream>>(std::move(stream_), server_, *after, std::move(scope))
        ->Run(std::move(req));
  }

  void WriteReply(HttpReply reply, bool keep_alive) {
    server_.CountReply(reply.status);
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), version_ ? version_ : kHttp11);
    res->set(http::field::server, "verdict-lobby");
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
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ignored);
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
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  Stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = kHttp11;
  std::shared_ptr<Cancellation> cancel_;  // of the request on the DB workers, if any
  bool watching_ = false;
  std::array<char, kLingerReadBytes> drain_;
};

void HttpServer::Impl::DoAccept() {
  acceptor_.async_accept(net::make_strand(ioc_),
                         beast::bind_front_handler(&HttpServer::Impl::OnAccept, this));
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of file descriptors or memory, say: the connection stays in the backlog and an
    // accept at once would fail the same way, spinning an I/O thread. Pause, log once a pause.
    spdlog::warn("accept failed: {}; accepting again in {} ms", ec.message(),
                 kAcceptRetryPause.count());
    accept_pause_.expires_after(kAcceptRetryPause);
    accept_pause_.async_wait([this](beast::error_code waited) {
      if (!waited) DoAccept();
    });
    return;
  }
  auto start = [this](auto session) {
    if (live_.load() > options_.max_connections) {
      session->Refuse(ProblemReply(ErrorCode::kUnavailable, "too many open connections", ""));
    } else {
      session->Run();
    }
  };
  if (tls_) {
    start(std::make_shared<HttpSession<beast::ssl_stream<beast::tcp_stream>>>(
        *this, std::move(socket), *tls_));
  } else {
    start(std::make_shared<HttpSession<beast::tcp_stream>>(*this, std::move(socket)));
  }
  DoAccept();
}

HttpServer::HttpServer(ServerOptions options, SettlementService& service, EventHub& hub,
                       metrics::Registry& registry)
    : impl_(std::make_unique<Impl>(std::move(options), service, hub, registry)) {}

HttpServer::~HttpServer() { Stop(); }

Result<uint16_t> HttpServer::Start() { return impl_->Start(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace verdict::lobby
