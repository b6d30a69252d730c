#include "common/host_port.h"

#include <limits>

namespace verdict {
namespace {

// The most digits a port may have ("65535").
constexpr size_t kMaxPortDigits = 5;

// A port of one to five digits up to 65535.
std::optional<uint16_t> ParsePort(std::string_view text) {
  if (text.empty() || text.size() > kMaxPortDigits ||
      text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  unsigned value = 0;
  for (char c : text) value = value * 10 + static_cast<unsigned>(c - '0');
  if (value > std::numeric_limits<uint16_t>::max()) return std::nullopt;
  return static_cast<uint16_t>(value);
}

// Splits an authority, "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT", into host (without
// brackets) and port; a missing port is `default_port`, or an error when there is none. A
// host with a colon must be in brackets, so "::1:80" is refused rather than guessed at.
bool SplitAuthority(std::string_view text, std::optional<uint16_t> default_port, std::string* host,
                    uint16_t* port) {
  std::string_view h;
  std::string_view rest;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    h = text.substr(1, close - 1);
    rest = text.substr(close + 1);
  } else {
    const size_t colon = text.find(':');
    h = text.substr(0, colon);
    rest = colon == std::string_view::npos ? "" : text.substr(colon);
    if (h.find(']') != std::string_view::npos) return false;
  }
  if (h.empty()) return false;
  std::optional<uint16_t> p = default_port;
  if (!rest.empty()) {
    if (!rest.starts_with(':')) return false;
    p = ParsePort(rest.substr(1));
  }
  if (!p) return false;
  *host = std::string(h);
  *port = *p;
  return true;
}

}  // namespace

bool ParseHostPort(const std::string& text, std::string* host, uint16_t* port) {
  return SplitAuthority(text, std::nullopt, host, port);
}

std::optional<HttpUrl> ParseHttpUrl(std::string_view url) {
  HttpUrl out;
  out.tls = url.starts_with("https://");
  const std::string_view scheme = out.tls ? "https://" : "http://";
  if (!url.starts_with(scheme)) return std::nullopt;
  std::string_view authority = url.substr(scheme.size());
  if (const size_t slash = authority.find('/'); slash != std::string_view::npos) {
    if (authority.substr(slash) != "/") return std::nullopt;
    authority = authority.substr(0, slash);
  }
  const uint16_t default_port = out.tls ? 443 : 80;
  if (!SplitAuthority(authority, default_port, &out.host, &out.port) || out.port == 0) {
    return std::nullopt;
  }
  return out;
}

std::string JoinHostPort(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace verdict
