#include "plugins/trace_summary/trace_reader.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/common/content.h"

namespace falcon::plugins {

// A refillable window over the input. Bytes from `mark` on are kept across refills, so an element being
// scanned stays contiguous in memory; the buffer grows when one element does not fit.
class TraceReader::Source {
 public:
  Source(InputFile* file, std::string_view data, size_t cap) : file_(file) {
    if (file_ == nullptr) cap = data.size();
    Resize(cap);
    if (file_ == nullptr) {
      std::memcpy(buf_.data(), data.data(), data.size());
      end_ = data.size();
    }
  }

  // Ensures pos < end, reading more when needed. false at end of input; error in status().
  bool Ensure() {
    if (pos < end_) return true;
    return Fill();
  }
  char* data() { return buf_.data(); }
  size_t capacity_from(size_t p) const { return buf_.size() - p; }  // includes padding
  uint64_t OffsetOf(size_t p) const { return base_ + p; }
  const absl::Status& status() const { return status_; }
  size_t end() const { return end_; }

  size_t pos = 0;
  size_t mark = 0;  // nothing before this is needed any more

 private:
  void Resize(size_t cap) {
    cap_ = cap;
    buf_.resize(cap_ + simdjson::SIMDJSON_PADDING);
  }
  bool Fill() {
    if (file_ == nullptr || eof_) return false;
    if (mark > 0) {
      std::memmove(buf_.data(), buf_.data() + mark, end_ - mark);
      base_ += mark;
      pos -= mark;
      end_ -= mark;
      mark = 0;
    }
    if (end_ == cap_) Resize(cap_ * 2);
    auto n = file_->Read(buf_.data() + end_, cap_ - end_);
    if (!n.ok()) {
      status_ = n.status();
      eof_ = true;
      return false;
    }
    if (*n == 0) {
      eof_ = true;
      return false;
    }
    end_ += *n;
    return true;
  }

