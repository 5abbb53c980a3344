// Time-ordered identifiers (UUIDv7, RFC 9562) and names derived from them. Thread-safe.
#pragma once

#include <string>

#include "common/clock.h"

namespace falcon {

// A UUIDv7 string ("0192f3c4-5d6e-7abc-8def-0123456789ab"): 48-bit Unix milliseconds, then random bits.
// Lexicographic order follows creation time (at millisecond resolution).
std::string NewUuidV7(Clock& clock, Random& random);

// True for a UUID in its canonical lower-case text form (8-4-4-4-12 hex digits), the form of analysis ids.
bool IsCanonicalUuid(const std::string& s);

// The Pod name for an analysis: "falcon-analysis-" + the id, lower-case, so creating it twice collides.
std::string PodNameForAnalysis(const std::string& analysis_id);

// The object-store prefix of an analysis: "analysis/{exp_id}/{analysis_id}/".
std::string AnalysisPrefix(const std::string& exp_id, const std::string& analysis_id);

}  // namespace falcon
