#include "plugins/hlo_stats/hlo_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "plugins/common/plugin_io.h"

namespace falcon::plugins::hlo {

int BitsOf(std::string_view t) {
  if (t == "pred" || t == "s8" || t == "u8" || t == "f8e4m3fn" || t == "f8e5m2" || t == "f8e4m3" ||
      t == "f8e4m3b11fnuz" || t == "f8e4m3fnuz" || t == "f8e5m2fnuz" || t == "f8e3m4" || t == "f8e8m0fnu")
    return 8;
  if (t == "s4" || t == "u4" || t == "f4e2m1fn") return 4;
  if (t == "s2" || t == "u2") return 2;
  if (t == "s1" || t == "u1") return 1;
  if (t == "s16" || t == "u16" || t == "f16" || t == "bf16") return 16;
  if (t == "s32" || t == "u32" || t == "f32") return 32;
  if (t == "s64" || t == "u64" || t == "f64" || t == "c64") return t == "c64" ? 64 : 64;
  if (t == "c128") return 128;
  return 0;  // token, opaque, unknown
}

int64_t Shape::ElementCount() const {
  if (is_tuple) {
    int64_t n = 0;
    for (const auto& e : elements) n += e.ElementCount();
    return n;
  }
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t Shape::ByteSize() const {
  if (is_tuple) {
    int64_t n = 0;
    for (const auto& e : elements) n += e.ByteSize();
    return n;
  }
  return (ElementCount() * BitsOf(dtype) + 7) / 8;
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

int Computation::RootIndex() const {
  for (size_t i = 0; i < instructions.size(); ++i) {
    if (instructions[i].is_root) return static_cast<int>(i);
  }
  return static_cast<int>(instructions.size()) - 1;
}

int Module::EntryIndex() const {
  for (size_t i = 0; i < computations.size(); ++i) {
    if (computations[i].is_entry) return static_cast<int>(i);
  }
  return static_cast<int>(computations.size()) - 1;
}

namespace {

// std::string_view is not absl::string_view in Debian's abseil, so integers are parsed here.
bool ToInt(std::string_view s, int64_t* out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

inline bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '$';
}

// Skips a balanced region starting at s[i] (one of { [ ( or a quote); returns the index after it, or npos.
size_t SkipBalanced(std::string_view s, size_t i) {
  int depth = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
      if (i >= s.size()) return std::string_view::npos;
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
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits at commas that are outside brackets and strings.
std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[' || c == '(') {
      ++depth;
    } else if (c == '}' || c == ']' || c == ')') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(Trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  auto last = Trim(s.substr(std::min(start, s.size())));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

// Replaces // and /* */ comments (outside strings) with spaces, keeping newlines so lines stay put.
std::string StripComments(std::string_view in) {
  std::string s(in);
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"' && s[i] != '\n'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') s[i++] = ' ';
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      size_t stop = end == std::string::npos ? s.size() : end + 2;
      for (; i < stop; ++i) {
        if (s[i] != '\n') s[i] = ' ';
      }
      --i;
    }
  }
  return s;
}

class Parser {
 public:
  Parser(std::string_view text, const std::vector<size_t>& newlines) : s_(text), newlines_(newlines) {}

  int LineAt(size_t pos) const {
    return static_cast<int>(std::upper_bound(newlines_.begin(), newlines_.end(), base_ + pos) -
                            newlines_.begin()) +
           first_line_;
  }
  void SetFirstLine(int line) { first_line_ = line; }
  void SetBase(size_t base) { base_ = base; }

  absl::StatusOr<Module> ParseModule() {
    Module m;
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
      auto c = ParseComputation();
      if (!c.ok()) return c.status();
      m.computations.push_back(std::move(*c));
    }
    if (m.computations.empty()) return Err("module has no computations");
    ResolveStackFrames(m);
    return m;
  }

 private:
  absl::Status Err(const std::string& what) const {
    int line = LineAt(std::min(p_, s_.size() ? s_.size() - 1 : 0));
    return InputError(absl::StrCat("HLO parse error at line ", line, ": ", what), line, std::nullopt);
  }
  bool Peek(std::string_view w) const { return s_.substr(p_, w.size()) == w; }
  void SkipWs() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  std::string Ident() {
    if (p_ < s_.size() && s_[p_] == '%') ++p_;
    size_t start = p_;
    while (p_ < s_.size() && IsIdentChar(s_[p_])) ++p_;
    return std::string(s_.substr(start, p_ - start));
  }
  bool Keyword(std::string_view w) {
    if (Peek(w) && (p_ + w.size() >= s_.size() || !IsIdentChar(s_[p_ + w.size()]))) {
      p_ += w.size();
      return true;
    }
    return false;
  }

  absl::StatusOr<Computation> ParseComputation() {
    Computation c;
    c.line = LineAt(p_);
    if (Keyword("ENTRY")) {
      c.is_entry = true;
      SkipWs();
    }
    c.name = Ident();
    if (c.name.empty()) return Err(absl::StrCat("expected a computation name, found '", Snippet(), "'"));
    SkipWs();
    if (p_ < s_.size() && s_[p_] == '(') {
      size_t e = SkipBalanced(s_, p_);
      if (e == std::string_view::npos) return Err("unbalanced parameter list of computation " + c.name);
      p_ = e;
      SkipWs();
    }
    if (Peek("->")) {
      p_ += 2;
      SkipWs();
      std::string_view rest = s_.substr(p_);
      size_t before = rest.size();
      auto shape = ParseShape(rest);
      if (!shape.ok()) return Err(std::string(shape.status().message()));
      p_ += before - rest.size();
      SkipWs();
    }
    // Tolerate computation attributes before the body (e.g. execution_thread="...").
    while (p_ < s_.size() && s_[p_] != '{' && s_[p_] != '\n') ++p_;
    SkipWs();
    if (p_ >= s_.size() || s_[p_] != '{') return Err("expected '{' to open computation " + c.name);
    ++p_;
    for (;;) {
      SkipWs();
      if (p_ >= s_.size()) return Err("computation " + c.name + " is not closed with '}'");
      if (s_[p_] == '}') {
        ++p_;
        break;
      }
      auto ins = ParseInstruction();
      if (!ins.ok()) return ins.status();
      c.instructions.push_back(std::move(*ins));
    }
    return c;
  }

  std::string Snippet() const {
    std::string_view v = s_.substr(p_, 40);
    size_t nl = v.find('\n');
    return std::string(v.substr(0, nl));
  }

  absl::StatusOr<Instruction> ParseInstruction() {
    Instruction ins;
    ins.line = LineAt(p_);
    if (Keyword("ROOT")) {
      ins.is_root = true;
      SkipWs();
    }
    ins.name = Ident();
    if (ins.name.empty()) return Err(absl::StrCat("expected an instruction, found '", Snippet(), "'"));
    SkipWs();
    if (p_ >= s_.size() || s_[p_] != '=') return Err("expected '=' after instruction name " + ins.name);
    ++p_;
    SkipWs();
    {
      std::string_view rest = s_.substr(p_);
      size_t before = rest.size();
      auto shape = ParseShape(rest);
      if (!shape.ok()) {
        return Err(absl::StrCat("bad shape of ", ins.name, ": ", shape.status().message()));
      }
      ins.shape = std::move(*shape);
      p_ += before - rest.size();
    }
    SkipWs();
    size_t op_start = p_;
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '-' ||
                              s_[p_] == '_' || s_[p_] == '.')) {
      ++p_;
    }
    ins.opcode = std::string(s_.substr(op_start, p_ - op_start));
    if (ins.opcode.empty()) return Err("expected an opcode for " + ins.name);
    SkipWs();
    if (p_ >= s_.size() || s_[p_] != '(') return Err("expected '(' after opcode " + ins.opcode);
    size_t close = SkipBalanced(s_, p_);
    if (close == std::string_view::npos) return Err("unbalanced operand list of " + ins.name);
    std::string_view inner = s_.substr(p_ + 1, close - p_ - 2);
    p_ = close;
    if (ins.opcode == "constant" || ins.opcode == "parameter" || ins.opcode == "iota") {
      ins.literal = std::string(Trim(inner));
    } else {
      for (std::string_view piece : SplitTopLevel(inner)) {
        if (piece.empty()) continue;
        size_t sp = piece.find_last_of(" \t\n");
        std::string_view name = sp == std::string_view::npos ? piece : piece.substr(sp + 1);
        if (!name.empty() && name.front() == '%') name.remove_prefix(1);
        ins.operands.emplace_back(name);
      }
    }
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
      std::string key(s_.substr(kstart, p_ - kstart));
      if (key.empty()) return Err("expected an attribute name in " + ins.name);
      std::string value;
      if (p_ < s_.size() && s_[p_] == '=') {
        ++p_;
        size_t vstart = p_;
        while (p_ < s_.size()) {
          char c = s_[p_];
          if (c == '{' || c == '[' || c == '(' || c == '"') {
            size_t e = SkipBalanced(s_, p_);
            if (e == std::string_view::npos) return Err("unbalanced value of attribute " + key);
            p_ = e;
            continue;
          }
          if (c == ',' || c == '}' || std::isspace(static_cast<unsigned char>(c))) break;
          ++p_;
        }
        value = std::string(s_.substr(vstart, p_ - vstart));
      }
      ins.attrs[key] = std::move(value);
    }
    Finish(ins);
    return ins;
  }

  static void Finish(Instruction& ins) {
    auto md = ins.attrs.find("metadata");
    if (md != ins.attrs.end()) ParseMetadata(md->second, ins);
    for (const char* k : {"calls", "to_apply", "body", "condition", "true_computation",
                          "false_computation", "branch_computations", "select", "scatter"}) {
      auto it = ins.attrs.find(k);
      if (it == ins.attrs.end()) continue;
      std::string_view v = it->second;
      if (!v.empty() && v.front() == '{') v = v.substr(1, v.size() >= 2 ? v.size() - 2 : 0);
      for (std::string_view piece : SplitTopLevel(v)) {
        if (!piece.empty() && piece.front() == '%') piece.remove_prefix(1);
        if (!piece.empty()) ins.called.emplace_back(piece);
      }
    }
  }

  // metadata={op_type="dot" op_name="jit(f)/dot" source_file="/a.py" source_line=3 ...}
  static void ParseMetadata(std::string_view v, Instruction& ins) {
    if (!v.empty() && v.front() == '{') v.remove_prefix(1);
    if (!v.empty() && v.back() == '}') v.remove_suffix(1);
    size_t i = 0;
    while (i < v.size()) {
      while (i < v.size() && (std::isspace(static_cast<unsigned char>(v[i])) || v[i] == ',')) ++i;
      size_t ks = i;
      while (i < v.size() && v[i] != '=' && !std::isspace(static_cast<unsigned char>(v[i]))) ++i;
      std::string_view key = v.substr(ks, i - ks);
      if (i >= v.size() || v[i] != '=') {
        ++i;
        continue;
      }
      ++i;
      std::string value;
      if (i < v.size() && v[i] == '"') {
        for (++i; i < v.size() && v[i] != '"'; ++i) {
          if (v[i] == '\\' && i + 1 < v.size()) ++i;
          value.push_back(v[i]);
        }
        ++i;
      } else if (i < v.size() && (v[i] == '{' || v[i] == '[')) {
        size_t e = SkipBalanced(v, i);
        if (e == std::string_view::npos) e = v.size();
        value = std::string(v.substr(i, e - i));
        i = e;
      } else {
        size_t vs = i;
        while (i < v.size() && !std::isspace(static_cast<unsigned char>(v[i]))) ++i;
        value = std::string(v.substr(vs, i - vs));
      }
      if (key == "op_name") ins.op_name = value;
      else if (key == "op_type") ins.op_type = value;
      else if (key == "source_file") ins.source_file = value;
      else if (key == "source_line") (void)ToInt(value, &ins.source_line);
      else if (key == "stack_frame_id") (void)ToInt(value, &ins.stack_frame_id);
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
        size_t after = p_ + t.size();
        size_t q = after;
        while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t' || s_[q] == '\r')) ++q;
        if (q >= s_.size() || s_[q] == '\n') which = t;
      }
    }
    if (which.empty()) return false;
    p_ += which.size();
    for (;;) {
      SkipWs();
      if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_]))) break;
      size_t eol = s_.find('\n', p_);
      if (eol == std::string_view::npos) eol = s_.size();
      std::string_view line = s_.substr(p_, eol - p_);
      p_ = eol;
      size_t sp = line.find(' ');
      int64_t id = 0;
      if (sp == std::string_view::npos || !ToInt(line.substr(0, sp), &id)) continue;
      std::string_view rest = Trim(line.substr(sp + 1));
      if (which == "FileNames" || which == "FunctionNames") {
        std::string v(rest);
        if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
        (which == "FileNames" ? file_names_ : function_names_)[id] = v;
      } else {
        std::map<std::string, int64_t> kv;
        std::string_view body = rest;
        if (!body.empty() && body.front() == '{') body.remove_prefix(1);
        if (!body.empty() && body.back() == '}') body.remove_suffix(1);
        for (std::string_view part : SplitWs(body)) {
          size_t eq = part.find('=');
          int64_t v = 0;
          if (eq != std::string_view::npos && ToInt(part.substr(eq + 1), &v)) {
            kv[std::string(part.substr(0, eq))] = v;
          }
        }
        if (which == "FileLocations") {
          locations_[id] = {kv["file_name_id"], kv["line"]};
        } else {
          frames_[id] = kv["file_location_id"];
        }
      }
    }
    return true;
  }

  static std::vector<std::string_view> SplitWs(std::string_view s) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      size_t st = i;
      while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i > st) out.push_back(s.substr(st, i - st));
    }
    return out;
  }

  void ResolveStackFrames(Module& m) const {
    if (frames_.empty()) return;
    for (auto& c : m.computations) {
      for (auto& ins : c.instructions) {
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
  }

  std::map<int64_t, std::string> file_names_, function_names_;
  std::map<int64_t, std::pair<int64_t, int64_t>> locations_;  // id -> (file id, line)
  std::map<int64_t, int64_t> frames_;                         // id -> location id
  std::string_view s_;
  const std::vector<size_t>& newlines_;
  size_t base_ = 0;
  size_t p_ = 0;
  int first_line_ = 1;
};

}  // namespace

