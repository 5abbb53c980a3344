// Over 1,000 lines on purpose: a single-pass, allocation-light parser of XLA HLO text; its scanning helpers
// are inlined into the hot loop and must stay in one translation unit to keep its speed (docs/plugins.md).
#include "plugins/hlo_stats/hlo_parser.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "plugins/common/plugin_io.h"

namespace falcon::plugins::hlo {

int BitsOf(std::string_view t) {
  switch (t.size()) {
    case 2:
      if (t == "s8" || t == "u8") return 8;
      if (t == "s4" || t == "u4") return 4;
      if (t == "s2" || t == "u2") return 2;
      if (t == "s1" || t == "u1") return 1;
      return 0;
    case 3:
      if (t == "f32" || t == "s32" || t == "u32") return 32;
      if (t == "s16" || t == "u16" || t == "f16") return 16;
      if (t == "s64" || t == "u64" || t == "f64" || t == "c64") return 64;
      return 0;
    case 4:
      if (t == "pred") return 8;
      if (t == "bf16") return 16;
      if (t == "c128") return 128;
      return 0;
    default:
      if (t == "f8e4m3fn" || t == "f8e5m2" || t == "f8e4m3" || t == "f8e4m3b11fnuz" ||
          t == "f8e4m3fnuz" || t == "f8e5m2fnuz" || t == "f8e3m4" || t == "f8e8m0fnu")
        return 8;
      if (t == "f4e2m1fn") return 4;
      return 0;  // token, opaque, unknown
  }
}

namespace {

// Wrapping arithmetic (the sizes of absurd shapes overflow; the result is what int64 wrapping
// gives).
inline int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t BytesOf(int64_t elements, int bits) {
  return WrapAdd(WrapMul(elements, bits), 7) / 8;
}

}  // namespace

int64_t Shape::ElementCount() const {
  if (is_tuple) {
    int64_t n = 0;
    for (const auto& e : elements) n = WrapAdd(n, e.ElementCount());
    return n;
  }
  int64_t n = 1;
  for (int64_t d : dims) n = WrapMul(n, d);
  return n;
}

int64_t Shape::ByteSize() const {
  if (is_tuple) {
    int64_t n = 0;
    for (const auto& e : elements) n = WrapAdd(n, e.ByteSize());
    return n;
  }
  return BytesOf(ElementCount(), BitsOf(dtype));
}

std::string Shape::ToString() const {
  if (is_tuple) {
    std::string s = "(";
    for (size_t i = 0; i < elements.size(); ++i) {
      if (i) s += ", ";
      s += elements[i].ToString();
    }
    return s + ")";
  }
  std::string s = dtype + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

int Module::EntryIndex() const {
  for (size_t i = 0; i < computations.size(); ++i) {
    if (computations[i].is_entry) return static_cast<int>(i);
  }
  return static_cast<int>(computations.size()) - 1;
}

void Module::Clear() {
  name = {};
  line = 0;
  computations.clear();
  instructions.clear();
  shapes.clear();
  dims.clear();
  names.clear();
  owned.clear();
}

uint32_t Module::FirstArray(uint32_t i) const {
  while (shapes[i].is_tuple && shapes[i].children > 0) ++i;  // the first element follows its tuple
  return i;
}

int64_t Module::Dim(uint32_t shape, int64_t d, int64_t def) const {
  const ShapeNode& s = shapes[shape];
  if (s.is_tuple || d < 0 || d >= static_cast<int64_t>(s.dims_count)) return def;
  return dims[s.dims_begin + d];
}

char* Module::WriteShapeString(uint32_t i, char* out) const {
  const ShapeNode& s = shapes[i];
  if (s.is_tuple) {
    *out++ = '(';
    uint32_t c = i + 1;
    for (uint32_t k = 0; k < s.children; ++k) {
      if (k) {
        *out++ = ',';
        *out++ = ' ';
      }
      out = WriteShapeString(c, out);
      c += shapes[c].subtree;
    }
    *out++ = ')';
    return out;
  }
  std::memcpy(out, s.dtype.data(), s.dtype.size());
  out += s.dtype.size();
  *out++ = '[';
  for (uint32_t k = 0; k < s.dims_count; ++k) {
    if (k) *out++ = ',';
    out = std::to_chars(out, out + 20, dims[s.dims_begin + k]).ptr;
  }
  *out++ = ']';
  return out;
}

size_t Module::ShapeStringBound(uint32_t i) const {
  size_t n = 0;
  for (uint32_t k = i; k < i + shapes[i].subtree; ++k) {
    n += 4 + shapes[k].dtype.size() + 21 * static_cast<size_t>(shapes[k].dims_count);
  }
  return n;
}

Shape Module::ToShape(uint32_t i) const {
  const ShapeNode& s = shapes[i];
  Shape out;
  out.is_tuple = s.is_tuple;
  if (s.is_tuple) {
    uint32_t c = i + 1;
    for (uint32_t k = 0; k < s.children; ++k) {
      out.elements.push_back(ToShape(c));
      c += shapes[c].subtree;
    }
    return out;
  }
  out.dtype = std::string(s.dtype);
  out.dims.assign(dims.begin() + s.dims_begin, dims.begin() + s.dims_begin + s.dims_count);
  return out;
}

namespace {

// The "C" locale classes (the plugin never changes locale), by table instead of the calls of
// <cctype>.
enum : uint8_t {
  kSpace = 1,
  kDigit = 2,
  kAlnum = 4,
  kIdent = 8,
  kOpcode = 16,
  kOpen = 32,
  kClose = 64,
  kQuote = 128
};
struct CharClasses {
  uint8_t c[256];
  constexpr CharClasses() : c() {
    for (int i = '\t'; i <= '\r'; ++i) c[i] |= kSpace;
    c[' '] |= kSpace;
    for (int i = '0'; i <= '9'; ++i) c[i] |= kDigit | kAlnum;
    for (int i = 'a'; i <= 'z'; ++i) c[i] |= kAlnum;
    for (int i = 'A'; i <= 'Z'; ++i) c[i] |= kAlnum;
    for (int i = 0; i < 256; ++i) {
      if (c[i] & kAlnum) c[i] |= kIdent | kOpcode;
    }
    for (unsigned char x : {'_', '.', '-', '$'}) c[x] |= kIdent;
    for (unsigned char x : {'_', '.', '-'}) c[x] |= kOpcode;
    for (unsigned char x : {'{', '[', '('}) c[x] |= kOpen;
    for (unsigned char x : {'}', ']', ')'}) c[x] |= kClose;
    c['"'] |= kQuote;
  }
};
constexpr CharClasses kClasses;
inline bool Is(char ch, uint8_t cls) { return kClasses.c[static_cast<unsigned char>(ch)] & cls; }
inline bool IsSpace(char c) { return Is(c, kSpace); }
inline bool IsDigit(char c) { return Is(c, kDigit); }
inline bool IsAlnum(char c) { return Is(c, kAlnum); }
inline bool IsIdentChar(char c) { return Is(c, kIdent); }

// The first byte in [p, end) equal to a or b (or c), or end. SSE2 when available: the scans of
// comments and strings look at every byte of dumps of hundreds of MB.
inline const char* FindAny(const char* p, const char* end, char a, char b) {
#if defined(__SSE2__)
  const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b);
  while (end - p >= 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, va), _mm_cmpeq_epi8(x, vb)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && *p != a && *p != b) ++p;
  return p;
}
inline const char* FindAny(const char* p, const char* end, char a, char b, char c) {
#if defined(__SSE2__)
  const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b), vc = _mm_set1_epi8(c);
  while (end - p >= 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i eq = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, va), _mm_cmpeq_epi8(x, vb)),
                              _mm_cmpeq_epi8(x, vc));
    int mask = _mm_movemask_epi8(eq);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && *p != a && *p != b && *p != c) ++p;
  return p;
}

