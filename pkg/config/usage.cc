#include "pkg/config/usage.h"

#include <sstream>
#include <utility>

#include "pkg/config/flag_table.h"

namespace kpn::config {

namespace {

constexpr size_t kWidth = 100;
constexpr const char* kIndent = "        ";

const std::pair<FlagSection, const char*> kSections[] = {
    {FlagSection::Source, "Cluster state (one of --manifests, --kubeconfig, --master; in a pod, the in-cluster API server)"},
    {FlagSection::Config, "Configuration"},
    {FlagSection::Rules, "Rules"},
    {FlagSection::NodeSettings, "Node settings at start-up"},
    {FlagSection::Servers, "Health and metrics servers"},
    {FlagSection::RunOnce, "Run once and exit"},
    {FlagSection::Logging, "Logging (KubeProxyConfiguration logging; a flag given wins over --config)"},
    {FlagSection::Klog, "klog's flags, which upstream kube-proxy took until 1.26 (text format only)"},
    {FlagSection::Ignored, "Accepted from upstream's command line, without effect here"},
};

// `text` wrapped at kWidth, each line indented.
void wrapped(std::ostream& out, const std::string& text) {
  std::istringstream words(text);
  std::string word, line;
  while (words >> word) {
    if (!line.empty() && std::string(kIndent).size() + line.size() + 1 + word.size() > kWidth) {
      out << kIndent << line << "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out << kIndent << line << "\n";
}

void flagEntry(std::ostream& out, const FlagSpec& f) {
  std::string type = f.type;
  out << "  " << (std::string(f.name) == "help" ? "-h, " : std::string(f.name) == "v" ? "-v, " : "") << "--" << f.name;
  if (type == "version") out << "[=raw|vX.Y.Z]";
  else if (type != "bool") out << " " << type;
  if (*f.defaultText && std::string(f.defaultText) != "false") out << "   (default " << f.defaultText << ")";
  out << "\n";
  wrapped(out, f.help);
}

}  // namespace

std::string usageText() {
  std::ostringstream out;
  out << "kube-proxy-nft: Kubernetes Services on this node as one nftables ruleset, in place of kube-proxy.\n\n"
         "Usage:\n"
         "  kube-proxy-nft [flags]         program this node's Services and keep them programmed\n"
         "  kube-proxy-nft trace [flags]   one new connection's path through this node's rules, and why\n"
         "                                 (kube-proxy-nft trace --help; docs/trace.md)\n"
         "  kube-proxy-nft status [flags]  what the running daemon on this node says of itself and the node\n"
         "                                 (kube-proxy-nft status --help; docs/operations.md)\n\n"
         "Flags take upstream's forms: --name=value, --name value, --switch, --switch=false, -v 2; a name\n"
         "may be spelled with underscores (--log_file).\n";
  for (const auto& [section, title] : kSections) {
    out << "\n" << title << ":\n";
    for (const FlagSpec& f : flagTable())
      if (f.section == section) flagEntry(out, f);
  }
  return out.str();
}

}  // namespace kpn::config
