// Status / StatusOr<T>: recoverable errors as values.
//
// Library APIs return Status or StatusOr<T>; exceptions from third-party code
// (nlohmann::json) are caught at the parser boundary and turned into a Status
// whose message names the file, the JSON path and what was expected.
// main() prints status.message() and exits with status.exitCode().
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "base/check.h"

namespace ddpscope {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad user input: flags, files, fields (exit code 2)
  kNotFound,            // a named thing does not exist (exit code 2)
  kFailedPrecondition,  // a state machine used out of order
  kInternal,            // a bug or an unexpected library failure
  kUnavailable,         // a peer or device is missing
  kUnimplemented,
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : m_code(code), m_message(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return m_code == StatusCode::kOk; }
  StatusCode code() const { return m_code; }
  const std::string& message() const { return m_message; }
  // Process exit code for a CLI that fails with this status: 2 for bad input, 1 otherwise.
  int exitCode() const;
  // "InvalidArgument: message"
  std::string toString() const;

  // Returns a copy with `prefix + ": "` in front of the message (adds context on the way up).
  Status withContext(const std::string& prefix) const;

 private:
  StatusCode m_code = StatusCode::kOk;
  std::string m_message;
};

inline Status invalidArgument(std::string msg) {
  return {StatusCode::kInvalidArgument, std::move(msg)};
}
inline Status notFound(std::string msg) {
  return {StatusCode::kNotFound, std::move(msg)};
}
inline Status failedPrecondition(std::string msg) {
  return {StatusCode::kFailedPrecondition, std::move(msg)};
}
inline Status internalError(std::string msg) {
  return {StatusCode::kInternal, std::move(msg)};
}
inline Status unavailable(std::string msg) {
  return {StatusCode::kUnavailable, std::move(msg)};
}
inline Status unimplemented(std::string msg) {
  return {StatusCode::kUnimplemented, std::move(msg)};
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : m_status(std::move(status)) {  // NOLINT(google-explicit-constructor)
    DDPSCOPE_CHECK_MSG(!m_status.isOk(), "StatusOr constructed from an OK Status without a value");
  }
  StatusOr(T value) : m_value(std::move(value)) {}  // NOLINT(google-explicit-constructor)

  bool isOk() const { return m_status.isOk(); }
  const Status& status() const { return m_status; }

  T& value() & {
    DDPSCOPE_CHECK_MSG(isOk(), m_status.message().c_str());
    return *m_value;
  }
  const T& value() const& {
    DDPSCOPE_CHECK_MSG(isOk(), m_status.message().c_str());
    return *m_value;
  }
  T&& value() && {
    DDPSCOPE_CHECK_MSG(isOk(), m_status.message().c_str());
    return std::move(*m_value);
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status m_status;
  std::optional<T> m_value;
};

}  // namespace ddpscope

#define DDPSCOPE_CONCAT_INNER(a, b) a##b
#define DDPSCOPE_CONCAT(a, b) DDPSCOPE_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::ddpscope::Status ddpscope_status_ = (expr);          \
    if (!ddpscope_status_.isOk()) return ddpscope_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, f()): declares x from a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(DDPSCOPE_CONCAT(ddpscope_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.isOk()) return tmp.status();       \
  lhs = std::move(tmp).value()
