// What a body must look like before protobuf parses it.
//
// JSON (RFC 8259, as proto3's JSON mapping reads it): one object whose keys are field names of
// the message type (the proto name or the camelCase JSON name, which name the same field), each
// at most once, and at most one member of a oneof. A value is `null` or of its field's kind:
//   message        an object, checked the same way one level deeper;
//   repeated       an array of values of the field's kind (an array inside it is refused);
//   map            an object of distinct string keys;
//   integer        an integer literal, -?(0|[1-9][0-9]*), or a string of exactly one, within the
//                  field's range: no fraction or exponent, since protobuf would round such a
//                  number through a double (123456789012345678.0 is 123456789012345680);
//   enum           a string (the value's name) or an integer literal;
//   float, double  a number or a string ("NaN", "Infinity");
//   bool           true or false;
//   string, bytes  a string, of at most max_string_bytes bytes once unescaped (bytes: decoded);
//                  a player id (the player_id_field option) also a non-negative integer literal,
//                  which DecodeBody quotes before protobuf reads it (42 and "42": one player).
// Well-known types (google.protobuf.*) are checked only for depth and size.
//
// Protobuf binary: a sequence of fields, each a varint tag (field number << 3 | wire type) and a
// value: 0 varint, 1 eight bytes, 2 a varint length and that many bytes, 5 four bytes. Groups
// (3, 4) are refused. A field of the type, with its wire type (or a packed repeated scalar), is
// counted, and a message value is checked as a message one level deeper; any other field is
// unknown to the type and kept by protobuf, so it is counted against max_unknown_fields.
//
// Both passes read each byte once and hold only one frame per level of nesting, at most
// max_depth of them.
#include "proto/body_check.h"

#include "verdict/v1/verdict.pb.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace verdict::wire {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

constexpr size_t kNoIndex = std::numeric_limits<size_t>::max();
// Field names are short; a longer key names no field.
constexpr size_t kMaxKeyBytes = 128;
// The longest integer literal: "-9223372036854775808" and "18446744073709551615" have 20.
constexpr size_t kMaxIntegerChars = 20;
// A number longer than this is no value a verdict message holds.
constexpr size_t kMaxNumberChars = 64;
// What an error message quotes of the body.
constexpr size_t kMaxQuotedBytes = 40;

// One tally per field (or oneof) of a message: in place for the small messages verdict has, so
// that checking a body allocates nothing per message.
template <typename T>
class PerField {
 public:
  explicit PerField(int n) {
    if (n > kInPlace) {
      heap_.resize(n);
    } else {
      std::fill_n(in_place_.begin(), n, T{});
    }
  }
  T& operator[](int i) { return heap_.empty() ? in_place_[i] : heap_[i]; }

 private:
  static constexpr int kInPlace = 16;
  std::array<T, kInPlace> in_place_;
  std::vector<T> heap_;
};

// Where a check is, for error messages: the field (and element) being read at each level of
// nesting, from the body down. One slot per level, written as the check goes, so that reading a
// field allocates nothing; rendered only when there is an error to report.
class Path {
 public:
  explicit Path(int max_depth) : steps_(std::max(max_depth, 1)) {}
  // Reading `field` (its element `index`) of the message `depth` levels down (from 1).
  void Enter(int depth, const FieldDescriptor* field, size_t index = kNoIndex) {
    steps_[depth - 1] = {field, index};
    length_ = depth;
  }
  // Done with the field of the message `depth` levels down.
  void Leave(int depth) { length_ = depth - 1; }
  // "results[3].players[0].player_id: ", or "" at the body's own level.
  std::string Where() const {
    std::string out;
    for (size_t i = 0; i < length_; ++i) {
      if (!out.empty()) out += '.';
      out += steps_[i].field->name();
      if (steps_[i].index != kNoIndex) out += '[' + std::to_string(steps_[i].index) + ']';
    }
    return out.empty() ? out : out + ": ";
  }

 private:
  struct Step {
    const FieldDescriptor* field;
    size_t index;  // the element of a repeated field, or kNoIndex
  };
  std::vector<Step> steps_;
  size_t length_ = 0;
};

