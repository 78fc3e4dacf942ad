#include "base/status.h"

namespace ddpscope {

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
  }
  return "Unknown";
}

int Status::exitCode() const {
  switch (m_code) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return 2;
    default:
      return 1;
  }
}

std::string Status::toString() const {
  if (isOk()) return "OK";
  return std::string(statusCodeName(m_code)) + ": " + m_message;
}

Status Status::withContext(const std::string& prefix) const {
  if (isOk()) return *this;
  return Status(m_code, prefix + ": " + m_message);
}

}  // namespace ddpscope
