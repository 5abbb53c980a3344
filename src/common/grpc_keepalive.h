// The keepalive bounds of every gRPC server of the system (falcon-apiserver, analyzer-controller), so that a
// peer that vanished without closing (a node gone, a NAT that dropped the flow) does not hold a connection
// forever, and a client cannot flood the server with pings. docs/http-api.md "gRPC FalconAPIService".
// For gRPC edges only (links gRPC, like grpc_status.h).
#pragma once

#include <grpcpp/server_builder.h>

namespace falcon {

// The server pings a connection idle at the transport for this long, and closes it when the ping is not
// answered within kGrpcKeepaliveTimeoutMs (also with no call open).
inline constexpr int kGrpcKeepaliveTimeMs = 60'000;
inline constexpr int kGrpcKeepaliveTimeoutMs = 20'000;
// Clients may ping at most this often without data; more often twice, and the server closes the connection
// (GOAWAY "too_many_pings").
inline constexpr int kGrpcMinClientPingIntervalMs = 10'000;
inline constexpr int kGrpcMaxPingStrikes = 2;
// A connection without any call for this long is closed (GOAWAY); clients reconnect on their next call.
inline constexpr int kGrpcMaxConnectionIdleMs = 10 * 60'000;

// gRPC sets SO_REUSEPORT on its listening sockets by default, so a second server on a port another gRPC
// server holds (a stale falcon-apiserver, a second controller started with the same flags) binds it too
// and the kernel splits the connections between the two: half of the calls reach the wrong process. Our
// servers refuse to share: a port in use is an error at start ("cannot listen on ...").
inline void RefuseSharedGrpcPort(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

inline void ApplyGrpcServerKeepalive(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kGrpcKeepaliveTimeMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kGrpcKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kGrpcMinClientPingIntervalMs);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kGrpcMaxPingStrikes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kGrpcMaxConnectionIdleMs);
}

}  // namespace falcon
