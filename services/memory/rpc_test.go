package memory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

const (
	acmeText  = "Acme Labs, an SMB customer in the North region, ordered 4 Edge Router R1 units in order SO1001."
	blueText  = "Blue Retail, an SMB customer in the South region, ordered a Rack Server S10 in order SO1002."
	cedarText = "Cedar Logistics bought two Edge Router R1 in order SO1003; the routers ship from the North warehouse."
)

// sampleExtractor knows three episodes about the sample data.
func sampleExtractor() *tableExtractor {
	return &tableExtractor{results: map[string]*extract.Result{
		acmeText: {Entities: []extract.Entity{
			ent("Acme Labs", "Customer", "SMB customer in the North region", "segment", "SMB"),
			ent("Edge Router R1", "Product", "Hardware router listed at 349.00"),
			ent("SO1001", "Order", "Order of 4 Edge Router R1 by Acme Labs"),
			ent("North", "Region", "Sales region North"),
		}, Relations: []extract.Relation{
			rel("Acme Labs", "PLACED", "SO1001", "Acme Labs placed order SO1001"),
			rel("SO1001", "CONTAINS", "Edge Router R1", "SO1001 contains 4 Edge Router R1"),
			rel("Acme Labs", "LOCATED_IN", "North", "Acme Labs is in the North region"),
		}, Usage: extract.Usage{Calls: 1, PromptTokens: 100, CompletionTokens: 40}},
		blueText: {Entities: []extract.Entity{
			ent("Blue Retail", "Customer", "SMB customer in the South region"),
			ent("Rack Server S10", "Product", "Hardware server listed at 2499.00"),
			ent("SO1002", "Order", "Order of a Rack Server S10 by Blue Retail"),
			ent("South", "Region", "Sales region South"),
		}, Relations: []extract.Relation{
			rel("Blue Retail", "PLACED", "SO1002", "Blue Retail placed order SO1002"),
			rel("SO1002", "CONTAINS", "Rack Server S10", "SO1002 contains a Rack Server S10"),
			rel("Blue Retail", "LOCATED_IN", "South", "Blue Retail is in the South region"),
		}},
		cedarText: {Entities: []extract.Entity{
			ent("Cedar Logistics", "Customer", "SMB customer in the South region"),
			ent("edge router r1", "Product", "Hardware router; ships from the North warehouse", "warehouse", "North"),
			ent("SO1003", "Order", "Order of 2 Edge Router R1 by Cedar Logistics"),
		}, Relations: []extract.Relation{
			rel("Cedar Logistics", "PLACED", "SO1003", "Cedar Logistics placed order SO1003"),
			rel("SO1003", "CONTAINS", "edge router r1", "SO1003 contains 2 Edge Router R1"),
		}},
	}}
}

func hitNames(hits []*baagentv1.SearchHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.GetEntity().GetName()
	}
	return out
}

