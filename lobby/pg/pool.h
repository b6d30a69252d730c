// Pool: the lobby's database workers' connections, and the number of workers itself: one
// connection per worker, so the HTTP server's DB threads and the settlement scheduler take their
// count from here (workers()). A connection found broken is dropped and opened again by the next
// caller, and so are the idle ones then: they lead to the same server, most likely gone (a
// failover), and each would otherwise fail one more request before it is replaced. Every new
// connection gets the session settings (pg/connection.h) and the pool's prepared statements.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/connection>

#include "common/mutex.h"
#include "common/status.h"
#include "lobby/pg/connection.h"
#include "lobby/pg/errors.h"

namespace verdict::lobby::pg {

struct PoolOptions {
  ConnectionOptions connection;
  // Connections, and so DB workers. Default: 8.
  int workers = 8;
  // How long a caller waits for a free connection before UNAVAILABLE. Default: 2 s.
  std::chrono::milliseconds acquire_timeout{2000};
  // Statements prepared on every connection: (name, SQL). Nothing is ever built by string
  // concatenation of input; arrays travel as array-literal parameters. Default: none.
  std::vector<std::pair<std::string, std::string>> statements;
};

class Pool {
 public:
  // INVALID_ARGUMENT for fewer than one worker.
  static Result<std::unique_ptr<Pool>> Open(PoolOptions options);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int workers() const { return options_.workers; }

  // One connection, for one caller at a time; back to the pool when the lease ends.
  class Lease {
   public:
    Lease(Pool* pool, std::unique_ptr<pqxx::connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {
      other.pool_ = nullptr;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_) pool_->Return(std::move(conn_));
    }
    pqxx::connection& conn() { return *conn_; }
    // After a failure: the connection is closed instead of reused (its state is unknown), and
    // when it was lost, so are the pool's idle ones.
    void Drop(const Failure& failure);
    // After a statement of many megabytes: the connection is closed instead of reused, and the
    // next caller opens another. libpq keeps a connection's buffers at the largest message they
    // ever held, for as long as the connection lives.
    void Retire() { conn_.reset(); }

   private:
    Pool* pool_;
    std::unique_ptr<pqxx::connection> conn_;
  };

  // A connection within the acquire timeout, else UNAVAILABLE; one that cannot be opened is
  // UNAVAILABLE too (logged).
  Result<Lease> Acquire();

  // Runs `body(lease)` on a leased connection and returns what it returns, translating a libpqxx
  // failure by the SQLSTATE table (pg/errors.h): logged, the connection dropped, and the Status
  // of StatusOf. `body` returns T or Result<T>.
  template <typename T, typename F>
  Result<T> Run(const char* what, F body) {
    auto lease = Acquire();
    if (!lease.ok()) return lease.status();
    try {
      return body(*lease);
    } catch (const std::exception& e) {
      const Failure failure = Classify(e, &lease->conn(), /*committing=*/false);
      Log(failure, what);
      lease->Drop(failure);
      return StatusOf(failure, what);
    }
  }

 private:
  explicit Pool(PoolOptions options);
  // A new connection with the session settings and the statements.
  Result<std::unique_ptr<pqxx::connection>> OpenConnection();
  void Return(std::unique_ptr<pqxx::connection> conn);
  void CloseIdle();

  const PoolOptions options_;
  Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<std::unique_ptr<pqxx::connection>> idle_ GUARDED_BY(mu_);
  int free_slots_ GUARDED_BY(mu_);
};

}  // namespace verdict::lobby::pg
