// Over 600 lines on purpose: the multi-threaded chunking of a large file and the per-module writer share
// their buffers and ordering rules; split apart, the byte-identity argument would span two files.
#include "plugins/hlo_stats/hlo_stats.h"

#include "plugins/common/content.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "plugins/common/plugin_io.h"
#include "plugins/common/plugin_main.h"
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

// Raw writers for the per-instruction records: the caller has reserved room for what they write.
template <size_t N>
inline char* PutLit(char* p, const char (&lit)[N]) {
  std::memcpy(p, lit, N - 1);
  return p + N - 1;
}
inline char* Put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
inline char* PutInt(char* p, int64_t v) {
  if (v >= 0 && v < 10) {  // most flops/transcendentals/bytes of a record are 0
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  return std::to_chars(p, p + 24, v).ptr;
}

struct PlainTable {
  bool plain[256];
  constexpr PlainTable() : plain() {
    for (int c = 0x20; c < 0x7f; ++c) plain[c] = c != '"' && c != '\\';
  }
};
constexpr PlainTable kPlain;

// A JSON string as AppendJsonString writes it; room for 6 * s.size() + 2 bytes.
inline char* PutString(char* p, std::string_view whole) {
  char* start = p;
  std::string_view s = whole;
  *p++ = '"';
#if defined(__SSE2__)
  {
    const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f),
                  quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    while (s.size() >= 16) {
      __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data()));
      // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches them.
      __m128i bad =
          _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(x, space), _mm_cmpeq_epi8(x, del)),
                       _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
      if (_mm_movemask_epi8(bad) != 0) break;  // the scalar loop below decides
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), x);
      p += 16;
      s.remove_prefix(16);
    }
  }
#endif
  for (char c : s) {
    if (!kPlain.plain[static_cast<unsigned char>(c)]) {
      std::string slow;
      AppendJsonString(slow, whole);
      return Put(start, slow);
    }
    *p++ = c;
  }
  *p++ = '"';
  return p;
}

// A name the parser took as an identifier or opcode (letters, digits, _ . - $): nothing to escape.
inline char* PutIdentifier(char* p, std::string_view s) {
  *p++ = '"';
  p = Put(p, s);
  *p++ = '"';
  return p;
}

inline char* PutNumber(char* p, double v) {
  if (v >= 0 && v < 9.0e15 && v == static_cast<double>(static_cast<int64_t>(v))) {
    return PutInt(p, static_cast<int64_t>(v));
  }
  std::string d;
  AppendJsonDouble(d, v);  // at most 25 characters
  return Put(p, d);
}

// The modules of one piece of a file (whole modules, cut at "HloModule" lines) and, once analysed,
// their records, serialized.
struct Chunk {
  std::string text;  // modified in place by the parse
  int first_line = 1;
  std::vector<char> out;  // out[0, len): the records
  size_t len = 0;
  uint64_t records = 0;
  int seen = 0, ok = 0;      // modules found / analysed
  absl::Status first_error;  // of the first module that failed to parse
  bool done = false;         // analysed (set under FileAnalyzer::mu_)
};

// Turns the modules of a chunk into records. The records are serialized straight into a buffer (no
// JSON document per record: hlo-stats writes one record per instruction, about 3x the HLO text).
// One per thread: it keeps the parse and cost-model arrays from module to module.
class ModuleWriter {
 public:
  ModuleWriter(const JsonlWriter& out, const std::string& source_json, const std::string& stage)
      : out_(out), source_(source_json), stage_(stage) {}
  ModuleWriter(const ModuleWriter&) = delete;
  ModuleWriter& operator=(const ModuleWriter&) = delete;

  void Analyze(Chunk& c) {
    buf_.swap(c.out);
    len_ = 0;
    // The records are about 3.3x the text (one per instruction): room for 4x, so that the buffer
    // grows at most once or twice (buffers are reused from chunk to chunk).
    if (buf_.size() < 4 * c.text.size()) buf_.resize(4 * c.text.size());
    hlo::ForEachHloModule(
        c.text.data(), c.text.size(), module_,
        [&](const absl::Status& s, const hlo::Module& m) {
          ++c.seen;
          if (!s.ok()) {
            if (c.first_error.ok()) c.first_error = s;
            Json e = out_.Record("error");
            if (auto line = ErrorLine(s)) e["line"] = *line;
            e["code"] = absl::StatusCodeToString(s.code());
            e["message"] = std::string(s.message());
            std::string line = JsonlWriter::Serialize(e);
            Commit(Put(Reserve(line.size()), line));
            ++c.records;
            return;
          }
          c.records += WriteModule(m);
          ++c.ok;
        },
        c.first_line);
    c.out.swap(buf_);
    c.len = len_;
  }

