// Decoding of manifests into API objects: what kubectl prints must come out field for field, and
// anything that could not be rendered safely must be refused with a line naming the object.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "pkg/api/decode.h"
#include "pkg/api/encode.h"
#include "pkg/api/validate.h"
#include "pkg/kube/wire.h"
#include "pkg/services/proxied.h"
#include "pkg/services/scheduler.h"

namespace kpn::api {
namespace {

DecodedObjects decodeYaml(const std::string& text) {
  DecodedObjects out;
  std::string err;
  REQUIRE_MESSAGE(decodeManifest(text, false, out, &err), err);
  return out;
}

DecodedObjects decodeJson(const std::string& text) {
  DecodedObjects out;
  std::string err;
  REQUIRE_MESSAGE(decodeManifest(text, true, out, &err), err);
  return out;
}

bool anyContains(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != l.npos; });
}

// A minimal valid Service in YAML, with `extra` appended under spec.
std::string serviceYaml(const std::string& name, const std::string& specExtra = "") {
  return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name +
         "\n  namespace: prod\nspec:\n  clusterIP: 10.96.0.10\n  ports:\n  - port: 80\n" + specExtra;
}

TEST_CASE("a multi-document YAML stream with a List yields every object in it") {
  auto out = decodeYaml(R"(
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  clusterIP: 10.96.0.10
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
# an empty document between two objects is allowed
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: db, namespace: shop}
  spec:
    clusterIP: 10.96.0.11
    ports: [{port: 5432, protocol: TCP}]
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: web-abc12
    namespace: shop
    labels: {kubernetes.io/service-name: web}
  addressType: IPv4
  ports: [{name: http, port: 8080}]
  endpoints:
  - addresses: ["10.244.1.5"]
)");
  CHECK(out.errors.empty());
  REQUIRE(out.services.size() == 2);
  CHECK(out.services[0].meta.ns == "shop");
  CHECK(out.services[0].meta.name == "web");
  CHECK(out.services[0].ports[0].name == "http");
  CHECK(out.services[0].ports[0].port == 80);
  CHECK(out.services[0].ports[0].targetPort == "8080");
  CHECK(out.services[1].meta.name == "db");
  CHECK(out.services[1].ports[0].port == 5432);
  REQUIRE(out.slices.size() == 1);
  CHECK(out.slices[0].serviceName == "web");
  CHECK(out.slices[0].endpoints[0].addresses() == std::vector<std::string>{"10.244.1.5"});
}

TEST_CASE("a JSON Service decodes every field a proxy reads") {
  auto out = decodeJson(R"({
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "lb", "namespace": "edge", "labels": {"app": "lb", "service.kubernetes.io/headless": ""},
                 "annotations": {"note": "x", "kube-proxy-nft.io/scheduler": "round-robin"},
                 "creationTimestamp": "2024-05-01T10:00:00Z",
                 "resourceVersion": "4711", "uid": "ignored"},
    "spec": {
      "type": "LoadBalancer", "clusterIP": "10.96.5.5", "clusterIPs": ["10.96.5.5"],
      "ports": [{"name": "https", "protocol": "TCP", "port": 443, "nodePort": 30443, "targetPort": "web"},
                {"name": "dns", "protocol": "UDP", "port": 53, "nodePort": 30053, "targetPort": 5353}],
      "externalIPs": ["192.0.2.7"], "loadBalancerSourceRanges": ["198.51.100.77/24", "2001:db8::1/64"],
      "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
      "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
      "healthCheckNodePort": 32000, "trafficDistribution": "PreferClose", "someFutureField": [1, 2]
    },
    "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9", "ipMode": "Proxy"}, {"hostname": "lb.example.com"}]}}
  })");
  REQUIRE(out.errors.empty());
  REQUIRE(out.services.size() == 1);
  const Service& s = out.services[0];
  // Of labels and annotations, those a proxy reads (kReadLabels, kReadAnnotations); the rest are dropped.
  CHECK(s.meta.labels == std::map<std::string, std::string>{{"service.kubernetes.io/headless", ""}});
  CHECK(s.meta.annotations == std::map<std::string, std::string>{{"kube-proxy-nft.io/scheduler", "round-robin"}});
  CHECK(s.meta.creationTimestamp == "2024-05-01T10:00:00Z");
  CHECK(s.meta.resourceVersion == "4711");
  CHECK(s.type == "LoadBalancer");
  CHECK(s.clusterIPs == std::vector<std::string>{"10.96.5.5"});
  CHECK_FALSE(s.headless);
  REQUIRE(s.ports.size() == 2);
  CHECK(s.ports[0].protocol == Protocol::TCP);
  CHECK(s.ports[0].nodePort == 30443);
  CHECK(s.ports[0].targetPort == "web");
  CHECK(s.ports[1].protocol == Protocol::UDP);
  CHECK(s.ports[1].targetPort == "5353");
  CHECK(s.externalIPs == std::vector<std::string>{"192.0.2.7"});
  // Host bits cleared, canonical text: equal networks are equal strings.
  CHECK(s.loadBalancerSourceRanges == std::vector<std::string>{"198.51.100.0/24", "2001:db8::/64"});
  CHECK(s.externalTrafficPolicy == "Local");
  CHECK(s.internalTrafficPolicy == "Local");
  CHECK(s.sessionAffinity == "ClientIP");
  CHECK(s.sessionAffinityTimeoutSeconds == 600);
  CHECK(s.healthCheckNodePort == 32000);
  CHECK(s.trafficDistribution == "PreferClose");
  REQUIRE(s.loadBalancerIngress.size() == 2);
  CHECK(s.loadBalancerIngress[0].ip == "203.0.113.9");
  CHECK(s.loadBalancerIngress[0].ipMode == "Proxy");
  CHECK(s.loadBalancerIngress[1].ip == "");
  CHECK(s.loadBalancerIngress[1].hostname == "lb.example.com");
}

