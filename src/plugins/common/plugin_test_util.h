// Helpers for the plugins' integration tests: run a plugin binary with a bounded wait, read its JSONL.
// Header-only, test code only.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "plugins/common/jsonl_writer.h"
#include "support/process.h"

extern char** environ;

namespace falcon::plugins::testing {

inline std::string PluginPath(const std::string& name) {
  return std::string(FALCON_BIN_DIR) + "/../plugins/" + name;
}
inline std::string ReferenceData(const std::string& rel) { return std::string(FALCON_REFERENCE_DATA) + "/" + rel; }
inline std::string TestData(const std::string& rel) { return std::string(FALCON_SOURCE_DIR) + "/testdata/" + rel; }

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "plugin-it-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& rel, const std::string& content) const {
    std::filesystem::path p = std::filesystem::path(path_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

 private:
  std::string path_;
};

// Runs argv (argv[0] is the binary path) with extra environment entries ("K=V"); returns the exit status,
// or -1 when it did not finish within `timeout` (it is then killed, and the test fails) or died from a
// signal. The plugin's output is copied to the test's stderr.
inline int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
                      std::chrono::seconds timeout = std::chrono::seconds(120)) {
  testsupport::Subprocess::Options o;
  o.unset_env = {"FALCON_INPUT_DIR", "FALCON_OUTPUT_DIR"};
  for (const auto& kv : extra_env) {
    auto eq = kv.find('=');
    o.env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  auto r = testsupport::Subprocess::Run(argv, timeout, o);
  std::cerr << r.output;
  if (r.timed_out) {
    ADD_FAILURE() << argv[0] << " did not finish within " << timeout.count() << " s (killed it)";
    return -1;
  }
  return r.code;
}

// Like RunProcess, and returns the process' stdout+stderr too.
struct ProcessOutput {
  int code = -1;
  std::string output;
};
inline ProcessOutput RunProcessOutput(const std::vector<std::string>& argv,
                                      std::chrono::seconds timeout = std::chrono::seconds(120)) {
  testsupport::Subprocess::Options o;
  o.unset_env = {"FALCON_INPUT_DIR", "FALCON_OUTPUT_DIR"};
  auto r = testsupport::Subprocess::Run(argv, timeout, o);
  std::cerr << r.output;
  if (r.timed_out) {
    ADD_FAILURE() << argv[0] << " did not finish within " << timeout.count() << " s (killed it)";
    return {-1, r.output};
  }
  return {r.code, r.output};
}

inline std::vector<Json> ReadJsonl(const std::string& path) {
  std::vector<Json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(Json::parse(line));
  return out;
}

inline std::vector<Json> OfType(const std::vector<Json>& recs, const std::string& type) {
  std::vector<Json> out;
  for (const auto& r : recs) {
    if (r["record_type"] == type) out.push_back(r);
  }
  return out;
}

}  // namespace falcon::plugins::testing
