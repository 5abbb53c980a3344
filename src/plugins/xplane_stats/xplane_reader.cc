#include "plugins/xplane_stats/xplane_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/strings/str_cat.h"
#include "plugins/common/content.h"
#include "plugins/common/plugin_io.h"
#include "plugins/xplane_stats/xplane.pb.h"

namespace falcon::plugins::xplane {

namespace pb = google::protobuf;
using pb::io::CodedInputStream;
using WFL = pb::internal::WireFormatLite;

int32_t PlaneInfo::Intern(const std::string& s) {
  auto it = string_index.find(s);
  if (it != string_index.end()) return it->second;
  int32_t id = static_cast<int32_t>(strings.size());
  strings.push_back(s);
  string_index.emplace(s, id);
  return id;
}

namespace {

constexpr uint32_t Tag(int field, WFL::WireType type) {
  return (static_cast<uint32_t>(field) << 3) | static_cast<uint32_t>(type);
}
constexpr auto kVarint = WFL::WIRETYPE_VARINT;
constexpr auto kLen = WFL::WIRETYPE_LENGTH_DELIMITED;
constexpr auto kFixed64 = WFL::WIRETYPE_FIXED64;

// One source of bytes, opened once per pass.
class Source {
 public:
  virtual ~Source() = default;
  virtual absl::StatusOr<std::unique_ptr<pb::io::ZeroCopyInputStream>> Open() = 0;
  virtual absl::Status Error() { return absl::OkStatus(); }
};

class MemorySource : public Source {
 public:
  explicit MemorySource(const std::string& b) : bytes_(b) {}
  absl::StatusOr<std::unique_ptr<pb::io::ZeroCopyInputStream>> Open() override {
    return std::unique_ptr<pb::io::ZeroCopyInputStream>(
        new pb::io::ArrayInputStream(bytes_.data(), static_cast<int>(bytes_.size())));
  }

 private:
  const std::string& bytes_;
};

// A file, gunzipped on the fly when it starts with the gzip magic.
class FileSource : public Source {
 public:
  explicit FileSource(std::string path) : path_(std::move(path)) {}
  ~FileSource() override { Close(); }
  absl::StatusOr<std::unique_ptr<pb::io::ZeroCopyInputStream>> Open() override {
    Close();
    fd_ = ::open(path_.c_str(), O_RDONLY);
    if (fd_ < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path_, ": ", std::strerror(errno)));
    unsigned char magic[2] = {0, 0};
    bool gz = ::pread(fd_, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    file_ = std::make_unique<pb::io::FileInputStream>(fd_, 1 << 20);
    if (!gz) return std::unique_ptr<pb::io::ZeroCopyInputStream>(new Forward(file_.get()));
    gzip_ = std::make_unique<pb::io::GzipInputStream>(file_.get(), pb::io::GzipInputStream::AUTO, 1 << 20);
    return std::unique_ptr<pb::io::ZeroCopyInputStream>(new Forward(gzip_.get()));
  }
  absl::Status Error() override {
    if (gzip_ && gzip_->ZlibErrorCode() != 0 && gzip_->ZlibErrorCode() != 1) {  // Z_OK, Z_STREAM_END
      return absl::DataLossError(absl::StrCat(path_, ": corrupt gzip data: ",
                                              gzip_->ZlibErrorMessage() ? gzip_->ZlibErrorMessage() : "?"));
    }
    if (file_ && file_->GetErrno() != 0) {
      return absl::DataLossError(absl::StrCat(path_, ": read error: ", std::strerror(file_->GetErrno())));
    }
    return absl::OkStatus();
  }

 private:
  // Non-owning view, so the Source keeps ownership of the real streams.
  class Forward : public pb::io::ZeroCopyInputStream {
   public:
    explicit Forward(pb::io::ZeroCopyInputStream* s) : s_(s) {}
    bool Next(const void** data, int* size) override { return s_->Next(data, size); }
    void BackUp(int count) override { s_->BackUp(count); }
    bool Skip(int count) override { return s_->Skip(count); }
    int64_t ByteCount() const override { return s_->ByteCount(); }

