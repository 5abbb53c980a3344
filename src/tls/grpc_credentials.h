// gRPC credentials from TLS files: a server's (reloaded, from ServerCertificate's checked copy) and a client's
// (the CA that signs the server's certificate, and optionally a client certificate).
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "auth/authenticator.h"
#include "tls/server_certificate.h"

namespace falcon::tls {

// Server credentials that follow `cert`'s reloads (grpc's FileWatcherCertificateProvider over the checked
// copy, every grpc_refresh_seconds()). Client certificates as `cert.files()` say. `cert` must outlive the
// server.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const ServerCertificate& cert);

struct ClientTlsFiles {
  std::string ca_file;    // PEM CA bundle that signs the server's certificate; empty: plaintext
  std::string cert_file;  // optional client certificate (PEM chain)...
  std::string key_file;   // ...and its key
};

// Plaintext when `files.ca_file` is empty; TLS otherwise. The files are read now. INVALID_ARGUMENT naming
// `flag_prefix` + the flag and the file when one cannot be read, or only one of cert and key is given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(const ClientTlsFiles& files,
                                                                                 const std::string& flag_prefix);

// The verified client certificate of a gRPC call, if its connection is TLS and the client presented one.
std::optional<auth::Principal> GrpcPeerPrincipal(const grpc::ServerContext& ctx);

}  // namespace falcon::tls
