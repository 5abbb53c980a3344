// Over 600 lines on purpose: one handler per HloCostAnalysis rule (opcode classes, custom-call targets,
// fusion and loop bodies) in one place, so that each can be checked against XLA's source side by side.
#include "plugins/hlo_stats/hlo_cost.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace falcon::plugins::hlo {

namespace {

const std::set<std::string>& Transcendental() {
  static const auto* s = new std::set<std::string>{"exponential",
                                                   "log",
                                                   "logistic",
                                                   "power",
                                                   "sqrt",
                                                   "cbrt",
                                                   "rsqrt",
                                                   "tanh",
                                                   "sine",
                                                   "cosine",
                                                   "exponential-minus-one",
                                                   "log-plus-one",
                                                   "atan2",
                                                   "tan",
                                                   "erf",
                                                   "acosh"};
  return *s;
}

const std::set<std::string>& Elementwise() {
  static const auto* s = new std::set<std::string>{"abs",
                                                   "add",
                                                   "and",
                                                   "ceil",
                                                   "clamp",
                                                   "clz",
                                                   "compare",
                                                   "complex",
                                                   "convert",
                                                   "divide",
                                                   "floor",
                                                   "imag",
                                                   "is-finite",
                                                   "maximum",
                                                   "minimum",
                                                   "multiply",
                                                   "negate",
                                                   "not",
                                                   "or",
                                                   "popcnt",
                                                   "real",
                                                   "reduce-precision",
                                                   "remainder",
                                                   "round-nearest-afz",
                                                   "round-nearest-even",
                                                   "select",
                                                   "shift-left",
                                                   "shift-right-arithmetic",
                                                   "shift-right-logical",
                                                   "sign",
                                                   "subtract",
                                                   "xor",
                                                   "stochastic-convert",
                                                   "bitcast-convert"};
  return *s;
}

// Parses "{1,2}" -> {1,2}.
std::vector<int64_t> IntList(const std::string& v) {
  std::vector<int64_t> out;
  std::string s = v;
  s.erase(
      std::remove_if(s.begin(), s.end(), [](char c) { return c == '{' || c == '}' || c == ' '; }),
      s.end());
  for (auto piece : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    int64_t x = 0;
    if (absl::SimpleAtoi(piece, &x)) out.push_back(x);
  }
  return out;
}

struct WindowDim {
  int64_t size = 1, stride = 1, pad_lo = 0, pad_hi = 0, lhs_dilate = 1, rhs_dilate = 1;
};

// window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1}
std::vector<WindowDim> ParseWindow(const std::string& v) {
  std::vector<WindowDim> dims;
  std::string s = v;
  if (!s.empty() && s.front() == '{') s = s.substr(1, s.size() - 2);
  for (auto part : absl::StrSplit(s, ' ', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (kv.size() != 2) continue;
    std::vector<std::string> vals = absl::StrSplit(kv[1], 'x');
    if (dims.size() < vals.size()) dims.resize(vals.size());
    for (size_t i = 0; i < vals.size(); ++i) {
      int64_t a = 0, b = 0;
      if (kv[0] == "pad") {
        std::vector<std::string> lohi = absl::StrSplit(vals[i], '_');
        if (lohi.size() == 2 && absl::SimpleAtoi(lohi[0], &a) && absl::SimpleAtoi(lohi[1], &b)) {
          dims[i].pad_lo = a;
          dims[i].pad_hi = b;
        }
        continue;
      }
      if (!absl::SimpleAtoi(vals[i], &a)) continue;
      if (kv[0] == "size")
        dims[i].size = a;
      else if (kv[0] == "stride")
        dims[i].stride = a;
      else if (kv[0] == "lhs_dilate")
        dims[i].lhs_dilate = a;
      else if (kv[0] == "rhs_dilate")
        dims[i].rhs_dilate = a;
    }
  }
  return dims;
}

int64_t AttrInt(const Instruction& ins, Attr key, int64_t def) {
  int64_t v = def;
  if (ins.Has(key) && absl::SimpleAtoi(std::string(ins.attr(key)), &v)) return v;
  return def;
}

std::string AttrString(const Instruction& ins, Attr key) {
  return ins.Has(key) ? std::string(ins.attr(key)) : std::string();
}

// The integers of the first JSON array after `key` in `text` (backend_config, possibly an escaped
// string): "lhs_contracting_dimensions":["1"] -> {1}. Empty when the key is absent.
std::vector<int64_t> JsonIntArrayAfter(std::string_view text, std::string_view key) {
  std::vector<int64_t> out;
  size_t k = text.find(key);
  if (k == std::string_view::npos) return out;
  size_t open = text.find('[', k + key.size());
  size_t close = open == std::string_view::npos ? open : text.find(']', open);
  if (close == std::string_view::npos) return out;
  int64_t v = 0;
  bool in = false;
  for (size_t i = open + 1; i <= close; ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      in = true;
    } else if (in) {
      out.push_back(v);
      v = 0;
      in = false;
    }
  }
  return out;
}

// Floor of log2 (XLA's Log2Floor); 0 for 0 and 1.
int64_t Log2Floor(int64_t v) {
  int64_t r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return r;
}

}  // namespace

