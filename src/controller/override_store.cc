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

std::string OverrideStore::KeyFor(const std::string& id) { return absl::StrCat(kOverridesPrefix, id, ".json"); }

absl::Status OverrideStore::Put(const std::string& id, const api::v1::Resources& r) {
  if (!IsCanonicalUuid(id)) {
    return absl::InvalidArgumentError(absl::StrCat("analysis id '", id, "' is not a canonical UUID"));
  }
  json j = json::object();
  for (const auto& f : kFields) {
    if (!(r.*f.get)().empty()) j[f.name] = (r.*f.get)();
  }
  std::istringstream in(j.dump());
  return store_.Put(KeyFor(id), in);
}

absl::StatusOr<std::optional<api::v1::Resources>> OverrideStore::Get(const std::string& id) {
  if (!IsCanonicalUuid(id)) return std::optional<api::v1::Resources>();
  std::ostringstream out;
  // Read one byte more than the limit, to tell a full-size object from a larger one.
  absl::Status s = store_.Get(KeyFor(id), out, 0, kMaxOverrideBytes + 1);
  if (absl::IsNotFound(s)) return std::optional<api::v1::Resources>();
  if (!s.ok()) return s;
  if (out.tellp() > static_cast<std::streamoff>(kMaxOverrideBytes)) {
    return absl::InternalError(absl::StrCat("the stored resource override ", KeyFor(id), " is larger than ",
                                            kMaxOverrideBytes, " bytes; it was not written by a controller"));
  }
  json j = json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InternalError(absl::StrCat("the stored resource override ", KeyFor(id), " is not a JSON object"));
  }
  api::v1::Resources r;
  for (const auto& f : kFields) {
    auto it = j.find(f.name);
    if (it == j.end()) continue;
    if (!it->is_string()) {
      return absl::InternalError(
          absl::StrCat("the stored resource override ", KeyFor(id), ": '", f.name, "' is not a string"));
    }
    *(r.*f.mutable_field)() = it->get<std::string>();
  }
  return std::optional<api::v1::Resources>(std::move(r));
}

absl::Status OverrideStore::Delete(const std::string& id) {
  if (!IsCanonicalUuid(id)) return absl::OkStatus();
  return store_.Delete(KeyFor(id));
}

}  // namespace falcon::controller
