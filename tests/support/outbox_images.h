// Real outboxes on disk for the corruption tests, and the ways they are damaged: an outbox as a
// crash leaves it (results only in the write-ahead log), one closed cleanly (results in table
// files), bytes flipped in a file, the table file of a shard. Header-only; not thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "storage/outbox.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"

namespace verdict::testing {

// Enqueues results for rooms first … first + n - 1, in batches of 100.
inline void EnqueueRooms(storage::Outbox& outbox, uint64_t first, uint64_t n) {
  std::vector<v1::BattleResult> batch;
  for (uint64_t room = first; room < first + n; ++room) {
    batch.push_back(MakeResult(room));
    if (batch.size() == 100 || room + 1 == first + n) {
      auto out = outbox.Enqueue(batch);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      for (const auto& r : *out) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      batch.clear();
    }
  }
}

// An outbox of `shards` shards in `dir` as a crash leaves it: rooms 1 … n stored and synced, in
// the write-ahead log only (the open outbox is copied, so nothing is flushed or closed).
inline void MakeCrashImage(const std::string& dir, uint64_t n, uint32_t shards) {
  TempDir live;
  auto outbox = storage::OpenOutbox(live.Sub("outbox"), {.shard_count = shards});
  ASSERT_TRUE(outbox.ok()) << outbox.status().ToString();
  EnqueueRooms(**outbox, 1, n);
  std::filesystem::copy(live.Sub("outbox"), dir, std::filesystem::copy_options::recursive);
}

// An outbox of `shards` shards in `dir` closed cleanly after rooms 1 … n: they are in table
// files, one per column family, and the log is empty.
inline void MakeClosedOutbox(const std::string& dir, uint64_t n, uint32_t shards) {
  auto outbox = storage::OpenOutbox(dir, {.shard_count = shards});
  ASSERT_TRUE(outbox.ok()) << outbox.status().ToString();
  EnqueueRooms(**outbox, 1, n);
}

// The one file in `dir` whose name ends with (or starts with) `part`.
inline std::string OnlyFile(const std::string& dir, const std::string& part) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(part) || name.starts_with(part)) {
      EXPECT_TRUE(found.empty()) << "two files match " << part;
      found = name;
    }
  }
  EXPECT_FALSE(found.empty()) << "no file matches " << part << " in " << dir;
  return found;
}

// Inverts `n` bytes of `path` from `offset` on.
inline void FlipBytes(const std::string& path, uint64_t offset, int n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  for (int i = 0; i < n; ++i) {
    f.seekg(static_cast<std::streamoff>(offset + i));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(offset + i));
    f.put(static_cast<char>(c ^ 0xff));
  }
  ASSERT_TRUE(f.good()) << path;
}

// Flips four bytes a third of the way into the write-ahead log of the outbox in `dir`.
inline void DamageLogInTheMiddle(const std::string& dir) {
  const std::string log = dir + "/" + OnlyFile(dir, ".log");
  FlipBytes(log, std::filesystem::file_size(log) / 3, 4);
}

// The table file of `shard` in the closed outbox `dir` (its path).
inline std::string TableFileOf(const std::string& dir, uint32_t shard) {
  rocksdb::DBOptions options;
  std::vector<std::string> names;
  EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(options, dir, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  EXPECT_TRUE(rocksdb::DB::OpenForReadOnly(options, dir, descriptors, &handles, &db).ok());
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  for (auto* h : handles) EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  delete db;
  std::string found;
  char name[16];
  std::snprintf(name, sizeof(name), "shard-%03u", shard);
  for (const auto& f : files) {
    if (f.column_family_name == name) found = dir + f.name;
  }
  EXPECT_FALSE(found.empty()) << "no table file of " << name;
  return found;
}

}  // namespace verdict::testing
