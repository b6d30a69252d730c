// ArrayLiteral: a PostgreSQL array literal built one element at a time, how the lobby passes
// arrays as statement parameters. Text elements are always quoted and escaped, so no input can
// change the array's shape. A value type; not thread-safe.
#pragma once

#include <sstream>
#include <string>
#include <type_traits>

namespace verdict::lobby::pg {

class ArrayLiteral {
 public:
  template <typename T>
  void Add(T value) {
    Separate();
    if constexpr (std::is_same_v<T, bool>) {
      out_ << (value ? 't' : 'f');
    } else if constexpr (std::is_floating_point_v<T>) {
      // Exactly: 17 significant digits read back as the same double.
      out_.precision(17);
      out_ << value;
    } else {
      out_ << value;
    }
  }
  void AddNull() {
    Separate();
    out_ << "NULL";
  }
  void AddText(const std::string& text) {
    Separate();
    out_ << '"';
    for (char c : text) {
      if (c == '"' || c == '\\') out_ << '\\';
      out_ << c;
    }
    out_ << '"';
  }
  // A bytea element from its hex digits ("\\x…" inside the quotes).
  void AddHexBytes(const std::string& hex) {
    Separate();
    out_ << "\"\\\\x" << hex << '"';
  }
  std::string str() const { return out_.str() + '}'; }

 private:
  void Separate() {
    if (!first_) out_ << ',';
    first_ = false;
  }
  std::ostringstream out_{"{", std::ios::ate};
  bool first_ = true;
};

}  // namespace verdict::lobby::pg
