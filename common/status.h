// Status and Result<T>: how every fallible verdict call reports failure. No exceptions cross a
// library boundary; adapters (RocksDB, libpqxx) translate their errors into these codes.
// Thread-safety: plain values, safe to copy between threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace verdict {

// Codes carry retry meaning (as in absl::StatusCode): kUnavailable means the same call may
// succeed later; kInvalidArgument and kFailedPrecondition mean it will not without a change.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the input is wrong; retrying the same input fails the same way
  kNotFound,            // the thing asked for does not exist
  kAlreadyExists,       // a different thing already holds this identity
  kFailedPrecondition,  // the system is not in a state that allows the call (e.g. shard count)
  kResourceExhausted,   // a limit was hit (record too large, disk full)
  kUnavailable,         // transient: retry the same call later
  kDataLoss,            // stored bytes are unreadable
  kInternal,            // a bug or an unexpected failure of a dependency
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Marks a deliberately ignored status, so that doing so is explicit and greppable.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
inline Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

namespace internal {
// Ends the process with "value() of a Result holding an error: <status>" on stderr: what
// Result<T>::value() does when there is no value (a caller's bug, as with absl::StatusOr).
[[noreturn]] void DieOfValueOfError(const Status& status);
}  // namespace internal

// Either a value or a non-OK Status. Reading the value of an error (value(), * or ->) is a
// caller's bug: it aborts the process naming the status, and never throws (no exception crosses
// the library boundary). Test ok() first.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
  // `status` must not be OK: a Result holds a value or says why it has none. An OK status is a
  // caller's bug, and becomes INTERNAL rather than a Result that is neither (as
  // absl::StatusOr does), so the caller sees an error instead of a missing value.
  Result(Status status)  // NOLINT: implicit by design
      : v_(status.ok() ? Status(StatusCode::kInternal, "Result constructed from an OK status")
                       : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & {
    CheckValue();
    return *std::get_if<T>(&v_);
  }
  const T& value() const& {
    CheckValue();
    return *std::get_if<T>(&v_);
  }
  T&& value() && {
    CheckValue();
    return std::move(*std::get_if<T>(&v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void CheckValue() const {
    if (!ok()) internal::DieOfValueOfError(*std::get_if<Status>(&v_));
  }

  std::variant<T, Status> v_;
};

}  // namespace verdict

// Returns early from the enclosing function with the status if it is not OK.
#define VERDICT_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::verdict::Status verdict_status_ = (expr);        \
    if (!verdict_status_.ok()) return verdict_status_; \
  } while (false)
