package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Budgets and usage through the gateway: `usage` for the API key's tenant
// (--api-key), `budget get|set|clear` for any tenant with an admin API key
// (--admin-key, env BAAGENT_ADMIN_API_KEY), which the gateway keeps apart
// from tenant keys.

// usageSpec and budgetSpec are the commands' entries in the tree (see
// commandSpecs).
func usageSpec() spec {
	return spec{use: "usage", short: "Show the API key's tenant's usage today and this month, against its budget", run: runUsage,
		example: "  baagentctl usage\n  baagentctl usage --days 30\n  baagentctl usage --json"}
}

func budgetSpec() spec {
	return spec{use: "budget", short: "Show, set or clear a tenant's budget (admin API key)",
		long: "A budget limits a tenant (or one of its API keys, --key-id) in USD per UTC\nday and month, tokens per UTC day, and steps and USD per run. A budget set\nhere replaces the budgets file's entry for the tenant or key; clear goes\nback to the file's. These commands need an admin API key (--admin-key,\nenv BAAGENT_ADMIN_API_KEY).",
		subs: []spec{
			{use: "get", short: "Show a tenant's (or key's) budget and where it comes from", run: runBudgetGet,
				example: "  baagentctl budget get --tenant acme\n  baagentctl budget get --tenant acme --key-id 3f2a9c1b --json"},
			{use: "set", short: "Set a tenant's (or key's) budget; limits not given are unlimited", run: runBudgetSet,
				example: "  baagentctl budget set --tenant acme --usd-per-day 10 --usd-per-month 200\n  baagentctl budget set --tenant acme --key-id 3f2a9c1b --max-usd-per-run 0.5"},
			{use: "clear", short: "Remove the budget set through the API (the budgets file's applies again)", run: runBudgetClear,
				example: "  baagentctl budget clear --tenant acme"},
			{use: "key-id", short: "Print the id of an API key (--api-key), under which its own budget is set", run: runBudgetKeyID,
				example: "  BAAGENT_API_KEY=... baagentctl budget key-id"},
		}}
}

// keyID is an API key's id: the first 8 hex digits of its SHA-256, as the
// gateway computes it.
func keyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

func runUsage(ctx context.Context, c *cli, args []string) error {
	fs := c.flagSet("usage", "")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	days := fs.Int("days", 0, fmt.Sprintf("also show each of the last N UTC days, today included (at most %d)", maxUsageDays))
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: usage takes no arguments", errUsage)
	}
	if *days < 0 || *days > maxUsageDays {
		return fmt.Errorf("%w: --days must be 0..%d (the usage ledger keeps days that long)", errUsage, maxUsageDays)
	}
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := gw.GetUsage(ctx, &baagentv1.GatewayServiceGetUsageRequest{HistoryDays: int32(*days)})
	if err != nil {
		return c.rpcError("get usage", err)
	}
	if c.json {
		return c.printProto(resp)
	}
	if err := printUsage(c.stdout, resp.GetUsage()); err != nil {
		return err
	}
	if k := resp.GetKeyUsage(); k != nil {
		fmt.Fprintln(c.stdout)
		return printUsage(c.stdout, k)
	}
	return nil
}

// maxUsageDays is the longest history GetUsage returns.
const maxUsageDays = 62

// printUsage writes a usage report as a small table.
func printUsage(w io.Writer, u *baagentv1.UsageReport) error {
	who := "tenant " + u.GetTenant()
	if u.GetApiKeyId() != "" {
		who = "API key " + u.GetApiKeyId() + " of " + who
	}
	fmt.Fprintf(w, "%s (budget: %s)\n", who, sourceText(u.GetSource()))
	b := u.GetBudget()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PERIOD\tCOST\tLIMIT\tRESERVED\tTOKENS\tLIMIT\tUNPRICED\tCALLS")
	row := func(p *baagentv1.UsageWindow, usdLimit *float64, tokLimit *int64) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\n", p.GetPeriod(), usd(p.GetCostUsd()), limitUSD(usdLimit), usd(p.GetReservedUsd()),
			p.GetInputTokens()+p.GetOutputTokens(), limitInt(tokLimit), p.GetUnpricedTokens(), p.GetModelCalls())
	}
	row(u.GetDay(), b.UsdPerDay, b.TokensPerDay)
	row(u.GetMonth(), b.UsdPerMonth, nil)
	if err := tw.Flush(); err != nil {
		return err
	}
	if b.MaxStepsPerRun != nil || b.MaxUsdPerRun != nil {
		fmt.Fprintf(w, "per run: %s steps, %s\n", limitInt32(b.MaxStepsPerRun), limitUSD(b.MaxUsdPerRun))
	}
	return printHistory(w, u.GetHistory())
}

