#include "common/bearer_token.h"

#include <cctype>
#include <cstdio>
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

}  // namespace verdict
