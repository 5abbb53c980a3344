#include "auth/oidc_fetcher.h"

#include "absl/strings/str_cat.h"
#include "net/http_client.h"

namespace falcon::auth {
namespace {

class HttpOidcFetcher : public OidcFetcher {
 public:
  explicit HttpOidcFetcher(HttpOidcFetcherOptions options)
      : options_(std::move(options)), client_(ClientOptions(options_)) {}

  absl::StatusOr<std::string> Get(const std::string& url) override {
    net::HttpRequest req;
    req.method = "GET";
    req.url = url;
    // kube-apiserver answers 406 to a JWKS request that does not accept application/jwk-set+json.
    req.headers = {"Accept: application/json, application/jwk-set+json"};
    req.connect_timeout = options_.timeout;
    req.timeout = options_.timeout;
    req.max_body_bytes = options_.max_body_bytes;
    absl::StatusOr<net::HttpResponse> resp = client_.Send(req);
    if (!resp.ok()) {
      if (net::TransportFailureOf(resp.status()) == net::TransportFailure::kTimeout ||
          resp.status().code() == absl::StatusCode::kDeadlineExceeded) {
        return absl::DeadlineExceededError(absl::StrCat(
            resp.status().message(), " (no answer within ", options_.timeout.count(), " ms)"));
      }
      return resp.status();
    }
    if (resp->status != 200) {
      std::string body = resp->body.substr(0, 200);
      return absl::UnavailableError(
          absl::StrCat("GET ", url, ": HTTP ", resp->status, body.empty() ? "" : ": ", body));
    }
    return std::move(resp->body);
  }

 private:
  static net::ClientOptions ClientOptions(const HttpOidcFetcherOptions& o) {
    net::ClientOptions c;
    c.user_agent = "falcon-oidc";
    c.tls.ca_pem = o.ca_pem;
    return c;
  }

  const HttpOidcFetcherOptions options_;
  net::HttpClient client_;
};

}  // namespace

std::unique_ptr<OidcFetcher> NewHttpOidcFetcher(HttpOidcFetcherOptions options) {
  return std::make_unique<HttpOidcFetcher>(std::move(options));
}

}  // namespace falcon::auth
