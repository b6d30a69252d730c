// The replicated tier's parts against a real one-member etcd (Debian's etcd-server) and real
// RocksDB outboxes: the gateway client's answers (create-if-absent, conflicts, pages, leases,
// failover past a dead endpoint, NOSPACE), the key layout, and the replicator's rebuild, release
// and read-back paths.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <set>

#include "common/clock.h"
#include "proto/wire.h"
#include "replication/etcd_client.h"
#include "replication/keys.h"
#include "replication/releasing_outbox.h"
#include "replication/replicator.h"
#include "storage/outbox.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/process.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::replication {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::MakeResult;
using testing::TempDir;
using testing::WaitUntil;

TEST(ReplicaKeysTest, NodeIdsAreEscapedAndReadBack) {
  EXPECT_EQ(ResultKey("verdict/", "battle-01", 42, 1700),
            "verdict/results/battle-01/00000000000000000042/1700");
  const std::string odd = "a/b c%é";
  const std::string key = ResultKey("p/", odd, 7, -1);
  EXPECT_EQ(key.find("a/b"), std::string::npos) << key;
  EXPECT_EQ(NodeOfResultKey("p/", key), odd);
  EXPECT_EQ(NodeOfLivenessKey("p/", NodeLivenessKey("p/", odd)), odd);
  EXPECT_EQ(NodeOfResultKey("p/", "p/results/%zz/1/2"), std::nullopt);
  EXPECT_EQ(NodeOfResultKey("q/", key), std::nullopt);
  // One node's range never holds another's keys, even one whose id it prefixes.
  const std::string a = NodeResultsPrefix("p/", "a"), ab = NodeResultsPrefix("p/", "ab");
  EXPECT_FALSE(ab >= a && ab < PrefixEnd(a));
  EXPECT_EQ(PrefixEnd("ab"), "ac");
}

TEST(ReplicaKeysTest, EtcdUrlsParse) {
  EtcdOptions o;
  ASSERT_TRUE(ParseEtcdUrl("etcd://127.0.0.1:2379,[::1]:2380", &o).ok());
  EXPECT_EQ(o.endpoints, (std::vector<std::string>{"127.0.0.1:2379", "[::1]:2380"}));
  for (const char* bad : {"http://a:1", "etcd://", "etcd://a", "etcd://a:1,,b:2", "etcd://a:0"}) {
    EXPECT_EQ(ParseEtcdUrl(bad, &o).code(), StatusCode::kInvalidArgument) << bad;
  }
}

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VERDICT_NEED_ETCD();
    etcd_ = EtcdCluster::Start(dir_.path(), 1);
    ASSERT_NE(etcd_, nullptr);
    ASSERT_TRUE(ParseEtcdUrl(etcd_->url(), &options_).ok());
  }

  std::unique_ptr<EtcdClient> Client(const EtcdOptions& options) {
    auto client = EtcdClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  TempDir dir_;
  std::unique_ptr<EtcdCluster> etcd_;
  EtcdOptions options_;
};

TEST_F(EtcdTest, CreateIfAbsentTellsCreatedPresentAndConflict) {
  auto client = Client(options_);
  std::vector<KeyValue> first = {{"k/1", "one", 0}, {"k/2", "two", 0}};
  auto created = client->CreateIfAbsent(first);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(*created,
            (std::vector<CreateOutcome>{CreateOutcome::kCreated, CreateOutcome::kCreated}));
  std::vector<KeyValue> again = {{"k/1", "one", 0}, {"k/2", "other", 0}, {"k/3", "three", 0}};
  auto outcomes = client->CreateIfAbsent(again);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  EXPECT_EQ(*outcomes,
            (std::vector<CreateOutcome>{CreateOutcome::kPresent, CreateOutcome::kConflict,
                                        CreateOutcome::kCreated}));
  auto page = client->Range("k/", PrefixEnd("k/"), 2, false);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->kvs.size(), 2u);
  EXPECT_TRUE(page->more);
  EXPECT_EQ(page->kvs[1].value, "two");  // the conflict changed nothing
  const std::vector<std::string> gone = {"k/1", "k/2", "k/absent"};
  ASSERT_TRUE(client->Delete(gone).ok());
  page = client->Range("k/", PrefixEnd("k/"), 0, true);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->kvs.size(), 1u);
  EXPECT_EQ(page->kvs[0].key, "k/3");
}