// `text` as an error message may show it: valid UTF-8, cut short.
std::string Quoted(std::string_view text) {
  const bool cut = text.size() > kMaxQuotedBytes;
  return '"' + ValidUtf8(text.substr(0, kMaxQuotedBytes)) + (cut ? "…" : "") + '"';
}

std::string Plural(size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

bool IsWellKnown(const Descriptor& type) {
  return type.file()->name().rfind("google/protobuf/", 0) == 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Whether `literal` is -?(0|[1-9][0-9]*) and within the range of `type` (an integer or enum).
bool IsIntegerIn(std::string_view literal, FieldDescriptor::CppType type) {
  const bool negative = !literal.empty() && literal.front() == '-';
  const std::string_view digits = literal.substr(negative ? 1 : 0);
  if (digits.empty() || (digits.size() > 1 && digits.front() == '0')) return false;
  for (char c : digits) {
    if (!IsDigit(c)) return false;
  }
  uint64_t magnitude = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  constexpr uint64_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();
  switch (type) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_ENUM:
      return magnitude <= kInt32Max + (negative ? 1 : 0);
    case FieldDescriptor::CPPTYPE_INT64:
      return magnitude <= kInt64Max + (negative ? 1 : 0);
    case FieldDescriptor::CPPTYPE_UINT32:
      return !negative && magnitude <= std::numeric_limits<uint32_t>::max();
    case FieldDescriptor::CPPTYPE_UINT64:
      return !negative;
    default:
      return false;
  }
}

const FieldDescriptor* FieldNamed(const Descriptor& type, std::string_view key) {
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* field = type.field(i);
    if (field->name() == key || field->json_name() == key) return field;
  }
  return nullptr;
}

// Appends code point `cp` to `out` as UTF-8 (as protobuf will decode the escape).
void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

bool IsPlayerIdField(const FieldDescriptor& field) {
  return field.options().GetExtension(v1::player_id_field);
}

class JsonCheck {
 public:
  JsonCheck(std::string_view text, const DecodeLimits& limits,
            std::vector<std::pair<size_t, size_t>>* integer_ids)
      : text_(text), limits_(limits), path_(limits.max_depth), integer_ids_(integer_ids) {}

  Status Body(const Descriptor& type) {
    SkipSpace();
    if (IsWellKnown(type)) {
      // A Struct, a Value, a Timestamp…: its JSON is not its fields; protobuf reads it.
      VERDICT_RETURN_IF_ERROR(AnyValue(1));
    } else {
      if (!At('{')) return Invalid("the body is not a JSON object");
      VERDICT_RETURN_IF_ERROR(Object(type, 1));
    }
    SkipSpace();
    if (pos_ < text_.size()) return Invalid("text follows the JSON object");
    return Status::Ok();
  }

 private:
  // The object at pos_ ('{') as a `type`, `depth` messages down from the body.
  Status Object(const Descriptor& type, int depth) {
    if (depth > limits_.max_depth) {
      return Invalid("messages are nested more than " + std::to_string(limits_.max_depth) +
                     " deep");
    }
    ++pos_;
    PerField<char> seen(type.field_count());
    PerField<const FieldDescriptor*> oneof_member(type.oneof_decl_count());
    SkipSpace();
    if (At('}')) {
      ++pos_;
      return Status::Ok();
    }
    for (;;) {
      SkipSpace();
      if (!At('"')) return Invalid("expected a field name");
      std::string key;
      size_t key_bytes = 0;
      VERDICT_RETURN_IF_ERROR(String(&key, kMaxKeyBytes + 1, &key_bytes));
      const FieldDescriptor* field = key_bytes <= kMaxKeyBytes ? FieldNamed(type, key) : nullptr;
      if (field == nullptr) {
        return Invalid("unknown field " + Quoted(key) + " in " + type.full_name());
      }
      if (seen[field->index()]) {
        return Invalid("field " + field->name() + " is given twice (as " + Quoted(key) + ")");
      }
      seen[field->index()] = true;
      if (const auto* oneof = field->real_containing_oneof()) {
        const FieldDescriptor*& member = oneof_member[oneof->index()];
        if (member != nullptr) {
          return Invalid(member->name() + " and " + field->name() + " are both given; " +
                         oneof->name() + " takes one");
        }
        member = field;
      }
      SkipSpace();
      if (!At(':')) return Invalid("expected ':' after a field name");
      ++pos_;
      SkipSpace();
      path_.Enter(depth, field);
      VERDICT_RETURN_IF_ERROR(Value(*field, depth));
      path_.Leave(depth);
      SkipSpace();
      if (At(',')) {
        ++pos_;
        continue;
      }
      if (At('}')) {
        ++pos_;
        return Status::Ok();
      }
      return Invalid("expected ',' or '}'");
    }
  }

