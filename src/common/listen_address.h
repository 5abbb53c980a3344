// Listen addresses of the servers: HOST:PORT parsing and whether a host is loopback-only. One rule for
// falcon-apiserver and analyzer-controller, which both refuse to listen beyond loopback without
// authentication (docs/security.md). Pure functions, thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace falcon {

// "127.0.0.1:8080", "0.0.0.0:0", "[::1]:8080" → host (without brackets) and port (0..65535).
// INVALID_ARGUMENT saying the form otherwise.
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);
// localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(const std::string& host);

// The socket options of an HTTP server's listening socket (cpp-httplib's set_socket_options): SO_REUSEADDR
// only. cpp-httplib's default sets SO_REUSEPORT, with which a second server on a port in use (a stale
// falcon-apiserver, a second replica started with the same flags) binds it too and the kernel splits the
// connections between the two; with this the second one fails to start ("cannot listen on ..."). The gRPC
// servers refuse the same way (RefuseSharedGrpcPort in grpc_keepalive.h).
void ExclusiveListenSocketOptions(int sock);

}  // namespace falcon
