#include "tls/testing/test_pki.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

namespace falcon::tls::testing {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test PKI: %s failed\n", what);
    std::abort();
  }
}

EVP_PKEY* NewKey() {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  Check(k != nullptr, "EVP_EC_gen");
  return k;
}

std::string KeyPem(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  Check(PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr) == 1, "write key");
  char* d = nullptr;
  long n = BIO_get_mem_data(b, &d);
  std::string out(d, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

std::string CertPem(X509* x) {
  BIO* b = BIO_new(BIO_s_mem());
  Check(PEM_write_bio_X509(b, x) == 1, "write cert");
  char* d = nullptr;
  long n = BIO_get_mem_data(b, &d);
  std::string out(d, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

void AddExt(X509* x, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  Check(e != nullptr, "extension");
  X509_add_ext(x, e, -1);
  X509_EXTENSION_free(e);
}

X509* NewCert(const CertSpec& spec, EVP_PKEY* key) {
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), spec.serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  for (const auto& o : spec.organizations) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1,
                               0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0);
  return x;
}

}  // namespace

TestCa::TestCa(const std::string& name) {
  EVP_PKEY* key = NewKey();
  CertSpec spec;
  spec.common_name = name;
  X509* x = NewCert(spec, key);
  X509_set_issuer_name(x, X509_get_subject_name(x));
  AddExt(x, x, NID_basic_constraints, "critical,CA:TRUE");
  AddExt(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExt(x, x, NID_subject_key_identifier, "hash");
  Check(X509_sign(x, key, EVP_sha256()) > 0, "sign CA");
  ca_.cert_pem = CertPem(x);
  ca_.key_pem = KeyPem(key);
  X509_free(x);
  EVP_PKEY_free(key);
}

TestCert TestCa::Issue(const CertSpec& spec) const {
  BIO* kb = BIO_new_mem_buf(ca_.key_pem.data(), static_cast<int>(ca_.key_pem.size()));
  EVP_PKEY* ca_key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  BIO* cb = BIO_new_mem_buf(ca_.cert_pem.data(), static_cast<int>(ca_.cert_pem.size()));
  X509* ca = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  Check(ca_key != nullptr && ca != nullptr, "read CA");

  EVP_PKEY* key = NewKey();
  X509* x = NewCert(spec, key);
  X509_set_issuer_name(x, X509_get_subject_name(ca));
  AddExt(x, ca, NID_basic_constraints, "critical,CA:FALSE");
  AddExt(x, ca, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  AddExt(x, ca, NID_ext_key_usage, spec.server ? "serverAuth" : "clientAuth");
  std::string san;
  for (const auto& d : spec.dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : spec.ips) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  if (!san.empty()) AddExt(x, ca, NID_subject_alt_name, san);
  Check(X509_sign(x, ca_key, EVP_sha256()) > 0, "sign");
  TestCert out{CertPem(x), KeyPem(key)};
  X509_free(x);
  X509_free(ca);
  EVP_PKEY_free(key);
  EVP_PKEY_free(ca_key);
  return out;
}

TestCert TestCa::Server(uint64_t serial, const std::string& cn) const {
  CertSpec s;
  s.common_name = cn;
  s.dns_names = {"localhost"};
  s.ips = {"127.0.0.1", "::1"};
  s.serial = serial;
  return Issue(s);
}

TestCert TestCa::Client(const std::string& cn, const std::vector<std::string>& orgs, uint64_t serial) const {
  CertSpec s;
  s.common_name = cn;
  s.organizations = orgs;
  s.serial = serial;
  s.server = false;
  return Issue(s);
}

std::string PeerCertificateSerial(int port, const std::string& ca_pem) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (ca != nullptr) X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
  X509_free(ca);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  std::unique_ptr<BIO, decltype(&BIO_free_all)> conn(BIO_new_ssl_connect(ctx.get()), &BIO_free_all);
  BIO_set_conn_hostname(conn.get(), ("127.0.0.1:" + std::to_string(port)).c_str());
  SSL* ssl = nullptr;
  BIO_get_ssl(conn.get(), &ssl);
  SSL_set1_host(ssl, "127.0.0.1");
  if (BIO_do_connect(conn.get()) != 1 || BIO_do_handshake(conn.get()) != 1) {
    char why[256] = "connection closed";
    if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, why, sizeof(why));
    ERR_clear_error();
    return std::string("handshake failed: ") + why;
  }
  X509* peer = SSL_get0_peer_certificate(ssl);
  if (peer == nullptr) return "handshake failed: no certificate";
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(peer), nullptr);
  char* hex = BN_bn2hex(bn);
  std::string out = hex;
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << data;
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace falcon::tls::testing
