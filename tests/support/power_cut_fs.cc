#include "tests/support/power_cut_fs.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace verdict::testing {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string WithoutTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

template <typename Op>
rocksdb::IOStatus PowerCutFs::Mutate(Op op) {
  std::lock_guard lock(mu_);
  if (cut_in_ && --*cut_in_ == 0) cut_ = true;
  return op();
}

// A file open for writing: appends go to the real file at once; the FS remembers how far the
// last sync reached. RocksDB never renames a file it still writes, so the name stays valid.
class PowerCutFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  PowerCutFile(PowerCutFs* fs, std::string name, std::unique_ptr<rocksdb::FSWritableFile> file)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs), name_(std::move(name)) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    return Written(data.size(), [&] { return target()->Append(data, options, dbg); });
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    return Written(data.size(), [&] { return target()->Append(data, options, info, dbg); });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    return WrittenAt(offset, data.size(),
                     [&] { return target()->PositionedAppend(data, offset, options, dbg); });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    return WrittenAt(offset, data.size(),
                     [&] { return target()->PositionedAppend(data, offset, options, info, dbg); });
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    return fs_->Mutate([&] {
      rocksdb::IOStatus s = target()->Truncate(size, options, dbg);
      if (s.ok()) {
        auto& state = fs_->files_[name_];
        state.size = std::min(state.size, size);
        state.synced = std::min(state.synced, size);
      }
      return s;
    });
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    return fs_->Mutate([&] { return target()->Flush(options, dbg); });
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return Synced();
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return Synced();
  }
  rocksdb::IOStatus RangeSync(uint64_t, uint64_t, const rocksdb::IOOptions&,
                              rocksdb::IODebugContext*) override {
    return fs_->Mutate([] { return rocksdb::IOStatus::OK(); });  // not a durability point
  }
  rocksdb::IOStatus Allocate(uint64_t offset, uint64_t len, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    return fs_->Mutate([&] { return target()->Allocate(offset, len, options, dbg); });
  }

 private:
  template <typename Op>
  rocksdb::IOStatus Written(size_t n, Op op) {
    return fs_->Mutate([&] {
      rocksdb::IOStatus s = op();
      if (s.ok()) fs_->files_[name_].size += n;
      return s;
    });
  }
  template <typename Op>
  rocksdb::IOStatus WrittenAt(uint64_t offset, size_t n, Op op) {
    return fs_->Mutate([&] {
      rocksdb::IOStatus s = op();
      if (s.ok()) {
        auto& state = fs_->files_[name_];
        state.size = std::max(state.size, offset + n);
      }
      return s;
    });
  }
  rocksdb::IOStatus Synced() {
    return fs_->Mutate([&] {
      auto& state = fs_->files_[name_];
      if (!fs_->cut_) state.synced = state.size;
      return rocksdb::IOStatus::OK();
    });
  }

  PowerCutFs* fs_;
  const std::string name_;
};

// A directory handle: its fsync makes the entries created or renamed in it durable.
class PowerCutDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  PowerCutDirectory(PowerCutFs* fs, std::string name, std::unique_ptr<rocksdb::FSDirectory> dir)
      : FSDirectoryWrapper(std::move(dir)), fs_(fs), name_(WithoutTrailingSlash(std::move(name))) {}

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return Synced();
  }
  rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions&, rocksdb::IODebugContext*,
                                        const rocksdb::DirFsyncOptions&) override {
    return Synced();
  }

 private:
  rocksdb::IOStatus Synced() {
    return fs_->Mutate([&] {
      if (!fs_->cut_) fs_->DirectorySynced(name_);
      return rocksdb::IOStatus::OK();
    });
  }

  PowerCutFs* fs_;
  const std::string name_;
};

