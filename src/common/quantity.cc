#include "common/quantity.h"

#include <cctype>
#include <cmath>
#include <string>

namespace falcon {
namespace {

// Quotes a user value for a message, cut to a readable length, control characters made visible.
std::string Quote(std::string_view v) {
  std::string s(v.substr(0, 80));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return "\"" + s + (v.size() > 80 ? "...\"" : "\"");
}

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The value in whole units, rounded up (a small epsilon keeps "0.1" * 1000 at 100); INVALID_ARGUMENT when
// it does not fit an int64.
absl::StatusOr<int64_t> ToInt(std::string_view q, std::string_view what, long double units) {
  long double rounded = std::ceil(units - 1e-9L);
  if (rounded < 0) rounded = 0;
  // 2^63 is exact in a long double; anything at or above it does not fit.
  if (!(rounded < 9223372036854775808.0L)) {
    return absl::InvalidArgumentError("invalid " + std::string(what) + " quantity " + Quote(q) +
                                      ": the value is too large");
  }
  return static_cast<int64_t>(rounded);
}

}  // namespace

absl::StatusOr<long double> ParseQuantity(std::string_view q, std::string_view what) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        "invalid " + std::string(what) + " quantity " + Quote(q) +
        ": use a Kubernetes quantity such as 500m, 2, 1.5 (cpu) or 256Mi, 1Gi, 500M (memory)");
  };
  if (q.empty() || q.size() > kMaxQuantityChars) return bad();
  size_t i = q[0] == '+' ? 1 : 0;
  // At most 18 digits: the mantissa fits an int64 exactly, with no library call that could throw.
  int64_t mantissa = 0;
  size_t digits = 0;
  int frac_digits = 0;
  bool dot = false;
  for (; i < q.size(); ++i) {
    char c = q[i];
    if (IsDigit(c)) {
      if (++digits > kMaxQuantityDigits) return bad();
      mantissa = mantissa * 10 + (c - '0');
      if (dot) ++frac_digits;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return bad();
  const long double value = static_cast<long double>(mantissa) / std::pow(10.0L, frac_digits);
  std::string_view suf = q.substr(i);
  static constexpr struct {
    const char* suffix;
    long double mult;
  } kSuffixes[] = {{"", 1},
                   {"m", 1e-3L},
                   {"k", 1e3L},
                   {"M", 1e6L},
                   {"G", 1e9L},
                   {"T", 1e12L},
                   {"P", 1e15L},
                   {"E", 1e18L},
                   {"Ki", 1024.0L},
                   {"Mi", 1024.0L * 1024},
                   {"Gi", 1024.0L * 1024 * 1024},
                   {"Ti", 1024.0L * 1024 * 1024 * 1024},
                   {"Pi", 1024.0L * 1024 * 1024 * 1024 * 1024}};
  for (const auto& s : kSuffixes) {
    if (suf == s.suffix) return value * s.mult;
  }
  if (suf.size() >= 2 && (suf[0] == 'e' || suf[0] == 'E')) {
    std::string_view exp = suf.substr(1);
    bool neg = false;
    if (exp[0] == '+' || exp[0] == '-') {
      neg = exp[0] == '-';
      exp = exp.substr(1);
    }
    if (exp.empty() || exp.size() > 2) return bad();
    int e = 0;
    for (char c : exp) {
      if (!IsDigit(c)) return bad();
      e = e * 10 + (c - '0');
    }
    return value * std::pow(10.0L, neg ? -e : e);
  }
  return bad();
}

absl::StatusOr<int64_t> ParseCpuMillis(std::string_view q) {
  auto v = ParseQuantity(q, "cpu");
  if (!v.ok()) return v.status();
  return ToInt(q, "cpu", *v * 1000);
}

absl::StatusOr<int64_t> ParseMemoryBytes(std::string_view q) {
  auto v = ParseQuantity(q, "memory");
  if (!v.ok()) return v.status();
  return ToInt(q, "memory", *v);
}

}  // namespace falcon
