// A progress line: a redrawn bar on a terminal, plain lines otherwise.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace stoker::cli {

class Progress {
 public:
  explicit Progress(std::string label) : label_(std::move(label)), tty_(::isatty(2)) {}

  // `extra` is appended, e.g. "45.1 MB/s".
  void update(std::uint64_t done, std::uint64_t total, double seconds, const std::string& extra) {
    const bool last = done >= total;
    if (!tty_ && !last && seconds - last_print_ < 2.0) return;
    last_print_ = seconds;
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
    const int width = 24;
    const int fill = total ? static_cast<int>(static_cast<double>(width) * static_cast<double>(done) / static_cast<double>(total)) : width;
    char line[256];
    std::snprintf(line, sizeof(line), "%s: %s%llu/%llu records %3.0f%%  %.0f rec/s  %s  ETA %d:%02d", label_.c_str(),
                  tty_ ? ("[" + std::string(static_cast<std::size_t>(fill), '#') +
                          std::string(static_cast<std::size_t>(width - fill), '.') + "] ")
                             .c_str()
                       : "",
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                  total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0, rate, extra.c_str(),
                  static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
    if (tty_) {
      std::fprintf(stderr, "\r%s\033[K%s", line, last ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", line);
    }
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool tty_;
  double last_print_ = -1e9;
};

}  // namespace stoker::cli