 private:
  // Room for n more bytes at the end of the buffer.
  char* Reserve(size_t n) {
    if (buf_.size() - len_ < n) buf_.resize(len_ + n + (64 << 10));
    return buf_.data() + len_;
  }
  void Commit(const char* end) { len_ = static_cast<size_t>(end - buf_.data()); }

  // Returns the number of records written.
  uint64_t WriteModule(const hlo::Module& m) {
    uint64_t records = 0;
    model_.Reset(m);
    const auto& comps = m.computations;
    const auto& instrs = m.instructions;
    op_counts_.assign(model_.NumOpIds(), 0);
    fusions_.clear();
    collectives_.clear();
    unmodelled_.clear();
    int64_t unknown_trip_counts = 0;
    int64_t fused_computations = 0;
    for (size_t c = 0; c < comps.size(); ++c) {
      if (model_.IsFusionBody(static_cast<int>(c))) ++fused_computations;
    }
    for (uint32_t g = 0; g < instrs.size(); ++g) {
      const hlo::Instruction& ins = instrs[g];
      const hlo::OpInfo& op = model_.Op(g);
      ++op_counts_[model_.OpId(g)];
      if (op.is_fusion)
        Increment(fusions_, ins.Has(hlo::kAttrKind) ? ins.attr(hlo::kAttrKind) : "unknown");
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
      if (op.flops == hlo::OpInfo::Flops::kCustomCall) {
        std::string_view target = hlo::CustomCallTarget(ins);
        if (hlo::ClassifyCustomCall(target) == hlo::CustomCallKind::kUnmodelled) {
          Increment(unmodelled_, target.empty() ? std::string_view("unknown") : target);
        }
      } else if (op.flops == hlo::OpInfo::Flops::kWhile && hlo::KnownTripCount(ins) < 0) {
        ++unknown_trip_counts;
      }
    }
    const int entry = m.EntryIndex();
    const hlo::Computation& ec = comps[entry];
    int64_t param_bytes = 0;
    for (uint32_t g = ec.begin; g < ec.begin + ec.count; ++g) {
      if (model_.Op(g).is_parameter) param_bytes += m.shape(instrs[g].shape).bytes;
    }
    int64_t output_bytes = ec.root >= 0 ? m.shape(instrs[ec.begin + ec.root].shape).bytes : 0;
    hlo::Cost total = model_.ModuleCost();

    std::string& o = module_record_;
    o.assign("{\"record_type\":\"module\",\"source\":");
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
    Key(o, "unmodelled_custom_calls");
    AppendCounts(o, unmodelled_);
    if (unknown_trip_counts > 0) {
      Key(o, "while_loops_unknown_trip_count");
      AppendJsonInt(o, unknown_trip_counts);
    }
    o.append("}\n");
    Commit(Put(Reserve(o.size()), o));
    ++records;

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
        const bool fusion_kind = model_.Op(g).is_fusion && ins.Has(hlo::kAttrKind);
        const hlo::OpInfo::Flops kind = model_.Op(g).flops;
        const std::string_view target =
            kind == hlo::OpInfo::Flops::kCustomCall ? hlo::CustomCallTarget(ins) : std::string_view();
        size_t strings = ins.name.size() + ins.opcode.size() + ins.op_name.size() +
                         ins.op_type.size() + ins.source_file.size() + target.size() +
                         (fusion_kind ? ins.attr(hlo::kAttrKind).size() : 0);
        size_t names = 0;  // each a quoted string and a comma
        for (uint32_t k = 0; k < ins.operands_count; ++k)
          names += 6 * m.names[ins.operands_begin + k].size() + 3;
        for (uint32_t k = 0; k < ins.called_count; ++k)
          names += 6 * m.names[ins.called_begin + k].size() + 3;
        // 512: the field names, quotes, and numbers (at most 25 characters each).
        char* p =
            Reserve(512 + prefix_.size() + 6 * strings + names + m.ShapeStringBound(ins.shape));
        p = Put(p, prefix_);
        p = PutIdentifier(p, ins.name);
        p = PutLit(p, ",\"opcode\":");
        p = PutIdentifier(p, ins.opcode);
        p = PutLit(p, ",\"shape\":\"");  // dtypes are alphanumeric: nothing to escape
        p = m.WriteShapeString(ins.shape, p);
        p = PutLit(p, "\",\"dtype\":\"");
        p = shape.is_tuple ? PutLit(p, "tuple") : Put(p, shape.dtype);
        p = PutLit(p, "\",\"elements\":");
        p = PutInt(p, shape.elements);
        p = fused ? PutLit(p, ",\"fused\":true") : PutLit(p, ",\"fused\":false");
        p = static_cast<int>(i) == comp.root ? PutLit(p, ",\"is_root\":true")
                                             : PutLit(p, ",\"is_root\":false");
        p = PutLit(p, ",\"line\":");
        p = PutInt(p, ins.line);
        p = PutLit(p, ",\"operands\":[");
        for (uint32_t k = 0; k < ins.operands_count; ++k) {
          if (k) *p++ = ',';
          p = PutString(p, m.names[ins.operands_begin + k]);
        }
        *p++ = ']';
        if (fusion_kind) {
          p = PutLit(p, ",\"fusion_kind\":");
          p = PutString(p, ins.attr(hlo::kAttrKind));
        }
        if (ins.called_count > 0) {
          p = PutLit(p, ",\"called_computations\":[");
          for (uint32_t k = 0; k < ins.called_count; ++k) {
            if (k) *p++ = ',';
            p = PutString(p, m.names[ins.called_begin + k]);
          }
          *p++ = ']';
        }
        p = PutLit(p, ",\"flops\":");
        p = PutNumber(p, cost.flops);
        p = PutLit(p, ",\"transcendentals\":");
        p = PutNumber(p, cost.transcendentals);
        p = PutLit(p, ",\"bytes_accessed\":");
        p = PutNumber(p, cost.bytes_accessed);
        if (kind == hlo::OpInfo::Flops::kCustomCall) {
          p = PutLit(p, ",\"custom_call_target\":");
          p = PutString(p, target);
          switch (hlo::ClassifyCustomCall(target)) {
            case hlo::CustomCallKind::kGemm:
              p = PutLit(p, ",\"cost_model\":\"dot\"");
              break;
            case hlo::CustomCallKind::kConvolution:
              p = PutLit(p, ",\"cost_model\":\"convolution\"");
              break;
            case hlo::CustomCallKind::kUnmodelled:
              p = PutLit(p, ",\"cost_model\":\"unmodelled\"");
              break;
          }
        } else if (kind == hlo::OpInfo::Flops::kWhile) {
          // XLA's figures are one iteration; with a known trip count, also the whole loop's.
          const int64_t trips = hlo::KnownTripCount(ins);
          if (trips >= 0) {
            p = PutLit(p, ",\"trip_count\":");
            p = PutInt(p, trips);
            p = PutLit(p, ",\"flops_all_iterations\":");
            p = PutNumber(p, cost.flops * static_cast<double>(trips));
            p = PutLit(p, ",\"bytes_accessed_all_iterations\":");
            p = PutNumber(p, cost.bytes_accessed * static_cast<double>(trips));
          } else {
            p = PutLit(p, ",\"trip_count\":\"unknown trip count\"");
          }
        }
        if (!ins.op_name.empty()) {
          p = PutLit(p, ",\"op_name\":");
          p = PutString(p, ins.op_name);
        }
        if (!ins.op_type.empty()) {
          p = PutLit(p, ",\"op_type\":");
          p = PutString(p, ins.op_type);
        }
        if (!ins.source_file.empty()) {
          p = PutLit(p, ",\"source_file\":");
          p = PutString(p, ins.source_file);
          p = PutLit(p, ",\"source_line\":");
          p = PutInt(p, ins.source_line);
        }
        p = PutLit(p, "}\n");
        Commit(p);
        ++records;
      }
    }
    return records;
  }

  const JsonlWriter& out_;
  const std::string& source_;  // the source file as a JSON string
  const std::string& stage_;
  std::vector<char> buf_;  // the current chunk's records: buf_[0, len_)
  size_t len_ = 0;
  std::string prefix_;
  std::string module_record_;
  hlo::Module module_;  // reused from module to module
  hlo::CostModel model_;
  std::vector<int64_t> op_counts_;
  std::vector<std::pair<std::string_view, int64_t>> opcodes_, fusions_, collectives_, unmodelled_;
};

