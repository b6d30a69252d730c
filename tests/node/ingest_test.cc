// The node's ingest endpoints, in process: a BattleNode listening on a Unix socket and on a
// loopback port with a token, posted to over real HTTP. Every answer code with the malformed
// inputs that earn it, the batch's order and its single fsync, readiness, and 503 (never a 2xx)
// while the outbox cannot write. Its lobby is unreachable, so what is stored stays stored.
#include "node/ingest.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "node/battle_node.h"
#include "proto/problem.h"
#include "proto/wire.h"
#include "server/http_client.h"
#include "tests/support/battle_node_peer.h"
#include "tests/support/failing_outbox.h"
#include "tests/support/http_client.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::node {
namespace {

using namespace std::chrono_literals;
using server::BlockingHttpClient;
using server::HttpReply;
using server::HttpRequest;
using server::ListenAddress;
using testing::MakeResult;
using testing::WaitUntil;

constexpr char kToken[] = "ingest-secret";
constexpr char kJson[] = "application/json";
constexpr char kProtobuf[] = "application/x-protobuf";

std::string Json(const google::protobuf::Message& m) {
  return wire::EncodeBody(m, wire::BodyFormat::kJson).value();
}

class IngestTest : public ::testing::Test {
 protected:
  void Start(std::function<void(NodeOptions&)> adjust = nullptr) {
    NodeOptions o;
    o.node_id = "node-a";
    o.outbox_dir = dir_.Sub("outbox");
    o.lobby_urls = {"http://127.0.0.1:1"};  // nobody: every result stays in the outbox
    o.token = "token-a";
    o.shards = 4;
    o.writer.retry_interval = 20ms;
    o.metrics_listen = "127.0.0.1:0";
    o.ingest.listen = {"unix:" + dir_.Sub("node.sock"), "127.0.0.1:0"};
    o.ingest.token = kToken;
    o.ingest.durable_wait = 1s;
    o.wrap_outbox = [this](std::unique_ptr<storage::Outbox> inner) {
      auto wrapped = std::make_unique<testing::FailingOutbox>(std::move(inner));
      failing_ = wrapped.get();
      return std::unique_ptr<storage::Outbox>(std::move(wrapped));
    };
    if (adjust) adjust(o);
    auto node = BattleNode::Start(o);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(node).value();
    socket_ = ListenAddress::Parse(o.ingest.listen[0]).value();
    tcp_ = ListenAddress::Parse("127.0.0.1:0").value();
    tcp_.port = node_->ingest_ports()[1];
  }

  HttpReply Post(const ListenAddress& to, const std::string& path, const std::string& body,
                 const std::string& content_type = kJson, const std::string& authorization = "",
                 const std::string& accept = "") {
    BlockingHttpClient client(to, 10s);
    auto reply = client.Call({"POST", path, content_type, accept, authorization, body});
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? *reply : HttpReply{0, "", "", {}};
  }
  HttpReply PostResult(const v1::BattleResult& r) { return Post(socket_, "/v1/results", Json(r)); }

  static v1::StoredResult Stored(const HttpReply& reply) {
    v1::StoredResult stored;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(reply.body, wire::BodyFormat::kJson, &stored, &error))
        << error << ": " << reply.body;
    return stored;
  }
  static std::string CodeOf(const HttpReply& reply) {
    EXPECT_EQ(reply.content_type, "application/problem+json") << reply.body;
    auto problem = wire::ParseProblem(reply.body, reply.content_type);
    return problem ? problem->code() : "(no problem)";
  }
  std::string Header(const HttpReply& reply, const std::string& name) {
    for (const auto& [n, v] : reply.headers) {
      if (n == name) return v;
    }
    return "";
  }
  uint64_t Pending() { return BattleNodeTestPeer::outbox(*node_).Stats().value().records; }
  std::string Metrics() { return testing::HttpCall(node_->metrics_port(), "GET", "/metrics").body; }

  testing::TempDir dir_;
  testing::FailingOutbox* failing_ = nullptr;
  std::unique_ptr<BattleNode> node_;
  ListenAddress socket_, tcp_;
};

