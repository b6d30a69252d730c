#include "node/lobby_admin_client.h"

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "delivery/deliverer.h"
#include "proto/wire.h"

namespace verdict::node {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

}  // namespace

LobbyAdminClient::LobbyAdminClient(std::vector<std::string> lobby_urls, std::string admin_token,
                                   std::chrono::milliseconds timeout)
    : urls_(std::move(lobby_urls)), token_(std::move(admin_token)), timeout_(timeout) {}

AllocateReply LobbyAdminClient::Allocate(const v1::RoomAllocation& allocation) const {
  AllocateReply reply;
  for (const auto& url : urls_) {
    std::string host;
    uint16_t port = 0;
    bool tls = false;
    // The simulator's allocations are plain HTTP (a test and demo tool); https lobbies are
    // skipped here.
    if (!delivery::ParseLobbyUrl(url, &host, &port, &tls) || tls) continue;
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (ec) continue;
    stream.expires_after(timeout_);
    stream.connect(endpoints, ec);
    if (ec) continue;
    http::request<http::string_body> req(http::verb::post, "/v1/rooms", 11);
    req.set(http::field::host, host);
    req.set(http::field::authorization, "Bearer " + token_);
    req.set(http::field::content_type, std::string(wire::kProtobufType));
    req.body() = wire::DeterministicBytes(allocation);
    req.prepare_payload();
    http::write(stream, req, ec);
    if (ec) continue;
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res, ec);
    if (ec) continue;
    reply.status = res.result_int();
    if (reply.status >= 300) {
      google::protobuf::Struct problem;
      if (google::protobuf::util::JsonStringToMessage(res.body(), &problem).ok()) {
        const auto& fields = problem.fields();
        if (auto it = fields.find("code"); it != fields.end())
          reply.code = it->second.string_value();
        if (auto it = fields.find("detail"); it != fields.end()) {
          reply.detail = it->second.string_value();
        }
      }
    }
    return reply;
  }
  return reply;
}

}  // namespace verdict::node