// The first of { [ ( ) ] } or '"' (or ',' when kComma) in [p, end), or end.
template <bool kComma = false>
inline const char* FindBracketOrQuote(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), not_case = _mm_set1_epi8(static_cast<char>(0xDF)),
                square_open = _mm_set1_epi8('['), square_close = _mm_set1_epi8(']'),
                not_low = _mm_set1_epi8(static_cast<char>(0xFE)), paren = _mm_set1_epi8('(');
  while (end - p >= 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i folded = _mm_and_si128(x, not_case);  // '{' -> '[', '}' -> ']'
    __m128i eq = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(folded, square_open), _mm_cmpeq_epi8(folded, square_close)),
        _mm_or_si128(_mm_cmpeq_epi8(_mm_and_si128(x, not_low), paren), _mm_cmpeq_epi8(x, quote)));
    if (kComma) eq = _mm_or_si128(eq, _mm_cmpeq_epi8(x, _mm_set1_epi8(',')));
    int mask = _mm_movemask_epi8(eq);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && !Is(*p, kOpen | kClose | kQuote) && (!kComma || *p != ',')) ++p;
  return p;
}

// std::string_view is not absl::string_view in Debian's abseil, so integers are parsed here.
bool ToInt(std::string_view s, int64_t* out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

// Skips a balanced region starting at s[i] (one of { [ ( or a quote); returns the index after it,
// or npos.
size_t SkipBalanced(std::string_view s, size_t i) {
  int depth = 0;
  const size_t n = s.size();
  const char* d = s.data();
  for (; i < n; ++i) {
    i = static_cast<size_t>(FindBracketOrQuote(d + i, d + n) - d);
    if (i >= n) break;
    char c = d[i];
    if (c == '"') {
      // To the closing quote; a backslash escapes the next character.
      for (++i; i < n;) {
        i = static_cast<size_t>(FindAny(d + i, d + n, '"', '\\') - d);
        if (i >= n || d[i] == '"') break;
        i += 2;
      }
      if (i >= n) return std::string_view::npos;
      if (depth == 0) return i + 1;
      continue;
    }
    if (c == '{' || c == '[' || c == '(') ++depth;
    if (c == '}' || c == ']' || c == ')') {
      if (--depth == 0) return i + 1;
      if (depth < 0) return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Calls fn(piece) for the pieces of `s` split at commas outside brackets and strings, trimmed; an
// empty last piece is passed only when there was a comma. Stops when fn returns false; returns
// false then.
template <typename Fn>
bool ForEachTopLevel(std::string_view s, Fn&& fn) {
  int depth = 0;
  size_t start = 0;
  bool any = false;
  const size_t n = s.size();
  const char* d = s.data();
  for (size_t i = 0; i < n; ++i) {
    i = static_cast<size_t>(FindBracketOrQuote<true>(d + i, d + n) - d);
    if (i >= n) break;
    char c = s[i];
    if (c == '"') {
      for (++i; i < n && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[' || c == '(') {
      ++depth;
    } else if (c == '}' || c == ']' || c == ')') {
      --depth;
    } else if (c == ',' && depth == 0) {
      if (!fn(Trim(s.substr(start, i - start)))) return false;
      any = true;
      start = i + 1;
    }
  }
  auto last = Trim(s.substr(std::min(start, n)));
  if (!last.empty() || any) return fn(last);
  return true;
}

// Replaces // and /* */ comments (outside strings) with spaces, keeping newlines so lines stay put.
// A string ends at its closing quote or at the end of its line; a backslash in it escapes the next
// character.
void StripComments(char* s, size_t n) {
  char* p = s;
  char* const end = s + n;
  for (;;) {
    p = const_cast<char*>(FindAny(p, end, '"', '/'));
    if (p >= end) return;
    if (*p == '"') {
      ++p;
      for (;;) {
        if (p >= end) return;
        p = const_cast<char*>(FindAny(p, end, '"', '\n', '\\'));
        if (p >= end) return;
        if (*p != '\\') break;
        p += 2;
      }
      ++p;  // past the closing quote (or newline)
    } else if (p + 1 < end && p[1] == '/') {
      char* eol = static_cast<char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      if (eol == nullptr) eol = end;
      std::memset(p, ' ', static_cast<size_t>(eol - p));
      p = eol;
    } else if (p + 1 < end && p[1] == '*') {
      char* stop = end;
      for (char* q = p + 2; q + 1 < end; ++q) {
        q = static_cast<char*>(std::memchr(q, '*', static_cast<size_t>(end - q)));
        if (q == nullptr || q + 1 >= end) break;
        if (q[1] == '/') {
          stop = q + 2;
          break;
        }
      }
      for (; p < stop; ++p) {
        if (*p != '\n') *p = ' ';
      }
    } else {
      ++p;
    }
  }
}

// Whether "//" or "/*" occurs in s[0, n) (inside strings or not).
bool HasCommentStart(const char* s, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i slash = _mm_set1_epi8('/'), star = _mm_set1_epi8('*');
  for (; i + 17 <= n; i += 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    __m128i next = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 1));
    __m128i hit = _mm_and_si128(_mm_cmpeq_epi8(x, slash), _mm_or_si128(_mm_cmpeq_epi8(next, slash),
                                                                       _mm_cmpeq_epi8(next, star)));
    if (_mm_movemask_epi8(hit) != 0) return true;
  }
#endif
  for (; i + 1 < n; ++i) {
    if (s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '*')) return true;
  }
  return false;
}

// Line numbers of positions in one text, counted forward incrementally (positions mostly increase).
class LineCounter {
 public:
  LineCounter(const char* text, size_t size, int first_line)
      : text_(text), size_(size), first_(first_line) {}
  // Newlines in the whole text.
  int Total() {
    LineAt(size_);
    return count_;
  }
  // The line of text[pos] (a position at or past the end counts every newline).
  int LineAt(size_t pos) {
    size_t target = std::min(pos + 1, size_);
    if (target < pos_) {
      pos_ = 0;
      count_ = 0;
    }
    count_ += CountNewlines(text_ + pos_, target - pos_);
    pos_ = target;
    return count_ + first_;
  }

 private:
  const char* text_;
  size_t size_;
  int first_;
  size_t pos_ = 0;
  int count_ = 0;
};

absl::Status ParseShapeInto(std::string_view& t, Module& m) {
  auto skip_ws = [&] {
    while (!t.empty() && IsSpace(t.front())) t.remove_prefix(1);
  };
  skip_ws();
  const uint32_t idx = static_cast<uint32_t>(m.shapes.size());
  m.shapes.emplace_back();
  if (!t.empty() && t.front() == '(') {
    m.shapes[idx].is_tuple = true;
    t.remove_prefix(1);
    skip_ws();
    if (!t.empty() && t.front() == ')') {
      t.remove_prefix(1);
      return absl::OkStatus();
    }
    uint32_t children = 0;
    int64_t elements = 0, bytes = 0;
    for (;;) {
      const uint32_t child = static_cast<uint32_t>(m.shapes.size());
      absl::Status e = ParseShapeInto(t, m);
      if (!e.ok()) return e;
      ++children;
      elements = WrapAdd(elements, m.shapes[child].elements);
      bytes = WrapAdd(bytes, m.shapes[child].bytes);
      skip_ws();
      if (t.empty()) return absl::InvalidArgumentError("unterminated tuple shape");
      if (t.front() == ',') {
        t.remove_prefix(1);
        continue;
      }
      if (t.front() == ')') {
        t.remove_prefix(1);
        break;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected '", std::string(1, t.front()), "' in tuple shape"));
    }
    ShapeNode& s = m.shapes[idx];
    s.children = children;
    s.elements = elements;
    s.bytes = bytes;
    s.subtree = static_cast<uint32_t>(m.shapes.size()) - idx;
    return absl::OkStatus();
  }
  size_t i = 0;
  while (i < t.size() && IsAlnum(t[i])) ++i;
  if (i == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a shape, found '", std::string(t.substr(0, 20)), "'"));
  }
  std::string_view dtype = t.substr(0, i);
  t.remove_prefix(i);
  if (t.empty() || t.front() != '[') {
    return absl::InvalidArgumentError(
        absl::StrCat("expected '[' after element type ", std::string(dtype)));
  }
  size_t close = t.find(']');
  if (close == std::string_view::npos) return absl::InvalidArgumentError("unterminated dimensions");
  std::string_view dims = t.substr(1, close - 1);
  t.remove_prefix(close + 1);
  const uint32_t dims_begin = static_cast<uint32_t>(m.dims.size());
  int64_t elements = 1;
  // Fast path: plain "d,d,d" (no blanks, signs, dynamic or unknown dims).
  bool plain = !dims.empty() && IsDigit(dims.front()) && IsDigit(dims.back());
  if (plain) {
    int64_t v = 0;
    for (size_t k = 0; k < dims.size(); ++k) {
      char ch = dims[k];
      if (IsDigit(ch)) {
        int64_t next = v * 10 + (ch - '0');
        if (v > (INT64_MAX - 9) / 10) {  // would overflow: let from_chars decide
          plain = false;
          break;
        }
        v = next;
      } else if (ch == ',' && k + 1 < dims.size() && IsDigit(dims[k + 1])) {
        m.dims.push_back(v);
        elements = WrapMul(elements, v);
        v = 0;
      } else {
        plain = false;
        break;
      }
    }
    if (plain) {
      m.dims.push_back(v);
      elements = WrapMul(elements, v);
    } else {
      m.dims.resize(dims_begin);
      elements = 1;
    }
  }
  if (!plain && !Trim(dims).empty()) {
    std::string_view bad;
    bool ok = ForEachTopLevel(dims, [&](std::string_view d) {
      std::string_view orig = d;
      if (d.substr(0, 2) == "<=") d.remove_prefix(2);
      int64_t v = 0;
      if (d == "?") {
        v = 0;
      } else if (!ToInt(d, &v)) {
        bad = orig.substr(orig.size() - d.size());
        return false;
      }
      m.dims.push_back(v);
      elements = WrapMul(elements, v);
      return true;
    });
    if (!ok)
      return absl::InvalidArgumentError(absl::StrCat("bad dimension '", std::string(bad), "'"));
  }
  if (!t.empty() && t.front() == '{') {
    // Most layouts are short and flat ("{1,0}"): a plain scan to the '}' unless something nests.
    size_t e = 1;
    while (e < t.size() && (IsDigit(t[e]) || t[e] == ',')) ++e;
    if (e < t.size() && t[e] == '}')
      ++e;
    else
      e = SkipBalanced(t, 0);
    if (e == std::string_view::npos) return absl::InvalidArgumentError("unterminated layout");
    t.remove_prefix(e);
  }
  ShapeNode& s = m.shapes[idx];
  s.dtype = dtype;
  s.dims_begin = dims_begin;
  s.dims_count = static_cast<uint32_t>(m.dims.size()) - dims_begin;
  s.elements = elements;
  s.bytes = BytesOf(elements, BitsOf(dtype));
  return absl::OkStatus();
}

constexpr std::string_view kAttrNames[kNumAttrs] = {"kind",
                                                    "metadata",
                                                    "lhs_contracting_dims",
                                                    "dim_labels",
                                                    "feature_group_count",
                                                    "batch_group_count",
                                                    "window",
                                                    "custom_call_target",
                                                    "backend_config",
                                                    "fft_length",
                                                    "index",
                                                    "calls",
                                                    "to_apply",
                                                    "body",
                                                    "condition",
                                                    "true_computation",
                                                    "false_computation",
                                                    "branch_computations",
                                                    "select",
                                                    "scatter"};

int LookupAttr(std::string_view key) {
  for (int a = 0; a < kNumAttrs; ++a) {
    if (key == kAttrNames[a]) return a;
  }
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, size_t base, LineCounter& lines)
      : s_(text), base_(base), lines_(lines) {}

  absl::Status ParseModule(Module& m) {
    SkipWs();
    if (Peek("HloModule")) {
      m.line = LineAt(p_);
      p_ += 9;
      SkipWs();
      m.name = Ident();
      // Module attributes: skip to the end of the line (balanced, they may hold braces).
      while (p_ < s_.size() && s_[p_] != '\n') {
        char c = s_[p_];
        if (c == '{' || c == '(' || c == '[' || c == '"') {
          size_t e = SkipBalanced(s_, p_);
          if (e == std::string_view::npos) return Err("unbalanced brackets in the HloModule line");
          p_ = e;
        } else {
          ++p_;
        }
      }
    } else {
      m.line = LineAt(p_);
    }
    for (;;) {
      SkipWs();
      if (p_ >= s_.size()) break;
      if (ParseDebugTable()) continue;
      absl::Status c = ParseComputation(m);
      if (!c.ok()) return c;
    }
    if (m.computations.empty()) return Err("module has no computations");
    ResolveStackFrames(m);
    return absl::OkStatus();
  }

 private:
  int LineAt(size_t pos) { return lines_.LineAt(base_ + pos); }
  absl::Status Err(const std::string& what) {
    int line = LineAt(std::min(p_, s_.size() ? s_.size() - 1 : 0));
    return InputError(absl::StrCat("HLO parse error at line ", line, ": ", what), line,
                      std::nullopt);
  }
  bool Peek(std::string_view w) const { return s_.substr(p_, w.size()) == w; }
  void SkipWs() {
    while (p_ < s_.size() && IsSpace(s_[p_])) ++p_;
  }
  std::string_view Ident() {
    if (p_ < s_.size() && s_[p_] == '%') ++p_;
    size_t start = p_;
    while (p_ < s_.size() && IsIdentChar(s_[p_])) ++p_;
    return s_.substr(start, p_ - start);
  }
  bool Keyword(std::string_view w) {
    if (Peek(w) && (p_ + w.size() >= s_.size() || !IsIdentChar(s_[p_ + w.size()]))) {
      p_ += w.size();
      return true;
    }
    return false;
  }
  std::string Snippet() const {
    std::string_view v = s_.substr(p_, 40);
    size_t nl = v.find('\n');
    return std::string(v.substr(0, nl));
  }

  absl::Status ParseComputation(Module& m) {
    Computation c;
    c.line = LineAt(p_);
    if (Keyword("ENTRY")) {
      c.is_entry = true;
      SkipWs();
    }
    c.name = Ident();
    if (c.name.empty())
      return Err(absl::StrCat("expected a computation name, found '", Snippet(), "'"));
    SkipWs();
    if (p_ < s_.size() && s_[p_] == '(') {
      size_t e = SkipBalanced(s_, p_);
      if (e == std::string_view::npos) {
        return Err(absl::StrCat("unbalanced parameter list of computation ", std::string(c.name)));
      }
      p_ = e;
      SkipWs();
    }
    if (Peek("->")) {
      p_ += 2;
      SkipWs();
      std::string_view rest = s_.substr(p_);
      size_t before = rest.size();
      size_t nodes = m.shapes.size(), dims = m.dims.size();
      absl::Status shape = ParseShapeInto(rest, m);
      if (!shape.ok()) return Err(std::string(shape.message()));
      m.shapes.resize(nodes);  // the result shape is not kept
      m.dims.resize(dims);
      p_ += before - rest.size();
      SkipWs();
    }
    // Tolerate computation attributes before the body (e.g. execution_thread="...").
    while (p_ < s_.size() && s_[p_] != '{' && s_[p_] != '\n') ++p_;
    SkipWs();
    if (p_ >= s_.size() || s_[p_] != '{')
      return Err(absl::StrCat("expected '{' to open computation ", std::string(c.name)));
    ++p_;
    c.begin = static_cast<uint32_t>(m.instructions.size());
    for (;;) {
      SkipWs();
      if (p_ >= s_.size())
        return Err(absl::StrCat("computation ", std::string(c.name), " is not closed with '}'"));
      if (s_[p_] == '}') {
        ++p_;
        break;
      }
      absl::Status ins = ParseInstruction(m);
      if (!ins.ok()) return ins;
    }
    c.count = static_cast<uint32_t>(m.instructions.size()) - c.begin;
    c.root = static_cast<int>(c.count) - 1;
    for (uint32_t i = 0; i < c.count; ++i) {
      if (m.instructions[c.begin + i].is_root) {
        c.root = static_cast<int>(i);
        break;
      }
    }
    m.computations.push_back(c);
    return absl::OkStatus();
  }

  absl::Status ParseInstruction(Module& m) {
    Instruction& ins = m.instructions.emplace_back();
    ins.line = LineAt(p_);
    if (Keyword("ROOT")) {
      ins.is_root = true;
      SkipWs();
    }
    ins.name = Ident();
    if (ins.name.empty())
      return Err(absl::StrCat("expected an instruction, found '", Snippet(), "'"));
    SkipWs();
    if (p_ >= s_.size() || s_[p_] != '=') {
      return Err(absl::StrCat("expected '=' after instruction name ", std::string(ins.name)));
    }
    ++p_;
    SkipWs();
    {
      std::string_view rest = s_.substr(p_);
      size_t before = rest.size();
      ins.shape = static_cast<uint32_t>(m.shapes.size());
      absl::Status shape = ParseShapeInto(rest, m);
      if (!shape.ok())
        return Err(absl::StrCat("bad shape of ", std::string(ins.name), ": ", shape.message()));
      p_ += before - rest.size();
    }
    SkipWs();
    size_t op_start = p_;
    while (p_ < s_.size() && Is(s_[p_], kOpcode)) ++p_;
    ins.opcode = s_.substr(op_start, p_ - op_start);
    if (ins.opcode.empty())
      return Err(absl::StrCat("expected an opcode for ", std::string(ins.name)));
    SkipWs();
    if (p_ >= s_.size() || s_[p_] != '(')
      return Err(absl::StrCat("expected '(' after opcode ", std::string(ins.opcode)));
    ins.operands_begin = static_cast<uint32_t>(m.names.size());
    const bool named_operands =
        ins.opcode != "constant" && ins.opcode != "parameter" && ins.opcode != "iota";
    size_t close = named_operands ? ParseOperandList(p_, m) : SkipBalanced(s_, p_);
    if (close == std::string_view::npos)
      return Err(absl::StrCat("unbalanced operand list of ", std::string(ins.name)));
    if (ins.opcode == "parameter") {
      // parameter(N): the fusion cost rules pair a fused computation's parameters with the fusion's
      // operands by N.
      int n = 0;
      bool any = false;
      for (size_t i = p_ + 1; i + 1 < close; ++i) {
        const char c = s_[i];
        if (c >= '0' && c <= '9') {
          n = n * 10 + (c - '0');
          any = true;
        } else if (!IsSpace(c)) {
          any = false;
          break;
        }
      }
      ins.parameter_number = any ? n : -1;
    }
    p_ = close;
    ins.operands_count = static_cast<uint32_t>(m.names.size()) - ins.operands_begin;
    // Attributes: ", key=value" repeated; they may continue on following lines.
    for (;;) {
      size_t save = p_;
      SkipWs();
      if (p_ >= s_.size() || s_[p_] != ',') {
        p_ = save;
        break;
      }
      ++p_;
      SkipWs();
      size_t kstart = p_;
      while (p_ < s_.size() && IsIdentChar(s_[p_])) ++p_;
      std::string_view key = s_.substr(kstart, p_ - kstart);
      if (key.empty())
        return Err(absl::StrCat("expected an attribute name in ", std::string(ins.name)));
      std::string_view value;
      if (p_ < s_.size() && s_[p_] == '=') {
        ++p_;
        size_t vstart = p_;
        while (p_ < s_.size()) {
          char c = s_[p_];
          if (c == '{' || c == '[' || c == '(' || c == '"') {
            size_t e = SkipBalanced(s_, p_);
            if (e == std::string_view::npos)
              return Err(absl::StrCat("unbalanced value of attribute ", std::string(key)));
            p_ = e;
            continue;
          }
          if (c == ',' || c == '}' || IsSpace(c)) break;
          ++p_;
        }
        value = s_.substr(vstart, p_ - vstart);
      }
      int a = LookupAttr(key);
      if (a >= 0) {
        ins.set_attr(static_cast<Attr>(a), value);
      }
    }
    Finish(ins, m);
    return absl::OkStatus();
  }

  // The operand list that opens at s_[open] ('('), in one pass: splits it at its top-level commas
  // (outside brackets and strings) and adds each operand's name (the piece after its last blank,
  // without '%') to m.names. Returns the index after the closing bracket (as SkipBalanced), or
  // npos when it is not closed.
  size_t ParseOperandList(size_t open, Module& m) {
    const char* d = s_.data();
    const size_t n = s_.size();
    auto add = [&](size_t begin, size_t end) {
      std::string_view piece = Trim(s_.substr(begin, end - begin));
      if (piece.empty()) return;
      size_t sp = piece.size();  // the last blank (space, tab or newline), as find_last_of
      while (sp > 0 && piece[sp - 1] != ' ' && piece[sp - 1] != '\t' && piece[sp - 1] != '\n') --sp;
      std::string_view name = piece.substr(sp);
      if (!name.empty() && name.front() == '%') name.remove_prefix(1);
      m.names.push_back(name);
    };
    int depth = 0;
    size_t piece = open + 1;
    for (size_t i = open; i < n; ++i) {
      i = static_cast<size_t>(FindBracketOrQuote<true>(d + i, d + n) - d);
      if (i >= n) break;
      const char c = d[i];
      if (c == '"') {
        for (++i; i < n && d[i] != '"'; ++i) {
          if (d[i] == '\\') ++i;
        }
        if (i >= n) return std::string_view::npos;
      } else if (c == ',') {
        if (depth == 1) {
          add(piece, i);
          piece = i + 1;
        }
      } else if (c == '{' || c == '[' || c == '(') {
        ++depth;
      } else if (--depth == 0) {
        add(piece, i);
        return i + 1;
      }
    }
    return std::string_view::npos;
  }

  static void Finish(Instruction& ins, Module& m) {
    if (ins.Has(kAttrMetadata)) ParseMetadata(ins.attr(kAttrMetadata), ins, m);
    ins.called_begin = static_cast<uint32_t>(m.names.size());
    constexpr uint32_t kCallAttrs = ((1u << (kAttrScatter + 1)) - 1) & ~((1u << kAttrCalls) - 1);
    for (int a = kAttrCalls; a <= kAttrScatter && (ins.attr_present & kCallAttrs) != 0; ++a) {
      if (!ins.Has(static_cast<Attr>(a))) continue;
      std::string_view v = ins.attr(static_cast<Attr>(a));
      if (!v.empty() && v.front() == '{') v = v.substr(1, v.size() >= 2 ? v.size() - 2 : 0);
      ForEachTopLevel(v, [&](std::string_view piece) {
        if (!piece.empty() && piece.front() == '%') piece.remove_prefix(1);
        if (!piece.empty()) m.names.push_back(piece);
        return true;
      });
    }
    ins.called_count = static_cast<uint32_t>(m.names.size()) - ins.called_begin;
  }

  // metadata={op_type="dot" op_name="jit(f)/dot" source_file="/a.py" source_line=3 ...}
  static void ParseMetadata(std::string_view v, Instruction& ins, Module& m) {
    if (!v.empty() && v.front() == '{') v.remove_prefix(1);
    if (!v.empty() && v.back() == '}') v.remove_suffix(1);
    const size_t n = v.size();
    size_t i = 0;
    while (i < n) {
      while (i < n && (IsSpace(v[i]) || v[i] == ',')) ++i;
      size_t ks = i;
      while (i < n && v[i] != '=' && !IsSpace(v[i])) ++i;
      std::string_view key = v.substr(ks, i - ks);
      if (i >= n || v[i] != '=') {
        ++i;
        continue;
      }
      ++i;
      std::string_view value;
      if (i < n && v[i] == '"') {
        size_t start = i + 1, j = start;
        bool escaped = false;
        while (j < n) {
          j = static_cast<size_t>(FindAny(v.data() + j, v.data() + n, '"', '\\') - v.data());
          if (j >= n || v[j] == '"') break;
          escaped = true;
          j += j + 1 < n ? 2 : 1;
        }
        value = v.substr(start, std::min(j, n) - start);
        if (escaped && (key == "op_name" || key == "op_type" || key == "source_file" ||
                        key == "source_line" || key == "stack_frame_id")) {
          std::string& u = m.owned.emplace_back();
          for (size_t k = start; k < n && v[k] != '"'; ++k) {
            if (v[k] == '\\' && k + 1 < n) ++k;
            u.push_back(v[k]);
          }
          value = u;
        }
        i = j + 1;
      } else if (i < n && (v[i] == '{' || v[i] == '[')) {
        size_t e = SkipBalanced(v, i);
        if (e == std::string_view::npos) e = n;
        value = v.substr(i, e - i);
        i = e;
      } else {
        size_t vs = i;
        while (i < n && !IsSpace(v[i])) ++i;
        value = v.substr(vs, i - vs);
      }
      if (key == "op_name")
        ins.op_name = value;
      else if (key == "op_type")
        ins.op_type = value;
      else if (key == "source_file")
        ins.source_file = value;
      else if (key == "source_line")
        (void)ToInt(value, &ins.source_line);
      else if (key == "stack_frame_id")
        (void)ToInt(value, &ins.stack_frame_id);
    }
  }

  // Newer dumps put source locations in tables before the computations:
  //   FileNames / FunctionNames:  <id> "<string>"
  //   FileLocations:              <id> {file_name_id=1 function_name_id=2 line=6 ...}
  //   StackFrames:                <id> {file_location_id=1 parent_frame_id=1}
  // Returns true when a table was consumed at p_.
  bool ParseDebugTable() {
    std::string_view which;
    for (std::string_view t : {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}) {
      if (Peek(t)) {
        size_t q = p_ + t.size();
        while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t' || s_[q] == '\r')) ++q;
        if (q >= s_.size() || s_[q] == '\n') which = t;
      }
    }
    if (which.empty()) return false;
    p_ += which.size();
    for (;;) {
      SkipWs();
      if (p_ >= s_.size() || !IsDigit(s_[p_])) break;
      size_t eol = s_.find('\n', p_);
      if (eol == std::string_view::npos) eol = s_.size();
      std::string_view line = s_.substr(p_, eol - p_);
      p_ = eol;
      size_t sp = line.find(' ');
      int64_t id = 0;
      if (sp == std::string_view::npos || !ToInt(line.substr(0, sp), &id)) continue;
      std::string_view rest = Trim(line.substr(sp + 1));
      if (which == "FileNames" || which == "FunctionNames") {
        std::string_view v = rest;
        if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
        if (which == "FileNames") file_names_[id] = v;
      } else {
        int64_t file_name_id = 0, line_no = 0, file_location_id = 0;
        std::string_view body = rest;
        if (!body.empty() && body.front() == '{') body.remove_prefix(1);
        if (!body.empty() && body.back() == '}') body.remove_suffix(1);
        size_t i = 0;
        while (i < body.size()) {
          while (i < body.size() && IsSpace(body[i])) ++i;
          size_t st = i;
          while (i < body.size() && !IsSpace(body[i])) ++i;
          if (i == st) continue;
          std::string_view part = body.substr(st, i - st);
          size_t eq = part.find('=');
          int64_t v = 0;
          if (eq != std::string_view::npos && ToInt(part.substr(eq + 1), &v)) {
            std::string_view k = part.substr(0, eq);
            if (k == "file_name_id")
              file_name_id = v;
            else if (k == "line")
              line_no = v;
            else if (k == "file_location_id")
              file_location_id = v;
          }
        }
        if (which == "FileLocations") {
          locations_[id] = {file_name_id, line_no};
        } else {
          frames_[id] = file_location_id;
        }
      }
    }
    return true;
  }

  void ResolveStackFrames(Module& m) const {
    if (frames_.empty()) return;
    for (auto& ins : m.instructions) {
      if (ins.stack_frame_id == 0 || !ins.source_file.empty()) continue;
      auto f = frames_.find(ins.stack_frame_id);
      if (f == frames_.end()) continue;
      auto loc = locations_.find(f->second);
      if (loc == locations_.end()) continue;
      auto file = file_names_.find(loc->second.first);
      if (file != file_names_.end()) ins.source_file = file->second;
      ins.source_line = loc->second.second;
    }
  }

  absl::flat_hash_map<int64_t, std::string_view> file_names_;
  absl::flat_hash_map<int64_t, std::pair<int64_t, int64_t>> locations_;  // id -> (file id, line)
  absl::flat_hash_map<int64_t, int64_t> frames_;                         // id -> location id
  std::string_view s_;
  size_t base_;
  LineCounter& lines_;
  size_t p_ = 0;
};

}  // namespace

absl::StatusOr<Shape> ParseShape(std::string_view& t) {
  Module m;
  absl::Status s = ParseShapeInto(t, m);
  if (!s.ok()) return s;
  return m.ToShape(0);
}

int CountNewlines(const char* p, size_t n) {
  const char* end = p + n;
  int count = 0;
#if defined(__SSE2__)
  const __m128i nl = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    // Up to 255 blocks: each byte lane counts its newlines (cmpeq gives -1), then the lanes are
    // summed.
    __m128i acc = _mm_setzero_si128();
    for (int k = 0; k < 255 && end - p >= 16; ++k, p += 16) {
      acc = _mm_sub_epi8(acc,
                         _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), nl));
    }
    __m128i sums = _mm_sad_epu8(acc, _mm_setzero_si128());
    count += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
  }
#endif
  for (; p < end; ++p) count += *p == '\n';
  return count;
}

