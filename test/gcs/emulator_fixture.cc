#include "emulator_fixture.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "support/process.h"

namespace falcon::objstore::testing {

absl::StatusOr<std::unique_ptr<Emulator>> Emulator::Start() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "falcon-gcs-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  std::unique_ptr<Emulator> e(new Emulator(tmpl));
  absl::Status st = e->Run("start");
  if (!st.ok()) return st;
  std::ifstream in(e->dir_ / "endpoint");
  std::getline(in, e->host_port_);
  if (e->host_port_.empty()) return absl::InternalError("emulator.sh start wrote no endpoint file");
  return e;
}

Emulator::~Emulator() {
  (void)Run("stop");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::Status Emulator::Stop() { return Run("stop"); }
absl::Status Emulator::Restart() { return Run("start"); }

absl::Status Emulator::Run(const std::string& verb) {
  std::string script = std::string(FALCON_SOURCE_DIR) + "/test/gcs/emulator.sh";
  std::string log = (dir_ / "script.log").string();
  std::string cmd = absl::StrCat("'", script, "' ", verb, " '", dir_.string(), "' >>'", log, "' 2>&1");
  auto run = testsupport::Subprocess::Run({"/bin/sh", "-c", cmd}, std::chrono::minutes(5));
  int rc = run.timed_out ? -1 : run.code;
  if (run.timed_out) {
    std::ofstream(log, std::ios::app) << "\n(timed out after 5 min waiting for emulator.sh " << verb << ")\n";
  }
  if (rc != 0) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return absl::InternalError(absl::StrCat("emulator.sh ", verb, " failed (", rc, "): ", ss.str()));
  }
  return absl::OkStatus();
}

}  // namespace falcon::objstore::testing
