// What the drain benchmarks deliver to: results of allocated rooms, as a battle node of the
// benchmark would store them, and the lobby running in the benchmark's process. Shared by
// `verdict-bench drain` and `verdict-bench replicate`. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "lobby/event_hub.h"
#include "lobby/http_server.h"
#include "lobby/modes.h"
#include "lobby/settlement_service.h"
#include "lobby/settlement_store.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::bench {

// The node the benchmarks' results come from, and its token at the in-process lobby.
inline constexpr char kBacklogNode[] = "bench-node";
inline constexpr char kBacklogToken[] = "bench-token";

// The rooms of a backlog: `teams` teams of `size` players, in `mode`. The default is a 5v5 of
// the mode "default" (an Elo).
struct BacklogShape {
  std::string mode = "default";
  uint32_t teams = 2;
  uint32_t size = 5;
  uint32_t seats() const { return teams * size; }
};

// Room `base + slot` seats players slot * S + 1 … + S (S seats; team 1 the first `size`, team 2
// the next, …). Every run reuses the same players: they are free again once the previous run has
// drained. Team 1 wins; with more than two teams they place in team order (placements).
v1::BattleResult ResultFor(uint64_t base, uint64_t slot, const BacklogShape& shape = {});

// Allocates rooms base + 1 … base + count to kBacklogNode, then brings the database to where it
// would be after the outage the backlog stands for (drain.cc says how).
void AllocateRooms(const std::string& conninfo, uint64_t base, uint64_t count,
                   const BacklogShape& shape = {});

// Receipts of rooms base + 1 … base + count.
uint64_t ReceiptsBetween(const std::string& conninfo, uint64_t base, uint64_t count);

// The lobby, in this process, on a free port.
class InProcessLobby {
 public:
  InProcessLobby(const std::string& conninfo, int pool, double coalesce_ms)
      : hub_(Store(conninfo, pool), lobby::pg::ConnectionOptions{.conninfo = conninfo}, {},
             registry_) {
    lobby::ServiceOptions service_options;
    service_options.coalesce_wait =
        std::chrono::microseconds(static_cast<int64_t>(coalesce_ms * 1000));
    service_options.node_tokens.push_back({kBacklogNode, kBacklogToken});
    service_ =
        std::make_unique<lobby::SettlementService>(*store_, &hub_, service_options, registry_);
    lobby::ServerOptions server_options;
    server_options.port = 0;
    server_options.db_threads = pool;
    server_ = std::make_unique<lobby::HttpServer>(server_options, *service_, hub_, registry_);
    auto port = server_->Start();
    port_ = port.ok() ? *port : 0;
    hub_.Start();
  }
  // In the lobby's order: the server first, then the hub, while the server still exists.
  ~InProcessLobby() {
    server_->Stop();
    hub_.Stop();
  }
  uint16_t port() const { return port_; }
  // Declares `mode` (as PUT /v1/modes/{mode} would, every parameter left out defaulted).
  Status Declare(const v1::Mode& mode) {
    auto complete = lobby::CompleteMode(mode.mode(), mode);
    if (!complete.ok()) return complete.status();
    auto declared = store_->DeclareMode(*complete);
    if (!declared.ok()) return declared.status();
    return declared->status == lobby::DeclareStatus::kInUse
               ? FailedPreconditionError("mode " + mode.mode() + " is declared otherwise")
               : Status::Ok();
  }

 private:
  lobby::SettlementStore& Store(const std::string& conninfo, int pool) {
    lobby::StoreOptions options;
    options.connection.conninfo = conninfo;
    options.pool_size = pool;
    store_ = std::move(lobby::OpenSettlementStore(options)).value();
    return *store_;
  }

  metrics::Registry registry_;
  std::unique_ptr<lobby::SettlementStore> store_;
  // Numbers each commit's events into the feed, as a deployed lobby's does: that is work of every
  // settlement, and retention drops only events that have their place in the feed.
  lobby::EventHub hub_;
  std::unique_ptr<lobby::SettlementService> service_;
  std::unique_ptr<lobby::HttpServer> server_;
  uint16_t port_ = 0;
};

}  // namespace verdict::bench