TEST_F(EtcdTest, ADeadEndpointIsSkippedAndNoneAnsweringIsUnavailable) {
  EtcdOptions o = options_;
  o.endpoints.insert(o.endpoints.begin(),
                     "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()));
  auto client = Client(o);
  const std::vector<KeyValue> kv = {{"x", "y", 0}};
  EXPECT_TRUE(client->CreateIfAbsent(kv).ok());
  EtcdOptions none;
  none.endpoints = {"127.0.0.1:" + std::to_string(testing::FreeLoopbackPort())};
  none.timeout = 1s;
  auto dead = Client(none);
  EXPECT_EQ(dead->CreateIfAbsent(kv).status().code(), StatusCode::kUnavailable);
}

TEST_F(EtcdTest, LeaseKeepsItsKeyAliveAndExpiresWithoutRenewal) {
  auto client = Client(options_);
  auto lease = client->GrantLease(2);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client->Put("alive", "1", *lease).ok());
  auto ttl = client->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(*ttl, 0);
  // Without renewal the key goes with the lease, and a renewal then finds it expired.
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto page = client->Range("alive", "", 0, true);
        return page.ok() && page->kvs.empty();
      },
      10s))
      << "the key outlived its lease";
  EXPECT_EQ(client->KeepAlive(*lease).value(), 0);
}

TEST_F(EtcdTest, OutOfQuotaIsResourceExhaustedAndDeletesStillWork) {
  // A second, tiny cluster: etcd raises NOSPACE past its quota.
  TempDir small_dir;
  etcd_.reset();
  auto small = EtcdCluster::Start(small_dir.path(), 1, {"--quota-backend-bytes", "1048576"});
  ASSERT_NE(small, nullptr);
  EtcdOptions o;
  ASSERT_TRUE(ParseEtcdUrl(small->url(), &o).ok());
  auto client = Client(o);
  const std::string value(64 * 1024, 'v');
  Status last;
  for (int i = 0; i < 64 && last.ok(); ++i) {
    const std::vector<KeyValue> kv = {{"big/" + std::to_string(i), value, 0}};
    last = client->CreateIfAbsent(kv).status();
  }
  EXPECT_EQ(last.code(), StatusCode::kResourceExhausted) << last.ToString();
  const std::vector<std::string> gone = {"big/0"};
  EXPECT_TRUE(client->Delete(gone).ok());
}

// Runs etcdctl (Debian's etcd-client) against `endpoint`; its exit code.
int Etcdctl(const std::string& endpoint, std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/etcdctl", "--endpoints", endpoint});
  return testing::RunCommand(args, {{"ETCDCTL_API", "3"}}).exit_code;
}

TEST_F(EtcdTest, WithAuthOnAUserAndPasswordGetAToken) {
  const std::string endpoint = options_.endpoints[0];
  ASSERT_EQ(Etcdctl(endpoint, {"user", "add", "root", "--new-user-password=secret"}), 0);
  ASSERT_EQ(Etcdctl(endpoint, {"auth", "enable"}), 0);
  const std::vector<KeyValue> kv = {{"auth/k", "v", 0}};
  auto anonymous = Client(options_);
  EXPECT_FALSE(anonymous->CreateIfAbsent(kv).ok()) << "auth is on: no user, no write";
  EtcdOptions with_user = options_;
  with_user.user = "root";
  with_user.password = "secret";
  auto client = Client(with_user);
  auto created = client->CreateIfAbsent(kv);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->front(), CreateOutcome::kCreated);
  with_user.password = "wrong";
  EXPECT_FALSE(Client(with_user)->CreateIfAbsent(kv).ok());
}

