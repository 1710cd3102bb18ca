package grpcclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLSFiles secures a client connection configured in a file (a
// ToolProvider's or a tool hook's `tls:`).
type TLSFiles struct {
	// Enabled turns TLS on; the system roots verify the server unless
	// CAFile is set.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of roots that verify the server.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate for mutual TLS;
	// both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name verified in the server certificate.
	ServerName string `yaml:"server_name"`
}

// Credentials are the transport credentials of c: plaintext when TLS is
// off. The files are read now, once.
func (c TLSFiles) Credentials() (credentials.TransportCredentials, error) {
	if !c.Enabled {
		return insecure.NewCredentials(), nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate found", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(tc), nil
}
