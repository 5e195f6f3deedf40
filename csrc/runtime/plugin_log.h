// The plugin's own log lines (absl INFO and WARNING lines such as "cpu_device_count set via
// create_options", or "All log messages before absl::InitializeLog() is called are written to
// STDERR") are not for torchtpu's users. While the plugin starts, file descriptor 2 points at a
// temporary file; afterwards only lines at or above the chosen level go on to the real stderr.
// TORCHTPU_LOG_LEVEL=info|warning|error (default error) chooses it.
#pragma once

#include <cstdio>
#include <string_view>

namespace tpu::rt {

enum class LogLevel { kInfo = 0, kWarning = 1, kError = 2 };

// TORCHTPU_LOG_LEVEL, read each time (tests change it).
LogLevel PluginLogLevel();
// The severity of one line: an absl line's letter (I, W, E, F); absl's note about logging before
// InitializeLog is a warning; any other text counts as an error, so it is shown.
LogLevel LineLevel(std::string_view line);

// Filters fd 2 from construction to destruction. Does nothing at level info.
class PluginLogFilter {
 public:
  explicit PluginLogFilter(LogLevel level = PluginLogLevel());
  ~PluginLogFilter();
  PluginLogFilter(const PluginLogFilter&) = delete;
  PluginLogFilter& operator=(const PluginLogFilter&) = delete;

 private:
  LogLevel level_;
  std::FILE* capture_ = nullptr;
  int saved_ = -1;  // the real fd 2
};

}  // namespace tpu::rt
