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

// One parameter of a query: its name, and its value as written (no decoding).
struct QueryParam {
  std::string_view name;
  std::string_view value;  // empty when has_value is false
  bool has_value = false;  // the parameter has a '=' ("all=" has an empty value, "all" none)
};

// The parameters of `target`'s query ("/v1/events?after=10&epoch=ab"), in their order, views
// into `target`; none without a '?'.
inline std::vector<QueryParam> QueryParams(std::string_view target) {
  std::vector<QueryParam> params;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return params;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      params.push_back({.name = pair, .value = {}, .has_value = false});
    } else {
      params.push_back(
          {.name = pair.substr(0, eq), .value = pair.substr(eq + 1), .has_value = true});
    }
  }
  return params;
}

// The value of the first parameter `name` of `target`'s query, as written, or nullopt if it has
// none (a parameter without '=' has no value).
inline std::optional<std::string_view> QueryValue(std::string_view target, std::string_view name) {
  for (const QueryParam& p : QueryParams(target)) {
    if (p.name == name && p.has_value) return p.value;
  }
  return std::nullopt;
}

}  // namespace verdict::server
