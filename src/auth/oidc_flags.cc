#include "auth/oidc_flags.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace falcon::auth {
namespace {

// "60s", "2m", "1h", "60": a whole number of seconds, minutes or hours.
bool ParseDuration(std::string_view s, std::chrono::seconds* out) {
  if (s.empty()) return false;
  int64_t mult = 1;
  const char last = s.back();
  if (last == 's' || last == 'm' || last == 'h') {
    mult = last == 's' ? 1 : last == 'm' ? 60 : 3600;
    s.remove_suffix(1);
  }
  int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || p != s.data() + s.size() || n < 0 || n > 86400) return false;
  *out = std::chrono::seconds(n * mult);
  return true;
}

}  // namespace

absl::StatusOr<OidcOptions> ParseOidcIssuerFlag(std::string_view value) {
  const std::string flag = absl::StrCat("--oidc-issuer='", std::string(value), "'");
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what));
  };
  std::vector<std::string_view> parts;
  for (absl::string_view p : absl::StrSplit(absl::string_view(value.data(), value.size()), ',')) {
    parts.emplace_back(p.data(), p.size());
  }
  OidcOptions o;
  if (parts.empty() || parts[0].empty()) {
    return bad(
        "the issuer URL is missing (the flag is URL[,key=value]..., e.g. "
        "https://issuer.example,audience=falcon)");
  }
  if (parts[0].find('=') != std::string_view::npos && parts[0].substr(0, 8) != "https://") {
    return bad(
        "it must start with the issuer URL, then key=value parts (e.g. "
        "https://issuer.example,audience=falcon)");
  }
  o.issuer_url = std::string(parts[0]);
  bool algs_given = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    const size_t eq = part.find('=');
    if (part.empty()) return bad(absl::StrCat("part ", i + 1, " is empty (two commas in a row?)"));
    if (eq == std::string_view::npos || eq == 0) {
      return bad(absl::StrCat("part ", i + 1, " '", std::string(part), "' is not key=value"));
    }
    const std::string key(part.substr(0, eq));
    const std::string val(part.substr(eq + 1));
    auto need_value = [&]() -> absl::Status {
      if (val.empty()) return bad(absl::StrCat("'", key, "' needs a value"));
      return absl::OkStatus();
    };
    if (key == "audience") {
      if (auto s = need_value(); !s.ok()) return s;
      o.audiences.push_back(val);
    } else if (key == "username-claim") {
      if (auto s = need_value(); !s.ok()) return s;
      o.username_claim = val;
    } else if (key == "username-prefix") {
      o.username_prefix = val;
    } else if (key == "groups-claim") {
      if (auto s = need_value(); !s.ok()) return s;
      o.groups_claim = val;
    } else if (key == "groups-prefix") {
      o.groups_prefix = val;
    } else if (key == "ca-file") {
      if (auto s = need_value(); !s.ok()) return s;
      o.ca_file = val;
    } else if (key == "clock-skew") {
      if (!ParseDuration(val, &o.clock_skew)) {
        return bad(absl::StrCat("clock-skew '", val, "' is not a duration like 60s, 2m or 30"));
      }
    } else if (key == "signing-alg") {
      if (auto s = need_value(); !s.ok()) return s;
      if (!algs_given) o.algorithms.clear();
      algs_given = true;
      o.algorithms.push_back(val);
    } else if (key == "kubernetes-service-accounts") {
      if (val == "true") {
        o.kubernetes_service_accounts = true;
      } else if (val == "false") {
        o.kubernetes_service_accounts = false;
      } else {
        return bad(
            absl::StrCat("kubernetes-service-accounts must be true or false, not '", val, "'"));
      }
    } else {
      return bad(absl::StrCat(
          "unknown key '", key,
          "' (known: audience, username-claim, username-prefix, groups-claim, groups-prefix, "
          "ca-file, clock-skew, signing-alg, kubernetes-service-accounts)"));
    }
  }
  if (absl::Status s = ValidateOidcOptions(o); !s.ok()) return bad(std::string(s.message()));
  return o;
}

}  // namespace falcon::auth