// TestAddWaitSearch adds episodes, waits for them, and finds their
// entities through every search mode, the entity and graph reads and the
// stats.
func TestAddWaitSearch(t *testing.T) {
	t.Parallel()
	x := sampleExtractor()
	ts := newTestServer(t, Options{Extractor: x}, true)
	ctx := t.Context()
	ep := ts.add(t, "acme", acmeText)
	ts.add(t, "acme", blueText)
	ts.add(t, "acme", cedarText)
	if len(ep.GetEntityIds()) != 4 || ep.GetProcessedAt() == nil || ep.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_USER {
		t.Fatalf("synced episode = %v", ep)
	}

	got, err := ts.c.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: "acme", Id: ep.GetId()})
	if err != nil || len(got.GetEntities()) != 4 || got.GetEpisode().GetContent() != acmeText {
		t.Fatalf("GetEpisode = %v, %v", got, err)
	}

	// Hybrid: the customer named in the query first, found by all three
	// channels, with its relations and their names.
	res, err := ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "Acme Labs"})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetEmbeddingModel() == "" || len(res.GetHits()) == 0 {
		t.Fatalf("Search = %v", res)
	}
	top := res.GetHits()[0]
	if top.GetEntity().GetName() != "Acme Labs" || len(top.GetChannels()) != 3 {
		t.Fatalf("top hit = %v (hits %v)", top, hitNames(res.GetHits()))
	}
	if len(top.GetRelations()) != 2 || !slices.ContainsFunc(maps2values(top.GetRelatedNames()), func(n string) bool { return n == "SO1001" }) {
		t.Errorf("top hit relations %v, names %v", top.GetRelations(), top.GetRelatedNames())
	}
	for i := 1; i < len(res.GetHits()); i++ {
		if res.GetHits()[i].GetScore() > res.GetHits()[i-1].GetScore() {
			t.Fatalf("hits not best first: %v", res.GetHits())
		}
	}

	// Graph: what Acme Labs is connected to, not named in the query.
	res, err = ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "What did Acme Labs order?", Mode: baagentv1.SearchMode_SEARCH_MODE_GRAPH})
	if err != nil {
		t.Fatal(err)
	}
	names := hitNames(res.GetHits())
	if len(names) < 4 || names[0] != "Acme Labs" || !slices.Contains(names, "SO1001") || !slices.Contains(names, "Edge Router R1") {
		t.Fatalf("graph hits = %v", names)
	}
	for _, h := range res.GetHits() {
		if len(h.GetChannels()) != 1 || h.GetChannels()[0].GetChannel() != channelGraph {
			t.Fatalf("graph-only hit with channels %v", h.GetChannels())
		}
	}

	// Keyword: an exact code.
	res, err = ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "SO1002", Mode: baagentv1.SearchMode_SEARCH_MODE_KEYWORD, TopK: 1})
	if err != nil || len(res.GetHits()) != 1 || res.GetHits()[0].GetEntity().GetName() != "SO1002" {
		t.Fatalf("keyword search = %v, %v", res, err)
	}

	// Vector: a partial word.
	res, err = ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "logistic", Mode: baagentv1.SearchMode_SEARCH_MODE_VECTOR, TopK: 3})
	if err != nil || !slices.Contains(hitNames(res.GetHits()), "Cedar Logistics") {
		t.Fatalf("vector search = %v, %v", hitNames(res.GetHits()), err)
	}
	for _, h := range res.GetHits() {
		if len(h.GetChannels()) != 1 || h.GetChannels()[0].GetChannel() != channelVector || h.GetChannels()[0].GetScore() <= 0 {
			t.Fatalf("vector-only hit with channels %v", h.GetChannels())
		}
	}

	// Type filter, every channel.
	res, err = ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "Acme Labs router order", EntityTypes: []string{"Product"}})
	if err != nil || len(res.GetHits()) == 0 {
		t.Fatalf("typed search = %v, %v", res, err)
	}
	for _, h := range res.GetHits() {
		if h.GetEntity().GetType() != "Product" {
			t.Fatalf("typed search returned %v", h.GetEntity())
		}
	}

	// The entity, its graph, the stats.
	router := findEntity(t, ts, "acme", "Edge Router R1")
	if router.GetMentionCount() != 2 || router.GetAttributes()["warehouse"] != "North" {
		t.Errorf("merged router = %v", router)
	}
	ge, err := ts.c.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: "acme", Id: router.GetId()})
	if err != nil || len(ge.GetRelations()) != 2 || len(ge.GetEpisodes()) != 2 || len(ge.GetRelatedNames()) != 3 {
		t.Fatalf("GetEntity = %v, %v", ge, err)
	}
	g, err := ts.c.GetGraph(ctx, &baagentv1.GetGraphRequest{Tenant: "acme", EntityId: router.GetId(), Depth: 2})
	if err != nil || len(g.GetEntities()) < 5 || g.GetEntities()[0].GetId() != router.GetId() {
		t.Fatalf("GetGraph = %v, %v", g, err)
	}
	st, err := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "acme"})
	if err != nil || st.GetEpisodes() != 3 || st.GetEntities() != 10 || st.GetRelations() != 8 || st.GetBackend() != ts.store.Backend() || st.GetEmbeddingModel() != "lexical-hash-v1" {
		t.Fatalf("Stats = %v, %v", st, err)
	}
	list, err := ts.c.ListEntities(ctx, &baagentv1.ListEntitiesRequest{Tenant: "acme", Type: "Order", PageSize: 2})
	if err != nil || len(list.GetEntities()) != 2 || list.GetNextPageToken() == "" {
		t.Fatalf("ListEntities = %v, %v", list, err)
	}
	next, err := ts.c.ListEntities(ctx, &baagentv1.ListEntitiesRequest{Tenant: "acme", Type: "Order", PageSize: 2, PageToken: list.GetNextPageToken()})
	if err != nil || len(next.GetEntities()) != 1 || next.GetNextPageToken() != "" {
		t.Fatalf("ListEntities page 2 = %v, %v", next, err)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_extraction_tokens_total", "kind", "prompt"); v != 100 {
		t.Errorf("prompt tokens metric = %v, want 100", v)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_episodes_total", "outcome", "synced"); v != 3 {
		t.Errorf("synced metric = %v, want 3", v)
	}
}

