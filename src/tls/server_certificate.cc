#include "tls/server_certificate.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tls/x509_identity.h"

namespace falcon::tls {
namespace {

std::string OpenSslError() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

std::string TimeText(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return "unknown";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot be read"));
  std::string data;
  data.resize(kMaxPemFileBytes + 1);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > kMaxPemFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": larger than the limit of ", kMaxPemFileBytes, " bytes"));
  }
  return data;
}

absl::StatusOr<std::unique_ptr<ServerCertificate>> ServerCertificate::Create(ServerTlsFiles files, Clock& clock) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert-file and --tls-key-file must be given together");
  }
  if (files.require_client_certificate && files.client_ca_file.empty()) {
    return absl::InvalidArgumentError("requiring client certificates needs --client-ca-file");
  }
  std::unique_ptr<ServerCertificate> c(new ServerCertificate(std::move(files), clock));
  auto m = c->ReadFiles();
  if (!m.ok()) return m.status();
  CertificateInfo info;
  auto ctx = c->Build(*m, &info);
  if (!ctx.ok()) return ctx.status();
  std::string tmpl = (std::filesystem::temp_directory_path() / "falcon-tls-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make a private directory for the gRPC certificate copy: ",
                                            std::strerror(errno)));
  }
  c->dir_ = tmpl;
  if (auto s = c->WriteGrpcCopy(*m); !s.ok()) return s;
  c->ctx_ = std::move(*ctx);
  c->loaded_ = std::move(*m);
  c->info_ = info;
  return c;
}

ServerCertificate::~ServerCertificate() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  clock_.Notify();
  if (thread_.joinable()) thread_.join();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

unsigned ServerCertificate::grpc_refresh_seconds() const {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(files_.check_interval).count();
  return static_cast<unsigned>(std::max<int64_t>(1, s));
}

void ServerCertificate::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      clock_.SleepFor(files_.check_interval, [this] {
        std::lock_guard<std::mutex> l(mu_);
        return stopping_;
      });
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stopping_) return;
      }
      (void)MaybeReload();  // logs what it refused
    }
  });
}

absl::StatusOr<ServerCertificate::Material> ServerCertificate::ReadFiles() const {
  Material m;
  auto cert = ReadPemFile(files_.cert_file, "--tls-cert-file");
  if (!cert.ok()) return cert.status();
  m.cert = std::move(*cert);
  auto key = ReadPemFile(files_.key_file, "--tls-key-file");
  if (!key.ok()) return key.status();
  m.key = std::move(*key);
  if (!files_.client_ca_file.empty()) {
    auto ca = ReadPemFile(files_.client_ca_file, "--client-ca-file");
    if (!ca.ok()) return ca.status();
    m.ca = std::move(*ca);
  }
  return m;
}

absl::StatusOr<SslCtxPtr> ServerCertificate::Build(const Material& m, CertificateInfo* info) const {
  ERR_clear_error();
  auto fail = [&](const std::string& file, const std::string& flag, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", file, ": ", what, " (", OpenSslError(), ")"));
  };
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()), SslCtxFree());
  if (!ctx) return absl::InternalError("SSL_CTX_new: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);

  // The chain: leaf first, then intermediates.
  BioPtr cert_bio(BIO_new_mem_buf(m.cert.data(), static_cast<int>(m.cert.size())));
  X509Ptr leaf(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!leaf) return fail(files_.cert_file, "--tls-cert-file", "no PEM certificate");
  if (SSL_CTX_use_certificate(ctx.get(), leaf.get()) != 1) {
    return fail(files_.cert_file, "--tls-cert-file", "certificate not usable");
  }
  for (;;) {
    X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
    if (extra == nullptr) break;
    if (SSL_CTX_add_extra_chain_cert(ctx.get(), extra) != 1) {  // takes ownership on success
      X509_free(extra);
      return fail(files_.cert_file, "--tls-cert-file", "chain certificate not usable");
    }
  }
  ERR_clear_error();  // the end of the chain reads as an error

  BioPtr key_bio(BIO_new_mem_buf(m.key.data(), static_cast<int>(m.key.size())));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) return fail(files_.key_file, "--tls-key-file", "no PEM private key");
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
    return fail(files_.key_file, "--tls-key-file", "the key does not belong to the certificate of --tls-cert-file");
  }

  if (!m.ca.empty()) {
    BioPtr ca_bio(BIO_new_mem_buf(m.ca.data(), static_cast<int>(m.ca.size())));
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    int n = 0;
    for (;;) {
      X509* ca = PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr);
      if (ca == nullptr) break;
      X509_STORE_add_cert(store, ca);
      if (X509_NAME* dup = X509_NAME_dup(X509_get_subject_name(ca)); dup != nullptr) sk_X509_NAME_push(names, dup);
      X509_free(ca);
      ++n;
    }
    ERR_clear_error();
    if (n == 0) {
      sk_X509_NAME_pop_free(names, X509_NAME_free);
      return fail(files_.client_ca_file, "--client-ca-file", "no PEM certificate");
    }
    SSL_CTX_set_client_CA_list(ctx.get(), names);  // takes ownership
    SSL_CTX_set_verify(ctx.get(),
                       SSL_VERIFY_PEER | (files_.require_client_certificate ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                       nullptr);
    SSL_CTX_set_verify_depth(ctx.get(), 8);
  }

  info->subject = SubjectText(leaf.get());
  info->serial = SerialText(leaf.get());
  info->not_after = TimeText(X509_get0_notAfter(leaf.get()));
  return ctx;
}