TEST_CASE("a Service without namespace or optional fields gets the API defaults") {
  auto out = decodeYaml("kind: Service\nmetadata:\n  name: plain\n  creationTimestamp: null\nspec:\n  ports:\n  - port: 8080\n");
  REQUIRE(out.services.size() == 1);
  const Service& s = out.services[0];
  CHECK(s.meta.ns == "default");
  CHECK(s.meta.creationTimestamp == "");
  CHECK(s.type == "ClusterIP");
  CHECK(s.clusterIPs.empty());
  CHECK(s.ports[0].protocol == Protocol::TCP);
  CHECK(s.ports[0].nodePort == 0);
  CHECK(s.externalTrafficPolicy == "Cluster");
  CHECK(s.internalTrafficPolicy == "Cluster");
  CHECK(s.sessionAffinity == "None");
  CHECK(s.sessionAffinityTimeoutSeconds == 10800);
}

TEST_CASE("dual-stack clusterIPs keep their order in canonical text") {
  auto out = decodeYaml(R"(
kind: Service
metadata: {name: dual}
spec:
  ipFamilyPolicy: PreferDualStack
  clusterIP: fd00::10
  clusterIPs: ["fd00:0:0::10", 10.96.0.10]
)");
  REQUIRE(out.errors.empty());
  REQUIRE(out.services.size() == 1);
  CHECK(out.services[0].clusterIPs == std::vector<std::string>{"fd00::10", "10.96.0.10"});
}

TEST_CASE("two clusterIPs of one family are refused") {
  auto out = decodeYaml("kind: Service\nmetadata: {name: twice}\nspec:\n  clusterIPs: [10.0.0.1, 10.0.0.2]\n");
  CHECK(out.services.empty());
  CHECK(anyContains(out.errors, "Service default/twice: spec.clusterIPs"));
}

TEST_CASE("IPv6 addresses are stored canonically everywhere") {
  auto out = decodeYaml(R"(
kind: Service
metadata: {name: v6}
spec:
  clusterIP: "FD00:0000::0:1"
  externalIPs: ["2001:DB8:0:0:0:0:0:0001"]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v6-x, labels: {kubernetes.io/service-name: v6}}
addressType: IPv6
endpoints:
- addresses: ["fd00:10:0:0::5"]
)");
  REQUIRE(out.errors.empty());
  CHECK(out.services[0].clusterIPs == std::vector<std::string>{"fd00::1"});
  CHECK(out.services[0].externalIPs == std::vector<std::string>{"2001:db8::1"});
  CHECK(out.slices[0].endpoints[0].addresses() == std::vector<std::string>{"fd00:10::5"});
}

TEST_CASE("clusterIP None makes a headless service with no addresses") {
  auto out = decodeYaml("kind: Service\nmetadata: {name: hl}\nspec:\n  clusterIP: None\n");
  REQUIRE(out.services.size() == 1);
  CHECK(out.services[0].headless);
  CHECK(out.services[0].clusterIPs.empty());
}

TEST_CASE("an invalid clusterIP skips the whole Service") {
  auto out = decodeYaml("kind: Service\nmetadata: {name: bad-ip, namespace: prod}\nspec: {clusterIP: 10.96.0.300}\n");
  CHECK(out.services.empty());
  REQUIRE(out.errors.size() == 1);
  CHECK(out.errors[0] == "Service prod/bad-ip: spec.clusterIP \"10.96.0.300\" is not an IP address");
}

