// Package budget holds per-tenant (and per-API-key) spending limits and the
// usage ledger they are enforced against.
//
// Limits come from a YAML file (see ParseFile) and from the admin API,
// whose entries live in the JetStream KV bucket natsx.BucketBudgets and
// replace the file's entry of the same tenant or key ([Store]). Usage lives
// in natsx.BucketUsage, one entry per tenant (or key) and UTC day or month,
// updated with compare-and-set so that every replica shares one count
// ([Ledger]). Before a model call its worst-case cost is reserved in the
// entries whose limits apply; after it the reservation is settled to the
// real cost. A reservation nobody settles (its replica crashed) stops
// counting after the reservation TTL.
package budget

import (
	"errors"
	"fmt"
	"strings"

	"github.com/baagent/baagent/core/budgetrule"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/validate"
)

// Names of the limits, as in the Budget message, the budgets file, error
// messages and the `limit` label of the metrics.
const (
	LimitUSDPerDay      = budgetrule.USDPerDay
	LimitUSDPerMonth    = budgetrule.USDPerMonth
	LimitTokensPerDay   = budgetrule.TokensPerDay
	LimitMaxStepsPerRun = budgetrule.MaxStepsPerRun
	LimitMaxUSDPerRun   = budgetrule.MaxUSDPerRun
)

// Limits lists every limit name, for metrics.
var Limits = []string{LimitUSDPerDay, LimitUSDPerMonth, LimitTokensPerDay, LimitMaxStepsPerRun, LimitMaxUSDPerRun}

// MaxUSD bounds an amount of USD in a budget (and the ledger's clamps).
const MaxUSD = budgetrule.MaxUSD

// Scope is whose budget and usage: a tenant, or one API key of a tenant.
type Scope struct {
	Tenant string
	KeyID  string // empty: the whole tenant
}

func (s Scope) String() string {
	if s.KeyID == "" {
		return "tenant " + s.Tenant
	}
	return "API key " + s.KeyID + " of tenant " + s.Tenant
}

// CheckKeyID reports whether id is a well-formed key id (8 lowercase hex
// digits).
func CheckKeyID(id string) error { return budgetrule.CheckKeyID(id) }

// CheckScope validates a scope's tenant and key id.
func CheckScope(s Scope) error {
	if err := natsx.ValidateToken("tenant", s.Tenant); err != nil {
		return err
	}
	if s.KeyID != "" {
		if err := CheckKeyID(s.KeyID); err != nil {
			return fmt.Errorf("api_key_id: %w", err)
		}
	}
	return nil
}

// Validate checks a budget's values, naming each bad field under prefix
// ("budget" gives "budget.usd_per_day").
func Validate(e *validate.Errors, prefix string, b *baagentv1.Budget) {
	for _, v := range budgetrule.Check(b) {
		field := v.Field
		if prefix != "" {
			field = prefix + "." + field
		}
		e.Add(field, v.Description)
	}
}

// Exceeded is a limit that stops a run or refuses one.
type Exceeded struct {
	Scope Scope
	Limit string // one of the Limit* names
	// Detail says what was used against what was allowed.
	Detail string
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("the %s limit of %s is reached: %s", e.Limit, e.Scope, e.Detail)
}

// AsExceeded returns err's *Exceeded, if it is one.
func AsExceeded(err error) (*Exceeded, bool) {
	var ex *Exceeded
	ok := errors.As(err, &ex)
	return ex, ok
}

// windowed reports whether b limits usage over days or months, which the
// ledger must reserve against.
func windowed(b *baagentv1.Budget) bool {
	return b != nil && (b.UsdPerDay != nil || b.UsdPerMonth != nil || b.TokensPerDay != nil)
}

// Windowed reports whether b limits usage over days or months (and so
// needs reservations before model calls).
func Windowed(b *baagentv1.Budget) bool { return windowed(b) }

// Empty reports whether b sets no limit at all.
func Empty(b *baagentv1.Budget) bool {
	return b == nil || !windowed(b) && b.MaxStepsPerRun == nil && b.MaxUsdPerRun == nil
}

// usdString formats an amount of USD for messages.
func usdString(v float64) string {
	s := fmt.Sprintf("%.6f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-" {
		s = "0"
	}
	return "$" + s
}

// USD formats an amount of USD for messages ("$1.25").
func USD(v float64) string { return usdString(v) }
