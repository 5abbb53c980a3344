// Helpers for the plugins' integration tests: run a plugin binary with a bounded wait, read its JSONL.
// Header-only, test code only.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "plugins/common/jsonl_writer.h"

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

// Runs argv (argv[0] is the binary path) with extra environment entries; returns the exit status, or -1
// when it did not finish within `timeout` (it is then killed) or died from a signal.
inline int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
                      std::chrono::seconds timeout = std::chrono::seconds(120)) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("FALCON_INPUT_DIR=", 0) == 0 || kv.rfind("FALCON_OUTPUT_DIR=", 0) == 0) continue;
    env_store.push_back(kv);
  }
  for (const auto& kv : extra_env) env_store.push_back(kv);
  std::vector<char*> envp;
  for (auto& kv : env_store) envp.push_back(kv.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), envp.data()) != 0) return -2;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << argv[0] << " did not finish within " << timeout.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