CustomCallKind ClassifyCustomCall(std::string_view t) {
  if (t == "__cublas$gemm" || t == "__cublas$lt$matmul" || t == "__cublas$lt$matmul$f8" ||
      t == "__cublas$lt$matmul$mx") {
    return CustomCallKind::kGemm;
  }
  if (t == "__cudnn$convForward" || t == "__cudnn$convBackwardInput" || t == "__cudnn$convBackwardFilter" ||
      t == "__cudnn$convBiasActivationForward" || t == "__cudnn$convForwardGraph") {
    return CustomCallKind::kConvolution;
  }
  return CustomCallKind::kUnmodelled;
}

std::string_view CustomCallTarget(const Instruction& ins) {
  if (!ins.Has(kAttrCustomCallTarget)) return {};
  std::string_view t = ins.attr(kAttrCustomCallTarget);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  return t;
}

int64_t KnownTripCount(const Instruction& ins) {
  if (!ins.Has(kAttrBackendConfig)) return -1;
  std::string_view b = ins.attr(kAttrBackendConfig);
  size_t k = b.find("known_trip_count");
  if (k == std::string_view::npos) return -1;
  size_t n = b.find('n', k + 16);
  if (n == std::string_view::npos) return -1;
  size_t i = n + 1;
  while (i < b.size() && (b[i] < '0' || b[i] > '9')) {
    if (b[i] == '}') return -1;
    ++i;
  }
  int64_t v = 0;
  bool any = false;
  for (; i < b.size() && b[i] >= '0' && b[i] <= '9'; ++i) {
    v = v * 10 + (b[i] - '0');
    any = true;
  }
  return any ? v : -1;
}

std::string_view CollectiveKind(std::string_view op) {
  static constexpr std::string_view kKinds[] = {
      "all-reduce",         "all-gather",     "all-to-all",
      "collective-permute", "reduce-scatter", "collective-broadcast",
      "ragged-all-to-all",  "send",           "recv"};
  for (std::string_view k : kKinds) {
    if (op == k) return k;
  }
  constexpr std::string_view kStart = "-start";
  if (op.size() > kStart.size() && op.substr(op.size() - kStart.size()) == kStart) {
    std::string_view base = op.substr(0, op.size() - kStart.size());
    for (std::string_view k : kKinds) {
      if (base == k) return k;
    }
  }
  return {};
}

uint32_t CostModel::Classify(std::string_view op) {
  // A small direct-mapped cache in front of the map: a dump has a few dozen distinct opcodes.
  size_t slot = (op.size() * 31 + static_cast<unsigned char>(op.empty() ? 0 : op[0]) * 7 +
                 static_cast<unsigned char>(op.empty() ? 0 : op[op.size() / 2])) %
                kOpCacheSize;
  uint32_t cached = op_cache_[slot];
  if (cached != 0 && infos_[cached - 1].name == op) return cached - 1;
  auto it = op_index_.find(op);
  if (it != op_index_.end()) {
    op_cache_[slot] = it->second + 1;
    return it->second;
  }
  using F = OpInfo::Flops;
  using B = OpInfo::Bytes;
  OpInfo info;
  info.name = std::string(op);
  const std::string& o = info.name;
  if (Transcendental().count(o))
    info.flops = F::kTranscendental;
  else if (Elementwise().count(o))
    info.flops = F::kElementwise;
  else if (o == "dot" || o == "ragged-dot" || o == "scaled-dot")
    info.flops = F::kDot;
  else if (o == "convolution")
    info.flops = F::kConvolution;
  else if (o == "reduce")
    info.flops = F::kReduce;
  else if (o == "reduce-window")
    info.flops = F::kReduceWindow;
  else if (o == "select-and-scatter")
    info.flops = F::kSelectAndScatter;
  else if (o == "map")
    info.flops = F::kMap;
  else if (o == "scatter")
    info.flops = F::kScatter;
  else if (o == "sort")
    info.flops = F::kSort;
  else if (o == "all-reduce" || o == "all-reduce-start")
    info.flops = F::kAllReduce;
  else if (o == "fusion")
    info.flops = F::kFusion;
  else if (o == "call" || o == "async-start")
    info.flops = F::kCall;
  else if (o == "while")
    info.flops = F::kWhile;
  else if (o == "conditional")
    info.flops = F::kConditional;
  else if (o == "fft")
    info.flops = F::kFft;
  else if (o == "custom-call")
    info.flops = F::kCustomCall;
  // Byte-count exceptions of HloCostAnalysis.
  if (o == "parameter" || o == "constant" || o == "get-tuple-element" || o == "bitcast" ||
      o == "after-all" || o == "add-dependency" || o == "domain" || o == "opt-barrier") {
    info.bytes = B::kZero;
  } else if (o == "tuple") {
    info.bytes = B::kTuple;
  } else if (o == "slice") {
    info.bytes = B::kSlice;
  } else if (o == "dynamic-slice") {
    info.bytes = B::kDynamicSlice;
  } else if (o == "dynamic-update-slice") {
    info.bytes = B::kDynamicUpdateSlice;
  } else if (o == "gather") {
    info.bytes = B::kGather;
  } else if (o == "scatter") {
    info.bytes = B::kScatter;
  } else if (o.size() > 5 && o.compare(o.size() - 5, 5, "-done") == 0) {
    info.bytes = B::kZero;  // the *-start half carries the pair's traffic
  } else if (o == "async-update") {
    info.bytes = B::kZero;
  }
  info.collective = CollectiveKind(o);
  info.is_fusion = o == "fusion";
  info.is_parameter = o == "parameter";
  info.is_async_start = o == "async-start";
  uint32_t id = static_cast<uint32_t>(infos_.size());
  infos_.push_back(std::move(info));
  op_index_.emplace(infos_.back().name, id);
  return id;
}

