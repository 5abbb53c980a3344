// Bearer secrets shared between components, and their hashes: the one place that makes, hashes, reads and
// compares a static token's secret (OpenSSL: SHA-256, RAND_bytes, CRYPTO_memcmp).
//
// PeerToken is a component's check of its callers: the analyzer controller accepts gRPC calls only from
// whoever holds its own API token (the API server, which wrote that token at first start, sends it), so
// nothing but the API server reaches the controller's gRPC (docs/security.md "Component identity").
// Only the secret's SHA-256 is kept; the comparison takes the same time wherever the hashes differ.
//
// Thread-safe: pure functions and an immutable PeerToken.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::auth {

// Lowercase hex SHA-256 of `secret` (OpenSSL EVP).
std::string HashToken(std::string_view secret);
// A new secret: "fal_" + 43 characters of web-safe base64 of 32 random bytes (OpenSSL RAND_bytes).
// INTERNAL if the random generator fails.
absl::StatusOr<std::string> NewTokenSecret();

// The secret in a token file: its first line without trailing white space, at most 4 KiB read.
// FAILED_PRECONDITION naming `flag` and the file when it cannot be read or holds no token.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag);

class PeerToken {
 public:
  PeerToken() = default;  // accepts nothing
  explicit PeerToken(std::string_view secret) : hash_(HashToken(secret)) {}
  bool empty() const { return hash_.empty(); }
  // `authorization`: the value of an `authorization` header or metadata entry ("Bearer SECRET").
  // UNAUTHENTICATED saying what is missing or wrong (never echoing the secret).
  absl::Status Check(std::string_view authorization) const;

 private:
  std::string hash_;
};

}  // namespace falcon::auth
