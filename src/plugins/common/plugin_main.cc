#include "plugins/common/plugin_main.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "plugins/common/content.h"

namespace falcon::plugins {

absl::StatusOr<PluginOptions> ParsePluginArgs(const PluginInfo& info, int argc,
                                              const char* const* argv,
                                              const std::map<std::string, std::string>& env) {
  PluginOptions opts;
  CLI::App app(
      absl::StrCat(info.description, "\n\nDirectories are read recursively; they contribute ",
                   info.file_kinds,
                   ". Files named explicitly are always read. Gzip-compressed inputs are read "
                   "transparently."),
      info.name);
  app.set_help_flag("");  // handled below, so --help works even with missing env vars
  bool help = false;
  app.add_flag("-h,--help", help, "Print this help and exit");
  app.add_option("--input", opts.inputs,
                 "Input file or directory (repeatable). Default: $FALCON_INPUT_DIR");
  app.add_option(
      "--output", opts.output,
      absl::StrCat("Output JSONL file. Default: $FALCON_OUTPUT_DIR/", info.name, ".jsonl"));
  app.footer(
      "Exit status: 0 when at least one input was analysed, 1 when none could be, 2 on usage "
      "errors. Record formats: docs/plugins.md.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(absl::StrCat(e.what(), " (see ", info.name, " --help)"));
  }
  if (help) {
    opts.help = true;
    opts.help_text = app.help();
    return opts;
  }
  if (opts.inputs.empty()) {
    auto it = env.find("FALCON_INPUT_DIR");
    if (it == env.end() || it->second.empty()) {
      return absl::InvalidArgumentError("no --input given and FALCON_INPUT_DIR is not set");
    }
    opts.inputs.push_back(it->second);
  }
  if (opts.output.empty()) {
    auto it = env.find("FALCON_OUTPUT_DIR");
    if (it == env.end() || it->second.empty()) {
      return absl::InvalidArgumentError("no --output given and FALCON_OUTPUT_DIR is not set");
    }
    opts.output = absl::StrCat(it->second, "/", info.name, ".jsonl");
  }
  auto resolver = ProvenanceResolver::FromEnv(env);
  if (!resolver.ok()) return resolver.status();
  opts.provenance = std::move(*resolver);
  return opts;
}

namespace {
Json ErrorRecord(const JsonlWriter& out, const absl::Status& s) {
  Json r = out.Record("error");
  if (auto line = ErrorLine(s)) r["line"] = *line;
  if (auto off = ErrorOffset(s)) r["offset"] = *off;
  r["code"] = absl::StatusCodeToString(s.code());
  r["message"] = EscapeBytes(std::string(s.message()));
  return r;
}

// A line of stderr: valid UTF-8 whatever the paths and messages hold.
void Say(const PluginInfo& info, std::string_view text) {
  std::cerr << info.name << ": " << EscapeBytes(text) << "\n";
}
}  // namespace

int PluginThreads() {
  unsigned n = std::thread::hardware_concurrency();
  if (const char* env = std::getenv("FALCON_PLUGIN_THREADS")) {
    int v = 0;
    auto r = std::from_chars(env, env + std::strlen(env), v);
    if (r.ec == std::errc() && v > 0) n = static_cast<unsigned>(v);
  }
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

namespace {
// The outcome of one input file.
struct FileResult {
  absl::Status status;
  double secs = 0;
  std::string records;  // when analysed into memory: its records, serialized
  uint64_t count = 0;
  bool done = false;
};

absl::Status AnalyzeGuarded(const std::string& f, JsonlWriter& out, const AnalyzeFn& analyze) {
  try {
    return analyze(f, out);
  } catch (const std::exception& e) {
    // Library exceptions (allocation, JSON) end the file, not the run.
    return absl::InternalError(absl::StrCat("unexpected failure: ", e.what()));
  }
}

// Analyses a file into memory, with its error record when it fails.
FileResult AnalyzeIntoMemory(const std::string& f, const Provenance& p, const AnalyzeFn& analyze) {
  FileResult r;
  std::ostringstream os;
  JsonlWriter w(os);
  w.set_provenance(p);
  auto start = std::chrono::steady_clock::now();
  r.status = AnalyzeGuarded(f, w, analyze);
  if (!r.status.ok() && !IsAlreadyReported(r.status)) w.Write(ErrorRecord(w, r.status));
  r.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.records = std::move(os).str();
  r.count = w.records_written();
  return r;
}
}  // namespace

int RunPluginOnInputs(const PluginInfo& info, const PluginOptions& options,
                      const AnalyzeFn& analyze) {
  auto writer = JsonlWriter::OpenFile(options.output);
  if (!writer.ok()) {
    Say(info, std::string(writer.status().message()));
    return 1;
  }
  JsonlWriter& out = **writer;
  int analysed = 0, failed = 0;
  std::vector<std::string> files;
  for (const auto& in : options.inputs) {
    // Expanded one by one so that a missing path is reported and the others still run.
    auto found = CollectInputs({in}, info.filter);
    if (!found.ok()) {
      out.set_provenance(options.provenance.Resolve(in));
      out.Write(ErrorRecord(out, found.status()));
      Say(info, std::string(found.status().message()));
      ++failed;
      continue;
    }
    if (found->empty()) {
      out.set_provenance(options.provenance.Resolve(in));
      auto s = absl::NotFoundError(absl::StrCat("no ", info.file_kinds, " found under ", in));
      out.Write(ErrorRecord(out, s));
      Say(info, std::string(s.message()));
      ++failed;
      continue;
    }
    files.insert(files.end(), found->begin(), found->end());
  }
  // Small files are analysed on worker threads into memory, a few ahead of the one being written;
  // their records are written in input order, so the output is that of a sequential run. A file
  // larger than kInMemoryBytes (a .gz: kInMemoryBytes / 8) is analysed on this thread straight into
  // the output, once the files before it are written: its records are not held in memory.
  constexpr uint64_t kInMemoryBytes = 4 << 20;
  const int threads = files.size() > 1 ? PluginThreads() : 1;
  const size_t window = 2 * static_cast<size_t>(threads) + 1;
  std::vector<FileResult> results(files.size());
  std::vector<bool> in_memory(files.size(), false);
  for (size_t i = 0; i < files.size() && threads > 1; ++i) {
    std::error_code ec;
    uint64_t size = std::filesystem::file_size(files[i], ec);
    const uint64_t limit = HasSuffixMaybeGz(files[i], ".gz") ? kInMemoryBytes / 8 : kInMemoryBytes;
    in_memory[i] = !ec && size <= limit;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> todo;  // in-memory files handed to the workers, not yet taken
  bool stop = false;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads && threads > 1; ++t) {
    workers.emplace_back([&] {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        cv.wait(lock, [&] { return stop || !todo.empty(); });
        if (todo.empty()) return;
        size_t i = todo.front();
        todo.pop_front();
        lock.unlock();
        FileResult r = AnalyzeIntoMemory(files[i], options.provenance.Resolve(files[i]), analyze);
        lock.lock();
        results[i] = std::move(r);
        results[i].done = true;
        cv.notify_all();
      }
    });
  }
  size_t handed = 0;  // files [0, handed) were considered for the workers
  for (size_t i = 0; i < files.size(); ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      for (; handed < files.size() && handed < i + window; ++handed) {
        if (in_memory[handed]) todo.push_back(handed);
      }
    }
    cv.notify_all();
    const std::string& f = files[i];
    FileResult r;
    if (in_memory[i]) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return results[i].done; });
      r = std::move(results[i]);
      lock.unlock();
      out.WriteRaw(r.records, r.count);
    } else {
      out.set_provenance(options.provenance.Resolve(f));
      auto start = std::chrono::steady_clock::now();
      r.status = AnalyzeGuarded(f, out, analyze);
      if (!r.status.ok() && !IsAlreadyReported(r.status)) out.Write(ErrorRecord(out, r.status));
      r.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (r.status.ok()) {
      ++analysed;
      Say(info, absl::StrCat(f, ": ok (", r.secs, " s)"));
    } else {
      ++failed;
      Say(info, absl::StrCat(f, ": ", std::string(r.status.message())));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& w : workers) w.join();
  absl::Status closed = out.Close();
  if (!closed.ok()) {
    Say(info, std::string(closed.message()));
    return 1;
  }
  Say(info, absl::StrCat(analysed, " file(s) analysed, ", failed, " failed; wrote ", options.output));
  return analysed > 0 ? 0 : 1;
}

int PluginMain(const PluginInfo& info, const AnalyzeFn& analyze, int argc, char** argv) {
  std::map<std::string, std::string> env;
  for (const char* k : {"FALCON_INPUT_DIR", "FALCON_OUTPUT_DIR", "FALCON_ANALYSIS_ID", "FALCON_INPUT_MANIFEST"}) {
    if (const char* v = std::getenv(k)) env[k] = v;
  }
  auto opts = ParsePluginArgs(info, argc, argv, env);
  if (!opts.ok()) {
    Say(info, std::string(opts.status().message()));
    return 2;
  }
  if (opts->help) {
    std::cout << opts->help_text;
    return 0;
  }
  return RunPluginOnInputs(info, *opts, analyze);
}

}  // namespace falcon::plugins