  // The value of `field`, whatever its cardinality.
  Status Value(const FieldDescriptor& field, int depth) {
    if (Literal("null")) return Status::Ok();
    if (field.is_map()) return Map(field, depth);
    if (!field.is_repeated()) return Singular(field, depth);
    if (!At('[')) return Invalid("must be an array");
    ++pos_;
    SkipSpace();
    if (At(']')) {
      ++pos_;
      return Status::Ok();
    }
    for (size_t i = 0;; ++i) {
      path_.Enter(depth, &field, i);
      VERDICT_RETURN_IF_ERROR(CountElement(i));
      VERDICT_RETURN_IF_ERROR(Singular(field, depth));
      SkipSpace();
      if (At(',')) {
        ++pos_;
        SkipSpace();
        continue;
      }
      if (At(']')) {
        ++pos_;
        return Status::Ok();
      }
      return Invalid("expected ',' or ']'");
    }
  }

  Status Map(const FieldDescriptor& field, int depth) {
    if (!At('{')) return Invalid("must be an object");
    ++pos_;
    SkipSpace();
    if (At('}')) {
      ++pos_;
      return Status::Ok();
    }
    const FieldDescriptor& value = *field.message_type()->map_value();
    std::set<std::string> keys;
    for (size_t i = 0;; ++i) {
      VERDICT_RETURN_IF_ERROR(CountElement(i));
      if (!At('"')) return Invalid("expected a key");
      std::string key;
      size_t key_bytes = 0;
      VERDICT_RETURN_IF_ERROR(String(&key, limits_.max_string_bytes + 1, &key_bytes));
      if (key_bytes > limits_.max_string_bytes) return TooLong();
      if (!keys.insert(key).second) return Invalid("key " + Quoted(key) + " is given twice");
      SkipSpace();
      if (!At(':')) return Invalid("expected ':' after a key");
      ++pos_;
      SkipSpace();
      VERDICT_RETURN_IF_ERROR(Singular(value, depth));
      SkipSpace();
      if (At(',')) {
        ++pos_;
        SkipSpace();
        continue;
      }
      if (At('}')) {
        ++pos_;
        return Status::Ok();
      }
      return Invalid("expected ',' or '}'");
    }
  }