PowerCutFs::PowerCutFs(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(std::move(base)) {}

std::shared_ptr<rocksdb::Env> PowerCutFs::NewEnv(const std::shared_ptr<PowerCutFs>& fs) {
  return rocksdb::NewCompositeEnv(fs);
}

void PowerCutFs::Cut() {
  std::lock_guard lock(mu_);
  cut_ = true;
}

void PowerCutFs::CutAfterWrites(uint64_t n) {
  std::lock_guard lock(mu_);
  cut_in_ = std::max<uint64_t>(n, 1);
}

bool PowerCutFs::is_cut() const {
  std::lock_guard lock(mu_);
  return cut_;
}

void PowerCutFs::RememberEntry(const std::string& path) {
  if (unsynced_entries_.contains(path)) return;
  std::optional<std::string> before;
  if (target()->FileExists(path, rocksdb::IOOptions(), nullptr).ok()) {
    before.emplace();
    // The last synced contents, which is what the old entry pointed at.
    rocksdb::ReadFileToString(target(), path, &*before).PermitUncheckedError();
    if (auto it = files_.find(path); it != files_.end()) before->resize(it->second.synced);
  }
  unsynced_entries_[path] = std::move(before);
}

void PowerCutFs::DirectorySynced(const std::string& dir) {
  std::erase_if(unsynced_entries_, [&](const auto& entry) { return DirOf(entry.first) == dir; });
}

rocksdb::IOStatus PowerCutFs::NewWritableFile(const std::string& fname,
                                              const rocksdb::FileOptions& options,
                                              std::unique_ptr<rocksdb::FSWritableFile>* result,
                                              rocksdb::IODebugContext* dbg) {
  return Mutate([&] {
    RememberEntry(fname);
    rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
    if (!s.ok()) return s;
    files_[fname] = FileState{};
    *result = std::make_unique<PowerCutFile>(this, fname, std::move(*result));
    return s;
  });
}

rocksdb::IOStatus PowerCutFs::ReopenWritableFile(const std::string& fname,
                                                 const rocksdb::FileOptions& options,
                                                 std::unique_ptr<rocksdb::FSWritableFile>* result,
                                                 rocksdb::IODebugContext* dbg) {
  return Mutate([&] {
    RememberEntry(fname);  // reopening creates the file if it is missing
    rocksdb::IOStatus s = target()->ReopenWritableFile(fname, options, result, dbg);
    if (!s.ok()) return s;
    if (!files_.contains(fname)) {
      // Written before this object existed: all of it is durable.
      uint64_t size = (*result)->GetFileSize(options.io_options, dbg);
      files_[fname] = FileState{size, size};
    }
    *result = std::make_unique<PowerCutFile>(this, fname, std::move(*result));
    return s;
  });
}

rocksdb::IOStatus PowerCutFs::ReuseWritableFile(const std::string&, const std::string&,
                                                const rocksdb::FileOptions&,
                                                std::unique_ptr<rocksdb::FSWritableFile>*,
                                                rocksdb::IODebugContext*) {
  return rocksdb::IOStatus::NotSupported("PowerCutFs does not model recycled log files");
}

rocksdb::IOStatus PowerCutFs::NewRandomRWFile(const std::string&, const rocksdb::FileOptions&,
                                              std::unique_ptr<rocksdb::FSRandomRWFile>*,
                                              rocksdb::IODebugContext*) {
  return rocksdb::IOStatus::NotSupported("PowerCutFs does not model random-access writes");
}

rocksdb::IOStatus PowerCutFs::NewDirectory(const std::string& name,
                                           const rocksdb::IOOptions& options,
                                           std::unique_ptr<rocksdb::FSDirectory>* result,
                                           rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewDirectory(name, options, result, dbg);
  if (s.ok()) *result = std::make_unique<PowerCutDirectory>(this, name, std::move(*result));
  return s;
}

rocksdb::IOStatus PowerCutFs::RenameFile(const std::string& src, const std::string& target_name,
                                         const rocksdb::IOOptions& options,
                                         rocksdb::IODebugContext* dbg) {
  return Mutate([&] {
    RememberEntry(src);
    RememberEntry(target_name);
    rocksdb::IOStatus s = target()->RenameFile(src, target_name, options, dbg);
    if (!s.ok()) return s;
    files_.erase(target_name);
    if (auto it = files_.find(src); it != files_.end()) {
      files_[target_name] = it->second;
      files_.erase(src);
    }
    return s;
  });
}

rocksdb::IOStatus PowerCutFs::LinkFile(const std::string& src, const std::string& target_name,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) {
  return Mutate([&] {
    RememberEntry(target_name);
    return target()->LinkFile(src, target_name, options, dbg);
  });
}

rocksdb::IOStatus PowerCutFs::DeleteFile(const std::string& fname,
                                         const rocksdb::IOOptions& options,
                                         rocksdb::IODebugContext* dbg) {
  return Mutate([&] {
    if (cut_) return rocksdb::IOStatus::OK();  // never reaches the disk
    rocksdb::IOStatus s = target()->DeleteFile(fname, options, dbg);
    if (s.ok()) files_.erase(fname);
    return s;
  });
}

rocksdb::IOStatus PowerCutFs::CreateDir(const std::string& dirname,
                                        const rocksdb::IOOptions& options,
                                        rocksdb::IODebugContext* dbg) {
  return Mutate([&] { return target()->CreateDir(dirname, options, dbg); });
}

rocksdb::IOStatus PowerCutFs::CreateDirIfMissing(const std::string& dirname,
                                                 const rocksdb::IOOptions& options,
                                                 rocksdb::IODebugContext* dbg) {
  return Mutate([&] { return target()->CreateDirIfMissing(dirname, options, dbg); });
}

rocksdb::IOStatus PowerCutFs::DeleteDir(const std::string& dirname,
                                        const rocksdb::IOOptions& options,
                                        rocksdb::IODebugContext* dbg) {
  return Mutate([&] { return target()->DeleteDir(dirname, options, dbg); });
}

rocksdb::IOStatus PowerCutFs::DropUnsynced(PowerCutDamage* damage) {
  std::lock_guard lock(mu_);
  cut_ = true;
  const rocksdb::IOOptions io;
  for (const auto& [name, state] : files_) {
    uint64_t on_disk = 0;
    if (!target()->GetFileSize(name, io, &on_disk, nullptr).ok() || on_disk <= state.synced) {
      continue;
    }
    // The default FileSystem has no Truncate of a closed file; this harness is POSIX-only.
    if (::truncate(name.c_str(), static_cast<off_t>(state.synced)) != 0) {
      return rocksdb::IOStatus::IOError("truncating " + name, std::strerror(errno));
    }
    ++damage->files_truncated;
    damage->bytes_dropped += on_disk - state.synced;
  }
  for (const auto& [path, before] : unsynced_entries_) {
    rocksdb::IOStatus s = before ? rocksdb::WriteStringToFile(target(), *before, path, true)
                                 : target()->DeleteFile(path, io, nullptr);
    if (s.IsNotFound()) continue;  // created and deleted again since the last directory sync
    if (!s.ok()) return s;
    ++damage->entries_reverted;
  }
  files_.clear();
  unsynced_entries_.clear();
  return rocksdb::IOStatus::OK();
}

}  // namespace verdict::testing
