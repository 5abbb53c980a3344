#include "tls/x509_identity.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/pem.h>

#include <memory>

namespace falcon::tls {
namespace {

std::string EntryText(X509_NAME_ENTRY* e) {
  unsigned char* utf8 = nullptr;
  int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e));
  if (n < 0) return "";
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

}  // namespace

absl::StatusOr<auth::Principal> PrincipalFromCertificate(X509* cert) {
  if (cert == nullptr) return absl::UnauthenticatedError("no client certificate");
  X509_NAME* name = X509_get_subject_name(cert);
  auth::Principal p;
  p.authenticator = kX509Authenticator;
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    if (nid == NID_commonName) p.username = EntryText(e);  // the last CN, as Kubernetes does
    if (nid == NID_organizationName) {
      std::string o = EntryText(e);
      if (!o.empty()) p.groups.push_back(std::move(o));
    }
  }
  if (p.username.empty()) {
    return absl::UnauthenticatedError("the client certificate's subject has no common name (CN) to name the user");
  }
  return p;
}

absl::StatusOr<auth::Principal> PrincipalFromPem(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  if (!cert) return absl::UnauthenticatedError("the client certificate does not parse");
  return PrincipalFromCertificate(cert.get());
}

std::string SubjectText(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

std::string SerialText(X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  if (bn == nullptr) return "";
  char* hex = BN_bn2hex(bn);
  std::string out = hex != nullptr ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

}  // namespace falcon::tls