void CostModel::Reset(const Module& module) {
  m_ = &module;
  const auto& comps = module.computations;
  const auto& instrs = module.instructions;
  const size_t n = comps.size();
  comp_index_.clear();
  comp_index_.reserve(n);
  first_def_.clear();
  fusion_bodies_.assign(n, false);
  state_.assign(n, 0);
  comp_cost_.assign(n, Cost{});
  inst_cost_.resize(instrs.size());
  inst_done_.assign(instrs.size(), false);
  op_ids_.resize(instrs.size());
  caching_ = false;
  cycle_ = false;
  cache_ok_ = false;
  for (size_t c = 0; c < n; ++c) {
    comp_index_.emplace(comps[c].name, static_cast<int>(c));
    for (uint32_t g = comps[c].begin; g < comps[c].begin + comps[c].count; ++g) {
      op_ids_[g] = Classify(instrs[g].opcode);
    }
  }
  // An operand names the first instruction of that name in its own computation, else the first in
  // the module. Small computations (most fusion bodies and reducers) are searched directly; larger
  // ones through a map; the module-wide map is built only when some name is not local.
  constexpr uint32_t kSmall = 16;
  bool global_built = false;
  resolved_.assign(module.names.size(), -1);
  resolved_def_.assign(module.names.size(), -1);
  fusion_bytes_.assign(n, -1);
  for (size_t c = 0; c < n; ++c) {
    const uint32_t begin = comps[c].begin, end = comps[c].begin + comps[c].count;
    const bool small = comps[c].count <= kSmall;
    if (!small) {
      local_def_.clear();
      local_def_.reserve(comps[c].count);
      for (uint32_t g = begin; g < end; ++g) local_def_.emplace(instrs[g].name, g);
    }
    for (uint32_t g = begin; g < end; ++g) {
      const Instruction& ins = instrs[g];
      for (uint32_t k = ins.operands_begin; k < ins.operands_begin + ins.operands_count; ++k) {
        std::string_view name = module.names[k];
        int64_t def = -1;
        if (small) {
          for (uint32_t h = begin; h < end; ++h) {
            if (instrs[h].name == name) {
              def = h;
              break;
            }
          }
        } else {
          auto l = local_def_.find(name);
          if (l != local_def_.end()) def = l->second;
        }
        if (def < 0) {
          if (!global_built) {
            first_def_.reserve(instrs.size());
            for (uint32_t h = 0; h < instrs.size(); ++h) first_def_.emplace(instrs[h].name, h);
            global_built = true;
          }
          auto f = first_def_.find(name);
          if (f != first_def_.end()) def = f->second;
        }
        if (def >= 0) {
          resolved_[k] = instrs[def].shape;
          resolved_def_[k] = static_cast<int32_t>(def);
        }
      }
      for (uint32_t k = ins.called_begin; k < ins.called_begin + ins.called_count; ++k) {
        resolved_[k] = FindComputation(module.names[k]);
      }
      if (infos_[op_ids_[g]].is_fusion) {
        for (uint32_t k = ins.called_begin; k < ins.called_begin + ins.called_count; ++k) {
          if (resolved_[k] >= 0) fusion_bodies_[resolved_[k]] = true;
        }
      }
    }
  }
}

int CostModel::FindComputation(std::string_view name) const {
  auto it = comp_index_.find(name);
  return it == comp_index_.end() ? -1 : it->second;
}

