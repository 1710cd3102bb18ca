package app

import (
	"strings"
	"testing"
	"time"
)

// Tracing is off by default, with the documented defaults.
func TestTracingDefaults(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.OTLPEndpoint != "" || c.OTLPProtocol != "" || c.OTLPInsecure || len(c.OTLPHeaders) != 0 || len(c.TraceTags) != 0 {
		t.Errorf("tracing settings not off by default: %+v", c)
	}
	if c.TraceSampling != "always" || c.OTLPExportTimeout != 5*time.Second || c.OTLPBatchSize != 100 || c.Gateway.TraceLinkTemplate != "" {
		t.Errorf("defaults: sampling %q timeout %s batch %d link %q", c.TraceSampling, c.OTLPExportTimeout, c.OTLPBatchSize, c.Gateway.TraceLinkTemplate)
	}
}

// Every tracing setting is read from its flag and its environment variable
// (BAAGENT_OTLP_ENDPOINT is what the Kubernetes overlay sets).
func TestTracingSettings(t *testing.T) {
	c, err := load(t, []string{
		"-otlp-protocol=HTTP", "-otlp-headers=api-key=s3cret, x-team = agents", "-otlp-insecure",
		"-trace-sampling=medium", "-otlp-export-timeout=2500ms", "-otlp-batch-size=512",
		"-trace-service-name=my-agents", "-trace-environment=staging", "-trace-tags=region=eu,team=ai",
		"-trace-link-template=http://localhost:16686/trace/{trace_id}",
	}, map[string]string{"BAAGENT_OTLP_ENDPOINT": "collector:4317"})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.OTLPEndpoint != "collector:4317", c.OTLPProtocol != "http", !c.OTLPInsecure:
		t.Errorf("endpoint %q protocol %q insecure %v", c.OTLPEndpoint, c.OTLPProtocol, c.OTLPInsecure)
	case c.OTLPHeaders["api-key"] != "s3cret" || c.OTLPHeaders["x-team"] != "agents" || len(c.OTLPHeaders) != 2:
		t.Errorf("headers %v", c.OTLPHeaders)
	case c.TraceSampling != "medium", c.OTLPExportTimeout != 2500*time.Millisecond, c.OTLPBatchSize != 512:
		t.Errorf("sampling %q timeout %s batch %d", c.TraceSampling, c.OTLPExportTimeout, c.OTLPBatchSize)
	case c.TraceServiceName != "my-agents", c.TraceEnvironment != "staging":
		t.Errorf("service %q environment %q", c.TraceServiceName, c.TraceEnvironment)
	case c.TraceTags["region"] != "eu" || c.TraceTags["team"] != "ai":
		t.Errorf("tags %v", c.TraceTags)
	case c.Gateway.TraceLinkTemplate != "http://localhost:16686/trace/{trace_id}":
		t.Errorf("link template %q", c.Gateway.TraceLinkTemplate)
	}
	for _, ok := range []string{"http://collector:4318", "https://otel.example.com/v1/traces", "[::1]:4317"} {
		if c, err := load(t, []string{"-otlp-endpoint=" + ok}, nil); err != nil || c.OTLPEndpoint != ok {
			t.Errorf("-otlp-endpoint=%s: %v", ok, err)
		}
	}
	for _, lvl := range []string{"always", "HIGH", "medium", "low", "never"} {
		if _, err := load(t, []string{"-trace-sampling=" + lvl}, nil); err != nil {
			t.Errorf("-trace-sampling=%s: %v", lvl, err)
		}
	}
}

// A wrong tracing setting fails before anything starts, naming the setting.
func TestTracingInvalid(t *testing.T) {
	for _, tc := range []struct{ arg, setting string }{
		{"-otlp-endpoint=collector", "otlp-endpoint"},
		{"-otlp-endpoint=collector:http", "otlp-endpoint"},
		{"-otlp-endpoint=grpc://collector:4317", "otlp-endpoint"},
		{"-otlp-endpoint=http://", "otlp-endpoint"},
		{"-otlp-protocol=thrift", "otlp-protocol"},
		{"-otlp-headers=novalue", "otlp-headers"},
		{"-otlp-headers==v", "otlp-headers"},
		{"-otlp-headers=a=1,a=2", "otlp-headers"},
		{"-otlp-export-timeout=0s", "otlp-export-timeout"},
		{"-otlp-export-timeout=-1s", "otlp-export-timeout"},
		{"-otlp-export-timeout=10m", "otlp-export-timeout"},
		{"-otlp-batch-size=0", "otlp-batch-size"},
		{"-otlp-batch-size=10001", "otlp-batch-size"},
		{"-trace-sampling=sometimes", "trace-sampling"},
		{"-trace-sampling=0.5", "trace-sampling"},
		{"-trace-service-name=a\nb", "trace-service-name"},
		{"-trace-environment=" + strings.Repeat("e", 257), "trace-environment"},
		{"-trace-tags=region", "trace-tags"},
		{"-trace-link-template=http://localhost:16686/trace/", "trace-link-template"},
		{"-trace-link-template=javascript:alert({trace_id})", "trace-link-template"},
		{"-trace-link-template={trace_id}", "trace-link-template"},
	} {
		_, err := load(t, []string{tc.arg}, nil)
		if err == nil || !strings.Contains(err.Error(), "setting "+tc.setting+":") {
			t.Errorf("%s: error %v, want one naming setting %s", tc.arg, err, tc.setting)
		}
	}
	if _, err := load(t, nil, map[string]string{"BAAGENT_OTLP_BATCH_SIZE": "many"}); err == nil || !strings.Contains(err.Error(), "BAAGENT_OTLP_BATCH_SIZE") {
		t.Errorf("bad environment value: %v", err)
	}
}

// The YAML file sets tracing like any other setting; flags win.
func TestTracingFromFile(t *testing.T) {
	p := writeFile(t, "c.yaml", "otlp-endpoint: localhost:4317\ntrace-sampling: low\n")
	c, err := load(t, []string{"-config=" + p, "-trace-sampling=high"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.OTLPEndpoint != "localhost:4317" || c.TraceSampling != "high" {
		t.Errorf("endpoint %q sampling %q", c.OTLPEndpoint, c.TraceSampling)
	}
}
