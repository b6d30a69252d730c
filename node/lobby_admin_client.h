// LobbyAdminClient: the simulated battle host's blocking client for POST /v1/rooms (room
// allocation with the admin token), on the node's HTTP client (delivery/http_client.h). Each
// call uses a fresh connection and tries the lobby URLs in order, each under `timeout` for
// connect, write and read. Thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

struct AllocateReply {
  int status = 0;    // HTTP status; 0 if no lobby could be reached
  std::string code;  // the problem's code for an error reply
  std::string detail;
};

class LobbyAdminClient {
 public:
  LobbyAdminClient(std::vector<std::string> lobby_urls, std::string admin_token,
                   std::chrono::milliseconds timeout = std::chrono::seconds(5));
  AllocateReply Allocate(const v1::RoomAllocation& allocation) const;

 private:
  std::vector<std::string> urls_;
  std::string token_;
  std::chrono::milliseconds timeout_;
};

}  // namespace verdict::node
