package load

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Question is the request the load scenario answers.
const Question = "load test: summarise the orders data in three steps"

// ScenarioName is the scenario's name (it appears in tool call ids).
const ScenarioName = "load-multi-step"

// scenarioYAML is a three-step scenario over the sample data: a
// sql_query, then a sql_query and a glob in parallel, then an answer that
// quotes a value from each of the three results. Every step goes through
// the context service, the scripted model, the toolrunner (real SQLite
// queries over the workspace CSVs, a real directory walk) and the event
// stream. The queries read the small tables: importing the 1,363-row
// orders table costs ~165 ms per call under the race detector, which
// would make the test measure SQLite rather than the platform.
const scenarioYAML = `name: ` + ScenarioName + `
description: Load and soak tests (test/reliability/load); three steps, three tool calls, two of them in parallel.
example: "` + Question + `"
match:
  exact:
    - "` + Question + `"
turns:
  - text: First the product category with the most products.
    tool_calls:
      - name: sql_query
        arguments:
          query: SELECT category, COUNT(*) AS n FROM products GROUP BY category ORDER BY n DESC, category LIMIT 1
  - text: Now the number of customers and the data files, in parallel.
    tool_calls:
      - name: sql_query
        arguments:
          query: SELECT COUNT(*) AS n FROM customers
      - name: glob
        arguments:
          pattern: "*.csv"
  - text: |-
      load-answer category={{ with (index .AllToolResults 0).Content | firstRow }}{{ cell 0 . }} products={{ cell 1 . }}{{ end }} customers={{ (index .ToolResults 0).Content | column "n" }} orders_file={{ (index .ToolResults 1).Content | find "orders\\.csv" }}
`

// StepsPerRun is the number of ReAct steps of one run of the scenario.
const StepsPerRun = 3

// WriteScenario writes the load scenario into dir (a -scenarios-dir).
func WriteScenario(dir string) error {
	return os.WriteFile(filepath.Join(dir, ScenarioName+".yaml"), []byte(scenarioYAML), 0o600)
}

// ExpectedAnswer computes, from the CSV files in dataDir and without
// SQLite, the answer the scenario must produce: the category with the most
// products and its count, the number of customers, and that orders.csv is
// there. It is the oracle the runs are checked against.
func ExpectedAnswer(dataDir string) (string, error) {
	products, err := readCSV(filepath.Join(dataDir, "products.csv"))
	if err != nil {
		return "", err
	}
	customers, err := readCSV(filepath.Join(dataDir, "customers.csv"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dataDir, "orders.csv")); err != nil {
		return "", err
	}
	perCategory := map[string]float64{}
	for _, p := range products {
		perCategory[p["category"]]++
	}
	category := top(perCategory)
	if category == "" || len(customers) == 0 {
		return "", errors.New("the sample data has no products or no customers")
	}
	return fmt.Sprintf("load-answer category=%s products=%d customers=%d orders_file=orders.csv",
		category, int(perCategory[category]), len(customers)), nil
}

// top returns the key with the largest value (ties: the smallest key).
func top(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best := ""
	for _, k := range keys {
		if best == "" || m[k] > m[best] {
			best = k
		}
	}
	return best
}

// readCSV reads a CSV file with a header line into one map per row.
func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	var rows []map[string]string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		row := make(map[string]string, len(header))
		for i, h := range header {
			row[h] = rec[i]
		}
		rows = append(rows, row)
	}
}
