#include "auth/jwt.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace falcon::auth {
namespace {

constexpr std::array<int8_t, 256> MakeTable() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 26; ++i) {
    t['A' + i] = static_cast<int8_t>(i);
    t['a' + i] = static_cast<int8_t>(26 + i);
  }
  for (int i = 0; i < 10; ++i) t['0' + i] = static_cast<int8_t>(52 + i);
  t['-'] = 62;
  t['_'] = 63;
  return t;
}
constexpr std::array<int8_t, 256> kTable = MakeTable();

bool IsB64Url(char c) { return kTable[static_cast<unsigned char>(c)] >= 0; }

// Parses a JSON object; false for anything else (a parse error, an array, a number, ...).
bool ParseObject(const std::string& text, nlohmann::json* out) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  *out = std::move(j);
  return true;
}

}  // namespace

bool Base64UrlDecode(std::string_view in, std::string* out) {
  if (in.size() % 4 == 1) return false;
  out->clear();
  out->reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int8_t v = kTable[static_cast<unsigned char>(c)];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // The leftover bits must be zero (a canonical encoding).
  return (acc & ((1u << bits) - 1)) == 0;
}

std::string QuoteUntrusted(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 100))
    out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  if (s.size() > 100) out += "...";
  out += "'";
  return out;
}

bool LooksLikeJwt(std::string_view token) {
  if (token.size() < 3 || token.substr(0, 3) != "eyJ") return false;
  int dots = 0;
  for (char c : token) {
    if (c == '.') {
      ++dots;
    } else if (!IsB64Url(c)) {
      return false;
    }
  }
  return dots == 2;
}

absl::StatusOr<UnverifiedJwt> DecodeUnverifiedJwt(std::string_view token, size_t max_bytes) {
  if (!LooksLikeJwt(token)) return absl::NotFoundError("the bearer token is not a JWT");
  if (token.size() > max_bytes) {
    return absl::UnauthenticatedError(absl::StrCat("the token is ", token.size(),
                                                   " bytes long, more than the limit of ",
                                                   max_bytes, " bytes for a JWT"));
  }
  size_t d1 = token.find('.');
  size_t d2 = token.find('.', d1 + 1);
  std::string header_json, claims_json;
  UnverifiedJwt jwt;
  if (!Base64UrlDecode(token.substr(0, d1), &header_json) ||
      !ParseObject(header_json, &jwt.header)) {
    return absl::NotFoundError(
        "the bearer token is not a JWT (its header is not a base64url JSON object)");
  }
  if (!Base64UrlDecode(token.substr(d1 + 1, d2 - d1 - 1), &claims_json) ||
      !ParseObject(claims_json, &jwt.claims)) {
    return absl::NotFoundError(
        "the bearer token is not a JWT (its payload is not a base64url JSON object)");
  }
  return jwt;
}

}  // namespace falcon::auth
