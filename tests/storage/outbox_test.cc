// Behaviour of the RocksDB outbox: idempotent enqueue, staging until the sync, a full disk, FIFO
// per shard across reopen, the shard function, oversize and undecodable records, dead letter and
// redrive, stats, and tombstone hygiene.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "proto/wire.h"
#include "storage/outbox.h"
#include "storage/outbox_format.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::storage {
namespace {

using testing::MakeResult;
using testing::TempDir;

std::unique_ptr<Outbox> MustOpen(const std::string& dir, OutboxOptions options = {}) {
  auto opened = OpenOutbox(dir, options);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  return opened.ok() ? std::move(opened).value() : nullptr;
}

EnqueueResult MustEnqueueOne(Outbox& outbox, const v1::BattleResult& r) {
  auto out = outbox.Enqueue(std::span(&r, 1));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? out->front() : EnqueueResult{};
}

std::vector<OutboxRecord> ReadAll(Outbox& outbox, uint32_t shard) {
  auto records = outbox.ReadShard(shard, 0, 1'000'000);
  EXPECT_TRUE(records.ok()) << records.status().ToString();
  return records.ok() ? std::move(records).value() : std::vector<OutboxRecord>{};
}

std::vector<uint64_t> RoomsIn(const std::vector<OutboxRecord>& records) {
  std::vector<uint64_t> rooms;
  for (const auto& r : records) rooms.push_back(r.result.room_id());
  return rooms;
}

// Rooms 1, 2, … that hash to `shard` of `shard_count`, `n` of them.
std::vector<uint64_t> RoomsOfShard(uint32_t shard, uint32_t shard_count, size_t n) {
  std::vector<uint64_t> rooms;
  for (uint64_t room = 1; rooms.size() < n; ++room) {
    if (RoomShard(room, shard_count) == shard) rooms.push_back(room);
  }
  return rooms;
}

TEST(RoomShardTest, MatchesFixedVectors) {
  // SplitMix64 of 0 is the generator's well-known first output for seed 0.
  EXPECT_EQ(RoomHash(0), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(RoomHash(1), 0x910A2DEC89025CC1ULL);
  EXPECT_EQ(RoomHash(42), 0xBDD732262FEB6E95ULL);
  EXPECT_EQ(RoomHash(1000000007), 0x01166638885F5F0EULL);
  EXPECT_EQ(RoomHash(UINT64_MAX), 0xE4D971771B652C20ULL);
  EXPECT_EQ(RoomShard(0, 16), 15u);
  EXPECT_EQ(RoomShard(42, 16), 5u);
  EXPECT_EQ(RoomShard(42, 64), 21u);
  EXPECT_EQ(RoomShard(1000000007, 16), 14u);
}

TEST(RoomShardTest, SpreadsRoomsOverAllShards) {
  std::map<uint32_t, int> per_shard;
  for (uint64_t room = 1; room <= 16'000; ++room) ++per_shard[RoomShard(room, 16)];
  ASSERT_EQ(per_shard.size(), 16u);
  for (auto [shard, n] : per_shard) {
    EXPECT_GT(n, 800) << "shard " << shard;
    EXPECT_LT(n, 1200) << "shard " << shard;
  }
}

TEST(OutboxFormatTest, ShardValueIsTheEnvelopesDeterministicSerialization) {
  const auto result = MakeResult(9);
  v1::Envelope envelope;
  envelope.set_sequence(300);  // a multi-byte varint
  envelope.set_enqueued_at_ms(1'700'000'000'123);
  *envelope.mutable_result() = result;
  EXPECT_EQ(format::ShardValue(300, 1'700'000'000'123, wire::DeterministicBytes(result)),
            wire::DeterministicBytes(envelope));
  auto big = result;
  big.set_replay_path(std::string(70'000, 'x'));  // a three-byte length
  *envelope.mutable_result() = big;
  EXPECT_EQ(format::ShardValue(300, 1'700'000'000'123, wire::DeterministicBytes(big)),
            wire::DeterministicBytes(envelope));
}

TEST(OutboxTest, ReenqueueOfSameResultIsNoop) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  const auto result = MakeResult(7);
  EnqueueResult first = MustEnqueueOne(*outbox, result);
  ASSERT_TRUE(first.status.ok());
  EXPECT_FALSE(first.already_present);

  EnqueueResult second = MustEnqueueOne(*outbox, result);
  ASSERT_TRUE(second.status.ok()) << second.status.ToString();
  EXPECT_TRUE(second.already_present);
  EXPECT_EQ(second.sequence, first.sequence);
  EXPECT_EQ(ReadAll(*outbox, first.shard).size(), 1u);

  // Also within one batch, and after a reopen.
  std::vector<v1::BattleResult> twice = {MakeResult(8), MakeResult(8)};
  auto batch = outbox->Enqueue(twice);
  ASSERT_TRUE(batch.ok());
  EXPECT_FALSE((*batch)[0].already_present);
  EXPECT_TRUE((*batch)[1].already_present);
  outbox.reset();
  outbox = MustOpen(dir.path());
  EXPECT_TRUE(MustEnqueueOne(*outbox, result).already_present);
  auto stats = outbox->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->records, 2u);
}

TEST(OutboxTest, DifferentResultWithSameIdentityIsRefused) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(7)).status.ok());
  auto changed = MakeResult(7);
  changed.set_winner_team(2);
  EnqueueResult r = MustEnqueueOne(*outbox, changed);
  EXPECT_EQ(r.status.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status.message().find("room 7"), std::string::npos) << r.status.message();
  auto stored = ReadAll(*outbox, RoomShard(7, 16));
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].result.winner_team(), 1u);
}

