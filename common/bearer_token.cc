#include "common/bearer_token.h"

#include <cctype>
#include <cstdio>
#include <sstream>
#include <string>

namespace verdict {

Status CheckBearerToken(std::string_view token) {
  if (token.empty()) return InvalidArgumentError("is empty");
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c >= 0x21 && c <= 0x7e) continue;
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02x", c);
    return InvalidArgumentError("holds a byte that cannot go in an HTTP header (" +
                                std::string(byte) + " at offset " + std::to_string(i) +
                                "; a token is one word of visible ASCII)");
  }
  return Status::Ok();
}

std::optional<std::string_view> BearerTokenOf(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) {
      return std::nullopt;
    }
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') return std::nullopt;  // "Bearerx …" is another scheme
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty()) return std::nullopt;
  return rest;
}

Result<std::vector<NodeTokenLine>> ParseNodeTokensFile(std::string_view text,
                                                       const std::string& file_name) {
  std::vector<NodeTokenLine> lines;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::string where = file_name + ":" + std::to_string(number);
    std::istringstream fields(line);
    NodeTokenLine entry;
    std::string extra;
    if (!(fields >> entry.node_id >> entry.token) || (fields >> extra)) {
      return InvalidArgumentError(where + ": expected 'node_id token'");
    }
    if (Status valid = CheckBearerToken(entry.token); !valid.ok()) {
      return InvalidArgumentError(where + ": node " + entry.node_id + "'s token " +
                                  valid.message());
    }
    lines.push_back(std::move(entry));
  }
  if (lines.empty()) {
    return InvalidArgumentError(file_name + " names no node token (is it empty, or cut short?)");
  }
  return lines;
}

}  // namespace verdict