int CostModel::CalledComputation(uint32_t g, size_t which) const {
  const Instruction& ins = m_->instructions[g];
  if (which >= ins.called_count) return -1;
  return static_cast<int>(resolved_[ins.called_begin + which]);
}

int64_t CostModel::OperandDef(uint32_t g, size_t i) const {
  const Instruction& ins = m_->instructions[g];
  if (i >= ins.operands_count) return -1;
  return resolved_def_[ins.operands_begin + i];
}

double CostModel::XlaShapeSize(uint32_t s) const {
  const ShapeNode& n = m_->shapes[s];
  return n.is_tuple ? 8.0 * static_cast<double>(n.children) : static_cast<double>(n.bytes);
}

CostModel::Users CostModel::UsersIn(int c) const {
  const Computation& comp = m_->computations[c];
  Users u;
  u.begin = comp.begin;
  u.of.resize(comp.count);
  for (uint32_t g = comp.begin; g < comp.begin + comp.count; ++g) {
    const Instruction& ins = m_->instructions[g];
    for (uint32_t k = ins.operands_begin; k < ins.operands_begin + ins.operands_count; ++k) {
      const int32_t d = resolved_def_[k];
      if (d < static_cast<int32_t>(comp.begin) || d >= static_cast<int32_t>(comp.begin + comp.count)) {
        continue;
      }
      auto& list = u.of[d - comp.begin];
      if (list.empty() || list.back() != g) list.push_back(g);  // an instruction is a user once
    }
  }
  return u;
}

double CostModel::ParameterReadBytes(const Users& users, uint32_t hlo) {
  using B = OpInfo::Bytes;
  const Module& m = *m_;
  const auto& instrs = m.instructions;
  double size = 0;
  bool seen_trivial_user = false;
  // XLA's handle_dynamic_slice / handle_dynamic_update_slice lambdas: `reader` is read by `user`.
  auto dynamic_slice = [&](uint32_t reader, uint32_t user, bool& seen) -> double {
    if (OperandDef(user, 0) == reader) return XlaShapeSize(instrs[user].shape);  // only the slice
    if (!seen) {
      seen = true;
      return XlaShapeSize(instrs[reader].shape);
    }
    return 0;
  };
  auto dynamic_update_slice = [&](uint32_t reader, uint32_t user, bool& seen) -> double {
    // Operand 0 is aliased to the output: not read.
    if (OperandDef(user, 0) != reader && !seen) {
      seen = true;
      return XlaShapeSize(instrs[reader].shape);
    }
    return 0;
  };
  for (uint32_t user : users.of[hlo - users.begin]) {
    const OpInfo& op = Op(user);
    if (op.is_fusion) {
      // A nested fusion: "simple" when the parameter is (or directly feeds) its root; then the nested
      // fusion's own users decide, else what the nested parameter's users read.
      const int nested = CalledComputation(user, 0);
      const Instruction& u = instrs[user];
      for (uint32_t idx = 0; idx < u.operands_count; ++idx) {
        if (OperandDef(user, idx) != static_cast<int64_t>(hlo)) continue;
        if (nested < 0) {
          size += XlaShapeSize(instrs[hlo].shape);
          continue;
        }
        const Computation& nc = m.computations[nested];
        int64_t param = -1;
        for (uint32_t h = nc.begin; h < nc.begin + nc.count; ++h) {
          if (instrs[h].parameter_number == static_cast<int>(idx) && Op(h).is_parameter) {
            param = h;
            break;
          }
        }
        bool simple = false;
        if (nc.root >= 0) {
          const uint32_t root = nc.begin + static_cast<uint32_t>(nc.root);
          simple = instrs[root].operands_count == 0 || (param >= 0 && OperandDef(root, 0) == param);
        }
        bool nested_seen = false;
        for (uint32_t fusion_user : users.of[user - users.begin]) {
          const B b = Op(fusion_user).bytes;
          if (simple && b == B::kSlice) {
            size += XlaShapeSize(instrs[fusion_user].shape);
          } else if (simple && b == B::kDynamicSlice) {
            size += dynamic_slice(user, fusion_user, nested_seen);
          } else if (simple && b == B::kDynamicUpdateSlice) {
            size += dynamic_update_slice(user, fusion_user, nested_seen);
          } else if (!nested_seen) {
            nested_seen = true;
            if (param >= 0) size += ParameterReadBytes(UsersIn(nested), static_cast<uint32_t>(param));
          }
        }
      }
      continue;
    }
    switch (op.bytes) {
      case B::kSlice:
        size += XlaShapeSize(instrs[user].shape);
        continue;
      case B::kDynamicSlice:
        size += dynamic_slice(hlo, user, seen_trivial_user);
        continue;
      case B::kDynamicUpdateSlice:
        size += dynamic_update_slice(hlo, user, seen_trivial_user);
        continue;
      default:
        break;
    }
    if (op.name == "broadcast" || op.name == "reshape") {
      size += XlaShapeSize(instrs[hlo].shape);
    } else if (!seen_trivial_user) {
      // Other users share one read of the parameter.
      seen_trivial_user = true;
      size += XlaShapeSize(instrs[hlo].shape);
    }
  }
  return size;
}