TEST(OutboxTest, RoomZeroIsRefusedWithoutFailingTheBatch) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  std::vector<v1::BattleResult> batch = {MakeResult(0), MakeResult(5)};
  auto out = outbox->Enqueue(batch);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*out)[1].status.ok());
  EXPECT_EQ(outbox->Stats()->records, 1u);
}

TEST(OutboxTest, UnsyncedBatchesAreInvisibleUntilSyncedThenStoredInOrder) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  const auto rooms = RoomsOfShard(4, 16, 3);
  const std::vector<v1::BattleResult> first = {MakeResult(rooms[0]), MakeResult(rooms[1])};
  const std::vector<v1::BattleResult> second = {MakeResult(rooms[2])};
  ASSERT_TRUE(outbox->EnqueueBuffered(first).ok());
  ASSERT_TRUE(outbox->EnqueueBuffered(second).ok());
  // Written to the log's buffer and the memtables, not yet synced: nothing undurable can be
  // read and delivered. (Stats counts them already.)
  EXPECT_TRUE(ReadAll(*outbox, 4).empty());
  EXPECT_EQ(outbox->Stats()->records, 3u);

  ASSERT_TRUE(outbox->SyncEnqueued().ok());
  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 4)), rooms);
  EXPECT_EQ(outbox->Stats()->records, 3u);
  ASSERT_TRUE(outbox->SyncEnqueued().ok());  // nothing new: nothing to do
  EXPECT_EQ(ReadAll(*outbox, 4).size(), 3u);
}

TEST(OutboxTest, RepeatOfAnUnsyncedRecordIsStoredOnce) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  const std::vector<v1::BattleResult> first = {MakeResult(7)};
  auto unsynced = outbox->EnqueueBuffered(first);
  ASSERT_TRUE(unsynced.ok());
  auto changed = MakeResult(7);
  changed.set_winner_team(2);
  // Enqueued again before the first copy was synced: the same one, and a different one.
  const std::vector<v1::BattleResult> again = {MakeResult(7), changed};
  auto repeated = outbox->EnqueueBuffered(again);
  ASSERT_TRUE(repeated.ok());
  EXPECT_TRUE((*repeated)[0].status.ok()) << (*repeated)[0].status.ToString();
  EXPECT_TRUE((*repeated)[0].already_present);
  EXPECT_EQ((*repeated)[0].sequence, (*unsynced)[0].sequence);
  EXPECT_EQ((*repeated)[1].status.code(), StatusCode::kAlreadyExists);

  ASSERT_TRUE(outbox->SyncEnqueued().ok());
  auto stored = ReadAll(*outbox, RoomShard(7, 16));
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].result.winner_team(), 1u);
  EXPECT_TRUE(MustEnqueueOne(*outbox, MakeResult(7)).already_present);
}