absl::StatusOr<Shape> ParseShape(std::string_view& t) {
  auto skip_ws = [&] {
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  };
  skip_ws();
  Shape s;
  if (!t.empty() && t.front() == '(') {
    s.is_tuple = true;
    t.remove_prefix(1);
    skip_ws();
    if (!t.empty() && t.front() == ')') {
      t.remove_prefix(1);
      return s;
    }
    for (;;) {
      auto e = ParseShape(t);
      if (!e.ok()) return e.status();
      s.elements.push_back(std::move(*e));
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
      return absl::InvalidArgumentError(absl::StrCat("unexpected '", std::string(1, t.front()),
                                                     "' in tuple shape"));
    }
    return s;
  }
  size_t i = 0;
  while (i < t.size() && std::isalnum(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0) {
    return absl::InvalidArgumentError(absl::StrCat("expected a shape, found '", std::string(t.substr(0, 20)),
                                                   "'"));
  }
  s.dtype = std::string(t.substr(0, i));
  t.remove_prefix(i);
  if (t.empty() || t.front() != '[') {
    return absl::InvalidArgumentError(absl::StrCat("expected '[' after element type ", s.dtype));
  }
  size_t close = t.find(']');
  if (close == std::string_view::npos) return absl::InvalidArgumentError("unterminated dimensions");
  std::string_view dims = t.substr(1, close - 1);
  t.remove_prefix(close + 1);
  if (!Trim(dims).empty()) {
    for (std::string_view d : SplitTopLevel(dims)) {
      if (d.substr(0, 2) == "<=") d.remove_prefix(2);
      int64_t v = 0;
      if (d == "?") v = 0;
      else if (!ToInt(d, &v)) {
        return absl::InvalidArgumentError(absl::StrCat("bad dimension '", std::string(d), "'"));
      }
      s.dims.push_back(v);
    }
  }
  if (!t.empty() && t.front() == '{') {
    size_t e = SkipBalanced(t, 0);
    if (e == std::string_view::npos) return absl::InvalidArgumentError("unterminated layout");
    t.remove_prefix(e);
  }
  return s;
}

void ForEachHloModule(std::string_view text, const std::function<void(absl::StatusOr<Module>)>& fn,
                      int first_line) {
  std::string clean = StripComments(text);
  std::vector<size_t> newlines;
  for (size_t i = 0; i < clean.size(); ++i) {
    if (clean[i] == '\n') newlines.push_back(i);
  }
  // Module starts: "HloModule" at the start of a line (after blanks).
  std::vector<size_t> starts;
  size_t line_start = 0;
  for (size_t i = 0; i <= clean.size(); ++i) {
    if (i == clean.size() || clean[i] == '\n') {
      size_t j = line_start;
      while (j < i && (clean[j] == ' ' || clean[j] == '\t')) ++j;
      if (clean.compare(j, 9, "HloModule") == 0) starts.push_back(j);
      line_start = i + 1;
    }
  }
  std::string_view all(clean);
  if (starts.empty()) {
    if (Trim(all).empty()) return;
    starts.push_back(0);
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    size_t end = k + 1 < starts.size() ? starts[k + 1] : clean.size();
    Parser p(all.substr(starts[k], end - starts[k]), newlines);
    p.SetBase(starts[k]);
    p.SetFirstLine(first_line);
    fn(p.ParseModule());
  }
}

std::vector<absl::StatusOr<Module>> ParseHloText(std::string_view text) {
  std::vector<absl::StatusOr<Module>> out;
  ForEachHloModule(text, [&](absl::StatusOr<Module> m) { out.push_back(std::move(m)); });
  return out;
}

}  // namespace falcon::plugins::hlo