  // One value of `field`'s kind (an element, if it is repeated).
  Status Singular(const FieldDescriptor& field, int depth) {
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (IsWellKnown(*field.message_type())) return AnyValue(2 * depth);
        if (!At('{')) return Invalid("must be an object");
        return Object(*field.message_type(), depth + 1);
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return Integer(field.cpp_type());
      case FieldDescriptor::CPPTYPE_ENUM:
        if (At('"')) return BoundedString(1);
        return Integer(field.cpp_type());
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        if (At('"')) return BoundedString(1);
        if (At('-') || (pos_ < text_.size() && IsDigit(text_[pos_]))) {
          std::string_view token;
          bool integral = false;
          return Number(&token, &integral);
        }
        return Invalid("must be a number");
      case FieldDescriptor::CPPTYPE_BOOL:
        if (Literal("true") || Literal("false")) return Status::Ok();
        return Invalid("must be true or false");
      case FieldDescriptor::CPPTYPE_STRING:
        if (IsPlayerIdField(field) && pos_ < text_.size() && IsDigit(text_[pos_])) {
          return IntegerId();
        }
        if (!At('"')) return Invalid("must be a string");
        // Bytes are base64: four characters for three bytes.
        return field.type() == FieldDescriptor::TYPE_BYTES ? BoundedString(4.0 / 3)
                                                           : BoundedString(1);
    }
    return Invalid("has a type this body cannot hold");
  }

  // A player id given as an integer: a non-negative integer literal, which stands for its
  // decimal string. Its place is kept for DecodeBody to quote.
  Status IntegerId() {
    const size_t begin = pos_;
    std::string_view literal;
    bool integral = false;
    VERDICT_RETURN_IF_ERROR(Number(&literal, &integral));
    if (literal.size() > kMaxIntegerChars ||
        !IsIntegerIn(literal, FieldDescriptor::CPPTYPE_UINT64)) {
      return Invalid("a player id is a string, or a non-negative integer literal, not " +
                     Quoted(literal));
    }
    if (integer_ids_ != nullptr) integer_ids_->emplace_back(begin, pos_);
    return Status::Ok();
  }

  // An integer literal, or a string of exactly one, within the range of `type`.
  Status Integer(FieldDescriptor::CppType type) {
    std::string held;
    std::string_view literal;
    if (At('"')) {
      size_t bytes = 0;
      VERDICT_RETURN_IF_ERROR(String(&held, kMaxIntegerChars + 1, &bytes));
      literal = held;
    } else if (At('-') || (pos_ < text_.size() && IsDigit(text_[pos_]))) {
      bool integral = false;
      VERDICT_RETURN_IF_ERROR(Number(&literal, &integral));
    } else {
      return Invalid("must be an integer");
    }
    if (literal.size() > kMaxIntegerChars || !IsIntegerIn(literal, type)) {
      return Invalid(
          "must be an integer literal in range, without fraction or exponent (or a "
          "string of one), not " +
          Quoted(literal));
    }
    return Status::Ok();
  }

  // A string of at most max_string_bytes bytes once decoded, `ratio` characters per byte.
  Status BoundedString(double ratio) {
    size_t bytes = 0;
    VERDICT_RETURN_IF_ERROR(String(nullptr, 0, &bytes));
    if (static_cast<double>(bytes) > static_cast<double>(limits_.max_string_bytes) * ratio) {
      return TooLong();
    }
    return Status::Ok();
  }

  // Any JSON value, `depth` containers down: checked only for depth, counts and sizes.
  Status AnyValue(int depth) {
    if (depth > 2 * limits_.max_depth) return Invalid("values are nested too deep");
    if (At('"')) return BoundedString(1);
    if (Literal("true") || Literal("false") || Literal("null")) return Status::Ok();
    if (At('-') || (pos_ < text_.size() && IsDigit(text_[pos_]))) {
      std::string_view token;
      bool integral = false;
      return Number(&token, &integral);
    }
    const bool object = At('{');
    if (!object && !At('[')) return Invalid("expected a JSON value");
    const char close = object ? '}' : ']';
    ++pos_;
    SkipSpace();
    if (At(close)) {
      ++pos_;
      return Status::Ok();
    }
    for (size_t i = 0;; ++i) {
      VERDICT_RETURN_IF_ERROR(CountElement(i));
      if (object) {
        if (!At('"')) return Invalid("expected a key");
        VERDICT_RETURN_IF_ERROR(BoundedString(1));
        SkipSpace();
        if (!At(':')) return Invalid("expected ':' after a key");
        ++pos_;
        SkipSpace();
      }
      VERDICT_RETURN_IF_ERROR(AnyValue(depth + 1));
      SkipSpace();
      if (At(',')) {
        ++pos_;
        SkipSpace();
        continue;
      }
      if (At(close)) {
        ++pos_;
        return Status::Ok();
      }
      return Invalid(std::string("expected ',' or '") + close + "'");
    }
  }

  // The element `i` (from 0) of a repeated field or map: within both counts.
  Status CountElement(size_t i) {
    if (i >= limits_.max_repeated) {
      return ResourceExhaustedError(Where() + "more than " +
                                    Plural(limits_.max_repeated, "element"));
    }
    if (++elements_ > limits_.max_elements) {
      return ResourceExhaustedError(Where() + "the body holds more than " +
                                    Plural(limits_.max_elements, "element") +
                                    " in its repeated fields, all together");
    }
    return Status::Ok();
  }

  // The string at pos_ ('"'), unescaped: its length in bytes in `*bytes`, and its first `keep`
  // bytes in `*decoded` (when not null).
  Status String(std::string* decoded, size_t keep, size_t* bytes) {
    ++pos_;
    size_t n = 0;
    for (;;) {
      if (pos_ >= text_.size()) return Invalid("a string is not terminated");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        *bytes = n;
        return Status::Ok();
      }
      if (c < 0x20) return Invalid("a string holds a control character");
      if (c != '\\') {
        size_t end = pos_ + 1;
        while (end < text_.size() && text_[end] != '"' && text_[end] != '\\' &&
               static_cast<unsigned char>(text_[end]) >= 0x20) {
          ++end;
        }
        if (decoded != nullptr && decoded->size() < keep) {
          decoded->append(text_.substr(pos_, std::min(end - pos_, keep - decoded->size())));
        }
        n += end - pos_;
        pos_ = end;
        continue;
      }
      if (++pos_ >= text_.size()) return Invalid("a string is not terminated");
      std::string unescaped;
      switch (text_[pos_++]) {
        case '"':
          unescaped = "\"";
          break;
        case '\\':
          unescaped = "\\";
          break;
        case '/':
          unescaped = "/";
          break;
        case 'b':
          unescaped = "\b";
          break;
        case 'f':
          unescaped = "\f";
          break;
        case 'n':
          unescaped = "\n";
          break;
        case 'r':
          unescaped = "\r";
          break;
        case 't':
          unescaped = "\t";
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return Invalid("a \\u escape needs four hex digits");
          if (cp >= 0xd800 && cp <= 0xdbff && text_.substr(pos_, 2) == "\\u") {
            const size_t at = pos_;
            pos_ += 2;
            uint32_t low = 0;
            if (Hex4(&low) && low >= 0xdc00 && low <= 0xdfff) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            } else {
              pos_ = at;  // a lone surrogate: protobuf decides
            }
          }
          AppendUtf8(cp, &unescaped);
          break;
        }
        default:
          return Invalid("a string holds an unknown escape");
      }
      if (decoded != nullptr && decoded->size() < keep) {
        decoded->append(unescaped.substr(0, keep - decoded->size()));
      }
      n += unescaped.size();
    }
  }

  bool Hex4(uint32_t* value) {
    if (text_.size() - pos_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_ + i];
      v <<= 4;
      if (IsDigit(c)) {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        return false;
      }
    }
    pos_ += 4;
    *value = v;
    return true;
  }

  // The number at pos_, as RFC 8259 writes one; `*integral` if it has no fraction or exponent.
  Status Number(std::string_view* token, bool* integral) {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
      return pos_ > from;
    };
    if (At('-')) ++pos_;
    if (At('0')) {
      ++pos_;
    } else if (!digits()) {
      return Invalid("a number is malformed");
    }
    *integral = true;
    if (At('.')) {
      ++pos_;
      *integral = false;
      if (!digits()) return Invalid("a number is malformed");
    }
    if (At('e') || At('E')) {
      ++pos_;
      *integral = false;
      if (At('+') || At('-')) ++pos_;
      if (!digits()) return Invalid("a number is malformed");
    }
    *token = text_.substr(start, pos_ - start);
    if (token->size() > kMaxNumberChars) {
      return Invalid("a number is longer than " + std::to_string(kMaxNumberChars) + " characters");
    }
    return Status::Ok();
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool At(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  std::string Where() const { return path_.Where(); }

  Status Invalid(const std::string& what) const {
    return InvalidArgumentError(Where() + what + " (at byte " + std::to_string(pos_) + ")");
  }

  Status TooLong() const {
    return Invalid("longer than " + Plural(limits_.max_string_bytes, "byte"));
  }

  const std::string_view text_;
  const DecodeLimits& limits_;
  size_t pos_ = 0;
  size_t elements_ = 0;
  Path path_;
  std::vector<std::pair<size_t, size_t>>* const integer_ids_;
};

