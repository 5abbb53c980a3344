// Where the OIDC authenticator gets an issuer's documents (discovery and JWKS): a small interface
// so tests can serve them from memory, and the real implementation over net::HttpClient with a
// bounded time and size.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace falcon::auth {

class OidcFetcher {
 public:
  virtual ~OidcFetcher() = default;
  // The body of a 200 answer to GET `url`. Any failure is an error whose message names the URL and
  // why (transport failure, HTTP status, the time or size bound that was hit). Thread-safe.
  virtual absl::StatusOr<std::string> Get(const std::string& url) = 0;
};

struct HttpOidcFetcherOptions {
  std::string ca_pem;  // CAs trusted for the issuer's TLS instead of the system store; empty: the
                       // system store
  std::chrono::milliseconds timeout{10'000};  // the whole request, connection included
  size_t max_body_bytes = 1u << 20;           // a longer answer is refused, naming the limit
};

// GET over HTTPS with net::HttpClient (TLS verification always on, no redirects followed).
std::unique_ptr<OidcFetcher> NewHttpOidcFetcher(HttpOidcFetcherOptions options);

}  // namespace falcon::auth
