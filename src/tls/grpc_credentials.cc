#include "tls/grpc_credentials.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "tls/x509_identity.h"

namespace falcon::tls {

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const ServerCertificate& cert) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      cert.grpc_identity_file(), cert.grpc_identity_file(), cert.grpc_ca_file(), cert.grpc_refresh_seconds());
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!cert.grpc_ca_file().empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(cert.files().require_client_certificate
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(const ClientTlsFiles& files,
                                                                                 const std::string& flag_prefix) {
  if (files.ca_file.empty()) {
    if (!files.cert_file.empty() || !files.key_file.empty()) {
      return absl::InvalidArgumentError("--" + flag_prefix + "client-cert-file needs --" + flag_prefix + "ca-file");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("--" + flag_prefix + "client-cert-file and --" + flag_prefix +
                                      "client-key-file must be given together");
  }
  grpc::SslCredentialsOptions o;
  auto ca = ReadPemFile(files.ca_file, "--" + flag_prefix + "ca-file");
  if (!ca.ok()) return ca.status();
  o.pem_root_certs = *ca;
  if (!files.cert_file.empty()) {
    auto c = ReadPemFile(files.cert_file, "--" + flag_prefix + "client-cert-file");
    if (!c.ok()) return c.status();
    auto k = ReadPemFile(files.key_file, "--" + flag_prefix + "client-key-file");
    if (!k.ok()) return k.status();
    o.pem_cert_chain = *c;
    o.pem_private_key = *k;
  }
  return grpc::SslCredentials(o);
}

std::optional<auth::Principal> GrpcPeerPrincipal(const grpc::ServerContext& ctx) {
  auto auth = ctx.auth_context();
  if (auth == nullptr) return std::nullopt;
  auto type = auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  // "tls" from TlsServerCredentials (ours), "ssl" from SslServerCredentials.
  const std::string kind = type.empty() ? "" : std::string(type[0].data(), type[0].size());
  if (kind != GRPC_TLS_TRANSPORT_SECURITY_TYPE && kind != GRPC_SSL_TRANSPORT_SECURITY_TYPE) return std::nullopt;
  auto pem = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pem.empty()) return std::nullopt;
  auto p = PrincipalFromPem(std::string(pem[0].data(), pem[0].size()));
  if (!p.ok()) return std::nullopt;
  return *p;
}

}  // namespace falcon::tls