// Analyses the chunks of one file and writes their records in file order. The first chunk is
// analysed on the calling thread when it is the only one (most dump files hold one module); from
// the second on, PluginThreads() worker threads analyse chunks while the caller
// reads the next ones and writes finished ones in order. At most 2 * threads + 1 chunks (their
// text and records) are held at once. FALCON_PLUGIN_THREADS=N sets the number of threads.
class FileAnalyzer {
 public:
  static constexpr size_t kChunkBytes =
      512 << 10;  // chunks are cut at the first module start past this

  FileAnalyzer(JsonlWriter& out, const std::string& filename)
      : out_(out), stage_(StageOf(filename)) {
    source_ = out.SourceFieldsJson();
    threads_ = PluginThreads();
    max_in_flight_ = 2 * static_cast<size_t>(threads_) + 1;
  }
  ~FileAnalyzer() { StopWorkers(); }
  FileAnalyzer(const FileAnalyzer&) = delete;
  FileAnalyzer& operator=(const FileAnalyzer&) = delete;

  // Queues the modules of `text` (which starts on line `first_line`) for analysis; writes the
  // records of chunks already analysed, waiting when too many are in flight.
  void Submit(std::string text, int first_line) {
    auto c = std::make_unique<Chunk>();
    c->text = std::move(text);
    c->first_line = first_line;
    if (!free_.empty()) {
      c->out.swap(free_.back());
      free_.pop_back();
    }
    Chunk* raw = c.get();
    std::unique_lock<std::mutex> lock(mu_);
    chunks_.push_back(std::move(c));
    if (threads_ == 1) {
      lock.unlock();
      Inline().Analyze(*raw);
      MarkDone(*raw);
      WriteDone();
      return;
    }
    if (chunks_.size() == 1 && workers_.empty()) return;  // maybe the only chunk: wait and see
    if (workers_.empty()) {
      for (auto& pending : chunks_) todo_.push_back(pending.get());
      StartWorkers();
    } else {
      todo_.push_back(raw);
    }
    work_cv_.notify_all();
    lock.unlock();
    WriteDone();
    lock.lock();
    while (chunks_.size() >= max_in_flight_) {
      done_cv_.wait(lock, [&] { return chunks_.front()->done; });
      lock.unlock();
      WriteDone();
      lock.lock();
    }
  }