TEST_F(IngestTest, NewIs201IdenticalIs200AndBothAreInTheOutbox) {
  Start();
  v1::BattleResult r = MakeResult(7);
  r.clear_node_id();  // the node fills in its own
  const HttpReply first = PostResult(r);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.content_type, kJson);
  const v1::StoredResult stored = Stored(first);
  EXPECT_EQ(stored.room_id(), 7u);
  EXPECT_EQ(stored.shard(), storage::RoomShard(7, 4));
  EXPECT_GT(stored.sequence(), 0u);
  EXPECT_FALSE(stored.duplicate());
  EXPECT_EQ(Pending(), 1u) << "a 201 for a result that is not in the outbox";

  const HttpReply again = PostResult(MakeResult(7));  // the same, node_id spelled out
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(Stored(again).duplicate());
  EXPECT_EQ(Stored(again).sequence(), stored.sequence());
  EXPECT_EQ(Pending(), 1u);
  EXPECT_EQ(node_->stored(), 1u);
}

TEST_F(IngestTest, ProtobufInAndOutAndTcpWithTheToken) {
  Start();
  const std::string body = wire::EncodeBody(MakeResult(8), wire::BodyFormat::kProtobuf).value();
  const HttpReply reply =
      Post(tcp_, "/v1/results", body, kProtobuf, std::string("Bearer ") + kToken, kProtobuf);
  ASSERT_EQ(reply.status, 201) << reply.body;
  EXPECT_EQ(reply.content_type, kProtobuf);
  v1::StoredResult stored;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(reply.body, wire::BodyFormat::kProtobuf, &stored, &error)) << error;
  EXPECT_EQ(stored.room_id(), 8u);
}

TEST_F(IngestTest, TcpWithoutTheRightTokenIs401AndStoresNothing) {
  Start();
  const std::string body = Json(MakeResult(9));
  for (const std::string& authorization :
       {std::string(), std::string("Bearer wrong"), std::string(kToken),
        std::string("Bearer ") + kToken + "x"}) {
    const HttpReply reply = Post(tcp_, "/v1/results", body, kJson, authorization);
    EXPECT_EQ(reply.status, 401) << authorization;
    EXPECT_EQ(CodeOf(reply), "UNAUTHENTICATED");
  }
  EXPECT_EQ(Pending(), 0u);
  ASSERT_TRUE(node_->SetIngestToken("rotated").ok());
  EXPECT_EQ(Post(tcp_, "/v1/results", body, kJson, "Bearer rotated").status, 201);
}

TEST_F(IngestTest, MalformedResultsAre400AndNeverStored) {
  Start();
  std::vector<std::pair<std::string, std::string>> bodies = {
      {"not JSON", "{\"room_id\":"},
      {"unknown field", "{\"room_id\":\"1\",\"colour\":\"red\"}"},
      {"a JSON array", "[1,2]"},
  };
  v1::BattleResult room0 = MakeResult(1);
  room0.set_room_id(0);
  bodies.emplace_back("room 0", Json(room0));
  v1::BattleResult no_players = MakeResult(2);
  no_players.clear_players();
  bodies.emplace_back("no players", Json(no_players));
  v1::BattleResult team3 = MakeResult(3);
  team3.mutable_players(0)->set_team(3);
  bodies.emplace_back("team 3", Json(team3));
  v1::BattleResult one_team = MakeResult(4);
  for (auto& p : *one_team.mutable_players()) p.set_team(1);
  bodies.emplace_back("one team", Json(one_team));
  v1::BattleResult twice = MakeResult(5);
  twice.mutable_players(1)->set_player_id(twice.players(0).player_id());
  bodies.emplace_back("a player twice", Json(twice));
  v1::BattleResult unspecified = MakeResult(6);
  unspecified.set_outcome(v1::OUTCOME_UNSPECIFIED);
  bodies.emplace_back("no outcome", Json(unspecified));
  bodies.emplace_back("another node", Json(MakeResult(10, 1, "node-b")));
  v1::BattleResult long_reason = MakeResult(11);
  long_reason.set_abort_reason(std::string(5000, 'x'));
  bodies.emplace_back("a 5000-byte reason", Json(long_reason));
  for (const auto& [what, body] : bodies) {
    const HttpReply reply = Post(socket_, "/v1/results", body);
    EXPECT_EQ(reply.status, 400) << what << ": " << reply.body;
    EXPECT_EQ(CodeOf(reply), "INVALID_ARGUMENT") << what;
  }
  // Invalid UTF-8 in a string field, in protobuf's own encoding: field 6 (node_id), length 2.
  std::string invalid = wire::EncodeBody(MakeResult(12), wire::BodyFormat::kProtobuf).value();
  invalid += std::string("\x32\x02\xc3\x28", 4);
  const HttpReply utf8 = Post(socket_, "/v1/results", invalid, kProtobuf);
  EXPECT_EQ(utf8.status, 400) << utf8.body;
  EXPECT_EQ(Pending(), 0u);
  EXPECT_EQ(node_->stored(), 0u);
}