TEST(OutboxTest, FullDiskFailsTheSyncAndARetryAfterSpaceIsFreedStoresTheBatchOnce) {
  TempDir dir;
  const std::string disk = dir.Sub("disk");
  std::filesystem::create_directories(disk);
  // A small file system of its own, to fill (root only).
  if (::geteuid() != 0 || ::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=16m") != 0) {
    GTEST_SKIP() << "needs root to mount a small file system to fill";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{disk};
  OutboxOptions options;
  options.preallocate_files = false;  // so the full disk fails the next log append
  auto outbox = MustOpen(disk + "/outbox", options);
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(1)).status.ok());

  const std::string filler = disk + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string chunk(1 << 16, 'x');
    while (out.write(chunk.data(), chunk.size()) && out.flush()) {
    }
  }
  std::vector<v1::BattleResult> batch;
  for (uint64_t room = 2; room <= 65; ++room) batch.push_back(MakeResult(room));
  ASSERT_TRUE(outbox->EnqueueBuffered(batch).ok());
  EXPECT_EQ(outbox->SyncEnqueued().code(), StatusCode::kResourceExhausted);
  // While the outbox cannot write, it stages nothing more: the caller keeps its batch.
  EXPECT_FALSE(outbox->EnqueueBuffered(std::vector<v1::BattleResult>{MakeResult(66)}).ok());
  EXPECT_FALSE(outbox->SyncEnqueued().ok());

  std::filesystem::remove(filler);
  EXPECT_TRUE(testing::WaitUntil([&] { return outbox->SyncEnqueued().ok(); }));
  outbox.reset();
  outbox = MustOpen(disk + "/outbox", options);
  std::map<uint64_t, int> stored;
  for (uint32_t s = 0; s < outbox->shard_count(); ++s) {
    for (const auto& r : ReadAll(*outbox, s)) ++stored[r.result.room_id()];
  }
  ASSERT_EQ(stored.size(), 65u);
  for (auto [room, copies] : stored) EXPECT_EQ(copies, 1) << "room " << room;
}

TEST(OutboxTest, ShardIsFifoAcrossReopenAndSequencesNeverGoBack) {
  TempDir dir;
  const auto rooms = RoomsOfShard(3, 16, 30);
  uint64_t last_sequence = 0;
  {
    auto outbox = MustOpen(dir.path());
    for (size_t i = 0; i < 20; ++i) {
      EnqueueResult r = MustEnqueueOne(*outbox, MakeResult(rooms[i]));
      EXPECT_EQ(r.shard, 3u);
      EXPECT_GT(r.sequence, last_sequence);
      last_sequence = r.sequence;
    }
    // Ack everything so no key on disk remembers the highest sequence.
    for (const auto& rec : ReadAll(*outbox, 3)) ASSERT_TRUE(outbox->Ack(rec).ok());
  }
  auto outbox = MustOpen(dir.path());
  EXPECT_TRUE(ReadAll(*outbox, 3).empty());
  std::vector<v1::BattleResult> batch;
  for (size_t i = 20; i < 30; ++i) batch.push_back(MakeResult(rooms[i]));
  auto out = outbox->Enqueue(batch);
  ASSERT_TRUE(out.ok());
  for (const auto& r : *out) {
    EXPECT_GT(r.sequence, last_sequence);
    last_sequence = r.sequence;
  }
  outbox.reset();
  outbox = MustOpen(dir.path());
  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 3)), std::vector<uint64_t>(rooms.begin() + 20, rooms.end()));
}

TEST(OutboxTest, AllRecordsOfOneRoomLandInOneShard) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  for (int64_t ended = 1; ended <= 5; ++ended) {
    ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(99, ended)).status.ok());
  }
  const uint32_t home = RoomShard(99, 16);
  for (uint32_t s = 0; s < 16; ++s) {
    EXPECT_EQ(ReadAll(*outbox, s).size(), s == home ? 5u : 0u) << "shard " << s;
  }
  auto in_order = ReadAll(*outbox, home);
  for (size_t i = 0; i < in_order.size(); ++i) {
    EXPECT_EQ(in_order[i].result.ended_at_ms(), static_cast<int64_t>(i + 1));
  }
}

