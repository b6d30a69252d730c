#include "node/lobby_admin_client.h"

#include <variant>

#include "common/host_port.h"
#include "delivery/http_client.h"
#include "proto/problem.h"
#include "proto/wire.h"

namespace verdict::node {
namespace {

// How the simulator introduces itself to the lobby.
constexpr char kUserAgent[] = "verdict-node";

}  // namespace

LobbyAdminClient::LobbyAdminClient(std::vector<std::string> lobby_urls, std::string admin_token,
                                   std::chrono::milliseconds timeout)
    : urls_(std::move(lobby_urls)), token_(std::move(admin_token)), timeout_(timeout) {}

AllocateReply LobbyAdminClient::Allocate(const v1::RoomAllocation& allocation) const {
  AllocateReply reply;
  delivery::HttpConnectionOptions options;
  options.timeout = timeout_;
  options.user_agent = kUserAgent;
  delivery::BlockingHttpClient client(options);
  for (const auto& url : urls_) {
    // The simulator's allocations are plain HTTP (a test and demo tool); https lobbies are
    // skipped here.
    const std::optional<HttpUrl> lobby = ParseHttpUrl(url);
    if (!lobby || lobby->tls) continue;
    delivery::HttpRequest request;
    request.target = "/v1/rooms";
    request.bearer_token = token_;
    request.content_type = wire::kProtobufType;
    request.body = wire::DeterministicBytes(allocation);
    const delivery::HttpOutcome outcome = client.Post(*lobby, std::move(request));
    const auto* res = std::get_if<delivery::HttpResponse>(&outcome);
    if (res == nullptr) continue;  // this lobby cannot be reached: try the next
    reply.status = res->status;
    if (reply.status >= 300) {
      if (auto problem = wire::ParseProblem(res->body, res->content_type)) {
        reply.code = problem->code();
        reply.detail = problem->detail();
      }
    }
    return reply;
  }
  return reply;
}

}  // namespace verdict::node
