package memory

import (
	"slices"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/scripted/scriptedtest"
	"github.com/baagent/baagent/services/memory/extract"
)

// TestScriptedModelExtraction runs the whole path offline as `make run`
// does: extraction by the scripted model over real HTTP (its gazetteer of
// the sample data), the lexical embedding, the store; then search finds
// what the episode named and, through the graph, what it did not.
func TestScriptedModelExtraction(t *testing.T) {
	t.Parallel()
	model, err := scripted.New(scripted.Options{Dir: "../../examples/scenarios"})
	if err != nil {
		t.Fatal(err)
	}
	_, base := scriptedtest.Serve(t, model)
	x, err := extract.NewOpenAI(extract.Config{BaseURL: base, Model: scripted.ModelName})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Options{Extractor: x}, true)
	ctx := t.Context()
	ep := ts.add(t, "acme", "Q: Who bought the most Edge Router R1 units?\nA: Acme Labs, in the North region, with 12 units.")
	got, err := ts.c.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: "acme", Id: ep.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got.GetEntities() {
		names = append(names, e.GetName())
	}
	for _, want := range []string{"Acme Labs", "Edge Router R1", "North"} {
		if !slices.Contains(names, want) {
			t.Fatalf("extracted %v, want %s among them", names, want)
		}
	}
	res, err := ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "Acme Labs"})
	if err != nil || len(res.GetHits()) == 0 || res.GetHits()[0].GetEntity().GetName() != "Acme Labs" {
		t.Fatalf("search = %v, %v", hitNames(res.GetHits()), err)
	}
	if len(res.GetHits()[0].GetRelations()) == 0 {
		t.Errorf("Acme Labs has no relations: %v", res.GetHits()[0])
	}
	if v := counterValue(t, ts.reg, "baagent_memory_extraction_tokens_total", "kind", "completion"); v == 0 {
		t.Error("no extraction tokens counted")
	}
}
