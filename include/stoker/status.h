// Status codes and the exception thrown at stoker's API edge.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace stoker {

// A small closed set of error codes. The sample path returns Status values;
// the API edge (constructors, options, Loader::next()) throws stoker::Error.
enum class Code {
  kOk = 0,
  kInvalidArgument,   // bad option or parameter
  kNotFound,          // file or directory missing
  kIOError,           // read failed
  kCorrupt,           // bytes do not parse as the format they claim
  kUnsupported,       // a valid file in a format or variant stoker cannot decode
  kResourceExhausted, // a size cap was exceeded (image pixels, memory)
  kCancelled,         // the loader was stopped
  kUnavailable,       // remote data could not be fetched (retries spent, object changed): never skipped as corrupt
  kInternal,          // an exception escaped a sample's processing (a bug): caught, counted, reported
  kPython,            // the caller's Python stage (LoaderOptions::hook) raised on a sample: counted like corrupt
};

// Short stable name of a code, e.g. "corrupt"; used as the stats key.
const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status Corrupt(std::string m) { return {Code::kCorrupt, std::move(m)}; }
  static Status Unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: <message>"
  std::string to_string() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Thrown at the API edge. The Python bindings map kInvalidArgument to
// ValueError, kNotFound/kIOError to OSError, and the rest to RuntimeError.
class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  explicit Error(const Status& s) : Error(s.code(), s.message()) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

}  // namespace stoker