double CostModel::FusionBytes(uint32_t fusion, int body) {
  if (fusion_bytes_[body] >= 0) return fusion_bytes_[body];
  const Module& m = *m_;
  const auto& instrs = m.instructions;
  const Computation& comp = m.computations[body];
  double bytes = 0;
  // Outputs: every array of the fusion's shape; a dynamic-update-slice root (of the whole output, or of
  // one element of a tuple root) writes only its update, in place.
  const int64_t root = comp.root >= 0 ? static_cast<int64_t>(comp.begin) + comp.root : -1;
  auto update_bytes = [&](int64_t producer, double otherwise) {
    if (producer >= 0 && Op(static_cast<uint32_t>(producer)).bytes == OpInfo::Bytes::kDynamicUpdateSlice) {
      const int64_t update = OperandShape(static_cast<uint32_t>(producer), 1);
      return update >= 0 ? XlaShapeSize(static_cast<uint32_t>(update)) : 0.0;
    }
    return otherwise;
  };
  const uint32_t out = instrs[fusion].shape;
  if (!m.shapes[out].is_tuple) {
    bytes += update_bytes(root, static_cast<double>(m.shapes[out].bytes));
  } else {
    const bool tuple_root = root >= 0 && Op(static_cast<uint32_t>(root)).name == "tuple";
    uint32_t child = out + 1;
    for (uint32_t j = 0; j < m.shapes[out].children; ++j) {
      const ShapeNode& cs = m.shapes[child];
      const double dense = static_cast<double>(cs.bytes);  // all array leaves below
      if (!cs.is_tuple && tuple_root) {
        bytes += update_bytes(OperandDef(static_cast<uint32_t>(root), j), dense);
      } else {
        bytes += dense;
      }
      child += cs.subtree;
    }
  }
  for (uint32_t h = comp.begin; h < comp.begin + comp.count; ++h) {
    // Large constants are read from memory (immediate_constant_max_elements() is 1).
    if (Op(h).name == "constant" && m.shapes[instrs[h].shape].elements > 1) {
      bytes += XlaShapeSize(instrs[h].shape);
    }
  }
  const Users users = UsersIn(body);
  for (uint32_t h = comp.begin; h < comp.begin + comp.count; ++h) {
    if (!Op(h).is_parameter) continue;
    if (!m.shapes[instrs[h].shape].is_tuple) {
      bytes += ParameterReadBytes(users, h);
      continue;
    }
    // A tuple parameter: per leaf of its shape, what is read through the get-tuple-element chain of the
    // leaf's index — at each level the first user that is a get-tuple-element of that tuple index, as
    // FusionProcessOperandBytesRead follows them (a level without one stays where it is).
    ForEachLeafIndex(instrs[h].shape, [&](const std::vector<int64_t>& index) {
      uint32_t g = h;
      for (int64_t sub : index) {
        for (uint32_t user : users.of[g - users.begin]) {
          if (Op(user).name == "get-tuple-element" && TupleIndex(user) == sub) {
            g = user;
            break;
          }
        }
      }
      bytes += ParameterReadBytes(users, g);
    });
  }
  fusion_bytes_[body] = bytes;
  return bytes;
}

int64_t CostModel::TupleIndex(uint32_t g) const {
  const Instruction& ins = m_->instructions[g];
  if (!ins.Has(kAttrIndex)) return -1;
  const std::string_view text = ins.attr(kAttrIndex);
  int64_t i = -1;
  return absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &i) ? i : -1;
}

void CostModel::ForEachLeafIndex(uint32_t shape, const std::function<void(const std::vector<int64_t>&)>& fn) const {
  std::vector<int64_t> index;
  std::function<void(uint32_t)> walk = [&](uint32_t s) {
    const ShapeNode& n = m_->shapes[s];
    if (!n.is_tuple) {
      fn(index);
      return;
    }
    uint32_t child = s + 1;
    for (uint32_t j = 0; j < n.children; ++j) {
      index.push_back(j);
      walk(child);
      index.pop_back();
      child += m_->shapes[child].subtree;
    }
  };
  walk(shape);
}

int64_t CostModel::OperandShape(uint32_t g, size_t i) const {
  const Instruction& ins = m_->instructions[g];
  if (i >= ins.operands_count) return -1;
  return resolved_[ins.operands_begin + i];
}

