// The HTTP API as an outside client (or a fuzzer) sees the protocol: the regressions of what an API fuzzer
// found — keep-alive desync after a refused request, 5xx for bad input, limits as documented, invalid input
// accepted, and protocol answers (405 + Allow, 414, a POST without Content-Length). Raw sockets where the
// point is the bytes on the connection. No controller: the requests here are decided before forwarding.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "apiserver/http_server.h"
#include "apiserver/testing/http_server_fixture.h"

namespace falcon::apiserver {
namespace {

using nlohmann::json;

// A raw connection to the server: sends bytes, reads what comes back until the server closes or stays
// silent for `idle`.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConn() { close(fd_); }
  bool connected() const { return connected_; }

  void Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may have closed after answering
      sent += static_cast<size_t>(n);
    }
  }
  // Reads until EOF, or until nothing arrived for `idle`; `closed` says which.
  std::string Read(std::chrono::milliseconds idle = std::chrono::milliseconds(700), bool* closed = nullptr) {
    std::string out;
    char buf[65536];
    bool eof = false;
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(idle.count())) <= 0) break;
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        eof = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    if (closed) *closed = eof;
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The status codes of every response in `raw`, in order.
std::vector<int> Statuses(const std::string& raw) {
  std::vector<int> out;
  for (size_t pos = raw.find("HTTP/1.1 "); pos != std::string::npos; pos = raw.find("HTTP/1.1 ", pos + 1)) {
    out.push_back(std::atoi(raw.c_str() + pos + 9));
  }
  return out;
}

json FirstBody(const std::string& raw) {
  auto split = raw.find("\r\n\r\n");
  if (split == std::string::npos) return nullptr;
  auto end = raw.find("HTTP/1.1 ", split);
  return json::parse(raw.substr(split + 4, end == std::string::npos ? std::string::npos : end - split - 4),
                     nullptr, false);
}

class HttpProtocolTest : public testing::HttpServerFixture {
 protected:
  void SetUp() override {
    HttpServerFixture::SetUp();
    if (HasFatalFailure()) return;
    StartHttp(/*controller=*/nullptr);
  }

