// ServerCertificate: a server's TLS identity from PEM files as cert-manager and Kubernetes Secrets write them
// (tls.crt: the certificate chain, leaf first; tls.key: its private key; ca.crt: the CA that signs client
// certificates), reloaded without a restart.
//
//   - Create() loads and checks the pair (the key must belong to the leaf certificate) and the client CA; a
//     broken start is an error naming the file.
//   - MaybeReload() (called every check_interval by Start()'s thread, on the injected clock) reads the files
//     again (each at most kMaxPemFileBytes) and, when their contents changed, builds and checks a new pair.
//     A good pair replaces the old one: every connection accepted afterwards uses it (connections already
//     open keep theirs). A broken one (unreadable, half-written, key of another certificate) is logged once
//     per distinct content and the previous pair is kept.
//   - Context() gives the SSL_CTX of the current pair for a new HTTP connection (OpenSSL).
//   - For gRPC, whose certificate provider only reads files, the checked pair is also written (key and chain
//     in one file, replaced by rename so that it is never seen half-written) to a private directory (0700,
//     removed with this object): grpc_identity_file() and grpc_ca_file() name it, and GrpcServerCredentials
//     (grpc_credentials.h) watches that copy, never the caller's files. So a broken pair is never seen by
//     gRPC either.
//
// Client certificates: with a client CA, a client may present a certificate; one that does not verify against
// the CA fails the handshake. Without require_client_certificate, a client without one is accepted (and
// authenticates otherwise, with a bearer token).
//
// Thread-safe.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace falcon::tls {

// The largest PEM file read (certificate chain, key, CA bundle).
inline constexpr size_t kMaxPemFileBytes = 1 << 20;
// How often the files are checked for a new pair by default (--tls-reload-interval).
inline constexpr std::chrono::seconds kDefaultCheckInterval{10};

struct ServerTlsFiles {
  std::string cert_file;       // PEM chain, leaf first
  std::string key_file;        // PEM private key of the leaf
  std::string client_ca_file;  // PEM CA bundle for client certificates; empty: none requested
  bool require_client_certificate = false;
  std::chrono::milliseconds check_interval = kDefaultCheckInterval;
};

// What /readyz and the log say about the pair in use.
struct CertificateInfo {
  std::string subject;     // "CN=falcon-apiserver,O=falcon"
  std::string serial;      // hex, upper case
  std::string not_after;   // RFC 3339
  int64_t reloads = 0;     // pairs loaded after the first
  std::string last_error;  // of the latest refused replacement; empty if none since the last good one
};

// OpenSSL objects owned by std::unique_ptr.
struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::shared_ptr<SSL_CTX>;

class ServerCertificate {
 public:
  // INVALID_ARGUMENT naming the file when the pair or the CA cannot be read or do not fit together;
  // INTERNAL when the private directory for gRPC cannot be made. `clock` must outlive this object.
  static absl::StatusOr<std::unique_ptr<ServerCertificate>> Create(ServerTlsFiles files, Clock& clock);
  ~ServerCertificate();
  ServerCertificate(const ServerCertificate&) = delete;
  ServerCertificate& operator=(const ServerCertificate&) = delete;

  // Starts the thread that calls MaybeReload every check_interval; stopped by the destructor.
  void Start();
  // Reads the files; loads a changed pair if it is good. Returns OK when nothing changed or the new pair was
  // loaded, the reason otherwise (the old pair stays).
  absl::Status MaybeReload();

  // The context for a new connection (never null).
  SslCtxPtr Context() const;
  CertificateInfo Info() const;
  // One line for /readyz and the start log: "tls: CN=... serial ... not after ..., reloaded N times".
  std::string Describe() const;

  const ServerTlsFiles& files() const { return files_; }
  // The checked copy for gRPC: key and chain in one file; the client CA (empty when none).
  std::string grpc_identity_file() const { return dir_ + "/identity.pem"; }
  std::string grpc_ca_file() const { return files_.client_ca_file.empty() ? std::string() : dir_ + "/ca.pem"; }
  unsigned grpc_refresh_seconds() const;

 private:
  struct Material {
    std::string cert, key, ca;  // file contents
    bool operator==(const Material&) const = default;
  };
  ServerCertificate(ServerTlsFiles files, Clock& clock) : files_(std::move(files)), clock_(clock) {}
  absl::StatusOr<Material> ReadFiles() const;
  // Builds a context from `m`, or says why not.
  absl::StatusOr<SslCtxPtr> Build(const Material& m, CertificateInfo* info) const;
  absl::Status WriteGrpcCopy(const Material& m) const;

  const ServerTlsFiles files_;
  Clock& clock_;
  std::string dir_;  // private directory of the gRPC copy

  mutable std::mutex mu_;
  SslCtxPtr ctx_;                       // guarded by mu_
  Material loaded_;                     // guarded by mu_
  std::optional<Material> refused_;     // guarded by mu_: the latest refused contents (logged once)
  CertificateInfo info_;                // guarded by mu_
  bool stopping_ = false;               // guarded by mu_
  std::mutex reload_mu_;                // one reload at a time
  std::thread thread_;
};

// Reads a PEM file of at most kMaxPemFileBytes. INVALID_ARGUMENT naming `flag` and the file otherwise.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag);

}  // namespace falcon::tls
