#include "tests/support/private_postgres.h"

#include "tests/support/process.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace verdict::testing {
namespace {

// The newest PostgreSQL installed under /usr/lib/postgresql/*/bin.
std::string FindBinDir() {
  std::string best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = entry.path().string() + "/bin";
    if (std::filesystem::exists(bin + "/initdb") &&
        (best.empty() || std::stoi(entry.path().filename()) >
                             std::stoi(std::filesystem::path(best).parent_path().filename()))) {
      best = bin;
    }
  }
  return best;
}

}  // namespace

std::unique_ptr<PrivatePostgres> PrivatePostgres::Start() {
  std::unique_ptr<PrivatePostgres> pg(new PrivatePostgres());
  pg->bin_dir_ = FindBinDir();
  if (pg->bin_dir_.empty()) {
    std::fprintf(stderr, "no PostgreSQL server binaries under /usr/lib/postgresql\n");
    return nullptr;
  }
  std::string pattern = "/tmp/verdict-pg-XXXXXX";
  pg->dir_ = ::mkdtemp(pattern.data());
  if (::geteuid() == 0) {
    const passwd* owner = ::getpwnam("postgres");
    if (!owner || ::chown(pg->dir_.c_str(), owner->pw_uid, owner->pw_gid) != 0) {
      std::fprintf(stderr, "running as root needs a 'postgres' user to own the server\n");
      return nullptr;
    }
  }
  pg->port_ = FreeLoopbackPort();
  if (!pg->AsOwner(pg->bin_dir_ + "/initdb -D " + pg->dir_ +
                   "/data -A trust -U postgres --no-sync >" + pg->dir_ + "/initdb.log 2>&1")) {
    std::fprintf(stderr, "initdb failed; see %s/initdb.log\n", pg->dir_.c_str());
    return nullptr;
  }
  if (!pg->Restart()) return nullptr;
  return pg;
}

PrivatePostgres::~PrivatePostgres() {
  if (running_) Stop(/*immediate=*/true);
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::string PrivatePostgres::conninfo(const std::string& dbname) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + dbname +
         " connect_timeout=5";
}

bool PrivatePostgres::Stop(bool immediate) {
  running_ = false;
  return AsOwner(bin_dir_ + "/pg_ctl -D " + dir_ + "/data -w -m " +
                 (immediate ? "immediate" : "fast") + " stop >>" + dir_ + "/server.log 2>&1");
}

bool PrivatePostgres::Restart() {
  const std::string options = "-p " + std::to_string(port_) + " -k " + dir_ +
                              " -c listen_addresses=127.0.0.1 -c max_connections=100";
  running_ = AsOwner(bin_dir_ + "/pg_ctl -D " + dir_ + "/data -w -l " + dir_ + "/server.log -o '" +
                     options + "' start >/dev/null 2>&1");
  if (!running_)
    std::fprintf(stderr, "PostgreSQL did not start; see %s/server.log\n", dir_.c_str());
  return running_;
}

bool PrivatePostgres::AsOwner(const std::string& command) const {
  const std::string line =
      ::geteuid() == 0 ? "runuser -u postgres -- sh -c \"" + command + "\"" : command;
  return std::system(line.c_str()) == 0;
}

}  // namespace verdict::testing
