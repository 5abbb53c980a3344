// A private fake-gcs-server for one test binary, run through test/gcs/emulator.sh in a temp dir.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace falcon::objstore::testing {

class Emulator {
 public:
  // Starts an emulator with its data in a fresh temp dir (filesystem backend, so Stop + Start keeps the
  // objects). Fails with the script's output when it does not come up.
  static absl::StatusOr<std::unique_ptr<Emulator>> Start();
  ~Emulator();  // stops it and removes the temp dir

  absl::Status Stop();
  absl::Status Restart();  // Start again after Stop: same port, same data
  std::string host_port() const { return host_port_; }
  std::string endpoint() const { return "http://" + host_port_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  explicit Emulator(std::filesystem::path dir) : dir_(std::move(dir)) {}
  absl::Status Run(const std::string& verb);

  std::filesystem::path dir_;
  std::string host_port_;
};

}  // namespace falcon::objstore::testing
