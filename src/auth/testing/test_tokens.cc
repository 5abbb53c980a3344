#include "auth/testing/test_tokens.h"

#include <cjose/cjose.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "auth/jwt.h"

namespace falcon::auth::testing {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "test_tokens: %s\n", what.c_str());
  std::abort();
}

std::vector<uint8_t> Bn(EVP_PKEY* pkey, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1)
    Die(std::string("EVP_PKEY_get_bn_param ") + name);
  std::vector<uint8_t> out(static_cast<size_t>(BN_num_bytes(bn)));
  BN_bn2bin(bn, out.data());
  BN_free(bn);
  return out;
}

// A fixed-width big-endian integer (EC coordinates are 32 bytes on P-256).
std::vector<uint8_t> BnPadded(EVP_PKEY* pkey, const char* name, size_t width) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1)
    Die(std::string("EVP_PKEY_get_bn_param ") + name);
  std::vector<uint8_t> out(width);
  if (BN_bn2binpad(bn, out.data(), static_cast<int>(width)) < 0) Die("BN_bn2binpad");
  BN_free(bn);
  return out;
}

std::string ExportJws(cjose_jws_t* jws) {
  cjose_err err{};
  const char* ser = nullptr;
  if (!cjose_jws_export(jws, &ser, &err)) Die(std::string("cjose_jws_export: ") + err.message);
  std::string out(ser);
  cjose_jws_release(jws);
  return out;
}

std::string SignWith(const cjose_jwk_t* jwk, const nlohmann::json& header_json,
                     const nlohmann::json& claims) {
  cjose_err err{};
  cjose_header_t* hdr = cjose_header_new(&err);
  for (auto it = header_json.begin(); it != header_json.end(); ++it) {
    bool ok = it->is_string()
                  ? cjose_header_set(hdr, it.key().c_str(), it->get<std::string>().c_str(), &err)
                  : cjose_header_set_raw(hdr, it.key().c_str(), it->dump().c_str(), &err);
    if (!ok) Die(std::string("cjose_header_set: ") + err.message);
  }
  const std::string payload = claims.dump();
  cjose_jws_t* jws = cjose_jws_sign(jwk, hdr, reinterpret_cast<const uint8_t*>(payload.data()),
                                    payload.size(), &err);
  cjose_header_release(hdr);
  if (jws == nullptr) Die(std::string("cjose_jws_sign: ") + err.message);
  return ExportJws(jws);
}

std::vector<std::string> Parts(const std::string& token) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = token.find('.', start);
    parts.push_back(
        token.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

std::string Base64UrlEncode(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::unique_ptr<TestKey> TestKey::Rsa(const std::string& kid, int bits) {
  std::unique_ptr<TestKey> k(new TestKey());
  k->kid_ = kid;
  EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(bits));
  if (pkey == nullptr) Die("EVP_PKEY_Q_keygen RSA");
  k->pkey_ = pkey;
  std::vector<uint8_t> n = Bn(pkey, OSSL_PKEY_PARAM_RSA_N), e = Bn(pkey, OSSL_PKEY_PARAM_RSA_E),
                       d = Bn(pkey, OSSL_PKEY_PARAM_RSA_D),
                       p = Bn(pkey, OSSL_PKEY_PARAM_RSA_FACTOR1),
                       q = Bn(pkey, OSSL_PKEY_PARAM_RSA_FACTOR2),
                       dp = Bn(pkey, OSSL_PKEY_PARAM_RSA_EXPONENT1),
                       dq = Bn(pkey, OSSL_PKEY_PARAM_RSA_EXPONENT2),
                       qi = Bn(pkey, OSSL_PKEY_PARAM_RSA_COEFFICIENT1);
  cjose_jwk_rsa_keyspec spec{};
  spec.e = e.data();
  spec.elen = e.size();
  spec.n = n.data();
  spec.nlen = n.size();
  spec.d = d.data();
  spec.dlen = d.size();
  spec.p = p.data();
  spec.plen = p.size();
  spec.q = q.data();
  spec.qlen = q.size();
  spec.dp = dp.data();
  spec.dplen = dp.size();
  spec.dq = dq.data();
  spec.dqlen = dq.size();
  spec.qi = qi.data();
  spec.qilen = qi.size();
  cjose_err err{};
  k->jwk_ = cjose_jwk_create_RSA_spec(&spec, &err);
  if (k->jwk_ == nullptr) Die(std::string("cjose_jwk_create_RSA_spec: ") + err.message);
  if (!cjose_jwk_set_kid(k->jwk_, kid.c_str(), kid.size(), &err)) Die("cjose_jwk_set_kid");
  return k;
}

std::unique_ptr<TestKey> TestKey::EcP256(const std::string& kid) {
  std::unique_ptr<TestKey> k(new TestKey());
  k->kid_ = kid;
  EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (pkey == nullptr) Die("EVP_PKEY_Q_keygen EC");
  k->pkey_ = pkey;
  std::vector<uint8_t> d = BnPadded(pkey, OSSL_PKEY_PARAM_PRIV_KEY, 32),
                       x = BnPadded(pkey, OSSL_PKEY_PARAM_EC_PUB_X, 32),
                       y = BnPadded(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  cjose_jwk_ec_keyspec spec{};
  spec.crv = CJOSE_JWK_EC_P_256;
  spec.d = d.data();
  spec.dlen = d.size();
  spec.x = x.data();
  spec.xlen = x.size();
  spec.y = y.data();
  spec.ylen = y.size();
  cjose_err err{};
  k->jwk_ = cjose_jwk_create_EC_spec(&spec, &err);
  if (k->jwk_ == nullptr) Die(std::string("cjose_jwk_create_EC_spec: ") + err.message);
  if (!cjose_jwk_set_kid(k->jwk_, kid.c_str(), kid.size(), &err)) Die("cjose_jwk_set_kid");
  return k;
}

TestKey::~TestKey() {
  if (jwk_ != nullptr) cjose_jwk_release(jwk_);
  if (pkey_ != nullptr) EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_));
}

