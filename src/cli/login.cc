#include "cli/login.h"

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "net/http_client.h"
#include "net/url.h"

namespace falcon::cli {
namespace {

using nlohmann::json;

constexpr size_t kMaxIssuerAnswerBytes = 1 << 20;

std::string Form(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string s;
  for (const auto& [k, v] : kv) s += (s.empty() ? "" : "&") + net::PercentEncode(k) + "=" + net::PercentEncode(v);
  return s;
}

struct Answer {
  long status = 0;
  json body;
};

absl::StatusOr<Answer> Call(net::HttpClient& http, const DeviceFlowOptions& o, const std::string& method,
                            const std::string& url, const std::string& form) {
  net::HttpRequest req;
  req.method = method;
  req.url = url;
  req.headers = {"Accept: application/json"};
  if (method == "POST") {
    req.headers.push_back("Content-Type: application/x-www-form-urlencoded");
    req.body = form;
  }
  req.timeout = o.request_timeout;
  req.connect_timeout = std::min(o.request_timeout, std::chrono::milliseconds(10'000));
  req.max_body_bytes = kMaxIssuerAnswerBytes;
  auto res = http.Send(req);
  if (!res.ok()) {
    return absl::UnavailableError("the issuer " + o.issuer + " did not answer " + method + " " + url + " (" +
                                  std::string(res.status().message()) + ")");
  }
  Answer a;
  a.status = res->status;
  a.body = json::parse(res->body, nullptr, false);
  if (!a.body.is_object()) {
    return absl::InvalidArgumentError("the issuer answered " + method + " " + url + " with HTTP " +
                                      std::to_string(res->status) + " and no JSON object: " + res->body.substr(0, 200));
  }
  return a;
}

std::string Str(const json& j, const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; }

int64_t Num(const json& j, const char* k, int64_t def) {
  if (!j.contains(k)) return def;
  if (j[k].is_number_integer()) return j[k].get<int64_t>();
  if (j[k].is_string()) {
    try {
      return std::stoll(j[k].get<std::string>());
    } catch (const std::exception&) {
    }
  }
  return def;
}

// Fills `tokens` from a token endpoint's 200 answer.
absl::Status ReadTokens(const json& body, const std::string& endpoint, Clock& clock, LoginTokens* tokens) {
  tokens->id_token = Str(body, "id_token");
  tokens->access_token = Str(body, "access_token");
  if (std::string refresh = Str(body, "refresh_token"); !refresh.empty()) tokens->refresh_token = refresh;
  if (tokens->id_token.empty() && tokens->access_token.empty()) {
    return absl::InvalidArgumentError("the token answer of " + endpoint + " has neither id_token nor access_token");
  }
  tokens->expires_at = JwtExpiry(tokens->id_token);
  if (!tokens->expires_at && body.contains("expires_in")) {
    tokens->expires_at = clock.Now() + std::chrono::seconds(Num(body, "expires_in", 0));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenEndpoint(net::HttpClient& http, const DeviceFlowOptions& o, std::string* device) {
  const std::string discovery = o.issuer + "/.well-known/openid-configuration";
  FALCON_ASSIGN_OR_RETURN(Answer d, Call(http, o, "GET", discovery, ""));
  if (d.status != 200) {
    return absl::FailedPreconditionError("the issuer's discovery document " + discovery + " answered HTTP " +
                                         std::to_string(d.status) + ": check --issuer");
  }
  if (device) *device = Str(d.body, "device_authorization_endpoint");
  std::string token_endpoint = Str(d.body, "token_endpoint");
  return token_endpoint;
}

}  // namespace

absl::StatusOr<LoginTokens> RefreshLogin(net::HttpClient& http, Clock& clock, const LoginTokens& tokens,
                                         std::chrono::milliseconds request_timeout) {
  DeviceFlowOptions o;
  o.issuer = tokens.issuer;
  o.client_id = tokens.client_id;
  o.request_timeout = request_timeout;
  while (!o.issuer.empty() && o.issuer.back() == '/') o.issuer.pop_back();
  FALCON_ASSIGN_OR_RETURN(std::string endpoint, TokenEndpoint(http, o, nullptr));
  FALCON_ASSIGN_OR_RETURN(Answer t, Call(http, o, "POST", endpoint,
                                         Form({{"grant_type", "refresh_token"},
                                               {"refresh_token", tokens.refresh_token},
                                               {"client_id", o.client_id}})));
  if (t.status != 200) {
    std::string err = Str(t.body, "error"), desc = Str(t.body, "error_description");
    return absl::UnauthenticatedError("the issuer " + o.issuer + " refused the refresh token (HTTP " +
                                      std::to_string(t.status) + (err.empty() ? "" : ": " + err) +
                                      (desc.empty() ? "" : ", " + desc) + "): run `falcon login --issuer " +
                                      o.issuer + " --client-id " + o.client_id + "` again");
  }
  LoginTokens fresh = tokens;
  FALCON_RETURN_IF_ERROR(ReadTokens(t.body, endpoint, clock, &fresh));
  return fresh;
}

absl::StatusOr<LoginTokens> RunDeviceFlow(net::HttpClient& http, Clock& clock, std::ostream& prompt,
                                          const DeviceFlowOptions& options) {
  DeviceFlowOptions o = options;
  while (!o.issuer.empty() && o.issuer.back() == '/') o.issuer.pop_back();
  if (o.issuer.rfind("https://", 0) != 0 && o.issuer.rfind("http://", 0) != 0) {
    return absl::InvalidArgumentError("--issuer " + o.issuer + " must be an http(s) URL");
  }
  const std::string discovery = o.issuer + "/.well-known/openid-configuration";
  std::string device_endpoint;
  FALCON_ASSIGN_OR_RETURN(const std::string token_endpoint, TokenEndpoint(http, o, &device_endpoint));
  if (device_endpoint.empty()) {
    return absl::FailedPreconditionError(
        "the issuer " + o.issuer + " has no device_authorization_endpoint in " + discovery +
        ": it does not offer the device flow, so `falcon login` cannot sign in there; use an exec credential "
        "plugin that prints a token (falcon config set-context NAME --exec-command ...)");
  }

  FALCON_ASSIGN_OR_RETURN(Answer a, Call(http, o, "POST", device_endpoint,
                                         Form({{"client_id", o.client_id}, {"scope", o.scope}})));
  if (a.status != 200) {
    std::string err = Str(a.body, "error"), desc = Str(a.body, "error_description");
    return absl::FailedPreconditionError("the issuer refused the device authorization request (HTTP " +
                                         std::to_string(a.status) + (err.empty() ? "" : ": " + err) +
                                         (desc.empty() ? "" : ", " + desc) + "): check --client-id " + o.client_id +
                                         " (the client must allow the device grant)");
  }
  const std::string device_code = Str(a.body, "device_code"), user_code = Str(a.body, "user_code");
  std::string verification_uri = Str(a.body, "verification_uri");
  if (verification_uri.empty()) verification_uri = Str(a.body, "verification_url");  // Google's spelling
  if (device_code.empty() || user_code.empty() || verification_uri.empty()) {
    return absl::InvalidArgumentError("the device authorization answer of " + device_endpoint +
                                      " lacks device_code, user_code or verification_uri");
  }
  std::chrono::seconds interval(std::max<int64_t>(1, Num(a.body, "interval", 5)));
  std::chrono::seconds expires_in(std::clamp<int64_t>(Num(a.body, "expires_in", o.max_wait.count()), 1, o.max_wait.count()));
  prompt << "To sign in, open " << verification_uri << " and enter the code " << user_code << "\n";
  if (std::string complete = Str(a.body, "verification_uri_complete"); !complete.empty()) {
    prompt << "(or open " << complete << ")\n";
  }
  prompt << "Waiting up to " << expires_in.count() << "s for the sign-in...\n";
  prompt.flush();

  const MonoTime deadline = clock.MonotonicNow() + expires_in;
  while (true) {
    if (clock.MonotonicNow() + interval > deadline) {
      return absl::DeadlineExceededError("the device code expired after " + std::to_string(expires_in.count()) +
                                         "s (the issuer's expires_in) before the sign-in was approved; run "
                                         "`falcon login` again and enter the code sooner");
    }
    clock.SleepFor(interval, [] { return false; });
    FALCON_ASSIGN_OR_RETURN(Answer t, Call(http, o, "POST", token_endpoint,
                                           Form({{"grant_type", "urn:ietf:params:oauth:grant-type:device_code"},
                                                 {"device_code", device_code},
                                                 {"client_id", o.client_id}})));
    if (t.status == 200) {
      LoginTokens tokens;
      tokens.issuer = o.issuer;
      tokens.client_id = o.client_id;
      FALCON_RETURN_IF_ERROR(ReadTokens(t.body, token_endpoint, clock, &tokens));
      return tokens;
    }
    const std::string err = Str(t.body, "error");
    if (err == "authorization_pending") continue;
    if (err == "slow_down") {
      interval += std::chrono::seconds(5);  // RFC 8628 section 3.5
      continue;
    }
    std::string desc = Str(t.body, "error_description");
    if (err == "access_denied") {
      return absl::PermissionDeniedError("the sign-in was refused at " + verification_uri + (desc.empty() ? "" : ": " + desc));
    }
    if (err == "expired_token") {
      return absl::DeadlineExceededError("the device code expired before the sign-in was approved; run `falcon login` again");
    }
    return absl::InvalidArgumentError("the issuer's token endpoint " + token_endpoint + " answered HTTP " +
                                      std::to_string(t.status) + (err.empty() ? "" : ": " + err) +
                                      (desc.empty() ? "" : ", " + desc));
  }
}

}  // namespace falcon::cli
