// ConstantTimeEquals: the comparison of a presented bearer token with a known one, written so
// that how long it takes does not reveal how much of the token matched. Used by the lobby's and the
// node ingest's authentication; header-only so that a test can run the same loop over bytes that
// record what it reads. Pure, so thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace verdict {

// Reads each byte of `a` and of `b` exactly once, in order, whatever their contents, and has no
// early exit: the work depends on the two lengths only, never on where the inputs first differ.
// `Bytes` needs size() and an operator[] whose result converts to unsigned char.
template <typename Bytes>
bool ConstantTimeEqualsOver(const Bytes& a, const Bytes& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return ConstantTimeEqualsOver(a, b);
}

}  // namespace verdict
