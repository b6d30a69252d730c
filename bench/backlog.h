// What the drain benchmarks deliver to: results of allocated rooms, as a battle node of the
// benchmark would store them, and the lobby running in the benchmark's process. Shared by
// `verdict-bench drain` and `verdict-bench replicate`. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "lobby/allocator.h"
#include "lobby/event_hub.h"
#include "lobby/http_server.h"
#include "lobby/modes.h"
#include "lobby/pg_store.h"
#include "lobby/settlement_service.h"
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

// Allocates rooms base + 1 … base + count to kBacklogNode, then SettleDatabaseAsAfterOutage.
void AllocateRooms(const std::string& conninfo, uint64_t base, uint64_t count,
                   const BacklogShape& shape = {});

// Brings the database to where it would be after the outage the backlog stands for:
//   - vacuums and analyzes the tables the allocation wrote, as autovacuum would have (otherwise
//     the run pays for autovacuum starting under it, on statistics from before the rooms existed);
//   - vacuums and analyzes the settlement's tables that the runs before it wrote:
//       - analyzed, so that each design is planned on the database as it is (on none, or on
//         statistics from a smaller table, the old single-room settlement scans all of players
//         for each room);
//       - vacuumed, so that autovacuum, which visits the database once a minute, does not work
//         through the rows of the runs before it under this one (it did, in whichever run was
//         under way a minute after them);
//     Empty ones are left alone: PostgreSQL plans a table never analyzed (or vacuumed) as at
//     least ten pages, one analyzed empty as the page it has, and foreign-key checks cached at
//     the start of a run then scan it throughout;
//   - checkpoints, so that the run does not pay for the writes of the runs before it (a
//     checkpoint under load slows every commit's fsync).
// Every drain does this before it starts, whoever allocated its rooms.
void SettleDatabaseAsAfterOutage(const std::string& conninfo);

// Releases rooms first … last (verdict_release_room): their players are free for the next run.
void ReleaseRooms(const std::string& conninfo, uint64_t first, uint64_t last);

// Receipts of rooms base + 1 … base + count.
uint64_t ReceiptsBetween(const std::string& conninfo, uint64_t base, uint64_t count);

// The lobby, in this process, on a free port.
class InProcessLobby {
 public:
  InProcessLobby(const std::string& conninfo, int pool, double coalesce_ms)
      : hub_(FeedStore(conninfo), lobby::pg::ConnectionOptions{.conninfo = conninfo}, {},
             registry_) {
    lobby::SetLobbyAllocator();  // as verdict-lobby serve sets it
    lobby::ServiceOptions service_options;
    Open(conninfo, pool);
    service_options.settlement.coalesce_wait =
        std::chrono::microseconds(static_cast<int64_t>(coalesce_ms * 1000));
    service_options.node_tokens.push_back({kBacklogNode, kBacklogToken});
    service_ = std::make_unique<lobby::SettlementService>(lobby::ServiceStores::Of(*store_), &hub_,
                                                          service_options, registry_);
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
  // The feed's store, opened before the hub that reads it (as verdict-lobby serve does: a pool
  // of its own, 1 + page_threads connections).
  lobby::FeedStore& FeedStore(const std::string& conninfo) {
    lobby::StoreOptions options;
    options.connection.conninfo = conninfo;
    options.pool_size = 1 + lobby::EventHubOptions{}.page_threads;
    feed_store_ = std::move(lobby::PgFeedStore::Open(options)).value();
    return *feed_store_;
  }
  void Open(const std::string& conninfo, int pool) {
    lobby::StoreOptions options;
    options.connection.conninfo = conninfo;
    options.pool_size = pool;
    store_ = std::move(lobby::PgStore::Open(options)).value();
  }

  metrics::Registry registry_;
  std::unique_ptr<lobby::PgStore> store_;
  std::unique_ptr<lobby::PgFeedStore> feed_store_;
  // Numbers each commit's events into the feed, as a deployed lobby's does: that is work of every
  // settlement, and retention drops only events that have their place in the feed.
  lobby::EventHub hub_;
  std::unique_ptr<lobby::SettlementService> service_;
  std::unique_ptr<lobby::HttpServer> server_;
  uint16_t port_ = 0;
};

}  // namespace verdict::bench
