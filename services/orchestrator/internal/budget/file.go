package budget

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// MaxFileBytes bounds a budgets file.
const MaxFileBytes = 1 << 20

// MaxKeysPerTenant bounds the API keys with budgets of their own in one
// tenant's file entry.
const MaxKeysPerTenant = 1000

// The budgets file (-budgets-file):
//
//	tenants:
//	  acme:
//	    usd_per_day: 10
//	    usd_per_month: 200
//	    tokens_per_day: 5000000
//	    max_steps_per_run: 40
//	    max_usd_per_run: 2
//	    keys:                 # budgets of single API keys, by key id
//	      3f2a9c1b:
//	        usd_per_day: 1
//
// Every field is optional; an absent limit is no limit. Unknown fields,
// duplicate keys, negative or non-finite values and malformed tenant names
// or key ids are refused.
type fileYAML struct {
	Tenants map[string]*tenantYAML `yaml:"tenants"`
}

type limitsYAML struct {
	USDPerDay      *float64 `yaml:"usd_per_day"`
	USDPerMonth    *float64 `yaml:"usd_per_month"`
	TokensPerDay   *int64   `yaml:"tokens_per_day"`
	MaxStepsPerRun *int32   `yaml:"max_steps_per_run"`
	MaxUSDPerRun   *float64 `yaml:"max_usd_per_run"`
}

type tenantYAML struct {
	limitsYAML `yaml:",inline"`
	Keys       map[string]*limitsYAML `yaml:"keys"`
}

func (l *limitsYAML) budget() *baagentv1.Budget {
	if l == nil {
		return &baagentv1.Budget{}
	}
	return &baagentv1.Budget{
		UsdPerDay: l.USDPerDay, UsdPerMonth: l.USDPerMonth, TokensPerDay: l.TokensPerDay,
		MaxStepsPerRun: l.MaxStepsPerRun, MaxUsdPerRun: l.MaxUSDPerRun,
	}
}

// File is a parsed budgets file: the budget of each tenant and key it
// names. The zero value (and nil) names none.
type File struct {
	entries map[Scope]*baagentv1.Budget
}

// Get returns the file's budget of s, or nil. The budget must not be
// modified.
func (f *File) Get(s Scope) *baagentv1.Budget {
	if f == nil {
		return nil
	}
	return f.entries[s]
}

// Len is how many budgets the file sets.
func (f *File) Len() int {
	if f == nil {
		return 0
	}
	return len(f.entries)
}

// Scopes lists the tenants and keys with a budget, sorted.
func (f *File) Scopes() []Scope {
	if f == nil {
		return nil
	}
	out := make([]Scope, 0, len(f.entries))
	for s := range f.entries {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Scope) int {
		if a.Tenant != b.Tenant {
			if a.Tenant < b.Tenant {
				return -1
			}
			return 1
		}
		switch {
		case a.KeyID < b.KeyID:
			return -1
		case a.KeyID > b.KeyID:
			return 1
		}
		return 0
	})
	return out
}

// LoadFile reads and parses the budgets file at path; an empty path is no
// file (no budgets).
func LoadFile(path string) (*File, error) {
	if path == "" {
		return &File{}, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f, err := ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ParseFile parses a budgets file strictly: unknown fields, duplicate keys,
// more than one document and invalid values are errors naming the field.
func ParseFile(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("the budgets file is larger than %d bytes", MaxFileBytes)
	}
	var doc fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("budgets file: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("budgets file: want one YAML document")
	}
	f := &File{entries: map[Scope]*baagentv1.Budget{}}
	var e validate.Errors
	for _, tenant := range slices.Sorted(maps.Keys(doc.Tenants)) {
		t := doc.Tenants[tenant]
		path := "tenants." + tenant
		if err := CheckScope(Scope{Tenant: tenant}); err != nil {
			e.Add(path, err.Error())
			continue
		}
		if t == nil {
			t = &tenantYAML{}
		}
		b := t.budget()
		Validate(&e, path, b)
		if !Empty(b) {
			f.entries[Scope{Tenant: tenant}] = b
		}
		if len(t.Keys) > MaxKeysPerTenant {
			e.Addf(path+".keys", "at most %d keys, got %d", MaxKeysPerTenant, len(t.Keys))
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(t.Keys)) {
			kp := path + ".keys." + id
			if err := CheckKeyID(id); err != nil {
				e.Add(kp, err.Error())
				continue
			}
			kb := t.Keys[id].budget()
			Validate(&e, kp, kb)
			if !Empty(kb) {
				f.entries[Scope{Tenant: tenant, KeyID: id}] = kb
			}
		}
	}
	if e.Len() > 0 {
		return nil, fmt.Errorf("budgets file: %s", e.Summary())
	}
	return f, nil
}

// clone copies a budget (nil stays nil).
func clone(b *baagentv1.Budget) *baagentv1.Budget {
	if b == nil {
		return nil
	}
	return proto.Clone(b).(*baagentv1.Budget)
}
