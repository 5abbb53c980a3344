#include "plugins/hlo_stats/hlo_stats.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/common/plugin_io.h"
#include "plugins/hlo_stats/hlo_cost.h"
#include "plugins/hlo_stats/hlo_parser.h"

namespace falcon::plugins {

namespace {

std::string StageOf(const std::string& filename) {
  if (filename.find("before_optimizations") != std::string::npos) return "before_optimizations";
  if (filename.find("after_optimizations") != std::string::npos) return "after_optimizations";
  return "";
}

// FLOP and byte counts are integers in practice; print them without a fraction when they fit.
void AppendNumber(std::string& out, double v) {
  if (v >= 0 && v < 9.0e15 && v == static_cast<double>(static_cast<int64_t>(v))) {
    AppendJsonInt(out, static_cast<int64_t>(v));
  } else {
    AppendJsonDouble(out, v);
  }
}

// "key": with the comma of a preceding field.
void Key(std::string& out, std::string_view key) {
  out.push_back(',');
  out.push_back('"');
  out.append(key);
  out.append("\":");
}

// A JSON object of counts, keys in byte order (as a std::map<std::string, ...> would give).
void AppendCounts(std::string& out, std::vector<std::pair<std::string_view, int64_t>>& counts) {
  std::sort(counts.begin(), counts.end());
  out.push_back('{');
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i) out.push_back(',');
    AppendJsonString(out, counts[i].first);
    out.push_back(':');
    AppendJsonInt(out, counts[i].second);
  }
  out.push_back('}');
}

void Increment(std::vector<std::pair<std::string_view, int64_t>>& counts, std::string_view key) {
  for (auto& [k, n] : counts) {
    if (k == key) {
      ++n;
      return;
    }
  }
  counts.emplace_back(key, 1);
}

// Writes the records of the modules of one file. The records are serialized straight into a buffer (no
// JSON document per record: hlo-stats writes one record per instruction, about 3x the HLO text).
class HloAnalyzer {
 public:
  HloAnalyzer(JsonlWriter& out, const std::string& filename) : out_(out), stage_(StageOf(filename)) {
    AppendJsonString(source_, out.source());
    buf_.reserve(kFlushBytes + (64 << 10));
  }
  ~HloAnalyzer() { Flush(); }
  HloAnalyzer(const HloAnalyzer&) = delete;
  HloAnalyzer& operator=(const HloAnalyzer&) = delete;

  // Analyses the modules of text[0, size) (modified in place); text[0] is on line `first_line`.
  // Returns the number of newlines in the text.
  int AnalyzeChunk(char* text, size_t size, int first_line) {
    return hlo::ForEachHloModule(
        text, size, module_,
        [&](const absl::Status& s, const hlo::Module& m) {
          ++seen_;
          if (!s.ok()) {
            if (first_error_.ok()) first_error_ = s;
            Flush();
            Json e = out_.Record("error");
            if (auto line = ErrorLine(s)) e["line"] = *line;
            e["code"] = absl::StatusCodeToString(s.code());
            e["message"] = std::string(s.message());
            out_.Write(e);
            return;
          }
          WriteModule(m);
          ++ok_;
          if (buf_.size() >= kFlushBytes) Flush();
        },
        first_line);
  }

  absl::Status Finish() {
    Flush();
    if (seen_ == 0) return InputError("no HLO module found (empty file?)", 1, std::nullopt);
    if (ok_ == 0) {
      // The per-module error records are already written; signal failure without a duplicate record.
      return AlreadyReported(absl::Status(first_error_.code(),
                                          absl::StrCat(first_error_.message(), " (no module analysed)")));
    }
    return absl::OkStatus();
  }

  void Flush() {
    if (buf_.empty()) return;
    out_.WriteRaw(buf_, pending_);
    buf_.clear();
    pending_ = 0;
  }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;

