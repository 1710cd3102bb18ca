package toolrunner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// selfSigned writes a self-signed certificate for hook.test and its key
// to dir and returns their paths and the TLS certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hook.test"},
		DNSNames: []string{"hook.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	certFile, keyFile = filepath.Join(dir, "hook.pem"), filepath.Join(dir, "hook-key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

func TestHookGRPCTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, _, cert := selfSigned(t, dir)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	h := &hookServer{}
	baagentv1.RegisterToolHookServiceServer(srv, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	addr := lis.Addr().String()

	s, _, echo := hookedServer(t, "hooks:\n"+
		fmt.Sprintf("  - name: secure\n    phase: pre\n    tools: [echo]\n    timeout: 25s\n    grpc: {address: %q, tls: {enabled: true, ca_file: %q, server_name: hook.test}}\n", addr, certFile)+
		fmt.Sprintf("  - name: unverified\n    phase: pre\n    tools: [write_file]\n    timeout: 25s\n    grpc: {address: %q, tls: {enabled: true}}\n", addr))
	if res := mustInvoke(t, s, req("echo", map[string]any{"x": "a"})); !res.GetSuccess() || echo.calls.Load() != 1 {
		t.Fatalf("call through a TLS hook: %s", res.GetErrorMessage())
	}
	if got := h.seen(); len(got) != 1 || got[0] != "pre:echo" {
		t.Fatalf("hook saw %v", got)
	}
	// The server's certificate is not in the system roots: the hook fails.
	res := mustInvoke(t, s, req("write_file", map[string]any{"x": "a"}))
	wantFailure(t, res, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INTERNAL_ERROR, codeHookFailed, `"unverified"`)

	for _, tc := range []struct{ tls, want string }{
		{`{ca_file: /x}`, "grpc.tls.enabled"},
		{`{enabled: true, cert_file: /x}`, "cert_file and key_file"},
	} {
		_, err := ParseHooks([]byte("hooks:\n  - {name: a, phase: pre, tools: [a], grpc: {address: x, tls: " + tc.tls + "}}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tls %s: error %v, want %q", tc.tls, err, tc.want)
		}
	}
}