// A member that speaks TLS only and asks for client certificates: the client trusts the test's
// CA and presents a certificate it signed; without a certificate it is refused.
TEST_F(EtcdTest, TlsWithAClientCertificate) {
  const std::string d = dir_.Sub("tls");
  std::filesystem::create_directories(d);
  const auto openssl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/openssl");
    return testing::RunCommand(args).exit_code;
  };
  ASSERT_EQ(openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                     "/CN=verdict-test-ca", "-keyout", d + "/ca.key", "-out", d + "/ca.pem"}),
            0);
  std::ofstream(d + "/san.cnf") << "subjectAltName=IP:127.0.0.1\n";
  for (const std::string name : {"server", "client"}) {
    ASSERT_EQ(openssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout",
                       d + "/" + name + ".key", "-out", d + "/" + name + ".csr"}),
              0);
    ASSERT_EQ(openssl({"x509", "-req", "-in", d + "/" + name + ".csr", "-CA", d + "/ca.pem",
                       "-CAkey", d + "/ca.key", "-CAcreateserial", "-days", "1", "-extfile",
                       d + "/san.cnf", "-out", d + "/" + name + ".pem"}),
              0);
  }
  const uint16_t port = testing::FreeLoopbackPort(), peer = testing::FreeLoopbackPort();
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  auto member = testing::ChildProcess::Start({"/usr/bin/etcd",
                                              "--name",
                                              "tls",
                                              "--data-dir",
                                              d + "/data",
                                              "--listen-client-urls",
                                              url,
                                              "--advertise-client-urls",
                                              url,
                                              "--listen-peer-urls",
                                              "http://127.0.0.1:" + std::to_string(peer),
                                              "--initial-advertise-peer-urls",
                                              "http://127.0.0.1:" + std::to_string(peer),
                                              "--initial-cluster",
                                              "tls=http://127.0.0.1:" + std::to_string(peer),
                                              "--cert-file",
                                              d + "/server.pem",
                                              "--key-file",
                                              d + "/server.key",
                                              "--client-cert-auth",
                                              "--trusted-ca-file",
                                              d + "/ca.pem",
                                              "--log-level",
                                              "warn"},
                                             {}, d + "/etcd.log");
  ASSERT_NE(member, nullptr);
  EtcdOptions tls;
  tls.endpoints = {"127.0.0.1:" + std::to_string(port)};
  tls.ca_file = d + "/ca.pem";
  tls.cert_file = d + "/client.pem";
  tls.key_file = d + "/client.key";
  tls.timeout = 2s;
  auto client = Client(tls);
  const std::vector<KeyValue> kv = {{"tls/k", "v", 0}};
  ASSERT_TRUE(WaitUntil([&] { return client->CreateIfAbsent(kv).ok(); }, 30s))
      << client->CreateIfAbsent(kv).status().ToString();
  EtcdOptions no_cert = tls;
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  EXPECT_EQ(Client(no_cert)->CreateIfAbsent(kv).status().code(), StatusCode::kUnavailable);
  EtcdOptions plain = tls;
  plain.ca_file.clear();
  plain.cert_file.clear();
  plain.key_file.clear();
  EXPECT_FALSE(Client(plain)->CreateIfAbsent(kv).ok()) << "plain HTTP to a TLS member";
  member->Terminate();
}

// A replicator on a real outbox: stored records reach etcd, acked ones leave it, and copies
// found only in etcd at start go back into the outbox.
class ReplicatorTest : public EtcdTest {
 protected:
  void SetUp() override {
    EtcdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto outbox = storage::OpenOutbox(dir_.Sub("outbox"), {.shard_count = 4});
    ASSERT_TRUE(outbox.ok());
    outbox_ = ReleaseOnAck(std::move(outbox).value(), [this](const storage::OutboxRecord& r) {
      if (replicator_) replicator_->Released(r);
    });
    options_r_.etcd = options_;
    options_r_.retry_interval = 50ms;
  }

  void StartReplicator() {
    replicator_ = std::make_unique<Replicator>(
        *outbox_, dir_.Sub("outbox"), "node-a", options_r_, nullptr, nullptr, [] {}, &registry_);
    ASSERT_TRUE(replicator_->Start().ok());
  }

