#include "plugins/hlo_stats/hlo_stats.h"

#include <map>

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

Json Number(double v) {
  // FLOP and byte counts are integers in practice; print them without a fraction when they fit.
  if (v >= 0 && v < 9.0e15 && v == static_cast<double>(static_cast<int64_t>(v))) {
    return static_cast<int64_t>(v);
  }
  return v;
}

void WriteModule(const hlo::Module& m, const std::string& stage, JsonlWriter& out) {
  hlo::CostModel model(m);
  std::map<std::string, int64_t> opcodes, fusions, collectives;
  int64_t instructions = 0, fused_computations = 0;
  for (size_t c = 0; c < m.computations.size(); ++c) {
    if (model.IsFusionBody(static_cast<int>(c))) ++fused_computations;
    for (const auto& ins : m.computations[c].instructions) {
      ++instructions;
      ++opcodes[ins.opcode];
      if (ins.opcode == "fusion") {
        auto k = ins.attrs.find("kind");
        ++fusions[k == ins.attrs.end() ? "unknown" : k->second];
      }
      std::string kind = hlo::CollectiveKind(ins.opcode);
      if (kind.empty() && ins.opcode == "async-start" && !ins.called.empty()) {
        // Generic async wrapping a collective: classify by the wrapped computation's root.
        int callee = model.FindComputation(ins.called[0]);
        if (callee >= 0) {
          const auto& cc = m.computations[callee];
          int r = cc.RootIndex();
          if (r >= 0) kind = hlo::CollectiveKind(cc.instructions[r].opcode);
        }
      }
      if (!kind.empty()) ++collectives[kind];
    }
  }
  int entry = m.EntryIndex();
  const auto& ec = m.computations[entry];
  int64_t param_bytes = 0;
  for (const auto& ins : ec.instructions) {
    if (ins.opcode == "parameter") param_bytes += ins.shape.ByteSize();
  }
  int root = ec.RootIndex();
  int64_t output_bytes = root >= 0 ? ec.instructions[root].shape.ByteSize() : 0;
  hlo::Cost total = model.ModuleCost();

  Json r = out.Record("module");
  r["module"] = m.name;
  r["line"] = m.line;
  if (!stage.empty()) r["stage"] = stage;
  r["entry_computation"] = ec.name;
  r["computations"] = m.computations.size();
  r["fused_computations"] = fused_computations;
  r["instructions"] = instructions;
  r["entry_instructions"] = ec.instructions.size();
  r["opcode_counts"] = opcodes;
  r["fusions_by_kind"] = fusions;
  r["collectives_by_kind"] = collectives;
  r["parameter_bytes"] = param_bytes;
  r["output_bytes"] = output_bytes;
  r["flops"] = Number(total.flops);
  r["transcendentals"] = Number(total.transcendentals);
  r["bytes_accessed"] = Number(total.bytes_accessed);
  out.Write(r);

  for (size_t c = 0; c < m.computations.size(); ++c) {
    const auto& comp = m.computations[c];
    bool fused = model.IsFusionBody(static_cast<int>(c));
    for (size_t i = 0; i < comp.instructions.size(); ++i) {
      const auto& ins = comp.instructions[i];
      hlo::Cost cost = model.InstructionCost(static_cast<int>(c), static_cast<int>(i));
      Json ir = out.Record("instruction");
      ir["module"] = m.name;
      ir["computation"] = comp.name;
      ir["name"] = ins.name;
      ir["opcode"] = ins.opcode;
      ir["shape"] = ins.shape.ToString();
      ir["dtype"] = ins.shape.is_tuple ? "tuple" : ins.shape.dtype;
      ir["elements"] = ins.shape.ElementCount();
      ir["fused"] = fused;
      ir["is_root"] = static_cast<int>(i) == comp.RootIndex();
      ir["line"] = ins.line;
      ir["operands"] = ins.operands;
      auto k = ins.attrs.find("kind");
      if (ins.opcode == "fusion" && k != ins.attrs.end()) ir["fusion_kind"] = k->second;
      if (!ins.called.empty()) ir["called_computations"] = ins.called;
      ir["flops"] = Number(cost.flops);
      ir["transcendentals"] = Number(cost.transcendentals);
      ir["bytes_accessed"] = Number(cost.bytes_accessed);
      if (!ins.op_name.empty()) ir["op_name"] = ins.op_name;
      if (!ins.op_type.empty()) ir["op_type"] = ins.op_type;
      if (!ins.source_file.empty()) {
        ir["source_file"] = ins.source_file;
        ir["source_line"] = ins.source_line;
      }
      out.Write(ir);
    }
  }
}

}  // namespace

