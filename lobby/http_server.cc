#include "lobby/http_server.h"

#include <atomic>
#include <deque>
#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <spdlog/spdlog.h>

#include "server/http_server.h"
#include "server/problem.h"

namespace verdict::lobby {
namespace {

namespace net = boost::asio;

// WebSocket close codes (RFC 6455) the event feed uses: 1013 (try again later) when the
// subscriber may resume where it was, and one of the application's own (4000-4999) when the feed
// went back in time under it, so that its cursor must be judged again before it trusts the feed
// (4409, after the 409 it may then get: CURSOR_AHEAD or EPOCH_CHANGED).
constexpr uint16_t kCloseTryAgainLater = 1013;
constexpr uint16_t kCloseFeedRewound = 4409;
// Subscribers send nothing the lobby needs; anything large is an error that closes them.
constexpr size_t kMaxClientMessageBytes = 1024;

}  // namespace

class HttpServer::Impl final : public server::HttpHandler {
 public:
  Impl(ServerOptions options, SettlementService& service, EventHub& hub,
       metrics::Registry& registry)
      : options_(std::move(options)), service_(service), hub_(hub), db_pool_(options_.db_threads) {
    registry.AddGauge("verdict_lobby_queued_requests",
                      "Requests waiting for a DB worker to take them.",
                      [this] { return static_cast<double>(queued_.load()); });
    registry.AddGauge("verdict_lobby_event_subscribers", "Open /v1/events subscriptions.",
                      [this] { return static_cast<double>(subscribers_.load()); });
    registry.AddGauge("verdict_lobby_event_queued_bytes",
                      "Bytes of events queued for subscribers' sockets, all subscribers together.",
                      [this] { return static_cast<double>(event_queued_bytes_.load()); });
    server::HttpServerOptions http = options_.http;
    http.name = "verdict_lobby";
    server::ListenAddress address;
    address.host = options_.host;
    address.port = options_.port;
    http.listen = {address};
    core_ = std::make_unique<server::HttpServer>(std::move(http), *this, &registry);
  }

  Result<uint16_t> Start() {
    auto ports = core_->Start();
    if (!ports.ok()) return ports.status();
    return ports->front();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    core_->Stop();
    db_pool_.join();
    canceller_.join();
  }

  // The header alone: health, metrics, readiness and every refusal the header decides (an
  // unknown path, a missing token, a wrong method) are answered now, and their bodies are never
  // read (nor held); the rest read their bodies, up to their endpoint's limit.
  server::HeaderVerdict OnHeader(const server::RequestHead& head) override {
    return service_.Judge(head);
  }

  void OnRequest(const server::RequestHead& head, HttpRequest request,
                 std::shared_ptr<server::Exchange> exchange) override {
    if (head.path == "/v1/events") return Subscribe(head, request, std::move(exchange));
    if (queued_.load() >= options_.max_queued_requests) {
      return exchange->Reply(
          ProblemReply(ErrorCode::kUnavailable, "lobby is overloaded", head.path));
    }
    ++queued_;
    // A client that hangs up cancels its request, so an attempt nobody waits for neither starts
    // nor holds a worker. Cancelling a statement connects to the database server, which may be
    // slow or gone: on the cancel thread, never on an I/O thread.
    auto cancel = std::make_shared<Cancellation>();
    exchange->OnHangUp([this, cancel] { net::post(canceller_, [cancel] { cancel->Cancel(); }); });
    net::post(db_pool_, [this, request = std::move(request), cancel, exchange]() mutable {
      --queued_;
      service_.Handle(request, cancel,
                      [exchange](HttpReply reply) { exchange->Reply(std::move(reply)); });
    });
  }

  void Subscribe(const server::RequestHead& head, const HttpRequest& request,
                 std::shared_ptr<server::Exchange> exchange);

  const ServerOptions options_;
  SettlementService& service_;
  EventHub& hub_;
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> subscribers_{0};
  std::atomic<int64_t> event_queued_bytes_{0};