nlohmann::json TestKey::PublicJwk() const {
  cjose_err err{};
  char* text = cjose_jwk_to_json(jwk_, /*priv=*/false, &err);
  if (text == nullptr) Die(std::string("cjose_jwk_to_json: ") + err.message);
  nlohmann::json j = nlohmann::json::parse(text);
  cjose_get_dealloc()(text);
  return j;
}

std::string TestKey::Sign(const nlohmann::json& claims, const std::string& alg,
                          const nlohmann::json& extra_header) const {
  nlohmann::json header = {{"alg", alg}, {"kid", kid_}, {"typ", "JWT"}};
  for (auto it = extra_header.begin(); it != extra_header.end(); ++it) {
    if (it->is_null()) {
      header.erase(it.key());
    } else {
      header[it.key()] = *it;
    }
  }
  return SignWith(jwk_, header, claims);
}

std::string TestKey::PublicKeyDer() const {
  unsigned char* der = nullptr;
  int len = i2d_PUBKEY(static_cast<EVP_PKEY*>(pkey_), &der);
  if (len <= 0) Die("i2d_PUBKEY");
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

std::string Jwks(std::initializer_list<const TestKey*> keys) {
  nlohmann::json j = {{"keys", nlohmann::json::array()}};
  for (const TestKey* k : keys) j["keys"].push_back(k->PublicJwk());
  return j.dump();
}

std::string SignHs256(const nlohmann::json& claims, const std::string& secret,
                      const std::string& kid) {
  cjose_err err{};
  cjose_jwk_t* oct = cjose_jwk_create_oct_spec(reinterpret_cast<const uint8_t*>(secret.data()),
                                               secret.size(), &err);
  if (oct == nullptr) Die(std::string("cjose_jwk_create_oct_spec: ") + err.message);
  std::string token = SignWith(oct, {{"alg", "HS256"}, {"kid", kid}, {"typ", "JWT"}}, claims);
  cjose_jwk_release(oct);
  return token;
}

std::string UnsignedToken(const nlohmann::json& claims, const std::string& kid) {
  nlohmann::json header = {{"alg", "none"}, {"typ", "JWT"}};
  if (!kid.empty()) header["kid"] = kid;
  return Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(claims.dump()) + ".";
}

std::string WithPayload(const std::string& token, const nlohmann::json& claims) {
  std::vector<std::string> p = Parts(token);
  return p.at(0) + "." + Base64UrlEncode(claims.dump()) + "." + p.at(2);
}

std::string WithTamperedSignature(const std::string& token) {
  std::vector<std::string> p = Parts(token);
  std::string& sig = p.at(2);
  char& c = sig[sig.size() / 2];
  c = c == 'A' ? 'B' : 'A';
  return p[0] + "." + p[1] + "." + sig;
}

nlohmann::json PayloadOf(const std::string& token) {
  std::vector<std::string> p = Parts(token);
  std::string json;
  if (p.size() != 3 || !Base64UrlDecode(p[1], &json)) Die("PayloadOf: not a JWT");
  return nlohmann::json::parse(json);
}

}  // namespace falcon::auth::testing