  InputFile* file_;
  std::vector<char> buf_;
  size_t cap_ = 0;
  size_t end_ = 0;
  uint64_t base_ = 0;
  bool eof_ = false;
  absl::Status status_;
};

TraceReader::TraceReader(size_t buffer_bytes) : buffer_bytes_(buffer_bytes) {}
TraceReader::~TraceReader() = default;

absl::Status TraceReader::Read(InputFile& in, const Callback& cb) {
  Source src(&in, {}, buffer_bytes_);
  return Run(src, cb);
}

absl::Status TraceReader::ReadString(std::string_view data, const Callback& cb) {
  Source src(nullptr, data, 0);
  return Run(src, cb);
}

namespace {

inline bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

absl::Status Malformed(TraceReader* /*unused*/, uint64_t offset, const std::string& what) {
  return InputError(absl::StrCat("malformed trace JSON at byte ", offset, ": ", what), std::nullopt,
                    offset);
}

// Skips whitespace; false at end of input.
bool SkipSpace(auto& src) {
  for (;;) {
    if (!src.Ensure()) return false;
    char* d = src.data();
    while (src.pos < src.end() && IsSpace(d[src.pos])) ++src.pos;
    if (src.pos < src.end()) return true;
  }
}

// Skips one JSON string starting at the opening quote. false at end of input.
bool SkipString(auto& src) {
  ++src.pos;
  for (;;) {
    if (!src.Ensure()) return false;
    char* d = src.data();
    size_t end = src.end();
    while (src.pos < end) {
      char c = d[src.pos];
      if (c == '\\') {
        src.pos += 2;
        continue;
      }
      ++src.pos;
      if (c == '"') return true;
    }
    if (src.pos > end) {  // an escape straddled the refill boundary
      size_t over = src.pos - end;
      src.pos = end;
      if (!src.Ensure()) return false;
      src.pos += over;
    }
  }
}

struct ByteTable {
  bool v[256] = {};
  constexpr ByteTable(const char* chars) {
    for (const char* c = chars; *c; ++c) v[static_cast<unsigned char>(*c)] = true;
  }
  constexpr bool operator[](unsigned char c) const { return v[c]; }
};
constexpr ByteTable kStringStop("\"\\");
constexpr ByteTable kStructural("\"{}[]");

// Skips one complete JSON value starting at pos (objects and arrays balanced, strings aware). Returns false
// at an unexpected end of input. Does not validate; simdjson does that for event objects.
bool SkipValue(auto& src) {
  if (!src.Ensure()) return false;
  char c = src.data()[src.pos];
  if (c == '"') return SkipString(src);
  if (c != '{' && c != '[') {
    for (;;) {
      if (!src.Ensure()) return true;  // a scalar may end the input
      char* d = src.data();
      while (src.pos < src.end()) {
        char x = d[src.pos];
        if (x == ',' || x == '}' || x == ']' || IsSpace(x)) return true;
        ++src.pos;
      }
    }
  }
  int depth = 0;
  bool in_string = false;
  for (;;) {
    if (!src.Ensure()) return false;
    const char* d = src.data();
    size_t end = src.end();
    size_t p = src.pos;
    while (p < end) {
      if (in_string) {
        // Most bytes of an event are inside strings: skip everything but quotes and backslashes.
        while (p < end && !kStringStop[static_cast<unsigned char>(d[p])]) ++p;
        if (p >= end) break;
        if (d[p] == '\\') {
          p += 2;  // the escape pair (may step past end: see below)
        } else {
          ++p;
          in_string = false;
        }
        continue;
      }
      while (p < end && !kStructural[static_cast<unsigned char>(d[p])]) ++p;
      if (p >= end) break;
      char x = d[p++];
      switch (x) {
        case '"': in_string = true; break;
        case '{':
        case '[': ++depth; break;
        case '}':
        case ']':
          if (--depth == 0) {
            src.pos = p;
            return true;
          }
          break;
        default: break;
      }
    }
    if (p > end) {  // escape at the very end of the buffer: skip its second byte after the refill
      src.pos = end;
      if (!src.Ensure()) return false;
      src.pos += 1;
    } else {
      src.pos = p;
    }
  }
}

double NumberOrString(simdjson::ondemand::value v) {
  if (v.type() == simdjson::ondemand::json_type::string) {
    std::string_view s = v.get_string();
    return std::strtod(std::string(s).c_str(), nullptr);
  }
  return v.get_double();
}

}  // namespace

absl::Status TraceReader::Run(Source& src, const Callback& cb) {
  auto error_or_truncated = [&](const std::string& what) {
    if (!src.status().ok()) return src.status();
    return Malformed(this, src.OffsetOf(src.pos), what);
  };
  if (!SkipSpace(src)) {
    if (!src.status().ok()) return src.status();
    return InputError("empty trace file (expected a JSON object or array)", std::nullopt, 0);
  }
  // Byte order mark.
  if (src.end() - src.pos >= 3 && std::memcmp(src.data() + src.pos, "\xEF\xBB\xBF", 3) == 0) {
    src.pos += 3;
    SkipSpace(src);
  }
  char first = src.Ensure() ? src.data()[src.pos] : 0;
  if (first != '{' && first != '[') {
    // From the first byte of the file (still in the window: only blanks were skipped).
    ContentKind kind = ClassifyContent(std::string_view(src.data(), std::min<size_t>(src.end(), 4096)));
    return InputError(absl::StrCat("not Chrome trace JSON (looks like ", std::string(DescribeContent(kind)),
                                   "); trace-summary reads trace event JSON starting with '{' or '['"),
                      std::nullopt, 0);
  }

  // Streams the array at pos (which is '['). bare: the closing bracket may be missing.
  auto stream_array = [&](bool bare) -> absl::Status {
    ++src.pos;
    for (;;) {
      src.mark = src.pos;
      if (!SkipSpace(src)) {
        if (bare && src.status().ok()) return absl::OkStatus();
        return error_or_truncated("input ends inside the traceEvents array");
      }
      char c = src.data()[src.pos];
      if (c == ']') {
        ++src.pos;
        return absl::OkStatus();
      }
      if (c == ',') {  // tolerate a leading/duplicated comma (trailing comma before ']' is common)
        ++src.pos;
        continue;
      }
      size_t start = src.pos;
      src.mark = start;
      if (!SkipValue(src)) {
        if (bare && src.status().ok()) {
          // A cut-off last event of a bare array: the format allows the file to end anywhere after an event.
          return absl::OkStatus();
        }
        return error_or_truncated("input ends inside an event");
      }
      if (c != '{') {
        ++non_objects_;
        continue;
      }
      start = src.mark;  // a refill inside SkipValue moves the element to the front of the buffer
      size_t len = src.pos - start;
      uint64_t offset = src.OffsetOf(start);
      RawEvent ev;
      ev.offset = offset;
      try {
        simdjson::padded_string_view view(src.data() + start, len, src.capacity_from(start));
        auto doc = parser_.iterate(view);
        simdjson::ondemand::object obj = doc.get_object();
        for (auto field : obj) {
          std::string_view key = field.unescaped_key();
          simdjson::ondemand::value v = field.value();
          if (key.size() == 2) {
            if (key == "ph") {
              std::string_view ph = v.get_string();
              ev.ph = ph.empty() ? 0 : ph[0];
            } else if (key == "ts") {
              ev.ts = NumberOrString(v);
              ev.has_ts = true;
            }
          } else if (key == "name") {
            ev.name = v.get_string();
          } else if (key == "dur") {
            ev.dur = NumberOrString(v);
            ev.has_dur = true;
          } else if (key == "pid") {
            ev.pid = v.raw_json_token();
          } else if (key == "tid") {
            ev.tid = v.raw_json_token();
          } else if (key == "args" && (ev.ph == 0 || ev.ph == 'M')) {
            if (v.type() == simdjson::ondemand::json_type::object) {
              for (auto af : v.get_object()) {
                std::string_view akey = af.unescaped_key();
                if (akey == "name") {
                  simdjson::ondemand::value av = af.value();
                  if (av.type() == simdjson::ondemand::json_type::string) ev.args_name = av.get_string();
                  break;
                }
              }
            }
          }
        }
      } catch (const simdjson::simdjson_error& e) {
        return Malformed(this, offset, absl::StrCat("bad event object: ", e.what()));
      }
      // raw_json_token keeps trailing spaces; trim them so tokens compare equal.
      while (!ev.pid.empty() && IsSpace(ev.pid.back())) ev.pid.remove_suffix(1);
      while (!ev.tid.empty() && IsSpace(ev.tid.back())) ev.tid.remove_suffix(1);
      ++events_;
      cb(ev);
    }
  };

  if (first == '[') return stream_array(/*bare=*/true);
  if (first != '{') {
    return Malformed(this, src.OffsetOf(src.pos), "expected '{' or '[' at the start of the trace");
  }
  ++src.pos;
  bool saw_events = false;
  for (;;) {
    src.mark = src.pos;
    if (!SkipSpace(src)) return error_or_truncated("input ends inside the top-level object");
    char c = src.data()[src.pos];
    if (c == '}') break;
    if (c == ',') {
      ++src.pos;
      continue;
    }
    if (c != '"') return Malformed(this, src.OffsetOf(src.pos), "expected a key in the top-level object");
    size_t kstart = src.pos;
    src.mark = kstart;
    if (!SkipString(src)) return error_or_truncated("input ends inside a key");
    kstart = src.mark;  // may have moved with a refill
    std::string key(src.data() + kstart + 1, src.pos - kstart - 2);
    if (!SkipSpace(src) || src.data()[src.pos] != ':') {
      return error_or_truncated(absl::StrCat("expected ':' after key \"", key, "\""));
    }
    ++src.pos;
    if (!SkipSpace(src)) return error_or_truncated("input ends before a value");
    if (key == "traceEvents" && src.data()[src.pos] == '[') {
      saw_events = true;
      absl::Status s = stream_array(/*bare=*/false);
      if (!s.ok()) return s;
    } else {
      src.mark = src.pos;
      if (!SkipValue(src)) return error_or_truncated(absl::StrCat("input ends inside \"", key, "\""));
    }
  }
  if (!saw_events) {
    return InputError("the trace object has no \"traceEvents\" array", std::nullopt, 0);
  }
  return absl::OkStatus();
}

}  // namespace falcon::plugins
