// The controller's backoff is the shared policy (net/retry.h): capped exponential, jitter from an injected
// Random. This alias keeps `controller::Backoff` compiling; new code names net::Backoff directly.
#pragma once

#include "net/retry.h"

namespace falcon::controller {

using Backoff = ::falcon::net::Backoff;

}  // namespace falcon::controller