TEST(OutboxTest, ReopenWithDifferentShardCountIsRefused) {
  TempDir dir;
  MustOpen(dir.path(), {.shard_count = 16}).reset();
  auto reopened = OpenOutbox(dir.path(), {.shard_count = 8});
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reopened.status().message().find("created with 16 shards"), std::string::npos)
      << reopened.status().message();
  EXPECT_NE(reopened.status().message().find("opened with 8"), std::string::npos);
  // The refusal changed nothing: the original count still opens.
  EXPECT_NE(MustOpen(dir.path(), {.shard_count = 16}), nullptr);
}

TEST(OutboxTest, SecondOpenWhileHeldIsUnavailable) {
  TempDir dir;
  auto held = MustOpen(dir.path());
  auto second = OpenOutbox(dir.path(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
}

TEST(OutboxTest, ReadOnlyOpenWorksWhileHeldAndRefusesWrites) {
  TempDir dir;
  EXPECT_EQ(OpenOutbox(dir.path(), {.read_only = true}).status().code(), StatusCode::kNotFound);
  auto held = MustOpen(dir.path(), {.shard_count = 4});
  ASSERT_TRUE(MustEnqueueOne(*held, MakeResult(5)).status.ok());
  auto viewer = OpenOutbox(dir.path(), {.read_only = true});
  ASSERT_TRUE(viewer.ok()) << viewer.status().ToString();
  EXPECT_EQ((*viewer)->shard_count(), 4u) << "the stored count is adopted";
  EXPECT_EQ((*viewer)->Stats()->records, 1u);
  const auto result = MakeResult(6);
  EXPECT_EQ((*viewer)->Enqueue(std::span(&result, 1)).status().code(),
            StatusCode::kFailedPrecondition);
  auto records = (*viewer)->ReadShard(RoomShard(5, 4), 0, 10);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*viewer)->Ack(records->front()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(held->Stats()->records, 1u);
}

TEST(OutboxTest, OversizeIsRefusedAndQuarantinedWhole) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  auto big = MakeResult(11);
  big.set_replay_path(std::string(size_t{1} << 20, 'x'));  // alone over the 1 MiB limit
  std::vector<v1::BattleResult> batch = {big, MakeResult(12)};
  auto out = outbox->Enqueue(batch);
  ASSERT_TRUE(out.ok());
  const Status& refused = (*out)[0].status;
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("1048576-byte limit"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("quarantine"), std::string::npos);
  EXPECT_TRUE((*out)[1].status.ok()) << "the rest of the batch is stored";

  for (uint32_t shard = 0; shard < 16; ++shard) {
    for (uint64_t room : RoomsIn(ReadAll(*outbox, shard))) EXPECT_NE(room, 11u);
  }
  auto quarantined = outbox->ListSide(SideArea::kQuarantine, 11);
  ASSERT_TRUE(quarantined.ok());
  ASSERT_EQ(quarantined->size(), 1u);
  const SideRecord& q = quarantined->front();
  EXPECT_EQ(q.reason, "oversize");
  ASSERT_TRUE(q.decodable);
  EXPECT_EQ(q.result.replay_path().size(), size_t{1} << 20) << "never truncated";
  EXPECT_EQ(wire::DeterministicBytes(q.result), wire::DeterministicBytes(big));

  // Offering it again neither stores a second copy nor pretends it was accepted.
  EnqueueResult again = MustEnqueueOne(*outbox, big);
  EXPECT_EQ(again.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(outbox->Stats()->quarantined, 1u);
  // Redrive cannot put it into a shard either: it stays, counted as skipped.
  auto report = outbox->Redrive(SideArea::kQuarantine, std::nullopt);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->moved, 0u);
  EXPECT_EQ(report->skipped, 1u);
}

// Writes `value` under `sequence` into shard column family `shard` with raw RocksDB, as disk
// corruption or a bug elsewhere might.
void WriteRawShardValue(const std::string& dir, uint32_t shard, uint64_t sequence,
                        const std::string& value) {
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir, descriptors, &handles, &raw).ok());
  char cf_name[16];
  std::snprintf(cf_name, sizeof(cf_name), "shard-%03u", shard);
  std::string key;
  for (int i = 7; i >= 0; --i) key.push_back(static_cast<char>((sequence >> (8 * i)) & 0xff));
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == cf_name) {
      ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), handles[i], key, value).ok());
    }
  }
  for (auto* h : handles) ASSERT_TRUE(raw->DestroyColumnFamilyHandle(h).ok());
  delete raw;
}