// A result naming no winner is not a draw (issue 49, item 1): the node stored it from JSON and
// delivered it as protobuf, where the lobby settled it as a draw. Refused here in both formats,
// alone and in a batch, as is a draw beside placements that name a winner (item 2); an
// explicit draw is stored.
TEST_F(IngestTest, AResultNamingNoWinnerOrTwoIs400InEveryFormat) {
  Start();
  v1::BattleResult unnamed = MakeResult(13);
  unnamed.clear_winner_team();
  const std::string json = Json(unnamed);
  ASSERT_EQ(json.find("winner_team"), std::string::npos) << json;
  ASSERT_NE(json.find("\"placements\":[]"), std::string::npos)
      << "the encoder writes an empty list";
  std::vector<std::pair<std::string, std::string>> bodies = {
      {"JSON, no winner", json},
      {"JSON, winner null", json.substr(0, json.size() - 1) + ",\"winner_team\":null}"},
  };
  for (const auto& [what, body] : bodies) {
    const HttpReply reply = Post(socket_, "/v1/results", body);
    EXPECT_EQ(reply.status, 400) << what << ": " << reply.body;
    EXPECT_NE(reply.body.find("winner_team"), std::string::npos) << what << ": " << reply.body;
  }
  const HttpReply proto =
      Post(socket_, "/v1/results", wire::EncodeBody(unnamed, wire::BodyFormat::kProtobuf).value(),
           kProtobuf);
  EXPECT_EQ(proto.status, 400) << proto.body;
  v1::BattleResult contradiction = MakeResult(14);
  contradiction.set_winner_team(0);
  for (auto [team, rank] : {std::pair{1u, 1u}, std::pair{2u, 2u}}) {
    v1::TeamPlacement* p = contradiction.add_placements();
    p->set_team(team);
    p->set_rank(rank);
  }
  EXPECT_EQ(PostResult(contradiction).status, 400);
  v1::SettlementBatch batch;
  *batch.add_results() = unnamed;
  *batch.add_results() = contradiction;
  v1::BattleResult draw = MakeResult(15);
  draw.set_winner_team(0);
  *batch.add_results() = draw;
  const HttpReply reply = Post(socket_, "/v1/results:batch", Json(batch));
  ASSERT_EQ(reply.status, 200) << reply.body;
  v1::StoredBatchReply items;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(reply.body, wire::BodyFormat::kJson, &items, &error)) << error;
  ASSERT_EQ(items.items_size(), 3);
  EXPECT_EQ(items.items(0).problem().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(items.items(1).problem().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(items.items(2).stored().room_id(), 15u);
  EXPECT_EQ(Pending(), 1u) << "only the explicit draw is stored";
}

TEST_F(IngestTest, WrongMediaTypeMethodAndPathAreRefusedFromTheHeader) {
  Start();
  const HttpReply text = Post(socket_, "/v1/results", Json(MakeResult(1)), "text/plain");
  EXPECT_EQ(text.status, 415);
  EXPECT_EQ(CodeOf(text), "UNSUPPORTED_MEDIA_TYPE");
  BlockingHttpClient client(socket_);
  auto get = client.Call({"GET", "/v1/results", "", "", "", ""});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(Post(socket_, "/v1/nope", "{}").status, 404);
  // The metrics listener serves no ingest.
  ListenAddress metrics = ListenAddress::Parse("127.0.0.1:0").value();
  metrics.port = node_->metrics_port();
  EXPECT_EQ(Post(metrics, "/v1/results", Json(MakeResult(1))).status, 404);
  EXPECT_EQ(Pending(), 0u);
}

// POST /v1/outbox:redrive: the ingest token on TCP, checked from the header (a Unix socket's mode
// is its access control, as for results); a malformed query is 400 saying what is wrong; with
// nothing set aside it moves nothing. A record moved back, delivered and settled:
// IngestEndToEndTest.ADeadLetteredResultRedrivenThroughTheRunningNodeSettles.
TEST_F(IngestTest, RedriveNeedsTheTokenAndAWellFormedQuery) {
  Start();
  const std::string all = "/v1/outbox:redrive?from=dead-letter&all=true";
  EXPECT_EQ(Post(tcp_, all, "", "").status, 401);
  EXPECT_EQ(Post(tcp_, all, "", "", "Bearer wrong").status, 401);
  const HttpReply moved = Post(tcp_, all, "", "", std::string("Bearer ") + kToken);
  EXPECT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(moved.body, R"({"moved":0,"skipped":0})");
  EXPECT_EQ(Post(socket_, "/v1/outbox:redrive?from=quarantine&room_id=7", "", "").status, 200);
  for (const std::string query :
       {"", "?from=dead-letter", "?from=limbo&all=true", "?from=dead-letter&room_id=0",
        "?from=dead-letter&room_id=12x", "?from=dead-letter&room_id=-1",
        "?from=dead-letter&room_id=18446744073709551616", "?from=dead-letter&room_id=1&all=true",
        "?from=dead-letter&all=yes", "?from=dead-letter&room_id=1&room_id=2",
        "?from=dead-letter&all=true&force=1"}) {
    const HttpReply bad = Post(socket_, "/v1/outbox:redrive" + query, "", "");
    EXPECT_EQ(bad.status, 400) << query;
    EXPECT_EQ(CodeOf(bad), "INVALID_ARGUMENT") << query;
  }
  BlockingHttpClient client(socket_);
  auto get = client.Call({"GET", all, "", "", "", ""});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->status, 405);
  ListenAddress metrics = ListenAddress::Parse("127.0.0.1:0").value();
  metrics.port = node_->metrics_port();
  EXPECT_EQ(Post(metrics, all, "", "").status, 404) << "the metrics listener redrives nothing";
}

