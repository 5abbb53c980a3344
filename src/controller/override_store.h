// OverrideStore: the run options a request gave beside its record (CreateAnalysisRequest.resource_override,
// .image and .timeout_seconds: a RunOverride), kept in the object store under controller/overrides/<analysis_id>.json so that it survives a controller
// kill -9 and a leader change (the record in the database has no field for it: DESIGN.md keeps the override
// out of the record). Written before the record is created, read when a Pod is created for an analysis whose
// override this replica has not cached, deleted once the analysis is terminal or deleted.
//
// The object is JSON: {"cpu_request": "...", "cpu_limit": "...", "memory_request": "...",
// "memory_limit": "...", "image": "...", "timeout_seconds": N} (empty fields omitted; objects written before
// image and timeout existed hold only the four quantities). Only canonical analysis ids (UUIDs) are keys, so an id can
// never name another object. Borrows the ObjectStore, which must outlive it. Thread-safe.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "falcon/api/v1/types.pb.h"
#include "objstore/object_store.h"

namespace falcon::controller {

inline constexpr char kOverridesPrefix[] = "controller/overrides/";
// The largest override object Get reads: four quantities of at most 32 characters and an image reference
// of at most 1,024 need under two kilobytes.
inline constexpr int64_t kMaxOverrideBytes = 64 << 10;

// What one request asked for beside its record. Empty fields: not asked (the plugin's or the deployment's
// value applies).
struct RunOverride {
  api::v1::Resources resources;
  std::string image;
  int64_t timeout_seconds = 0;
};

class OverrideStore {
 public:
  explicit OverrideStore(objstore::ObjectStore& store) : store_(store) {}

  // The object key of `id`'s override.
  static std::string KeyFor(const std::string& id);

  // Stores `o` for `id` (replacing any). INVALID_ARGUMENT if `id` is not a canonical UUID; the store's
  // error otherwise.
  absl::Status Put(const std::string& id, const RunOverride& o);
  // The stored override of `id`; nullopt if none is stored. The store's error (e.g. UNAVAILABLE) when it
  // cannot tell, INTERNAL when the object does not parse or is larger than kMaxOverrideBytes (it is never
  // read whole then).
  absl::StatusOr<std::optional<RunOverride>> Get(const std::string& id);
  // Removes `id`'s override; OK if there is none.
  absl::Status Delete(const std::string& id);

 private:
  objstore::ObjectStore& store_;
};

// True if `r` sets at least one field (an all-empty override changes nothing and is not stored).
bool HasAnyResource(const api::v1::Resources& r);
// True if `o` asks for anything (resources, an image or a timeout).
bool HasAnyOverride(const RunOverride& o);

}  // namespace falcon::controller
