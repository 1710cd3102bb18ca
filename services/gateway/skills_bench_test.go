package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// BenchmarkSkillUpload puts a 1 MiB skill archive through the gateway to an
// in-memory skills service: as the raw body over HTTP (application/gzip),
// as JSON over HTTP (base64 content), and over gRPC.
func BenchmarkSkillUpload(b *testing.B) {
	f := newFakeSkills("sales-analysis")
	conn := vt.Serve(b, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterSkillsServiceServer(gs, f) })
	e := newEnvTB(b, Options{Skills: baagentv1.NewSkillsServiceClient(conn)})
	content := make([]byte, 1<<20)
	_, _ = rand.Read(content)
	jsonBody := []byte(`{"content":"` + base64.StdEncoding.EncodeToString(content) + `"}`)
	put := func(b *testing.B, ct string, body []byte) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, e.base+"/v1/skills/bench-skill", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.Run("http-raw", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			put(b, "application/gzip", content)
		}
	})
	b.Run("http-json", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			put(b, "application/json", jsonBody)
		}
	})
	b.Run("grpc", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		ctx := withKey(context.Background(), keyAcme)
		req := &baagentv1.GatewayServicePutSkillRequest{Name: "bench-skill", Content: content}
		for b.Loop() {
			if _, err := e.client.PutSkill(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
