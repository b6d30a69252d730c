// Parsing of network addresses: "HOST:PORT" listen addresses (IPv6 as "[::1]:8080"), shared by
// every binary's flags, and the http:// and https:// base URLs a node is given for its lobbies.
// Stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace verdict {

// Splits "HOST:PORT" into its parts; an IPv6 host comes in brackets ("[::1]:8080") and is
// returned without them. False if it is malformed: no host, no port, a port that is not digits
// or is over 65535, an IPv6 host without brackets. Port 0 is allowed (a listener's "any").
bool ParseHostPort(const std::string& text, std::string* host, uint16_t* port);

// A lobby's base URL, parsed.
struct HttpUrl {
  std::string host;  // a name or an address; IPv6 without its brackets
  uint16_t port = 0;
  bool tls = false;  // https://

  friend bool operator==(const HttpUrl&, const HttpUrl&) = default;
};

// Parses "http://HOST[:PORT][/]" or "https://HOST[:PORT][/]" (an IPv6 HOST in brackets); the
// port defaults to 80 or 443. nullopt for anything else: another scheme, a path, no host, a
// port that is not 1 to 65535.
std::optional<HttpUrl> ParseHttpUrl(std::string_view url);

// "HOST:PORT" with an IPv6 host in brackets: the Host header of a request to it, and the form
// ParseHostPort reads.
std::string JoinHostPort(const std::string& host, uint16_t port);

}  // namespace verdict
