package memory

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/baagent/baagent/services/memory/extract"
)

// The sample data (examples/data) as episodes: one per order, with the
// entities and relations an extraction model would find in its text,
// computed from the data so that retrieval is measured on a known graph.

type sampleCustomer struct {
	id                                int
	name, segment, region, signupDate string
}

type sampleProduct struct {
	id                    int
	name, category, price string
}

type sampleOrder struct {
	id, customer, product, quantity int
	date, unitPrice, region         string
}

type sampleData struct {
	customers map[int]sampleCustomer
	products  map[int]sampleProduct
	orders    []sampleOrder
}

// readCSV reads examples/data/name without its header.
func readCSV(tb testing.TB, name string, cols int) [][]string {
	tb.Helper()
	f, err := os.Open(filepath.Join("..", "..", "examples", "data", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = cols
	rows, err := r.ReadAll()
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return rows[1:]
}

func atoi(tb testing.TB, s string) int {
	tb.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func loadSample(tb testing.TB) *sampleData {
	tb.Helper()
	d := &sampleData{customers: map[int]sampleCustomer{}, products: map[int]sampleProduct{}}
	for _, r := range readCSV(tb, "customers.csv", 5) {
		c := sampleCustomer{id: atoi(tb, r[0]), name: r[1], segment: r[2], region: r[3], signupDate: r[4]}
		d.customers[c.id] = c
	}
	for _, r := range readCSV(tb, "products.csv", 4) {
		p := sampleProduct{id: atoi(tb, r[0]), name: r[1], category: r[2], price: r[3]}
		d.products[p.id] = p
	}
	for _, r := range readCSV(tb, "orders.csv", 7) {
		d.orders = append(d.orders, sampleOrder{id: atoi(tb, r[0]), date: r[1], customer: atoi(tb, r[2]), product: atoi(tb, r[3]),
			quantity: atoi(tb, r[4]), unitPrice: r[5], region: r[6]})
	}
	return d
}

func orderName(id int) string { return fmt.Sprintf("ORD-%05d", id) }

// episode is an order's episode text and its extraction. The order date
// is only an attribute: exact values are the keyword channel's to find.
func (d *sampleData) episode(o sampleOrder) (string, *extract.Result) {
	c, p := d.customers[o.customer], d.products[o.product]
	text := fmt.Sprintf("Order %s: %s (%s customer, %s region) ordered %d x %s (%s) at %s each on %s.",
		orderName(o.id), c.name, c.segment, c.region, o.quantity, p.name, p.category, o.unitPrice, o.date)
	on := orderName(o.id)
	return text, &extract.Result{
		Entities: []extract.Entity{
			ent(c.name, "Customer", fmt.Sprintf("%s customer in the %s region", c.segment, c.region),
				"customer_id", strconv.Itoa(c.id), "segment", c.segment, "region", c.region, "signup_date", c.signupDate),
			ent(p.name, "Product", fmt.Sprintf("%s product listed at %s", p.category, p.price),
				"product_id", strconv.Itoa(p.id), "category", p.category, "list_price", p.price),
			ent(on, "Order", fmt.Sprintf("Order of %d %s by %s", o.quantity, p.name, c.name),
				"order_id", strconv.Itoa(o.id), "order_date", o.date, "quantity", strconv.Itoa(o.quantity), "unit_price", o.unitPrice, "region", o.region),
		},
		Relations: []extract.Relation{
			rel(c.name, "PLACED", on, fmt.Sprintf("%s placed order %s", c.name, on)),
			rel(on, "CONTAINS", p.name, fmt.Sprintf("%s contains %d x %s", on, o.quantity, p.name)),
		},
		Usage: extract.Usage{Calls: 1},
	}
}
