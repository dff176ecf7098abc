#include "pkg/kube/client_config.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "pkg/api/yaml_stream.h"

namespace kpn::kube {

std::optional<std::string> readFile(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "cannot read " + path;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return std::nullopt;
}

namespace {

std::string resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

// Standard base64 (kubeconfig's *-data fields), whitespace tolerated.
std::optional<std::string> base64Decode(const std::string& in) {
  std::string s;
  for (char c : in)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  if (s.size() % 4 != 0) return std::nullopt;
  std::string out(s.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(s.data()),
                          static_cast<int>(s.size()));
  if (n < 0) return std::nullopt;
  size_t pad = 0;
  if (!s.empty() && s.back() == '=') pad++;
  if (s.size() > 1 && s[s.size() - 2] == '=') pad++;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string scalar(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  if (!v || v.IsNull()) return "";
  if (!v.IsScalar()) throw std::runtime_error(std::string(key) + " must be a string");
  return v.as<std::string>();
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts) and returns its
// `field` map (cluster, user, context).
YAML::Node named(const YAML::Node& root, const char* list, const char* field, const std::string& name) {
  const YAML::Node items = root[list];
  if (items && items.IsSequence())
    for (const auto& it : items)
      if (it.IsMap() && scalar(it, "name") == name) {
        YAML::Node v = it[field];
        if (!v || v.IsNull()) return YAML::Node(YAML::NodeType::Map);
        if (!v.IsMap()) throw std::runtime_error(std::string(list) + "[" + name + "]." + field + " must be a mapping");
        return v;
      }
  throw std::runtime_error(std::string(list) + ": no entry named \"" + name + "\"");
}

// A PEM from either `<key>` (a file, relative to dir) or `<key>-data` (base64). Returns false when
// neither is set.
bool pemFrom(const YAML::Node& n, const std::string& key, const std::string& dir, std::string& pem, std::string* source) {
  std::string data = scalar(n, (key + "-data").c_str());
  if (!data.empty()) {
    auto d = base64Decode(data);
    if (!d) throw std::runtime_error(key + "-data is not valid base64");
    pem = *d;
    if (source) *source = "kubeconfig " + key + "-data";
    return true;
  }
  std::string file = scalar(n, key.c_str());
  if (file.empty()) return false;
  std::string path = resolve(dir, file);
  if (auto err = readFile(path, pem)) throw std::runtime_error(key + ": " + *err);
  if (source) *source = "file " + path;
  return true;
}

}  // namespace

std::string joinHostPort(const std::string& scheme, const std::string& host, const std::string& port) {
  bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + (port.empty() ? "" : ":" + port);
}

std::optional<std::string> normaliseServer(const std::string& url, std::string& out) {
  std::string s = url;
  if (s.find("://") == std::string::npos) s = "https://" + s;  // client-go's default scheme for a bare host
  auto schemeEnd = s.find("://");
  std::string scheme = s.substr(0, schemeEnd);
  if (scheme != "https" && scheme != "http") return "server \"" + url + "\": scheme must be https or http";
  if (s.find_first_of("?#") != std::string::npos) return "server \"" + url + "\": must not have a query or fragment";
  std::string rest = s.substr(schemeEnd + 3);
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (authority.empty()) return "server \"" + url + "\": no host";
  for (char c : authority)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '@') return "server \"" + url + "\": bad host";
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  out = scheme + "://" + authority + path;
  return std::nullopt;
}

std::optional<std::string> parseKubeconfig(const std::string& text, const std::string& dir, const std::string& context,
                                           ClientConfig& out) {
  try {
    YAML::Node root = api::loadYamlDocument(text);
    if (!root.IsMap()) return std::string("not a kubeconfig (the document is not a mapping)");
    std::string ctxName = context.empty() ? scalar(root, "current-context") : context;
    if (ctxName.empty()) return std::string("no current-context (and no --kubeconfig-context given)");
    YAML::Node ctx = named(root, "contexts", "context", ctxName);
    std::string clusterName = scalar(ctx, "cluster");
    std::string userName = scalar(ctx, "user");
    if (clusterName.empty()) return "context \"" + ctxName + "\" names no cluster";

    ClientConfig c = out;  // keep the caller's qps/burst/user agent
    YAML::Node cluster = named(root, "clusters", "cluster", clusterName);
    if (auto err = normaliseServer(scalar(cluster, "server"), c.server)) return "cluster \"" + clusterName + "\": " + *err;
    c.insecureSkipTlsVerify = cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>();
    c.tlsServerName = scalar(cluster, "tls-server-name");
    pemFrom(cluster, "certificate-authority", dir, c.caPem, &c.caSource);

    if (!userName.empty()) {
      YAML::Node user = named(root, "users", "user", userName);
      if (user["exec"]) return "user \"" + userName + "\": exec credential plugins are not supported; use a token, tokenFile or client certificate";
      if (user["auth-provider"]) return "user \"" + userName + "\": auth-provider plugins are not supported; use a token, tokenFile or client certificate";
      bool hasCert = pemFrom(user, "client-certificate", dir, c.clientCertPem, nullptr);
      bool hasKey = pemFrom(user, "client-key", dir, c.clientKeyPem, nullptr);
      if (hasCert != hasKey) return "user \"" + userName + "\": client-certificate and client-key must be given together";
      c.token = scalar(user, "token");
      std::string tf = scalar(user, "tokenFile");
      if (!tf.empty()) {
        c.tokenFile = resolve(dir, tf);
        std::string probe;
        if (auto err = readFile(c.tokenFile, probe)) return "user \"" + userName + "\": tokenFile: " + *err;
      }
      if (!scalar(user, "username").empty()) return "user \"" + userName + "\": basic auth (username/password) is not supported";
    }
    out = std::move(c);
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
}

std::optional<std::string> loadKubeconfig(const std::string& path, const std::string& context, ClientConfig& out) {
  std::string text;
  if (auto err = readFile(path, text)) return "kubeconfig: " + *err;
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  if (auto err = parseKubeconfig(text, dir, context, out)) return "kubeconfig " + path + ": " + *err;
  return std::nullopt;
}

std::optional<std::string> inClusterConfig(const std::function<const char*(const char*)>& getenv,
                                           const std::string& serviceAccountDir, ClientConfig& out) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port)
    return std::string("not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  ClientConfig c = out;
  if (auto err = normaliseServer(joinHostPort("https", host, port), c.server)) return "in-cluster: " + *err;
  c.tokenFile = serviceAccountDir + "/token";
  std::string probe;
  if (auto err = readFile(c.tokenFile, probe)) return "in-cluster: " + *err;
  std::string ca = serviceAccountDir + "/ca.crt";
  if (auto err = readFile(ca, c.caPem)) return "in-cluster: " + *err;
  c.caSource = "file " + ca;
  out = std::move(c);
  return std::nullopt;
}

}  // namespace kpn::kube
