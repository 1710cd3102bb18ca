package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/scripted/scriptedtest"
)

const extractionSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["entities", "relations"],
  "properties": {
    "entities": {"type": "array", "items": {
      "type": "object", "additionalProperties": false,
      "required": ["name", "type", "summary", "attributes"],
      "properties": {
        "name": {"type": "string"}, "type": {"type": "string"}, "summary": {"type": "string"},
        "attributes": {"type": "array", "items": {"type": "object", "additionalProperties": false,
          "required": ["key", "value"], "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}}
      }}},
    "relations": {"type": "array", "items": {
      "type": "object", "additionalProperties": false,
      "required": ["source", "target", "type", "fact", "confidence"],
      "properties": {"source": {"type": "string"}, "target": {"type": "string"}, "type": {"type": "string"},
        "fact": {"type": "string"}, "confidence": {"type": "number"}}}}
  }
}`

func openaiClient(t *testing.T) *openai.Client {
	t.Helper()
	srv, err := scripted.New(scripted.Options{Dir: scenariosDir})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Gazetteer() == nil || srv.Gazetteer().Entities() < 100 {
		t.Fatalf("gazetteer not loaded: %+v", srv.Gazetteer())
	}
	_, base := scriptedtest.Serve(t, srv)
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = base
	return openai.NewClientWithConfig(cfg)
}

func structured(name, schema, user string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model: scripted.ModelName,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "Extract entities."},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type:       openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: name, Schema: json.RawMessage(schema), Strict: true},
		},
	}
}

func TestMemoryExtractionOverHTTP(t *testing.T) {
	c := openaiClient(t)
	resp, err := c.CreateChatCompletion(context.Background(), structured(scripted.SchemaExtraction, extractionSchema,
		"Q: Which product category had the highest revenue in Q3 2026?\nA: Hardware, led by Rack Server S20 in the West region."))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != scripted.ModelName || resp.SystemFingerprint != "scripted" || resp.Usage.TotalTokens == 0 {
		t.Errorf("response not labelled as scripted: model %q fingerprint %q usage %+v", resp.Model, resp.SystemFingerprint, resp.Usage)
	}
	var out struct {
		Entities []struct {
			Name, Type, Summary string
			Attributes          []struct{ Key, Value string }
		}
		Relations []struct {
			Source, Target, Type, Fact string
			Confidence                 float64
		}
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &out); err != nil {
		t.Fatalf("content is not the schema's JSON: %v\n%s", err, resp.Choices[0].Message.Content)
	}
	types := map[string]string{}
	for _, e := range out.Entities {
		types[e.Name] = e.Type
	}
	for name, typ := range map[string]string{"products.category": "Column", "revenue": "Metric", "Q3 2026": "TimePeriod", "Hardware": "ProductCategory", "Rack Server S20": "Product", "West": "Location"} {
		if types[name] != typ {
			t.Errorf("entity %s: type %q, want %q (all: %v)", name, types[name], typ, types)
		}
	}
	found := false
	for _, r := range out.Relations {
		if r.Source == "Rack Server S20" && r.Type == "IN_CATEGORY" && r.Target == "Hardware" && r.Confidence > 0 && r.Fact != "" {
			found = true
		}
		if types[r.Source] == "" || types[r.Target] == "" {
			t.Errorf("relation %+v names an entity not returned", r)
		}
	}
	if !found {
		t.Errorf("Rack Server S20 IN_CATEGORY Hardware missing: %+v", out.Relations)
	}
}

func TestMemoryRequestsAreValidatedLikeTheAPI(t *testing.T) {
	c := openaiClient(t)
	loose := strings.Replace(extractionSchema, `"required": ["source", "target", "type", "fact", "confidence"]`, `"required": ["source", "target", "type", "fact"]`, 1)
	open := strings.Replace(extractionSchema, `"additionalProperties": false,
  "required": ["entities", "relations"]`, `"required": ["entities", "relations"]`, 1)
	cases := map[string]openai.ChatCompletionRequest{
		"Missing 'confidence'":                        structured(scripted.SchemaExtraction, loose, "x"),
		"'additionalProperties' is required":          structured(scripted.SchemaReflexion, open, "x"),
		"must be a JSON Schema of 'type: \"object\"'": structured(scripted.SchemaCommunity, `{"type":"array","items":{"type":"string"}}`, "x"),
	}
	for want, req := range cases {
		_, err := c.CreateChatCompletion(context.Background(), req)
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(apiErr.Message, want) || apiErr.Param == nil || *apiErr.Param != "response_format" {
			t.Errorf("%s: err = %v", want, err)
		}
	}
	// Not strict: accepted as the API does.
	req := structured(scripted.SchemaExtraction, loose, "revenue")
	req.ResponseFormat.JSONSchema.Strict = false
	if _, err := c.CreateChatCompletion(context.Background(), req); err != nil {
		t.Errorf("non-strict schema refused: %v", err)
	}
}

func TestMemoryCommunityAndReflexionOverHTTP(t *testing.T) {
	c := openaiClient(t)
	const communitySchema = `{"type":"object","additionalProperties":false,"required":["name","summary"],"properties":{"name":{"type":"string"},"summary":{"type":"string"}}}`
	resp, err := c.CreateChatCompletion(context.Background(), structured(scripted.SchemaCommunity, communitySchema,
		"Members:\n- Hardware (ProductCategory): servers\n- Rack Server S10 (Product): a server\n- NAS Storage 8TB (Product): storage\n\nFacts:\n- Rack Server S10 is in the Hardware category.\n"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct{ Name, Summary string }
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &sum); err != nil || !strings.HasPrefix(sum.Summary, "[scripted model") || !strings.Contains(sum.Name, "Hardware") {
		t.Errorf("community answer %+v (%v)", sum, err)
	}
	resp, err = c.CreateChatCompletion(context.Background(), structured(scripted.SchemaReflexion, extractionSchema,
		"Text:\nSMB customers in the South region bought Dashboard Builder.\n\nAlready extracted:\n- SMB (Concept)\n- South (Location)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; !strings.Contains(got, `"Dashboard Builder"`) || strings.Contains(got, `"name":"SMB"`) {
		t.Errorf("reflexion answer %s", got)
	}
}

// A request with another response_format, or none, still plays scenarios.
func TestOtherStructuredRequestsStillPlayScenarios(t *testing.T) {
	c := openaiClient(t)
	req := structured("something_else", `{"type":"object"}`, "Which product category had the highest revenue last quarter?")
	resp, err := c.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices[0].Message.ToolCalls) == 0 {
		t.Errorf("the scenario did not play: %+v", resp.Choices[0].Message)
	}
}
