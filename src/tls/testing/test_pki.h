// A throwaway PKI for tests, made with OpenSSL in memory: a CA, and certificates it signs for servers
// (127.0.0.1, ::1, localhost) and clients (CN = user, O = groups). EC P-256 keys; valid for a day.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace falcon::tls::testing {

struct TestCert {
  std::string cert_pem;  // the leaf
  std::string key_pem;
};

struct CertSpec {
  std::string common_name;
  std::vector<std::string> organizations;
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  std::vector<std::string> ips;        // subjectAltName IP entries
  uint64_t serial = 1;
  bool server = true;  // extendedKeyUsage serverAuth (else clientAuth)
};

class TestCa {
 public:
  // A self-signed CA named `name`. Aborts the test binary on an OpenSSL failure (it cannot happen).
  explicit TestCa(const std::string& name);
  const std::string& cert_pem() const { return ca_.cert_pem; }
  TestCert Issue(const CertSpec& spec) const;
  // A server certificate for 127.0.0.1, ::1 and localhost with this serial.
  TestCert Server(uint64_t serial, const std::string& cn = "falcon-test-server") const;
  TestCert Client(const std::string& cn, const std::vector<std::string>& orgs, uint64_t serial = 100) const;

 private:
  TestCert ca_;
};

// The serial number (upper-case hex) of the certificate the TLS server at 127.0.0.1:port presents to a new
// connection, verified with `ca_pem` for the name 127.0.0.1; "handshake failed: <why>" otherwise.
std::string PeerCertificateSerial(int port, const std::string& ca_pem);

// Writes `data` to `path` (replacing it).
void WriteFile(const std::string& path, const std::string& data);

}  // namespace falcon::tls::testing