TEST_CASE("a port out of range skips the Service with an error naming it") {
  auto out = decodeYaml("kind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - port: 70000\n");
  CHECK(out.services.empty());
  REQUIRE(out.errors.size() == 1);
  CHECK(out.errors[0] == "Service default/web: spec.ports[0].port 70000 out of range (1..65535)");
}

TEST_CASE("port fields are checked: protocol spelling, port names, duplicates") {
  auto errorOf = [](const std::string& ports) {
    auto out = decodeYaml("kind: Service\nmetadata: {name: p}\nspec:\n  ports:\n" + ports);
    CHECK(out.services.empty());
    return out.errors.empty() ? std::string() : out.errors[0];
  };
  CHECK(errorOf("  - {port: 80, protocol: tcp}\n").find("\"tcp\" is not TCP, UDP or SCTP") != std::string::npos);
  CHECK(errorOf("  - {port: 80, name: HTTP}\n").find("spec.ports[0].name \"HTTP\"") != std::string::npos);
  CHECK(errorOf("  - {port: 80, name: " + std::string(64, 'a') + "}\n").find("spec.ports[0].name") != std::string::npos);
  CHECK(errorOf("  - {port: 80, name: -http}\n").find("spec.ports[0].name") != std::string::npos);
  CHECK(errorOf("  - {port: 80, name: http-}\n").find("spec.ports[0].name") != std::string::npos);
  CHECK(errorOf("  - {port: 80, name: http_x}\n").find("spec.ports[0].name") != std::string::npos);
  CHECK(errorOf("  - {port: 80, name: a}\n  - {port: 81, name: a}\n").find("spec.ports[1].name \"a\" is not unique") !=
        std::string::npos);
  CHECK(errorOf("  - {port: 80}\n  - {port: 81, name: b}\n").find("spec.ports[0].name") != std::string::npos);
  // Quoted numbers are strings in YAML, as for the API server.
  CHECK(errorOf("  - {port: \"80\"}\n").find("must be an integer, got the string \"80\"") != std::string::npos);
}

// Defect 1 of issue 11: every rule below is the API server's (pkg/apis/core/validation and
// pkg/apis/discovery/validation), tested just inside and just outside its boundary.
TEST_CASE("Service port names are DNS-1123 labels, as the API server checks them") {
  auto portsOf = [](const std::string& ports) {
    auto out = decodeYaml("kind: Service\nmetadata: {name: p}\nspec:\n  ports:\n" + ports);
    CHECK(out.errors.empty());
    return out.services.empty() ? std::vector<ServicePort>{} : out.services[0].ports;
  };
  CHECK(portsOf("  - {port: 80, name: http-metrics-port}\n").at(0).name == "http-metrics-port");
  CHECK(portsOf("  - {port: 80, name: " + std::string(63, 'a') + "}\n").at(0).name == std::string(63, 'a'));
  CHECK(portsOf("  - {port: 80, name: a--b}\n").at(0).name == "a--b");
  CHECK(portsOf("  - {port: 80, name: \"80\"}\n").at(0).name == "80");
  CHECK(portsOf("  - {port: 80, name: a}\n  - {port: 81, name: b}\n").size() == 2);
}

TEST_CASE("port numbers: 1..65535 for port, 0..65535 for nodePort, just inside and just outside") {
  auto decodePorts = [](const std::string& port) { return decodeYaml("kind: Service\nmetadata: {name: p}\nspec:\n  ports:\n  - " + port + "\n"); };
  CHECK(decodePorts("{port: 1}").services.at(0).ports.at(0).port == 1);
  CHECK(decodePorts("{port: 65535}").services.at(0).ports.at(0).port == 65535);
  CHECK(decodePorts("{port: 0}").services.empty());
  CHECK(decodePorts("{port: 65536}").services.empty());
  CHECK(decodePorts("{port: 80, nodePort: 65535}").services.at(0).ports.at(0).nodePort == 65535);
  auto farNodePort = decodePorts("{port: 80, nodePort: 65536}");
  CHECK(farNodePort.services.at(0).ports.at(0).nodePort == 0);
  CHECK(anyContains(farNodePort.warnings, "nodePort dropped"));
}