// The wire type a field's values are written with (a packed repeated scalar uses 2 instead).
int WireTypeOf(const FieldDescriptor& field) {
  switch (field.type()) {
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
    case FieldDescriptor::TYPE_DOUBLE:
      return 1;
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
    case FieldDescriptor::TYPE_FLOAT:
      return 5;
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return 2;
    case FieldDescriptor::TYPE_GROUP:
      return 3;
    default:
      return 0;  // the varint types
  }
}

struct WireMessage;

// What the protobuf pass needs of one field, read from its descriptor once.
struct WireField {
  const FieldDescriptor* field = nullptr;  // null: no such field
  int wire = 0;                            // the wire type of one value
  bool packable = false;                   // a repeated scalar, which may come packed
  bool text = false;                       // a string or bytes value
  int slot = -1;                           // its count among the type's repeated fields
  const WireMessage* message = nullptr;    // a message value's type
};

// One message type: its fields by number. Built once per type and then only read, by any thread.
struct WireMessage {
  // Numbers up to this index `direct`; the rest (rare) are searched in `far`.
  static constexpr int kMaxDirectNumber = 255;
  std::vector<WireField> direct;
  std::vector<WireField> far;
  int repeated = 0;  // repeated fields, each with a slot

  const WireField* Find(uint32_t number) const {
    if (number < direct.size()) return direct[number].field ? &direct[number] : nullptr;
    for (const WireField& f : far) {
      if (static_cast<uint32_t>(f.field->number()) == number) return &f;
    }
    return nullptr;
  }
};

