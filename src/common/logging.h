// Structured logging on spdlog: one line per event, "ts level component msg key=value ...", on stderr.
// Call InitLogging once from main(); libraries just use spdlog::info(...) etc.
#pragma once

#include <string>

namespace falcon {

// level: trace|debug|info|warn|error. format: "text" (human) or "json" (one JSON object per line).
void InitLogging(const std::string& component, const std::string& level = "info",
                 const std::string& format = "text");

}  // namespace falcon