TEST_CASE("a bad targetPort costs only the targetPort: the proxy takes endpoint ports from slices") {
  auto decodeTarget = [](const std::string& target) {
    return decodeYaml("kind: Service\nmetadata: {name: p}\nspec:\n  ports:\n  - {port: 80, targetPort: " + target + "}\n");
  };
  CHECK(decodeTarget("abcdefghijklmno").services.at(0).ports.at(0).targetPort == "abcdefghijklmno");
  auto tooLong = decodeTarget("abcdefghijklmnop");
  REQUIRE(tooLong.services.size() == 1);
  CHECK(tooLong.services[0].ports[0].targetPort.empty());
  CHECK(anyContains(tooLong.warnings, "targetPort dropped"));
  for (const char* bad : {"\"no spaces\"", "a--b", "\"8080\"", "65536"}) {
    CAPTURE(bad);
    auto out = decodeTarget(bad);
    CHECK(out.services.size() == 1);
    CHECK(anyContains(out.warnings, "targetPort dropped"));
  }
  CHECK(decodeTarget("65535").services.at(0).ports.at(0).targetPort == "65535");
  CHECK(decodeTarget("0").services.at(0).ports.at(0).targetPort.empty());
  CHECK(decodeTarget("\"\"").services.at(0).ports.at(0).targetPort.empty());
}

TEST_CASE("Service names are DNS-1123 labels (RelaxedServiceNameValidation): 63 inside, 64 outside") {
  CHECK(decodeYaml(serviceYaml("1st-web")).services.size() == 1);
  CHECK(decodeYaml(serviceYaml(std::string(63, 'w'))).services.size() == 1);
  auto tooLong = decodeYaml(serviceYaml(std::string(64, 'w')));
  CHECK(tooLong.services.empty());
  CHECK(anyContains(tooLong.errors, "metadata.name"));
  CHECK(decodeYaml(serviceYaml("web.x")).services.empty());
}

TEST_CASE("sessionAffinity timeoutSeconds: 1..86400") {
  auto withTimeout = [](int t) {
    return decodeYaml(serviceYaml("a", "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: " +
                                           std::to_string(t) + "}}\n"));
  };
  CHECK(withTimeout(1).services.at(0).sessionAffinityTimeoutSeconds == 1);
  CHECK(withTimeout(86400).services.at(0).sessionAffinityTimeoutSeconds == 86400);
  CHECK(withTimeout(0).services.empty());
  CHECK(withTimeout(86401).services.empty());
}

TEST_CASE("EndpointSlice ports: DNS-1123 names up to 63; a port number the proxy cannot use drops that port only") {
  auto sliceWith = [](const std::string& ports, const std::string& service = "web") {
    return decodeYaml("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: s\n  labels: "
                      "{kubernetes.io/service-name: " + service + "}\naddressType: IPv4\nports:\n" + ports +
                      "endpoints:\n- addresses: [10.1.0.1]\n");
  };
  CHECK(sliceWith("- {name: " + std::string(63, 'p') + ", port: 1}\n").slices.at(0).ports.at(0).name == std::string(63, 'p'));
  CHECK(sliceWith("- {name: " + std::string(64, 'p') + ", port: 1}\n").slices.empty());
  CHECK(sliceWith("- {name: a--b, port: 65535}\n").slices.at(0).ports.at(0).port == 65535);
  for (const char* bad : {"0", "65536", "-1"}) {
    CAPTURE(bad);
    auto out = sliceWith(std::string("- {name: bad, port: ") + bad + "}\n- {name: good, port: 8080}\n");
    REQUIRE(out.slices.size() == 1);
    REQUIRE(out.slices[0].ports.size() == 1);
    CHECK(out.slices[0].ports[0].name == "good");
    CHECK(out.slices[0].endpoints.size() == 1);
    CHECK(anyContains(out.warnings, "port dropped"));
  }
  // The service-name label names a Service: a DNS-1123 label (digits first allowed).
  CHECK(sliceWith("- {name: a, port: 1}\n", "1st-web").slices.at(0).serviceName == "1st-web");
  CHECK(sliceWith("- {name: a, port: 1}\n", "Web").slices.empty());
}

TEST_CASE("names that are not DNS-1123 are refused: they would end up in chain names") {
  for (const char* meta : {"{name: \"we\\\"b\"}", "{name: \"a/b\"}", "{name: \"we b\"}", "{name: Web}",
                           "{name: web, namespace: \"ns/x\"}", "{name: web, namespace: \"it's\"}",
                           "{name: web, namespace: Prod}", "{name: -web}"}) {
    CAPTURE(meta);
    auto out = decodeYaml(std::string("kind: Service\nmetadata: ") + meta + "\nspec: {}\n");
    CHECK(out.services.empty());
    REQUIRE(out.errors.size() == 1);
    CHECK(out.errors[0].rfind("Service ", 0) == 0);
    CHECK(anyContains(out.errors, ": metadata.n"));
  }
  // The offending name is quoted and escaped in the message, never printed raw.
  auto out = decodeYaml("kind: Service\nmetadata: {name: \"a\\nb\"}\nspec: {}\n");
  REQUIRE(out.errors.size() == 1);
  CHECK(out.errors[0].find('\n') == std::string::npos);
  CHECK(out.errors[0].find("\"a\\x0ab\"") != std::string::npos);
}