// One redrive at a time: while one is held writing, another is answered 503 with Retry-After,
// and the first answers once it is done. A redrive the outbox cannot write (a full disk) is 503;
// one over a damaged side area, which a retry would meet again, is 500.
TEST_F(IngestTest, RedriveIs503WhileOneRunsOrTheDiskIsFullAnd500OverDamage) {
  Start();
  const std::string all = "/v1/outbox:redrive?from=dead-letter&all=true";
  failing_->set_hold_writes(true);
  std::thread first([&] {
    const HttpReply reply = Post(socket_, all, "", "");
    EXPECT_EQ(reply.status, 200) << reply.body;
  });
  ASSERT_TRUE(WaitUntil([&] { return failing_->held_writes() == 1; }));
  const HttpReply second = Post(socket_, all, "", "");
  EXPECT_EQ(second.status, 503) << second.body;
  EXPECT_EQ(CodeOf(second), "UNAVAILABLE");
  EXPECT_EQ(Header(second, "retry-after"), "1");
  failing_->set_hold_writes(false);
  first.join();
  failing_->set_fail_writes(true);
  const HttpReply full = Post(socket_, all, "", "");
  EXPECT_EQ(full.status, 503) << full.body;
  EXPECT_EQ(CodeOf(full), "UNAVAILABLE");
  failing_->set_fail_writes(false);
  failing_->set_damaged_side_areas(true);
  const HttpReply damaged = Post(socket_, all, "", "");
  EXPECT_EQ(damaged.status, 500) << damaged.body;
  EXPECT_EQ(CodeOf(damaged), "INTERNAL");
}

