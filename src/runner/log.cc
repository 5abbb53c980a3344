#include "runner/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <istream>

#include "absl/strings/str_cat.h"

namespace falcon::runner {

namespace {

void WriteAll(int fd, const char* d, size_t n) {
  while (fd >= 0 && n > 0) {
    ssize_t w = ::write(fd, d, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    d += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

LogFile::LogFile(const std::filesystem::path& path) : path_(path) {
  // O_RDWR: uploads read the file back through this descriptor (pread), never by name.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) open_errno_ = errno;
  fd_ = UniqueFd(fd);
}

void LogFile::Write(const char* data, size_t n) {
  std::lock_guard<std::mutex> l(mu_);
  WriteAll(fd_.get(), data, n);
  WriteAll(1, data, n);
  written_ += static_cast<int64_t>(n);
}

void LogFile::Line(const std::string& msg) {
  std::string s = "[falcon-runner] " + msg + "\n";
  Write(s.data(), s.size());
}

int64_t LogFile::Written() {
  std::lock_guard<std::mutex> l(mu_);
  return written_;
}

int64_t LogFile::Size() {
  struct stat st;
  if (fd_.valid() && ::fstat(fd_.get(), &st) == 0) return static_cast<int64_t>(st.st_size);
  return Written();
}

absl::Status LogFile::Upload(objstore::ObjectStore& store, const std::string& key) {
  if (!fd_.valid()) return ErrnoStatus(open_errno_, absl::StrCat("opening ", path_.string()));
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat of ", path_.string()));
  FdRangeStreambuf buf(fd_.get(), 0, static_cast<int64_t>(st.st_size));
  std::istream in(&buf);
  return store.Put(key, in);
}

void LogUploader::Start() {
  if (interval_ <= 0) return;
  thread_ = std::thread([this] {
    auto d = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(interval_));
    while (!clock_.SleepFor(d, [this] { return stop_.load(); })) (void)Upload();
  });
}

void LogUploader::Stop() {
  stop_ = true;
  clock_.Notify();
  if (thread_.joinable()) thread_.join();
}

absl::Status LogUploader::Upload(objstore::ObjectStore* via) {
  std::lock_guard<std::mutex> l(mu_);
  int64_t size = log_->Size();
  if (size == uploaded_size_ && uploaded_size_ >= 0) return absl::OkStatus();
  absl::Status s = log_->Upload(via != nullptr ? *via : *store_, key_);
  if (s.ok()) uploaded_size_ = size;
  return s;
}

}  // namespace falcon::runner