TEST_CASE("missing required fields are errors naming the object") {
  auto noName = decodeYaml("kind: Service\nmetadata: {namespace: x}\nspec: {}\n");
  CHECK(noName.errors == std::vector<std::string>{"Service x/<unnamed>: metadata.name is required"});
  auto noSpec = decodeYaml("kind: Service\nmetadata: {name: nospec}\n");
  CHECK(noSpec.errors == std::vector<std::string>{"Service default/nospec: spec is required"});
  auto noType = decodeYaml("kind: EndpointSlice\nmetadata: {name: s}\n");
  CHECK(noType.errors == std::vector<std::string>{"EndpointSlice default/s: addressType is required"});
  auto noKind = decodeYaml("metadata: {name: what}\n");
  CHECK(noKind.errors == std::vector<std::string>{"object what: kind is missing"});
}

TEST_CASE("an unknown kind is skipped with an error; known objects around it are kept") {
  auto out = decodeYaml(
      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n---\n" + serviceYaml("web"));
  CHECK(out.services.size() == 1);
  CHECK(out.errors == std::vector<std::string>{"unknown kind Deployment: shop/web"});
}

TEST_CASE("an unsupported apiVersion of a known kind is refused") {
  auto out = decodeYaml("apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: s}\naddressType: IPv4\n");
  CHECK(out.slices.empty());
  CHECK(anyContains(out.errors, "apiVersion \"discovery.k8s.io/v1beta1\" is not supported"));
}

TEST_CASE("items of a typed list may omit their kind") {
  auto out = decodeJson(R"({"kind": "ServiceList", "apiVersion": "v1", "items": [
      {"metadata": {"name": "a"}, "spec": {"clusterIP": "10.0.0.1"}},
      {"metadata": {"name": "b"}, "spec": {"clusterIP": "10.0.0.2"}}]})");
  CHECK(out.errors.empty());
  REQUIRE(out.services.size() == 2);
  CHECK(out.services[1].clusterIPs == std::vector<std::string>{"10.0.0.2"});
}

TEST_CASE("EndpointSlice: conditions missing, explicit, ports, hints and topology") {
  auto out = decodeYaml(R"(
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports:
- {name: http, port: 8080}
- {protocol: UDP}
endpoints:
- addresses: [10.1.0.1]
- addresses: [10.1.0.2]
  conditions: {ready: false, serving: true, terminating: true}
  nodeName: node-a
  zone: zone-1
  hints:
    forZones: [{name: zone-1}, {name: zone-2}]
    forNodes: [{name: node-a}]
- addresses: [10.1.0.3]
  conditions: {ready: null}
)");
  REQUIRE(out.errors.empty());
  REQUIRE(out.slices.size() == 1);
  const EndpointSlice& s = out.slices[0];
  CHECK(s.meta.ns == "shop");
  CHECK(s.serviceName == "web");
  CHECK(s.addressType == "IPv4");
  REQUIRE(s.ports.size() == 2);
  CHECK(s.ports[0].name == "http");
  CHECK(s.ports[0].port == 8080);
  CHECK(s.ports[1].name == "");
  CHECK(s.ports[1].protocol == Protocol::UDP);
  CHECK_FALSE(s.ports[1].port.has_value());
  REQUIRE(s.endpoints.size() == 3);
  CHECK_FALSE(s.endpoints[0].conditions.ready.has_value());
  CHECK(s.endpoints[0].conditions.isReady());
  CHECK(s.endpoints[0].conditions.isServing());
  CHECK_FALSE(s.endpoints[0].conditions.isTerminating());
  CHECK(s.endpoints[1].conditions.ready == std::optional<bool>(false));
  CHECK(s.endpoints[1].conditions.serving == std::optional<bool>(true));
  CHECK(s.endpoints[1].conditions.isTerminating());
  CHECK(s.endpoints[1].nodeName == "node-a");
  CHECK(s.endpoints[1].zone == "zone-1");
  CHECK(s.endpoints[1].hintZones() == std::vector<std::string>{"zone-1", "zone-2"});
  CHECK(s.endpoints[1].hintNodes() == std::vector<std::string>{"node-a"});
  CHECK_FALSE(s.endpoints[2].conditions.ready.has_value());
}

