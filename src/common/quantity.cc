#include "common/quantity.h"

#include <cmath>
#include <string>


namespace falcon {
namespace {

// Parses "<number><suffix>" into a value in base units (as a double) following Kubernetes' grammar.
absl::StatusOr<double> ParseQuantity(std::string_view q, std::string_view what) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        "invalid " + std::string(what) + " quantity \"" + std::string(q) +
        "\": use a Kubernetes quantity such as 500m, 2, 1.5 (cpu) or 256Mi, 1Gi, 500M (memory)");
  };
  if (q.empty()) return bad();
  size_t i = 0;
  if (q[i] == '+') ++i;
  size_t start = i;
  bool dot = false;
  while (i < q.size() && (std::isdigit(static_cast<unsigned char>(q[i])) || (q[i] == '.' && !dot))) {
    if (q[i] == '.') dot = true;
    ++i;
  }
  if (i == start || (i == start + 1 && dot)) return bad();
  double num = std::stod(std::string(q.substr(start, i - start)));
  std::string_view suf = q.substr(i);
  double mult = 1;
  if (suf.empty()) {
    mult = 1;
  } else if (suf == "m") {
    mult = 1e-3;
  } else if (suf == "k") {
    mult = 1e3;
  } else if (suf == "M") {
    mult = 1e6;
  } else if (suf == "G") {
    mult = 1e9;
  } else if (suf == "T") {
    mult = 1e12;
  } else if (suf == "P") {
    mult = 1e15;
  } else if (suf == "E") {
    mult = 1e18;
  } else if (suf == "Ki") {
    mult = 1024.0;
  } else if (suf == "Mi") {
    mult = 1024.0 * 1024;
  } else if (suf == "Gi") {
    mult = 1024.0 * 1024 * 1024;
  } else if (suf == "Ti") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else if (suf == "Pi") {
    mult = 1024.0 * 1024 * 1024 * 1024 * 1024;
  } else if ((suf[0] == 'e' || suf[0] == 'E') && suf.size() > 1) {
    std::string exp(suf.substr(1));
    for (size_t k = (exp[0] == '-' || exp[0] == '+') ? 1 : 0; k < exp.size(); ++k) {
      if (!std::isdigit(static_cast<unsigned char>(exp[k]))) return bad();
    }
    mult = std::pow(10.0, std::stoi(exp));
  } else {
    return bad();
  }
  double v = num * mult;
  if (!std::isfinite(v) || v < 0 || v > 9.2e18) return bad();
  return v;
}

}  // namespace

absl::StatusOr<int64_t> ParseCpuMillis(std::string_view q) {
  auto v = ParseQuantity(q, "cpu");
  if (!v.ok()) return v.status();
  return static_cast<int64_t>(std::ceil(*v * 1000 - 1e-9));
}

absl::StatusOr<int64_t> ParseMemoryBytes(std::string_view q) {
  auto v = ParseQuantity(q, "memory");
  if (!v.ok()) return v.status();
  return static_cast<int64_t>(std::ceil(*v - 1e-9));
}

}  // namespace falcon