TEST(OutboxTest, GarbageValueIsQuarantinedAndLaterRecordsStillRead) {
  TempDir dir;
  const auto rooms = RoomsOfShard(5, 16, 2);
  uint64_t first_sequence = 0;
  {
    auto outbox = MustOpen(dir.path());
    first_sequence = MustEnqueueOne(*outbox, MakeResult(rooms[0])).sequence;
  }
  const std::string garbage = "not a protobuf \xff\xfe garbage";
  WriteRawShardValue(dir.path(), 5, first_sequence + 1, garbage);

  auto outbox = MustOpen(dir.path());
  EnqueueResult after = MustEnqueueOne(*outbox, MakeResult(rooms[1]));
  EXPECT_GT(after.sequence, first_sequence + 1) << "the garbage key's sequence is not reused";
  EXPECT_EQ(outbox->Stats()->shards[5].records, 3u);

  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 5)), (std::vector<uint64_t>{rooms[0], rooms[1]}));
  auto quarantined = outbox->ListSide(SideArea::kQuarantine, std::nullopt);
  ASSERT_TRUE(quarantined.ok());
  ASSERT_EQ(quarantined->size(), 1u);
  EXPECT_EQ(quarantined->front().reason, "undecodable");
  EXPECT_EQ(quarantined->front().sequence, first_sequence + 1);
  EXPECT_EQ(quarantined->front().shard, 5u);
  auto stats = outbox->Stats();
  EXPECT_EQ(stats->shards[5].records, 2u);
  EXPECT_EQ(stats->quarantined, 1u);

  // The move survives a reopen and the shard reads clean.
  outbox.reset();
  outbox = MustOpen(dir.path());
  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 5)), (std::vector<uint64_t>{rooms[0], rooms[1]}));
  EXPECT_EQ(outbox->Stats()->quarantined, 1u);
  // An undecodable record cannot be redriven; it stays for a human.
  auto report = outbox->Redrive(SideArea::kQuarantine, std::nullopt);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->skipped, 1u);
}

TEST(OutboxTest, DeadLetterThenRedriveGoesToTheTailWithANewSequence) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  const auto rooms = RoomsOfShard(2, 16, 3);
  for (uint64_t room : rooms) ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(room)).status.ok());
  auto head = ReadAll(*outbox, 2);
  ASSERT_EQ(head.size(), 3u);
  ASSERT_TRUE(outbox->DeadLetter(head[0], "ROSTER_MISMATCH", "players do not match").ok());

  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 2)), (std::vector<uint64_t>{rooms[1], rooms[2]}));
  auto letters = outbox->ListSide(SideArea::kDeadLetter, std::nullopt);
  ASSERT_TRUE(letters.ok());
  ASSERT_EQ(letters->size(), 1u);
  EXPECT_EQ(letters->front().reason, "ROSTER_MISMATCH");
  EXPECT_EQ(letters->front().detail, "players do not match");
  EXPECT_EQ(letters->front().result.room_id(), rooms[0]);
  // While dead-lettered, offering the same result again does not queue a second copy.
  EXPECT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[0])).already_present);

  auto report = outbox->Redrive(SideArea::kDeadLetter, rooms[0]);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->moved, 1u);
  auto after = ReadAll(*outbox, 2);
  EXPECT_EQ(RoomsIn(after), (std::vector<uint64_t>{rooms[1], rooms[2], rooms[0]}));
  EXPECT_GT(after.back().sequence, head[2].sequence);
  EXPECT_EQ(outbox->Stats()->dead_lettered, 0u);
  // The redriven record is indexed again: re-enqueue is a no-op.
  EXPECT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[0])).already_present);
}

TEST(OutboxTest, RedriveSyncsUnsyncedRecordsFirstSoAShardStaysInSequenceOrder) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  const auto rooms = RoomsOfShard(2, 16, 2);
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[0])).status.ok());
  ASSERT_TRUE(outbox->DeadLetter(ReadAll(*outbox, 2).at(0), "ROSTER_MISMATCH", "no").ok());
  const std::vector<v1::BattleResult> unsynced = {MakeResult(rooms[1])};
  ASSERT_TRUE(outbox->EnqueueBuffered(unsynced).ok());

  // The redriven record gets a higher sequence than the unsynced one; a deliverer that read it
  // first would read on past the unsynced one.
  ASSERT_TRUE(outbox->Redrive(SideArea::kDeadLetter, std::nullopt).ok());
  auto shard = ReadAll(*outbox, 2);
  EXPECT_EQ(RoomsIn(shard), (std::vector<uint64_t>{rooms[1], rooms[0]}));
}

