#include "leader/lease_file_elector.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace falcon::leader {

namespace {

using json = nlohmann::json;

LeaseRecord Parse(const std::string& text) {
  LeaseRecord r;
  if (text.empty()) return r;
  try {
    json j = json::parse(text);
    r.holder = j.value("holder", "");
    r.epoch = j.value("epoch", int64_t{0});
    r.acquired_at = j.value("acquired_at", "");
  } catch (const json::exception& e) {
    spdlog::error("lease file is not valid JSON ({}); starting its epoch over", e.what());
  }
  return r;
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[4096];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), off);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

bool WriteFd(int fd, const std::string& data) {
  if (::ftruncate(fd, 0) != 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return ::fsync(fd) == 0;
}

std::string Encode(const LeaseRecord& r) {
  return json{{"holder", r.holder}, {"epoch", r.epoch}, {"acquired_at", r.acquired_at}}.dump() + "\n";
}

class LeaseFileElector : public LeaderElector {
 public:
  LeaseFileElector(LeaseFileOptions o, Clock& clock) : o_(std::move(o)), clock_(clock) {}
  ~LeaseFileElector() override { Stop(); }

  void Start(Callbacks callbacks) override {
    std::lock_guard<std::mutex> l(mu_);
    if (started_) return;
    started_ = true;
    cb_ = std::move(callbacks);
    thread_ = std::thread([this] { Loop(); });
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!started_ || stopped_) return;
      stopped_ = true;
    }
    stop_ = true;
    clock_.Notify();
    if (thread_.joinable()) thread_.join();
  }

  bool IsLeader() const override { return epoch_.load() > 0; }
  int64_t Epoch() const override { return epoch_.load(); }

 private:
  // Tries once; returns the fd holding the lock, or -1.
  int TryAcquire() {
    int fd = ::open(o_.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      spdlog::warn("leader election: cannot open lease file {}: {}", o_.path.string(), std::strerror(errno));
      return -1;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return -1;
    }
    // The file may have been replaced between open and flock: hold the lock only on the current one.
    if (!SameFile(fd)) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  bool SameFile(int fd) {
    struct stat a, b;
    if (::fstat(fd, &a) != 0 || ::stat(o_.path.c_str(), &b) != 0) return false;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }

  void Loop() {
    while (!stop_) {
      int fd = TryAcquire();
      if (fd < 0) {
        clock_.SleepFor(o_.retry_period, [this] { return stop_.load(); });
        continue;
      }
      LeaseRecord rec = Parse(ReadFd(fd));
      rec.holder = o_.identity;
      // Never go back, even if the file was lost: a replaced file restarts from what we saw last.
      rec.epoch = std::max(rec.epoch, last_epoch_) + 1;
      last_epoch_ = rec.epoch;
      rec.acquired_at = FormatRfc3339(clock_.Now());
      if (!WriteFd(fd, Encode(rec))) {
        spdlog::error("leader election: cannot write lease file {}: {}", o_.path.string(), std::strerror(errno));
        ::close(fd);
        clock_.SleepFor(o_.retry_period, [this] { return stop_.load(); });
        continue;
      }
      epoch_ = rec.epoch;
      spdlog::info("leader election: {} became leader with epoch {} (lease file {})", o_.identity, rec.epoch,
                   o_.path.string());
      if (cb_.on_started_leading) cb_.on_started_leading(rec.epoch);
      bool lost = false;
      while (!stop_) {
        clock_.SleepFor(o_.retry_period, [this] { return stop_.load(); });
        if (!stop_ && !SameFile(fd)) {
          lost = true;
          spdlog::error("leader election: lease file {} was removed or replaced; {} stops leading",
                        o_.path.string(), o_.identity);
          break;
        }
      }
      epoch_ = 0;
      if (cb_.on_stopped_leading) cb_.on_stopped_leading();
      if (!lost) {
        rec.holder.clear();  // released: keep the epoch for the next leader
        WriteFd(fd, Encode(rec));
      }
      ::close(fd);  // releases the lock
    }
  }

  const LeaseFileOptions o_;
  Clock& clock_;
  std::mutex mu_;
  bool started_ = false, stopped_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> epoch_{0};
  int64_t last_epoch_ = 0;  // elector thread only
  Callbacks cb_;
  std::thread thread_;
};

class AlwaysLeader : public LeaderElector {
 public:
  void Start(Callbacks callbacks) override {
    std::lock_guard<std::mutex> l(mu_);
    if (started_) return;
    started_ = true;
    cb_ = std::move(callbacks);
    leader_ = true;
    if (cb_.on_started_leading) cb_.on_started_leading(1);
  }
  void Stop() override {
    std::lock_guard<std::mutex> l(mu_);
    if (!leader_) return;
    leader_ = false;
    if (cb_.on_stopped_leading) cb_.on_stopped_leading();
  }
  bool IsLeader() const override { return leader_.load(); }
  int64_t Epoch() const override { return leader_.load() ? 1 : 0; }

 private:
  std::mutex mu_;
  bool started_ = false;
  std::atomic<bool> leader_{false};
  Callbacks cb_;
};

}  // namespace

absl::StatusOr<LeaseRecord> ReadLeaseFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("lease file ", path.string(), " does not exist"));
  std::string text = ReadFd(fd);
  ::close(fd);
  return Parse(text);
}

std::unique_ptr<LeaderElector> NewLeaseFileElector(LeaseFileOptions options, Clock& clock) {
  return std::make_unique<LeaseFileElector>(std::move(options), clock);
}

std::unique_ptr<LeaderElector> NewAlwaysLeader() { return std::make_unique<AlwaysLeader>(); }

}  // namespace falcon::leader
