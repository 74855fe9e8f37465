#include "rendezvous/http/http_status_routes.hpp"

#include "rendezvous/http/http_metrics.hpp"

namespace ddp {

namespace detail {
extern const char* const kStatusPageHtml;  // status_page.html, embedded at build time
}

namespace {

constexpr std::string_view kJsonSlot = "/*DDP_STATUS_JSON*/";
// The page may run its own inline script and styles and fetch its own origin; nothing else.
constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'";

std::string pathOf(const std::string& target) {
  const auto query = target.find('?');
  return query == std::string::npos ? target : target.substr(0, query);
}

}  // namespace

std::string statusPageHtml(const nlohmann::json& status) {
  std::string page(detail::kStatusPageHtml);
  // "</" inside a JSON string is written "<\/" so that no value can close the script element.
  std::string json = status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (std::size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) {
    json.replace(at, 2, "<\\/");
  }
  if (const auto slot = page.find(kJsonSlot); slot != std::string::npos) {
    page.replace(slot, kJsonSlot.size(), json);
  }
  return page;
}

HttpReply routeStatus(const std::string& target, const std::function<StatusContent()>& read) {
  const std::string path = pathOf(target);
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n", {}};
  if (path != "/" && path != "/status" && path != "/metrics" && path != "/index.html") {
    return {404, "text/plain; charset=utf-8", "not found: try /, /status or /metrics\n", {}};
  }
  StatusContent content;
  try {
    content = read();
  } catch (const std::exception& e) {
    return {503, "text/plain; charset=utf-8", std::string("status unavailable: ") + e.what() + "\n",
            {}};
  }
  if (path == "/metrics") {
    return {200, "text/plain; version=0.0.4; charset=utf-8",
            content.storeMetrics + jobMetricsText(content.jobs), {}};
  }
  const nlohmann::json status = statusJson(content.jobs, content.server);
  if (path == "/status") {
    return {200, "application/json",
            status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", {}};
  }
  HttpReply page{200, "text/html; charset=utf-8", statusPageHtml(status), {}};
  page.headers.emplace_back("Content-Security-Policy", kPagePolicy);
  return page;
}

}  // namespace ddp