absl::Status ServerCertificate::WriteGrpcCopy(const Material& m) const {
  auto write = [&](const std::string& name, const std::string& data) -> absl::Status {
    std::string tmp = dir_ + "/." + name + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      ::chmod(tmp.c_str(), 0600);
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      if (!out) return absl::InternalError("cannot write the gRPC certificate copy " + tmp);
    }
    if (std::rename(tmp.c_str(), (dir_ + "/" + name).c_str()) != 0) {
      return absl::InternalError("cannot rename the gRPC certificate copy " + tmp);
    }
    return absl::OkStatus();
  };
  // Key first, then the chain: gRPC reads the private key and the chain with PEM readers that skip what is
  // not theirs, so one file serves as both and is replaced in one rename.
  std::string identity = m.key;
  if (!identity.empty() && identity.back() != '\n') identity += '\n';
  identity += m.cert;
  if (auto s = write("identity.pem", identity); !s.ok()) return s;
  if (!m.ca.empty()) return write("ca.pem", m.ca);
  return absl::OkStatus();
}

absl::Status ServerCertificate::MaybeReload() {
  std::lock_guard<std::mutex> reload(reload_mu_);
  auto m = ReadFiles();
  Material current;
  {
    std::lock_guard<std::mutex> l(mu_);
    current = loaded_;
  }
  absl::Status why;
  CertificateInfo info;
  absl::StatusOr<SslCtxPtr> ctx = absl::UnknownError("");
  if (!m.ok()) {
    why = m.status();
  } else if (*m == current) {
    return absl::OkStatus();
  } else {
    ctx = Build(*m, &info);
    if (!ctx.ok()) why = ctx.status();
    else why = WriteGrpcCopy(*m);
  }
  std::lock_guard<std::mutex> l(mu_);
  if (!why.ok()) {
    // Logged once per distinct content (an unreadable file is logged every time it is seen again after a
    // good state, once).
    Material seen = m.ok() ? *m : Material{"unreadable", std::string(why.message()), ""};
    if (!refused_ || !(*refused_ == seen)) {
      spdlog::error("tls: the new certificate files are refused, keeping the certificate in use (serial {}): {}",
                    info_.serial, std::string(why.message()));
      refused_ = seen;
    }
    info_.last_error = std::string(why.message());
    return why;
  }
  info.reloads = info_.reloads + 1;
  info_ = info;
  ctx_ = std::move(*ctx);
  loaded_ = std::move(*m);
  refused_.reset();
  spdlog::info("tls: certificate reloaded: subject {} serial {} not after {}", info_.subject, info_.serial,
               info_.not_after);
  return absl::OkStatus();
}

SslCtxPtr ServerCertificate::Context() const {
  std::lock_guard<std::mutex> l(mu_);
  return ctx_;
}

CertificateInfo ServerCertificate::Info() const {
  std::lock_guard<std::mutex> l(mu_);
  return info_;
}

std::string ServerCertificate::Describe() const {
  CertificateInfo i = Info();
  std::string out = absl::StrCat("tls: on, certificate ", i.subject, " serial ", i.serial, " not after ",
                                 i.not_after, ", reloaded ", i.reloads, " times");
  if (!files_.client_ca_file.empty()) {
    absl::StrAppend(&out, files_.require_client_certificate ? ", client certificates required"
                                                             : ", client certificates accepted");
  }
  if (!i.last_error.empty()) absl::StrAppend(&out, "; the latest replacement was refused: ", i.last_error);
  return out;
}

}  // namespace falcon::tls
