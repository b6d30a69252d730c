#include "server/bearer.h"

#include <cctype>

namespace verdict::server {

std::optional<std::string_view> BearerToken(std::string_view authorization) {
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

}  // namespace verdict::server