TEST_CASE("a bad endpoint address drops that endpoint only, with a warning") {
  auto out = decodeJson(R"({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
    "metadata": {"name": "s1", "labels": {"kubernetes.io/service-name": "web"}}, "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.999"]}, {"addresses": ["fd00::1"]},
                  {"addresses": []}, {"addresses": ["10.0.0.4"], "conditions": {"ready": "yes"}},
                  {"addresses": ["10.0.0.5"]}]})");
  CHECK(out.errors.empty());
  REQUIRE(out.slices.size() == 1);
  REQUIRE(out.slices[0].endpoints.size() == 2);
  CHECK(out.slices[0].endpoints[0].address == "10.0.0.1");
  CHECK(out.slices[0].endpoints[1].address == "10.0.0.5");
  REQUIRE(out.warnings.size() == 4);
  CHECK(out.warnings[0] == "EndpointSlice default/s1: endpoints[1].addresses[0] \"10.0.0.999\" is not an IP address; endpoint dropped");
  CHECK(out.warnings[1].find("\"fd00::1\" is not IPv4") != std::string::npos);
  CHECK(out.warnings[2].find("endpoints[3].addresses is empty") != std::string::npos);
  CHECK(out.warnings[3].find("endpoints[4].conditions.ready must be true or false") != std::string::npos);
}

TEST_CASE("an FQDN EndpointSlice is kept without endpoints") {
  auto out = decodeYaml(R"(
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ext, labels: {kubernetes.io/service-name: ext}}
addressType: FQDN
ports: [{port: 443}]
endpoints:
- addresses: [example.com]
)");
  CHECK(out.errors.empty());
  CHECK(out.warnings.empty());
  REQUIRE(out.slices.size() == 1);
  CHECK(out.slices[0].addressType == "FQDN");
  CHECK(out.slices[0].ports.size() == 1);
  CHECK(out.slices[0].endpoints.empty());
}

TEST_CASE("an EndpointSlice without the service-name label decodes with an empty serviceName") {
  auto out = decodeYaml("kind: EndpointSlice\nmetadata: {name: orphan}\naddressType: IPv4\n");
  REQUIRE(out.slices.size() == 1);
  CHECK(out.slices[0].serviceName == "");
}

TEST_CASE("a Node decodes pod CIDRs (or the single podCIDR) and addresses") {
  auto out = decodeYaml(R"(
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {topology.kubernetes.io/zone: z1}}
spec: {podCIDR: 10.244.1.0/24, podCIDRs: [10.244.1.0/24, "fd00:244:1:0::/64"]}
status:
  addresses:
  - {type: InternalIP, address: 192.168.1.10}
  - {type: InternalIP, address: "FD00::10"}
  - {type: Hostname, address: node-a}
  - {type: ExternalIP, address: not-an-ip}
---
kind: Node
metadata: {name: node-b}
spec: {podCIDR: 10.244.2.7/24}
)");
  CHECK(out.errors.empty());
  REQUIRE(out.nodes.size() == 2);
  CHECK(out.nodes[0].meta.ns == "");
  CHECK(out.nodes[0].podCIDRs == std::vector<std::string>{"10.244.1.0/24", "fd00:244:1::/64"});
  using Addr = std::pair<std::string, std::string>;
  CHECK(out.nodes[0].addresses ==
        std::vector<Addr>{{"InternalIP", "192.168.1.10"}, {"InternalIP", "fd00::10"}, {"Hostname", "node-a"}});
  CHECK(anyContains(out.warnings, "Node node-a: status.addresses[3].address \"not-an-ip\" is not an IP address"));
  CHECK(out.nodes[1].podCIDRs == std::vector<std::string>{"10.244.2.0/24"});
}

TEST_CASE("a stray comma where a YAML document starts is a syntax error, not an endless stream of documents") {
  // Found by unit/fuzz/manifest_yaml: yaml-cpp 0.7's LoadAll never returned on these (an empty
  // document per turn, the ',' never consumed) and grew until memory ran out.
  for (std::string text : {std::string(","), std::string(",{\"apiVersion\":\"v1\"}"), std::string("!!str ,"),
                           std::string("&x ,"), serviceYaml("ok") + "---\n,\n"}) {
    INFO(text);
    DecodedObjects out;
    std::string err;
    CHECK_FALSE(decodeManifest(text, false, out, &err));
    CHECK(err.find("YAML: line ") == 0);
    CHECK(out.services.empty());
  }
  DecodedObjects out;
  std::string err;
  CHECK(decodeManifest(serviceYaml("ok") + "---\n---\n" + serviceYaml("two"), false, out, &err));  // empty documents are fine
  CHECK(out.services.size() == 2);
}

