// The unverified parts of a JSON Web Token (RFC 7519) in compact JWS form: header and claims
// decoded, the signature not checked. For routing (which issuer?) and for words in error messages
// only; nothing read here may be trusted before the token's signature verifies (OidcAuthenticator
// does that with libcjose). Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace falcon::auth {

struct UnverifiedJwt {
  nlohmann::json header;  // a JSON object
  nlohmann::json claims;  // a JSON object
};

// True when `token` has the shape of a compact JWS (three base64url parts, the first starting
// "eyJ", the encoding of '{"'). Cheap; looks at no more than the characters.
bool LooksLikeJwt(std::string_view token);

// Decodes header and claims. NOT_FOUND when `token` is not a compact JWS whose header and payload
// are JSON objects (so a chain can try a non-JWT authenticator); UNAUTHENTICATED naming the limit
// when it is longer than `max_bytes` but looks like a JWT. The message never contains the token.
absl::StatusOr<UnverifiedJwt> DecodeUnverifiedJwt(std::string_view token, size_t max_bytes);

// `s` quoted for an error message: at most 100 characters, control characters replaced by '?'. For
// values read from an untrusted token or document.
std::string QuoteUntrusted(std::string_view s);

// Decodes base64url without padding (RFC 7515 section 2). False for anything else.
bool Base64UrlDecode(std::string_view in, std::string* out);

}  // namespace falcon::auth