Cost CostModel::ComputationCost(int c) {
  if (c < 0) return {};
  if (state_[c] == 2) return comp_cost_[c];
  if (state_[c] == 1) {
    cycle_ = true;
    return {};  // recursion through a cycle: count once
  }
  state_[c] = 1;
  Cost total;
  const Computation& comp = m_->computations[c];
  for (uint32_t g = comp.begin; g < comp.begin + comp.count; ++g) {
    Cost ic = ComputeInstruction(c, g);
    if (caching_) {
      inst_cost_[g] = ic;
      inst_done_[g] = true;
    }
    total += ic;
  }
  comp_cost_[c] = total;
  state_[c] = 2;
  return total;
}

Cost CostModel::ModuleCost() {
  caching_ = true;
  Cost c = ComputationCost(m_->EntryIndex());
  caching_ = false;
  cache_ok_ = !cycle_;
  return c;
}

Cost CostModel::InstructionCost(int c, uint32_t g) {
  if (cache_ok_ && inst_done_[g]) return inst_cost_[g];
  return ComputeInstruction(c, g);
}

Cost CostModel::CalledCost(uint32_t g, size_t which) {
  const Instruction& ins = m_->instructions[g];
  if (which >= ins.called_count) return {};
  return ComputationCost(static_cast<int>(resolved_[ins.called_begin + which]));
}

double CostModel::ConvolutionFlops(const Instruction& ins, int64_t lhs, int64_t rhs, int64_t out) const {
  const Module& m = *m_;
  auto dim = [&](int64_t s, int64_t d) -> int64_t {
    return s < 0 ? 1 : m.Dim(static_cast<uint32_t>(s), d);
  };
  // dim_labels=b01f_01io->b01f
  std::string labels = AttrString(ins, kAttrDimLabels);
  std::string in_l, k_l, out_l;
  {
    size_t us = labels.find('_'), arrow = labels.find("->");
    if (us != std::string::npos && arrow != std::string::npos && arrow > us) {
      in_l = labels.substr(0, us);
      k_l = labels.substr(us + 1, arrow - us - 1);
      out_l = labels.substr(arrow + 2);
    }
  }
  auto pos = [](const std::string& l, char ch) -> int64_t {
    size_t p = l.find(ch);
    return p == std::string::npos ? -1 : static_cast<int64_t>(p);
  };
  double input_feature = static_cast<double>(dim(lhs, pos(in_l, 'f')));
  double batch = static_cast<double>(dim(lhs, pos(in_l, 'b')));
  double output_feature = static_cast<double>(dim(out, pos(out_l, 'f')));
  double fgc =
      static_cast<double>(std::max<int64_t>(1, AttrInt(ins, kAttrFeatureGroupCount, 1)));
  double bgc = static_cast<double>(std::max<int64_t>(1, AttrInt(ins, kAttrBatchGroupCount, 1)));
  std::vector<WindowDim> window;
  if (ins.Has(kAttrWindow)) window = ParseWindow(std::string(ins.attr(kAttrWindow)));
  double positions = 1;
  for (size_t k = 0; k < window.size(); ++k) {
    char digit = static_cast<char>('0' + k);
    int64_t in_size = dim(lhs, pos(in_l, digit));
    int64_t kernel = dim(rhs, pos(k_l, digit));
    int64_t out_size = dim(out, pos(out_l, digit));
    const WindowDim& w = window[k];
    // Count (output, kernel) position pairs that read a real (non-padding, non-hole) input
    // element.
    int64_t valid = 0;
    int64_t dilated_in = (in_size - 1) * w.lhs_dilate + 1;
    for (int64_t o = 0; o < out_size; ++o) {
      for (int64_t kk = 0; kk < kernel; ++kk) {
        int64_t x = o * w.stride - w.pad_lo + kk * w.rhs_dilate;
        if (x >= 0 && x < dilated_in && x % w.lhs_dilate == 0) ++valid;
      }
    }
    positions *= static_cast<double>(valid);
  }
  return 2.0 * (input_feature / fgc) * output_feature * (batch / bgc) * positions;
}