// printHistory writes the daily usage, oldest first, as a table (nothing
// when there is none).
func printHistory(w io.Writer, days []*baagentv1.UsageWindow) error {
	if len(days) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DAY\tCOST\tINPUT\tOUTPUT\tTOKENS\tUNPRICED\tCALLS")
	for _, d := range days {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", d.GetPeriod(), usd(d.GetCostUsd()), d.GetInputTokens(), d.GetOutputTokens(),
			d.GetInputTokens()+d.GetOutputTokens(), d.GetUnpricedTokens(), d.GetModelCalls())
	}
	return tw.Flush()
}

func usd(v float64) string {
	s := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", v), "0"), ".")
	return "$" + s
}

func limitUSD(v *float64) string {
	if v == nil {
		return "-"
	}
	return usd(*v)
}

func limitInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func limitInt32(v *int32) string {
	if v == nil {
		return "unlimited"
	}
	return fmt.Sprint(*v)
}

func sourceText(s baagentv1.BudgetSource) string {
	switch s {
	case baagentv1.BudgetSource_BUDGET_SOURCE_FILE:
		return "budgets file"
	case baagentv1.BudgetSource_BUDGET_SOURCE_API:
		return "admin API"
	}
	return "none"
}

// budgetFlags are the flags of the admin budget commands.
type budgetFlags struct {
	rf     runFlags
	tenant *string
	keyID  *string
}

func (c *cli) budgetFlags(fs *pflag.FlagSet) *budgetFlags {
	f := &budgetFlags{}
	f.rf.apiKey = c.getenv("BAAGENT_ADMIN_API_KEY")
	fs.StringVar(&f.rf.apiKey, "admin-key", f.rf.apiKey, "admin API key of the gateway (env BAAGENT_ADMIN_API_KEY; prefer the environment variable)")
	fs.Lookup("admin-key").DefValue = "" // help must not print the key
	f.tenant = fs.String("tenant", "", "tenant whose budget it is (required)")
	f.keyID = fs.String("key-id", "", "one API key's budget instead of the tenant's (see budget key-id)")
	return f
}

func (f *budgetFlags) check(fs *pflag.FlagSet) error {
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: budget commands take no arguments", errUsage)
	}
	if *f.tenant == "" {
		return fmt.Errorf("%w: --tenant is required", errUsage)
	}
	return nil
}

// printEntry writes a budget entry.
func (c *cli) printEntry(e *baagentv1.BudgetEntry) error {
	if c.json {
		return c.printProto(e)
	}
	who := "tenant " + e.GetTenant()
	if e.GetApiKeyId() != "" {
		who = "API key " + e.GetApiKeyId() + " of " + who
	}
	b := e.GetBudget()
	w := c.stdout
	fmt.Fprintf(w, "%s (budget: %s)\n", who, sourceText(e.GetSource()))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "usd_per_day\t%s\n", limitUSD(b.UsdPerDay))
	fmt.Fprintf(tw, "usd_per_month\t%s\n", limitUSD(b.UsdPerMonth))
	fmt.Fprintf(tw, "tokens_per_day\t%s\n", limitInt(b.TokensPerDay))
	fmt.Fprintf(tw, "max_steps_per_run\t%s\n", limitInt32(b.MaxStepsPerRun))
	fmt.Fprintf(tw, "max_usd_per_run\t%s\n", limitUSD(b.MaxUsdPerRun))
	return tw.Flush()
}

