#include "runtime/plugin_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace tpu::rt {
namespace {

TEST(PluginLog, ClassifiesAbslLines) {
  EXPECT_EQ(LineLevel("I0000 00:00:1796153730.280170    3150 pjrt_c_api_cpu_internal.cc:59] "
                      "cpu_device_count set via create_options: 1\n"),
            LogLevel::kInfo);
  EXPECT_EQ(LineLevel("W1201 19:36:20.000000    12 gpu.cc:3] slow\n"), LogLevel::kWarning);
  EXPECT_EQ(LineLevel("WARNING: All log messages before absl::InitializeLog() is called are "
                      "written to STDERR\n"),
            LogLevel::kWarning);
  EXPECT_EQ(LineLevel("E1201 19:36:20.000000    12 client.cc:3] failed\n"), LogLevel::kError);
  EXPECT_EQ(LineLevel("Traceback (most recent call last):\n"), LogLevel::kError);
  EXPECT_EQ(LineLevel("I think so\n"), LogLevel::kError);
}

void Emit(const char* text) {
  ASSERT_EQ(write(STDERR_FILENO, text, std::strlen(text)), static_cast<ssize_t>(std::strlen(text)));
}

std::string Filtered(LogLevel level) {
  ::testing::internal::CaptureStderr();
  {
    PluginLogFilter filter(level);
    Emit(
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n");
    Emit("I0000 00:00:17.2    31 x.cc:59] cpu_device_count set via create_options: 1\n");
    Emit("E0000 00:00:17.2    31 x.cc:60] a real failure\n");
    Emit("plain text without a newline");
  }
  return ::testing::internal::GetCapturedStderr();
}

TEST(PluginLog, KeepsOnlyLinesAtTheLevel) {
  EXPECT_EQ(Filtered(LogLevel::kError),
            "E0000 00:00:17.2    31 x.cc:60] a real failure\nplain text without a newline");
  std::string warn = Filtered(LogLevel::kWarning);
  EXPECT_NE(warn.find("absl::InitializeLog"), std::string::npos);
  EXPECT_EQ(warn.find("cpu_device_count"), std::string::npos);
  EXPECT_NE(Filtered(LogLevel::kInfo).find("cpu_device_count"), std::string::npos);
}

}  // namespace
}  // namespace tpu::rt