TEST_F(IngestTest, OversizeBodiesAndBatchesAre413AndNothingIsTruncated) {
  Start();
  const HttpReply big =
      Post(socket_, "/v1/results", std::string(wire::kMaxResultBodyBytes + 1, ' '));
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(CodeOf(big), "PAYLOAD_TOO_LARGE");
  EXPECT_NE(big.body.find(std::to_string(wire::kMaxResultBodyBytes)), std::string::npos)
      << big.body;
  const HttpReply big_batch =
      Post(socket_, "/v1/results:batch", std::string(wire::kMaxBatchBodyBytes + 1, ' '));
  EXPECT_EQ(big_batch.status, 413);
  // A batch body between the two limits is read (and here refused only as undecodable).
  const HttpReply between =
      Post(socket_, "/v1/results:batch", std::string(wire::kMaxResultBodyBytes * 2, ' '));
  EXPECT_EQ(between.status, 400) << between.body;
  v1::SettlementBatch many;
  for (uint64_t room = 1; room <= wire::kMaxBatchResults + 1; ++room) {
    *many.add_results() = MakeResult(room);
  }
  const HttpReply too_many = Post(socket_, "/v1/results:batch", Json(many));
  EXPECT_EQ(too_many.status, 413) << too_many.body;
  EXPECT_EQ(Pending(), 0u);
}

TEST_F(IngestTest, ADifferentResultOfAStoredRoomIs422) {
  Start();
  ASSERT_EQ(PostResult(MakeResult(20)).status, 201);
  v1::BattleResult other = MakeResult(20);  // same room and ended_at_ms, other winner
  other.set_winner_team(2);
  const HttpReply reply = PostResult(other);
  EXPECT_EQ(reply.status, 422) << reply.body;
  EXPECT_EQ(CodeOf(reply), "IDEMPOTENCY_MISMATCH");
  EXPECT_EQ(BattleNodeTestPeer::outbox(*node_)
                .ReadShard(storage::RoomShard(20, 4), 0, 10)
                .value()
                .front()
                .result.winner_team(),
            1u)
      << "the stored result was replaced";
}

