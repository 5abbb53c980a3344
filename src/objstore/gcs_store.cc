// Over 600 lines on purpose: the GCS JSON API client in one place (simple, resumable and ranged transfers,
// list paging, retries); each operation is short and they share the retry and error-mapping helpers.
#include "objstore/gcs_store.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "net/url.h"

namespace falcon::objstore {
namespace {

using json = nlohmann::json;
constexpr int64_t kChunkQuantum = 256 * 1024;  // GCS: resumable chunks are multiples of 256 KiB
constexpr int kMaxSessionRestarts = 3;
constexpr int kMaxPreconditionRounds = 5;

bool RetryableStatus(long status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

bool Is2xx(long status) { return status >= 200 && status < 300; }

// Incremental MD5 (GCS reports md5Hash, base64, for every non-composite object).
class Md5 {
 public:
  Md5() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { Reset(); }
  void Reset() { EVP_DigestInit_ex(ctx_.get(), EVP_md5(), nullptr); }
  void Update(const char* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string FinalBase64() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    return absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(md), len));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

int64_t JsonInt(const json& j, const char* field) {
  if (!j.contains(field)) return 0;
  const json& v = j[field];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    try {
      return std::stoll(v.get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

// "bytes=0-1234" -> 1235; no header -> 0 (nothing committed).
int64_t CommittedFromRange(const std::string& range) {
  auto dash = range.find('-');
  if (range.empty() || dash == std::string::npos) return 0;
  return std::atoll(range.c_str() + dash + 1) + 1;
}

}  // namespace

absl::Status GcsError(const HttpResponse& resp, const std::string& what) {
  std::string msg;
  json j = json::parse(resp.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    msg = j["error"].value("message", "");
  }
  if (msg.empty()) msg = resp.body.substr(0, 300);
  std::string text = absl::StrCat(what, ": GCS answered HTTP ", resp.status, msg.empty() ? "" : ": ", msg);
  switch (resp.status) {
    case 400: return absl::InvalidArgumentError(text);
    case 401:
      return absl::UnauthenticatedError(text + " (the credentials were refused; check GOOGLE_APPLICATION_CREDENTIALS)");
    case 403:
      return absl::PermissionDeniedError(
          text + " (the credentials lack access; grant the account roles/storage.objectAdmin on the bucket)");
    case 404: return absl::NotFoundError(text);
    case 409: return absl::AlreadyExistsError(text);
    case 412: return absl::FailedPreconditionError(text);
    case 416: return absl::OutOfRangeError(text);
    default: break;
  }
  if (RetryableStatus(resp.status)) return absl::UnavailableError(text);
  return absl::UnknownError(text);
}

// ---- upload sources ----

// An upload's input: a stream, possibly preceded by bytes already read from it (the probe that decided
// between simple and resumable upload). Rewind() goes back to the start when the stream is seekable.
struct GcsObjectStore::Source {
  std::istream* in = nullptr;
  std::unique_ptr<std::ifstream> file;  // owned when uploading a file
  std::streampos start = -1;            // where the object's bytes begin; -1: not seekable
  std::string head;                     // consumed from `in` but not yet uploaded
  size_t head_pos = 0;

  // Reads up to n bytes; fewer only at the end of the input.
  size_t Read(char* buf, size_t n) {
    size_t got = 0;
    if (head_pos < head.size()) {
      got = std::min(n, head.size() - head_pos);
      std::memcpy(buf, head.data() + head_pos, got);
      head_pos += got;
    }
    while (got < n && in->good()) {
      in->read(buf + got, static_cast<std::streamsize>(n - got));
      got += static_cast<size_t>(in->gcount());
    }
    return got;
  }
  bool AtEnd() {
    if (head_pos < head.size()) return false;
    return !in->good() || in->peek() == std::char_traits<char>::eof();
  }
  bool Failed() const { return in->bad(); }
  bool Rewind() {
    if (start == std::streampos(-1)) return false;
    in->clear();
    in->seekg(start);
    head.clear();
    head_pos = 0;
    return in->good();
  }
};

// ---- construction ----

GcsObjectStore::GcsObjectStore(GcsOptions opts, std::unique_ptr<TokenSource> tokens, Clock& clock, Random& random)
    : opts_(std::move(opts)), tokens_(std::move(tokens)), clock_(clock), random_(random),
      // Jitter 0.5: a delay in [d/2, d], GCS's guidance; spreads clients that failed together.
      backoff_(opts_.retry.initial_backoff, opts_.retry.max_backoff, &random_, 0.5, opts_.retry.multiplier) {
  opts_.chunk_size = std::max<int64_t>(kChunkQuantum, (opts_.chunk_size + kChunkQuantum - 1) / kChunkQuantum *
                                                          kChunkQuantum);
  while (!opts_.endpoint.empty() && opts_.endpoint.back() == '/') opts_.endpoint.pop_back();
}

absl::StatusOr<std::unique_ptr<GcsObjectStore>> GcsObjectStore::Open(GcsOptions opts,
                                                                     std::unique_ptr<TokenSource> tokens,
                                                                     Clock& clock, Random& random) {
  if (opts.bucket.empty()) return absl::InvalidArgumentError("a GCS store needs a bucket: gs://BUCKET");
  std::unique_ptr<GcsObjectStore> store(new GcsObjectStore(std::move(opts), std::move(tokens), clock, random));
  FALCON_RETURN_IF_ERROR(store->EnsureBucket());
  return store;
}

std::string GcsObjectStore::ObjectUrl(const std::string& key) const {
  return absl::StrCat(opts_.endpoint, "/storage/v1/b/", net::PercentEncode(opts_.bucket), "/o/",
                      net::PercentEncode(key));
}

absl::Status GcsObjectStore::EnsureBucket() {
  MonoTime deadline = clock_.MonotonicNow() + opts_.retry.deadline;
  HttpRequest req;
  req.url = absl::StrCat(opts_.endpoint, "/storage/v1/b/", net::PercentEncode(opts_.bucket));
  auto resp = SendWithRetry(req, deadline);
  std::string where = absl::StrCat("GCS bucket gs://", opts_.bucket, " at ", opts_.endpoint, " (", tokens_->Describe(), ")");
  if (!resp.ok()) return Annotate(resp.status(), "checking " + where);
  if (Is2xx(resp->status)) return absl::OkStatus();
  if (resp->status != 404) return GcsError(*resp, "checking " + where);
  if (!opts_.create_bucket) {
    return absl::NotFoundError(absl::StrCat("GCS bucket gs://", opts_.bucket, " does not exist at ", opts_.endpoint,
                                            ": create it, or pass --create-bucket to have it created"));
  }
  if (opts_.project.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create GCS bucket gs://", opts_.bucket,
                                                   ": set GOOGLE_CLOUD_PROJECT to the project that should own it"));
  }
  HttpRequest create;
  create.method = "POST";
  create.url = absl::StrCat(opts_.endpoint, "/storage/v1/b?project=", net::PercentEncode(opts_.project));
  create.headers = {"Content-Type: application/json"};
  create.body = json{{"name", opts_.bucket}}.dump();
  resp = SendWithRetry(create, deadline);
  if (!resp.ok()) return Annotate(resp.status(), "creating " + where);
  // 409: created concurrently (another replica with --create-bucket): fine.
  if (Is2xx(resp->status) || resp->status == 409) return absl::OkStatus();
  return GcsError(*resp, "creating " + where);
}

// ---- requests and retries ----

absl::StatusOr<HttpResponse> GcsObjectStore::SendOnce(HttpRequest& req, HttpResponse* partial) {
  // A transfer slower than 1 byte/s for a minute is a dead peer; large transfers are not limited.
  if (req.low_speed_time.count() == 0) req.low_speed_time = std::chrono::seconds(60);
  for (int auth_try = 0;; ++auth_try) {
    auto auth = tokens_->AuthorizationHeader();
    if (!auth.ok()) return auth.status();
    bool added = !auth->empty();
    if (added) req.headers.push_back("Authorization: " + *auth);
    auto resp = http_.Send(req, partial);
    if (added) req.headers.pop_back();
    if (resp.ok() && resp->status == 401 && auth_try == 0 && added) {
      tokens_->Invalidate();  // an expired or revoked token: fetch a new one and try once more
      continue;
    }
    return resp;
  }
}

absl::Status GcsObjectStore::GiveUp(int attempts, const absl::Status& last) const {
  return absl::UnavailableError(absl::StrCat("GCS gs://", opts_.bucket, " at ", opts_.endpoint, " still failing after ",
                                             attempts, " attempts: ", last.message()));
}

absl::Status GcsObjectStore::Backoff(int attempt, MonoTime deadline, const absl::Status& last) {
  Duration delay = backoff_.Delay(attempt + 1);
  if (clock_.MonotonicNow() + delay > deadline) return GiveUp(attempt + 1, last);
  ++retries_;
  clock_.SleepFor(delay, [] { return false; });
  return absl::OkStatus();
}

absl::StatusOr<HttpResponse> GcsObjectStore::SendWithRetry(HttpRequest req, MonoTime deadline,
                                                           const std::function<void(HttpRequest&)>& before_retry) {
  absl::StatusOr<HttpResponse> resp;
  bool retryable = false;
  net::RetryOptions retry;
  retry.retryable = [&](const absl::Status&) { return retryable; };
  retry.on_retry = [&](const absl::Status&, Duration) {
    ++retries_;
    if (before_retry) before_retry(req);
  };
  int attempts = 0;
  absl::Status last = net::RetryUntil(
      clock_, deadline, backoff_,
      [&]() -> absl::Status {
        resp = SendOnce(req);
        if (!resp.ok()) {
          retryable = net::IsTransient(resp.status());
          return resp.status();
        }
        retryable = RetryableStatus(resp->status);
        return retryable ? GcsError(*resp, req.method + " " + req.url) : absl::OkStatus();
      },
      retry, &attempts);
  if (last.ok() || !retryable) return resp;
  return GiveUp(attempts, last);
}

// ---- reads ----

absl::StatusOr<GcsObjectStore::ObjectMeta> GcsObjectStore::StatMeta(const std::string& key, MonoTime deadline) {
  HttpRequest req;
  req.url = ObjectUrl(key);
  auto resp = SendWithRetry(req, deadline);
  if (!resp.ok()) return resp.status();
  if (!Is2xx(resp->status)) return GcsError(*resp, "stat " + Uri(key));
  json j = json::parse(resp->body, nullptr, false);
  if (!j.is_object()) return absl::InternalError("stat " + Uri(key) + ": GCS returned a body that is not JSON");
  ObjectMeta m;
  m.info.key = j.value("name", key);
  m.info.size = JsonInt(j, "size");
  Time updated;
  if (ParseRfc3339(j.value("updated", ""), &updated)) {
    m.info.updated_unix_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(updated.time_since_epoch()).count();
  }
  m.generation = JsonInt(j, "generation");
  m.md5_base64 = j.value("md5Hash", "");
  return m;
}

absl::StatusOr<ObjectInfo> GcsObjectStore::Stat(const std::string& key) {
  auto m = StatMeta(key, clock_.MonotonicNow() + opts_.retry.deadline);
  if (!m.ok()) return m.status();
  return m->info;
}

absl::Status GcsObjectStore::Get(const std::string& key, std::ostream& out, int64_t offset, int64_t length) {
  if (offset < 0) return absl::InvalidArgumentError("Get: negative offset");
  if (length == 0) return Stat(key).status();  // nothing to read, but a missing object is still NOT_FOUND
  int64_t written = 0;
  std::string generation;  // pinned after the first response, so a resumed read never mixes two versions
  MonoTime deadline = clock_.MonotonicNow() + opts_.retry.deadline;
  int attempt = 0;
  for (;;) {
    int64_t start = offset + written;
    HttpRequest req;
    req.url = ObjectUrl(key) + "?alt=media";
    if (!generation.empty()) req.url += "&generation=" + generation;
    bool ranged = start > 0 || length >= 0;
    if (ranged) {
      std::string range = absl::StrCat("Range: bytes=", start, "-");
      if (length >= 0) range += std::to_string(offset + length - 1);
      req.headers.push_back(range);
    }
    req.sink = [&](const char* p, size_t n) {
      out.write(p, static_cast<std::streamsize>(n));
      written += static_cast<int64_t>(n);
      return out.good();
    };
    HttpResponse partial;
    int64_t before = written;
    auto resp = SendOnce(req, &partial);
    absl::Status failure;
    if (!resp.ok()) {
      if (resp.status().code() == absl::StatusCode::kCancelled) {
        return absl::InternalError(absl::StrCat("get ", Uri(key), ": writing the downloaded bytes failed"));
      }
      if (!net::IsTransient(resp.status())) return resp.status();
      if (generation.empty()) generation = partial.Header("x-goog-generation");
      failure = resp.status();
    } else if (Is2xx(resp->status)) {
      if (ranged && resp->status == 200 && start > 0) {
        return absl::InternalError(absl::StrCat("get ", Uri(key), ": the server ignored the Range header"));
      }
      return absl::OkStatus();
    } else if (resp->status == 416) {
      return absl::OkStatus();  // offset at or past the end: nothing to read
    } else if (resp->status == 404 && !generation.empty()) {
      return absl::AbortedError(absl::StrCat("get ", Uri(key), ": the object was replaced or deleted during the read"));
    } else if (RetryableStatus(resp->status)) {
      failure = GcsError(*resp, "get " + Uri(key));
    } else {
      return GcsError(*resp, "get " + Uri(key));
    }
    if (written > before) {
      // Progress: the failure budget starts again.
      attempt = 0;
      deadline = clock_.MonotonicNow() + opts_.retry.deadline;
    }
    FALCON_RETURN_IF_ERROR(Backoff(attempt++, deadline, failure));
  }
}

absl::Status GcsObjectStore::GetToFile(const std::string& key, const std::filesystem::path& local) {
  std::error_code ec;
  if (local.has_parent_path()) std::filesystem::create_directories(local.parent_path(), ec);
  std::filesystem::path tmp = local;
  tmp += absl::StrCat(".part-", random_.Next() % 1000000007);
  absl::Status st;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
    st = Get(key, out);
    out.close();
    if (st.ok() && !out) st = absl::InternalError(absl::StrCat("writing ", tmp.string(), " failed"));
  }
  if (st.ok()) {
    std::filesystem::rename(tmp, local, ec);
    if (ec) st = absl::InternalError(absl::StrCat("renaming to ", local.string(), ": ", ec.message()));
  }
  if (!st.ok()) std::filesystem::remove(tmp, ec);
  return st;
}

absl::StatusOr<std::vector<ObjectInfo>> GcsObjectStore::List(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::string page_token;
  do {
    HttpRequest req;
    req.url = absl::StrCat(opts_.endpoint, "/storage/v1/b/", net::PercentEncode(opts_.bucket),
                           "/o?maxResults=", opts_.list_page_size,
                           "&fields=", net::PercentEncode("items(name,size,updated),nextPageToken"));
    if (!prefix.empty()) req.url += "&prefix=" + net::PercentEncode(prefix);
    if (!page_token.empty()) req.url += "&pageToken=" + net::PercentEncode(page_token);
    auto resp = SendWithRetry(req, clock_.MonotonicNow() + opts_.retry.deadline);
    if (!resp.ok()) return resp.status();
    if (!Is2xx(resp->status)) return GcsError(*resp, "list " + Uri(prefix));
    json j = json::parse(resp->body, nullptr, false);
    if (!j.is_object()) return absl::InternalError("list " + Uri(prefix) + ": GCS returned a body that is not JSON");
    if (j.contains("items") && j["items"].is_array()) {
      for (const json& it : j["items"]) {
        ObjectInfo info;
        info.key = it.value("name", "");
        info.size = JsonInt(it, "size");
        Time updated;
        if (ParseRfc3339(it.value("updated", ""), &updated)) {
          info.updated_unix_ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(updated.time_since_epoch()).count();
        }
        // Defensive: an emulator might ignore the prefix.
        if (info.key.compare(0, prefix.size(), prefix) == 0) out.push_back(std::move(info));
      }
    }
    std::string next = j.value("nextPageToken", "");
    if (!next.empty() && next == page_token) {
      return absl::InternalError("list " + Uri(prefix) + ": GCS returned the same page token twice");
    }
    page_token = next;
  } while (!page_token.empty());
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

// ---- deletes ----

absl::StatusOr<bool> GcsObjectStore::DeleteOne(const std::string& key, MonoTime deadline) {
  HttpRequest req;
  req.method = "DELETE";
  req.url = ObjectUrl(key);
  auto resp = SendWithRetry(req, deadline);
  if (!resp.ok()) return resp.status();
  if (Is2xx(resp->status)) return true;
  if (resp->status == 404) return false;  // already gone (perhaps by an earlier attempt of this very call)
  return GcsError(*resp, "delete " + Uri(key));
}

absl::Status GcsObjectStore::Delete(const std::string& key) {
  return DeleteOne(key, clock_.MonotonicNow() + opts_.retry.deadline).status();
}

absl::StatusOr<int64_t> GcsObjectStore::DeletePrefix(const std::string& prefix) {
  if (prefix.empty()) return absl::InvalidArgumentError("DeletePrefix needs a non-empty prefix");
  auto objects = List(prefix);
  if (!objects.ok()) return objects.status();
  int64_t deleted = 0;
  for (const auto& o : *objects) {
    auto d = DeleteOne(o.key, clock_.MonotonicNow() + opts_.retry.deadline);
    if (!d.ok()) return Annotate(d.status(), absl::StrCat("purging ", Uri(prefix), " after ", deleted, " deletions"));
    if (*d) ++deleted;
  }
  return deleted;
}

// ---- uploads ----

absl::Status GcsObjectStore::Put(const std::string& key, std::istream& in) {
  Source src;
  src.in = &in;
  std::streampos pos = in.tellg();
  if (pos != std::streampos(-1)) src.start = pos;
  return Upload(key, src);
}

absl::Status GcsObjectStore::PutFile(const std::string& key, const std::filesystem::path& local) {
  Source src;
  src.file = std::make_unique<std::ifstream>(local, std::ios::binary);
  if (!*src.file) return absl::NotFoundError(absl::StrCat("cannot read ", local.string()));
  src.in = src.file.get();
  src.start = 0;
  return Upload(key, src);
}

absl::Status GcsObjectStore::Upload(const std::string& key, Source& src) {
  if (key.empty()) return absl::InvalidArgumentError("an object key must not be empty");
  // Probe: read up to the threshold; a shorter input goes up in one request.
  std::string head(static_cast<size_t>(opts_.resumable_threshold), '\0');
  head.resize(src.Read(head.data(), head.size()));
  if (src.Failed()) return absl::InternalError(absl::StrCat("reading the input for ", Uri(key), " failed"));
  if (src.AtEnd()) return SimpleUpload(key, head, clock_.MonotonicNow() + opts_.retry.deadline);
  src.head = std::move(head);
  src.head_pos = 0;
  return ResumableUpload(key, src, clock_.MonotonicNow() + opts_.retry.deadline);
}

absl::Status GcsObjectStore::SimpleUpload(const std::string& key, const std::string& data, MonoTime deadline) {
  Md5 md5;
  md5.Update(data.data(), data.size());
  const std::string want_md5 = md5.FinalBase64();
  int64_t generation = 0;  // optimistic: most objects are new
  int rounds = 0;
  for (int attempt = 0;;) {
    HttpRequest req;
    req.method = "POST";
    req.url = absl::StrCat(opts_.endpoint, "/upload/storage/v1/b/", net::PercentEncode(opts_.bucket),
                           "/o?uploadType=media&name=", net::PercentEncode(key), "&ifGenerationMatch=", generation);
    req.headers = {"Content-Type: application/octet-stream"};
    req.body = data;
    auto resp = SendOnce(req);
    absl::Status failure;
    if (!resp.ok()) {
      if (!net::IsTransient(resp.status())) return resp.status();
      failure = resp.status();
    } else if (Is2xx(resp->status)) {
      json j = json::parse(resp->body, nullptr, false);
      if (j.is_object() && (JsonInt(j, "size") != static_cast<int64_t>(data.size()) ||
                            (j.contains("md5Hash") && j.value("md5Hash", "") != want_md5))) {
        return absl::DataLossError(absl::StrCat("put ", Uri(key), ": GCS stored ", JsonInt(j, "size"),
                                                " bytes with another checksum than the ", data.size(), " sent"));
      }
      return absl::OkStatus();
    } else if (resp->status == 412) {
      // The object exists at another generation: ours from an attempt whose answer was lost, or another
      // writer's. Identical content means the work is done; otherwise overwrite that generation.
      auto meta = StatMeta(key, deadline);
      if (meta.ok() && meta->md5_base64 == want_md5 && meta->info.size == static_cast<int64_t>(data.size())) {
        return absl::OkStatus();
      }
      if (!meta.ok() && meta.status().code() != absl::StatusCode::kNotFound) return meta.status();
      if (++rounds > kMaxPreconditionRounds) {
        return absl::AbortedError(absl::StrCat("put ", Uri(key), ": the object kept changing under concurrent writers"));
      }
      generation = meta.ok() ? meta->generation : 0;
      continue;
    } else if (RetryableStatus(resp->status)) {
      failure = GcsError(*resp, "put " + Uri(key));
    } else {
      return GcsError(*resp, "put " + Uri(key));
    }
    FALCON_RETURN_IF_ERROR(Backoff(attempt++, deadline, failure));
  }
}

absl::Status GcsObjectStore::ResumableUpload(const std::string& key, Source& src, MonoTime deadline) {
  const std::string what = "put " + Uri(key);
  std::vector<char> buf(static_cast<size_t>(opts_.chunk_size));
  for (int restarts = 0;; ++restarts) {
    if (restarts > 0) {
      if (restarts > kMaxSessionRestarts) {
        return absl::UnavailableError(absl::StrCat(what, ": the upload session was lost ", restarts - 1, " times"));
      }
      if (!src.Rewind()) {
        return absl::UnavailableError(absl::StrCat(
            what, ": the upload session was lost (server restarted or session expired) and the input stream cannot "
                  "be read again; retry the whole operation"));
      }
      deadline = clock_.MonotonicNow() + opts_.retry.deadline;
    }
    // The precondition pins the generation this upload replaces (0: none), so a stale session can never
    // overwrite a newer object and a finished session cannot be committed twice.
    auto meta = StatMeta(key, deadline);
    if (!meta.ok() && meta.status().code() != absl::StatusCode::kNotFound) return meta.status();
    int64_t generation = meta.ok() ? meta->generation : 0;

    HttpRequest init;
    init.method = "POST";
    init.url = absl::StrCat(opts_.endpoint, "/upload/storage/v1/b/", net::PercentEncode(opts_.bucket),
                            "/o?uploadType=resumable&name=", net::PercentEncode(key),
                            "&ifGenerationMatch=", generation);
    init.headers = {"Content-Type: application/json; charset=UTF-8", "X-Upload-Content-Type: application/octet-stream"};
    init.body = json{{"name", key}}.dump();
    auto started = SendWithRetry(init, deadline);
    if (!started.ok()) return Annotate(started.status(), what);
    if (!Is2xx(started->status)) return GcsError(*started, what + " (starting a resumable upload)");
    const std::string session = started->Header("location");
    if (session.empty()) return absl::InternalError(what + ": GCS started a resumable upload without a Location");

    Md5 md5;
    int64_t offset = 0;  // object offset of buf[0]
    bool restart = false;
    bool done = false;
    while (!done && !restart) {
      size_t n = src.Read(buf.data(), buf.size());
      if (src.Failed()) return absl::InternalError(absl::StrCat("reading the input for ", Uri(key), " failed"));
      bool last = n < buf.size() || src.AtEnd();
      md5.Update(buf.data(), n);
      const int64_t total = last ? offset + static_cast<int64_t>(n) : -1;
      std::string want_md5 = last ? md5.FinalBase64() : "";
      size_t pos = 0;  // bytes of buf the server has committed
      bool query = false;
      int attempt = 0;
      MonoTime chunk_deadline = clock_.MonotonicNow() + opts_.retry.deadline;
      for (;;) {
        if (pos == n && !last) break;  // chunk committed; next one
        HttpRequest req;
        req.method = "PUT";
        req.url = session;
        std::string total_s = total >= 0 ? std::to_string(total) : "*";
        if (query) {
          // "How much do you have?" An empty PUT with an unknown range.
          req.headers = {absl::StrCat("Content-Range: bytes */", total_s)};
        } else if (pos == n) {
          // Everything sent; finalize (only when the data ended exactly at a chunk boundary).
          req.headers = {absl::StrCat("Content-Range: bytes */", total_s)};
        } else {
          req.headers = {absl::StrCat("Content-Range: bytes ", offset + static_cast<int64_t>(pos), "-",
                                      offset + static_cast<int64_t>(n) - 1, "/", total_s)};
          const char* data = buf.data() + pos;
          size_t len = n - pos;
          auto sent = std::make_shared<size_t>(0);
          req.body_size = static_cast<int64_t>(len);
          req.body_reader = [data, len, sent](char* out, size_t max) {
            size_t k = std::min(max, len - *sent);
            std::memcpy(out, data + *sent, k);
            *sent += k;
            return k;
          };
        }
        auto resp = SendOnce(req);
        absl::Status failure;
        if (!resp.ok()) {
          if (!net::IsTransient(resp.status())) return resp.status();
          failure = resp.status();
        } else if (resp->status == 200 || resp->status == 201) {
          // Finalized. Check it holds exactly what was sent.
          json j = json::parse(resp->body, nullptr, false);
          int64_t size = j.is_object() ? JsonInt(j, "size") : -1;
          std::string got_md5 = j.is_object() ? j.value("md5Hash", "") : "";
          if (!last || size != total || (!got_md5.empty() && got_md5 != want_md5)) {
            return absl::DataLossError(absl::StrCat(what, ": the upload session finalized with ", size,
                                                    " bytes, but ", last ? std::to_string(total) : "more",
                                                    " were to be sent with MD5 ", want_md5, " (got ", got_md5, ")"));
          }
          done = true;
          break;
        } else if (resp->status == 308) {
          int64_t committed = CommittedFromRange(resp->Header("range"));
          if (committed < offset || committed > offset + static_cast<int64_t>(n)) {
            // The server lost bytes it had acknowledged: only a new session can fix that.
            restart = true;
            break;
          }
          size_t new_pos = static_cast<size_t>(committed - offset);
          if (new_pos > pos || query) {
            attempt = 0;
            chunk_deadline = clock_.MonotonicNow() + opts_.retry.deadline;
          }
          pos = new_pos;
          query = false;
          if (opts_.on_chunk_committed) opts_.on_chunk_committed(key, committed);
          continue;
        } else if (resp->status == 404 || resp->status == 410) {
          restart = true;  // session gone (expired, or the server restarted)
          break;
        } else if (resp->status == 412) {
          restart = true;  // another writer replaced the object meanwhile; replace the new generation
          break;
        } else if (RetryableStatus(resp->status)) {
          failure = GcsError(*resp, what);
        } else {
          return GcsError(*resp, what);
        }
        // A failed chunk may have been partly committed: wait, then ask the session where it stands.
        FALCON_RETURN_IF_ERROR(Backoff(attempt++, chunk_deadline, failure));
        query = true;
      }
      offset += static_cast<int64_t>(n);
    }
    if (done) return absl::OkStatus();
  }
}

// ---- factory ----

const std::vector<std::string>& GcsEnvironmentNames() {
  static const std::vector<std::string> kNames = {"STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS",
                                                   "GOOGLE_CLOUD_PROJECT", "GCE_METADATA_HOST", "CLOUDSDK_CONFIG"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenGcsObjectStore(const std::string& url, const OpenOptions& opts,
                                                                 const EnvGetter& env) {
  constexpr char kScheme[] = "gs://";
  if (url.rfind(kScheme, 0) != 0) return absl::InvalidArgumentError("not a gs:// URL: " + url);
  std::string bucket = url.substr(sizeof(kScheme) - 1);
  bucket = bucket.substr(0, bucket.find('/'));
  if (bucket.empty()) return absl::InvalidArgumentError("the object store URL " + url + " names no bucket: gs://BUCKET");
  for (char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '_' || c == '.')) {
      return absl::InvalidArgumentError(absl::StrCat("invalid GCS bucket name \"", bucket,
                                                     "\": use lower-case letters, digits, '-', '_' and '.'"));
    }
  }
  GcsOptions o;
  o.bucket = bucket;
  o.create_bucket = opts.create_bucket;
  for (const char* var : {"GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"}) {
    if (auto p = env(var); p && !p->empty()) {
      o.project = *p;
      break;
    }
  }
  auto clock = std::make_unique<SystemClock>();
  auto random = std::make_unique<SystemRandom>();
  std::unique_ptr<TokenSource> tokens;
  if (auto emu = env("STORAGE_EMULATOR_HOST"); emu && !emu->empty()) {
    o.endpoint = emu->find("://") == std::string::npos ? "http://" + *emu : *emu;
    if (o.project.empty()) o.project = "test-project";
    tokens = std::make_unique<AnonymousTokenSource>();
  } else {
    auto t = DefaultTokenSource(env, *clock);
    if (!t.ok()) return t.status();
    tokens = std::move(*t);
  }
  std::unique_ptr<GcsObjectStore> store(new GcsObjectStore(std::move(o), std::move(tokens), *clock, *random));
  store->owned_clock_ = std::move(clock);
  store->owned_random_ = std::move(random);
  FALCON_RETURN_IF_ERROR(store->EnsureBucket());
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace falcon::objstore
