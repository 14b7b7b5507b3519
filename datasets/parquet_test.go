package datasets_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// address is a nested struct with an optional field.
type address struct {
	City string  `parquet:"city"`
	Zip  *string `parquet:"zip,optional"`
}

// order is a row with every shape Describe must render: plain, optional,
// repeated, LIST, nested struct, optional struct, list of structs, map and
// logical types.
type order struct {
	ID      int64            `parquet:"id"`
	Name    *string          `parquet:"name,optional"`
	Tags    []string         `parquet:"tags"`
	Scores  []float64        `parquet:"scores,list"`
	Address address          `parquet:"address"`
	Billing *address         `parquet:"billing,optional"`
	Items   []address        `parquet:"items,list"`
	Attrs   map[string]int32 `parquet:"attrs"`
	When    time.Time        `parquet:"when,timestamp(millisecond)"`
}

// orderSummary is Summary's column list for order.
const orderSummary = "columns: id int64, name string (nullable), tags list<string>, scores list<double>, " +
	"address struct<city string, zip string (nullable)>, " +
	"billing struct<city string, zip string (nullable)> (nullable), " +
	"items list<struct<city string, zip string (nullable)>>, attrs map<string, int32>, when timestamp[ms, UTC]"

// orders returns n rows, nulls and lists of various lengths included.
func orders(n int) []order {
	rows := make([]order, n)
	for i := range rows {
		name, zip := fmt.Sprintf("customer %d", i), fmt.Sprintf("%05d", i)
		rows[i] = order{ID: int64(i), Tags: make([]string, i%3), Scores: []float64{float64(i)},
			Address: address{City: "Lyon"}, Items: []address{{City: "Oslo", Zip: &zip}},
			Attrs: map[string]int32{"n": int32(i)}, When: time.Unix(int64(i), 0).UTC()}
		if i%2 == 0 {
			rows[i].Name, rows[i].Billing = &name, &address{City: "Rome"}
		}
	}
	return rows
}

// parquetBytes returns n orders as a Parquet file with row groups of at
// most perGroup rows.
func parquetBytes(t testing.TB, n int, perGroup int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[order](&buf, parquet.MaxRowsPerRowGroup(perGroup))
	for _, r := range orders(n) {
		if _, err := w.Write([]order{r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeParquetDir writes files Parquet files of rows orders each, in row
// groups of perGroup rows, into dir.
func writeParquetDir(t testing.TB, dir string, files, rows, perGroup int) {
	t.Helper()
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("part-%03d.parquet", i))
		if err := parquet.WriteFile(p, orders(rows), parquet.MaxRowsPerRowGroup(int64(perGroup))); err != nil {
			t.Fatal(err)
		}
	}
}