TEST(OutboxTest, RedriveFiltersByRoom) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  for (uint64_t room : {21, 22}) {
    ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(room)).status.ok());
    auto recs = ReadAll(*outbox, RoomShard(room, 16));
    for (const auto& r : recs) {
      if (r.result.room_id() == room) {
        ASSERT_TRUE(outbox->DeadLetter(r, "ROSTER_MISMATCH", "test").ok());
      }
    }
  }
  auto report = outbox->Redrive(SideArea::kDeadLetter, 22);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->moved, 1u);
  auto left = outbox->ListSide(SideArea::kDeadLetter, std::nullopt);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(left->front().result.room_id(), 21u);
}

TEST(OutboxTest, StatsCountBytesAndOldestAge) {
  TempDir dir;
  FakeClock clock;
  auto outbox = MustOpen(dir.path(), {.clock = &clock});
  const auto rooms = RoomsOfShard(0, 16, 2);
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[0])).status.ok());
  clock.AdvanceMs(5'000);
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[1])).status.ok());
  clock.AdvanceMs(2'000);
  auto stats = outbox->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->shards.size(), 16u);
  EXPECT_EQ(stats->shards[0].records, 2u);
  EXPECT_GT(stats->shards[0].bytes, 2 * wire::DeterministicBytes(MakeResult(rooms[0])).size() - 1);
  EXPECT_EQ(stats->shards[0].oldest_age_ms, 7'000);
  EXPECT_EQ(stats->shards[1].records, 0u);
  EXPECT_EQ(stats->shards[1].oldest_age_ms, 0);
  EXPECT_EQ(stats->records, 2u);
  EXPECT_GT(stats->free_disk_bytes, 0u);

  auto head = ReadAll(*outbox, 0);
  ASSERT_TRUE(outbox->Ack(head[0]).ok());
  stats = outbox->Stats();
  EXPECT_EQ(stats->shards[0].records, 1u);
  EXPECT_EQ(stats->shards[0].oldest_age_ms, 2'000);
  EXPECT_EQ(stats->shards[0].bytes, head[1].stored_bytes);
}

// A deliverer acks out of order: a room in backoff keeps its record while later rooms of the
// shard are acked. The waiting record must stay readable from the head (a restarted shard loop
// reads from there) and stay the shard's oldest (the age operators alert on).
TEST(OutboxTest, AnAckAheadOfAWaitingRecordHidesItFromNeitherReadsNorTheOldestAge) {
  TempDir dir;
  FakeClock clock;
  auto outbox = MustOpen(dir.path(), {.clock = &clock});
  const auto rooms = RoomsOfShard(0, 16, 3);
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[0])).status.ok());
  clock.AdvanceMs(5'000);
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[1])).status.ok());
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(rooms[2])).status.ok());
  clock.AdvanceMs(1'000);

  auto all = ReadAll(*outbox, 0);
  ASSERT_EQ(all.size(), 3u);
  ASSERT_TRUE(outbox->Ack(all[2]).ok());  // the newest first, then the middle one
  ASSERT_TRUE(outbox->Ack(all[1]).ok());

  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 0)), std::vector<uint64_t>{rooms[0]});
  auto stats = outbox->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->shards[0].records, 1u);
  EXPECT_EQ(stats->shards[0].oldest_age_ms, 6'000);

  // Once the waiting record goes too, the shard reads empty and a new record is found.
  ASSERT_TRUE(outbox->Ack(all[0]).ok());
  EXPECT_TRUE(ReadAll(*outbox, 0).empty());
  const auto later = RoomsOfShard(0, 16, 4).back();
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(later)).status.ok());
  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 0)), std::vector<uint64_t>{later});
  stats = outbox->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->shards[0].oldest_age_ms, 0);
}

