#include "pkg/kube/tls_diagnose.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>

#include "pkg/kube/connect_diagnose.h"

namespace kpn::kube {
namespace {

template <class T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Deleter<SSL, SSL_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

std::string subjectOf(X509* cert) {
  char buf[256];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
  return buf;
}

std::string issuerOf(X509* cert) {
  char buf[256];
  X509_NAME_oneline(X509_get_issuer_name(cert), buf, sizeof buf);
  return buf;
}

}  // namespace

std::string diagnoseTls(const ClientConfig& cfg) {
  const ServerAddress address = serverAddress(cfg.server);
  const std::string& host = address.host;
  const std::string& port = address.port;
  std::string checkName = cfg.tlsServerName.empty() ? host : cfg.tlsServerName;

  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return "cannot resolve " + host;
  Fd sock;
  sock.fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  setsockopt(sock.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(sock.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc = connect(sock.fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0) return "cannot inspect its certificate: " + diagnoseConnect(cfg.server);

  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  if (!cfg.clientCertPem.empty()) {
    // Some servers insist on a client certificate before showing theirs.
    BIO* b = BIO_new_mem_buf(cfg.clientCertPem.data(), static_cast<int>(cfg.clientCertPem.size()));
    X509Ptr c(PEM_read_bio_X509(b, nullptr, nullptr, nullptr));
    BIO_free(b);
    b = BIO_new_mem_buf(cfg.clientKeyPem.data(), static_cast<int>(cfg.clientKeyPem.size()));
    EVP_PKEY* k = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    if (c && k) {
      SSL_CTX_use_certificate(ctx.get(), c.get());
      SSL_CTX_use_PrivateKey(ctx.get(), k);
    }
    EVP_PKEY_free(k);
  }
  SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), sock.fd);
  SSL_set_tlsext_host_name(ssl.get(), checkName.c_str());
  if (SSL_connect(ssl.get()) != 1) {
    unsigned long e = ERR_get_error();
    char buf[256] = "unknown error";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    return std::string("the TLS handshake fails even without verifying the server: ") + buf +
           (cfg.clientCertPem.empty() ? "" : " (is the client certificate accepted by the server?)");
  }
  X509Ptr cert(SSL_get1_peer_certificate(ssl.get()));
  if (!cert) return "the server sent no certificate";
  STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl.get());

  X509_STORE* store = X509_STORE_new();
  std::string trust;
  if (!cfg.caPem.empty()) {
    BIO* b = BIO_new_mem_buf(cfg.caPem.data(), static_cast<int>(cfg.caPem.size()));
    int n = 0;
    while (X509* ca = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, ca);
      X509_free(ca);
      n++;
    }
    BIO_free(b);
    ERR_clear_error();
    trust = "the CA in " + cfg.caSource;
    if (n == 0) {
      X509_STORE_free(store);
      return cfg.caSource + " holds no PEM certificate";
    }
  } else {
    X509_STORE_set_default_paths(store);
    trust = "the system's CAs (no certificate-authority configured)";
  }
  StoreCtxPtr sctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(sctx.get(), store, cert.get(), chain);
  int ok = X509_verify_cert(sctx.get());
  int err = X509_STORE_CTX_get_error(sctx.get());
  X509_STORE_free(store);
  std::string who = "the server's certificate (subject " + subjectOf(cert.get()) + ", issuer " + issuerOf(cert.get()) + ")";
  if (ok != 1) return who + " is not trusted by " + trust + ": " + X509_verify_cert_error_string(err);
  unsigned char addr[16];
  bool isIp = cfg.tlsServerName.empty() &&
              (inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1);
  int match = isIp ? X509_check_ip_asc(cert.get(), checkName.c_str(), 0)
                   : X509_check_host(cert.get(), checkName.c_str(), checkName.size(), 0, nullptr);
  if (match != 1) return who + " is trusted but not valid for " + checkName + " (set tls-server-name, or fix the certificate's SANs)";
  return who + " verifies here; the failure is elsewhere (protocol versions or ciphers)";
}

}  // namespace kpn::kube
