#include "plugins/common/jsonl_writer.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace falcon::plugins {

absl::StatusOr<std::unique_ptr<JsonlWriter>> JsonlWriter::OpenFile(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create output file ", path, ": ", std::strerror(errno)));
  }
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  return std::unique_ptr<JsonlWriter>(new JsonlWriter(f, path));
}

JsonlWriter::~JsonlWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void JsonlWriter::set_provenance(const Provenance& p) {
  provenance_ = p;
  source_fields_.clear();
  AppendJsonString(source_fields_, p.source);
  if (!p.analysis_id.empty()) {
    source_fields_ += ",\"analysis_id\":";
    AppendJsonString(source_fields_, p.analysis_id);
  }
  if (!p.local_path.empty()) {
    source_fields_ += ",\"local_path\":";
    AppendJsonString(source_fields_, p.local_path);
  }
}

Json JsonlWriter::Record(const std::string& record_type) const {
  Json r;
  r["record_type"] = record_type;
  r["source"] = provenance_.source;
  if (!provenance_.analysis_id.empty()) r["analysis_id"] = provenance_.analysis_id;
  if (!provenance_.local_path.empty()) r["local_path"] = provenance_.local_path;
  return r;
}

std::string JsonlWriter::Serialize(const Json& record) {
  std::string line = record.dump(-1, ' ', false, Json::error_handler_t::replace);
  line.push_back('\n');
  return line;
}

void JsonlWriter::Write(const Json& record) {
  line_ = Serialize(record);
  if (file_ != nullptr) {
    std::fwrite(line_.data(), 1, line_.size(), file_);
  } else {
    stream_->write(line_.data(), static_cast<std::streamsize>(line_.size()));
  }
  ++records_;
}

void JsonlWriter::WriteRaw(std::string_view lines, uint64_t records) {
  if (file_ != nullptr) {
    std::fwrite(lines.data(), 1, lines.size(), file_);
  } else {
    stream_->write(lines.data(), static_cast<std::streamsize>(lines.size()));
  }
  records_ += records;
}

void AppendJsonString(std::string& out, std::string_view s) {
  // Fast path: printable ASCII without '"' or '\\' is written as it is (nlohmann does the same).
  bool plain = true;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out.push_back('"');
    out.append(s);
    out.push_back('"');
    return;
  }
  // Escapes, control characters, UTF-8 (valid or not): exactly nlohmann's serializer.
  out += Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

void AppendJsonInt(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendJsonUInt(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendJsonDouble(std::string& out, double v) { out += Json(v).dump(); }

absl::Status JsonlWriter::Close() {
  if (file_ != nullptr) {
    bool bad = std::fflush(file_) != 0 || std::ferror(file_) != 0;
    bad = (std::fclose(file_) != 0) || bad;
    file_ = nullptr;
    if (bad) return absl::DataLossError(absl::StrCat("writing ", path_, " failed: ", std::strerror(errno)));
    return absl::OkStatus();
  }
  stream_->flush();
  if (!*stream_) return absl::DataLossError("writing the output stream failed");
  return absl::OkStatus();
}

}  // namespace falcon::plugins