// The WireMessage of `type`, built on first use together with those of the types it holds.
// Descriptors live as long as the process, and so do these.
const WireMessage& WireMessageOf(const Descriptor& type) {
  using Built = std::unordered_map<const Descriptor*, std::unique_ptr<WireMessage>>;
  static std::mutex mu;
  static Built* const built = new Built();
  const std::function<const WireMessage*(const Descriptor&)> build = [&](const Descriptor& d) {
    auto [it, fresh] = built->try_emplace(&d);
    if (!fresh) return static_cast<const WireMessage*>(it->second.get());
    it->second = std::make_unique<WireMessage>();  // before the fields: a type may hold itself
    WireMessage* m = it->second.get();
    int highest = 0;
    for (int i = 0; i < d.field_count(); ++i) highest = std::max(highest, d.field(i)->number());
    m->direct.resize(std::min(highest, WireMessage::kMaxDirectNumber) + 1);
    for (int i = 0; i < d.field_count(); ++i) {
      const FieldDescriptor* f = d.field(i);
      WireField w;
      w.field = f;
      w.wire = WireTypeOf(*f);
      w.packable = f->is_packable();
      w.text = f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
      if (f->is_repeated()) w.slot = m->repeated++;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) w.message = build(*f->message_type());
      if (f->number() <= WireMessage::kMaxDirectNumber) {
        m->direct[f->number()] = w;
      } else {
        m->far.push_back(w);
      }
    }
    return static_cast<const WireMessage*>(m);
  };
  std::lock_guard lock(mu);
  return *build(type);
}

