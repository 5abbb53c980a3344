// Runs the falcon CLI in-process for tests: captured stdout/stderr, an injected environment, a clock
// whose sleeps advance time instantly, and golden-file comparison.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "common/clock.h"

namespace falcon::cli::testing {

// Now() is fixed until a SleepFor, which advances it (wall and monotonic time) by the slept duration and
// returns at once.
struct StepClock : FakeClock {
  explicit StepClock(Time start) : FakeClock(start) { SetAdvanceOnSleep(true); }
};

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

// 2023-11-14T22:13:20Z plus one hour: the fake server's records are one hour old.
inline Time TestNow() { return Time(std::chrono::seconds(1'700'000'000 + 3600)); }

struct CliRunner {
  std::map<std::string, std::string> env;
  size_t width = 100;
  bool tty = false;

  CliResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), "falcon");
    std::ostringstream out, err;
    StepClock clock(TestNow());
    Io io;
    io.out = &out;
    io.err = &err;
    io.out_is_tty = tty;
    io.err_is_tty = tty;
    io.terminal_width = width;
    io.env = [this](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
    io.clock = &clock;
    io.poll_interval = std::chrono::milliseconds(1000);
    io.client_options.connect_timeout = std::chrono::milliseconds(2000);
    io.client_options.request_timeout = std::chrono::milliseconds(10000);
    CliResult r;
    r.code = falcon::cli::Run(args, io);
    r.out = out.str();
    r.err = err.str();
    return r;
  }
};

// Compares `actual` with test/cli/golden/NAME; FALCON_UPDATE_GOLDEN=1 rewrites the file instead.
inline void ExpectGolden(const std::string& name, const std::string& actual) {
  std::filesystem::path path = std::filesystem::path(FALCON_SOURCE_DIR) / "test/cli/golden" / name;
  const char* update = std::getenv("FALCON_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "golden file " << path << " is missing; run the test with FALCON_UPDATE_GOLDEN=1 to "
                  << "create it, then review it. Actual output:\n"
                  << actual;
  std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(expected, actual) << "output differs from golden file " << path
                              << " (FALCON_UPDATE_GOLDEN=1 rewrites it after a deliberate change)";
}

}  // namespace falcon::cli::testing
