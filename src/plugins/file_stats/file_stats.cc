#include "plugins/file_stats/file_stats.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace falcon::plugins {

namespace {

constexpr size_t kHeadBytes = 4096;

bool LooksLikeText(const std::string& head) {
  if (head.empty()) return true;
  size_t bad = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(head[i]);
    if (c == 0) return false;
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != 0x1b) ++bad;
  }
  return bad * 100 <= head.size();  // a few control bytes are tolerated
}

// First non-blank byte, skipping a UTF-8 BOM.
char FirstSignificant(const std::string& head, size_t* pos) {
  size_t i = absl::StartsWith(head, "\xEF\xBB\xBF") ? 3 : 0;
  while (i < head.size() && absl::ascii_isspace(static_cast<unsigned char>(head[i]))) ++i;
  *pos = i;
  return i < head.size() ? head[i] : '\0';
}

bool LooksLikeJsonl(const std::string& head, size_t start) {
  // At least two lines that start with '{' and a first line that ends with '}'.
  size_t nl = head.find('\n', start);
  if (nl == std::string::npos || nl + 1 >= head.size()) return false;
  std::string first = std::string(absl::StripTrailingAsciiWhitespace(head.substr(start, nl - start)));
  size_t p = nl + 1;
  while (p < head.size() && absl::ascii_isspace(static_cast<unsigned char>(head[p]))) ++p;
  return !first.empty() && first.back() == '}' && p < head.size() && head[p] == '{';
}

std::string Hex(const unsigned char* d, unsigned n) {
  static const char* k = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (unsigned i = 0; i < n; ++i) {
    s += k[d[i] >> 4];
    s += k[d[i] & 15];
  }
  return s;
}

std::string GunzipHead(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return "";
  std::string buf(kHeadBytes, '\0');
  int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
  gzclose(f);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

}  // namespace

std::string DetectFormat(const std::string& filename, const std::string& head) {
  std::string name = absl::AsciiStrToLower(filename);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
      static_cast<unsigned char>(head[1]) == 0x8b) {
    return "gzip";
  }
  if (absl::EndsWith(name, ".xplane.pb")) return "xplane";
  bool text = LooksLikeText(head);
  // XSpace: field 1 (planes, length-delimited: tag 0x0a) and plane names like "/host:CPU" early on.
  if (!text && !head.empty() && head[0] == '\x0a' &&
      (absl::StrContains(head, "/host:") || absl::StrContains(head, "/device:"))) {
    return "xplane";
  }
  if (absl::EndsWith(name, ".pb") && !text) return "protobuf";
  if (!text) return "binary";
  size_t start;
  char c = FirstSignificant(head, &start);
  if (absl::EndsWith(name, ".jsonl") || absl::EndsWith(name, ".ndjson")) return "jsonl";
  if (absl::StrContains(head.substr(start, 512), "HloModule") || absl::EndsWith(name, ".hlo") ||
      absl::EndsWith(name, ".hlo.txt")) {
    return "hlo";
  }
  if (c == '{' && LooksLikeJsonl(head, start)) return "jsonl";
  if (c == '{' || c == '[' || absl::EndsWith(name, ".json")) return "json";
  return "text";
}

absl::StatusOr<FileStats> ComputeFileStats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == EACCES) return absl::PermissionDeniedError(absl::StrCat("cannot read ", path, ": permission denied"));
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("OpenSSL could not initialise SHA-256");
  }
  FileStats st;
  std::string head;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::streamsize n = in.gcount();
    if (n <= 0) break;
    if (head.size() < kHeadBytes) {
      head.append(buf.data(), std::min<size_t>(static_cast<size_t>(n), kHeadBytes - head.size()));
    }
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
    st.size += n;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("read error in ", path));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  st.sha256 = Hex(md, len);
  std::string filename = std::filesystem::path(path).filename().string();
  st.format = DetectFormat(filename, head);
  if (st.format == "gzip") {
    std::string inner_name = filename;
    if (absl::EndsWith(absl::AsciiStrToLower(inner_name), ".gz")) inner_name.resize(inner_name.size() - 3);
    std::string inner = GunzipHead(path);
    st.content_format = DetectFormat(inner_name, inner);
  }
  return st;
}

void WriteFileRecord(const std::string& display_path, const FileStats& stats, JsonlWriter& out) {
  Json r = out.Record("file");
  r["path"] = display_path;
  r["size"] = stats.size;
  r["sha256"] = stats.sha256;
  r["format"] = stats.format;
  if (!stats.content_format.empty()) r["content_format"] = stats.content_format;
  out.Write(r);
}

}  // namespace falcon::plugins
