#include "common/ids.h"

#include <cctype>
#include <cstdio>

namespace falcon {

std::string NewUuidV7(Clock& clock, Random& random) {
  uint64_t ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.Now().time_since_epoch()).count());
  uint64_t r1 = random.Next();
  uint64_t r2 = random.Next();
  uint8_t b[16];
  for (int i = 0; i < 6; ++i) b[i] = static_cast<uint8_t>(ms >> (8 * (5 - i)));
  b[6] = static_cast<uint8_t>(0x70 | ((r1 >> 8) & 0x0f));
  b[7] = static_cast<uint8_t>(r1);
  b[8] = static_cast<uint8_t>(0x80 | ((r1 >> 16) & 0x3f));
  for (int i = 9; i < 16; ++i) b[i] = static_cast<uint8_t>(r2 >> (8 * (i - 9)));
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

bool IsCanonicalUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::string PodNameForAnalysis(const std::string& analysis_id) {
  std::string name = "falcon-analysis-";
  for (char c : analysis_id) {
    name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  }
  return name.substr(0, 63);
}

std::string AnalysisPrefix(const std::string& exp_id, const std::string& analysis_id) {
  return "analysis/" + exp_id + "/" + analysis_id + "/";
}

}  // namespace falcon
