#include "objstore/retrying_store.h"

#include <istream>

#include "absl/strings/str_cat.h"

namespace falcon::objstore {

RetryingObjectStore::RetryingObjectStore(ObjectStore& inner, Clock& clock, Random& random,
                                         RetryingStoreOptions options)
    : inner_(inner),
      clock_(clock),
      backoff_(options.backoff_base, options.backoff_max, &random, 0.5),
      options_(std::move(options)) {}

absl::Status RetryingObjectStore::Write(const std::string& what, const std::function<absl::Status()>& fn) {
  absl::Status first = fn();
  if (first.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    outage_since_.reset();
    return first;
  }
  if (!net::IsTransient(first)) return first;
  MonoTime since;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!outage_since_) outage_since_ = clock_.MonotonicNow();
    since = *outage_since_;
  }
  net::RetryOptions ro;
  ro.stop = options_.stop;
  if (options_.on_retry) {
    ro.on_retry = [&](const absl::Status& s, Duration delay) { options_.on_retry(what, s, delay); };
  }
  // The first attempt above counts as the first failure: RetryUntil's first wait is backoff.Delay(1).
  bool tried_once = false;
  absl::Status last = net::RetryUntil(
      clock_, since + std::chrono::duration_cast<MonoTime::duration>(options_.window), backoff_,
      [&]() -> absl::Status {
        if (!tried_once) {
          tried_once = true;
          return first;
        }
        return fn();
      },
      ro);
  std::lock_guard<std::mutex> l(mu_);
  if (last.ok()) {
    outage_since_.reset();
    return last;
  }
  if (!net::IsTransient(last)) return last;
  auto waited = std::chrono::duration_cast<std::chrono::seconds>(clock_.MonotonicNow() - since).count();
  return absl::Status(last.code(), absl::StrCat(last.message(), " (retried for ", waited, " s, ",
                                                options_.window_name, " of ",
                                                std::chrono::duration_cast<std::chrono::seconds>(options_.window).count(),
                                                " s)"));
}

absl::Status RetryingObjectStore::Put(const std::string& key, std::istream& in) {
  const std::istream::pos_type start = in.tellg();
  bool seekable = start != std::istream::pos_type(-1);
  int attempt = 0;
  return Write(Uri(key), [&]() -> absl::Status {
    if (attempt++ > 0) {
      if (!seekable) return absl::FailedPreconditionError(absl::StrCat("cannot retry writing ", Uri(key),
                                                                       ": its data cannot be read again"));
      in.clear();
      in.seekg(start);
    }
    return inner_.Put(key, in);
  });
}

absl::Status RetryingObjectStore::PutFile(const std::string& key, const std::filesystem::path& local) {
  return Write(Uri(key), [&] { return inner_.PutFile(key, local); });
}

absl::Status RetryingObjectStore::Delete(const std::string& key) {
  return Write(Uri(key), [&] { return inner_.Delete(key); });
}

absl::StatusOr<int64_t> RetryingObjectStore::DeletePrefix(const std::string& prefix) {
  int64_t n = 0;
  absl::Status s = Write(Uri(prefix), [&]() -> absl::Status {
    auto r = inner_.DeletePrefix(prefix);
    if (!r.ok()) return r.status();
    n += *r;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return n;
}

}  // namespace falcon::objstore