// Reads the varint at `*at` (at most ten bytes); false if it is cut short or longer.
inline bool ReadVarint(std::string_view bytes, size_t* at, uint64_t* value) {
  if (*at < bytes.size() && static_cast<unsigned char>(bytes[*at]) < 0x80) {  // most tags, ids
    *value = static_cast<unsigned char>(bytes[(*at)++]);
    return true;
  }
  uint64_t v = 0;
  for (int shift = 0; shift < 70 && *at < bytes.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(bytes[(*at)++]);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

class ProtobufCheck {
 public:
  explicit ProtobufCheck(const DecodeLimits& limits) : limits_(limits), path_(limits.max_depth) {}

  // `bytes` as a `type`, `depth` messages down from the body.
  Status Message(std::string_view bytes, const WireMessage& type, int depth) {
    if (depth > limits_.max_depth) {
      return Invalid("messages are nested more than " + std::to_string(limits_.max_depth) +
                     " deep");
    }
    PerField<size_t> counts(type.repeated);
    size_t at = 0;
    while (at < bytes.size()) {
      uint64_t tag = 0;
      if (!ReadVarint(bytes, &at, &tag) || tag > std::numeric_limits<uint32_t>::max() ||
          (tag >> 3) == 0) {
        return Invalid("a field tag is malformed");
      }
      const int wire = static_cast<int>(tag & 7);
      std::string_view payload;
      uint64_t scalar = 0;
      switch (wire) {
        case 0:
          if (!ReadVarint(bytes, &at, &scalar)) return Invalid("a varint is cut short");
          break;
        case 1:
        case 5: {
          const size_t width = wire == 1 ? 8 : 4;
          if (bytes.size() - at < width) return Invalid("a fixed-size value is cut short");
          at += width;
          break;
        }
        case 2: {
          uint64_t length = 0;
          if (!ReadVarint(bytes, &at, &length) || length > bytes.size() - at) {
            return Invalid("a length runs past the end of its message");
          }
          payload = bytes.substr(at, length);
          at += length;
          break;
        }
        default:
          return Invalid("wire type " + std::to_string(wire) + " is not accepted (groups are not)");
      }
      const WireField* f = type.Find(static_cast<uint32_t>(tag >> 3));
      const bool packed = f != nullptr && f->packable && wire == 2;
      if (f == nullptr || (wire != f->wire && !packed)) {
        // Protobuf keeps it as an unknown field (one object each).
        if (++unknown_ > limits_.max_unknown_fields) {
          return ResourceExhaustedError(Where() + "the body holds more than " +
                                        Plural(limits_.max_unknown_fields, "unknown field"));
        }
        continue;
      }
      if (f->slot >= 0) {
        size_t& count = counts[f->slot];
        path_.Enter(depth, f->field, count);
        size_t added = 1;
        if (packed) VERDICT_RETURN_IF_ERROR(PackedCount(payload, *f, &added));
        count += added;
        elements_ += added;
        if (count > limits_.max_repeated) {
          path_.Enter(depth, f->field);
          return ResourceExhaustedError(Where() + "more than " +
                                        Plural(limits_.max_repeated, "element"));
        }
        if (elements_ > limits_.max_elements) {
          return ResourceExhaustedError(Where() + "the body holds more than " +
                                        Plural(limits_.max_elements, "element") +
                                        " in its repeated fields, all together");
        }
      } else {
        path_.Enter(depth, f->field);
      }
      if (!packed && f->message != nullptr) {
        VERDICT_RETURN_IF_ERROR(Message(payload, *f->message, depth + 1));
      } else if (!packed && f->text && payload.size() > limits_.max_string_bytes) {
        return Invalid("longer than " + Plural(limits_.max_string_bytes, "byte"));
      }
      path_.Leave(depth);
    }
    return Status::Ok();
  }

 private:
  // The values in a packed repeated field's payload.
  Status PackedCount(std::string_view payload, const WireField& field, size_t* n) {
    if (field.wire == 1 || field.wire == 5) {
      const size_t width = field.wire == 1 ? 8 : 4;
      if (payload.size() % width != 0) return Invalid("a packed field is cut short");
      *n = payload.size() / width;
      return Status::Ok();
    }
    if (!payload.empty() && (static_cast<unsigned char>(payload.back()) & 0x80) != 0) {
      return Invalid("a packed field is cut short");
    }
    *n = 0;
    for (char c : payload) *n += (static_cast<unsigned char>(c) & 0x80) == 0;
    return Status::Ok();
  }

  std::string Where() const { return path_.Where(); }
  Status Invalid(const std::string& what) const { return InvalidArgumentError(Where() + what); }

  const DecodeLimits& limits_;
  size_t elements_ = 0;
  size_t unknown_ = 0;
  Path path_;
};

}  // namespace

Status CheckJsonBody(std::string_view json, const Descriptor& type, const DecodeLimits& limits,
                     std::vector<std::pair<size_t, size_t>>* integer_ids) {
  return JsonCheck(json, limits, integer_ids).Body(type);
}

Status CheckProtobufBody(std::string_view bytes, const Descriptor& type,
                         const DecodeLimits& limits) {
  return ProtobufCheck(limits).Message(bytes, WireMessageOf(type), 1);
}

}  // namespace verdict::wire