  std::pair<int, json> Do(const std::string& method, const std::string& path, const std::string& body = "",
                          const std::string& content_type = "application/json") {
    httplib::Request req;
    req.method = method;
    req.path = path;
    req.body = body;
    if (!body.empty()) req.set_header("Content-Type", content_type);
    auto r = client_->send(req);
    EXPECT_TRUE(r) << method << " " << path << ": " << httplib::to_string(r.error());
    if (!r) return {0, nullptr};
    last_headers_ = r->headers;
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  void CreateExp(const std::string& id, const std::string& status = "pending") {
    auto [code, j] = Do("POST", "/v1/exps", json{{"exp_id", id}, {"name", "exp " + id}, {"status", status}}.dump());
    ASSERT_EQ(code, 201) << j;
  }

  httplib::Headers last_headers_;
};

// A refused upload whose body is itself an HTTP request: the body must never be executed, and the next
// request on the connection must get its own answer.
TEST_F(HttpProtocolTest, ARefusedUploadsBodyIsNeverParsedAsARequest) {
  CreateExp("victim");
  const std::string patch_body = R"({"status": "failed"})";
  const std::string smuggled = "PATCH /v1/exps/victim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               "Content-Length: " + std::to_string(patch_body.size()) + "\r\n\r\n" + patch_body;
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  conn.Send("PUT /v1/exps/no-such-exp/files/x.bin HTTP/1.1\r\nHost: x\r\nContent-Length: " +
            std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  conn.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string raw = conn.Read();
  auto statuses = Statuses(raw);
  ASSERT_FALSE(statuses.empty()) << raw;
  EXPECT_EQ(statuses[0], 404) << raw;
  EXPECT_EQ(FirstBody(raw)["error"]["code"], "NOT_FOUND") << raw;
  // The follow-up is answered as itself (the small body was drained), never with the PATCH's answer.
  EXPECT_EQ(statuses, (std::vector<int>{404, 200})) << raw;
  auto exp = store_->GetExp("victim");
  ASSERT_TRUE(exp.ok());
  EXPECT_EQ(exp->status(), api::v1::EXP_STATUS_PENDING) << "the smuggled PATCH was executed";
}

// Beyond the drain bound the connection is closed (and says so) instead of being read on.
TEST_F(HttpProtocolTest, ALargeRefusedBodyClosesTheConnection) {
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  const std::string body(kDrainBytes * 4, 'x');
  conn.Send("PUT /v1/exps/no-such-exp/files/x.bin HTTP/1.1\r\nHost: x\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n");
  bool closed = false;
  std::string raw = conn.Read(std::chrono::milliseconds(3000), &closed);
  EXPECT_EQ(Statuses(raw), std::vector<int>{404}) << raw;
  EXPECT_NE(raw.find("Connection: close"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("Keep-Alive"), std::string::npos) << raw;
  EXPECT_TRUE(closed) << "the connection should be closed";
}

TEST_F(HttpProtocolTest, APostWithoutContentLengthIsAnsweredAtOnce) {
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  auto start = std::chrono::steady_clock::now();
  conn.Send("POST /v1/exps HTTP/1.1\r\nHost: x\r\n\r\n");
  // The answer must come before the reader gives up after 1 s of silence (the old server waited 5 s).
  std::string raw = conn.Read(std::chrono::milliseconds(1000));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(Statuses(raw), std::vector<int>{400}) << raw;  // an empty body: name is required
  EXPECT_NE(FirstBody(raw)["error"]["message"].get<std::string>().find("name"), std::string::npos) << raw;
  EXPECT_LT(took, std::chrono::milliseconds(2500)) << "waited for a body that was never announced";
}

TEST_F(HttpProtocolTest, AmbiguousFramingIsRefusedAndClosed) {
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  conn.Send("POST /v1/exps HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0\r\n\r\n");
  bool closed = false;
  std::string raw = conn.Read(std::chrono::milliseconds(3000), &closed);
  EXPECT_EQ(Statuses(raw), std::vector<int>{400}) << raw;
  EXPECT_TRUE(closed);
}

TEST_F(HttpProtocolTest, WrongMethodIs405WithAllowAndLongUriIs414) {
  auto got = Do("DELETE", "/v1/exps");
  ExpectError(got, 405, "UNIMPLEMENTED", "GET, HEAD, POST");
  auto allow = last_headers_.find("Allow");
  ASSERT_NE(allow, last_headers_.end());
  EXPECT_EQ(allow->second, "GET, HEAD, POST");
  ExpectError(Do("PUT", "/v1/analyses/x"), 405, "UNIMPLEMENTED");
  ExpectError(Do("TRACE", "/v1/exps"), 405, "UNIMPLEMENTED");
  ExpectError(Do("GET", "/v1/nothing"), 404, "NOT_FOUND", "no route");

  // Methods cpp-httplib does not know are still methods: 405 with Allow on a known path, 404 elsewhere, and
  // the connection (with the request's body drained) serves the next request.
  {
    RawConn conn(port_);
    ASSERT_TRUE(conn.connected());
    conn.Send("QUERY /v1/exps HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
              "BREW /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
              "get /v1/plugins HTTP/1.1\r\nHost: x\r\n\r\n"
              "QUERY /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
              "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string raw = conn.Read(std::chrono::milliseconds(2000));
    EXPECT_EQ(Statuses(raw), (std::vector<int>{405, 405, 405, 404, 200})) << raw;
    EXPECT_EQ(FirstBody(raw)["error"]["code"], "UNIMPLEMENTED") << raw;
    EXPECT_NE(raw.find("QUERY is not allowed on /v1/exps"), std::string::npos) << raw;
    EXPECT_NE(raw.find("Allow: GET, HEAD, POST\r\n"), std::string::npos) << raw;
    EXPECT_NE(raw.find("Allow: GET, HEAD\r\n"), std::string::npos) << raw;
  }
  // A "method" that is not a token is a malformed request line: 400, and the connection is closed.
  {
    RawConn conn(port_);
    ASSERT_TRUE(conn.connected());
    conn.Send("GE(T /v1/exps HTTP/1.1\r\nHost: x\r\n\r\n");
    bool closed = false;
    std::string raw = conn.Read(std::chrono::milliseconds(3000), &closed);
    EXPECT_EQ(Statuses(raw), std::vector<int>{400}) << raw;
    EXPECT_EQ(FirstBody(raw)["error"]["code"], "INVALID_ARGUMENT") << raw;
    EXPECT_TRUE(closed);
  }

  ExpectError(Do("GET", "/v1/exps/" + std::string(9000, 'a')), 414, "RESOURCE_EXHAUSTED", "8192");
}

TEST_F(HttpProtocolTest, BadInputIs4xxNever5xx) {
  CreateExp("e1");
  ExpectError(Do("POST", "/v1/exps", R"({"name": 1e400})"), 400, "INVALID_ARGUMENT");
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls", "resource_override": {"cpu_limit": "1e-"}})"),
              400, "INVALID_ARGUMENT", "cpu_limit");
  ExpectError(Do("POST", "/v1/analyses",
                 json{{"exp_id", "e1"}, {"command", "ls"}, {"resource_override", {{"memory_limit", std::string(400, '9')}}}}.dump()),
              400, "INVALID_ARGUMENT", "memory_limit");
  ExpectError(Do("PUT", "/v1/exps/e1/files/a.bin", "--b\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b"), 415,
              "INVALID_ARGUMENT", "application/octet-stream");

  // Upload names the file store cannot take: 4xx, and no server path in the message.
  auto too_long = Do("PUT", "/v1/exps/e1/files/" + std::string(300, 'n'), "x", "application/octet-stream");
  ExpectError(too_long, 400, "INVALID_ARGUMENT", "255");
  ASSERT_EQ(Do("PUT", "/v1/exps/e1/files/dir/inner.txt", "x", "application/octet-stream").first, 201);
  auto folder = Do("PUT", "/v1/exps/e1/files/dir", "x", "application/octet-stream");
  ExpectError(folder, 409, "FAILED_PRECONDITION", "folder");
  auto under_file = Do("PUT", "/v1/exps/e1/files/dir/inner.txt/deeper", "x", "application/octet-stream");
  ExpectError(under_file, 409, "FAILED_PRECONDITION", "dir/inner.txt");
  for (const auto& r : {too_long, folder, under_file}) {
    EXPECT_EQ(r.second.dump().find(dir_.string()), std::string::npos) << "a server path leaked: " << r.second;
  }
}

TEST_F(HttpProtocolTest, LimitsAreTheDocumentedOnes) {
  CreateExp("e1");
  auto big = Do("PUT", "/v1/exps/e1/files/big.bin", std::string(3'000'000, 'b'), "application/octet-stream");
  ExpectError(big, 413, "RESOURCE_EXHAUSTED", std::to_string(kDefaultMaxBodyBytes));
  auto ok = Do("PUT", "/v1/exps/e1/files/ok.bin", std::string(kDefaultMaxBodyBytes, 'b'), "application/octet-stream");
  EXPECT_EQ(ok.first, 201) << ok.second;
  EXPECT_EQ(ok.second["size_bytes"], kDefaultMaxBodyBytes);

  // curl -d sends application/x-www-form-urlencoded: the body is still JSON, and bodies over 8 KiB work.
  std::string padded = R"({"exp_id": "form", "name": "sent by curl -d")" + std::string(20'000, ' ') + "}";
  auto form = Do("POST", "/v1/exps", padded, "application/x-www-form-urlencoded");
  EXPECT_EQ(form.first, 201) << form.second;
}

TEST_F(HttpProtocolTest, InvalidInputIsRefused) {
  CreateExp("e1");
  ExpectError(Do("POST", "/v1/exps", R"({"name": "x", "status": 4294967297})"), 400, "INVALID_ARGUMENT", "status");
  ExpectError(Do("POST", "/v1/exps", R"({"name": null})"), 400, "INVALID_ARGUMENT", "null");
  ExpectError(Do("POST", "/v1/exps", R"({"exp_id": "", "name": "x"})"), 400, "INVALID_ARGUMENT", "exp_id");
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "e1", "plugin_name": "file-stats", "analysis_id": ""})"), 400,
              "INVALID_ARGUMENT", "analysis_id");
  ExpectError(Do("POST", "/v1/exps", json{{"name", std::string(257, 'n')}}.dump()), 400, "INVALID_ARGUMENT", "256");
  ExpectError(Do("POST", "/v1/exps/e1/artifacts", R"({"artifact_type": "hlo", "uri": "http://example.com/x"})"), 400,
              "INVALID_ARGUMENT", "uri");
  ExpectError(Do("DELETE", "/v1/analyses/0192f3c4-5d6e-7abc-8def-0123456789ab?purge="), 400, "INVALID_ARGUMENT",
              "purge");
  ExpectError(Do("GET", "/v1/analyses?status="), 400, "INVALID_ARGUMENT", "status");
  ExpectError(Do("GET", "/v1/exps?status="), 400, "INVALID_ARGUMENT", "status");
  ExpectError(Do("GET", "/v1/analyses?exp_id="), 400, "INVALID_ARGUMENT", "exp_id");
  ExpectError(Do("GET", "/v1/analyses?status=pending,"), 400, "INVALID_ARGUMENT", "status");
  // A filter follows the rule of what it filters.
  ExpectError(Do("GET", "/v1/analyses?exp_id=%C3%97%C3%B8"), 400, "INVALID_ARGUMENT", "exp_id");
  ExpectError(Do("GET", "/v1/analyses?exp_id=-x"), 400, "INVALID_ARGUMENT", "exp_id");
  EXPECT_EQ(Do("GET", "/v1/analyses?exp_id=e1").first, 200);
}

TEST_F(HttpProtocolTest, DocumentedFormsAreAccepted) {
  CreateExp("e1", "completed");
  auto [code, list] = Do("GET", "/v1/exps?status=3");
  ASSERT_EQ(code, 200) << list;
  ASSERT_EQ(list["exps"].size(), 1u) << list;
  auto [acode, analyses] = Do("GET", "/v1/analyses?status=1,2");
  EXPECT_EQ(acode, 200) << analyses;

  ExpectError(Do("DELETE", "/v1/analyses/0192f3c4-5d6e-7abc-8def-0123456789ab"), 404, "NOT_FOUND");

  // An Exp moved back from completed is no longer completed.
  auto [pcode, patched] = Do("PATCH", "/v1/exps/e1", R"({"status": "running"})");
  ASSERT_EQ(pcode, 200) << patched;
  EXPECT_FALSE(patched.contains("completed_at")) << patched;

  auto doc = client_->Get("/openapi.json");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->status, 200);
  json j = json::parse(doc->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << doc->body;
  EXPECT_EQ(j["openapi"].get<std::string>().substr(0, 2), "3.");
}

TEST_F(HttpProtocolTest, ChunkedUploadAndKeepAlive) {
  CreateExp("e1");
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  conn.Send("PUT /v1/exps/e1/files/c.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string raw = conn.Read();
  EXPECT_EQ(Statuses(raw), (std::vector<int>{201, 200})) << raw;
  EXPECT_EQ(FirstBody(raw)["size_bytes"], 11) << raw;
}

}  // namespace
}  // namespace falcon::apiserver