 private:
  std::atomic<bool> stopped_{false};
  net::thread_pool db_pool_;
  // Cancels the statements of requests whose clients hung up (libpq's cancel blocks while it
  // reaches the server). One thread: a cancel is best effort, and rare.
  net::thread_pool canceller_{1};
  // Declared last: stopped first, and destroyed before the pools its sessions post to.
  std::unique_ptr<server::HttpServer> core_;
};

namespace {

// One /v1/events subscriber. It follows the feed with its own cursor: the last place in the feed
// it has queued or skipped (events of other nodes are skipped for a node's token). Behind the
// hub, it pages the feed from the database, a page at a time and only while its queue is under
// half its byte budget, so a history of any length costs one page of memory. Once a page comes
// back short it is live: it takes the hub's pages, and if it ever finds a page that starts past
// its cursor (it missed one while paging), it pages again. A live subscriber whose queue grows
// past the budget is closed with 1013 and resumes with ?after=. One that finds the feed gone
// back in time (the hub tells it, or a page's head is below what was read before) is closed
// with 4409, to be judged again. All state lives on its connection's strand.
class EventsSession final : public EventSubscriber,
                            public server::WebSocketSession,
                            public std::enable_shared_from_this<EventsSession> {
 public:
  EventsSession(std::shared_ptr<server::WebSocket> ws, HttpServer::Impl& server, int64_t after,
                std::optional<std::string> node_id, std::string epoch)
      : ws_(std::move(ws)),
        server_(server),
        cursor_(after),
        node_id_(std::move(node_id)),
        epoch_(std::move(epoch)) {}
  ~EventsSession() override {
    --server_.subscribers_;
    server_.event_queued_bytes_ -= queued_bytes_;
  }

  void OnOpen() override {
    server_.hub_.Subscribe(weak_from_this());
    FetchIfRoom();
  }

  void OnGone() override { closing_ = true; }

  void Deliver(std::shared_ptr<const FeedPage> page) override {
    ws_->Post([self = shared_from_this(), page = std::move(page)] { self->OnLivePage(*page); });
  }

  void FeedRewound(std::string_view why) override {
    ws_->Post([self = shared_from_this(), why = std::string(why)] {
      self->CloseWith(kCloseFeedRewound, why);
    });
  }

 private:
  // A message queued for the socket: one event as the client sees it.
  struct Message {
    int64_t seq;
    std::string text;
  };

  // Catching up: reads the next page if the queue has drained enough and none is on its way.
  void FetchIfRoom() {
    if (closing_ || live_ || fetching_) return;
    if (queued_bytes_ > server_.options_.subscriber_buffer_bytes / 2) return;
    fetching_ = true;
    // The hub read the feed to its head before this session saw it, so the page, read later,
    // has a head at least as high unless the feed went back in time. Without this check a
    // session would read the database in a loop (the head it waits for to go live is behind it)
    // until the hub noticed.
    const int64_t hub_head = server_.hub_.head();
    server_.hub_.FetchPage(cursor_, node_id_, server_.options_.catch_up_page_events,
                           [self = shared_from_this(), hub_head](Result<FeedPage> page) {
                             self->ws_->Post([self, hub_head, page = std::move(page)]() mutable {
                               self->OnCatchUpPage(std::move(page), hub_head);
                             });
                           });
  }

  void OnCatchUpPage(Result<FeedPage> page, int64_t hub_head) {
    fetching_ = false;
    if (closing_) return;
    if (!page.ok()) {
      LogLimited(*spdlog::default_logger(), server_.hub_.warnings(), spdlog::level::warn,
                 "events: catch-up failed: {}", page.status().ToString());
      return CloseWith(kCloseTryAgainLater,
                       "the event feed is unavailable; reconnect with ?after=");
    }
    if (!Continues(*page, hub_head)) return;
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
    if (!Continues(page, cursor_)) return;
    for (const SettlementEvent& e : page.events) {
      if (e.seq > cursor_ && (!node_id_ || e.node_id == *node_id_)) Queue(e);
    }
    cursor_ = std::max(cursor_, page.last);
    if (queued_bytes_ > server_.options_.subscriber_buffer_bytes) {
      CloseWith(kCloseTryAgainLater, "too slow: more than " +
                                         std::to_string(server_.options_.subscriber_buffer_bytes) +
                                         " bytes behind; reconnect with ?after=");
    }
  }

  // Whether `page` continues this subscriber's feed: from its epoch, with a head no lower than
  // `read_to` (how far the feed was known to reach before the page was read) or its cursor, and
  // with nothing after its cursor trimmed away. If not, the subscriber is closed rather than
  // given a feed with a hole or with events it may have had under the same numbers: reconnecting
  // with ?after= its cursor gets the refusal that says where the feed stands now.
  bool Continues(const FeedPage& page, int64_t read_to) {
    if (!page.epoch.empty() && page.epoch != epoch_) {
      CloseWith(kCloseFeedRewound, std::string(kFeedNewEpoch));
      return false;
    }
    if (page.head < std::max(read_to, cursor_)) {
      CloseWith(kCloseFeedRewound, std::string(kFeedWentBack));
      return false;
    }
    if (page.trimmed_through > cursor_) {
      CloseWith(kCloseTryAgainLater,
                "retention dropped events after your cursor; reconnect with ?after= to learn more");
      return false;
    }
    return true;
  }

  void Queue(const SettlementEvent& e) {
    // The event goes out as the database stored it (json text), not parsed and printed again
    // through protobuf's JSON mapping, which costs more per event than the feed does in all.
    Message m{e.seq, "{\"event_id\":\"" + std::to_string(e.seq) + "\",\"epoch\":\"" + epoch_ +
                         "\",\"event\":" + e.payload_json + "}"};
    queued_bytes_ += m.text.size();
    server_.event_queued_bytes_ += m.text.size();
    queue_.push_back(std::move(m));
    if (!writing_) DoWrite();
  }

  void DoWrite() {
    writing_ = true;
    ws_->Write(queue_.front().text, [self = shared_from_this()](bool ok) { self->OnWritten(ok); });
  }

  void OnWritten(bool ok) {
    writing_ = false;
    const size_t bytes = queue_.front().text.size();
    queued_bytes_ -= bytes;
    server_.event_queued_bytes_ -= bytes;
    queue_.pop_front();
    if (!ok) {
      closing_ = true;  // the client is gone; nothing more to send
      return;
    }
    if (close_) return DoClose();
    if (!queue_.empty()) DoWrite();
    FetchIfRoom();
  }

  // Closes cleanly: after the write in progress, if any (a WebSocket has one write at a time).
  void CloseWith(uint16_t code, const std::string& reason) {
    if (closing_) return;
    closing_ = true;
    close_ = {code, reason};
    if (!writing_) DoClose();
  }

  void DoClose() {
    server_.event_queued_bytes_ -= queued_bytes_;
    queued_bytes_ = 0;
    queue_.clear();
    ws_->Close(close_->first, close_->second);
  }

  std::shared_ptr<server::WebSocket> ws_;
  HttpServer::Impl& server_;
  int64_t cursor_;
  const std::optional<std::string> node_id_;  // a node's token sees only its node's events
  const std::string epoch_;                   // the feed's, when the subscription was accepted
  bool live_ = false;
  bool fetching_ = false;
  bool writing_ = false;
  bool closing_ = false;
  std::optional<std::pair<uint16_t, std::string>> close_;
  std::deque<Message> queue_;
  size_t queued_bytes_ = 0;
};

}  // namespace

void HttpServer::Impl::Subscribe(const server::RequestHead& head, const HttpRequest& request,
                                 std::shared_ptr<server::Exchange> exchange) {
  const std::string path = "/v1/events";
  if (!head.upgrade) {
    return exchange->Reply(ProblemReply(
        ErrorCode::kInvalidArgument, "/v1/events is a WebSocket: connect with an upgrade", path));
  }
  const auto caller = service_.Authenticate(request.authorization);
  if (!caller) {
    return exchange->Reply(
        ProblemReply(ErrorCode::kUnauthenticated, "a valid bearer token is required", path));
  }
  auto after = SettlementService::ParseEventsAfter(request.target);
  auto epoch = SettlementService::ParseEventsEpoch(request.target);
  if (!after.ok() || !epoch.ok()) {
    return exchange->Reply(ProblemReply(ErrorCode::kInvalidArgument,
                                        (after.ok() ? epoch.status() : after.status()).message(),
                                        path));
  }
  if (++subscribers_ > options_.max_subscribers) {
    --subscribers_;
    return exchange->Reply(ProblemReply(ErrorCode::kUnavailable,
                                        "too many event subscribers on this lobby instance", path));
  }
  // The admin token sees every node's events; a node's token only its own. The session, once
  // made, gives the subscriber count back when it ends; an upgrade that fails before gives it
  // back here.
  std::optional<std::string> scope;
  if (!caller->admin) scope = caller->node_id;
  struct Slot {
    std::atomic<size_t>& subscribers;
    bool taken = false;
    ~Slot() {
      if (!taken) --subscribers;
    }
  };
  auto slot = std::shared_ptr<Slot>(new Slot{subscribers_});
  // The cursor is judged against the feed as the database has it now, before the upgrade: a
  // refused one gets its problem as a plain HTTP answer. A node's token is judged by the places
  // of its own events, so that neither the answer nor the problem tells how far other nodes'
  // events took the feed (sql/functions/verdict_feed_state.sql).
  hub_.FetchState(scope, [this, exchange, path, after = *after, epoch = *epoch, scope,
                          slot](Result<FeedState> state) {
    if (!state.ok()) {
      LogLimited(*spdlog::default_logger(), hub_.warnings(), spdlog::level::warn,
                 "events: cannot read the feed's state: {}", state.status().ToString());
      return exchange->Reply(
          ProblemReply(ErrorCode::kUnavailable, "the event feed is unavailable", path));
    }
    // Without ?after= the feed starts at the beginning of what it holds: every event after its
    // trim mark is there. An explicit cursor below the mark is refused (CURSOR_TRIMMED).
    const int64_t from = after.value_or(state->trimmed_through);
    if (auto refused = SettlementService::RefuseEventsCursor(*state, from, epoch, path)) {
      return exchange->Reply(std::move(*refused));
    }
    exchange->AcceptWebSocket(
        kMaxClientMessageBytes,
        [this, from, scope, slot, epoch = state->epoch](std::shared_ptr<server::WebSocket> ws) {
          slot->taken = true;
          return std::make_shared<EventsSession>(std::move(ws), *this, from, scope, epoch);
        });
  });
}

HttpServer::HttpServer(ServerOptions options, SettlementService& service, EventHub& hub,
                       metrics::Registry& registry)
    : impl_(std::make_unique<Impl>(std::move(options), service, hub, registry)) {}

HttpServer::~HttpServer() { Stop(); }

Result<uint16_t> HttpServer::Start() { return impl_->Start(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace verdict::lobby
