// The routes the status pages of ddprund and of the agent share:
//
//   /          the status page (status_page.html): one self-contained document — its script,
//              styles and charts (inline SVG) are in it, it loads nothing from anywhere and its
//              Content-Security-Policy forbids it to; it carries the /status JSON it was served
//              with and fetches ./status every 2 s to stay live
//   /status    JSON: {"server": {...}, "jobs": [...]} (http_job_view.hpp has the job fields)
//   /metrics   Prometheus text (http_metrics.hpp)
//   /healthz   "ok"
//
// Anything else is 404.
//
// Thread safety: pure, apart from what `read` does.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rendezvous/http/http_job_view.hpp"
#include "rendezvous/http/http_server.hpp"

namespace ddp {

// What one request shows.
struct StatusContent {
  std::vector<JobView> jobs;
  nlohmann::json server;      // {"name": "ddprund", "version": ..., ...}
  std::string storeMetrics;   // Prometheus families of the store (ddprund) or the process (agent)
};

// Answers `target`; calls `read` only for the routes that show jobs. Exceptions from `read`
// become a 503 reply naming them.
HttpReply routeStatus(const std::string& target, const std::function<StatusContent()>& read);

// The page with `status` embedded.
std::string statusPageHtml(const nlohmann::json& status);

}  // namespace ddp