  // Analyses and writes what is left; the file's status (see AnalyzeHloText).
  absl::Status Finish() {
    std::unique_lock<std::mutex> lock(mu_);
    if (workers_.empty() && !chunks_.empty() && !chunks_.front()->done) {
      Chunk& only = *chunks_.front();
      lock.unlock();
      Inline().Analyze(only);
      MarkDone(only);
      lock.lock();
    }
    while (!chunks_.empty()) {
      done_cv_.wait(lock, [&] { return chunks_.front()->done; });
      lock.unlock();
      WriteDone();
      lock.lock();
    }
    lock.unlock();
    StopWorkers();
    if (seen_ == 0) return InputError("no HLO module found (empty file?)", 1, std::nullopt);
    if (ok_ == 0) {
      // The per-module error records are already written; signal failure without a duplicate
      // record.
      return AlreadyReported(absl::Status(
          first_error_.code(), absl::StrCat(first_error_.message(), " (no module analysed)")));
    }
    return absl::OkStatus();
  }

 private:
  ModuleWriter& Inline() {
    if (!inline_) inline_ = std::make_unique<ModuleWriter>(out_, source_, stage_);
    return *inline_;
  }

  void StartWorkers() {
    for (int i = 0; i < threads_; ++i) {
      workers_.emplace_back([this] {
        ModuleWriter w(out_, source_, stage_);
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
          work_cv_.wait(lock, [&] { return stop_ || !todo_.empty(); });
          if (todo_.empty()) return;  // stopping
          Chunk* c = todo_.front();
          todo_.pop_front();
          lock.unlock();
          w.Analyze(*c);  // the caller's thread reads c only once c->done
          lock.lock();
          c->done = true;
          done_cv_.notify_all();
        }
      });
    }
  }

  void MarkDone(Chunk& c) {
    std::lock_guard<std::mutex> lock(mu_);
    c.done = true;
  }

  void StopWorkers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  // Writes the finished chunks at the front, in order (the caller's thread only).
  void WriteDone() {
    for (;;) {
      std::unique_ptr<Chunk> c;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (chunks_.empty() || !chunks_.front()->done) return;
        c = std::move(chunks_.front());
        chunks_.pop_front();
      }
      out_.WriteRaw(std::string_view(c->out.data(), c->len), c->records);
      seen_ += c->seen;
      ok_ += c->ok;
      if (first_error_.ok() && !c->first_error.ok()) first_error_ = c->first_error;
      if (free_.size() < max_in_flight_) free_.push_back(std::move(c->out));
    }
  }

  JsonlWriter& out_;
  const std::string stage_;
  std::string source_;  // what follows "source": in a record (JsonlWriter::SourceFieldsJson)
  int threads_ = 1;
  size_t max_in_flight_ = 1;
  std::unique_ptr<ModuleWriter> inline_;
  std::vector<std::vector<char>> free_;  // record buffers of written chunks, reused

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::unique_ptr<Chunk>> chunks_;  // submitted and not yet written, in file order
  std::deque<Chunk*> todo_;                    // submitted and not yet taken by a worker
  bool stop_ = false;
  std::vector<std::thread> workers_;

  int ok_ = 0, seen_ = 0;
  absl::Status first_error_;
};