func maps2values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// findEntity lists the tenant's entities by name prefix and returns the
// one named name.
func findEntity(t *testing.T, ts *testServer, tenant, name string) *baagentv1.Entity {
	t.Helper()
	list, err := ts.c.ListEntities(t.Context(), &baagentv1.ListEntitiesRequest{Tenant: tenant, NamePrefix: name, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.GetEntities() {
		if e.GetName() == name {
			return e
		}
	}
	t.Fatalf("no entity %q in %v", name, list.GetEntities())
	return nil
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want %v", what, err, code)
	}
}

// TestTenantsAreIsolated checks that one tenant's ids are NotFound to
// another, and that its search, lists and stats see nothing of them.
func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Extractor: sampleExtractor()}, true)
	ctx := t.Context()
	ep := ts.add(t, "alpha", acmeText)
	en := ep.GetEntityIds()[0]

	_, err := ts.c.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: "beta", Id: ep.GetId()})
	wantCode(t, "GetEpisode", err, codes.NotFound)
	_, err = ts.c.DeleteEpisode(ctx, &baagentv1.DeleteEpisodeRequest{Tenant: "beta", Id: ep.GetId()})
	wantCode(t, "DeleteEpisode", err, codes.NotFound)
	_, err = ts.c.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: "beta", Id: en})
	wantCode(t, "GetEntity", err, codes.NotFound)
	_, err = ts.c.DeleteEntity(ctx, &baagentv1.DeleteEntityRequest{Tenant: "beta", Id: en})
	wantCode(t, "DeleteEntity", err, codes.NotFound)
	_, err = ts.c.GetGraph(ctx, &baagentv1.GetGraphRequest{Tenant: "beta", EntityId: en})
	wantCode(t, "GetGraph", err, codes.NotFound)
	// An unknown id of the right shape is NotFound too.
	_, err = ts.c.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: "alpha", Id: newID(episodePrefix, time.Now())})
	wantCode(t, "GetEpisode(unknown)", err, codes.NotFound)

	for _, mode := range []baagentv1.SearchMode{0, 1, 2, 3, 4} {
		res, err := ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "beta", Query: "Acme Labs SO1001", Mode: mode})
		if err != nil || len(res.GetHits()) != 0 {
			t.Fatalf("beta search (mode %v) = %v, %v", mode, res, err)
		}
	}
	eps, err := ts.c.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{Tenant: "beta"})
	if err != nil || len(eps.GetEpisodes()) != 0 {
		t.Fatalf("beta episodes = %v, %v", eps, err)
	}
	st, err := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "beta"})
	if err != nil || st.GetEntities() != 0 || st.GetEpisodes() != 0 {
		t.Fatalf("beta stats = %v, %v", st, err)
	}
	// Alpha still has everything.
	if _, err := ts.c.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: "alpha", Id: en}); err != nil {
		t.Fatal(err)
	}
}

