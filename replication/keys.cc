#include "replication/keys.h"

#include <cstdio>

namespace verdict::replication {
namespace {

bool Plain(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string Escape(const std::string& node_id) {
  std::string out;
  for (unsigned char c : node_id) {
    if (Plain(c)) {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> Unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      if (!Plain(static_cast<unsigned char>(text[i]))) return std::nullopt;
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = HexDigit(text[i + 1]), lo = HexDigit(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// The escaped node id between `area` (P results/ or P nodes/) and the next '/' (or the end).
std::optional<std::string> NodeAfter(const std::string& area, const std::string& key,
                                     bool need_slash) {
  if (key.compare(0, area.size(), area) != 0) return std::nullopt;
  const size_t slash = key.find('/', area.size());
  if (need_slash != (slash != std::string::npos)) return std::nullopt;
  const std::string escaped = key.substr(area.size(), slash - area.size());
  if (escaped.empty()) return std::nullopt;
  return Unescape(escaped);
}

}  // namespace

std::string AllResultsPrefix(const std::string& prefix) { return prefix + "results/"; }

std::string NodeResultsPrefix(const std::string& prefix, const std::string& node_id) {
  return AllResultsPrefix(prefix) + Escape(node_id) + "/";
}

std::string ResultKey(const std::string& prefix, const std::string& node_id, uint64_t room_id,
                      int64_t ended_at_ms) {
  char tail[48];
  std::snprintf(tail, sizeof tail, "%020llu/%lld", static_cast<unsigned long long>(room_id),
                static_cast<long long>(ended_at_ms));
  return NodeResultsPrefix(prefix, node_id) + tail;
}

std::string NodesPrefix(const std::string& prefix) { return prefix + "nodes/"; }

std::string NodeLivenessKey(const std::string& prefix, const std::string& node_id) {
  return NodesPrefix(prefix) + Escape(node_id);
}

std::optional<std::string> NodeOfResultKey(const std::string& prefix, const std::string& key) {
  return NodeAfter(AllResultsPrefix(prefix), key, true);
}

std::optional<std::string> NodeOfLivenessKey(const std::string& prefix, const std::string& key) {
  return NodeAfter(NodesPrefix(prefix), key, false);
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // etcd: every key from `prefix` on
}

}  // namespace verdict::replication
