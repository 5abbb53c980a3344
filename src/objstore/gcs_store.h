// GcsObjectStore: the ObjectStore over Google Cloud Storage's JSON API (libcurl + nlohmann-json).
//
// - Put/PutFile: objects up to `resumable_threshold` go in one request (uploadType=media); larger ones use a
//   resumable session, sent in `chunk_size` chunks. After a failed chunk the session is asked how much it
//   committed and the upload goes on from there; a lost session (404/410, e.g. an emulator restarted) starts
//   over when the source can be rewound (files, seekable streams).
// - Every upload carries an ifGenerationMatch precondition, and a finished upload is checked against the
//   size and MD5 of what was sent, so a retry never writes a duplicate or a mix of two attempts.
// - Get streams (ranged with a Range header); a dropped download resumes from the last byte received,
//   pinned to the object generation it started with.
// - List pages with pageToken; DeletePrefix lists, then deletes each object.
// - Retries: 408, 429, 5xx and transport errors, truncated exponential backoff with jitter (GCS's retry
//   guidance: 1 s doubling to 32 s), until `retry.deadline` has passed since the operation began.
//
// Thread-safe: every method may be called concurrently.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "net/http_client.h"
#include "net/retry.h"
#include "objstore/gcs_auth.h"
#include "objstore/object_store.h"

namespace falcon::objstore {

struct GcsRetryPolicy {
  Duration initial_backoff = std::chrono::seconds(1);
  Duration max_backoff = std::chrono::seconds(32);
  double multiplier = 2.0;
  // An operation gives up (UNAVAILABLE) once this much time has passed since it began (monotonic time).
  Duration deadline = std::chrono::seconds(120);
};

struct GcsOptions {
  std::string bucket;
  // Scheme and authority: "https://storage.googleapis.com", or "http://127.0.0.1:PORT" for an emulator.
  std::string endpoint = "https://storage.googleapis.com";
  // Needed only to create a bucket on real GCS (GOOGLE_CLOUD_PROJECT); emulators accept any.
  std::string project;
  bool create_bucket = false;
  int64_t resumable_threshold = 8 << 20;
  int64_t chunk_size = 8 << 20;  // rounded up to a multiple of 256 KiB
  int64_t list_page_size = 1000;
  GcsRetryPolicy retry;
  // Called after every chunk of a resumable upload the server acknowledged, with the committed offset.
  // Tests use it to inject faults mid-upload. Called on the uploading thread.
  std::function<void(const std::string& key, int64_t committed)> on_chunk_committed;
};

class GcsObjectStore : public ObjectStore {
 public:
  // Checks that the bucket exists (creating it when opts.create_bucket): NOT_FOUND naming the bucket and
  // --create-bucket when it is missing; PERMISSION_DENIED / UNAUTHENTICATED with what to fix for
  // credential problems. `clock` and `random` must outlive the store.
  static absl::StatusOr<std::unique_ptr<GcsObjectStore>> Open(GcsOptions opts, std::unique_ptr<TokenSource> tokens,
                                                              Clock& clock, Random& random);

  std::string RootUrl() const override { return "gs://" + opts_.bucket; }
  std::string Uri(const std::string& key) const override { return RootUrl() + "/" + key; }
  absl::Status Put(const std::string& key, std::istream& in) override;
  absl::Status PutFile(const std::string& key, const std::filesystem::path& local) override;
  absl::Status Get(const std::string& key, std::ostream& out, int64_t offset = 0, int64_t length = -1) override;
  absl::Status GetToFile(const std::string& key, const std::filesystem::path& local) override;
  absl::StatusOr<ObjectInfo> Stat(const std::string& key) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

  // Requests sent that were retried (tests and metrics).
  int64_t retries() const { return retries_.load(); }

  struct Source;  // an upload's input (defined in gcs_store.cc)

 private:
  GcsObjectStore(GcsOptions opts, std::unique_ptr<TokenSource> tokens, Clock& clock, Random& random);

  struct ObjectMeta {
    ObjectInfo info;
    int64_t generation = 0;
    std::string md5_base64;
  };
  // Sends `req` (adding auth), retrying retryable outcomes until the call's deadline. Returns the final
  // response (any status that is not retryable, or the last retryable one when the deadline passed), or the
  // last transport error. `before_retry` may adjust the request between attempts (ranged reads).
  absl::StatusOr<HttpResponse> SendWithRetry(HttpRequest req, MonoTime deadline,
                                             const std::function<void(HttpRequest&)>& before_retry = nullptr);
  // One attempt, adding the Authorization header; retries a 401 once with a fresh token.
  absl::StatusOr<HttpResponse> SendOnce(HttpRequest& req, HttpResponse* partial = nullptr);
  // Waits before retry number attempt+1, or gives up (GiveUp) when that would pass the deadline.
  absl::Status Backoff(int attempt, MonoTime deadline, const absl::Status& last);
  absl::Status GiveUp(int attempts, const absl::Status& last) const;
  absl::Status EnsureBucket();
  absl::StatusOr<ObjectMeta> StatMeta(const std::string& key, MonoTime deadline);
  // Deletes one object: true if it existed.
  absl::StatusOr<bool> DeleteOne(const std::string& key, MonoTime deadline);
  absl::Status Upload(const std::string& key, Source& src);
  absl::Status SimpleUpload(const std::string& key, const std::string& data, MonoTime deadline);
  absl::Status ResumableUpload(const std::string& key, Source& src, MonoTime deadline);
  std::string ObjectUrl(const std::string& key) const;

  friend absl::StatusOr<std::unique_ptr<ObjectStore>> OpenGcsObjectStore(const std::string&, const OpenOptions&,
                                                                         const EnvGetter&);
  // Set only by OpenGcsObjectStore; declared first so they outlive everything that refers to them.
  std::unique_ptr<Clock> owned_clock_;
  std::unique_ptr<Random> owned_random_;
  GcsOptions opts_;
  std::unique_ptr<TokenSource> tokens_;
  Clock& clock_;
  Random& random_;
  const net::Backoff backoff_;
  HttpClient http_;
  std::atomic<int64_t> retries_{0};
};

// Opens "gs://bucket[/ignored]" from the process environment: STORAGE_EMULATOR_HOST (http://host:port or
// host:port: an emulator, no auth) or else Application Default Credentials (gcs_auth.h). The store owns its
// clock and random source.
absl::StatusOr<std::unique_ptr<ObjectStore>> OpenGcsObjectStore(const std::string& url, const OpenOptions& opts,
                                                                 const EnvGetter& env = ProcessEnv());

// The environment variables that configure a gs:// store (emulator, credentials, project, metadata server).
// A process that starts others which open the same store (the controller starting Pods) passes these on.
const std::vector<std::string>& GcsEnvironmentNames();

// Maps a GCS JSON API error response to a status: 404 NOT_FOUND, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED,
// 412 FAILED_PRECONDITION, 400 INVALID_ARGUMENT, 429/5xx UNAVAILABLE, ... with GCS's message and `what`.
absl::Status GcsError(const HttpResponse& resp, const std::string& what);

}  // namespace falcon::objstore