// TestDedupe checks the three ways an extracted entity is merged: by name
// or alias (any case), by embedding similarity within its type, and within
// one episode; and that entities of different types stay apart.
func TestDedupe(t *testing.T) {
	t.Parallel()
	x := &tableExtractor{results: map[string]*extract.Result{
		"one": {Entities: []extract.Entity{
			ent("Northwind Traders", "Customer", "Wholesale customer of hardware in the East region"),
			ent("Rack Server S10", "Product", "Hardware server listed at 2499.00"),
		}, Relations: []extract.Relation{rel("Northwind Traders", "BOUGHT", "Rack Server S10", "Northwind bought a Rack Server S10")}},
		"two": {Entities: []extract.Entity{
			ent("NORTHWIND TRADERS", "Customer", ""),
			ent("Northwind Traders Ltd", "Customer", "Wholesale customer of hardware in the East region"),
			ent("Rack Server S10", "Product", "", "rack_units", "2"),
			ent("Rack Server S10", "Metric", "Units of the Rack Server S10 sold"),
		}, Relations: []extract.Relation{
			rel("NORTHWIND TRADERS", "BOUGHT", "Rack Server S10", "Northwind bought another Rack Server S10"),
			rel("NORTHWIND TRADERS", "SAME_AS", "Northwind Traders Ltd", "self"),
		}},
		"three": {Entities: []extract.Entity{
			ent("Globex Corporation", "Organization", "A supplier of routers to the North region"),
			ent("globex corporation", "Organization", ""),
			ent("Globex Corporation Inc", "Organization", "A supplier of routers to the North region"),
			// Alike descriptions, different names: not merged.
			ent("Pine Energy", "Organization", "A supplier of routers to the North region"),
			ent("Pine Studios", "Organization", "A supplier of routers to the North region"),
		}},
	}}
	ts := newTestServer(t, Options{Extractor: x}, true)
	ctx := t.Context()
	ts.add(t, "t", "one")
	two := ts.add(t, "t", "two")

	nw := findEntity(t, ts, "t", "Northwind Traders")
	if nw.GetMentionCount() != 2 || !slices.Contains(nw.GetAliases(), "Northwind Traders Ltd") {
		t.Errorf("Northwind = %v: want 2 mentions and the Ltd alias", nw)
	}
	server := findEntity(t, ts, "t", "Rack Server S10")
	if server.GetType() != "Product" || server.GetAttributes()["rack_units"] != "2" || server.GetMentionCount() != 2 {
		t.Errorf("server = %v", server)
	}
	// The Metric of the same name is its own entity; the self relation
	// folded onto one entity is dropped; BOUGHT is supported twice.
	if len(two.GetEntityIds()) != 3 {
		t.Errorf("episode two mentions %d entities, want 3", len(two.GetEntityIds()))
	}
	ge, err := ts.c.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: "t", Id: nw.GetId()})
	if err != nil || len(ge.GetRelations()) != 1 || ge.GetRelations()[0].GetEpisodeCount() != 2 {
		t.Fatalf("Northwind relations = %v, %v", ge.GetRelations(), err)
	}
	three := ts.add(t, "t", "three")
	if len(three.GetEntityIds()) != 3 {
		t.Errorf("episode three mentions %d entities, want 3 (Globex and the two Pines)", len(three.GetEntityIds()))
	}
	st, _ := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "t"})
	if st.GetEntities() != 6 {
		t.Errorf("entities = %d, want 6 (Northwind, server, metric, Globex, two Pines)", st.GetEntities())
	}
	if v := counterValue(t, ts.reg, "baagent_memory_extracted_entities_total", "resolution", resolvedVector); v < 1 {
		t.Errorf("vector merges = %v, want at least 1", v)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_extracted_entities_total", "resolution", resolvedEpisode); v < 2 {
		t.Errorf("episode merges = %v, want at least 2", v)
	}
}

