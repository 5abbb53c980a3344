#include "plugins/hlo_stats/hlo_cost.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace falcon::plugins::hlo {

namespace {

const std::set<std::string>& Transcendental() {
  static const auto* s = new std::set<std::string>{
      "exponential", "log", "logistic", "power", "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine",
      "exponential-minus-one", "log-plus-one", "atan2", "tan", "erf", "acosh"};
  return *s;
}

const std::set<std::string>& Elementwise() {
  static const auto* s = new std::set<std::string>{
      "abs", "add", "and", "ceil", "clamp", "clz", "compare", "complex", "convert", "divide", "floor",
      "imag", "is-finite", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "real",
      "reduce-precision", "remainder", "round-nearest-afz", "round-nearest-even", "select",
      "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "subtract", "xor",
      "stochastic-convert", "bitcast-convert"};
  return *s;
}

// Parses "{1,2}" -> {1,2}.
std::vector<int64_t> IntList(const std::string& v) {
  std::vector<int64_t> out;
  std::string s = v;
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '{' || c == '}' || c == ' '; }),
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
      if (kv[0] == "size") dims[i].size = a;
      else if (kv[0] == "stride") dims[i].stride = a;
      else if (kv[0] == "lhs_dilate") dims[i].lhs_dilate = a;
      else if (kv[0] == "rhs_dilate") dims[i].rhs_dilate = a;
    }
  }
  return dims;
}

int64_t Attr(const Instruction& ins, const char* key, int64_t def) {
  auto it = ins.attrs.find(key);
  int64_t v = def;
  if (it != ins.attrs.end() && absl::SimpleAtoi(it->second, &v)) return v;
  return def;
}

int64_t DimOr(const Shape* s, int64_t i, int64_t def = 1) {
  if (s == nullptr || s->is_tuple || i < 0 || i >= static_cast<int64_t>(s->dims.size())) return def;
  return s->dims[i];
}

const Shape& FirstArray(const Shape& s) {
  if (s.is_tuple && !s.elements.empty()) return FirstArray(s.elements[0]);
  return s;
}

}  // namespace

std::string CollectiveKind(const std::string& op) {
  static const std::set<std::string> kinds = {
      "all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
      "collective-broadcast", "ragged-all-to-all", "send", "recv"};
  if (kinds.count(op)) return op;
  static const std::string kStart = "-start";
  if (op.size() > kStart.size() && op.compare(op.size() - kStart.size(), kStart.size(), kStart) == 0) {
    std::string base = op.substr(0, op.size() - kStart.size());
    if (kinds.count(base)) return base;
  }
  return "";
}

CostModel::CostModel(const Module& module) : m_(module) {
  const size_t n = m_.computations.size();
  instr_index_.resize(n);
  fusion_bodies_.assign(n, false);
  state_.assign(n, 0);
  comp_cost_.resize(n);
  for (size_t c = 0; c < n; ++c) {
    comp_index_.emplace(m_.computations[c].name, static_cast<int>(c));
    const auto& instrs = m_.computations[c].instructions;
    for (size_t i = 0; i < instrs.size(); ++i) {
      instr_index_[c].emplace(instrs[i].name, static_cast<int>(i));
      module_shapes_.emplace(instrs[i].name, &instrs[i].shape);
    }
  }
  for (const auto& comp : m_.computations) {
    for (const auto& ins : comp.instructions) {
      if (ins.opcode != "fusion") continue;
      for (const auto& callee : ins.called) {
        int idx = FindComputation(callee);
        if (idx >= 0) fusion_bodies_[idx] = true;
      }
    }
  }
}

int CostModel::FindComputation(const std::string& name) const {
  auto it = comp_index_.find(name);
  return it == comp_index_.end() ? -1 : it->second;
}

const Shape* CostModel::OperandShape(int c, const Instruction& ins, size_t i) const {
  if (i >= ins.operands.size()) return nullptr;
  const auto& local = instr_index_[c];
  auto it = local.find(ins.operands[i]);
  if (it != local.end()) return &m_.computations[c].instructions[it->second].shape;
  auto g = module_shapes_.find(ins.operands[i]);
  return g == module_shapes_.end() ? nullptr : g->second;
}

