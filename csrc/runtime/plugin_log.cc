#include "runtime/plugin_log.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tpu::rt {

LogLevel PluginLogLevel() {
  const char* v = std::getenv("TORCHTPU_LOG_LEVEL");
  if (v == nullptr) return LogLevel::kError;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "info" || s == "debug" || s == "0") return LogLevel::kInfo;
  if (s == "warning" || s == "warn" || s == "1") return LogLevel::kWarning;
  return LogLevel::kError;
}

LogLevel LineLevel(std::string_view line) {
  if (line.starts_with("WARNING: All log messages before absl::InitializeLog()")) {
    return LogLevel::kWarning;
  }
  // absl: "I0000 00:00:1796153730.280170    3150 file.cc:59] message".
  if (line.size() > 6 && std::strchr("IWEF", line[0]) != nullptr &&
      std::isdigit(static_cast<unsigned char>(line[1])) && line.find("] ") != std::string::npos) {
    if (line[0] == 'I') return LogLevel::kInfo;
    if (line[0] == 'W') return LogLevel::kWarning;
  }
  return LogLevel::kError;
}

PluginLogFilter::PluginLogFilter(LogLevel level) : level_(level) {
  if (level_ == LogLevel::kInfo) return;
  capture_ = std::tmpfile();
  if (capture_ == nullptr) return;  // nowhere to put it: show everything
  std::fflush(stderr);
  saved_ = dup(STDERR_FILENO);
  if (saved_ < 0 || dup2(fileno(capture_), STDERR_FILENO) < 0) {
    if (saved_ >= 0) close(saved_);
    saved_ = -1;
    std::fclose(capture_);
    capture_ = nullptr;
  }
}

PluginLogFilter::~PluginLogFilter() {
  if (capture_ == nullptr) return;
  std::fflush(stderr);
  dup2(saved_, STDERR_FILENO);
  close(saved_);
  std::rewind(capture_);
  std::string line;
  for (int c = std::fgetc(capture_);; c = std::fgetc(capture_)) {
    if (c != EOF) line.push_back(static_cast<char>(c));
    if ((c == '\n' || c == EOF) && !line.empty()) {
      if (LineLevel(line) >= level_) std::fwrite(line.data(), 1, line.size(), stderr);
      line.clear();
    }
    if (c == EOF) break;
  }
  std::fflush(stderr);
  std::fclose(capture_);
}

}  // namespace tpu::rt
