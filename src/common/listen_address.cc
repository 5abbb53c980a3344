#include "common/listen_address.h"

#include <sys/socket.h>

#include <cstdlib>

namespace falcon {

absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  auto bad = [&] {
    return absl::InvalidArgumentError("listen address \"" + listen +
                                      "\" must be HOST:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:0 or [::1]:8080)");
  };
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad();
  std::string h = listen.substr(0, colon);
  std::string p = listen.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  long n = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || n < 0 || n > 65535 || h.empty()) return bad();
  *host = h;
  *port = static_cast<int>(n);
  return absl::OkStatus();
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

void ExclusiveListenSocketOptions(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace falcon