  // Replaces the cluster with a one-member etcd of a 1 MiB quota, filled until it raises its
  // NOSPACE alarm; returns the keys that fill it.
  std::vector<std::string> FillASmallEtcd() {
    etcd_.reset();
    std::filesystem::create_directories(dir_.Sub("small"));
    etcd_ = EtcdCluster::Start(dir_.Sub("small"), 1, {"--quota-backend-bytes", "1048576"});
    EXPECT_NE(etcd_, nullptr);
    if (!etcd_) return {};
    options_ = {};
    EXPECT_TRUE(ParseEtcdUrl(etcd_->url(), &options_).ok());
    options_r_.etcd = options_;
    auto client = Client(options_);
    const std::string junk(64 * 1024, 'j');
    std::vector<std::string> junk_keys;
    Status filled;
    for (int i = 0; i < 64 && filled.ok(); ++i) {
      junk_keys.push_back("junk/" + std::to_string(i));
      const std::vector<KeyValue> kv = {{junk_keys.back(), junk, 0}};
      filled = client->CreateIfAbsent(kv).status();
    }
    EXPECT_EQ(filled.code(), StatusCode::kResourceExhausted) << filled.ToString();
    return junk_keys;
  }

  // What an operator does about the alarm: delete, compact, defragment, disarm.
  void FreeSpaceAndDisarm(const std::vector<std::string>& junk_keys) {
    ASSERT_TRUE(Client(options_)->Delete(junk_keys).ok());
    const std::string endpoint = options_.endpoints[0];
    const testing::CommandResult revision = testing::RunCommand(
        {"/usr/bin/etcdctl", "--endpoints", endpoint, "get", "junk/0", "-w", "json"},
        {{"ETCDCTL_API", "3"}});
    const size_t at = revision.out.find("\"revision\":");
    ASSERT_NE(at, std::string::npos) << revision.out;
    const std::string rev = std::to_string(std::stoll(revision.out.substr(at + 11)));
    ASSERT_EQ(Etcdctl(endpoint, {"compact", rev}), 0);
    ASSERT_EQ(Etcdctl(endpoint, {"defrag"}), 0);
    ASSERT_EQ(Etcdctl(endpoint, {"alarm", "disarm"}), 0);
  }

  // Acks every record of the outbox, as the deliverers do after the lobby's receipt.
  size_t AckAll() {
    size_t acked = 0;
    for (uint32_t shard = 0; shard < 4; ++shard) {
      auto records = outbox_->ReadShard(shard, 0, 1000);
      EXPECT_TRUE(records.ok()) << records.status().ToString();
      if (!records.ok()) continue;
      for (const auto& r : *records) {
        EXPECT_TRUE(outbox_->Ack(r).ok());
        ++acked;
      }
    }
    return acked;
  }

  double Metric(const std::string& series) {
    const std::string text = "\n" + registry_.RenderText();
    const size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size() + 2));
  }

  // Waits for Await's answer about `results`.
  std::vector<Status> AwaitAnswer(const std::vector<v1::BattleResult>& results) {
    // Shared: an answer that comes after the wait gave up finds its promise alive.
    auto done = std::make_shared<std::promise<std::vector<Status>>>();
    replicator_->Await(results, [done](std::vector<Status> s) { done->set_value(s); });
    auto f = done->get_future();
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    return f.wait_for(0s) == std::future_status::ready ? f.get() : std::vector<Status>{};
  }

  // Nothing left to replicate, and nothing left to read back from the outbox (while it reads
  // back, a record held and replicated before may stand for one not held: the count is exact
  // again once the read-back ends).
  bool Idle() {
    const ReplicationStats s = replicator_->Stats();
    return s.unreplicated == 0 && !s.reading_back;
  }

  // Stores results the way the writer does, and tells the replicator.
  void Store(uint64_t first, uint64_t n) {
    std::vector<v1::BattleResult> batch;
    for (uint64_t room = first; room < first + n; ++room) batch.push_back(MakeResult(room));
    auto outcomes = outbox_->Enqueue(batch);
    ASSERT_TRUE(outcomes.ok());
    replicator_->Stored(batch, *outcomes);
  }

  size_t Copies() {
    auto client = Client(options_);
    const std::string prefix = NodeResultsPrefix("verdict/", "node-a");
    auto page = client->Range(prefix, PrefixEnd(prefix), 0, true);
    return page.ok() ? page->kvs.size() : SIZE_MAX;
  }

  std::unique_ptr<storage::Outbox> outbox_;
  ReplicationOptions options_r_;
  metrics::Registry registry_;
  std::unique_ptr<Replicator> replicator_;
};