// Binary data or JSON given as HLO: say what it looks like instead of a parse error about its bytes.
absl::Status CheckLooksLikeHlo(std::string_view data) {
  ContentKind kind = ClassifyContent(data.substr(0, 4096));
  if (kind == ContentKind::kProtobuf || kind == ContentKind::kBinary || kind == ContentKind::kJson) {
    return InputError(absl::StrCat("not HLO text (looks like ", std::string(DescribeContent(kind)),
                                   "); hlo-stats reads HLO text dumps (*.hlo, *after_optimizations.txt)"),
                      1, std::nullopt);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AnalyzeHloText(std::string_view text, const std::string& filename, JsonlWriter& out) {
  if (absl::Status s = CheckLooksLikeHlo(text); !s.ok()) return s;
  FileAnalyzer a(out, filename);
  a.Submit(std::string(text), 1);
  return a.Finish();
}

absl::Status AnalyzeHloFile(const std::string& path, JsonlWriter& out) {
  auto in = InputFile::Open(path);
  if (!in.ok()) return in.status();
  FileAnalyzer a(out, path);
  // The file is cut into chunks at lines that start a module ("HloModule" after blanks), each chunk
  // (at least kChunkBytes unless it is the last, or the text before the first module) handed over
  // once complete; memory holds the chunks in flight and a read block.
  // Read blocks of 1 MB, or the size of a smaller plain file (most dump files are a few KB: no
  // 1 MB buffer to clear for each).
  size_t block = 1 << 20;
  if (!absl::EndsWith(path, ".gz")) {  // a .gz is read in 1 MB blocks of its decompressed text
    std::error_code ec;
    uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size < block) block = static_cast<size_t>(size) + 1;
  }
  std::vector<char>
      buf;  // buf[0, len) holds data (the vector's size is its capacity: never zero-filled twice)
  size_t len = 0;
  size_t start = 0;    // the current chunk: buf[start, len)
  size_t scan = 0;     // module starts are searched from here
  int chunk_line = 1;  // file line of buf[start]
  bool first = true;   // no chunk handed over yet
  auto submit = [&](size_t end) {
    a.Submit(std::string(buf.data() + start, end - start), chunk_line);
    chunk_line += hlo::CountNewlines(buf.data() + start, end - start);
    start = end;
    first = false;
  };
  auto cut = [&](size_t limit) {
    // Complete lines up to `limit` (a line start) are searched.
    std::string_view all(buf.data(), limit);
    for (size_t h = all.find("HloModule", scan); h != std::string_view::npos;
         h = all.find("HloModule", h + 9)) {
      size_t j = h;
      while (j > 0 && (all[j - 1] == ' ' || all[j - 1] == '\t')) --j;
      if (j != 0 && all[j - 1] != '\n') continue;
      // The text before the file's first module is a chunk of its own (it is parsed as one
      // unnamed module when it is not blank); later chunks start with a module.
      if (j > start && (first || j - start >= FileAnalyzer::kChunkBytes)) submit(j);
    }
    scan = limit;
  };
  for (;;) {
    if (buf.size() < len + block + 1) buf.resize(std::max(2 * buf.size(), len + block + 1));
    auto n = (*in)->Read(buf.data() + len, block);
    if (!n.ok()) {
      (void)a.Finish();  // what was read is written
      return n.status();
    }
    if (*n == 0) break;
    if (len == 0) {
      if (absl::Status s = CheckLooksLikeHlo(std::string_view(buf.data(), *n)); !s.ok()) return s;
    }
    size_t from = len;
    len += *n;
    // The last complete line so far ends at the last newline.
    size_t last_nl = len;
    for (size_t i = len; i > from; --i) {
      if (buf[i - 1] == '\n') {
        last_nl = i - 1;
        break;
      }
    }
    if (last_nl < len && last_nl + 1 > scan) cut(last_nl + 1);
    if (start > 0 && start >= len / 2) {
      std::memmove(buf.data(), buf.data() + start, len - start);
      len -= start;
      scan -= start;
      start = 0;
    }
  }
  if (len > 0 && buf[len - 1] != '\n') buf[len++] = '\n';  // a last line without its newline
  cut(len);
  if (len > start) submit(len);
  return a.Finish();
}

}  // namespace falcon::plugins