func runBudgetGet(ctx context.Context, c *cli, args []string) error {
	return c.budgetCommand(ctx, "get", args, nil, func(ctx context.Context, gw baagentv1.GatewayServiceClient, tenant, keyID string) (*baagentv1.BudgetEntry, error) {
		resp, err := gw.GetBudget(ctx, &baagentv1.GatewayServiceGetBudgetRequest{Tenant: tenant, ApiKeyId: keyID})
		return resp.GetEntry(), err
	})
}

func runBudgetSet(ctx context.Context, c *cli, args []string) error {
	var b *baagentv1.Budget
	limits := func(fs *pflag.FlagSet) func() {
		usdDay := fs.Float64("usd-per-day", 0, "model cost in USD per UTC day")
		usdMonth := fs.Float64("usd-per-month", 0, "model cost in USD per UTC month")
		tokensDay := fs.Int64("tokens-per-day", 0, "model tokens (input and output) per UTC day")
		steps := fs.Int32("max-steps-per-run", 0, "steps one run may take")
		usdRun := fs.Float64("max-usd-per-run", 0, "model cost in USD one run may spend")
		// Only the limits given are set: an absent one is unlimited.
		return func() {
			b = &baagentv1.Budget{}
			if fs.Changed("usd-per-day") {
				b.UsdPerDay = usdDay
			}
			if fs.Changed("usd-per-month") {
				b.UsdPerMonth = usdMonth
			}
			if fs.Changed("tokens-per-day") {
				b.TokensPerDay = tokensDay
			}
			if fs.Changed("max-steps-per-run") {
				b.MaxStepsPerRun = steps
			}
			if fs.Changed("max-usd-per-run") {
				b.MaxUsdPerRun = usdRun
			}
		}
	}
	return c.budgetCommand(ctx, "set", args, limits, func(ctx context.Context, gw baagentv1.GatewayServiceClient, tenant, keyID string) (*baagentv1.BudgetEntry, error) {
		resp, err := gw.SetBudget(ctx, &baagentv1.GatewayServiceSetBudgetRequest{Tenant: tenant, ApiKeyId: keyID, Budget: b})
		return resp.GetEntry(), err
	})
}

func runBudgetClear(ctx context.Context, c *cli, args []string) error {
	return c.budgetCommand(ctx, "clear", args, nil, func(ctx context.Context, gw baagentv1.GatewayServiceClient, tenant, keyID string) (*baagentv1.BudgetEntry, error) {
		resp, err := gw.SetBudget(ctx, &baagentv1.GatewayServiceSetBudgetRequest{Tenant: tenant, ApiKeyId: keyID, Clear: true})
		return resp.GetEntry(), err
	})
}

// budgetCommand runs `budget <name>`: the common flags, any the command
// adds (extra returns what to call once they are parsed), one admin call
// through the gateway, and the resulting entry printed.
func (c *cli) budgetCommand(ctx context.Context, name string, args []string, extra func(*pflag.FlagSet) func(),
	call func(context.Context, baagentv1.GatewayServiceClient, string, string) (*baagentv1.BudgetEntry, error)) error {
	fs := c.flagSet("budget "+name, "")
	f := c.budgetFlags(fs)
	var parsed func()
	if extra != nil {
		parsed = extra(fs)
	}
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := f.check(fs); err != nil {
		return err
	}
	if parsed != nil {
		parsed()
	}
	ctx, gw, release, err := c.gatewayCall(ctx, f.rf)
	if err != nil {
		return err
	}
	defer release()
	entry, err := call(ctx, gw, *f.tenant, *f.keyID)
	if err != nil {
		return c.rpcError(name+" budget", err)
	}
	return c.printEntry(entry)
}

func runBudgetKeyID(_ context.Context, c *cli, args []string) error {
	fs := c.flagSet("budget key-id", "")
	var rf runFlags
	c.addRunFlags(fs, &rf)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: budget key-id takes no arguments (the key comes from --api-key or BAAGENT_API_KEY)", errUsage)
	}
	if rf.apiKey == "" {
		return fmt.Errorf("%w: no API key: set --api-key or BAAGENT_API_KEY", errUsage)
	}
	_, err := fmt.Fprintln(c.stdout, keyID(rf.apiKey))
	return err
}