Cost CostModel::ComputeInstruction(int c, uint32_t g) {
  using F = OpInfo::Flops;
  using B = OpInfo::Bytes;
  const Module& m = *m_;
  const Instruction& ins = m.instructions[g];
  const OpInfo& op = infos_[op_ids_[g]];
  Cost cost;
  // Default bytes: every operand read once plus the output written once.
  double operand_bytes = 0;
  for (uint32_t k = 0; k < ins.operands_count; ++k) {
    int64_t s = resolved_[ins.operands_begin + k];
    if (s >= 0) operand_bytes += static_cast<double>(m.shapes[s].bytes);
  }
  const ShapeNode& shape = m.shapes[ins.shape];
  const double out_bytes = static_cast<double>(shape.bytes);
  cost.bytes_accessed = operand_bytes + out_bytes;
  const uint32_t first_array = m.FirstArray(ins.shape);
  const double out_elems = static_cast<double>(m.shapes[first_array].elements);
  auto dim = [&](int64_t s, int64_t d) -> int64_t {
    return s < 0 ? 1 : m.Dim(static_cast<uint32_t>(s), d);
  };
  auto elements = [&](int64_t s) { return static_cast<double>(m.shapes[s].elements); };

  switch (op.flops) {
    case F::kNone:
      break;
    case F::kTranscendental:
      cost.transcendentals = static_cast<double>(shape.elements);
      break;
    case F::kElementwise:
      cost.flops = static_cast<double>(shape.elements);
      break;
    case F::kDot: {
      int64_t lhs = OperandShape(g, 0);
      double width = 1;
      if (ins.Has(kAttrLhsContractingDims)) {
        for (int64_t d : IntList(std::string(ins.attr(kAttrLhsContractingDims)))) {
          width *= static_cast<double>(dim(lhs, d));
        }
      }
      cost.flops = 2.0 * out_elems * width;
      break;
    }
    case F::kConvolution:
      cost.flops = ConvolutionFlops(ins, OperandShape(g, 0), OperandShape(g, 1), first_array);
      break;
    case F::kReduce: {
      int64_t in = OperandShape(g, 0);
      double count = (in >= 0 ? elements(in) : 0) - out_elems;
      Cost sub = CalledCost(g, 0);
      cost.flops = sub.flops * std::max(0.0, count);
      cost.transcendentals = sub.transcendentals * std::max(0.0, count);
      break;
    }
    case F::kReduceWindow: {
      double window_elems = 1;
      if (ins.Has(kAttrWindow)) {
        for (const auto& w : ParseWindow(std::string(ins.attr(kAttrWindow)))) {
          window_elems *= static_cast<double>(w.size);
        }
      }
      Cost sub = CalledCost(g, 0);
      double count = (window_elems - 1) * out_elems;
      cost.flops = sub.flops * count;
      cost.transcendentals = sub.transcendentals * count;
      break;
    }
    case F::kSelectAndScatter: {
      int64_t source = OperandShape(g, 1);
      double src = source >= 0 ? elements(source) : 0;
      double window_elems = 1;
      if (ins.Has(kAttrWindow)) {
        for (const auto& w : ParseWindow(std::string(ins.attr(kAttrWindow)))) {
          window_elems *= static_cast<double>(w.size);
        }
      }
      Cost sel = CalledCost(g, 0), sc = CalledCost(g, 1);
      cost.flops = sel.flops * src * (window_elems - 1) + sc.flops * src;
      cost.transcendentals =
          sel.transcendentals * src * (window_elems - 1) + sc.transcendentals * src;
      break;
    }
    case F::kMap: {
      Cost sub = CalledCost(g, 0);
      cost.flops = sub.flops * out_elems;
      cost.transcendentals = sub.transcendentals * out_elems;
      break;
    }
    case F::kScatter: {
      // Operands: n inputs, the indices, n updates (XLA: elements of the first update).
      const size_t n_in = ins.operands_count >= 3 ? (ins.operands_count - 1) / 2 : 1;
      int64_t updates = OperandShape(g, n_in + 1);
      double n = updates >= 0 ? elements(updates) : 0;
      Cost sub = CalledCost(g, 0);
      cost.flops = sub.flops * n;
      cost.transcendentals = sub.transcendentals * n;
      break;
    }
    case F::kSort: {
      int64_t in = OperandShape(g, 0);
      double n = in >= 0 ? elements(in) : 0;
      cost.flops = n > 1 ? n * std::ceil(std::log2(n)) : 0;
      break;
    }
    case F::kAllReduce:
      cost.flops = static_cast<double>(shape.elements);
      break;
    case F::kFusion: {
      const int body = CalledComputation(g, 0);
      if (body >= 0 && ins.Has(kAttrKind) && ins.attr(kAttrKind) == "kCustom") {
        // HandleFusion: a custom fusion around a gather or scatter costs what that gather or scatter
        // costs (the first one of the body), nothing else of the body counts.
        const Computation& bc = m.computations[body];
        bool found = false;
        for (uint32_t h = bc.begin; h < bc.begin + bc.count && !found; ++h) {
          const B b = Op(h).bytes;
          if (b == B::kGather || b == B::kScatter) {
            cost = ComputeInstruction(body, h);
            found = true;
          }
        }
        if (found) return cost;
      }
      Cost sub = CalledCost(g, 0);
      cost.flops = sub.flops;
      cost.transcendentals = sub.transcendentals;
      // bytes: what crosses the fusion's boundary (HandleFusion), not its body's.
      if (body >= 0) cost.bytes_accessed = FusionBytes(g, body);
      break;
    }
    case F::kCall:
      cost = CalledCost(g, 0);
      break;
    case F::kWhile:
      // Trip counts are not known statically: one iteration of body and condition, as XLA does.
      cost = CalledCost(g, 0);
      cost += CalledCost(g, 1);
      break;
    case F::kFft: {
      // XLA: 2 (FMA) x 4 (FMAs per complex multiply) x prod(floor(log2(fft_length))) x elements of the
      // input (its first element when it is a tuple).
      int64_t in = OperandShape(g, 0);
      double elems = in >= 0 ? static_cast<double>(m.shapes[m.FirstArray(static_cast<uint32_t>(in))].elements) : 0;
      double log_factors = 1;
      if (ins.Has(kAttrFftLength)) {
        for (int64_t d : IntList(std::string(ins.attr(kAttrFftLength)))) {
          log_factors *= static_cast<double>(Log2Floor(d));
        }
      }
      cost.flops = 2.0 * 4.0 * log_factors * elems;
      break;
    }
    case F::kCustomCall: {
      switch (ClassifyCustomCall(CustomCallTarget(ins))) {
        case CustomCallKind::kGemm: {
          // The dot of the backend config's dimension numbers; the output may be a tuple (cublasLt's
          // auxiliary outputs, the workspace): its first element.
          int64_t lhs = OperandShape(g, 0);
          double width = 1;
          if (ins.Has(kAttrBackendConfig)) {
            for (int64_t d : JsonIntArrayAfter(ins.attr(kAttrBackendConfig), "lhs_contracting_dimensions")) {
              width *= static_cast<double>(dim(lhs, d));
            }
          }
          cost.flops = 2.0 * out_elems * width;
          break;
        }
        case CustomCallKind::kConvolution: {
          cost.flops = ConvolutionFlops(ins, OperandShape(g, 0), OperandShape(g, 1), first_array);
          // (result, scratch): only the result counts as output bytes.
          cost.bytes_accessed = operand_bytes + static_cast<double>(m.shapes[first_array].bytes);
          break;
        }
        case CustomCallKind::kUnmodelled:
          // Unknown, as HandleCustomCall (which reports -1 for FLOPs and bytes): 0 here, and the target
          // is listed in the module's unmodelled_custom_calls.
          cost.bytes_accessed = 0;
          break;
      }
      break;
    }
    case F::kConditional: {
      Cost best;
      for (size_t k = 0; k < ins.called_count; ++k) {
        Cost b = CalledCost(g, k);
        best.flops = std::max(best.flops, b.flops);
        best.transcendentals = std::max(best.transcendentals, b.transcendentals);
        best.bytes_accessed = std::max(best.bytes_accessed, b.bytes_accessed);
      }
      cost = best;
      break;
    }
  }

  switch (op.bytes) {
    case B::kDefault:
      break;
    case B::kZero:
      cost.bytes_accessed = 0;
      break;
    case B::kTuple:
      cost.bytes_accessed = 8.0 * static_cast<double>(ins.operands_count);  // the index table
      break;
    case B::kSlice:
      cost.bytes_accessed = 2 * out_bytes;
      break;
    case B::kDynamicSlice: {
      // XLA: the slice read and written plus the first start index (operand 1; one scalar per
      // dimension follows, only the first is counted).
      const int64_t idx = OperandShape(g, 1);
      cost.bytes_accessed = 2 * out_bytes + (idx >= 0 ? static_cast<double>(m.shapes[idx].bytes) : 0);
      break;
    }
    case B::kGather: {
      // XLA: a copy of the output's size plus a read of the indices.
      int64_t idx = OperandShape(g, 1);
      cost.bytes_accessed = 2 * out_bytes + (idx >= 0 ? static_cast<double>(m.shapes[idx].bytes) : 0);
      break;
    }
    case B::kScatter: {
      // XLA: 3 x the updates (read the input, write the output, read the updates) plus the indices.
      const size_t n_in = ins.operands_count >= 3 ? (ins.operands_count - 1) / 2 : 1;
      double updates = 0;
      for (size_t i = n_in + 1; i < ins.operands_count; ++i) {
        int64_t u = OperandShape(g, i);
        if (u >= 0) updates += static_cast<double>(m.shapes[u].bytes);
      }
      int64_t idx = OperandShape(g, n_in);
      cost.bytes_accessed = 3 * updates + (idx >= 0 ? static_cast<double>(m.shapes[idx].bytes) : 0);
      break;
    }
    case B::kDynamicUpdateSlice: {
      // XLA: the update read and written (operand 0 is aliased to the output) plus the first start
      // index (operand 2).
      const int64_t upd = OperandShape(g, 1), idx = OperandShape(g, 2);
      cost.bytes_accessed = 2 * (upd >= 0 ? static_cast<double>(m.shapes[upd].bytes) : 0) +
                            (idx >= 0 ? static_cast<double>(m.shapes[idx].bytes) : 0);
      break;
    }
  }
  return cost;
}

}  // namespace falcon::plugins::hlo
