#include "pkg/diag/socket_answers.h"

#include <memory>

#include "nft/json_text.h"

namespace kpn::diag {

namespace {

std::string errorJson(const std::string& text) { return "{\"error\":" + nft::jsonString(text) + "}"; }

}  // namespace

std::string SocketAnswers::answer(const std::string& requestLine) const {
  std::string error;
  auto q = parseQuery(requestLine, &error);
  if (!q) return errorJson(error);
  const DaemonView* view = &view_;
  const std::string late = "the daemon's sync loop did not take the question within " +
                           std::to_string(limit_.count() / 1000) + " s (a long sync, or it is stopping)";
  if (q->kind == StateQuery::Kind::Status) {
    auto r = calls_.call([view] { return statusJson(view->status()); }, limit_);
    return r ? *r : errorJson(late);
  }
  // Shared: a call that times out may still run, after this function has returned.
  auto parts = std::make_shared<DaemonView::StateParts>();
  StateQuery query = *q;
  if (!calls_.call([view, query, parts] {
        *parts = view->stateParts(query);
        return std::string();
      }, limit_))
    return errorJson(late);
  ExcludedLookupJson excluded;
  if (q->kind == StateQuery::Kind::Service && !parts->serviceFound) excluded = view_.lookupExcluded(q->ns, q->name);
  return stateAnswerJson(parts->statusJson, view_.identity().configYaml, view_.identity().node, parts->objects,
                         excluded.json, excluded.error);
}

}  // namespace kpn::diag