TEST_F(ReplicatorTest, StoredRecordsAreCopiedAndAckedOnesDeleted) {
  StartReplicator();
  Store(1, 300);  // more than one transaction
  ASSERT_TRUE(WaitUntil([&] { return replicator_->Stats().unreplicated == 0; }, 20s));
  EXPECT_EQ(Copies(), 300u);
  std::set<uint64_t> acked;
  for (uint32_t shard = 0; shard < 4; ++shard) {
    auto records = outbox_->ReadShard(shard, 0, 1000);
    ASSERT_TRUE(records.ok());
    for (const auto& r : *records) {
      if (r.result.room_id() % 2 == 0) continue;
      ASSERT_TRUE(outbox_->Ack(r).ok());
      acked.insert(r.result.room_id());
    }
  }
  ASSERT_EQ(acked.size(), 150u);
  EXPECT_TRUE(WaitUntil([&] { return Copies() == 150; }, 20s)) << Copies();
}

TEST_F(ReplicatorTest, AwaitAnswersOnceReplicated) {
  StartReplicator();
  Store(7, 1);
  std::promise<std::vector<Status>> done;
  replicator_->Await({MakeResult(7)}, [&](std::vector<Status> s) { done.set_value(s); });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  const auto statuses = f.get();
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  EXPECT_EQ(Copies(), 1u);
}

TEST_F(ReplicatorTest, CopiesOnlyInEtcdGoBackIntoTheOutboxAtStart) {
  auto client = Client(options_);
  const v1::BattleResult lost = MakeResult(99);
  const std::vector<KeyValue> kv = {
      {ResultKey("verdict/", "node-a", 99, lost.ended_at_ms()), wire::DeterministicBytes(lost), 0}};
  ASSERT_TRUE(client->CreateIfAbsent(kv).ok());
  StartReplicator();
  // Read as a deliverer reads: only once the enqueue's sync made it durable.
  std::vector<storage::OutboxRecord> records;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto read = outbox_->ReadShard(storage::RoomShard(99, 4), 0, 10);
        if (read.ok()) records = *read;
        return records.size() == 1;
      },
      20s));
  EXPECT_EQ(records.front().result.room_id(), 99u);
}

TEST_F(ReplicatorTest, RecordsBeyondTheBufferAreReadBackFromTheOutbox) {
  options_r_.max_buffered_bytes = 1;  // nothing stays in memory: every record is read back
  StartReplicator();
  Store(1, 50);
  ASSERT_TRUE(WaitUntil([&] { return Copies() == 50; }, 20s)) << Copies();
  EXPECT_TRUE(WaitUntil([&] { return replicator_->Stats().unreplicated == 0; }, 20s));
}

// etcd away while replicated posts keep coming and are retried: nothing is held for them (each
// is answered UNAVAILABLE at once, to be retried), and the unreplicated gauge counts each stored
// record once. Awaited records not held in memory used to be queued again, bodies and all, past
// the buffer (528 MiB after 27,000 results), and counted twice (49,410 for 27,000).
TEST_F(ReplicatorTest, AnOutageHoldsNothingForAwaitsAndCountsEachRecordOnce) {
  options_r_.max_buffered_bytes = 5 * wire::DeterministicBytes(MakeResult(1)).size();
  etcd_->Kill(0);
  StartReplicator();
  ASSERT_TRUE(WaitUntil([&] { return replicator_->Stats().etcd_unavailable; }, 20s));
  Store(1, 50);  // 5 held in memory, 45 read back from the outbox later
  EXPECT_EQ(replicator_->Stats().unreplicated, 50u);
  Store(1, 50);  // the client's retry: 50 duplicates, nothing new stored
  EXPECT_EQ(replicator_->Stats().unreplicated, 50u) << "a duplicate was counted again";
  std::vector<v1::BattleResult> batch;
  for (uint64_t room = 1; room <= 50; ++room) batch.push_back(MakeResult(room));
  for (int retry = 0; retry < 3; ++retry) {  // a client posting its batch again and again
    const std::vector<Status> answer = AwaitAnswer(batch);
    ASSERT_EQ(answer.size(), 50u);
    for (const Status& s : answer) EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  }
  EXPECT_EQ(replicator_->Stats().unreplicated, 50u);
  EXPECT_EQ(Metric("verdict_node_replication_unreplicated_records"), 50);

  ASSERT_TRUE(etcd_->Restart(0));
  EXPECT_TRUE(WaitUntil([&] { return Idle(); }, 30s)) << replicator_->Stats().unreplicated;
  EXPECT_EQ(Copies(), 50u);
  // The client's next retries are answered: each record is put again (found in etcd) within
  // the buffer, a few at a time.
  for (const v1::BattleResult& r : batch) {
    const std::vector<Status> answer = AwaitAnswer({r});
    ASSERT_EQ(answer.size(), 1u);
    EXPECT_TRUE(answer[0].ok()) << answer[0].ToString();
  }
}