   private:
    pb::io::ZeroCopyInputStream* s_;
  };
  void Close() {
    gzip_.reset();
    file_.reset();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string path_;
  int fd_ = -1;
  std::unique_ptr<pb::io::FileInputStream> file_;
  std::unique_ptr<pb::io::GzipInputStream> gzip_;
};

absl::Status Bad(uint64_t offset, const std::string& what) {
  return InputError(absl::StrCat("malformed XSpace at byte ", offset, ": ", what), std::nullopt, offset);
}

// Calls fn for every XSpace.planes entry with a stream limited to that plane. A fresh CodedInputStream per
// top-level field keeps each below protobuf's 2 GiB per-stream limit, so files may exceed it.
absl::Status ForEachPlane(pb::io::ZeroCopyInputStream* zin,
                          const std::function<absl::Status(CodedInputStream&, int, uint64_t)>& fn) {
  uint64_t base = 0;
  int index = 0;
  for (;;) {
    CodedInputStream in(zin);
    in.SetTotalBytesLimit(INT_MAX);
    const void* data = nullptr;
    int size = 0;
    if (!in.GetDirectBufferPointer(&data, &size)) break;  // end of input
    uint32_t tag = in.ReadTag();
    if (tag == 0) return Bad(base, "invalid field tag (not an XSpace?)");
    if (tag == Tag(XSpace::kPlanesFieldNumber, kLen)) {
      uint32_t len = 0;
      if (!in.ReadVarint32(&len)) return Bad(base + in.CurrentPosition(), "truncated plane length");
      uint64_t start = base + in.CurrentPosition();
      auto limit = in.PushLimit(static_cast<int>(len));
      absl::Status s = fn(in, index++, base);
      if (!s.ok()) return s;
      if (in.BytesUntilLimit() > 0) {
        if (!in.Skip(in.BytesUntilLimit())) return Bad(start, "plane truncated (file cut off?)");
      }
      if (in.BytesUntilLimit() != 0) return Bad(start, "plane truncated (file cut off?)");
      in.PopLimit(limit);
    } else if (!WFL::SkipField(&in, tag)) {
      return Bad(base + in.CurrentPosition(), absl::StrCat("cannot skip field ", tag >> 3));
    }
    base += static_cast<uint64_t>(in.CurrentPosition());
  }
  return absl::OkStatus();
}

// Reads a length-delimited sub-message into `buf` (for the small metadata messages).
bool ReadBytes(CodedInputStream& in, std::string* buf) {
  uint32_t len = 0;
  return in.ReadVarint32(&len) && in.ReadString(buf, static_cast<int>(len));
}

// Map entry {key = 1 (int64), value = 2 (message)}.
bool ReadMapEntry(CodedInputStream& in, int64_t* key, std::string* value) {
  uint32_t len = 0;
  if (!in.ReadVarint32(&len)) return false;
  auto limit = in.PushLimit(static_cast<int>(len));
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    if (tag == Tag(1, kVarint)) {
      uint64_t v;
      if (!in.ReadVarint64(&v)) return false;
      *key = static_cast<int64_t>(v);
    } else if (tag == Tag(2, kLen)) {
      if (!ReadBytes(in, value)) return false;
    } else if (!WFL::SkipField(&in, tag)) {
      return false;
    }
  }
  bool ok = in.ConsumedEntireMessage();
  in.PopLimit(limit);
  return ok;
}

struct TrackedStats {
  int64_t step_num = -1, hlo_op = -1, hlo_module = -1, program_id = -1, device_duration_ps = -1,
          device_offset_ps = -1;
};

// Decodes one XStat; records it in `e` when its metadata id is one we track.
bool ReadStat(CodedInputStream& in, PlaneInfo& plane, const TrackedStats& t, Event& e, std::string& scratch) {
  uint32_t len = 0;
  if (!in.ReadVarint32(&len)) return false;
  auto limit = in.PushLimit(static_cast<int>(len));
  int64_t mid = 0;
  int64_t ival = 0;
  bool has_int = false, has_str = false;
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    switch (tag) {
      case Tag(XStat::kMetadataIdFieldNumber, kVarint): {
        uint64_t v;
        if (!in.ReadVarint64(&v)) return false;
        mid = static_cast<int64_t>(v);
        break;
      }
      case Tag(XStat::kUint64ValueFieldNumber, kVarint):
      case Tag(XStat::kInt64ValueFieldNumber, kVarint): {
        uint64_t v;
        if (!in.ReadVarint64(&v)) return false;
        ival = static_cast<int64_t>(v);
        has_int = true;
        break;
      }
      case Tag(XStat::kRefValueFieldNumber, kVarint): {
        uint64_t v;
        if (!in.ReadVarint64(&v)) return false;
        auto it = plane.stat_names.find(static_cast<int64_t>(v));
        scratch = it == plane.stat_names.end() ? std::string() : it->second;
        has_str = true;
        break;
      }
      case Tag(XStat::kDoubleValueFieldNumber, kFixed64): {
        uint64_t v;
        if (!in.ReadLittleEndian64(&v)) return false;
        double d;
        std::memcpy(&d, &v, sizeof d);
        ival = static_cast<int64_t>(d);
        has_int = true;
        break;
      }
      case Tag(XStat::kStrValueFieldNumber, kLen): {
        if (mid != 0 && mid != t.hlo_op && mid != t.hlo_module) {
          if (!WFL::SkipField(&in, tag)) return false;
          break;
        }
        if (!ReadBytes(in, &scratch)) return false;
        has_str = true;
        break;
      }
      default:
        if (!WFL::SkipField(&in, tag)) return false;
    }
  }
  bool ok = in.ConsumedEntireMessage();
  in.PopLimit(limit);
  if (mid == 0) return ok;
  if (has_int) {
    if (mid == t.step_num) e.step_num = ival;
    else if (mid == t.program_id) e.program_id = static_cast<uint64_t>(ival);
    else if (mid == t.device_duration_ps) e.device_duration_ps = ival;
    else if (mid == t.device_offset_ps) e.device_offset_ps = ival;
  }
  if (has_str) {
    if (mid == t.hlo_op) e.hlo_op = plane.Intern(scratch);
    else if (mid == t.hlo_module) e.hlo_module = plane.Intern(scratch);
  }
  return ok;
}

bool ReadEvent(CodedInputStream& in, PlaneInfo& plane, const TrackedStats& t, Event& e,
               std::string& scratch) {
  uint32_t len = 0;
  if (!in.ReadVarint32(&len)) return false;
  auto limit = in.PushLimit(static_cast<int>(len));
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    uint64_t v = 0;
    switch (tag) {
      case Tag(XEvent::kMetadataIdFieldNumber, kVarint):
        if (!in.ReadVarint64(&v)) return false;
        e.metadata_id = static_cast<int64_t>(v);
        break;
      case Tag(XEvent::kOffsetPsFieldNumber, kVarint):
        if (!in.ReadVarint64(&v)) return false;
        e.offset_ps = static_cast<int64_t>(v);
        break;
      case Tag(XEvent::kNumOccurrencesFieldNumber, kVarint):
        if (!in.ReadVarint64(&v)) return false;
        e.occurrences = static_cast<int64_t>(v);
        break;
      case Tag(XEvent::kDurationPsFieldNumber, kVarint):
        if (!in.ReadVarint64(&v)) return false;
        e.duration_ps = static_cast<int64_t>(v);
        break;
      case Tag(XEvent::kStatsFieldNumber, kLen):
        if (!ReadStat(in, plane, t, e, scratch)) return false;
        break;
      default:
        if (!WFL::SkipField(&in, tag)) return false;
    }
  }
  bool ok = in.ConsumedEntireMessage();
  in.PopLimit(limit);
  return ok;
}

