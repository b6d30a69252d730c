// ArrayLiteral: a PostgreSQL array literal built one element at a time, how the lobby passes
// arrays as statement parameters. Text elements are always quoted and escaped, so no input can
// change the array's shape. Numbers are written by std::to_chars: a double as the shortest text
// that reads back as the same double. A settlement's arguments are some hundreds of kilobytes a
// call, so the literal is appended to a string, never streamed a character at a time
// (bench/RESULTS.md, "The lobby's own share of the drain"). A value type; not thread-safe.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace verdict::lobby::pg {

class ArrayLiteral {
 public:
  template <typename T>
  void Add(T value) {
    Separate();
    if constexpr (std::is_same_v<T, bool>) {
      out_.push_back(value ? 't' : 'f');
    } else if constexpr (std::is_floating_point_v<T>) {
      AddDouble(static_cast<double>(value));
    } else {
      static_assert(std::is_integral_v<T>, "an array element is a number, a bool or text");
      char text[24];
      out_.append(text, std::to_chars(text, text + sizeof(text), value).ptr);
    }
  }
  void AddNull() {
    Separate();
    out_ += "NULL";
  }
  void AddText(std::string_view text) {
    Separate();
    out_.push_back('"');
    size_t plain = 0;  // the start of the run of characters that need no escape
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '"' && text[i] != '\\') continue;
      out_.append(text, plain, i - plain);
      out_.push_back('\\');
      plain = i;
    }
    out_.append(text, plain);
    out_.push_back('"');
  }
  // A bytea element from its hex digits ("\\x…" inside the quotes).
  void AddHexBytes(std::string_view hex) {
    Separate();
    out_ += "\"\\\\x";
    out_ += hex;
    out_.push_back('"');
  }
  std::string str() const& { return out_ + '}'; }
  std::string str() && {  // the literal itself, not a copy
    out_.push_back('}');
    return std::move(out_);
  }

 private:
  void AddDouble(double value) {
    if (std::isnan(value)) {
      out_ += "NaN";  // float8in's own spellings
    } else if (std::isinf(value)) {
      out_ += value > 0 ? "Infinity" : "-Infinity";
    } else {
      char text[32];
      out_.append(text, std::to_chars(text, text + sizeof(text), value).ptr);
    }
  }
  void Separate() {
    if (!first_) out_.push_back(',');
    first_ = false;
  }
  std::string out_ = "{";
  bool first_ = true;
};

}  // namespace verdict::lobby::pg