// etcd slow (its member stuck, answering nothing): an Await of records the buffer does not hold
// is answered UNAVAILABLE at once, not queued again beyond the buffer; what the buffer holds
// waits for etcd and is answered when it answers.
TEST_F(ReplicatorTest, AwaitsBeyondTheBufferAreRefusedAtOnceWhileEtcdIsSlow) {
  options_r_.max_buffered_bytes = 5 * wire::DeterministicBytes(MakeResult(1)).size();
  options_r_.max_in_flight = 1;
  options_r_.etcd.timeout = 60s;
  StartReplicator();
  Store(100, 1);
  // Idle: the put done, and the read-back of what the outbox held at start too.
  ASSERT_TRUE(WaitUntil([&] { return Idle(); }, 20s)) << "etcd never took a put";
  etcd_->Pause(0);
  struct Resume {
    EtcdCluster& etcd;
    ~Resume() { etcd.Resume(0); }
  } resume{*etcd_};
  Store(1, 50);
  std::mutex mu;
  std::vector<std::optional<Status>> answers(51);
  for (uint64_t room = 1; room <= 50; ++room) {
    replicator_->Await({MakeResult(room)}, [&, room](std::vector<Status> s) {
      std::lock_guard lock(mu);
      answers[room] = s.at(0);
    });
  }
  auto refused = [&] {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (const auto& a : answers) n += a && a->code() == StatusCode::kUnavailable;
    return n;
  };
  // At most the buffer's worth queued and one transaction's worth in flight wait for etcd.
  EXPECT_TRUE(WaitUntil([&] { return refused() >= 35; })) << refused();
  {
    std::lock_guard lock(mu);
    for (const auto& a : answers) {
      if (a) EXPECT_NE(a->message().find("replication buffer"), std::string::npos) << a->ToString();
    }
  }
  EXPECT_EQ(replicator_->Stats().unreplicated, 50u) << "a record was counted twice";

  etcd_->Resume(0);
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::lock_guard lock(mu);
        return std::all_of(answers.begin() + 1, answers.end(), [](const auto& a) { return a; });
      },
      90s));
  {
    std::lock_guard lock(mu);
    for (const auto& a : answers) {
      if (a && a->code() != StatusCode::kUnavailable) EXPECT_TRUE(a->ok()) << a->ToString();
    }
  }
  EXPECT_TRUE(WaitUntil([&] { return Idle(); }, 30s));
  EXPECT_EQ(Copies(), 51u);
}

// etcd out of its quota: the records stay stored on the node, counted unreplicated with the
// NOSPACE gauge up, and are replicated once an operator frees space and disarms the alarm.
TEST_F(ReplicatorTest, OutOfQuotaKeepsRecordsStoredAndCatchesUpAfterTheAlarm) {
  const std::vector<std::string> junk = FillASmallEtcd();
  ASSERT_FALSE(junk.empty());
  StartReplicator();
  Store(1, 20);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const ReplicationStats s = replicator_->Stats();
        return s.etcd_nospace && s.unreplicated == 20;
      },
      20s));
  size_t stored = 0;
  for (uint32_t shard = 0; shard < 4; ++shard) stored += outbox_->ReadShard(shard, 0, 100)->size();
  EXPECT_EQ(stored, 20u) << "every record is stored on the node meanwhile";
  EXPECT_EQ(Copies(), 0u);

  FreeSpaceAndDisarm(junk);
  EXPECT_TRUE(WaitUntil(
      [&] {
        const ReplicationStats s = replicator_->Stats();
        return !s.etcd_nospace && s.unreplicated == 0;
      },
      20s));
  EXPECT_EQ(Copies(), 20u);
}

