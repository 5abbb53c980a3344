// The gRPC message limit of every server and channel of the system, both directions. The largest messages
// are a record with its script (at most 1 MiB, plus its command) and a log chunk (at most 4 MiB,
// controller/operations.h kMaxLogChunkBytes); listings are paged so they stay far below it.
// docs/http-api.md "gRPC FalconAPIService".
#pragma once

namespace falcon {

inline constexpr int kMaxGrpcMessageBytes = 8 << 20;

}  // namespace falcon
