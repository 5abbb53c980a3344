#include "plugins/common/plugin_main.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"

namespace falcon::plugins {

absl::StatusOr<PluginOptions> ParsePluginArgs(const PluginInfo& info, int argc, const char* const* argv,
                                              const std::map<std::string, std::string>& env) {
  PluginOptions opts;
  CLI::App app(absl::StrCat(info.description, "\n\nDirectories are read recursively; they contribute ",
                            info.file_kinds,
                            ". Files named explicitly are always read. Gzip-compressed inputs are read "
                            "transparently."),
               info.name);
  app.set_help_flag("");  // handled below, so --help works even with missing env vars
  bool help = false;
  app.add_flag("-h,--help", help, "Print this help and exit");
  app.add_option("--input", opts.inputs,
                 "Input file or directory (repeatable). Default: $FALCON_INPUT_DIR");
  app.add_option("--output", opts.output,
                 absl::StrCat("Output JSONL file. Default: $FALCON_OUTPUT_DIR/", info.name, ".jsonl"));
  app.footer("Exit status: 0 when at least one input was analysed, 1 when none could be, 2 on usage "
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
  return opts;
}

namespace {
Json ErrorRecord(const JsonlWriter& out, const absl::Status& s) {
  Json r = out.Record("error");
  if (auto line = ErrorLine(s)) r["line"] = *line;
  if (auto off = ErrorOffset(s)) r["offset"] = *off;
  r["code"] = absl::StatusCodeToString(s.code());
  r["message"] = std::string(s.message());
  return r;
}
}  // namespace

int RunPluginOnInputs(const PluginInfo& info, const PluginOptions& options, const AnalyzeFn& analyze) {
  auto writer = JsonlWriter::OpenFile(options.output);
  if (!writer.ok()) {
    std::cerr << info.name << ": " << writer.status().message() << "\n";
    return 1;
  }
  JsonlWriter& out = **writer;
  int analysed = 0, failed = 0;
  std::vector<std::string> files;
  for (const auto& in : options.inputs) {
    // Expanded one by one so that a missing path is reported and the others still run.
    auto found = CollectInputs({in}, info.filter);
    if (!found.ok()) {
      out.set_source(in);
      out.Write(ErrorRecord(out, found.status()));
      std::cerr << info.name << ": " << found.status().message() << "\n";
      ++failed;
      continue;
    }
    if (found->empty()) {
      out.set_source(in);
      auto s = absl::NotFoundError(absl::StrCat("no ", info.file_kinds, " found under ", in));
      out.Write(ErrorRecord(out, s));
      std::cerr << info.name << ": " << s.message() << "\n";
      ++failed;
      continue;
    }
    files.insert(files.end(), found->begin(), found->end());
  }
  for (const auto& f : files) {
    out.set_source(f);
    auto start = std::chrono::steady_clock::now();
    absl::Status s;
    try {
      s = analyze(f, out);
    } catch (const std::exception& e) {
      // Library exceptions (allocation, JSON) end the file, not the run.
      s = absl::InternalError(absl::StrCat("unexpected failure: ", e.what()));
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.ok()) {
      ++analysed;
      std::cerr << info.name << ": " << f << ": ok (" << secs << " s)\n";
    } else {
      ++failed;
      if (!IsAlreadyReported(s)) out.Write(ErrorRecord(out, s));
      std::cerr << info.name << ": " << f << ": " << s.message() << "\n";
    }
  }
  absl::Status closed = out.Close();
  if (!closed.ok()) {
    std::cerr << info.name << ": " << closed.message() << "\n";
    return 1;
  }
  std::cerr << info.name << ": " << analysed << " file(s) analysed, " << failed << " failed; wrote "
            << options.output << "\n";
  return analysed > 0 ? 0 : 1;
}

int PluginMain(const PluginInfo& info, const AnalyzeFn& analyze, int argc, char** argv) {
  std::map<std::string, std::string> env;
  for (const char* k : {"FALCON_INPUT_DIR", "FALCON_OUTPUT_DIR"}) {
    if (const char* v = std::getenv(k)) env[k] = v;
  }
  auto opts = ParsePluginArgs(info, argc, argv, env);
  if (!opts.ok()) {
    std::cerr << info.name << ": " << opts.status().message() << "\n";
    return 2;
  }
  if (opts->help) {
    std::cout << opts->help_text;
    return 0;
  }
  return RunPluginOnInputs(info, *opts, analyze);
}

}  // namespace falcon::plugins