  void WriteModule(const hlo::Module& m) {
    model_.Reset(m);
    const auto& comps = m.computations;
    const auto& instrs = m.instructions;
    op_counts_.assign(model_.NumOpIds(), 0);
    fusions_.clear();
    collectives_.clear();
    int64_t fused_computations = 0;
    for (size_t c = 0; c < comps.size(); ++c) {
      if (model_.IsFusionBody(static_cast<int>(c))) ++fused_computations;
    }
    for (uint32_t g = 0; g < instrs.size(); ++g) {
      const hlo::Instruction& ins = instrs[g];
      const hlo::OpInfo& op = model_.Op(g);
      ++op_counts_[model_.OpId(g)];
      if (op.is_fusion) Increment(fusions_, ins.Has(hlo::kAttrKind) ? ins.attrs[hlo::kAttrKind] : "unknown");
      std::string_view kind = op.collective;
      if (kind.empty() && op.is_async_start && ins.called_count > 0) {
        // Generic async wrapping a collective: classify by the wrapped computation's root.
        int callee = model_.FindComputation(m.names[ins.called_begin]);
        if (callee >= 0) {
          const auto& cc = comps[callee];
          if (cc.root >= 0) kind = hlo::CollectiveKind(instrs[cc.begin + cc.root].opcode);
        }
      }
      if (!kind.empty()) Increment(collectives_, kind);
    }
    const int entry = m.EntryIndex();
    const hlo::Computation& ec = comps[entry];
    int64_t param_bytes = 0;
    for (uint32_t g = ec.begin; g < ec.begin + ec.count; ++g) {
      if (model_.Op(g).is_parameter) param_bytes += m.shape(instrs[g].shape).bytes;
    }
    int64_t output_bytes = ec.root >= 0 ? m.shape(instrs[ec.begin + ec.root].shape).bytes : 0;
    hlo::Cost total = model_.ModuleCost();

    std::string& o = buf_;
    o.append("{\"record_type\":\"module\",\"source\":");
    o.append(source_);
    Key(o, "module");
    AppendJsonString(o, m.name);
    Key(o, "line");
    AppendJsonInt(o, m.line);
    if (!stage_.empty()) {
      Key(o, "stage");
      AppendJsonString(o, stage_);
    }
    Key(o, "entry_computation");
    AppendJsonString(o, ec.name);
    Key(o, "computations");
    AppendJsonUInt(o, comps.size());
    Key(o, "fused_computations");
    AppendJsonInt(o, fused_computations);
    Key(o, "instructions");
    AppendJsonInt(o, static_cast<int64_t>(instrs.size()));
    Key(o, "entry_instructions");
    AppendJsonUInt(o, ec.count);
    Key(o, "opcode_counts");
    opcodes_.clear();
    for (uint32_t id = 0; id < op_counts_.size(); ++id) {
      if (op_counts_[id] > 0) opcodes_.emplace_back(model_.OpById(id).name, op_counts_[id]);
    }
    AppendCounts(o, opcodes_);
    Key(o, "fusions_by_kind");
    AppendCounts(o, fusions_);
    Key(o, "collectives_by_kind");
    AppendCounts(o, collectives_);
    Key(o, "parameter_bytes");
    AppendJsonInt(o, param_bytes);
    Key(o, "output_bytes");
    AppendJsonInt(o, output_bytes);
    Key(o, "flops");
    AppendNumber(o, total.flops);
    Key(o, "transcendentals");
    AppendNumber(o, total.transcendentals);
    Key(o, "bytes_accessed");
    AppendNumber(o, total.bytes_accessed);
    o.append("}\n");
    ++pending_;

    std::string module_prefix = "{\"record_type\":\"instruction\",\"source\":";
    module_prefix.append(source_);
    Key(module_prefix, "module");
    AppendJsonString(module_prefix, m.name);
    Key(module_prefix, "computation");
    for (size_t c = 0; c < comps.size(); ++c) {
      const hlo::Computation& comp = comps[c];
      const bool fused = model_.IsFusionBody(static_cast<int>(c));
      prefix_ = module_prefix;
      AppendJsonString(prefix_, comp.name);
      Key(prefix_, "name");
      for (uint32_t i = 0; i < comp.count; ++i) {
        const uint32_t g = comp.begin + i;
        const hlo::Instruction& ins = instrs[g];
        const hlo::ShapeNode& shape = m.shape(ins.shape);
        hlo::Cost cost = model_.InstructionCost(static_cast<int>(c), g);
        o.append(prefix_);
        AppendJsonString(o, ins.name);
        Key(o, "opcode");
        AppendJsonString(o, ins.opcode);
        Key(o, "shape");
        o.push_back('"');  // dtypes are alphanumeric: nothing to escape
        m.AppendShapeString(ins.shape, o);
        o.push_back('"');
        Key(o, "dtype");
        if (shape.is_tuple) {
          o.append("\"tuple\"");
        } else {
          o.push_back('"');
          o.append(shape.dtype);
          o.push_back('"');
        }
        Key(o, "elements");
        AppendJsonInt(o, shape.elements);
        Key(o, "fused");
        o.append(fused ? "true" : "false");
        Key(o, "is_root");
        o.append(static_cast<int>(i) == comp.root ? "true" : "false");
        Key(o, "line");
        AppendJsonInt(o, ins.line);
        Key(o, "operands");
        o.push_back('[');
        for (uint32_t k = 0; k < ins.operands_count; ++k) {
          if (k) o.push_back(',');
          AppendJsonString(o, m.names[ins.operands_begin + k]);
        }
        o.push_back(']');
        if (model_.Op(g).is_fusion && ins.Has(hlo::kAttrKind)) {
          Key(o, "fusion_kind");
          AppendJsonString(o, ins.attrs[hlo::kAttrKind]);
        }
        if (ins.called_count > 0) {
          Key(o, "called_computations");
          o.push_back('[');
          for (uint32_t k = 0; k < ins.called_count; ++k) {
            if (k) o.push_back(',');
            AppendJsonString(o, m.names[ins.called_begin + k]);
          }
          o.push_back(']');
        }
        Key(o, "flops");
        AppendNumber(o, cost.flops);
        Key(o, "transcendentals");
        AppendNumber(o, cost.transcendentals);
        Key(o, "bytes_accessed");
        AppendNumber(o, cost.bytes_accessed);
        if (!ins.op_name.empty()) {
          Key(o, "op_name");
          AppendJsonString(o, ins.op_name);
        }
        if (!ins.op_type.empty()) {
          Key(o, "op_type");
          AppendJsonString(o, ins.op_type);
        }
        if (!ins.source_file.empty()) {
          Key(o, "source_file");
          AppendJsonString(o, ins.source_file);
          Key(o, "source_line");
          AppendJsonInt(o, ins.source_line);
        }
        o.append("}\n");
        ++pending_;
      }
    }
  }