TEST_CASE("a Node decodes what /healthz needs: deletionTimestamp and taint keys; a bad taint costs only itself") {
  auto out = decodeYaml(R"(
kind: Node
metadata: {name: node-a, deletionTimestamp: "2026-01-01T00:00:00Z"}
spec:
  taints:
  - {key: ToBeDeletedByClusterAutoscaler, value: "1700000000", effect: NoSchedule}
  - {key: [not, a, string]}
  - {key: node.kubernetes.io/unschedulable, effect: NoSchedule}
---
kind: Node
metadata: {name: node-b, deletionTimestamp: null}
)");
  CHECK(out.errors.empty());
  REQUIRE(out.nodes.size() == 2);
  CHECK(out.nodes[0].deletionTimestamp == "2026-01-01T00:00:00Z");
  CHECK(out.nodes[0].taintKeys ==
        std::vector<std::string>{"ToBeDeletedByClusterAutoscaler", "node.kubernetes.io/unschedulable"});
  CHECK(anyContains(out.warnings, "spec.taints[1].key"));
  CHECK(out.nodes[1].deletionTimestamp.empty());
  CHECK(out.nodes[1].taintKeys.empty());
}

TEST_CASE("a syntax error fails the whole text and leaves the output untouched") {
  DecodedObjects out;
  out.errors.push_back("earlier");
  std::string err;
  CHECK_FALSE(decodeManifest(serviceYaml("ok") + "---\nkind: Service\nmetadata: {name: [unclosed\n", false, out, &err));
  CHECK(err.find("YAML: line ") == 0);
  CHECK(out.services.empty());
  CHECK(out.errors == std::vector<std::string>{"earlier"});
  err.clear();
  CHECK_FALSE(decodeManifest("{\"kind\": \"Service\",", true, out, &err));
  CHECK(err.find("JSON: ") == 0);
  CHECK(out.services.empty());
}

TEST_CASE("absurdly deep nesting is refused without exhausting the stack") {
  DecodedObjects out;
  std::string err;
  std::string deepJson = std::string(200000, '[') + std::string(200000, ']');
  CHECK(decodeManifest(deepJson, true, out, &err));  // parses (iteratively); not an object
  CHECK(out.errors == std::vector<std::string>{"document is a list, not an object"});
  std::string deepYaml = std::string(200000, '[') + std::string(200000, ']');
  CHECK_FALSE(decodeManifest(deepYaml, false, out, &err));
  CHECK(err.find("YAML: ") == 0);
}

TEST_CASE("empty or whitespace-only text is a file with no objects") {
  for (bool json : {false, true}) {
    DecodedObjects out;
    std::string err;
    CHECK(decodeManifest(" \n\t\n", json, out, &err));
    CHECK(out.services.empty());
    CHECK(out.errors.empty());
  }
}

TEST_CASE("YAML scalars: plain booleans and integers are typed, quoted ones stay strings") {
  auto out = decodeYaml(R"(
kind: EndpointSlice
metadata:
  name: typed
  labels: {kubernetes.io/service-name: web, service.kubernetes.io/service-proxy-name: "1", service.kubernetes.io/headless: "true"}
  resourceVersion: 12
addressType: IPv4
ports: [{port: 8080, name: '8080-tcp'}]
endpoints:
- addresses: ['10.0.0.1']
  conditions: {ready: True, serving: false}
- addresses: ['10.0.0.2']
  conditions: {ready: "true"}
)");
  REQUIRE(out.slices.size() == 1);
  const EndpointSlice& s = out.slices[0];
  CHECK(s.meta.labels.at("service.kubernetes.io/service-proxy-name") == "1");
  CHECK(s.meta.labels.at("service.kubernetes.io/headless") == "true");
  CHECK(s.meta.resourceVersion == "12");
  CHECK(s.ports[0].name == "8080-tcp");
  REQUIRE(s.endpoints.size() == 1);  // the quoted "true" is a string, not a bool
  CHECK(s.endpoints[0].conditions.ready == std::optional<bool>(true));
  CHECK(s.endpoints[0].conditions.serving == std::optional<bool>(false));
  CHECK(anyContains(out.warnings, "endpoints[1].conditions.ready must be true or false, got a string"));
}

TEST_CASE("a non-string label value is refused as by the API server") {
  auto out = decodeYaml("kind: Service\nmetadata: {name: l, labels: {version: 2}}\nspec: {}\n");
  CHECK(out.services.empty());
  CHECK(out.errors == std::vector<std::string>{"Service default/l: metadata.labels[\"version\"] must be a string, got a number"});
}