int ForEachHloModule(char* text, size_t size, Module& m,
                     const std::function<void(const absl::Status&, const Module&)>& fn,
                     int first_line) {
  std::string_view all(text, size);
  // Most dumps have no comment at all: the scan that respects strings runs only when "//" or "/*"
  // occurs somewhere.
  if (HasCommentStart(text, size)) StripComments(text, size);
  // Module starts: "HloModule" at the start of a line (after blanks).
  std::vector<size_t> starts;
  for (size_t h = all.find("HloModule"); h != std::string_view::npos;
       h = all.find("HloModule", h + 9)) {
    size_t j = h;
    while (j > 0 && (all[j - 1] == ' ' || all[j - 1] == '\t')) --j;
    if (j == 0 || all[j - 1] == '\n') starts.push_back(h);
  }
  LineCounter lines(text, size, first_line);
  if (starts.empty()) {
    if (Trim(all).empty()) return lines.Total();
    starts.push_back(0);
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    size_t end = k + 1 < starts.size() ? starts[k + 1] : size;
    Parser p(all.substr(starts[k], end - starts[k]), starts[k], lines);
    m.Clear();
    absl::Status s = p.ParseModule(m);
    fn(s, m);
  }
  return lines.Total();
}

}  // namespace falcon::plugins::hlo