  JsonlWriter& out_;
  std::string stage_;
  std::string source_;  // the source file as a JSON string
  std::string buf_;     // serialized records not yet written
  uint64_t pending_ = 0;
  std::string prefix_;
  hlo::Module module_;  // reused from module to module
  hlo::CostModel model_;
  std::vector<int64_t> op_counts_;
  std::vector<std::pair<std::string_view, int64_t>> opcodes_, fusions_, collectives_;
  int ok_ = 0, seen_ = 0;
  absl::Status first_error_;
};

}  // namespace

absl::Status AnalyzeHloText(std::string_view text, const std::string& filename, JsonlWriter& out) {
  HloAnalyzer a(out, filename);
  std::string copy(text);
  a.AnalyzeChunk(copy.data(), copy.size(), 1);
  return a.Finish();
}

absl::Status AnalyzeHloFile(const std::string& path, JsonlWriter& out) {
  auto in = InputFile::Open(path);
  if (!in.ok()) return in.status();
  HloAnalyzer a(out, path);
  // The file is cut into chunks at the lines that start a module ("HloModule" after blanks), each chunk
  // analysed once complete; memory holds the current module's text and a read block.
  constexpr size_t kBlock = 1 << 20;
  std::string buf;
  size_t start = 0;     // the current chunk: buf[start, ...)
  size_t scan = 0;      // module starts are searched from here
  int chunk_line = 1;   // file line of buf[start]
  auto cut = [&](size_t limit) {
    // Complete lines up to `limit` (a line start) are searched.
    std::string_view all(buf.data(), limit);
    for (size_t h = all.find("HloModule", scan); h != std::string_view::npos; h = all.find("HloModule", h + 9)) {
      size_t j = h;
      while (j > 0 && (all[j - 1] == ' ' || all[j - 1] == '\t')) --j;
      if (j != 0 && all[j - 1] != '\n') continue;
      if (j > start) {
        chunk_line += a.AnalyzeChunk(buf.data() + start, j - start, chunk_line);
        start = j;
      }
    }
    scan = limit;
  };
  for (;;) {
    size_t old = buf.size();
    buf.resize(old + kBlock);
    auto n = (*in)->Read(buf.data() + old, kBlock);
    if (!n.ok()) {
      a.Flush();
      return n.status();
    }
    buf.resize(old + *n);
    if (*n == 0) break;
    size_t last_nl = buf.rfind('\n');
    if (last_nl != std::string::npos && last_nl + 1 > scan) cut(last_nl + 1);
    if (start > 0 && start >= buf.size() / 2) {
      buf.erase(0, start);
      scan -= start;
      start = 0;
    }
  }
  if (!buf.empty() && buf.back() != '\n') buf.push_back('\n');  // a last line without its newline
  cut(buf.size());
  if (buf.size() > start) {
    a.AnalyzeChunk(buf.data() + start, buf.size() - start, chunk_line);
  }
  return a.Finish();
}

}  // namespace falcon::plugins