absl::Status ReadLine(CodedInputStream& in, uint64_t base, PlaneInfo& plane, const TrackedStats& t,
                      Line& line, std::string& scratch) {
  uint32_t len = 0;
  uint64_t start = base + in.CurrentPosition();
  if (!in.ReadVarint32(&len)) return Bad(start, "truncated line length");
  auto limit = in.PushLimit(static_cast<int>(len));
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    uint64_t v = 0;
    bool ok = true;
    switch (tag) {
      case Tag(XLine::kIdFieldNumber, kVarint):
        ok = in.ReadVarint64(&v);
        line.id = static_cast<int64_t>(v);
        break;
      case Tag(XLine::kDisplayIdFieldNumber, kVarint):
        ok = in.ReadVarint64(&v);
        line.display_id = static_cast<int64_t>(v);
        break;
      case Tag(XLine::kNameFieldNumber, kLen):
        ok = ReadBytes(in, &line.name);
        break;
      case Tag(XLine::kDisplayNameFieldNumber, kLen):
        ok = ReadBytes(in, &line.display_name);
        break;
      case Tag(XLine::kTimestampNsFieldNumber, kVarint):
        ok = in.ReadVarint64(&v);
        line.timestamp_ns = static_cast<int64_t>(v);
        break;
      case Tag(XLine::kDurationPsFieldNumber, kVarint):
        ok = in.ReadVarint64(&v);
        line.duration_ps = static_cast<int64_t>(v);
        break;
      case Tag(XLine::kEventsFieldNumber, kLen): {
        Event& e = line.events.emplace_back();
        ok = ReadEvent(in, plane, t, e, scratch);
        break;
      }
      default:
        ok = WFL::SkipField(&in, tag);
    }
    if (!ok) return Bad(base + in.CurrentPosition(), absl::StrCat("bad data in line '", line.name, "'"));
  }
  if (!in.ConsumedEntireMessage()) return Bad(start, "line is not a valid XLine");
  in.PopLimit(limit);
  return absl::OkStatus();
}

