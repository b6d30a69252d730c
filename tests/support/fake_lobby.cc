#include "tests/support/fake_lobby.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>

namespace verdict::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr char kBatchPath[] = "/v1/settlements:batch";

// The receipt the fake writes for a result it accepts.
v1::SettlementReceipt ReceiptFor(const FakeRequest& request) {
  v1::SettlementReceipt receipt;
  receipt.set_room_id(request.result.room_id());
  receipt.set_match_id(request.result.room_id());
  receipt.set_outcome(request.result.outcome());
  receipt.set_duplicate(request.attempt > 1);
  return receipt;
}

}  // namespace

FakeReply ProblemReply(int status, const std::string& code, bool retryable) {
  FakeReply reply;
  reply.status = status;
  reply.content_type = "application/problem+json";
  reply.code = code;
  reply.retryable = retryable;
  reply.body = "{\"type\":\"urn:verdict:problem:" + code +
               "\",\"status\":" + std::to_string(status) + ",\"detail\":\"scripted " + code +
               "\",\"code\":\"" + code + "\",\"retryable\":" + (retryable ? "true" : "false") + "}";
  return reply;
}

std::string UnreachableUrl() {
  FakeLobby gone;
  return gone.url();  // its port is free again once `gone` is destroyed
}

FakeLobby::FakeLobby() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listen_fd_, 128);
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

FakeLobby::~FakeLobby() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  accept_thread_.join();
  ::close(listen_fd_);
  {
    std::lock_guard lock(mu_);
    for (int fd : connection_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
}

void FakeLobby::SetHandler(Handler handler) {
  std::lock_guard lock(mu_);
  handler_ = std::move(handler);
}

void FakeLobby::SetBatchHandler(BatchHandler handler) {
  std::lock_guard lock(mu_);
  batch_handler_ = std::move(handler);
}

std::vector<FakeRequest> FakeLobby::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::vector<v1::BattleResult> FakeLobby::accepted() const {
  std::lock_guard lock(mu_);
  return accepted_;
}

bool FakeLobby::WaitForRequests(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
}

bool FakeLobby::WaitForAccepted(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return accepted_.size() >= n; });
}

void FakeLobby::AcceptLoop() {
  while (!stopping_) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    connection_fds_.push_back(fd);
    ++connections_;
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeLobby::Serve(int fd) {
  net::io_context ioc;
  tcp::socket socket(ioc, tcp::v4(), fd);
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    beast::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) break;
    const int now_in_flight = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now_in_flight > seen && !max_in_flight_.compare_exchange_weak(seen, now_in_flight)) {
    }
    Handler handler;
    BatchHandler batch_handler;
    const std::vector<FakeRequest> requests =
        Record(std::string(req.target()), req.body(), std::string(req[http::field::authorization]),
               &handler, &batch_handler);
    changed_.notify_all();
    std::vector<bool> accepted(requests.size(), false);
    FakeReply reply;
    if (requests.front().batch == 0) {
      reply = handler ? handler(requests.front()) : FakeReply{};
      if (reply.status >= 200 && reply.status < 300) {
        accepted[0] = true;
        if (reply.body.empty()) reply.body = ReceiptFor(requests.front()).SerializeAsString();
      }
    } else {
      reply = AnswerBatch(requests, handler, batch_handler, &accepted);
    }
    if (reply.delay.count() > 0) std::this_thread::sleep_for(reply.delay);
    http::response<http::string_body> res(static_cast<http::status>(reply.status), 11);
    res.set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) res.set(name, value);
    res.keep_alive(req.keep_alive());
    res.body() = reply.body;
    res.prepare_payload();
    --in_flight_;
    {
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < requests.size(); ++i) {
        if (accepted[i]) accepted_.push_back(requests[i].result);
      }
    }
    http::write(socket, res, ec);
    changed_.notify_all();
    if (ec || reply.close_after_reply || !req.keep_alive()) break;
  }
  // Forget the descriptor before closing it, so the destructor never shuts down a number the
  // process has since reused for another socket.
  std::lock_guard lock(mu_);
  std::erase(connection_fds_, fd);
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

std::vector<FakeRequest> FakeLobby::Record(const std::string& target, const std::string& body,
                                           const std::string& authorization, Handler* handler,
                                           BatchHandler* batch_handler) {
  std::vector<FakeRequest> out;
  std::lock_guard lock(mu_);
  if (target == kBatchPath) {
    v1::SettlementBatch batch;
    const bool decoded = batch.ParseFromString(body);
    ++batches_;
    for (const auto& result : batch.results()) {
      FakeRequest r;
      r.result = result;
      r.decoded = decoded;
      r.batch = batches_;
      out.push_back(r);
    }
    if (out.empty()) {
      out.emplace_back();
      out.back().batch = batches_;
    }
  } else {
    FakeRequest r;
    r.decoded = r.result.ParseFromString(body);
    out.push_back(r);
  }
  for (auto& request : out) {
    request.authorization = authorization;
    for (const auto& earlier : requests_) {
      if (earlier.result.room_id() == request.result.room_id() &&
          earlier.result.ended_at_ms() == request.result.ended_at_ms()) {
        ++request.attempt;
      }
    }
    ++request.attempt;
    requests_.push_back(request);
  }
  *handler = handler_;
  *batch_handler = batch_handler_;
  return out;
}

FakeReply FakeLobby::AnswerBatch(const std::vector<FakeRequest>& requests, const Handler& handler,
                                 const BatchHandler& batch_handler, std::vector<bool>* accepted) {
  if (batch_handler) {
    if (std::optional<FakeReply> whole = batch_handler(requests)) return *whole;
  }
  v1::SettlementBatchReply answer;
  FakeReply out;
  for (size_t i = 0; i < requests.size(); ++i) {
    const FakeReply reply = handler ? handler(requests[i]) : FakeReply{};
    out.delay = std::max(out.delay, reply.delay);
    out.close_after_reply = out.close_after_reply || reply.close_after_reply;
    v1::SettlementItem* item = answer.add_items();
    if (reply.status >= 200 && reply.status < 300) {
      (*accepted)[i] = true;
      if (reply.body.empty()) {
        *item->mutable_receipt() = ReceiptFor(requests[i]);
      } else if (!item->mutable_receipt()->ParseFromString(reply.body)) {
        item->clear_receipt();
      }
    } else if (reply.status != 401 && reply.status != 403 &&
               reply.content_type == "application/problem+json") {
      v1::Problem* problem = item->mutable_problem();
      problem->set_code(reply.code);
      problem->set_status(reply.status);
      problem->set_retryable(reply.retryable);
      problem->set_detail("scripted " + reply.code);
    } else {
      std::fill(accepted->begin(), accepted->end(), false);
      return reply;  // about the whole request
    }
  }
  out.body = answer.SerializeAsString();
  return out;
}

}  // namespace verdict::testing