namespace {

// Collects per-module outcomes across the chunks of one file.
struct FileState {
  std::string stage;
  int ok = 0, seen = 0;
  absl::Status first_error;
};

void AnalyzeChunk(std::string_view text, int first_line, FileState& st, JsonlWriter& out) {
  hlo::ForEachHloModule(
      text,
      [&](absl::StatusOr<hlo::Module> m) {
        ++st.seen;
        if (!m.ok()) {
          if (st.first_error.ok()) st.first_error = m.status();
          Json e = out.Record("error");
          if (auto line = ErrorLine(m.status())) e["line"] = *line;
          e["code"] = absl::StatusCodeToString(m.status().code());
          e["message"] = std::string(m.status().message());
          out.Write(e);
          return;
        }
        WriteModule(*m, st.stage, out);
        ++st.ok;
      },
      first_line);
}

absl::Status Finish(const FileState& st) {
  if (st.seen == 0) return InputError("no HLO module found (empty file?)", 1, std::nullopt);
  if (st.ok == 0) {
    // The per-module error records are already written; signal failure without a duplicate record.
    return AlreadyReported(absl::Status(st.first_error.code(),
                                        absl::StrCat(st.first_error.message(), " (no module analysed)")));
  }
  return absl::OkStatus();
}

bool StartsModule(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return line.substr(i, 9) == "HloModule";
}

}  // namespace

absl::Status AnalyzeHloText(std::string_view text, const std::string& filename, JsonlWriter& out) {
  FileState st;
  st.stage = StageOf(filename);
  AnalyzeChunk(text, 1, st, out);
  return Finish(st);
}

absl::Status AnalyzeHloFile(const std::string& path, JsonlWriter& out) {
  auto in = InputFile::Open(path);
  if (!in.ok()) return in.status();
  FileState st;
  st.stage = StageOf(path);
  std::string chunk;        // text of the current module (from its HloModule line)
  int chunk_line = 1;       // file line of chunk[0]
  int line_no = 0;          // lines seen so far
  std::string pending;      // an incomplete last line of the read buffer
  std::vector<char> buf(1 << 20);
  auto take_line = [&](std::string_view line) {
    ++line_no;
    if (StartsModule(line) && !chunk.empty()) {
      AnalyzeChunk(chunk, chunk_line, st, out);
      chunk.clear();
      chunk_line = line_no;
    }
    chunk.append(line);
    chunk.push_back('\n');
  };
  for (;;) {
    auto n = (*in)->Read(buf.data(), buf.size());
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    std::string_view data(buf.data(), *n);
    size_t pos = 0;
    for (size_t nl; (nl = data.find('\n', pos)) != std::string_view::npos; pos = nl + 1) {
      if (!pending.empty()) {
        pending.append(data.substr(pos, nl - pos));
        take_line(pending);
        pending.clear();
      } else {
        take_line(data.substr(pos, nl - pos));
      }
    }
    pending.append(data.substr(pos));
  }
  if (!pending.empty()) take_line(pending);
  if (!chunk.empty()) AnalyzeChunk(chunk, chunk_line, st, out);
  return Finish(st);
}

}  // namespace falcon::plugins