TEST_F(IngestTest, ABatchAnswersEachItemInOrderAfterOneFsync) {
  Start();
  ASSERT_EQ(PostResult(MakeResult(31)).status, 201);
  v1::SettlementBatch batch;
  *batch.add_results() = MakeResult(30);  // new
  *batch.add_results() = MakeResult(31);  // already stored
  v1::BattleResult bad = MakeResult(32);
  bad.set_room_id(0);
  *batch.add_results() = bad;  // invalid
  v1::BattleResult conflict = MakeResult(31);
  conflict.set_winner_team(2);
  *batch.add_results() = conflict;  // a different result of a stored room
  for (uint64_t room = 40; room < 100; ++room) *batch.add_results() = MakeResult(room);
  const double syncs_before =
      testing::MetricValue(Metrics(), "verdict_node_outbox_write_seconds_count");
  const HttpReply reply = Post(socket_, "/v1/results:batch", Json(batch));
  ASSERT_EQ(reply.status, 200) << reply.body;
  v1::StoredBatchReply items;
  std::string error;
  ASSERT_TRUE(wire::DecodeBody(reply.body, wire::BodyFormat::kJson, &items, &error)) << error;
  ASSERT_EQ(items.items_size(), batch.results_size());
  EXPECT_EQ(items.items(0).stored().room_id(), 30u);
  EXPECT_FALSE(items.items(0).stored().duplicate());
  EXPECT_TRUE(items.items(1).stored().duplicate());
  EXPECT_EQ(items.items(2).problem().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(items.items(2).problem().status(), 400u);
  EXPECT_FALSE(items.items(2).problem().retryable());
  EXPECT_EQ(items.items(3).problem().code(), "IDEMPOTENCY_MISMATCH");
  for (int i = 4; i < items.items_size(); ++i) {
    EXPECT_EQ(items.items(i).stored().room_id(), static_cast<uint64_t>(36 + i)) << i;
  }
  EXPECT_EQ(Pending(), 62u);
  EXPECT_EQ(testing::MetricValue(Metrics(), "verdict_node_outbox_write_seconds_count"),
            syncs_before + 1)
      << "a batch took more than one fsync";
}

// Requests that arrive while the writer is busy ride its next group commit together. The writer
// is held in its first write, so the others queue behind it; released, it stores all of them
// with one more write and sync, not one each.
TEST_F(IngestTest, ConcurrentRequestsShareFsyncs) {
  Start();
  constexpr int kClients = 32;
  const double syncs_before =
      testing::MetricValue(Metrics(), "verdict_node_outbox_write_seconds_count");
  failing_->set_hold_writes(true);
  std::atomic<int> created{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      BlockingHttpClient client(socket_);
      auto reply = client.Call({"POST", "/v1/results", kJson, "", "", Json(MakeResult(1000 + c))});
      if (reply.ok() && reply->status == 201) ++created;
    });
  }
  ASSERT_TRUE(WaitUntil([&] {
    return testing::MetricValue(Metrics(), "verdict_node_ingest_pending_results") == kClients;
  }));
  failing_->set_hold_writes(false);
  for (auto& t : clients) t.join();
  EXPECT_EQ(created.load(), kClients);
  EXPECT_EQ(Pending(), static_cast<uint64_t>(kClients));
  const double syncs =
      testing::MetricValue(Metrics(), "verdict_node_outbox_write_seconds_count") - syncs_before;
  EXPECT_LE(syncs, 2) << "requests did not share the group commit";
}

TEST_F(IngestTest, AFailingOutboxIs503WithRetryAfterNever2xxAndReadyzSaysSo) {
  Start();
  failing_->set_fail_writes(true);
  const HttpReply waiting = PostResult(MakeResult(50));  // taken, not durable within 1 s
  EXPECT_EQ(waiting.status, 503) << waiting.body;
  EXPECT_EQ(CodeOf(waiting), "UNAVAILABLE");
  EXPECT_EQ(Header(waiting, "retry-after"), "1");
  // The writer is stalled now: new requests are refused at once, and the node is not ready.
  ASSERT_TRUE(WaitUntil([&] { return !node_->Ready().ok(); }));
  EXPECT_EQ(PostResult(MakeResult(51)).status, 503);
  BlockingHttpClient probe(socket_);
  EXPECT_EQ(probe.Call({"GET", "/readyz", "", "", "", ""})->status, 503);
  EXPECT_EQ(probe.Call({"GET", "/healthz", "", "", "", ""})->status, 503);
  failing_->set_fail_writes(false);
  // The held result becomes durable; its retry is a duplicate, the refused one is new.
  ASSERT_TRUE(WaitUntil([&] { return node_->Ready().ok(); }));
  EXPECT_EQ(PostResult(MakeResult(50)).status, 200);
  EXPECT_EQ(PostResult(MakeResult(51)).status, 201);
  EXPECT_EQ(probe.Call({"GET", "/readyz", "", "", "", ""})->status, 200);
}

