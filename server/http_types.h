// HttpRequest / HttpReply: an HTTP exchange as plain values, so that the lobby's and the node's
// request handling is tested and run without Beast. Only server/http_server.cc and
// server/http_call.cc convert them to and from the wire.
#pragma once

#include <string>
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

}  // namespace verdict::server
