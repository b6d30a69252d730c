#include "tests/support/etcd_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "tests/support/http_client.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";

std::string Url(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

}  // namespace

bool EtcdCluster::Installed() { return ::access(kEtcdBinary, X_OK) == 0; }

std::unique_ptr<EtcdCluster> EtcdCluster::Start(const std::string& dir, int members,
                                                const std::vector<std::string>& extra_args) {
  if (!Installed()) {
    std::fprintf(stderr, "etcd is not installed (apt-get install etcd-server)\n");
    return nullptr;
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  cluster->extra_args_ = extra_args;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.data_dir = dir + "/" + m.name + ".etcd";
    m.log = dir + "/" + m.name + ".log";
    m.client_port = FreeLoopbackPort();
    m.peer_port = FreeLoopbackPort();
    while (m.peer_port == m.client_port) m.peer_port = FreeLoopbackPort();
    if (!cluster->initial_cluster_.empty()) cluster->initial_cluster_ += ",";
    cluster->initial_cluster_ += m.name + "=" + Url(m.peer_port);
    cluster->members_.push_back(std::move(m));
  }
  for (int i = 0; i < members; ++i) {
    if (!cluster->Launch(i)) return nullptr;
  }
  if (!WaitUntil([&] { return cluster->Healthy(); }, std::chrono::seconds(30))) {
    std::fprintf(stderr, "the etcd cluster in %s did not become healthy\n", dir.c_str());
    return nullptr;
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (Member& m : members_) {
    if (m.process && m.process->Running()) m.process->Terminate();
  }
}

bool EtcdCluster::Launch(int i) {
  Member& m = members_[i];
  std::vector<std::string> argv = {
      kEtcdBinary, "--name", m.name, "--data-dir", m.data_dir, "--listen-client-urls",
      Url(m.client_port), "--advertise-client-urls", Url(m.client_port), "--listen-peer-urls",
      Url(m.peer_port), "--initial-advertise-peer-urls", Url(m.peer_port), "--initial-cluster",
      initial_cluster_, "--initial-cluster-state", "new", "--initial-cluster-token", "verdict-test",
      // Quick elections on loopback, so a killed leader is replaced
      // within a second or two.
      "--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn"};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  m.process = ChildProcess::Start(argv, {}, m.log);
  return m.process != nullptr;
}

std::string EtcdCluster::url() const {
  std::string url = "etcd://";
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) url += ",";
    url += "127.0.0.1:" + std::to_string(members_[i].client_port);
  }
  return url;
}

void EtcdCluster::Kill(int i) {
  if (members_[i].process) members_[i].process->Kill();
}

bool EtcdCluster::Restart(int i) { return Launch(i); }

void EtcdCluster::Pause(int i) {
  if (members_[i].process) ::kill(members_[i].process->pid(), SIGSTOP);
}

void EtcdCluster::Resume(int i) {
  if (members_[i].process) ::kill(members_[i].process->pid(), SIGCONT);
}

bool EtcdCluster::Healthy() {
  int healthy = 0, running = 0;
  for (Member& m : members_) {
    if (!m.process || !m.process->Running()) continue;
    ++running;
    const HttpResponse r =
        HttpCall(m.client_port, "GET", "/health", {}, "", std::chrono::milliseconds(1000));
    if (r.status == 200 && r.body.find("\"true\"") != std::string::npos) ++healthy;
  }
  return running > 0 && healthy * 2 > size();
}

}  // namespace verdict::testing
