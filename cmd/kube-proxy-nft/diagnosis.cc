#include "cmd/kube-proxy-nft/diagnosis.h"

#include <glog/logging.h>

#include "cmd/kube-proxy-nft/state_source.h"
#include "pkg/config/encode.h"
#include "pkg/config/version.h"
#include "pkg/source/api_source.h"

namespace kpn::cmd {

Diagnosis::Diagnosis(DiagnosisParts p) : node_(p.nodeName), syncer_(p.syncer) {
  auto* api = dynamic_cast<source::ApiSource*>(&p.source);
  if (api) {
    metrics::ProxyMetrics* metrics = &p.metrics;
    recorder_ = std::make_unique<events::Recorder>(api->transport(), events::reporterFor(localHostname()),
                                                   events::RecorderOptions{},
                                                   [metrics](const char* reason) { metrics->countEventDropped(reason); });
    serviceEvents_ = std::make_unique<events::ServiceEvents>(*recorder_, node_);
    listeners_.add(serviceEvents_.get());
  }
  listeners_.add(&record_);
  p.syncer.setListener(&listeners_);

  diag::DaemonIdentity id{config::version(), config::gitCommit(), node_, config::encodeProxyConfig(p.conf.config),
                          api ? "api" : "manifests"};
  events::Recorder* rec = recorder_.get();
  view_ = std::make_unique<diag::DaemonView>(id, p.state, p.source, p.syncer, p.renderer, record_,
                                             [rec]() -> std::optional<diag::EventCounts> {
                                               if (!rec) return std::nullopt;
                                               auto c = rec->counts();
                                               return diag::EventCounts{c.created, c.patched, c.dropped};
                                             });
  answers_ = std::make_unique<diag::SocketAnswers>(*view_, calls_);
  const std::string& socketName = p.conf.options.statusSocket;
  if (!socketName.empty()) {
    std::string error;
    diag::SocketAnswers* answers = answers_.get();
    socket_ = diag::LocalSocketServer::start(
        socketName, [answers](const std::string& line) { return answers->answer(line); }, &error);
    if (socket_) LOG(INFO) << "status socket " << socketName << " (kube-proxy-nft status, trace)";
    else LOG(WARNING) << error << "; `kube-proxy-nft status` and `trace` cannot ask this daemon";
  }
}

Diagnosis::~Diagnosis() {
  calls_.close();  // a question waiting for the loop fails at once
  socket_.reset();
  syncer_.setListener(nullptr);
  serviceEvents_.reset();
  recorder_.reset();
}

void Diagnosis::observe(sync::SyncLoop& loop) {
  loop.addObserver(&record_);
  loop.addObserver(&calls_);
}

void Diagnosis::record(const events::Event& e) {
  if (recorder_) recorder_->record(e);
}

bool Diagnosis::flushEvents(std::chrono::milliseconds limit) { return !recorder_ || recorder_->flush(limit); }

health::BindFailureHook Diagnosis::healthCheckBindFailure() {
  return [this](const std::string& ns, const std::string& name, int port, const std::string& error) {
    record(events::healthCheckFailedEvent(node_, ns, name, port, error));
  };
}

http::BindFailureHook Diagnosis::serverBindFailure() {
  return [this](const std::string& what, const std::string& error) {
    record(events::serverFailedEvent(node_, what, error));
  };
}

}  // namespace kpn::cmd
