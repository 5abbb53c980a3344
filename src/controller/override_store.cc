#include "controller/override_store.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/ids.h"

namespace falcon::controller {

namespace {

using json = nlohmann::json;

struct Field {
  const char* name;
  const std::string& (api::v1::Resources::*get)() const;
  std::string* (api::v1::Resources::*mutable_field)();
};

const Field kFields[] = {
    {"cpu_request", &api::v1::Resources::cpu_request, &api::v1::Resources::mutable_cpu_request},
    {"cpu_limit", &api::v1::Resources::cpu_limit, &api::v1::Resources::mutable_cpu_limit},
    {"memory_request", &api::v1::Resources::memory_request, &api::v1::Resources::mutable_memory_request},
    {"memory_limit", &api::v1::Resources::memory_limit, &api::v1::Resources::mutable_memory_limit},
};

}  // namespace

bool HasAnyResource(const api::v1::Resources& r) {
  for (const auto& f : kFields) {
    if (!(r.*f.get)().empty()) return true;
  }
  return false;
}

bool HasAnyOverride(const RunOverride& o) {
  return HasAnyResource(o.resources) || !o.image.empty() || o.timeout_seconds > 0;
}

std::string OverrideStore::KeyFor(const std::string& id) { return absl::StrCat(kOverridesPrefix, id, ".json"); }

absl::Status OverrideStore::Put(const std::string& id, const RunOverride& o) {
  if (!IsCanonicalUuid(id)) {
    return absl::InvalidArgumentError(absl::StrCat("analysis id '", id, "' is not a canonical UUID"));
  }
  json j = json::object();
  for (const auto& f : kFields) {
    if (!(o.resources.*f.get)().empty()) j[f.name] = (o.resources.*f.get)();
  }
  if (!o.image.empty()) j["image"] = o.image;
  if (o.timeout_seconds > 0) j["timeout_seconds"] = o.timeout_seconds;
  std::istringstream in(j.dump());
  return store_.Put(KeyFor(id), in);
}

absl::StatusOr<std::optional<RunOverride>> OverrideStore::Get(const std::string& id) {
  if (!IsCanonicalUuid(id)) return std::optional<RunOverride>();
  std::ostringstream out;
  // Read one byte more than the limit, to tell a full-size object from a larger one.
  absl::Status s = store_.Get(KeyFor(id), out, 0, kMaxOverrideBytes + 1);
  if (absl::IsNotFound(s)) return std::optional<RunOverride>();
  if (!s.ok()) return s;
  if (out.tellp() > static_cast<std::streamoff>(kMaxOverrideBytes)) {
    return absl::InternalError(absl::StrCat("the stored resource override ", KeyFor(id), " is larger than ",
                                            kMaxOverrideBytes, " bytes; it was not written by a controller"));
  }
  json j = json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InternalError(absl::StrCat("the stored resource override ", KeyFor(id), " is not a JSON object"));
  }
  RunOverride o;
  auto bad = [&](const char* field, const char* what) {
    return absl::InternalError(
        absl::StrCat("the stored resource override ", KeyFor(id), ": '", field, "' is not ", what));
  };
  for (const auto& f : kFields) {
    auto it = j.find(f.name);
    if (it == j.end()) continue;
    if (!it->is_string()) return bad(f.name, "a string");
    *(o.resources.*f.mutable_field)() = it->get<std::string>();
  }
  if (auto it = j.find("image"); it != j.end()) {
    if (!it->is_string()) return bad("image", "a string");
    o.image = it->get<std::string>();
  }
  if (auto it = j.find("timeout_seconds"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) return bad("timeout_seconds", "a whole number >= 0");
    o.timeout_seconds = it->get<int64_t>();
  }
  return std::optional<RunOverride>(std::move(o));
}

absl::Status OverrideStore::Delete(const std::string& id) {
  if (!IsCanonicalUuid(id)) return absl::OkStatus();
  return store_.Delete(KeyFor(id));
}

}  // namespace falcon::controller
