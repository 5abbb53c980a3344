#include "auth/token_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cctype>
#include <fstream>

#include "absl/strings/escaping.h"

namespace falcon::auth {

std::string HashToken(std::string_view secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(secret.data(), secret.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    return "";  // cannot happen with a built-in digest; an empty hash never matches a stored one
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), len));
}

absl::StatusOr<std::string> NewTokenSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return absl::InternalError("OpenSSL RAND_bytes failed");
  std::string out;
  absl::WebSafeBase64Escape(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes), &out);
  return "fal_" + out;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError(flag + " " + path + " cannot be read");
  std::string line(4096, '\0');
  in.getline(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<size_t>(in.gcount() > 0 ? in.gcount() : 0));
  while (!line.empty() && (line.back() == '\0' || std::isspace(static_cast<unsigned char>(line.back())))) {
    line.pop_back();
  }
  if (line.empty()) return absl::FailedPreconditionError(flag + " " + path + " holds no token");
  return line;
}

absl::Status PeerToken::Check(std::string_view authorization) const {
  if (hash_.empty()) return absl::UnauthenticatedError("this server accepts no caller");
  if (authorization.empty()) {
    return absl::UnauthenticatedError("no credential given: send the API token as `authorization: Bearer TOKEN`");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("the authorization is not `Bearer TOKEN`");
  }
  const std::string got = HashToken(authorization.substr(kBearer.size()));
  if (got.size() != hash_.size() || CRYPTO_memcmp(got.data(), hash_.data(), hash_.size()) != 0) {
    return absl::UnauthenticatedError("the token is not the one this server accepts");
  }
  return absl::OkStatus();
}

}  // namespace falcon::auth