// TestDeleteRules checks what deleting an episode, an entity and a
// conversation takes with it.
func TestDeleteRules(t *testing.T) {
	t.Parallel()
	x := &tableExtractor{results: map[string]*extract.Result{
		"ab": {Entities: []extract.Entity{ent("Alpha", "Thing", ""), ent("Beta", "Thing", "")},
			Relations: []extract.Relation{rel("Alpha", "NEXT_TO", "Beta", "Alpha is next to Beta")}},
		"bc": {Entities: []extract.Entity{ent("Beta", "Thing", ""), ent("Gamma", "Thing", "")},
			Relations: []extract.Relation{rel("Beta", "NEXT_TO", "Gamma", "Beta is next to Gamma")}},
	}}
	ts := newTestServer(t, Options{Extractor: x}, true)
	ctx := t.Context()
	add := func(content, conv string) *baagentv1.Episode {
		resp, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "t", Content: content, ConversationId: conv, Wait: true})
		if err != nil || resp.GetEpisode().GetStatus() != baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED {
			t.Fatalf("add %q: %v, %v", content, resp, err)
		}
		return resp.GetEpisode()
	}
	ab := add("ab", "conv-1")
	add("bc", "conv-2")

	del, err := ts.c.DeleteEpisode(ctx, &baagentv1.DeleteEpisodeRequest{Tenant: "t", Id: ab.GetId()})
	if err != nil || del.GetEntitiesRemoved() != 1 || del.GetRelationsRemoved() != 1 {
		t.Fatalf("DeleteEpisode = %v, %v; want Alpha and its relation removed", del, err)
	}
	_, err = ts.c.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: "t", Id: ab.GetId()})
	wantCode(t, "GetEpisode(deleted)", err, codes.NotFound)
	_, err = ts.c.DeleteEpisode(ctx, &baagentv1.DeleteEpisodeRequest{Tenant: "t", Id: ab.GetId()})
	wantCode(t, "DeleteEpisode(again)", err, codes.NotFound)
	beta := findEntity(t, ts, "t", "Beta")
	if beta.GetMentionCount() != 1 {
		t.Errorf("Beta mentions = %d, want 1", beta.GetMentionCount())
	}

	de, err := ts.c.DeleteEntity(ctx, &baagentv1.DeleteEntityRequest{Tenant: "t", Id: beta.GetId()})
	if err != nil || de.GetRelationsRemoved() != 1 {
		t.Fatalf("DeleteEntity = %v, %v", de, err)
	}
	_, err = ts.c.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: "t", Id: beta.GetId()})
	wantCode(t, "GetEntity(deleted)", err, codes.NotFound)

	dc, err := ts.c.DeleteConversationMemory(ctx, &baagentv1.DeleteConversationMemoryRequest{Tenant: "t", ConversationId: "conv-2"})
	if err != nil || dc.GetEpisodesRemoved() != 1 || dc.GetEntitiesRemoved() != 1 {
		t.Fatalf("DeleteConversationMemory = %v, %v; want the episode and Gamma", dc, err)
	}
	dc, err = ts.c.DeleteConversationMemory(ctx, &baagentv1.DeleteConversationMemoryRequest{Tenant: "t", ConversationId: "conv-2"})
	if err != nil || dc.GetEpisodesRemoved() != 0 {
		t.Fatalf("DeleteConversationMemory(again) = %v, %v", dc, err)
	}
	st, _ := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "t"})
	if st.GetEpisodes() != 0 || st.GetEntities() != 0 || st.GetRelations() != 0 {
		t.Fatalf("stats after deleting everything = %v", st)
	}
}

