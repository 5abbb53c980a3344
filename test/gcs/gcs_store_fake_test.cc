// GcsObjectStore's retry and resume logic against a small in-process server that speaks the parts of the
// GCS JSON API the store uses, the way GCS documents them, and injects faults on request. (The emulator
// tests in gcs_emulator_test.cc cover the real emulator; fake-gcs-server does not implement a resumable
// session's status query, so resuming from a partly committed chunk is tested here.)
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "objstore/gcs_store.h"
#include "support/wait.h"

namespace falcon::objstore {
namespace {

using json = nlohmann::json;

std::string Md5Base64(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), md, &n, EVP_md5(), nullptr);
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  out.resize(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), md, n));
  return out;
}

class FakeGcs {
 public:
  struct Object {
    std::string data;
    int64_t generation;
  };

  FakeGcs() {
    using httplib::Request;
    using httplib::Response;
    server_.set_pre_routing_handler([this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      log_.push_back(req.method + " " + req.path + (req.has_header("Content-Range") ? " " + req.get_header_value("Content-Range") : ""));
      if (!req.get_header_value("Authorization").empty()) auths_.push_back(req.get_header_value("Authorization"));
      if (fail_next_ > 0 && (fail_match_.empty() || req.path.find(fail_match_) != std::string::npos)) {
        --fail_next_;
        res.status = fail_status_;
        res.set_content(R"({"error":{"code":503,"message":"injected"}})", "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (reject_token_ > 0 && req.has_header("Authorization")) {
        --reject_token_;
        res.status = 401;
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Get("/storage/v1/b/([^/]+)", [this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      if (!buckets_.count(req.matches[1])) {
        res.status = 404;
        res.set_content(R"({"error":{"code":404,"message":"The specified bucket does not exist."}})", "application/json");
        return;
      }
      res.set_content(json{{"name", req.matches[1]}}.dump(), "application/json");
    });
    server_.Post("/storage/v1/b", [this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      buckets_.insert(json::parse(req.body)["name"].get<std::string>());
      created_project_ = req.get_param_value("project");
      res.set_content("{}", "application/json");
    });
    server_.Get("/storage/v1/b/bk/o/(.+)", [this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      auto it = objects_.find(req.matches[1]);
      if (it == objects_.end()) {
        res.status = 404;
        return;
      }
      if (req.get_param_value("alt") == "media") {
        std::string data = it->second.data;
        res.set_header("x-goog-generation", std::to_string(it->second.generation));
        // cpp-httplib applies a Range header itself (206 / 416).
        res.set_content(data, "application/octet-stream");
        return;
      }
      res.set_content(Meta(req.matches[1], it->second).dump(), "application/json");
    });
    server_.Post("/upload/storage/v1/b/bk/o", [this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      std::string name = req.get_param_value("name");
      int64_t want_gen = std::stoll(req.get_param_value("ifGenerationMatch"));
      int64_t have_gen = objects_.count(name) ? objects_[name].generation : 0;
      if (want_gen != have_gen) {
        res.status = 412;
        return;
      }
      if (req.get_param_value("uploadType") == "media") {
        objects_[name] = Object{req.body, ++generation_};
        res.set_content(Meta(name, objects_[name]).dump(), "application/json");
        if (lose_next_response_) {
          lose_next_response_ = false;
          res.status = 503;  // stored, but the client is told it failed
        }
        return;
      }
      std::string id = std::to_string(sessions_.size() + 1);
      sessions_[id] = Session{name, want_gen, ""};
      res.set_header("Location", base() + "/upload/session/" + id);
      res.set_content("", "application/json");
    });
    server_.Put("/upload/session/(.+)", [this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      auto it = sessions_.find(req.matches[1]);
      if (it == sessions_.end()) {
        res.status = 404;
        return;
      }
      Session& s = it->second;
      std::string cr = req.get_header_value("Content-Range").substr(6);  // "S-E/T" or "*/T"
      std::string range = cr.substr(0, cr.find('/'));
      std::string total = cr.substr(cr.find('/') + 1);
      if (range != "*") {
        int64_t start = std::stoll(range.substr(0, range.find('-')));
        if (start > static_cast<int64_t>(s.data.size())) {
          res.status = 400;  // a gap: the client skipped uncommitted bytes
          return;
        }
        std::string body = req.body;
        if (partial_commit_next_) {
          // Keep only half of this chunk, then fail: the client must ask and resend the rest.
          partial_commit_next_ = false;
          s.data.resize(start);
          s.data += body.substr(0, body.size() / 2);
          res.status = 503;
          return;
        }
        s.data.resize(start);  // overlapping resend: the later bytes replace the same offsets
        s.data += body;
      }
      if (total != "*" && static_cast<int64_t>(s.data.size()) == std::stoll(total)) {
        objects_[s.name] = Object{s.data, ++generation_};
        res.set_content(Meta(s.name, objects_[s.name]).dump(), "application/json");
        sessions_.erase(it);
        return;
      }
      res.status = 308;
      if (!s.data.empty()) res.set_header("Range", "bytes=0-" + std::to_string(s.data.size() - 1));
    });
    server_.Delete("/storage/v1/b/bk/o/(.+)", [this](const Request& req, Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      res.status = objects_.erase(req.matches[1]) ? 204 : 404;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    EXPECT_TRUE(testsupport::WaitFor("the fake GCS server to listen", [&] { return server_.is_running(); },
                                     std::chrono::seconds(5), std::chrono::milliseconds(1)));
  }
  ~FakeGcs() {
    server_.stop();
    thread_.join();
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }

  json Meta(const std::string& name, const Object& o) {
    return json{{"name", name},
                {"size", std::to_string(o.data.size())},
                {"generation", std::to_string(o.generation)},
                {"md5Hash", Md5Base64(o.data)},
                {"updated", "2026-11-29T08:00:00.000Z"}};
  }

  struct Session {
    std::string name;
    int64_t generation;
    std::string data;
  };

  std::mutex mu_;
  std::set<std::string> buckets_{"bk"};
  std::map<std::string, Object> objects_;
  std::map<std::string, Session> sessions_;
  std::vector<std::string> log_;
  std::vector<std::string> auths_;
  std::string created_project_;
  int64_t generation_ = 100;
  int fail_next_ = 0;
  int fail_status_ = 503;
  std::string fail_match_;
  int reject_token_ = 0;
  bool lose_next_response_ = false;
  bool partial_commit_next_ = false;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// Hands out "tok-1", "tok-2", ... and counts invalidations.
class CountingTokens : public TokenSource {
 public:
  absl::StatusOr<std::string> AuthorizationHeader() override { return "Bearer tok-" + std::to_string(gen_.load()); }
  void Invalidate() override { ++gen_; }
  std::string Describe() const override { return "counting"; }
  std::atomic<int> gen_{1};
};

class GcsStoreFakeTest : public ::testing::Test {
 protected:
  GcsOptions Options() {
    GcsOptions o;
    o.bucket = "bk";
    o.endpoint = fake_.base();
    o.project = "proj";
    o.retry.initial_backoff = std::chrono::milliseconds(1);
    o.retry.max_backoff = std::chrono::milliseconds(5);
    o.retry.deadline = std::chrono::seconds(5);
    return o;
  }
  std::unique_ptr<GcsObjectStore> Open(GcsOptions o, std::unique_ptr<TokenSource> t = nullptr) {
    if (!t) t = std::make_unique<AnonymousTokenSource>();
    auto s = GcsObjectStore::Open(std::move(o), std::move(t), clock_, random_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  FakeGcs fake_;
  SystemClock clock_;
  FakeRandom random_;
};

TEST_F(GcsStoreFakeTest, MissingBucketNamesTheBucketAndTheFlag) {
  GcsOptions o = Options();
  o.bucket = "nope";
  auto s = GcsObjectStore::Open(o, std::make_unique<AnonymousTokenSource>(), clock_, random_);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  std::string msg(s.status().message());
  EXPECT_NE(msg.find("gs://nope"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--create-bucket"), std::string::npos) << msg;

  o.create_bucket = true;
  ASSERT_NE(Open(o), nullptr);
  EXPECT_EQ(fake_.created_project_, "proj");
}

TEST_F(GcsStoreFakeTest, RetriesServerErrorsWithBackoff) {
  auto store = Open(Options());
  fake_.objects_["k"] = {"hello", 7};
  fake_.fail_next_ = 3;
  auto st = store->Stat("k");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->size, 5);
  EXPECT_EQ(store->retries(), 3);

  fake_.fail_status_ = 429;
  fake_.fail_next_ = 2;
  std::stringstream out;
  ASSERT_TRUE(store->Get("k", out).ok());
  EXPECT_EQ(out.str(), "hello");
}

TEST_F(GcsStoreFakeTest, GivesUpAfterTheDeadlineWithUnavailable) {
  GcsOptions o = Options();
  o.retry.deadline = std::chrono::milliseconds(100);
  auto store = Open(o);
  fake_.fail_next_ = 1'000'000;
  auto st = store->Stat("k");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable) << st.status();
  EXPECT_NE(std::string(st.status().message()).find("injected"), std::string::npos) << st.status();
}

TEST_F(GcsStoreFakeTest, NotRetryingClientErrors) {
  auto store = Open(Options());
  fake_.fail_status_ = 400;
  fake_.fail_next_ = 1;
  EXPECT_EQ(store->Stat("k").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->retries(), 0);
}

TEST_F(GcsStoreFakeTest, ExpiredTokenIsRefreshedOnce) {
  auto tokens = std::make_unique<CountingTokens>();
  CountingTokens* t = tokens.get();
  auto store = Open(Options(), std::move(tokens));
  fake_.objects_["k"] = {"x", 1};
  fake_.reject_token_ = 1;
  ASSERT_TRUE(store->Stat("k").ok());
  EXPECT_EQ(t->gen_.load(), 2);
  EXPECT_EQ(fake_.auths_.back(), "Bearer tok-2");
}

TEST_F(GcsStoreFakeTest, SimpleUploadWhoseAnswerWasLostIsNotWrittenTwice) {
  auto store = Open(Options());
  fake_.lose_next_response_ = true;
  std::stringstream in("payload");
  ASSERT_TRUE(store->Put("a/b", in).ok());
  // First attempt stored generation 101; the retry hit ifGenerationMatch=0 -> 412 -> same MD5 -> done.
  EXPECT_EQ(fake_.objects_["a/b"].data, "payload");
  EXPECT_EQ(fake_.objects_["a/b"].generation, 101);

  // An overwrite with other content replaces the current generation.
  std::stringstream in2("other");
  ASSERT_TRUE(store->Put("a/b", in2).ok());
  EXPECT_EQ(fake_.objects_["a/b"].data, "other");
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  uint64_t x = 88172645463325252ull;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return s;
}

TEST_F(GcsStoreFakeTest, ResumableUploadResumesFromTheCommittedOffset) {
  GcsOptions o = Options();
  o.resumable_threshold = 256 * 1024;
  o.chunk_size = 256 * 1024;
  std::vector<int64_t> committed;
  o.on_chunk_committed = [&](const std::string&, int64_t c) {
    committed.push_back(c);
    if (committed.size() == 2) {
      std::lock_guard<std::mutex> l(fake_.mu_);
      fake_.partial_commit_next_ = true;  // the third chunk is half-stored, then fails
    }
  };
  auto store = Open(o);
  std::string data = Pattern(5 * 256 * 1024 + 1234);
  std::stringstream in(data);
  auto st = store->Put("big", in);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(fake_.objects_["big"].data, data);
  // The status query answered with the half chunk; the upload went on from exactly there.
  ASSERT_GE(committed.size(), 3u);
  EXPECT_EQ(committed[2], 2 * 256 * 1024 + 128 * 1024);
  bool queried = false;
  for (const auto& l : fake_.log_) queried |= l.find("bytes */*") != std::string::npos;
  EXPECT_TRUE(queried);
}

TEST_F(GcsStoreFakeTest, LostSessionRestartsFromARewoundSourceButNotFromAStream) {
  GcsOptions o = Options();
  o.resumable_threshold = 256 * 1024;
  o.chunk_size = 256 * 1024;
  int calls = 0;
  o.on_chunk_committed = [&](const std::string&, int64_t) {
    if (++calls == 2) {
      std::lock_guard<std::mutex> l(fake_.mu_);
      fake_.sessions_.clear();  // the server forgot every session (a restart)
    }
  };
  auto store = Open(o);
  std::string data = Pattern(4 * 256 * 1024);
  std::stringstream seekable(data);
  ASSERT_TRUE(store->Put("obj", seekable).ok());
  EXPECT_EQ(fake_.objects_["obj"].data, data);

  // A stream that cannot seek back: a clear UNAVAILABLE, and no partial object.
  class OneWay : public std::streambuf {
   public:
    explicit OneWay(std::string s) : s_(std::move(s)) { setg(s_.data(), s_.data(), s_.data() + s_.size()); }

   private:
    std::string s_;
  };
  calls = 0;
  OneWay buf(data);
  std::istream oneway(&buf);
  auto st = store->Put("obj2", oneway);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(std::string(st.message()).find("cannot be read again"), std::string::npos) << st;
  EXPECT_EQ(fake_.objects_.count("obj2"), 0u);
}

TEST_F(GcsStoreFakeTest, RangedReads) {
  auto store = Open(Options());
  fake_.objects_["r"] = {"0123456789", 5};
  auto get = [&](int64_t off, int64_t len) {
    std::stringstream out;
    auto st = store->Get("r", out, off, len);
    EXPECT_TRUE(st.ok()) << st;
    return out.str();
  };
  EXPECT_EQ(get(0, -1), "0123456789");
  EXPECT_EQ(get(3, 4), "3456");
  EXPECT_EQ(get(8, 100), "89");
  EXPECT_EQ(get(7, -1), "789");
  EXPECT_EQ(get(10, -1), "");
  EXPECT_EQ(get(50, 2), "");
  std::stringstream out;
  EXPECT_EQ(store->Get("missing", out).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Get("missing", out, 0, 0).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace falcon::objstore
