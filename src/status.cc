#include "stoker/status.h"

namespace stoker {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kIOError: return "io_error";
    case Code::kCorrupt: return "corrupt";
    case Code::kUnsupported: return "unsupported";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kCancelled: return "cancelled";
    case Code::kInternal: return "internal";
    case Code::kUnavailable: return "unavailable";
    case Code::kPython: return "python";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

}  // namespace stoker