// TestCaptureSettings checks the switches: RUN episodes of a tenant or
// conversation with capture off are skipped, USER and AGENT ones stored.
func TestCaptureSettings(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	ctx := t.Context()
	gs, err := ts.c.GetMemorySettings(ctx, &baagentv1.GetMemorySettingsRequest{Tenant: "t"})
	if err != nil || !gs.GetSettings().GetCaptureRuns() || !gs.GetSettings().GetToolsEnabled() || !gs.GetCaptureEffective() {
		t.Fatalf("default settings = %v, %v", gs, err)
	}
	add := func(source baagentv1.EpisodeSource, conv string) bool {
		t.Helper()
		resp, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "t", Content: "text", Source: source, ConversationId: conv, RunId: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetSkipped() != (resp.GetEpisode() == nil) {
			t.Fatalf("response %v: skipped and episode disagree", resp)
		}
		return resp.GetSkipped()
	}
	run, user, agent := baagentv1.EpisodeSource_EPISODE_SOURCE_RUN, baagentv1.EpisodeSource_EPISODE_SOURCE_USER, baagentv1.EpisodeSource_EPISODE_SOURCE_AGENT

	up, err := ts.c.UpdateMemorySettings(ctx, &baagentv1.UpdateMemorySettingsRequest{Tenant: "t", ConversationId: "quiet", ConversationCapture: yes(false)})
	if err != nil || !slices.Equal(up.GetSettings().GetCaptureDisabledConversations(), []string{"quiet"}) {
		t.Fatalf("disable conversation = %v, %v", up, err)
	}
	if !add(run, "quiet") || add(run, "loud") || add(user, "quiet") || add(agent, "quiet") {
		t.Fatal("conversation switch not applied to RUN episodes only")
	}
	gs, _ = ts.c.GetMemorySettings(ctx, &baagentv1.GetMemorySettingsRequest{Tenant: "t", ConversationId: "quiet"})
	if gs.GetCaptureEffective() {
		t.Fatal("capture_effective for a disabled conversation")
	}

	up, err = ts.c.UpdateMemorySettings(ctx, &baagentv1.UpdateMemorySettingsRequest{Tenant: "t", CaptureRuns: yes(false), ToolsEnabled: yes(false)})
	if err != nil || up.GetSettings().GetCaptureRuns() || up.GetSettings().GetToolsEnabled() || len(up.GetSettings().GetCaptureDisabledConversations()) != 1 {
		t.Fatalf("tenant switch = %v, %v", up, err)
	}
	if !add(run, "loud") || !add(run, "") || add(user, "") {
		t.Fatal("tenant switch not applied to RUN episodes only")
	}
	if _, err := ts.c.UpdateMemorySettings(ctx, &baagentv1.UpdateMemorySettingsRequest{Tenant: "t", CaptureRuns: yes(true), ConversationId: "quiet", ConversationCapture: yes(true)}); err != nil {
		t.Fatal(err)
	}
	if add(run, "quiet") {
		t.Fatal("re-enabled conversation still skipped")
	}
	// Other tenants keep the defaults.
	gs, _ = ts.c.GetMemorySettings(ctx, &baagentv1.GetMemorySettingsRequest{Tenant: "other"})
	if !gs.GetSettings().GetCaptureRuns() {
		t.Fatal("settings leaked to another tenant")
	}
	st, _ := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "t"})
	if st.GetEpisodes() != 5 || st.GetEpisodesPending() != 5 {
		t.Fatalf("stats = %v, want 5 stored episodes", st)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_episodes_total", "outcome", outcomeSkipped); v != 3 {
		t.Errorf("skipped metric = %v, want 3", v)
	}
}

// TestAddEpisodeScrubsAndDeduplicates checks scrubbing before storage and
// the idempotency key.
func TestAddEpisodeScrubsAndDeduplicates(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	ctx := t.Context()
	req := &baagentv1.AddEpisodeRequest{Tenant: "t", Content: "Call jane.doe@example.com about the renewal.", IdempotencyKey: "k-1",
		Source: baagentv1.EpisodeSource_EPISODE_SOURCE_AGENT, RunId: "run-7", ConversationId: "conv-7"}
	first, err := ts.c.AddEpisode(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ep := first.GetEpisode()
	if ep.GetRedactions() != 1 || slices.Contains([]string{ep.GetContent()}, req.GetContent()) || ep.GetStatus() != baagentv1.EpisodeStatus_EPISODE_STATUS_PENDING ||
		ep.GetRunId() != "run-7" || ep.GetConversationId() != "conv-7" || ep.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_AGENT {
		t.Fatalf("stored episode = %v", ep)
	}
	again, err := ts.c.AddEpisode(ctx, req)
	if err != nil || again.GetEpisode().GetId() != ep.GetId() {
		t.Fatalf("repeated key = %v, %v; want %s", again, err, ep.GetId())
	}
	list, err := ts.c.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{Tenant: "t", ConversationId: "conv-7", Status: baagentv1.EpisodeStatus_EPISODE_STATUS_PENDING})
	if err != nil || len(list.GetEpisodes()) != 1 {
		t.Fatalf("ListEpisodes = %v, %v", list, err)
	}
	_, err = ts.c.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{Tenant: "t", PageToken: "not-a-token"})
	wantCode(t, "ListEpisodes(bad token)", err, codes.InvalidArgument)
}