Cost CostModel::ComputationCost(int c) {
  if (c < 0) return {};
  if (state_[c] == 2) return comp_cost_[c];
  if (state_[c] == 1) return {};  // recursion through a cycle: count once
  state_[c] = 1;
  Cost total;
  const auto& instrs = m_.computations[c].instructions;
  for (size_t i = 0; i < instrs.size(); ++i) total += ComputeInstruction(c, instrs[i]);
  comp_cost_[c] = total;
  state_[c] = 2;
  return total;
}

Cost CostModel::ModuleCost() { return ComputationCost(m_.EntryIndex()); }

Cost CostModel::InstructionCost(int c, int i) { return ComputeInstruction(c, m_.computations[c].instructions[i]); }

Cost CostModel::CalledCost(const Instruction& ins, size_t which) {
  if (which >= ins.called.size()) return {};
  return ComputationCost(FindComputation(ins.called[which]));
}

Cost CostModel::ComputeInstruction(int c, const Instruction& ins) {
  const std::string& op = ins.opcode;
  Cost cost;
  // Default bytes: every operand read once plus the output written once.
  double operand_bytes = 0;
  for (size_t i = 0; i < ins.operands.size(); ++i) {
    if (const Shape* s = OperandShape(c, ins, i)) operand_bytes += static_cast<double>(s->ByteSize());
  }
  const double out_bytes = static_cast<double>(ins.shape.ByteSize());
  cost.bytes_accessed = operand_bytes + out_bytes;
  const double out_elems = static_cast<double>(FirstArray(ins.shape).ElementCount());

  auto reducer = [&](size_t which) {
    Cost sub = CalledCost(ins, which);
    return sub;
  };

  if (Transcendental().count(op)) {
    cost.transcendentals = static_cast<double>(ins.shape.ElementCount());
  } else if (Elementwise().count(op)) {
    cost.flops = static_cast<double>(ins.shape.ElementCount());
  } else if (op == "dot" || op == "ragged-dot" || op == "scaled-dot") {
    const Shape* lhs = OperandShape(c, ins, 0);
    double width = 1;
    auto it = ins.attrs.find("lhs_contracting_dims");
    if (it != ins.attrs.end()) {
      for (int64_t d : IntList(it->second)) width *= static_cast<double>(DimOr(lhs, d));
    }
    cost.flops = 2.0 * out_elems * width;
  } else if (op == "convolution") {
    const Shape* lhs = OperandShape(c, ins, 0);
    const Shape* rhs = OperandShape(c, ins, 1);
    const Shape& out = FirstArray(ins.shape);
    // dim_labels=b01f_01io->b01f
    std::string labels = ins.attrs.count("dim_labels") ? ins.attrs.at("dim_labels") : "";
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
    double input_feature = static_cast<double>(DimOr(lhs, pos(in_l, 'f')));
    double batch = static_cast<double>(DimOr(lhs, pos(in_l, 'b')));
    double output_feature = static_cast<double>(DimOr(&out, pos(out_l, 'f')));
    double fgc = static_cast<double>(std::max<int64_t>(1, Attr(ins, "feature_group_count", 1)));
    double bgc = static_cast<double>(std::max<int64_t>(1, Attr(ins, "batch_group_count", 1)));
    std::vector<WindowDim> window;
    if (ins.attrs.count("window")) window = ParseWindow(ins.attrs.at("window"));
    double positions = 1;
    for (size_t k = 0; k < window.size(); ++k) {
      char digit = static_cast<char>('0' + k);
      int64_t in_size = DimOr(lhs, pos(in_l, digit));
      int64_t kernel = DimOr(rhs, pos(k_l, digit));
      int64_t out_size = DimOr(&out, pos(out_l, digit));
      const WindowDim& w = window[k];
      // Count (output, kernel) position pairs that read a real (non-padding, non-hole) input element.
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
    cost.flops = 2.0 * (input_feature / fgc) * output_feature * (batch / bgc) * positions;
  } else if (op == "reduce") {
    const Shape* in = OperandShape(c, ins, 0);
    double count = (in ? static_cast<double>(in->ElementCount()) : 0) - out_elems;
    Cost sub = reducer(0);
    cost.flops = sub.flops * std::max(0.0, count);
    cost.transcendentals = sub.transcendentals * std::max(0.0, count);
  } else if (op == "reduce-window") {
    double window_elems = 1;
    if (ins.attrs.count("window")) {
      for (const auto& w : ParseWindow(ins.attrs.at("window"))) window_elems *= static_cast<double>(w.size);
    }
    Cost sub = reducer(0);
    double count = (window_elems - 1) * out_elems;
    cost.flops = sub.flops * count;
    cost.transcendentals = sub.transcendentals * count;
  } else if (op == "select-and-scatter") {
    const Shape* source = OperandShape(c, ins, 1);
    double src = source ? static_cast<double>(source->ElementCount()) : 0;
    double window_elems = 1;
    if (ins.attrs.count("window")) {
      for (const auto& w : ParseWindow(ins.attrs.at("window"))) window_elems *= static_cast<double>(w.size);
    }
    Cost sel = CalledCost(ins, 0), sc = CalledCost(ins, 1);
    cost.flops = sel.flops * src * (window_elems - 1) + sc.flops * src;
    cost.transcendentals = sel.transcendentals * src * (window_elems - 1) + sc.transcendentals * src;
  } else if (op == "map") {
    Cost sub = reducer(0);
    cost.flops = sub.flops * out_elems;
    cost.transcendentals = sub.transcendentals * out_elems;
  } else if (op == "scatter") {
    const Shape* updates = OperandShape(c, ins, ins.operands.size() >= 3 ? ins.operands.size() - 1 : 2);
    double n = updates ? static_cast<double>(updates->ElementCount()) : 0;
    Cost sub = reducer(0);
    cost.flops = sub.flops * n;
    cost.transcendentals = sub.transcendentals * n;
  } else if (op == "sort") {
    const Shape* in = OperandShape(c, ins, 0);
    double n = in ? static_cast<double>(in->ElementCount()) : 0;
    cost.flops = n > 1 ? n * std::ceil(std::log2(n)) : 0;
  } else if (op == "all-reduce" || op == "all-reduce-start") {
    cost.flops = static_cast<double>(ins.shape.ElementCount());
  } else if (op == "fusion") {
    Cost sub = CalledCost(ins, 0);
    cost.flops = sub.flops;
    cost.transcendentals = sub.transcendentals;
    // bytes: the fusion's external operands and output only (the default above).
  } else if (op == "call" || op == "async-start") {
    cost = CalledCost(ins, 0);
  } else if (op == "while") {
    // Trip counts are not known statically: one iteration of body and condition, as XLA does.
    cost = CalledCost(ins, 0);
    cost += CalledCost(ins, 1);
  } else if (op == "conditional") {
    Cost best;
    for (size_t k = 0; k < ins.called.size(); ++k) {
      Cost b = CalledCost(ins, k);
      best.flops = std::max(best.flops, b.flops);
      best.transcendentals = std::max(best.transcendentals, b.transcendentals);
      best.bytes_accessed = std::max(best.bytes_accessed, b.bytes_accessed);
    }
    cost = best;
  }

  // Byte-count exceptions of HloCostAnalysis.
  if (op == "parameter" || op == "constant" || op == "get-tuple-element" || op == "bitcast" ||
      op == "after-all" || op == "add-dependency" || op == "domain" || op == "opt-barrier") {
    cost.bytes_accessed = 0;
  } else if (op == "tuple") {
    cost.bytes_accessed = 8.0 * static_cast<double>(ins.operands.size());  // the index table
  } else if (op == "slice") {
    cost.bytes_accessed = 2 * out_bytes;
  } else if (op == "dynamic-slice") {
    double idx = 0;
    for (size_t i = 1; i < ins.operands.size(); ++i) {
      if (const Shape* s = OperandShape(c, ins, i)) idx += static_cast<double>(s->ByteSize());
    }
    cost.bytes_accessed = 2 * out_bytes + idx;
  } else if (op == "dynamic-update-slice") {
    const Shape* upd = OperandShape(c, ins, 1);
    double idx = 0;
    for (size_t i = 2; i < ins.operands.size(); ++i) {
      if (const Shape* s = OperandShape(c, ins, i)) idx += static_cast<double>(s->ByteSize());
    }
    cost.bytes_accessed = 2 * (upd ? static_cast<double>(upd->ByteSize()) : 0) + idx;
  } else if (op.size() > 5 && op.compare(op.size() - 5, 5, "-done") == 0) {
    cost.bytes_accessed = 0;  // the *-start half carries the pair's traffic
  } else if (op == "async-update") {
    cost.bytes_accessed = 0;
  }
  return cost;
}

}  // namespace falcon::plugins::hlo