TEST(OutboxTest, AckedRecordIsGoneAfterReopenAndCanBeEnqueuedAgain) {
  TempDir dir;
  {
    auto outbox = MustOpen(dir.path());
    ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(3)).status.ok());
    auto recs = ReadAll(*outbox, RoomShard(3, 16));
    ASSERT_EQ(recs.size(), 1u);
    ASSERT_TRUE(outbox->Ack(recs[0]).ok());
  }
  auto outbox = MustOpen(dir.path());
  EXPECT_TRUE(ReadAll(*outbox, RoomShard(3, 16)).empty());
  // The idempotency entry went with the ack: a late duplicate is queued (and the lobby will
  // answer it as a duplicate).
  EXPECT_FALSE(MustEnqueueOne(*outbox, MakeResult(3)).already_present);
}

// A batch the lobby settled whole is acked in one write: every record of it is gone, with its
// idempotency entry, after a reopen; the records left out stay. A batch with one record the
// outbox cannot ack (a shard it does not have) removes none: all or none.
TEST(OutboxTest, AckAllRemovesEveryRecordOfTheBatchOrNone) {
  TempDir dir;
  const auto rooms = RoomsOfShard(2, 16, 4);
  {
    auto outbox = MustOpen(dir.path());
    for (uint64_t room : rooms) ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(room)).status.ok());
    auto all = ReadAll(*outbox, 2);
    ASSERT_EQ(all.size(), 4u);

    std::vector<OutboxRecord> bad = {all[0], all[1]};
    bad[1].shard = 16;
    EXPECT_EQ(outbox->AckAll(bad).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ReadAll(*outbox, 2).size(), 4u);
    EXPECT_EQ(outbox->Stats()->records, 4u);

    ASSERT_TRUE(outbox->AckAll(std::span(all).first(3)).ok());
    EXPECT_EQ(RoomsIn(ReadAll(*outbox, 2)), std::vector<uint64_t>{rooms[3]});
    EXPECT_EQ(outbox->Stats()->records, 1u);
    EXPECT_TRUE(outbox->AckAll({}).ok());
  }
  auto outbox = MustOpen(dir.path());
  EXPECT_EQ(RoomsIn(ReadAll(*outbox, 2)), std::vector<uint64_t>{rooms[3]});
  EXPECT_EQ(outbox->Stats()->records, 1u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(MustEnqueueOne(*outbox, MakeResult(rooms[i])).already_present) << i;
  }
}

TEST(OutboxTest, ReadAfterSequenceSkipsEarlierRecords) {
  TempDir dir;
  auto outbox = MustOpen(dir.path());
  const auto rooms = RoomsOfShard(4, 16, 5);
  for (uint64_t room : rooms) ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(room)).status.ok());
  auto all = ReadAll(*outbox, 4);
  auto tail = outbox->ReadShard(4, all[1].sequence, 2);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(RoomsIn(*tail), (std::vector<uint64_t>{rooms[2], rooms[3]}));
}

// After 200,000 records went through a shard, reading its head must not walk their
// tombstones: the low-water mark and iterator bounds keep the skipped count small.
TEST(OutboxTest, HeadReadSkipsBoundedTombstonesAfterManyAcks) {
  TempDir dir;
  auto outbox = MustOpen(dir.path(), {.shard_count = 1});
  constexpr int kRecords = 200'000;
  constexpr int kBatch = 2'000;
  uint64_t room = 1;
  for (int done = 0; done < kRecords; done += kBatch) {
    std::vector<v1::BattleResult> batch;
    for (int i = 0; i < kBatch; ++i) batch.push_back(MakeResult(room++));
    ASSERT_TRUE(outbox->Enqueue(batch).ok());
    auto records = outbox->ReadShard(0, 0, kBatch);
    ASSERT_TRUE(records.ok());
    ASSERT_EQ(records->size(), static_cast<size_t>(kBatch));
    for (const auto& r : *records) ASSERT_TRUE(outbox->Ack(r).ok());
  }
  ASSERT_TRUE(MustEnqueueOne(*outbox, MakeResult(room)).status.ok());

  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  auto head = outbox->ReadShard(0, 0, 1);
  const uint64_t skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  ASSERT_TRUE(head.ok());
  ASSERT_EQ(head->size(), 1u);
  EXPECT_EQ(head->front().result.room_id(), room);
  EXPECT_LE(skipped, 16u) << "head read walked " << skipped << " tombstones";
}

}  // namespace
}  // namespace verdict::storage
