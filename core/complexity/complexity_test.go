package complexity

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestClassifyTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    string
		want Level
	}{
		// SIMPLE: one thing, answered directly.
		{"What is the total revenue?", Simple},
		{"How many orders did we get yesterday?", Simple},
		{"List the tables in the workspace.", Simple},
		{"hi", Simple},
		{"", Simple},
		{"Which product category had the highest revenue last quarter?", Simple},
		{"What was the average order value by region in 2026?", Simple},
		{"How did revenue grow by region from Q2 to Q3 2026?", Simple},
		{"Check the orders data for quality problems before we analyse it.", Simple},
		{"Compare our revenue across periods.", Simple},
		{"Prepare the regional revenue review for 2026.", Simple},
		{"scripted test: exercise tool errors", Simple},
		{"Show me the top 10 customers.", Simple},
		{"Read sales.csv", Simple},
		{"上个月的销售额是多少？", Simple},
		{"列出所有门店。", Simple},
		{"订单表有多少行？", Simple},
		{"请计算所有订单的总和", Simple},
		{"你好", Simple},
		{"哪个产品最畅销？", Simple},
		// MODERATE: a few steps; planning is offered.
		{"Give me a full deep dive of the sales data, every table and every monthly breakdown.", Moderate},
		{"Compare revenue and profit by region.", Moderate},
		{"Analyse the sales trend over the last 6 months.", Moderate},
		{"Summarize customer churn and also list the top reasons.", Moderate},
		{"Analyse what changed year over year in revenue by channel.", Moderate},
		{"Compare 2024 and 2025 revenue.", Moderate},
		{"Show orders by region and by channel, then the top products.", Moderate},
		{"分析过去6个月的销售趋势", Moderate},
		{"比较华东和华北地区的收入", Moderate},
		{"收入同比增长了多少？另外看看成本。", Moderate},
		{"请对比今年和去年的订单量", Moderate},
		{"What is our revenue? What is our cost?", Simple},
		{"Evaluate supplier delivery times; list late suppliers.", Moderate},
		{"Forecast next quarter's sales for each store.", Simple},
		{"汇总各渠道的销量，并且列出前十名商品", Moderate},
		// COMPLEX: many steps; planning is required.
		{"Compare Q3 and Q4 revenue by region and channel and write a report.", Complex},
		// The planning scenarios of examples/scenarios.
		{"Compare Q3 and Q4 2025 revenue by region and customer segment and write a report.", Complex},
		{"Analyse 2025 revenue by region and by product category, compare the two halves of the year, and write a report.", Complex},
		{"Prepare a comprehensive board report comparing 2025 H1 and H2 revenue by region and product category.", Complex},
		{"Analyse revenue, cost and profit by region and channel for the last 6 months, compare them with the same period last year, and write a comprehensive report with recommendations.", Complex},
		{"Give me a comprehensive analysis of customer churn across regions and products, and also forecast next year's revenue.", Complex},
		{"Compare Q1, Q2, Q3 and Q4 sales by store and product category, and summarize the trends in a report.", Complex},
		{"I need a report: analyse our marketing campaigns, compare their cost with the revenue they brought in by channel, and recommend where to spend next quarter.", Complex},
		{"Review inventory levels and supplier lead times by region, then compare with sales trends over the past 12 months and report the risks.", Complex},
		{"分析第三季度和第四季度各地区、各渠道的收入，并写一份报告", Complex},
		{"请综合分析过去6个月各门店的销售额、成本和利润，比较同比变化，另外给出改进建议。", Complex},
		{"对比2024年和2025年各品类的销量与利润，还有各渠道的客户数量，最后写一份综合报告。", Complex},
		{"全面评估各区域的营收和成本，并且预测下季度趋势，同时汇总成报表", Complex},
		{"Please analyze the orders data: first the revenue by region, then by channel, then by product; also compare each with last year and produce a report.", Complex},
		{"环比和同比分析各渠道收入和利润，另外比较各城市的客户增长，并写报告", Complex},
		{"Compare H1 and H2 profit margins by store and region, analyse the drivers, and write a report for the board.", Complex},
		{"Build a comprehensive report comparing revenue, costs, and profits per region for 2024 vs 2025, and also highlight anomalies.", Complex},
		{"Analyse customer orders, product returns and supplier costs across every region over the last 3 years, and prepare a summary report.", Complex},
	}
	for _, tt := range tests {
		got := Classify(tt.q)
		if got.Level != tt.want {
			t.Errorf("Classify(%q) = %s (score %d, signals %v), want %s", tt.q, got.Level, got.Score, got.Signals, tt.want)
		}
	}
}

func TestClassifySignals(t *testing.T) {
	t.Parallel()
	got := Classify("Compare Q3 and Q4 revenue by region and channel and write a report.")
	want := []string{"several_requests", "analysis", "time_span", "entities"}
	if !slices.Equal(got.Signals, want) || got.Score != 6 {
		t.Fatalf("signals %v score %d, want %v score 6", got.Signals, got.Score, want)
	}
	long := Classify(strings.Repeat("x", LongRunes+1))
	if !slices.Equal(long.Signals, []string{"long"}) {
		t.Fatalf("long: signals %v", long.Signals)
	}
	// Counted in characters, not bytes: 60 Chinese characters are not long.
	if got := Classify(strings.Repeat("数", 60)); slices.Contains(got.Signals, "long") {
		t.Fatalf("60 runes counted as long: %v", got.Signals)
	}
	if got := Classify("过去6个月"); !slices.Equal(got.Signals, []string{"time_span"}) {
		t.Fatalf("过去6个月: %v", got.Signals)
	}
	if got := Classify("over the last six months"); !slices.Equal(got.Signals, []string{"time_span"}) {
		t.Fatalf("last six months: %v", got.Signals)
	}
	if got := Classify("revenue as well as cost"); !slices.Contains(got.Signals, "several_requests") {
		t.Fatalf("as well as: %v", got.Signals)
	}
}

func TestLevelString(t *testing.T) {
	t.Parallel()
	for l, want := range map[Level]string{Simple: "simple", Moderate: "moderate", Complex: "complex", 0: "unknown"} {
		if l.String() != want {
			t.Errorf("%d: %q", l, l.String())
		}
	}
}

// TestScenarioQuestionsStayBelowComplex: the shipped scenarios that do not
// plan must not be asked to.
func TestScenarioQuestionsStayBelowComplex(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../examples/scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "name: plan") { // scenarios that plan
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "example: ") {
				continue
			}
			q := strings.Trim(strings.TrimPrefix(line, "example: "), `"`)
			if got := Classify(q); got.Level == Complex {
				t.Errorf("%s: %q is COMPLEX (%v); it would be made to plan", filepath.Base(f), q, got.Signals)
			}
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"", "Compare Q3 and Q4 revenue", "分析过去6个月的销售趋势", "近", "过去１２个月", "\xff\xfe", "q3 q4 h1 2024 2025", "as well as"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Classify(s)
		if r.Level < Simple || r.Level > Complex {
			t.Fatalf("level %d", r.Level)
		}
		if r.Score < 0 || r.Score > 7 {
			t.Fatalf("score %d", r.Score)
		}
		if (r.Level == Complex) != (r.Score >= ComplexScore) {
			t.Fatalf("level %s for score %d", r.Level, r.Score)
		}
		if len(r.Signals) > 5 {
			t.Fatalf("signals %v", r.Signals)
		}
	})
}
