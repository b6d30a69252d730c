#include "lobby/pg/pool.h"

namespace verdict::lobby::pg {

Result<std::unique_ptr<Pool>> Pool::Open(PoolOptions options) {
  if (options.workers < 1) return InvalidArgumentError("the database pool needs a connection");
  return std::unique_ptr<Pool>(new Pool(std::move(options)));
}

Pool::Pool(PoolOptions options) : options_(std::move(options)), free_slots_(options_.workers) {}

void Pool::Lease::Drop(const Failure& failure) {
  conn_.reset();
  if (failure.connection_lost && pool_) pool_->CloseIdle();
}

Result<Pool::Lease> Pool::Acquire() {
  std::unique_ptr<pqxx::connection> conn;
  {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + options_.acquire_timeout;
    while (free_slots_ <= 0) {
      if (cv_.WaitUntil(deadline)) break;
    }
    if (free_slots_ <= 0) {
      return UnavailableError("database pool exhausted: no connection free within " +
                              std::to_string(options_.acquire_timeout.count()) + " ms");
    }
    --free_slots_;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!conn || !conn->is_open()) {
    auto opened = OpenConnection();
    if (!opened.ok()) {
      Return(nullptr);
      return opened.status();
    }
    conn = std::move(*opened);
  }
  return Lease(this, std::move(conn));
}

Result<std::unique_ptr<pqxx::connection>> Pool::OpenConnection() {
  auto conn = Connect(options_.connection);
  if (!conn.ok()) return conn.status();
  try {
    for (const auto& [name, text] : options_.statements) (*conn)->prepare(name, text);
  } catch (const std::exception& e) {
    const Failure failure = Classify(e, conn->get(), /*committing=*/false);
    Log(failure, "preparing the lobby's statements");
    return StatusOf(failure, "preparing the lobby's statements");
  }
  return conn;
}

void Pool::CloseIdle() {
  std::vector<std::unique_ptr<pqxx::connection>> closing;
  {
    MutexLock lock(&mu_);
    closing.swap(idle_);
  }
}

void Pool::Return(std::unique_ptr<pqxx::connection> conn) {
  {
    MutexLock lock(&mu_);
    if (conn) idle_.push_back(std::move(conn));
    ++free_slots_;
  }
  cv_.Signal();
}

}  // namespace verdict::lobby::pg
