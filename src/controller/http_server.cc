#include "controller/http_server.h"


#include <httplib.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/listen_address.h"
#include "common/status.h"
#include "controller/controller.h"
#include "controller/metrics.h"

namespace falcon::controller {
namespace {

class HttplibHealthServer : public HealthServer {
 public:
  HttplibHealthServer(Controller& c, ControllerMetrics& m) {
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    server_.Get("/readyz", [&c](const httplib::Request&, httplib::Response& res) {
      absl::Status s = c.Ready();
      if (s.ok()) {
        res.set_content("ready\n", "text/plain");
      } else {
        res.status = 503;
        res.set_content(absl::StrCat("not ready: ", std::string(s.message()), "\n"), "text/plain");
      }
    });
    server_.Get("/metrics", [&m](const httplib::Request&, httplib::Response& res) {
      res.set_content(m.RenderPrometheus(), "text/plain; version=0.0.4");
    });
  }
  ~HttplibHealthServer() override { Stop(); }

  absl::Status Bind(const std::string& listen) {
    auto colon = listen.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http-listen=", listen, " must be HOST:PORT, e.g. 127.0.0.1:8081"));
    }
    std::string host = listen.substr(0, colon);
    int port = 0;
    try {
      port = std::stoi(listen.substr(colon + 1));
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrCat("--http-listen=", listen, ": bad port"));
    }
    if (host.empty()) host = "0.0.0.0";
    server_.set_socket_options(ExclusiveListenSocketOptions);  // a port in use is an error, not shared
    if (port == 0) {
      port_ = server_.bind_to_any_port(host);
    } else {
      port_ = server_.bind_to_port(host, port) ? port : -1;
    }
    if (port_ <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, " (HTTP)"));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  void Stop() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> StartHealthServer(const std::string& listen,
                                                                Controller& controller,
                                                                ControllerMetrics& metrics) {
  auto s = std::make_unique<HttplibHealthServer>(controller, metrics);
  FALCON_RETURN_IF_ERROR(s->Bind(listen));
  return std::unique_ptr<HealthServer>(std::move(s));
}

}  // namespace falcon::controller
