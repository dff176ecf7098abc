// How to reach and authenticate to the Kubernetes API server: from a kubeconfig file, from the
// in-cluster environment of a pod, or from --master alone. Pure parsing and file reading; no
// network. Everything a config names is checked here, so that a bad kubeconfig is one clear
// error at start-up rather than a TLS failure later.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace kpn::kube {

struct ClientConfig {
  std::string server;  // "https://host:port[/prefix]" (IPv6 hosts bracketed), no trailing slash
  // Trust: PEM bytes of the CA bundle (from a file or -data); empty = the system's CAs.
  std::string caPem;
  std::string caSource;  // where caPem came from, for error messages ("file /x/ca.crt", "kubeconfig data")
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;  // name to verify the server certificate against, "" = the server's host
  // Client certificate authentication (PEM bytes), both or neither.
  std::string clientCertPem, clientKeyPem;
  // Bearer token: either fixed, or read from tokenFile (re-read as it rotates).
  std::string token;
  std::string tokenFile;
  std::string userAgent = "kube-proxy-nft";
  double qps = 5;   // upstream kube-proxy's --kube-api-qps default
  int burst = 10;   // upstream kube-proxy's --kube-api-burst default
};

// Parses a kubeconfig (YAML). `context` overrides current-context when not empty. Relative file
// paths resolve against the kubeconfig's folder. Returns an error text (naming the file and the
// field) or fills `out`. exec and auth-provider users are refused: they run programs or talk to
// identity providers, which a node daemon must not do implicitly.
std::optional<std::string> loadKubeconfig(const std::string& path, const std::string& context, ClientConfig& out);

// Same, from text already read; `dir` is the folder relative paths resolve against.
std::optional<std::string> parseKubeconfig(const std::string& text, const std::string& dir,
                                           const std::string& context, ClientConfig& out);

// In a pod: KUBERNETES_SERVICE_HOST/PORT from `getenv`, token and ca.crt from `serviceAccountDir`
// (the token stays a file, so it is re-read as the kubelet rotates it).
std::optional<std::string> inClusterConfig(const std::function<const char*(const char*)>& getenv,
                                           const std::string& serviceAccountDir, ClientConfig& out);

// Reads a whole file (certificates, tokens); an error text names the path.
std::optional<std::string> readFile(const std::string& path, std::string& out);

// "https://host:port" for a host that may be an IPv6 literal.
std::string joinHostPort(const std::string& scheme, const std::string& host, const std::string& port);

// Checks and normalises a server URL (http or https, a host, optional port and path prefix; no
// query or fragment). The trailing slash goes.
std::optional<std::string> normaliseServer(const std::string& url, std::string& out);

}  // namespace kpn::kube