// etcd takes deletes under its NOSPACE alarm: the copies of settled records are deleted, and
// the gauge (what VerdictEtcdOutOfQuota watches) must stay up through them, where each delete
// used to reset it. With nothing left to put, etcd's alarm list says when it is disarmed.
TEST_F(ReplicatorTest, TheNospaceGaugeStaysUpThroughDeletesUntilTheAlarmIsDisarmed) {
  const std::vector<std::string> junk = FillASmallEtcd();
  ASSERT_FALSE(junk.empty());
  StartReplicator();
  Store(1, 10);
  ASSERT_TRUE(WaitUntil([&] { return replicator_->Stats().etcd_nospace; }, 20s));
  ASSERT_EQ(AckAll(), 10u);
  ASSERT_TRUE(
      WaitUntil([&] { return Metric("verdict_node_replication_deleted_total") >= 10; }, 20s))
      << "the deletes did not go through under the alarm";
  EXPECT_FALSE(WaitUntil([&] { return !replicator_->Stats().etcd_nospace; }, 1s))
      << "a delete that etcd took reset the NOSPACE gauge; the alarm is still raised";
  EXPECT_EQ(Metric("verdict_node_replication_etcd_nospace"), 1);
  FreeSpaceAndDisarm(junk);
  EXPECT_TRUE(WaitUntil([&] { return !replicator_->Stats().etcd_nospace; }, 20s))
      << "the alarm was disarmed and nothing waits to be put: the gauge stayed up";
  Store(11, 1);
  EXPECT_TRUE(WaitUntil([&] { return Copies() == 1; }, 20s));
}

// A result whose copy was deleted after the lobby's receipt, posted again (the same, or another
// result for the room and ended_at_ms): the outbox stores a new record, and "replicated" must
// mean a copy of it in etcd. It was answered at once from the old release, with nothing there.
TEST_F(ReplicatorTest, ARecordStoredAgainAfterItsReleaseIsReplicatedBeforeItIsAwaited) {
  StartReplicator();
  Store(7, 1);
  ASSERT_TRUE(AwaitAnswer({MakeResult(7)}).at(0).ok());
  ASSERT_EQ(Copies(), 1u);
  ASSERT_EQ(AckAll(), 1u);
  ASSERT_TRUE(WaitUntil([&] { return Copies() == 0; }, 20s));

  Store(7, 1);  // the same result again: a new record under the same key
  auto answer = AwaitAnswer({MakeResult(7)});
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_TRUE(answer[0].ok()) << answer[0].ToString();
  EXPECT_EQ(Copies(), 1u) << "answered replicated with no copy in etcd";

  // Another result for the room, stored right after the ack: its put waits for the delete of
  // the old copy, and it is the new result that etcd holds.
  ASSERT_EQ(AckAll(), 1u);
  v1::BattleResult other = MakeResult(7);
  other.set_winner_team(2);
  const std::vector<v1::BattleResult> batch = {other};
  auto outcomes = outbox_->Enqueue(batch);
  ASSERT_TRUE(outcomes.ok());
  ASSERT_TRUE(outcomes->at(0).status.ok()) << outcomes->at(0).status.ToString();
  ASSERT_FALSE(outcomes->at(0).already_present);
  replicator_->Stored(batch, *outcomes);
  answer = AwaitAnswer(batch);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_TRUE(answer[0].ok()) << answer[0].ToString();
  ASSERT_TRUE(WaitUntil([&] { return Metric("verdict_node_replication_deleted_total") >= 2; }));
  auto client = Client(options_);
  const std::string key = ResultKey("verdict/", "node-a", 7, other.ended_at_ms());
  auto page = client->Range(key, "", 0, false);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->kvs.size(), 1u) << "the old copy's delete removed the new one";
  EXPECT_EQ(page->kvs[0].value, wire::DeterministicBytes(other));
}

}  // namespace
}  // namespace verdict::replication