// TestWaitEndsBeforeTheDeadline checks that wait=true without a worker
// answers with the pending episode shortly before the call's deadline.
func TestWaitEndsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	resp, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "t", Content: "x", Wait: true})
	if err != nil || resp.GetEpisode().GetStatus() != baagentv1.EpisodeStatus_EPISODE_STATUS_PENDING {
		t.Fatalf("AddEpisode(wait, no worker) = %v, %v", resp, err)
	}
	if n := ts.srv.waiters.len(); n != 0 {
		t.Fatalf("%d waiters left behind", n)
	}
}

// TestUnknownPageToken checks ListEntities refuses a token it did not
// issue.
func TestUnknownPageToken(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	_, err := ts.c.ListEntities(t.Context(), &baagentv1.ListEntitiesRequest{Tenant: "t", PageToken: "garbage"})
	wantCode(t, "ListEntities(bad token)", err, codes.InvalidArgument)
	_ = store.StatusPending
}

// TestPostgresBackend runs the main path over the PostgreSQL store: the
// server is the same whichever store holds the graph.
func TestPostgresBackend(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Store: openPostgres(t), Extractor: sampleExtractor()}, true)
	ctx := t.Context()
	ep := ts.add(t, "acme", acmeText)
	ts.add(t, "acme", cedarText)
	res, err := ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "What did Acme Labs order?"})
	if names := hitNames(res.GetHits()); err != nil || !slices.Contains(names, "Acme Labs") || !slices.Contains(names, "Edge Router R1") {
		t.Fatalf("search = %v, %v", names, err)
	}
	router := findEntity(t, ts, "acme", "Edge Router R1")
	if router.GetMentionCount() != 2 {
		t.Errorf("router = %v, want merged from both episodes", router)
	}
	_, err = ts.c.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: "other", Id: ep.GetId()})
	wantCode(t, "GetEpisode(other tenant)", err, codes.NotFound)
	st, err := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "acme"})
	if err != nil || !strings.HasPrefix(st.GetBackend(), "postgres") || st.GetEntities() != 6 {
		t.Fatalf("stats = %v, %v", st, err)
	}
}

// breakableEmbedder is the lexical embedding until broken.
type breakableEmbedder struct {
	embed.Embedder
	broken atomic.Bool
}

func (b *breakableEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if b.broken.Load() {
		return nil, errors.New("embedding endpoint unreachable")
	}
	return b.Embedder.Embed(ctx, texts)
}

// TestSearchWithoutEmbeddings checks that a hybrid search goes on with the
// keyword and graph channels when the embedding endpoint fails, and that a
// vector search answers Unavailable.
func TestSearchWithoutEmbeddings(t *testing.T) {
	t.Parallel()
	emb := &breakableEmbedder{Embedder: embed.NewLexical(testDims)}
	ts := newTestServer(t, Options{Extractor: sampleExtractor(), Embedder: emb}, true)
	ctx := t.Context()
	ts.add(t, "acme", acmeText)
	emb.broken.Store(true)
	res, err := ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "Acme Labs"})
	if err != nil || len(res.GetHits()) == 0 || res.GetHits()[0].GetEntity().GetName() != "Acme Labs" {
		t.Fatalf("hybrid search without embeddings = %v, %v", res, err)
	}
	for _, h := range res.GetHits() {
		for _, c := range h.GetChannels() {
			if c.GetChannel() == channelVector {
				t.Fatalf("a vector rank without embeddings: %v", h)
			}
		}
	}
	_, err = ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "Acme Labs", Mode: baagentv1.SearchMode_SEARCH_MODE_VECTOR})
	wantCode(t, "vector search without embeddings", err, codes.Unavailable)
}
