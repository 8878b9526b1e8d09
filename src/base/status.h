// Status and Expected<T>: how errors cross boundaries (files, CLI, HTTP, JSON).
// A Status carries a message that names the thing, the expected and the actual value.
// This header depends on nothing but the standard library.
#pragma once

#include <fmt/core.h>

#include <string>
#include <utility>
#include <variant>

namespace ponder {

// What kind of failure, for a caller that answers each differently (an HTTP server: 400, 413-like
// context errors, 503) without reading the message.
enum class StatusKind {
  kFailed,        // anything else
  kInvalidInput,  // the input is wrong (an id outside the vocabulary, a bad option)
  kTooLong,       // the request does not fit the context
  kBusy,          // try again later (a full queue, shutting down)
};

class Status {
 public:
  Status() = default;  // OK
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }
  template <typename... Args>
  static Status errorf(fmt::format_string<Args...> f, Args&&... args) {
    return Status(fmt::format(f, std::forward<Args>(args)...), true);
  }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }
  StatusKind kind() const { return kind_; }
  // A copy of a failed status with its kind set.
  Status with_kind(StatusKind kind) const {
    Status s = *this;
    s.kind_ = kind;
    return s;
  }

  // Returns a copy with "context: " prepended to the message.
  Status with_context(const std::string& context) const {
    Status s = *this;
    if (failed_) s.message_ = context + ": " + message_;
    return s;
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
  StatusKind kind_ = StatusKind::kFailed;
};

// Either a value or a failed Status.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT: must be a failed status

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Status& status() const {
    static const Status kOk;
    return has_value() ? kOk : std::get<1>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ponder

// Propagate a failed Status from an expression returning Status.
#define PONDER_RETURN_IF_ERROR(expr) \
  do {                               \
    ::ponder::Status _st = (expr);   \
    if (!_st.is_ok()) return _st;    \
  } while (0)

#define PONDER_CONCAT_INNER(a, b) a##b
#define PONDER_CONCAT(a, b) PONDER_CONCAT_INNER(a, b)
// PONDER_ASSIGN_OR_RETURN(auto x, expr): unwraps an Expected or returns its Status.
#define PONDER_ASSIGN_OR_RETURN(lhs, expr) \
  PONDER_ASSIGN_OR_RETURN_IMPL(PONDER_CONCAT(_exp_, __LINE__), lhs, expr)
#define PONDER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.has_value()) return tmp.status();         \
  lhs = std::move(tmp).value()
