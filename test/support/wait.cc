#include "support/wait.h"

#include <thread>

namespace falcon::testsupport {

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

::testing::AssertionResult WaitFor(std::string_view what, const std::function<bool()>& pred,
                                   std::chrono::milliseconds timeout, std::chrono::milliseconds every,
                                   const std::function<std::string()>& detail) {
  if (WaitFor(pred, timeout, every)) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << "timed out after " << timeout.count() << " ms waiting for "
                                               << what;
  if (detail) failure << "\n" << detail();
  return failure;
}

}  // namespace falcon::testsupport
