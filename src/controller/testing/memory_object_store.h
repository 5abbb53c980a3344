// Forwarding header: the fakes now live next to their interfaces (objstore/testing, leader/testing).
#pragma once

#include "leader/testing/fake_elector.h"
#include "objstore/testing/memory_object_store.h"

namespace falcon::controller::testing {
using FakeElector = leader::testing::FakeElector;
using MemoryObjectStore = objstore::testing::MemoryObjectStore;
}  // namespace falcon::controller::testing
