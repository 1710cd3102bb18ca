package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baagent/baagent/services/memory/store"
)

// testFindEntitiesByNames pins FindEntitiesByNames to FindEntity: for every
// name, the entity FindEntity (any type) finds, under NameKey(name); names
// it does not find are absent.
func testFindEntitiesByNames(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		ent("Acme Corp", "organization", "", axis(0)),
		ent("Mercury", "planet", "", axis(1)),
		ent("Mercury", "element", "", axis(2)),
		ent("Globex", "product", "", axis(3)),
		ent("Initech", "organization", "", axis(4)),
		ent("Twin", "person", "", axis(5)),
		ent("Twin", "product", "", axis(6)),
		ent("Ünïcode Straße", "place", "", axis(7)),
	}})
	acme, element, globex, initech := o.EntityIDs[0], o.EntityIDs[2], o.EntityIDs[3], o.EntityIDs[4]
	// An alias for Acme; the element and Initech mentioned twice; Initech
	// has Globex as an alias, which the product's exact name beats.
	ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{MergeInto: acme, Name: "ACME Inc", Type: "organization"},
		{MergeInto: element, Name: "Mercury", Type: "element"},
		{MergeInto: initech, Name: "Globex", Type: "organization"},
	}})
	// Another tenant's entities and aliases are never found.
	_, oo := ingest(t, s, other, "", store.IngestResult{Entities: []store.ExtractedEntity{
		ent("Secret Project", "project", "", axis(0)),
		ent("Acme Corp", "organization", "", axis(1)),
	}})
	ingest(t, s, other, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{MergeInto: oo.EntityIDs[1], Name: "Acme Holdings", Type: "organization"},
	}})

	names := []string{
		"acme corp", "ACME CORP", " Acme Corp ", "acme inc", "Acme Inc",
		"mercury", "MERCURY", "globex", "GLOBEX", "initech", "twin", "Twin",
		"ünïcode straße", "ÜNÏCODE STRASSE", "Ünïcode Straße",
		"acme", "corp", "secret project", "Secret Project", "acme holdings", "nothing here", "", "   ",
		"acme corp", // a duplicate
	}
	got, err := s.FindEntitiesByNames(ctx, tenant, names)
	if err != nil {
		t.Fatalf("FindEntitiesByNames: %v", err)
	}
	want := map[string]string{}
	for _, n := range names {
		e, err := s.FindEntity(ctx, tenant, n, "")
		k := store.NameKey(n)
		switch {
		case err == nil:
			want[k] = e.ID
			g := got[k]
			if g == nil || g.ID != e.ID || g.Name != e.Name || g.Type != e.Type || g.MentionCount != e.MentionCount || g.Tenant != tenant {
				t.Errorf("FindEntitiesByNames[%q] = %+v, FindEntity(%q) = %+v", k, g, n, e)
			}
		case isNotFound(err):
			if _, ok := want[k]; !ok && got[k] != nil {
				t.Errorf("FindEntitiesByNames[%q] = %s, FindEntity(%q) found nothing", k, got[k].ID, n)
			}
		default:
			t.Fatalf("FindEntity(%q): %v", n, err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("FindEntitiesByNames: %d keys, want %d (%v)", len(got), len(want), keysOf(got))
	}
	// The rules themselves, not only the agreement with FindEntity.
	for k, id := range map[string]string{"acme corp": acme, "acme inc": acme, "mercury": element, "globex": globex, "initech": initech} {
		if got[k] == nil || got[k].ID != id {
			t.Errorf("FindEntitiesByNames[%q] = %v, want %s", k, got[k], id)
		}
	}
	for _, k := range []string{"secret project", "acme holdings", "acme", "corp", "nothing here", ""} {
		if _, ok := got[k]; ok {
			t.Errorf("FindEntitiesByNames[%q] present, want absent", k)
		}
	}
	// The other tenant sees its own.
	og, err := s.FindEntitiesByNames(ctx, other, []string{"Acme Corp", "acme inc", "secret project", "ACME HOLDINGS"})
	if err != nil {
		t.Fatalf("FindEntitiesByNames(other): %v", err)
	}
	if len(og) != 3 || og["acme corp"] == nil || og["acme corp"].ID == acme || og["acme corp"].Tenant != other ||
		og["acme holdings"] == nil || og["acme holdings"].ID != og["acme corp"].ID || og["secret project"] == nil {
		t.Errorf("FindEntitiesByNames(other) = %v", keysOf(og))
	}

	// Empty input, and the bound.
	for _, in := range [][]string{nil, {}, {"", " "}} {
		m, err := s.FindEntitiesByNames(ctx, tenant, in)
		if err != nil || len(m) != 0 {
			t.Errorf("FindEntitiesByNames(%q) = %v, %v; want empty", in, m, err)
		}
	}
	many := make([]string, store.MaxFindNames)
	for i := range many {
		many[i] = fmt.Sprintf("name %d", i)
	}
	many[0] = "Acme Corp"
	m, err := s.FindEntitiesByNames(ctx, tenant, many)
	if err != nil || len(m) != 1 || m["acme corp"] == nil || m["acme corp"].ID != acme {
		t.Errorf("FindEntitiesByNames(%d names) = %v, %v", len(many), keysOf(m), err)
	}
	if _, err := s.FindEntitiesByNames(ctx, tenant, append(many, "one more")); err == nil {
		t.Errorf("FindEntitiesByNames(%d names): no error", len(many)+1)
	}
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, store.ErrNotFound) }

func keysOf(m map[string]*store.Entity) []string {
	out := make([]string, 0, len(m))
	for k, e := range m {
		out = append(out, k+"="+e.ID)
	}
	return out
}
