// HttpRequest / HttpReply: an HTTP exchange as plain values, so that the lobby's and the node's
// request handling is tested and run without Beast. Only server/http_server.cc and
// server/http_client.cc convert them to and from the wire.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace verdict::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", …
  std::string target;  // path and query, e.g. "/v1/events?after=10"
  std::string content_type;
  std::string accept;
  std::string authorization;
  std::string body;
};

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After)
};

// The value of `name` in `target`'s query ("/v1/events?after=10&epoch=ab"), as written (no
// decoding), or nullopt if it has none.
inline std::optional<std::string_view> QueryValue(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
      return pair.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

}  // namespace verdict::server
