#include "common/bearer_token.h"

#include <cctype>
#include <cstdio>
#include <fstream>
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

namespace {

// A bearer token must be one header-safe word; `where` names its source.
Status CheckToken(const std::string& token, const std::string& where) {
  Status valid = CheckBearerToken(token);
  return valid.ok() ? valid : InvalidArgumentError(where + " " + valid.message());
}

}  // namespace

Result<std::string> BearerTokenFrom(const std::string& value, const std::string& file,
                                    const std::string& flag, const std::string& file_flag) {
  if (file.empty()) {
    if (!value.empty()) VERDICT_RETURN_IF_ERROR(CheckToken(value, flag));
    return value;
  }
  std::ifstream in(file);
  if (!in) return NotFoundError("cannot read the token file " + file + " (" + file_flag + ")");
  std::stringstream content;
  content << in.rdbuf();
  std::string token = content.str();
  const size_t begin = token.find_first_not_of(" \t\r\n");
  const size_t end = token.find_last_not_of(" \t\r\n");
  token = begin == std::string::npos ? "" : token.substr(begin, end - begin + 1);
  VERDICT_RETURN_IF_ERROR(CheckToken(token, "the token file " + file));
  return token;
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