absl::Status Read(Source& src, Visitor& visitor) {
  std::vector<PlaneInfo> planes;
  std::string buf;
  // Pass 1: metadata.
  {
    auto zin = src.Open();
    if (!zin.ok()) return zin.status();
    {
      // Text (JSON, HLO) or other binary given as an XSpace: say what it looks like.
      const void* data = nullptr;
      int size = 0;
      if ((*zin)->Next(&data, &size)) {
        ContentKind kind = ClassifyContent(
            std::string_view(static_cast<const char*>(data), static_cast<size_t>(std::min(size, 4096))));
        (*zin)->BackUp(size);
        if (kind != ContentKind::kProtobuf && kind != ContentKind::kEmpty) {
          return InputError(absl::StrCat("not an XSpace protobuf (looks like ", std::string(DescribeContent(kind)),
                                         "); xplane-stats reads *.xplane.pb profiles"),
                            std::nullopt, 0);
        }
      }
      absl::Status io = src.Error();
      if (!io.ok()) return io;
    }
    absl::Status s = ForEachPlane(zin->get(), [&](CodedInputStream& in, int index, uint64_t base) {
      PlaneInfo& p = planes.emplace_back();
      p.index = index;
      for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
        uint64_t v = 0;
        bool ok = true;
        switch (tag) {
          case Tag(XPlane::kIdFieldNumber, kVarint):
            ok = in.ReadVarint64(&v);
            p.id = static_cast<int64_t>(v);
            break;
          case Tag(XPlane::kNameFieldNumber, kLen):
            ok = ReadBytes(in, &p.name);
            break;
          case Tag(XPlane::kEventMetadataFieldNumber, kLen): {
            int64_t key = 0;
            ok = ReadMapEntry(in, &key, &buf);
            XEventMetadata md;
            if (ok && md.ParseFromString(buf)) {
              EventMeta& em = p.event_metadata[key];
              em.name = md.name();
              em.display_name = md.display_name();
              for (const XStat& st : md.stats()) {
                switch (st.value_case()) {
                  case XStat::kInt64Value:
                    em.raw_stats.push_back({st.metadata_id(), static_cast<uint64_t>(st.int64_value()),
                                            static_cast<double>(st.int64_value())});
                    break;
                  case XStat::kUint64Value:
                    em.raw_stats.push_back(
                        {st.metadata_id(), st.uint64_value(), static_cast<double>(st.uint64_value())});
                    break;
                  case XStat::kDoubleValue:
                    em.raw_stats.push_back(
                        {st.metadata_id(), static_cast<uint64_t>(st.double_value()), st.double_value()});
                    break;
                  default:
                    break;
                }
              }
            } else {
              ok = false;
            }
            buf.clear();
            break;
          }
          case Tag(XPlane::kStatMetadataFieldNumber, kLen): {
            int64_t key = 0;
            ok = ReadMapEntry(in, &key, &buf);
            XStatMetadata md;
            if (ok && md.ParseFromString(buf)) p.stat_names[key] = md.name();
            else ok = false;
            buf.clear();
            break;
          }
          default:  // lines (pass 2), plane stats
            ok = WFL::SkipField(&in, tag);
        }
        if (!ok) {
          return Bad(base + in.CurrentPosition(), absl::StrCat("bad data in plane ", index, " '", p.name, "'"));
        }
      }
      return absl::OkStatus();
    });
    absl::Status io = src.Error();
    if (!io.ok()) return io;
    if (!s.ok()) return s;
  }
  // Pass 2: lines, one at a time.
  auto zin = src.Open();
  if (!zin.ok()) return zin.status();
  Line line;
  absl::Status s = ForEachPlane(zin->get(), [&](CodedInputStream& in, int index, uint64_t base) {
    if (index >= static_cast<int>(planes.size())) return Bad(base, "file changed between passes");
    PlaneInfo& p = planes[index];
    TrackedStats t;
    for (const auto& [id, name] : p.stat_names) {
      if (name == "step_num") t.step_num = id;
      else if (name == "hlo_op") t.hlo_op = id;
      else if (name == "hlo_module") t.hlo_module = id;
      else if (name == "program_id") t.program_id = id;
      else if (name == "device_duration_ps") t.device_duration_ps = id;
      else if (name == "device_offset_ps") t.device_offset_ps = id;
    }
    // The static per-op stats of the event metadata, now that every stat name is known.
    for (auto& [id, em] : p.event_metadata) {
      for (const auto& st : em.raw_stats) {
        auto it = p.stat_names.find(st.id);
        if (it == p.stat_names.end()) continue;
        if (it->second == "program_id") em.program_id = st.u;
        else if (it->second == "flops") em.flops = st.d;
        else if (it->second == "bytes_accessed") em.bytes_accessed = st.d;
      }
      em.raw_stats.clear();
      em.raw_stats.shrink_to_fit();
    }
    visitor.BeginPlane(p);
    for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
      if (tag == Tag(XPlane::kLinesFieldNumber, kLen)) {
        // Reuse the event buffer across lines (no reallocation and page faults per line).
        std::vector<Event> events = std::move(line.events);
        events.clear();
        line = Line();
        line.events = std::move(events);
        absl::Status ls = ReadLine(in, base, p, t, line, buf);
        if (!ls.ok()) return ls;
        visitor.OnLine(p, line);
      } else if (!WFL::SkipField(&in, tag)) {
        return Bad(base + in.CurrentPosition(), "bad plane field");
      }
    }
    visitor.EndPlane(p);
    // Metadata of finished planes is no longer needed.
    p.event_metadata.clear();
    p.stat_names.clear();
    p.strings.clear();
    p.string_index.clear();
    return absl::OkStatus();
  });
  absl::Status io = src.Error();
  if (!io.ok()) return io;
  return s;
}

}  // namespace

absl::Status ReadXSpaceFile(const std::string& path, Visitor& visitor) {
  FileSource src(path);
  return Read(src, visitor);
}

absl::Status ReadXSpaceBytes(const std::string& bytes, Visitor& visitor) {
  MemorySource src(bytes);
  return Read(src, visitor);
}

}  // namespace falcon::plugins::xplane
