// Bounded waits for tests. Every wait in a test goes through one of these, so that a condition that never
// comes true fails the test after a deadline with a message naming what was awaited, instead of hanging
// until ctest's timeout kills the binary with no clue. Thread-safe (no shared state).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace falcon::testsupport {

// Polls `pred` every `every` until it holds or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every = std::chrono::milliseconds(100));

// The same, as an assertion: success, or a failure saying "timed out after N ms waiting for <what>"
// (plus `detail()` when given, e.g. a log tail, evaluated only on failure).
//   ASSERT_TRUE(WaitFor("the Pod to be deleted", [&] { return ...; }, 5s));
::testing::AssertionResult WaitFor(std::string_view what, const std::function<bool()>& pred,
                                   std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds every = std::chrono::milliseconds(10),
                                   const std::function<std::string()>& detail = nullptr);

}  // namespace falcon::testsupport
