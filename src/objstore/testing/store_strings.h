// String helpers over the ObjectStore interface for tests: put a string, read one back (a failed read is a
// test failure). Header-only, no state.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>

#include "objstore/object_store.h"

namespace falcon::objstore::testing {

inline absl::Status PutString(ObjectStore& store, const std::string& key, const std::string& data) {
  std::istringstream in(data);
  return store.Put(key, in);
}

inline std::string GetString(ObjectStore& store, const std::string& key, int64_t off = 0, int64_t len = -1) {
  std::ostringstream out;
  auto s = store.Get(key, out, off, len);
  EXPECT_TRUE(s.ok()) << s;
  return out.str();
}

}  // namespace falcon::objstore::testing