TEST_CASE("decode keeps the labels and annotations the proxy's readers look up, and only those") {
  // The readers' own names: a key one of them starts to read must be added to the kept lists.
  for (const char* label : {kpn::services::kServiceProxyNameLabel, kpn::services::kHeadlessLabel, "topology.kubernetes.io/zone"})
    CHECK(std::count(std::begin(kpn::api::kReadLabels), std::end(kpn::api::kReadLabels), label) == 1);
  for (const char* annotation : {kpn::services::kSchedulerAnnotation, kpn::kube::kLastChangeTriggerTime})
    CHECK(std::count(std::begin(kpn::api::kReadAnnotations), std::end(kpn::api::kReadAnnotations), annotation) == 1);

  auto out = decodeYaml(R"(
kind: EndpointSlice
metadata:
  name: web-1
  labels: {kubernetes.io/service-name: web, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}
  annotations: {endpoints.kubernetes.io/last-change-trigger-time: "2024-05-01T10:00:00Z", kubectl.kubernetes.io/last-applied-configuration: "{}"}
addressType: IPv4
endpoints: []
)");
  REQUIRE(out.slices.size() == 1);
  CHECK(out.slices[0].serviceName == "web");
  CHECK(out.slices[0].meta.labels.empty());
  CHECK(out.slices[0].meta.annotations ==
        std::map<std::string, std::string>{{"endpoints.kubernetes.io/last-change-trigger-time", "2024-05-01T10:00:00Z"}});
  // What was dropped is not missed by the encode -> decode round trip `trace` makes.
  CHECK(decodeJson(kpn::api::encodeEndpointSlice(out.slices[0])).slices.at(0) == out.slices[0]);
}

TEST_CASE("name validators follow the Kubernetes rules") {
  CHECK(isDns1123Label("a-1"));
  CHECK_FALSE(isDns1123Label(std::string(64, 'a')));
  CHECK(isDns1123Label(std::string(63, 'a')));
  CHECK_FALSE(isDns1123Label("a.b"));
  CHECK(isDns1123Subdomain("a.b-c.d"));
  CHECK_FALSE(isDns1123Subdomain("a..b"));
  CHECK_FALSE(isDns1123Subdomain(std::string(254, 'a')));
  CHECK(isDns1123Label("1abc"));
  CHECK(isDns1123Label("a--b"));
  CHECK_FALSE(isDns1123Label("-a"));
  CHECK_FALSE(isDns1123Label("a-"));
  CHECK_FALSE(isDns1123Label(""));
  CHECK(isDns1123Subdomain(std::string(253, 'a')));
  CHECK_FALSE(isIanaServiceName(""));
  CHECK(isIanaServiceName("http-2"));
  CHECK(isIanaServiceName("abcdefghijklmno"));
  CHECK_FALSE(isIanaServiceName("80"));
  CHECK_FALSE(isIanaServiceName("a--b"));
  CHECK_FALSE(isIanaServiceName("abcdefghijklmnop"));
}

TEST_CASE("Service equality sees every field") {
  auto out = decodeYaml(serviceYaml("eq") + "---\n" + serviceYaml("eq"));
  REQUIRE(out.services.size() == 2);
  CHECK(out.services[0] == out.services[1]);
  Service changed = out.services[1];
  changed.ports[0].targetPort = "x";
  CHECK_FALSE(out.services[0] == changed);
  changed = out.services[1];
  changed.trafficDistribution = "PreferClose";
  CHECK_FALSE(out.services[0] == changed);
}

TEST_CASE("protocolName is the nft spelling") {
  CHECK(std::string(protocolName(Protocol::TCP)) == "tcp");
  CHECK(std::string(protocolName(Protocol::UDP)) == "udp");
  CHECK(std::string(protocolName(Protocol::SCTP)) == "sctp");
}

TEST_CASE("an endpoint's further addresses and hints are kept beside the first, and survive encode and decode") {
  auto out = decodeYaml(R"(
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: multi, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- addresses: ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
  nodeName: node-a
  zone: zone-1
  hints: {forZones: [{name: zone-1}]}
- addresses: ["10.0.0.9"]
  nodeName: node-a
)");
  REQUIRE(out.slices.size() == 1);
  const EndpointSlice& s = out.slices[0];
  REQUIRE(s.endpoints.size() == 2);
  CHECK(s.endpoints[0].address == "10.0.0.1");
  CHECK(s.endpoints[0].addresses() == std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"});
  CHECK(s.endpoints[0].hintZones() == std::vector<std::string>{"zone-1"});
  CHECK(s.endpoints[1].addresses() == std::vector<std::string>{"10.0.0.9"});
  CHECK(s.endpoints[1].hintZones().empty());
  CHECK(s.endpoints[0].nodeName == s.endpoints[1].nodeName);
  CHECK(&s.endpoints[0].nodeName.str() == &s.endpoints[1].nodeName.str());  // one interned copy

  DecodedObjects again = decodeJson(encodeEndpointSlice(s));
  REQUIRE(again.slices.size() == 1);
  CHECK(again.slices[0] == s);
  CHECK(again.slices[0].endpoints[0].addresses() == s.endpoints[0].addresses());
}

}  // namespace
}  // namespace kpn::api