// About a thousand idle connections to the metrics port (no token) and to the TCP ingest port
// (accepted before the token is read) made every request on the Unix socket, /readyz and POSTs
// alike, answer 503: one cap was shared by every listener. Each has its own now.
TEST_F(IngestTest, AFloodOnTheMetricsAndTcpPortsLeavesTheUnixSocketServed) {
  constexpr size_t kFlood = 1030;  // past one listener's cap of 1024
  // The flood's ends and the node's, in this process: raised as verdict-node raises its own.
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 4 * kFlood + 512) GTEST_SKIP() << "needs " << 4 * kFlood << " descriptors";
  const rlimit saved = limit;
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  struct Restore {
    rlimit saved;
    ~Restore() { ::setrlimit(RLIMIT_NOFILE, &saved); }
  } restore{saved};
  Start();
  const auto connect = [](uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  };
  std::vector<int> flood;
  for (const uint16_t port : {node_->metrics_port(), tcp_.port}) {
    for (size_t i = 0; i < kFlood; ++i) {
      flood.push_back(connect(port));
      ASSERT_GE(flood.back(), 0) << std::strerror(errno);
    }
  }
  // The node has taken every one of them: a request on each flooded port is refused.
  EXPECT_TRUE(WaitUntil(
      [&] { return testing::HttpCall(node_->metrics_port(), "GET", "/readyz").status == 503; }));
  BlockingHttpClient local(socket_, 10s);
  auto ready = local.Call({"GET", "/readyz", "", "", "", ""});
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_EQ(ready->status, 200) << "a flood on the TCP ports starved the Unix socket";
  EXPECT_EQ(PostResult(MakeResult(70)).status, 201);
  for (int fd : flood) ::close(fd);
}

TEST_F(IngestTest, DrainingRefusesResultsWith503) {
  Start();
  node_->BeginDrain();
  const HttpReply reply = PostResult(MakeResult(60));
  EXPECT_EQ(reply.status, 503);
  EXPECT_NE(reply.body.find("draining"), std::string::npos) << reply.body;
  BlockingHttpClient probe(socket_);
  auto ready = probe.Call({"GET", "/readyz", "", "", "", ""});
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(Pending(), 0u);
}

TEST_F(IngestTest, ATcpListenerWithoutATokenIsRefusedAtStart) {
  NodeOptions o;
  o.node_id = "node-a";
  o.outbox_dir = dir_.Sub("outbox2");
  o.lobby_urls = {"http://127.0.0.1:1"};
  o.token = "token-a";
  o.ingest.listen = {"127.0.0.1:0"};
  auto node = BattleNode::Start(o);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(node.status().message().find("--ingest-token"), std::string::npos);
}

TEST_F(IngestTest, DurabilityReplicatedIsRefusedWithoutReplicationAndUnknownValuesToo) {
  Start();
  EXPECT_EQ(CodeOf(Post(socket_, "/v1/results?durability=replicated", Json(MakeResult(8)))),
            "INVALID_ARGUMENT");
  EXPECT_EQ(CodeOf(Post(socket_, "/v1/results:batch?durability=replicated",
                        "{\"results\": [" + Json(MakeResult(8)) + "]}")),
            "INVALID_ARGUMENT");
  EXPECT_EQ(CodeOf(Post(socket_, "/v1/results?durability=fsynced", Json(MakeResult(8)))),
            "INVALID_ARGUMENT");
  EXPECT_EQ(Pending(), 0u) << "a refused request stored its result";
  EXPECT_EQ(Post(socket_, "/v1/results?durability=stored", Json(MakeResult(8))).status, 201);
}

// With etcd out of reach, ?durability=replicated waits its bounded time and answers 503 saying
// the result is not replicated; the result is stored all the same, and a plain post of it is 200.
TEST_F(IngestTest, DurabilityReplicatedAnswers503WhileEtcdIsAway) {
  Start([](NodeOptions& o) {
    o.replication.etcd.endpoints = {"127.0.0.1:1"};  // nobody
    o.replication.etcd.timeout = 200ms;
    o.ingest.replicated_wait = 500ms;
  });
  const HttpReply waited = Post(socket_, "/v1/results?durability=replicated", Json(MakeResult(9)));
  EXPECT_EQ(waited.status, 503) << waited.body;
  EXPECT_EQ(CodeOf(waited), "UNAVAILABLE");
  // "not replicated yet" if the wait ran out first, "stored, not replicated: etcd is unavailable"
  // once the node knows etcd is away (it then answers at once).
  EXPECT_NE(waited.body.find("not replicated"), std::string::npos) << waited.body;
  EXPECT_EQ(Pending(), 1u) << "the result is stored even though it is not replicated";
  EXPECT_EQ(PostResult(MakeResult(9)).status, 200);
  EXPECT_EQ(testing::MetricValue(Metrics(), "verdict_node_replication_unreplicated_records"), 1);
}

