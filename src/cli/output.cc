#include "cli/output.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

namespace falcon::cli {
namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

constexpr size_t kGap = 3;
constexpr size_t kMinShrunk = 6;

}  // namespace

size_t DisplayWidth(std::string_view s) {
  size_t w = 0;
  for (unsigned char c : s) {
    if (IsContinuation(c)) continue;
    if (c < 0x20 || c == 0x7F) continue;
    ++w;
  }
  return w;
}

std::string Truncate(std::string_view s, size_t width) {
  if (DisplayWidth(s) <= width) return std::string(s);
  if (width == 0) return "";
  // Keep width-1 code points, then the ellipsis.
  std::string out;
  size_t w = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    if (!IsContinuation(c) && c >= 0x20 && c != 0x7F) {
      if (w == width - 1) break;
      ++w;
    }
    out.push_back(static_cast<char>(c));
  }
  // Drop continuation bytes of a code point we cut in half (cannot happen with the loop above, but keep
  // the output valid UTF-8 whatever the input).
  out += "\xE2\x80\xA6";  // …
  return out;
}

std::string OneLine(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7F) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Table::Table(std::vector<std::string> headers, std::vector<bool> shrinkable, std::vector<int> drop_priority)
    : headers_(std::move(headers)), shrinkable_(std::move(shrinkable)), drop_priority_(std::move(drop_priority)) {
  shrinkable_.resize(headers_.size(), false);
  drop_priority_.resize(headers_.size(), 0);
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (auto& c : cells) c = OneLine(c);
  rows_.push_back(std::move(cells));
}

std::string Table::Render(size_t max_width) const {
  const size_t n = headers_.size();
  std::vector<bool> shown(n, true);
  std::vector<size_t> natural(n);
  for (size_t i = 0; i < n; ++i) {
    natural[i] = DisplayWidth(headers_[i]);
    for (const auto& r : rows_) natural[i] = std::max(natural[i], DisplayWidth(r[i]));
  }
  std::vector<size_t> width;
  size_t gap = kGap;
  // Fits the shown columns with the given gap; returns whether the result is within max_width.
  auto fit = [&]() {
    width = natural;
    auto total = [&] {
      size_t t = 0, cols = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!shown[i]) continue;
        t += width[i];
        ++cols;
      }
      return t + (cols > 0 ? gap * (cols - 1) : 0);
    };
    if (max_width == 0) return true;
    while (total() > max_width) {
      // Narrow the widest column that may still shrink.
      size_t best = n;
      for (size_t i = 0; i < n; ++i) {
        size_t floor = std::max(kMinShrunk, DisplayWidth(headers_[i]));
        if (!shown[i] || !shrinkable_[i] || width[i] <= floor) continue;
        if (best == n || width[i] > width[best]) best = i;
      }
      if (best == n) return false;
      --width[best];
    }
    return true;
  };
  bool ok = fit();
  if (!ok) {
    gap = 2;
    ok = fit();
  }
  while (!ok) {
    size_t drop = n;
    for (size_t i = 0; i < n; ++i) {
      if (shown[i] && drop_priority_[i] > 0 && (drop == n || drop_priority_[i] > drop_priority_[drop])) drop = i;
    }
    if (drop == n) break;  // nothing left to leave out: let the terminal wrap
    shown[drop] = false;
    ok = fit();
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < n; ++i) {
      if (!shown[i]) continue;
      std::string cell = Truncate(cells[i], width[i]);
      line += cell;
      line.append(width[i] - DisplayWidth(cell) + gap, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(headers_);
  for (const auto& r : rows_) emit(r);
  return out;
}

std::string RenderDetails(const std::vector<std::pair<std::string, std::string>>& kv, size_t max_width) {
  size_t key_width = 0;
  for (const auto& [k, v] : kv) key_width = std::max(key_width, DisplayWidth(k) + 1);
  std::string out;
  for (const auto& [k, v] : kv) {
    std::string line = k + ":";
    line.append(key_width - DisplayWidth(k) - 1 + 2, ' ');
    std::string value = v.empty() ? "-" : v;
    // Multi-line values (commands, messages) keep their lines, indented under the first.
    size_t start = 0;
    bool first = true;
    while (start <= value.size()) {
      size_t nl = value.find('\n', start);
      std::string part = value.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!first) line = std::string(key_width + 2, ' ');
      line += OneLine(part);
      if (max_width > 0) line = Truncate(line, max_width);
      out += line;
      out += '\n';
      first = false;
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  return out;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < 0) return "-";
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string HumanDuration(std::chrono::seconds d) {
  int64_t s = d.count();
  if (s < 0) s = 0;
  if (s < 60) return std::to_string(s) + "s";
  int64_t m = s / 60;
  if (m < 60) {
    int64_t rs = s % 60;
    return std::to_string(m) + "m" + (rs ? std::to_string(rs) + "s" : "");
  }
  int64_t h = m / 60;
  if (h < 24) {
    int64_t rm = m % 60;
    return std::to_string(h) + "h" + (rm ? std::to_string(rm) + "m" : "");
  }
  int64_t days = h / 24;
  if (days < 10) {
    int64_t rh = h % 24;
    return std::to_string(days) + "d" + (rh ? std::to_string(rh) + "h" : "");
  }
  return std::to_string(days) + "d";
}

// The CLI's names for the shared RFC 3339 functions (common/rfc3339.h); tables show whole seconds.
std::optional<Time> ParseRfc3339(std::string_view s) { return ::falcon::ParseRfc3339(s); }

std::string FormatRfc3339(Time t) { return ::falcon::FormatRfc3339Seconds(t); }

}  // namespace falcon::cli