// An exchange that counts what it is answered, for the service on its own.
class CountingExchange final : public server::Exchange {
 public:
  void Reply(HttpReply reply) override {
    std::lock_guard lock(mu_);
    statuses_.push_back(reply.status);
  }
  void ReplyUnlessAnsweredWithin(std::chrono::milliseconds, HttpReply) override {}
  void OnHangUp(std::function<void()>) override {}
  void AcceptWebSocket(size_t, SessionMaker) override {}
  std::vector<int> statuses() {
    std::lock_guard lock(mu_);
    return statuses_;
  }

 private:
  std::mutex mu_;
  std::vector<int> statuses_;
};

// The test build's negative control answers before the writer does; a writer faster than the
// thread that offered (its completions run before Offer returns) must not make a second answer:
// both answering is the race that crashed the control under load (one answer rewritten while
// the other was being sent).
TEST(IngestServiceTest, TheNegativeControlAnswersOnceEvenWhenTheWriterIsFaster) {
  metrics::Registry registry;
  IngestHooks hooks;
  hooks.ready = [] { return Status::Ok(); };
  hooks.health = [] { return Status::Ok(); };
  hooks.metrics = [] { return std::string(); };
  hooks.offer = [](std::vector<v1::BattleResult> results,
                   std::vector<ResultChannel::Completion> done) {
    for (size_t i = 0; i < results.size(); ++i) done[i](storage::EnqueueResult{});
    return Status::Ok();
  };
  IngestOptions options;
  options.unsafe_answer_before_durable_for_test = true;
  IngestService service(options, "node-a", 4, 0, hooks, registry);
  server::RequestHead head{.method = "POST", .path = "/v1/results", .content_type = kJson};
  for (const char* path : {"/v1/results", "/v1/results:batch"}) {
    head.path = head.target = path;
    const std::string body = head.path == "/v1/results" ? Json(MakeResult(5))
                                                        : "{\"results\": [" + Json(MakeResult(6)) +
                                                              "," + Json(MakeResult(7)) + "]}";
    auto exchange = std::make_shared<CountingExchange>();
    service.OnRequest(head, {"POST", path, kJson, "", "", body}, exchange);
    EXPECT_EQ(exchange->statuses().size(), 1u) << path << " was answered more than once";
  }
}

// The API's description names the ?durability= values the node takes (the test above has it
// refuse any other), on both endpoints that take it.
TEST(IngestContractTest, TheOpenApiDescriptionNamesTheDurabilityParameter) {
  std::ifstream in(std::string(VERDICT_SOURCE_DIR) + "/api/openapi.yaml");
  const std::string spec((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(spec.empty());
  const auto block = [&](const std::string& start) {
    const size_t at = spec.find("\n" + start + "\n");
    if (at == std::string::npos) return std::string();
    const size_t end =
        spec.find("\n" + start.substr(0, start.find_first_not_of(' ')) + "/", at + 1);
    return spec.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  for (const char* path : {"  /v1/results:", "  /v1/results:batch:"}) {
    EXPECT_NE(block(path).find("$ref: '#/components/parameters/Durability'"), std::string::npos)
        << path << " does not name the durability parameter";
  }
  const size_t durability = spec.find("\n    Durability:\n");
  ASSERT_NE(durability, std::string::npos);
  const std::string parameter = spec.substr(durability, spec.find("\n\n", durability) - durability);
  EXPECT_NE(parameter.find("name: durability"), std::string::npos) << parameter;
  EXPECT_NE(parameter.find("in: query"), std::string::npos) << parameter;
  EXPECT_NE(parameter.find("enum: [stored, replicated]"), std::string::npos) << parameter;
}

}  // namespace
}  // namespace verdict::node
